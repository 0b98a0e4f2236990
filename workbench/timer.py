"""The one timer: check first, then time with CUDA events on a GPU, or wall time labelled *emulated* on the CPU.

On a GPU it follows ``triton.testing.do_bench``'s method: warm up, then time each repetition with its own pair
of CUDA events after flushing L2 (zeroing a buffer larger than any L2), rotating through several input sets so
no repetition reads inputs another left in cache. It reports the median with the 20th and 80th percentiles.

In cpu mode every kernel is emulated (interpreter, simulator, CPU engine), so the time says nothing about a
GPU: records carry ``emulated: True`` and no TFLOP/s, GB/s or % of peak.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import statistics
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import torch

from workbench._mode import MODE
from workbench.progressbar import bar as progress_bar
from workbench.progressbar import counted
from workbench.registry import Variant, as_dtype, dtype_name, get_op, make_inputs, poisoning

# Passed checks: (op, dtype, id of the function, fingerprint of its code and kernels) -> the function, kept alive so
# its id is never reused by another object. A function redefined in the next cell is a new object with new code; a
# RawKernel global rebound to new source changes the fingerprint: either is checked again before it is timed.
_CHECKED: dict[tuple[str, str, int, str], Any] = {}
_FINGERPRINT_DEPTH = 6
L2_FLUSH_BYTES = 256 * 2**20  # larger than the L2 of every GPU in workbench.hardware (H100/H200: 50 MB)


def _quantiles(xs: list[float]) -> tuple[float, float, float]:
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=10, method="inclusive")  # deciles: q[1] = p20, q[7] = p80
    return statistics.median(xs), q[1], q[7]


def time_gpu(call: Callable[[int], Any], n_sets: int, warmup_ms: float = 25, rep_ms: float = 100,
             flush: bool = True) -> list[float]:
    """Time ``call(i)`` (i = input set) with CUDA events, L2 flushed before each repetition; return ms per rep."""
    cache = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda") if flush else None
    call(0)
    torch.cuda.synchronize()
    # Estimate one call's time to size warm-up and repetitions, as do_bench does.
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for i in range(5):
        call(i % n_sets)
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 5, 1e-3)
    n_warm, n_rep = max(1, int(warmup_ms / est)), max(5, min(1000, int(rep_ms / est)))
    for i in range(n_warm):
        call(i % n_sets)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        if cache is not None:
            cache.zero_()
        starts[i].record()
        call(i % n_sets)
        ends[i].record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in zip(starts, ends, strict=True)]


def time_cpu(call: Callable[[int], Any], n_sets: int, reps: int = 3) -> list[float]:
    """Time ``call(i)`` with the wall clock (one warm-up call); return ms per rep."""
    call(0)
    out = []
    for i in range(reps):
        t0 = time.perf_counter()
        call(i % n_sets)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def fingerprint(fn: Any) -> str:
    """Return a hash of what ``fn`` runs: its code, and the code, kernels and kernel sources it reaches.

    Walks the function's bytecode and constants, its closure, the globals it names (helpers, kernels, dicts of
    kernels) and default arguments: a Triton or Numba kernel contributes its Python code, a ``workbench.cuda`` or
    cupy ``RawKernel``/``RawModule`` its source text, name and options, a path its file's size and mtime.
    """
    h = hashlib.sha256()
    _feed(h, fn, set(), _FINGERPRINT_DEPTH)
    return h.hexdigest()[:32]


def _feed(h: Any, obj: Any, seen: set[int], depth: int) -> None:
    """Add what ``obj`` contributes to the fingerprint ``h`` (recursing into what it references)."""
    if depth < 0 or id(obj) in seen or isinstance(obj, (types.ModuleType, type)):
        return
    seen.add(id(obj))
    if isinstance(obj, (str, bytes, int, float, bool, complex, type(None))):
        h.update(repr(obj).encode())
    elif isinstance(obj, Variant):
        _feed(h, obj.fn, seen, depth)
    elif isinstance(obj, types.MethodType):
        _feed(h, obj.__func__, seen, depth)
    elif isinstance(obj, types.FunctionType):
        _feed_function(h, obj, seen, depth)
    elif isinstance(obj, types.CodeType):
        h.update(obj.co_code + repr(obj.co_names).encode())
        for c in obj.co_consts:
            _feed(h, c, seen, depth)
    elif isinstance(obj, functools.partial):
        for part in (obj.func, obj.args, tuple(sorted(obj.keywords.items()))):
            _feed(h, part, seen, depth - 1)
    elif isinstance(obj, (tuple, list, set, frozenset)):
        for x in list(obj)[:64]:
            _feed(h, x, seen, depth - 1)
    elif isinstance(obj, dict):
        for k, v in list(obj.items())[:64]:
            h.update(repr(k).encode())
            _feed(h, v, seen, depth - 1)
    elif isinstance(obj, os.PathLike):
        _feed_path(h, obj)
    else:
        _feed_kernel(h, obj, seen, depth)


def _feed_function(h: Any, fn: types.FunctionType, seen: set[int], depth: int) -> None:
    """Add a Python function: its code, defaults, closure and the globals its code names (nested code's too)."""
    _feed(h, fn.__code__, seen, depth)
    _feed(h, fn.__defaults__, seen, depth - 1)
    for cell in fn.__closure__ or ():
        try:
            _feed(h, cell.cell_contents, seen, depth - 1)
        except ValueError:  # an empty cell
            pass
    names: set[str] = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    g = fn.__globals__
    for name in sorted(names):
        if name in g:
            h.update(name.encode())
            _feed(h, g[name], seen, depth - 1)


def _feed_kernel(h: Any, obj: Any, seen: set[int], depth: int) -> None:
    """Add a kernel object: its source and options (CUDA C), or the Python function it wraps (Triton, Numba)."""
    for attr in ("code", "name", "options", "name_expressions", "arch"):  # workbench.cuda / cupy RawKernel, RawModule
        v = getattr(obj, attr, None)
        if isinstance(v, (str, tuple, list)) and v:
            h.update(f"{attr}={v!r}".encode())
    src = getattr(obj, "source", None)
    if src is not None and isinstance(getattr(src, "text", None), str):  # workbench.cuda.Source
        h.update(src.text.encode())
    for attr in ("fn", "py_func", "__wrapped__"):  # triton JITFunction / Autotuner, numba dispatcher, wrappers
        inner = getattr(obj, attr, None)
        if callable(inner) and inner is not obj:
            _feed(h, inner, seen, depth - 1)
            break
    mod = getattr(obj, "_module", None)  # a workbench.cuda RawKernel's module
    if mod is not None and not isinstance(mod, types.ModuleType):
        _feed_kernel(h, mod, seen, depth - 1)


def _feed_path(h: Any, p: os.PathLike) -> None:
    """Add a path a function reads (a .cu file it compiles): its name, size and modification time."""
    try:
        st = os.stat(p)
        h.update(f"{os.fspath(p)}:{st.st_size}:{st.st_mtime_ns}".encode())
    except OSError:
        h.update(os.fspath(p).encode())


def _record_shape(shape: dict) -> dict[str, int]:
    """Return the shape as results/README.md stores it: sizes, and flags such as causal as 0/1 (floats dropped)."""
    return {k: int(v) for k, v in shape.items() if isinstance(v, (bool, int))}


def bench(fn: Variant | Callable[..., torch.Tensor], op: str | None = None, *, dtype: torch.dtype | str = "float32",
          check: bool = True, command: str | None = None, reps: int | None = None, progress: bool | None = None,
          verify: bool = True, **shape: Any) -> dict:
    """Check, then time ``fn`` on ``op`` at ``shape`` (e.g. ``M=4096, N=4096, K=4096``); return one record.

    The record follows ``results/README.md``: op, variant, shape, dtype, time_ms with p20/p80, FLOPs and bytes,
    TFLOP/s, GB/s and % of the device's peak (None when emulated), device, versions, date and command.
    A kernel that fails the checker is not timed: this raises instead; so is one whose output at the bench shape
    (the warm-up call's, made with poisoned outputs, and the last timed call's) does not match the reference there
    (``verify=False`` skips that comparison, not the check).
    ``progress`` shows bars for the check
    and, in cpu mode, the emulated timing calls (None: :func:`workbench.progressbar.enabled` decides).
    """
    from workbench.checker import check as run_check
    from workbench.versions import device_info, versions

    if isinstance(fn, Variant):
        op = op or fn.op
        name, backend = fn.name, fn.backend
        why = fn.why_not_here(dtype, shape)
        if why:
            raise RuntimeError(f"bench: cannot run here: {why}")
    else:
        if op is None:
            raise TypeError("bench(fn, op, ...): name the op a plain function implements")
        name, backend = getattr(fn, "__name__", "fn"), "user"
    spec = get_op(op)
    if spec.distributed:
        raise ValueError(f"bench: {spec.name} is a collective, run on the ranks of a process group: time it with "
                         "workbench.comm_time.time_collective (gloo here) or benchmarks/comm_busbw.py (NCCL)")
    dt = as_dtype(dtype)
    sizes, kw = spec.split(shape)
    key = (spec.name, dtype_name(dt), id(fn), fingerprint(fn))
    if check and key not in _CHECKED:
        rep = run_check(fn, spec.name, dtypes=[dt], quick=True, progress=progress)
        if not rep.ok:
            raise AssertionError(f"bench: {spec.name}/{name} fails the checker, so it is not timed.\n{rep.summary()}")
        _CHECKED[key] = fn
    flops = (fn.flops if isinstance(fn, Variant) else spec.flops)(**shape)
    nbytes = (fn.bytes(dtype=dt, **shape) if isinstance(fn, Variant) else spec.bytes(dtype=dt, **shape))
    one_set = max(1.0, nbytes)
    n_sets = 1 if MODE != "gpu" else int(min(8, max(1, (2 * 64 * 2**20) // one_set + 1)))
    sets = [make_inputs(spec.name, dtype=dt, seed=s, **shape) for s in range(n_sets)]
    seen: dict[str, Any] = {}  # the warm-up call's output (made with poisoned outputs) and the last timed one's

    def call(i: int) -> Any:
        if "warm-up" not in seen:  # the first call is the warm-up: not timed, so it may poison its outputs
            with poisoning():
                seen["warm-up"] = out = fn(*sets[i], **kw)
            return out
        out = fn(*sets[i], **kw)
        seen["last"] = (i, out)
        return out

    if MODE == "gpu":
        times = time_gpu(call, n_sets)
    else:  # emulated calls take seconds each: show them (warm-up + reps) on a bar
        n_reps = reps or 3
        with progress_bar(n_reps + 1, f"time {spec.name}/{name} (emulated)", unit="call", progress=progress) as b:
            times = time_cpu(counted(call, b, lambda k: "warm-up" if k == 0 else f"rep {k}/{n_reps}"), n_sets, n_reps)
    if verify:  # even with check=False (a sweep that checked already): what is timed must be right here
        _verify_timed(fn, spec.name, name, sets, seen, kw, dt, shape)
    med, p20, p80 = _quantiles(times)
    emulated = MODE != "gpu"
    rec: dict[str, Any] = {
        "op": spec.name, "variant": name, "backend": backend, "shape": _record_shape(shape),
        "dtype": dtype_name(dt), "time_ms": med, "p20_ms": p20, "p80_ms": p80, "flops": float(flops),
        "bytes": float(nbytes), "tflops": None, "gbps": None, "pct_peak": None, "bound": None,
        "emulated": emulated, "device": device_info(), "versions": versions(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command if command is not None else " ".join(sys.argv),
    }
    if not emulated:
        rec["tflops"] = flops / (med * 1e-3) / 1e12
        rec["gbps"] = nbytes / (med * 1e-3) / 1e9
        rec.update(_peak_fraction(rec, dt, flops, nbytes))
    return rec


def _verify_timed(fn: Any, op: str, name: str, sets: list[tuple], seen: dict[str, Any], kw: dict,
                  dt: torch.dtype, shape: dict) -> None:
    """Refuse the timing unless what was timed is right at the bench shape: the warm-up call's output (made with
    poisoned outputs: an element no launch writes shows) and the last timed call's, against the reference."""
    from workbench.checker import judge_output

    if MODE == "gpu":
        torch.cuda.synchronize()
    i, last = seen.get("last", (0, seen["warm-up"]))
    for what, inputs, got in (("the warm-up call, poisoned outputs", sets[0], seen["warm-up"]),
                              ("the last timed call", sets[i], last)):
        res = judge_output(fn, op, inputs, kw, got, dt, shape)
        if not res.ok:
            raise AssertionError(f"bench: {op}/{name} is wrong at the bench shape ({what}), so it is not timed: "
                                 f"its output there does not match the reference.\n  {res.line()}\n  diagnosis: "
                                 f"{res.diagnosis}")


def _peak_fraction(rec: dict, dt: torch.dtype, flops: float, nbytes: float) -> dict:
    """Return bound ('compute'|'memory') and % of the roofline bound at this intensity, when the GPU is known."""
    try:
        from workbench import hardware

        dev = hardware.current_device()
        if dev is None:
            return {}
        peak = hardware.peak_tflops(dev, dt)
        bw = hardware.peak_bandwidth(dev)
    except Exception:  # an unknown GPU has no datasheet entry: leave % of peak empty
        return {}
    if not peak or not bw:
        return {}
    if flops <= 0:  # moves data, computes nothing (a transpose, a copy): the bound is the bandwidth alone
        return {"bound": "memory", "pct_peak": 100.0 * rec["gbps"] / bw}
    intensity = flops / max(nbytes, 1.0)
    bound_tflops = min(peak, bw * intensity / 1e3)  # bw in GB/s -> TFLOP/s at this intensity
    return {"bound": "compute" if peak <= bw * intensity / 1e3 else "memory",
            "pct_peak": 100.0 * rec["tflops"] / bound_tflops}


# ------------------------------------------------------------------------------------------------ peak memory

_MMAP_SET = False


def _rss(key: str) -> int:
    import re

    with open("/proc/self/status") as f:
        m = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M)
    if m is None:
        raise RuntimeError(f"peak_memory: /proc/self/status has no {key} line")
    return int(m.group(1)) * 1024


def peak_memory(fn: Callable[..., Any], *inputs: Any, **kw: Any) -> dict[str, Any]:
    """Measure the extra memory one call of ``fn(*inputs, **kw)`` needs at its peak, beyond its inputs.

    On a GPU: ``torch.cuda.max_memory_allocated`` around the call (every variant allocates its outputs and
    scratch through torch). On the CPU (Linux): the process's peak resident set (``VmHWM``, reset through
    ``/proc/self/clear_refs``) minus the resident set before the call, with glibc told to serve every
    allocation >= 128 KiB by mmap, so freed buffers leave the resident set and each call's peak is its own.
    One warm-up call runs first (first-call caches are not the kernel's memory). Returns ``{"bytes", "method",
    "device"}``; the figure is a measurement of this machine, labelled with how it was taken.
    """
    global _MMAP_SET
    if MODE != "gpu" and not _MMAP_SET:
        import ctypes
        import platform

        if platform.system() != "Linux":
            raise RuntimeError("peak_memory: cpu mode measures the resident set through /proc, which needs Linux")
        ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD = 128 KiB, fixed (no dynamic raise)
        _MMAP_SET = True
    fn(*inputs, **kw)  # warm-up: lazy initialisation, compiled-kernel caches
    if MODE == "gpu":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(*inputs, **kw)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        return {"bytes": int(peak), "method": "torch.cuda.max_memory_allocated", "device": torch.cuda.get_device_name()}
    import gc

    gc.collect()  # free earlier garbage now: a collection during the call would lower the resident set under it
    gc.disable()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current resident set
        base = _rss("VmRSS")
        fn(*inputs, **kw)
        peak = _rss("VmHWM") - base
    finally:
        gc.enable()
    return {"bytes": max(0, int(peak)), "method": "peak resident set (VmHWM) on the host CPU", "device": "cpu"}
