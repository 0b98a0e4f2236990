"""Grade an implement drill by what the compiler made of the answer: for Hopper, wgmma in the SASS and no spills.

A Hopper kernel (wgmma, TMA, setmaxnreg: ``sm_90a``) cannot run without a Hopper GPU: the CPU engine traps inline
PTX. What can be judged anywhere is the code the compiler builds from it. A drill with an ``inspect`` rule
(``{arch = "sm_90a", require = ["HGMMA"], shape = {M = 128, N = 256, K = 64}, dtype = "bfloat16"}``) calls the
learner's function once at ``shape`` with every CUDA C launch *recorded instead of run* (TMA tensor maps, which
need the driver, are faked as zero bytes when there is none), then compiles each recorded kernel for ``arch`` with
nvcc and ptxas (:func:`workbench.inspect`, no GPU involved) and requires:

- at least one launched kernel whose SASS holds every opcode in ``require`` (``HGMMA``: wgmma on 16-bit inputs;
  ``QGMMA`` for fp8; ``UTMALDG`` for TMA loads);
- no launched kernel that spills registers to local memory (``ptxas -v``: 0 bytes spill stores and loads): a
  wgmma accumulator that spills is re-read from local memory on every k step;
- kernels built with ``wb.cuda.RawKernel(..., arch="sm_90a")`` when ``arch`` is architecture-specific: NVRTC's
  default sm_90 target has no wgmma, so a GPU run would not compile otherwise.

Without a GPU that is the verdict, and the feedback says the values were not checked. On a GPU the same
inspection runs first and then the full checker (:class:`workbench.practice.implement.ImplementDrill`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from workbench.practice.base import DrillDataError, Grade

_RULE_KEYS = {"arch", "require", "shape", "dtype", "run"}
# What each required SASS opcode means, for the feedback.
OPCODE_MEANS = {"HGMMA": "wgmma on fp16/bf16 operands", "QGMMA": "wgmma on fp8 operands",
                "UTMALDG": "TMA bulk tensor loads (cp.async.bulk.tensor)", "HMMA": "mma.sync / wmma"}


@dataclass(frozen=True)
class InspectRule:
    """What the compiled code of an answer must show: the target, the SASS opcodes, where the function is called."""

    arch: str
    require: tuple[str, ...]
    shape: dict = field(default_factory=dict)
    dtype: str = "float32"
    run: bool = False  # True: the checker runs after the inspection in every mode (kernels the CPU engine can run)

    def text(self) -> str:
        """Return the statement's paragraph on how the drill is graded without a GPU."""
        need = ", ".join(f"`{op}` ({OPCODE_MEANS.get(op, 'as named')})" for op in self.require)
        at = ", ".join(f"{k}={v}" for k, v in self.shape.items())
        if self.run:
            return (f"\n\n**The compiler's check.** Before the checker runs, your function is called once at {at} "
                    f"({self.dtype}) with its launches recorded, and each launched kernel is compiled for "
                    f"`{self.arch}` (`wb.inspect`): a launched kernel's SASS must have {need}, and no launched kernel "
                    "may spill registers. A correct kernel that never reaches the tensor cores does not pass.")
        return (f"\n\n**Graded by the compiler where there is no GPU.** Your function is called once at {at} "
                f"({self.dtype}) with every CUDA C launch recorded instead of run; each launched kernel is compiled "
                f"for `{self.arch}` with nvcc and ptxas (`wb.inspect`). It passes when a launched kernel's SASS has "
                f"{need}, no launched kernel spills registers (0 bytes of spill stores and loads), and every kernel "
                f"is built with `wb.cuda.RawKernel(source, name, arch=\"{self.arch}\")`. The values are then not "
                "checked: on a GPU the same inspection runs first, then the full checker.")


def parse_rule(where: str, raw: Any) -> InspectRule:
    """Return the drill's :class:`InspectRule` from its ``inspect`` table; raise DrillDataError naming the drill."""
    from workbench.cuda import arch as _arch

    if not isinstance(raw, dict) or set(raw) - _RULE_KEYS or not {"arch", "require", "shape"} <= set(raw):
        raise DrillDataError(f"{where}: 'inspect' is a table with 'arch', 'require', 'shape', optional 'dtype' and "
                             "'run' "
                             f"(got keys {sorted(raw) if isinstance(raw, dict) else type(raw).__name__})")
    try:
        _arch.get(raw["arch"])
    except Exception as e:  # noqa: BLE001  (the arch table's own error names the known targets)
        raise DrillDataError(f"{where}: inspect.arch {raw['arch']!r}: {e}") from None
    req = raw["require"]
    if not isinstance(req, list) or not req or not all(isinstance(r, str) and r.isupper() for r in req):
        raise DrillDataError(f"{where}: inspect.require lists SASS opcodes in capitals, e.g. ['HGMMA'], got {req!r}")
    shape = raw["shape"]
    if not isinstance(shape, dict) or not all(isinstance(v, (int, bool)) for v in shape.values()):
        raise DrillDataError(f"{where}: inspect.shape maps the op's size keys to integers, got {shape!r}")
    if not isinstance(raw.get("run", False), bool):
        raise DrillDataError(f"{where}: inspect.run is true (the checker runs too, in every mode) or false")
    return InspectRule(raw["arch"], tuple(req), dict(shape), str(raw.get("dtype", "float32")), raw.get("run", False))


@dataclass
class Launched:
    """One recorded CUDA C launch: the kernel object, its name, and the arch it was built for (None: NVRTC's)."""

    kernel: Any
    name: str
    arch: str | None
    grid: Any
    block: Any

    def spec(self) -> dict:
        """Return the ``wb.inspect`` spec of the kernel as it would be built."""
        src = self.kernel.source if hasattr(self.kernel, "source") else self.kernel._module.source
        opts = tuple(getattr(self.kernel, "options", None) or getattr(self.kernel._module, "options", ()))
        return {"kind": "cuda", "code": src.path or src.text, "name": self.name, "options": opts}


@contextlib.contextmanager
def recording() -> Iterator[list[Launched]]:
    """Record the CUDA C launches made inside the block instead of running them; yields the list of them.

    Outside a GPU, TMA tensor maps are made as 128 zero bytes (encoding one needs the driver, and no recorded
    kernel reads it).
    """
    from workbench import MODE
    from workbench.cuda import Function, RawKernel, tma

    seen: list[Launched] = []
    saved = [(RawKernel, RawKernel.__dict__["__call__"]), (Function, Function.__dict__["__call__"])]

    def record(self: Any, grid: Any, block: Any, args: Any, **_: Any) -> None:
        seen.append(Launched(self, self.name, getattr(self, "arch", None), grid, block))

    encode = tma.encode_tiled_2d
    before = set(tma._device_maps)
    for cls, _ in saved:
        cls.__call__ = record
    if MODE != "gpu":
        tma.encode_tiled_2d = lambda args, ptr: bytes(tma.MAP_BYTES)
    try:
        yield seen
    finally:
        for cls, orig in saved:
            cls.__call__ = orig
        tma.encode_tiled_2d = encode
        for key in set(tma._device_maps) - before:  # fake maps never outlive the recording
            tma._device_maps.pop(key, None)


def launched_kernels(fn: Callable, op: str, rule: InspectRule, backend: str, seen: list[Launched]) -> Any:
    """Call ``fn`` once at the rule's shape under the drill's backend rule, its launches recorded into ``seen``."""
    import workbench as wb
    from workbench.practice.implement import BackendGuard, count_launches

    spec = wb.get_op(op)
    sizes, kw = spec.split(dict(rule.shape))
    inputs = wb.make_inputs(op, dtype=rule.dtype, seed=0, **rule.shape)
    guarded = BackendGuard(fn, backend)
    with recording() as recorded, count_launches(backend, guarded.seen):
        try:
            return guarded(*inputs, **kw)
        finally:
            seen.extend(recorded)


def _compile_all(seen: list[Launched], arch: str) -> tuple[list[tuple[Launched, Any]], str | None]:
    """Return (launch, inspection) per distinct kernel, or the first compile failure as feedback."""
    import workbench as wb
    from workbench.cuda.errors import CompileError

    out, done = [], set()
    for launch in seen:
        spec = launch.spec()
        key = (str(spec["code"])[:200], spec["name"], spec["options"])
        if key in done:
            continue
        done.add(key)
        try:
            out.append((launch, wb.inspect(spec, arch=arch)))
        except CompileError as e:
            return out, f"kernel `{launch.name}` does not compile for {arch}:\n\n```\n{str(e)[-1500:]}\n```"
    return out, None


def _verdict(rule: InspectRule, built: list[tuple[Launched, Any]]) -> tuple[bool, str]:
    """Return (passed, feedback) for the compiled kernels of one answer."""
    specific = rule.arch.endswith("a")
    lines = [f"- `{ln.name}`: {r.registers} registers/thread, {r.spill_stores} B spill stores, {r.spill_loads} B "
             f"spill loads; SASS: " + ", ".join(f"{op} x{r.instruction_mix.get(op, r.opcodes.get(op, 0))}"
                                                for op in (*rule.require, "HMMA", "FFMA")) for ln, r in built]
    table = "\n".join(lines)
    unbuilt = [ln.name for ln, _ in built if specific and ln.arch != rule.arch]
    if unbuilt:
        return False, (f"Not yet: {', '.join(f'`{n}`' for n in unbuilt)} is built without `arch=\"{rule.arch}\"`. "
                       f"NVRTC compiles for the generic sm_90, which has no wgmma or setmaxnreg: on a GPU it would "
                       f"not compile. Build it with `wb.cuda.RawKernel(source, name, arch=\"{rule.arch}\")`.\n\n"
                       f"{table}")
    spills = [(ln.name, r) for ln, r in built if r.spill_stores or r.spill_loads]
    if spills:
        name, r = spills[0]
        return False, (f"Not yet: `{name}` spills registers to local memory ({r.spill_stores} B stores, "
                       f"{r.spill_loads} B loads at {r.registers} registers/thread): accumulators or fragments that "
                       "do not fit the registers are re-read from local memory on every k step. Use fewer "
                       "accumulators per thread (a smaller tile per warpgroup) or give the consumers more registers "
                       f"(setmaxnreg).\n\n{table}")
    hits = [ln.name for ln, r in built if all(_count(r, op) for op in rule.require)]
    if not hits:
        found = [f"{OPCODE_MEANS[op]} ({op})" for op in ("HGMMA", "QGMMA", "HMMA")
                 if any(_count(r, op) for _, r in built)]
        need = ", ".join(f"{op} ({OPCODE_MEANS.get(op, op)})" for op in rule.require)
        how = ("A Hopper GEMM multiplies with `wgmma.mma_async` (a warpgroup of 128 threads, operands described in "
               "shared memory)." if {"HGMMA", "QGMMA"} & set(rule.require) else
               "Tensor-core multiplies come from `nvcuda::wmma::mma_sync` or `mma.sync` PTX; FFMA is the CUDA cores.")
        return False, (f"Not yet: no launched kernel issues {need}: the SASS for {rule.arch} shows "
                       f"{', '.join(found) or 'no tensor-core instruction'}. {how}\n\n{table}")
    return True, table


def _count(r: Any, op: str) -> int:
    return int(r.instruction_mix.get(op) or sum(n for k, n in r.opcodes.items() if k.split(".")[0] == op))


def grade_by_inspection(drill: Any, fn: Callable) -> Grade:
    """Return the inspection verdict of ``fn`` for ``drill`` (its ``inspect`` rule): see the module docstring."""
    from workbench import MODE
    from workbench.checker import BackendWorkError
    from workbench.cuda.errors import ToolchainNotFoundError

    rule: InspectRule = drill.inspect
    name = getattr(fn, "__name__", "fn")
    seen: list[Launched] = []
    try:
        launched_kernels(fn, drill.op, rule, drill.backend, seen)
    except BackendWorkError as e:  # torch computed, or an output no launch was given (said below if none ran)
        if seen or "not a buffer" not in str(e):
            return Grade(False, f"Not yet: {e}", f"{name}: outside_backend")
    except Exception as e:  # noqa: BLE001  (the learner's function failed before launching: say how)
        return Grade(False, f"Not yet: called at {rule.shape} ({rule.dtype}) your function raised "
                            f"{type(e).__name__}: {e}", f"{name}: {type(e).__name__}")
    if not seen:
        return Grade(False, "Not yet: your function launched no CUDA C kernel (wb.cuda.RawKernel / RawModule): this "
                            "drill is about writing one.", f"{name}: no launch")
    try:
        built, failure = _compile_all(seen, rule.arch)
    except ToolchainNotFoundError as e:
        return Grade(False, f"Cannot grade here: this drill compiles your kernel with nvcc and ptxas, and {e}",
                     f"{name}: no toolchain")
    if failure:
        return Grade(False, f"Not yet: {failure}", f"{name}: compile error")
    ok, text = _verdict(rule, built)
    summary = f"{name}: {len(seen)} launches, inspected for {rule.arch}"
    if not ok:
        return Grade(False, text + "\n\nStuck? `d.hint()`.", summary + ", rejected", {"inspected": built})
    if MODE == "gpu" or rule.run:
        return Grade(True, f"Compiled for {rule.arch}: {', '.join(rule.require)} present, no spills.\n\n{text}",
                     summary, {"inspected": built})
    return Grade(True, f"Passes the compiler's check for {rule.arch} (no GPU here, so the values were not checked; on "
                       "a GPU this drill also runs the full checker):\n\n" + text + "\n\nCompare with the model "
                       "answer: d.reveal().", summary, {"inspected": built})
