"""Inspect GPU kernels without a GPU: PTX, SASS, registers, shared memory, spills, instruction mix, occupancy.

``inspect(kernel)`` accepts a ``workbench.cuda.RawKernel``, a ``(path_or_code, name)`` pair, a Triton
``@triton.jit`` function (with ``signature=``/``constexprs=``), a spec dict, or any object with an
``inspect_spec()`` method returning such a dict (the kernel registry's variants):

* ``{"kind": "cuda", "code": path_or_source, "name": kernel_name, "options": (...)}``
* ``{"kind": "triton", "fn": jit_fn, "signature": {...}, "constexprs": {...}, "num_warps": 4, "num_stages": 3}``
  (optionally ``"args": {...}``, one launch's argument values: Triton specialises on which are multiples of 16)
* ``{"kind": "cute", "name": ..., "compile": fn(arch) -> compiled, "threads_per_block": n, "dynamic_smem": bytes}``
  (a CuTe DSL kernel, ``kernels/_cute.py``'s ``cute_spec``: ``cute.compile`` on fake tensors keeps PTX and cubin)

CUDA C goes through nvcc (PTX) and ptxas (cubin, ``-v`` resource report); Triton through
``triton.compile(..., target=GPUTarget("cuda", cc, 32))``. SASS comes from cuobjdump. Nothing needs a GPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import os
import re
import tempfile
import types
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.cuda import arch as _arch
from workbench.cuda.errors import CompileError
from workbench.cuda.toolchain import cache_dir, find_cuda_tool, nvcc_cache_key, nvcc_options, run_tool

__all__ = ["inspect", "occupancy", "occupancy_widget", "KernelInspection", "find_cuda_tool"]

OCCUPANCY_ARCHS = ("sm_80", "sm_90")


# ----------------------------------------------------------------------------------------------- result
@dataclass
class KernelInspection:
    """What the compiler made of one kernel for one architecture (no GPU involved)."""

    kind: str  # "cuda" or "triton"
    name: str
    arch: str
    symbol: str  # the (possibly mangled) entry name in the cubin
    registers: int
    shared_static: int  # bytes of static shared memory (Triton: the shared memory it allocates)
    stack: int  # bytes of stack frame
    spill_stores: int
    spill_loads: int
    barriers: int
    threads_per_block: int
    instruction_mix: dict[str, int]
    opcodes: dict[str, int]
    occupancy: dict[str, dict]
    ptx: str = field(repr=False)
    sass: str = field(repr=False)
    ttgir: str | None = field(default=None, repr=False)
    ptxas_log: str = field(default="", repr=False)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Return the headline figures as a flat dict."""
        s = {"kernel": self.name, "kind": self.kind, "arch": self.arch, "registers/thread": self.registers,
             "shared memory (static)": self.shared_static, "stack (bytes)": self.stack,
             "spill stores": self.spill_stores, "spill loads": self.spill_loads, "barriers": self.barriers,
             "threads/block (for occupancy)": self.threads_per_block}
        s.update({f"# {k}": v for k, v in self.instruction_mix.items()})
        for a, o in self.occupancy.items():
            s[f"occupancy {a}"] = (f"{o['blocks_per_sm']} blocks/SM, {o['active_warps_per_sm']}/"
                                   f"{o['max_warps_per_sm']} warps ({o['occupancy']:.0%}), limited by "
                                   f"{', '.join(o['limited_by'])}")
        return s

    def to_dict(self) -> dict[str, Any]:
        """Return every field (PTX/SASS text included) as a plain dict."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def __str__(self) -> str:
        rows = self.summary()
        w = max(len(k) for k in rows)
        lines = [f"{k.ljust(w)}  {v}" for k, v in rows.items()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                       f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
                       for k, v in self.summary().items())
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<div><b>{html.escape(self.kind)} kernel {html.escape(self.name)} on {html.escape(self.arch)}</b>"
                f"<table>{rows}</table>{'<ul>' + notes + '</ul>' if notes else ''}"
                "<small>raw text: <code>.ptx</code>, <code>.sass</code>"
                f"{', <code>.ttgir</code>' if self.ttgir else ''}</small></div>")


# ----------------------------------------------------------------------------------------------- parsing
_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PTXAS_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")


def parse_ptxas(log: str) -> dict[str, dict[str, int]]:
    """Return {entry: {registers, barriers, smem, stack, spill_stores, spill_loads}} from ``ptxas -v`` output."""
    out: dict[str, dict[str, int]] = {}
    cur = None
    for line in log.splitlines():
        m = _PTXAS_FUNC.search(line)
        if m:
            cur = out.setdefault(m.group(1), {"registers": 0, "barriers": 0, "smem": 0, "stack": 0,
                                              "spill_stores": 0, "spill_loads": 0})
            continue
        if cur is None:
            continue
        m = _PTXAS_PROPS.search(line)
        if m:
            cur.update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = _PTXAS_USED.search(line)
        if m:
            cur.update(registers=int(m.group(1)), barriers=int(m.group(2) or 0), smem=int(m.group(3) or 0))
    return out


_SASS_FUNC = re.compile(r"^\s*Function : (\S+)", re.M)
_SASS_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


def split_sass(sass: str) -> dict[str, str]:
    """Return {function: its SASS text} from ``cuobjdump -sass`` output."""
    parts = _SASS_FUNC.split(sass)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def instruction_mix(sass: str) -> tuple[dict[str, int], dict[str, int]]:
    """Return (summary counts, full opcode histogram) of a function's SASS."""
    ops = Counter(m.group(1) for m in _SASS_INSTR.finditer(sass))
    base = Counter()
    for op, n in ops.items():
        base[op.split(".")[0]] += n

    def width(op: str) -> int:
        mods = op.split(".")[1:]
        for w in (128, 64):
            if str(w) in mods:
                return w
        return 32

    ldg = Counter()
    for op, n in ops.items():
        if op.split(".")[0] == "LDG":
            ldg[width(op)] += n
    mix = {
        "FFMA": base["FFMA"] + base["FFMA2"],
        "FMUL/FADD": base["FMUL"] + base["FADD"],
        "HMMA": base["HMMA"],
        "HGMMA": base["HGMMA"],
        "QGMMA (fp8)": base["QGMMA"],
        "IMMA": base["IMMA"],
        "LDG.32": ldg[32],
        "LDG.64": ldg[64],
        "LDG.128": ldg[128],
        "STG": base["STG"],
        "LDGSTS (cp.async)": base["LDGSTS"],
        "UTMALDG (TMA)": base["UTMALDG"],
        "LDS": base["LDS"],
        "LDSM (ldmatrix)": base["LDSM"],
        "STS": base["STS"],
        "BAR": base["BAR"],
        "SHFL": base["SHFL"],
        "MUFU": base["MUFU"],
        "total": sum(ops.values()),
    }
    return mix, dict(sorted(ops.items(), key=lambda kv: -kv[1]))


def _pick_symbol(names: list[str], want: str) -> str:
    if want in names:
        return want
    base = want.split("<")[0].strip()
    cands = [n for n in names if n == base or n.startswith(f"_Z{len(base)}{base}")]
    if len(cands) >= 1:
        return cands[0]
    if len(names) == 1:
        return names[0]
    raise CompileError(f"kernel {want!r} not found in the compiled module (entries: {', '.join(names)})")


# ----------------------------------------------------------------------------------------------- CUDA C
def _spec_of(obj: Any, name: str | None, options: tuple, kw: dict) -> dict:
    if isinstance(obj, dict):
        return {**obj, **kw}
    if hasattr(obj, "inspect_spec") and callable(obj.inspect_spec):  # keywords (args=, num_stages=) override
        return {**obj.inspect_spec(), **kw}
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], str):
        return {"kind": "cuda", "code": obj[0], "name": obj[1], "options": options}
    if hasattr(obj, "source") and hasattr(obj, "name") and hasattr(obj, "options"):  # workbench RawKernel
        src = obj.source
        spec = {"kind": "cuda", "code": src.path or src.text, "name": obj.name, "options": tuple(obj.options)}
        if getattr(obj, "arch", None):  # RawKernel(..., arch="sm_90a"): inspect what a GPU run would build
            spec["arch"] = obj.arch
        return spec
    mod = type(obj).__module__
    if mod.startswith("triton") or hasattr(obj, "arg_names") or hasattr(obj, "fn"):
        spec = {"kind": "triton", "fn": obj}
        spec.update(kw)
        return spec
    if isinstance(obj, (str, os.PathLike)) and name:
        return {"kind": "cuda", "code": obj, "name": name, "options": options}
    raise TypeError(f"inspect: cannot inspect {type(obj).__name__}: pass a workbench.cuda.RawKernel, a "
                    "(path_or_code, kernel_name) pair, a Triton @jit function with signature=, or an object "
                    "with inspect_spec()")


def _cache_file(src_text: str, src_path: str | None, name: str, options: tuple, arch: str, nvcc: str) -> Path:
    """Return the on-disk cache entry for one nvcc -> ptxas -> cuobjdump run (keyed by every input to it)."""
    key = nvcc_cache_key(src_text, src_path, nvcc, name, repr(options), arch)
    return cache_dir("inspect") / f"{key}.json"


def _cuda_compile(code: str, name: str, options: tuple, arch: str, want_sass: bool = True) -> tuple[str, str, str]:
    """Return (ptx, ptxas -v log, sass) of ``code`` for ``arch`` (cached on disk beside the engine's cache).

    ``want_sass=False`` (another architecture's occupancy): cuobjdump is not run, and sass is "" unless cached.
    """
    import json

    from workbench.cuda._source import load_source

    nvcc = find_cuda_tool("nvcc")
    src = load_source(code)
    entry = _cache_file(src.text, src.path, name, options, arch, nvcc)
    try:
        hit = json.loads(entry.read_text())
        if hit["sass"] is not None or not want_sass:
            return hit["ptx"], hit["log"], hit["sass"] or ""
    except (OSError, ValueError, KeyError):
        pass
    ptx, log, sass = _cuda_compile_uncached(src, name, options, arch, nvcc, want_sass)
    _store(entry, json.dumps({"ptx": ptx, "log": log, "sass": sass}))
    return ptx, log, sass or ""


def _store(entry: Path, text: str) -> None:
    """Write a cache entry atomically (parallel test workers never read half a file); a failed write is skipped."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, entry)
    except OSError:
        pass


def _cuda_compile_uncached(src: Any, name: str, options: tuple, arch: str, nvcc: str,
                           want_sass: bool = True) -> tuple[str, str, str | None]:
    ptxas = find_cuda_tool("ptxas")
    cuobjdump = find_cuda_tool("cuobjdump")
    with tempfile.TemporaryDirectory(prefix="wb-inspect-") as td:
        main = Path(td) / "kernel.cu"
        inc = f'#include "{src.path}"\n' if src.path else src.text + "\n"
        if "<" in name:  # template instantiation, as NVRTC name expressions do
            inc += f"static void* __wb_inspect_instance __attribute__((unused)) = (void*)&{name};\n"
        main.write_text(inc)
        ptx = Path(td) / "kernel.ptx"
        cmd = [nvcc, f"-arch={arch}", "-ptx", "-o", str(ptx), *nvcc_options(options), str(main)]
        if src.path:
            cmd.insert(1, f"-I{os.path.dirname(src.path)}")
        r = run_tool(cmd, "nvcc")
        if r.returncode != 0:
            raise CompileError(f"nvcc failed to compile {src.display_name} for {arch}:\n{r.stderr[-4000:]}",
                               r.stderr, src.path)
        cubin = Path(td) / "kernel.cubin"
        r2 = run_tool([ptxas, f"-arch={arch}", "-v", str(ptx), "-o", str(cubin)], "ptxas")
        if r2.returncode != 0:
            raise CompileError(f"ptxas failed for {src.display_name} ({arch}):\n{r2.stderr[-4000:]}", r2.stderr)
        sass = run_tool([cuobjdump, "-sass", str(cubin)], "cuobjdump").stdout if want_sass else None
        return ptx.read_text(), r2.stdout + r2.stderr, sass


def _ptx_target(ptx: str) -> str:
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    return m.group(1) if m else "sm_90"


@contextlib.contextmanager
def _jit_stdlib(kernel: Any = None, extra: Sequence[Any] = ()) -> Iterator[None]:
    """Compile mode for the @jit helpers a kernel calls (tl.max, tl.sum, its own module's) while TRITON_INTERPRET=1.

    Under the interpreter those helpers were decorated as InterpretedFunctions, which the compiler cannot call;
    swap in JITFunctions of the same Python functions for the duration of one compile: triton.language's, and the
    ones in the globals of ``kernel`` (a Python function) and, in turn, of each helper swapped, and the ones of the
    modules those globals hold (a helper called as ``mod.helper(...)``); ``extra``: more Python functions whose
    globals are searched the same way (@jit functions passed to the kernel as arguments).
    """
    import sys

    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    swapped: list[tuple[dict, str, Any]] = []
    # (namespace, whether modules found in it are searched too): a kernel may call a helper as `mod.helper(...)`
    spaces = [(vars(mod), False) for name, mod in list(sys.modules.items())
              if name.startswith("triton.language") and mod is not None]
    spaces += [(f.__globals__, True) for f in ([kernel] if kernel is not None else []) + list(extra)]
    seen: set[int] = set()
    while spaces:
        ns, into_modules = spaces.pop()
        if id(ns) in seen:
            continue
        seen.add(id(ns))
        for attr, val in list(ns.items()):
            if isinstance(val, InterpretedFunction):
                swapped.append((ns, attr, val))
                ns[attr] = _jit_of(val, JITFunction)
                spaces.append((val.fn.__globals__, True))
            elif into_modules and isinstance(val, types.ModuleType) and not val.__name__.startswith("triton"):
                spaces.append((vars(val), False))
    try:
        yield
    finally:
        for ns, attr, val in reversed(swapped):
            ns[attr] = val


_JIT_OF: dict[int, tuple[Any, Any]] = {}  # id(InterpretedFunction) -> (it, its JITFunction)


def _jit_of(interpreted: Any, jit_function: type) -> Any:
    """Return the JITFunction of an interpreted helper, made once per helper (it reads the source: ~5 ms).

    A user's helper may call helpers that were redefined since (a notebook cell run again): its cached cache key
    is cleared on every use, as Triton's ``_unsafe_update_src`` does for callers, so the key sees them as they are
    now. A redefined helper is a new function, so a new InterpretedFunction with a JITFunction of its own.
    """
    hit = _JIT_OF.get(id(interpreted))
    if hit is None or hit[0] is not interpreted:
        hit = _JIT_OF[id(interpreted)] = (interpreted, jit_function(interpreted.fn))
    elif not str(getattr(interpreted.fn, "__module__", "")).startswith("triton."):
        hit[1].hash = None  # Triton's own helpers never change
    return hit[1]


_INT = re.compile(r"^[iu](8|16|32|64)$")


def divisible_by_16(spec: dict) -> list[str]:
    """Return the Triton arguments a launch specialises as multiples of 16 (``tt.divisibility=16``).

    A real launch does this per call: a pointer whose address is a multiple of 16 (every torch allocation) and an
    integer whose value is a multiple of 16 get the hint, which lets Triton vectorise loads, drop mask checks
    and pipeline its K loop; without it a GEMM compiles to a different, unpipelined kernel. So:

    * ``spec["divisible_by_16"]`` names the arguments outright;
    * else ``spec["args"]`` gives one launch's values (``{"M": 4096, "K": 4100}``; a tensor for a pointer counts
      by its ``data_ptr()``); arguments left out count as divisible;
    * else the launch is taken at 16-multiple sizes (``M = N = K = 4096``): every pointer and every integer.
    """
    if spec.get("divisible_by_16") is not None:
        return list(spec["divisible_by_16"])
    args = dict(spec.get("args") or {})
    out = []
    for k, ty in (spec.get("signature") or {}).items():
        ty = str(ty)
        if not (ty.startswith("*") or _INT.match(ty)):
            continue  # constexprs and floats carry no divisibility
        v = args.get(k)
        if hasattr(v, "data_ptr"):
            v = v.data_ptr()
        if v is None or (isinstance(v, int) and v % 16 == 0):
            out.append(k)
    return out


def _triton_compile(spec: dict, arch: str, want_sass: bool = True) -> tuple[str, str, str, str, int, str]:
    """Return (ptx, ptxas log, sass, ttgir, shared bytes, entry name) of a Triton kernel for ``arch``.

    ``want_sass=False`` (another architecture's occupancy, which needs only the ptxas figures): sass is "".
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    fn = spec["fn"]
    if not isinstance(fn, JITFunction):  # TRITON_INTERPRET=1 (cpu mode) gives an InterpretedFunction
        inner = getattr(fn, "fn", None)
        if inner is None:
            raise TypeError(f"inspect: {fn!r} is not a Triton @triton.jit function")
        fn = JITFunction(inner)
    if "signature" not in spec:
        raise TypeError("inspect: a Triton kernel needs signature={'x_ptr': '*fp32', 'n': 'i32', 'BLOCK': "
                        "'constexpr', ...} (and constexprs={...})")
    constexprs = dict(spec.get("constexprs") or {})
    sig = dict(spec["signature"])
    for k in constexprs:
        sig.setdefault(k, "constexpr")
    cc = _arch.get(arch).compute_capability
    target = GPUTarget("cuda", cc[0] * 10 + cc[1], 32)
    opts = {"num_warps": int(spec.get("num_warps", 4)), "num_stages": int(spec.get("num_stages", 3))}
    attrs = spec.get("attrs") or {(fn.arg_names.index(k),): [["tt.divisibility", 16]]
                                  for k in divisible_by_16(spec)}
    try:
        with _jit_stdlib(fn.fn):
            k = triton.compile(ASTSource(fn, sig, constexprs, attrs), target=target, options=opts)
    except Exception as e:
        raise CompileError(f"triton.compile of {fn.__name__} for {arch} failed: {e}", str(e)) from e
    ptx = k.asm["ptx"]
    log = ptxas_log(ptx)
    sass = cubin_sass(k.asm["cubin"]) if want_sass else ""
    return ptx, log, sass, k.asm.get("ttgir", ""), int(k.metadata.shared), k.metadata.name


def _cute_compile(spec: dict, arch: str, want_sass: bool = True) -> tuple[str, str, str, str, dict[str, int]]:
    """Return (ptx, ptxas log, sass, entry, its ptxas figures) of a CuTe DSL kernel: ``spec["compile"](arch)``.

    ``want_sass=False``: sass is "" (see :func:`_triton_compile`).
    """
    try:
        fn = spec["compile"](arch)
    except Exception as e:
        raise CompileError(f"cute.compile of {spec.get('name', '?')} for {arch} failed: {e}", str(e)) from e
    ptx, cubin = fn.__ptx__, fn.__cubin__
    if not ptx or not cubin:
        raise CompileError(f"cute.compile of {spec.get('name', '?')} kept no PTX/cubin: compile it with "
                           "kernels._cute.compile_with_artifacts")
    log = ptxas_log(ptx)
    res = parse_ptxas(log)
    symbol = next(iter(res)) if len(res) == 1 else _pick_symbol(list(res), str(spec.get("entry", "kernel")))
    return ptx, log, cubin_sass(cubin) if want_sass else "", symbol, res[symbol]


def _tool_cached(tool: str, data: bytes, run: Any) -> str:
    """Return ``run(path of the tool)``'s text for ``data``, cached on disk by the tool and a hash of ``data``.

    Test workers, notebook kernels and the browser's kernel inspect the same kernels: each result is computed once.
    """
    exe = find_cuda_tool(tool)
    key = hashlib.sha256(b"\0".join([exe.encode(), str(os.path.getmtime(exe)).encode(), data])).hexdigest()[:32]
    entry = cache_dir("inspect") / f"{tool}-{key}.txt"
    try:
        return entry.read_text()
    except OSError:
        pass
    text = run(exe)
    _store(entry, text)
    return text


def ptxas_log(ptx: str) -> str:
    """Return ``ptxas -v``'s resource report of ``ptx`` (for its own ``.target``): parse it with :func:`parse_ptxas`."""

    def run(ptxas: str) -> str:
        with tempfile.TemporaryDirectory(prefix="wb-inspect-") as td:
            pf = Path(td) / "k.ptx"
            pf.write_text(ptx)
            r = run_tool([ptxas, f"-arch={_ptx_target(ptx)}", "-v", str(pf), "-o", str(Path(td) / "v.cubin")],
                         "ptxas")
        return r.stdout + r.stderr

    return _tool_cached("ptxas", ptx.encode(), run)


def cubin_sass(cubin: bytes) -> str:
    """Return ``cuobjdump -sass`` of ``cubin``: split it with :func:`split_sass`."""

    def run(cuobjdump: str) -> str:
        with tempfile.TemporaryDirectory(prefix="wb-inspect-") as td:
            cub = Path(td) / "k.cubin"
            cub.write_bytes(cubin)
            return run_tool([cuobjdump, "-sass", str(cub)], "cuobjdump").stdout

    return _tool_cached("cuobjdump", cubin, run)


def _maxntid(ptx: str, symbol: str) -> int | None:
    m = re.search(r"\.entry\s+" + re.escape(symbol) + r"\s*\([^)]*\)\s*([^{]*)\{", ptx, re.S)
    if m:
        t = re.search(r"\.maxntid\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?", m.group(1))
        if t:
            return int(t.group(1)) * int(t.group(2) or 1) * int(t.group(3) or 1)
    return None


_cache: dict[str, KernelInspection] = {}


def _inspect_uncached(spec: dict, arch: str, threads_per_block: int | None, dynamic_smem: int,
                      occupancy_archs: tuple[str, ...]) -> KernelInspection:
    notes: list[str] = []
    kind = spec.get("kind", "cuda")
    ttgir = None
    if kind == "cuda":
        name = spec["name"]
        options = tuple(spec.get("options") or ())
        ptx, log, sass = _cuda_compile(spec["code"], name, options, arch)
        res = parse_ptxas(log)
        symbol = _pick_symbol(list(res), name)
        r = res[symbol]
        smem = r["smem"]
        tpb = threads_per_block or _maxntid(ptx, symbol)
        if tpb is None:
            tpb = 256
            notes.append("threads/block unknown (no __launch_bounds__): occupancy assumes 256; pass "
                         "threads_per_block=")
    elif kind == "triton":
        ptx, log, sass, ttgir, shared, symbol = _triton_compile(spec, arch)
        res = parse_ptxas(log)
        r = res.get(symbol) or (next(iter(res.values())) if res else {"registers": 0, "barriers": 0, "smem": 0,
                                                                         "stack": 0, "spill_stores": 0,
                                                                         "spill_loads": 0})
        smem = max(shared, r["smem"])
        name = spec["fn"].__name__ if hasattr(spec["fn"], "__name__") else symbol
        tpb = threads_per_block or int(spec.get("num_warps", 4)) * 32
        ints = [k for k in divisible_by_16(spec) if not str(spec["signature"][k]).startswith("*")]
        if spec.get("divisible_by_16") is None and spec.get("args") is None and ints:
            notes.append(f"compiled as a launch with {', '.join(ints)} multiples of 16 and 16-byte-aligned "
                         "pointers (Triton specialises on both); pass args={...} for another launch")
    elif kind == "cute":
        ptx, log, sass, symbol, r = _cute_compile(spec, arch)
        smem, name = r["smem"], spec["name"]
        tpb = threads_per_block or int(spec["threads_per_block"])
        dynamic_smem = dynamic_smem or int(spec.get("dynamic_smem") or 0)
        if dynamic_smem:
            notes.append(f"CuTe kernels take their shared memory dynamically: {dynamic_smem:,} bytes per block at "
                         "launch (ptxas reports only the static part); the occupancy counts them")
    else:
        raise ValueError(f"inspect: unknown kernel kind {kind!r} (expected 'cuda', 'triton' or 'cute')")
    funcs = split_sass(sass)
    fsass = funcs.get(symbol) or (next(iter(funcs.values())) if funcs else sass)
    mix, ops = instruction_mix(fsass)
    occ: dict[str, dict] = {}
    own = _arch.get(arch).name
    specific = arch.endswith("a")  # sm_90a: wgmma, setmaxnreg; such a cubin loads on that arch and no other
    if specific:
        notes.append(f"built for {arch}, an architecture-specific target: it runs on {own} GPUs only, so the "
                     f"occupancy is given for {own} alone")
    for a in dict.fromkeys((own,) if specific else (*occupancy_archs, own)):
        regs, sm = r["registers"], smem
        if a != own:
            try:
                if kind == "cuda":
                    _, log2, _ = _cuda_compile(spec["code"], spec["name"], tuple(spec.get("options") or ()), a,
                                               want_sass=False)
                    r2 = parse_ptxas(log2)[_pick_symbol(list(parse_ptxas(log2)), spec["name"])]
                    regs, sm = r2["registers"], r2["smem"]
                elif kind == "cute":
                    r2 = _cute_compile(spec, a, want_sass=False)[4]
                    regs, sm = r2["registers"], r2["smem"]
                else:
                    _, log2, _, _, sh2, sym2 = _triton_compile(spec, a, want_sass=False)
                    p2 = parse_ptxas(log2)
                    r2 = p2.get(sym2) or next(iter(p2.values()))
                    regs, sm = r2["registers"], max(sh2, r2["smem"])
            except Exception as e:  # e.g. sm_90-only instructions: fall back to this arch's figures
                notes.append(f"could not compile for {a} ({str(e).splitlines()[0][:120]}); its occupancy uses "
                             f"the {arch} register/shared-memory figures")
        occ[a] = _arch.occupancy(tpb, regs, sm + dynamic_smem, a)
    return KernelInspection(kind=kind, name=name, arch=_arch.get(arch).name if not arch.endswith("a") else arch,
                            symbol=symbol, registers=r["registers"], shared_static=smem, stack=r["stack"],
                            spill_stores=r["spill_stores"], spill_loads=r["spill_loads"], barriers=r["barriers"],
                            threads_per_block=tpb, instruction_mix=mix, opcodes=ops, occupancy=occ, ptx=ptx,
                            sass=fsass, ttgir=ttgir, ptxas_log=log, notes=notes)


def inspect(kernel_or_variant: Any, arch: str = "sm_90", *, name: str | None = None, options: tuple = (),
            threads_per_block: int | None = None, dynamic_smem: int = 0,
            occupancy_archs: tuple[str, ...] = OCCUPANCY_ARCHS, **triton_spec: Any) -> KernelInspection:
    """Compile a kernel for ``arch`` without a GPU and report its resources, instruction mix and occupancy.

    ``kernel_or_variant``: a ``workbench.cuda.RawKernel``; ``(path_or_code, name)``; a path/code with ``name=``;
    a Triton ``@triton.jit`` function with ``signature=``, ``constexprs=``, ``num_warps=``, ``num_stages=``;
    a spec dict; or an object with ``inspect_spec()`` (keywords such as ``args={"K": 4100}``, one launch's argument
    values, override its spec: Triton specialises on which are multiples of 16, see :func:`divisible_by_16`).
    ``threads_per_block`` and ``dynamic_smem`` feed the
    occupancy figures (CUDA C defaults to the kernel's ``__launch_bounds__``, Triton to ``num_warps * 32``).
    ``occupancy_archs``: the architectures whose occupancy is given besides ``arch``'s own (each one compiles the
    kernel again; ``()`` for ``arch`` alone).
    A spec's ``"arch": "sm_90a"`` replaces a requested ``sm_90``. Raises ToolchainNotFoundError (saying what to
    install) when nvcc/ptxas are missing.
    """
    spec = _spec_of(kernel_or_variant, name, tuple(options), triton_spec)
    _arch.get(arch)  # validate early
    need = spec.get("arch")  # a kernel built for an architecture-specific target (sm_90a: wgmma, setmaxnreg)
    if need and _arch.get(need).name == _arch.get(arch).name:
        arch = need
    if spec.get("kind", "cuda") == "cuda":
        from workbench.cuda._source import load_source

        src = load_source(spec["code"])
        ident = f"{src.path}|{src.text}|{spec.get('name')}|{tuple(spec.get('options') or ())}"
    elif spec.get("kind") == "cute":  # the variant's name and its compile function's identity
        ident = f"cute|{spec.get('name')}|{spec.get('key', spec.get('name'))}"
    else:  # everything that changes the compiled kernel, the divisibility hints included
        attrs = spec.get("attrs")
        ident = (f"{id(spec.get('fn'))}|{sorted((spec.get('signature') or {}).items())}|"
                 f"{sorted((spec.get('constexprs') or {}).items(), key=str)}|{spec.get('num_warps')}|"
                 f"{spec.get('num_stages')}|div16={divisible_by_16(spec) if 'signature' in spec else None}|"
                 f"attrs={sorted(attrs.items(), key=str) if attrs else None}")
    occupancy_archs = tuple(_arch.get(a).name for a in occupancy_archs)
    key = hashlib.sha256(f"{ident}|{arch}|{threads_per_block}|{dynamic_smem}|{occupancy_archs}".encode()).hexdigest()
    if key not in _cache:
        _cache[key] = _inspect_uncached(spec, str(arch), threads_per_block, int(dynamic_smem), occupancy_archs)
    return _cache[key]


# ----------------------------------------------------------------------------------------------- occupancy
def occupancy(threads_per_block: int, regs_per_thread: int, smem_per_block: int = 0, arch: str = "sm_90") -> dict:
    """Return the theoretical occupancy numbers (see ``workbench.cuda.arch.occupancy``)."""
    return _arch.occupancy(threads_per_block, regs_per_thread, smem_per_block, arch)


def _occupancy_html(o: dict) -> str:
    lim = o["block_limits"]
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td><td>{'&#9664; limit' if k in o['limited_by'] else ''}"
                   "</td></tr>" for k, v in lim.items())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in o["notes"])
    return (f"<b>{o['arch']}</b>: {o['blocks_per_sm']} blocks/SM, {o['active_warps_per_sm']}/{o['max_warps_per_sm']} "
            f"warps = <b>{o['occupancy']:.0%}</b> occupancy, limited by <b>{', '.join(o['limited_by'])}</b>"
            f"<table><tr><th>resource</th><th>blocks/SM it allows</th><th></th></tr>{rows}</table>"
            f"{'<ul>' + notes + '</ul>' if notes else ''}")


def occupancy_widget(threads_per_block: int = 256, regs_per_thread: int = 32, smem_per_block: int = 0,
                     arch: str = "sm_90") -> Any:
    """Return an ipywidgets occupancy calculator (sliders + arch dropdown) showing the limiting resource."""
    import ipywidgets as w

    most = {k: max(getattr(L, k) for L in _arch.ARCHS.values())  # slider ranges: the largest of any arch
            for k in ("max_threads_per_block", "max_regs_per_thread", "max_smem_per_sm")}
    t = w.IntSlider(value=threads_per_block, min=32, max=most["max_threads_per_block"], step=32,
                    description="threads/block", continuous_update=True)
    r = w.IntSlider(value=regs_per_thread, min=1, max=most["max_regs_per_thread"], step=1, description="regs/thread")
    s = w.IntSlider(value=smem_per_block, min=0, max=most["max_smem_per_sm"], step=1024, description="smem/block (B)")
    a = w.Dropdown(options=list(_arch.ARCHS), value=_arch.get(arch).name, description="arch")
    out = w.HTML()

    def update(*_: Any) -> None:
        out.value = _occupancy_html(_arch.occupancy(t.value, r.value, s.value, a.value))

    for c in (t, r, s, a):
        c.observe(update, names="value")
    update()
    box = w.VBox([t, r, s, a, out])
    box.sliders = {"threads_per_block": t, "regs_per_thread": r, "smem_per_block": s, "arch": a}
    box.output = out
    return box
