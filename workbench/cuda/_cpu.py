"""CPU engine, launching: run a compiled kernel module's kernel over a grid of blocks on the CPU.

Faults: unchecked launches run on copies of the pointer arguments' buffers between PROT_NONE guard pages (the
runtime's GuardRegion; copied back afterwards, and read-only where the array is not writeable); SIGSEGV, SIGBUS,
SIGFPE, SIGILL and SIGABRT of a kernel become the launch's error, which :func:`_launch_error` words with the source
line and the parameter. A checked launch runs on copies of its buffers with a redzone on each side (copied back
afterwards), so that out-of-bounds accesses land in mapped memory, and reports what the sanitizer hooks recorded.

Profile launches (what :func:`workbench.profile` launches) run a profile build, whose hooks only append each access
to the fiber's log; the runtime groups the logs into warp-level requests and counts sectors, shared-memory
wavefronts, bank conflicts, atomics and barriers (see ``PROFILE_COUNTERS``).

Building and caching modules is :mod:`workbench.cuda._cpu_build`; argument marshalling is
:mod:`workbench.cuda._cpu_args`.
"""

from __future__ import annotations

import ctypes
import os
import re
from typing import Any

import numpy as np

from workbench.cuda import _elf, _limits, _sanitizer
from workbench.cuda._cpu_args import alloc_base, convert_args, type_text
from workbench.cuda._cpu_build import REDZONE, CpuModule, KernelInfo, runtime
from workbench.cuda.errors import (
    CudaError,
    GpuOnlyError,
    KernelLaunchError,
    LaunchConfigError,
    LaunchTimeoutError,
    LaunchTooLargeError,
    ReadOnlyArgumentError,
)


class _Record(ctypes.Structure):  # wb_san_record in runtime/wb_runtime.cpp
    _fields_ = [("tool", ctypes.c_int), ("kind", ctypes.c_int), ("space", ctypes.c_int), ("param", ctypes.c_int),
                ("offset", ctypes.c_int64), ("size", ctypes.c_uint64), ("window", ctypes.c_uint64),
                ("block", ctypes.c_uint * 3), ("thread", ctypes.c_uint * 3), ("pc", ctypes.c_uint64),
                ("write", ctypes.c_int), ("prev_write", ctypes.c_int), ("prev_block", ctypes.c_uint * 3),
                ("prev_thread", ctypes.c_uint * 3), ("prev_pc", ctypes.c_uint64), ("count", ctypes.c_long)]


class _Desc(ctypes.Structure):  # wb_launch_desc in runtime/wb_runtime.cpp
    _fields_ = [("invoke", ctypes.c_void_p), ("args", ctypes.c_void_p), ("grid", ctypes.c_uint * 3),
                ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint64), ("nthreads", ctypes.c_int),
                ("checked", ctypes.c_int), ("dl_handle", ctypes.c_void_p), ("tls_probe", ctypes.c_void_p),
                ("tls_bytes", ctypes.c_uint64), ("text_lo", ctypes.c_uint64), ("text_hi", ctypes.c_uint64),
                ("module_base", ctypes.c_uint64), ("san_enabled", ctypes.c_void_p), ("static_lo", ctypes.c_uint64),
                ("static_bytes", ctypes.c_uint64), ("redzone", ctypes.c_uint64), ("nguard", ctypes.c_int),
                ("guard", ctypes.c_void_p), ("nbuf", ctypes.c_int),
                ("buf_ptr", ctypes.c_void_p), ("buf_bytes", ctypes.c_void_p), ("buf_param", ctypes.c_void_p),
                ("buf_slot", ctypes.c_void_p),
                ("time_limit", ctypes.c_double), ("size_guard", ctypes.c_double), ("errbuf", ctypes.c_void_p),
                ("errlen", ctypes.c_uint64), ("records", ctypes.c_void_p), ("record_cap", ctypes.c_int),
                ("nrecords", ctypes.c_int), ("totals", ctypes.c_long * 4), ("elapsed", ctypes.c_double),
                ("estimate", ctypes.c_double), ("blocks_done", ctypes.c_long),
                ("profile", ctypes.c_int), ("nregion", ctypes.c_int), ("region", ctypes.c_void_p),
                ("prof_cap", ctypes.c_uint64), ("prof", ctypes.c_uint64 * 32),
                ("guarded", ctypes.c_int), ("buf_flags", ctypes.c_void_p), ("err_pc", ctypes.c_uint64),
                ("err_param", ctypes.c_int), ("err_kind", ctypes.c_int),
                ("trace_block", ctypes.c_int64), ("trace_warp", ctypes.c_int), ("trace", ctypes.c_void_p),
                ("trace_cap", ctypes.c_uint64), ("ntrace", ctypes.c_uint64)]


class _TraceEntry(ctypes.Structure):  # wb_trace_entry in runtime/wb_runtime.cpp
    _fields_ = [("off", ctypes.c_uint64), ("req", ctypes.c_uint32), ("size_flags", ctypes.c_uint32),
                ("pc", ctypes.c_uint32), ("region", ctypes.c_int16), ("warp", ctypes.c_uint8), ("lane", ctypes.c_uint8)]


TRACE_CAP = 1 << 20  # accesses an access picture's traced block may log (24 bytes each)


# The runtime's P_* counters, in order, and the profile metric each one is (None: not reported).
PROFILE_COUNTERS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "smsp__sass_data_bytes_mem_global_op_ld.sum", "smsp__sass_thread_inst_executed_op_global_ld_pred_on.sum",
    "wb__global_ideal_sectors_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "smsp__sass_data_bytes_mem_global_op_st.sum", "smsp__sass_thread_inst_executed_op_global_st_pred_on.sum",
    "wb__global_ideal_sectors_op_st.sum",
    "smsp__inst_executed_op_shared_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "smsp__sass_data_bytes_mem_shared_op_ld.sum",
    "smsp__sass_thread_inst_executed_op_shared_ld_pred_on.sum",
    "smsp__inst_executed_op_shared_st.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "smsp__sass_data_bytes_mem_shared_op_st.sum",
    "smsp__sass_thread_inst_executed_op_shared_st_pred_on.sum",
    "wb__global_atomic_requests.sum", "wb__global_atomics.sum", "smsp__inst_executed_op_shared_atom.sum",
    "wb__shared_atomics.sum", "wb__barriers.sum", "wb__warp_collectives.sum", "wb__uncounted_accesses.sum",
)
PROFILE_LOG_CAP = 8 << 20  # log entries (16 bytes each) one worker may hold between two barriers



# ----------------------------------------------------------------------------------------------- launching
def _dims(v: Any, what: str, kernel: str) -> tuple[int, int, int]:
    """Return a grid or block size as three ints; refuse what cupy refuses (floats, bools, more than 3 values)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        v = (int(v),)
    if not isinstance(v, (tuple, list)) or not 1 <= len(v) <= 3:
        raise LaunchConfigError(f"kernel {kernel!r}: {what} must be an int or a tuple of 1-3 ints, got {v!r}")
    for x in v:
        if isinstance(x, (bool, np.bool_)):
            raise LaunchConfigError(f"kernel {kernel!r}: {what} {tuple(v)!r} holds the bool {x!r}, which is not a "
                                    f"size; {what} dimensions must be integers")
        if not isinstance(x, (int, np.integer)):
            raise LaunchConfigError(
                f"kernel {kernel!r}: {what} {tuple(v)!r} holds {x!r} ({type(x).__name__}); {what} dimensions must be "
                f"integers, as cupy requires ('{type(x).__name__}' object cannot be interpreted as an integer): "
                "compute it with integer arithmetic, e.g. (n + 255) // 256, not n / 256")
    t = [int(x) for x in v] + [1] * (3 - len(v))
    if any(x < 1 for x in t):
        raise LaunchConfigError(f"kernel {kernel!r}: {what} dimensions must be >= 1, got {tuple(v)}")
    return t[0], t[1], t[2]


def n_threads() -> int:
    """Return how many OS threads run blocks ($WORKBENCH_CPU_THREADS, default: all cores)."""
    env = os.environ.get("WORKBENCH_CPU_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"WORKBENCH_CPU_THREADS must be a whole number of threads >= 1, got {env!r}")
        return int(env)
    return os.cpu_count() or 1


def _check_config(info: KernelInfo, module: CpuModule, g: tuple, b: tuple, shared_mem: int,
                  max_dynamic_smem: int) -> None:
    nthr = b[0] * b[1] * b[2]
    if b[0] > 1024 or b[1] > 1024 or b[2] > 64 or nthr > 1024:
        raise LaunchConfigError(f"kernel {info.name!r}: block {b} is invalid: at most 1024 threads per block "
                                f"(x, y <= 1024, z <= 64); got {nthr}")
    if g[0] > 2**31 - 1 or g[1] > 65535 or g[2] > 65535:
        raise LaunchConfigError(f"kernel {info.name!r}: grid {g} is invalid (x < 2^31, y and z <= 65535)")
    if shared_mem < 0:
        raise LaunchConfigError(f"kernel {info.name!r}: shared_mem must be >= 0, got {shared_mem}")
    _limits.check_dynamic_smem(info.name, shared_mem, info.static_smem, int(max_dynamic_smem or 0), module.arch)


def _describe_launch(module: CpuModule, info: KernelInfo, g: tuple, b: tuple, shared_mem: int, arr: Any,
                     bufs: list[tuple[int, ...]], keep: list, extra: tuple = ()) -> _Desc:
    """Return the runtime's launch description (arrays it points to are appended to ``keep``).

    ``extra``: arrays the kernel reaches other than through its pointer parameters (profile builds count them).
    """
    d = _Desc()
    d.invoke = info.invoke
    d.args = ctypes.cast(arr, ctypes.c_void_p)
    d.grid[:] = g
    d.block[:] = b
    d.smem = shared_mem
    d.nthreads = 1 if module.checked else n_threads()  # checked: one worker, deterministic reports
    d.checked = int(module.checked)
    lib = module._lib
    img = module.image
    d.dl_handle = lib._handle
    d.tls_probe = ctypes.cast(lib.wb_tls_probe, ctypes.c_void_p).value
    d.tls_bytes = img.tls_bytes if img else 0
    d.text_lo, d.text_hi = (module.base + img.text[0], module.base + img.text[1]) if img else (0, 0)
    d.module_base = module.base
    if module.checked or module.profile:
        d.san_enabled = ctypes.addressof(ctypes.c_int.in_dll(lib, "wb_san_enabled"))
    if module.profile:
        _describe_regions(d, bufs, extra, keep)
    _describe_buffers(d, bufs, keep)  # checked launches run on redzoned copies of the buffers, others on guarded ones
    d.guarded = int(not module.checked)
    if module.checked:
        d.static_lo, d.static_bytes = module.static_window
        d.redzone = REDZONE
        guards = [(t.value - module.static_window[0], t.size) for t in (img.tls if img else ())
                  if t.name.startswith("_ZGV") and t.size]
        garr = (ctypes.c_uint64 * max(2 * len(guards), 1))(*(v for g in guards for v in g))
        keep.append(garr)
        d.nguard = len(guards)
        d.guard = ctypes.cast(garr, ctypes.c_void_p)
    d.time_limit = _limits.time_limit() or 0.0
    d.size_guard = _limits.size_guard() or 0.0
    err = ctypes.create_string_buffer(4096)
    recs = (_Record * (len(_sanitizer.TOOLS) * RECORD_CAP))()
    keep += [err, recs]
    d.errbuf = ctypes.cast(err, ctypes.c_void_p)
    d.errlen = len(err)
    d.records = ctypes.cast(recs, ctypes.c_void_p)
    d.record_cap = RECORD_CAP
    return d


def _describe_buffers(d: _Desc, bufs: list[tuple[int, ...]], keep: list) -> None:
    """Describe the pointer arguments' buffers to the runtime, which runs the launch on copies of them."""
    n = max(len(bufs), 1)
    ptrs = (ctypes.c_uint64 * n)(*(b[0] for b in bufs))
    sizes = (ctypes.c_uint64 * n)(*(b[1] for b in bufs))
    params = (ctypes.c_int * n)(*(b[2] for b in bufs))
    slots = (ctypes.c_uint64 * n)(*(b[3] for b in bufs))
    flags = (ctypes.c_int * n)(*(b[5] for b in bufs))
    keep += [ptrs, sizes, params, slots, flags]
    d.nbuf = len(bufs)
    d.buf_ptr, d.buf_bytes, d.buf_param, d.buf_slot, d.buf_flags = (ctypes.cast(x, ctypes.c_void_p)
                                                                    for x in (ptrs, sizes, params, slots, flags))


def _describe_regions(d: _Desc, bufs: list[tuple[int, ...]], extra: tuple, keep: list) -> None:
    """Describe the memory a profile launch counts: global buffers (pointer arguments and ``extra`` arrays) by
    allocation start, and the parameter records the kernel reads its arguments from (not counted)."""
    regions = [(b[0], b[0] + b[1], b[4], 1) for b in bufs]
    for a in extra:
        if isinstance(a, np.ndarray) and a.nbytes:
            lo = a.ctypes.data + min(0, sum((s - 1) * st for s, st in zip(a.shape, a.strides, strict=True) if st < 0))
            span = sum((s - 1) * abs(st) for s, st in zip(a.shape, a.strides, strict=True)) + a.itemsize
            regions.append((lo, lo + span, alloc_base(a) or lo, 1))
    for obj in keep:
        if isinstance(obj, (ctypes.Structure, ctypes.Array, ctypes._SimpleCData)):
            lo = ctypes.addressof(obj)
            regions.append((lo, lo + ctypes.sizeof(obj), lo, 3))
    flat = (ctypes.c_uint64 * max(4 * len(regions), 4))(*(v for r in regions for v in r))
    keep.append(flat)
    d.profile = 1
    d.prof_cap = PROFILE_LOG_CAP
    d.nregion = len(regions)
    d.region = ctypes.cast(flat, ctypes.c_void_p)


RECORD_CAP = 64  # records kept per sanitizer tool (all are counted)


def launch(module: CpuModule, info: KernelInfo, grid: Any, block: Any, args: tuple, shared_mem: int,
           max_dynamic_smem: int, buffers: tuple = ()) -> dict[str, int] | None:
    """Run kernel ``info`` of ``module`` over ``grid`` x ``block`` on the CPU (synchronously).

    A profile module's launch returns its counters ({profile metric key: count}, see ``PROFILE_COUNTERS``);
    ``buffers`` are arrays it reaches other than through pointer parameters (inside struct arguments), counted as
    global memory too.
    """
    g = _dims(grid, "grid", info.name)
    b = _dims(block, "block", info.name)
    shared_mem = int(shared_mem)
    _check_config(info, module, g, b, shared_mem, max_dynamic_smem)
    arr, keep, bufs = convert_args(info, args)
    d = _describe_launch(module, info, g, b, shared_mem, arr, bufs, keep, tuple(buffers))
    trace = _describe_trace(d) if module.profile else None
    rc = runtime().wb_launch2(ctypes.byref(d))
    _raise_for(rc, d, module, info, g, b, bufs)
    del keep
    if not module.profile:
        return None
    if trace is not None:
        _report_trace(trace, d, module, info, g, b, bufs, tuple(buffers))
    counts = {k: int(d.prof[i]) for i, k in enumerate(PROFILE_COUNTERS) if k}
    counts["wb__threads.sum"] = g[0] * g[1] * g[2] * b[0] * b[1] * b[2]
    counts["wb__global_load_bytes.sum"] = 32 * counts["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
    counts["wb__global_store_bytes.sum"] = 32 * counts["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"]
    return counts


def _describe_trace(d: _Desc) -> Any:
    """Ask the runtime to trace the block an access picture wants (wb.profile(...).picture); None when none does."""
    from workbench import profile_counters as _profile

    want = _profile.trace_wanted()
    if want is None:
        return None
    entries = (_TraceEntry * TRACE_CAP)()
    d.trace_block, d.trace_warp = want.block, want.warp
    d.trace, d.trace_cap = ctypes.cast(entries, ctypes.c_void_p), TRACE_CAP
    return entries


def _itemsize(code: str) -> int:
    """Return the bytes of a pointer parameter's pointee (1 for void and unknown types)."""
    c = code[2:] if code.startswith("*c") else code[1:]
    digits = re.sub(r"^[a-z]+", "", c)
    if c.startswith("s") and digits.isdigit():
        return int(digits)
    return int(digits) // 8 if digits.isdigit() else 1


def _trace_buffers(module: CpuModule, info: KernelInfo, bufs: list[tuple[int, ...]], extra: tuple) -> dict:
    """Return {region id: (name, kernel parameter or None, element bytes, bytes from allocation start, bytes)}."""
    out = {}
    for i, b in enumerate(bufs):
        p = b[2]
        out[i] = (info.params[p].name, p, _itemsize(info.codes[p]), b[0] - b[4], b[1])
    for j, a in enumerate(x for x in extra if isinstance(x, np.ndarray) and x.nbytes):
        out[len(bufs) + j] = (f"buffers[{j}]", None, a.itemsize, a.ctypes.data - (alloc_base(a) or a.ctypes.data),
                              a.nbytes)
    return out


def _shared_variables(module: CpuModule) -> list[tuple[str, int, int]]:
    """Return the static __shared__ variables as (name, offset in the module's TLS block, bytes), by offset."""
    vs = [t for t in (module.image.tls if module.image else ()) if t.size and not _elf.is_internal_tls(t.name)
          and not t.name.startswith(("_ZGV", "wb_"))]
    return [(_sanitizer.demangle(t.name).split("::")[-1], t.value, t.size) for t in sorted(vs, key=lambda t: t.value)]


def _report_trace(entries: Any, d: _Desc, module: CpuModule, info: KernelInfo, g: tuple, b: tuple,
                  bufs: list[tuple[int, ...]], extra: tuple) -> None:
    """Hand the traced block's accesses to the access picture that asked for them."""
    from workbench import access_picture
    from workbench import profile_counters as _profile

    n = min(int(d.ntrace), TRACE_CAP)
    raw = np.frombuffer(entries, dtype=np.dtype([("off", "<u8"), ("req", "<u4"), ("size_flags", "<u4"),
                                                 ("pc", "<u4"), ("region", "<i2"), ("warp", "u1"), ("lane", "u1")]),
                        count=n)
    pcs = {int(x) for x in np.unique(raw["pc"])}
    text = module.source.text.splitlines()
    own = os.path.basename(module.source.display_name)
    lines = {pc: (ln, text[ln - 1].strip() if ln and f and os.path.basename(f) == own and ln <= len(text) else "")
             for pc, (f, ln, _) in _sanitizer.resolve(module.so_path, pcs).items()}
    dyn = module.extern_shared_names
    _profile.record_trace(access_picture.trace_from_rows(
        raw.tolist(), kernel=info.name, backend="cuda", grid=g, block=b, traced_block=int(d.trace_block),
        warp=int(d.trace_warp), buffers=_trace_buffers(module, info, bufs, extra),
        shared=_shared_variables(module), dynamic_name=dyn[0] if len(dyn) == 1 else "extern __shared__",
        dynamic_bytes=int(d.smem), lines=lines, dropped=int(d.ntrace) - n))


ERR_READONLY, ERR_GUARD, ERR_CANARY = 7, 6, 8  # the runtime's ERR_* codes that name a buffer


def _source_line(module: CpuModule, d: _Desc) -> str:
    """Return " at file:line" for the instruction or call a launch failed at, when the debug lines know it."""
    if not d.err_pc:
        return ""
    pc = int(d.err_pc) - 1
    file, line, _ = _sanitizer.resolve(module.so_path, {pc}).get(pc, (None, None, None))
    if not line:
        return ""
    return f" at {os.path.basename(file) if file and not file.startswith('<') else file}:{line}"


_WHO = re.compile(r"block \(\d+,\d+,\d+\) thread \(\d+,\d+,\d+\)")


def _with_line(msg: str, at: str) -> str:
    """Return ``msg`` with the source location ``at`` after the thread it names (or at the end)."""
    m = _WHO.search(msg)
    return msg[:m.end()] + at + msg[m.end():] if m and at else msg + at


def _launch_error(d: _Desc, module: CpuModule, info: KernelInfo, bufs: list[tuple[int, ...]]) -> CudaError:
    """Return the error of a launch the runtime stopped (rc 1), with its source line and parameter where known."""
    msg = (ctypes.cast(d.errbuf, ctypes.c_char_p).value or b"").decode(errors="replace")
    if "inline PTX" in msg:
        return GpuOnlyError(
            f"kernel {info.name!r} executes inline PTX asm, which only a GPU can run: {msg}. "
            "Inspect it without a GPU with workbench.inspect(kernel) (nvcc: PTX, SASS, registers), "
            "or run it in gpu mode.")
    msg = _with_line(msg, _source_line(module, d))
    if msg.startswith("device-side assert failed"):
        msg += '; on a GPU the launch fails with cudaErrorAssert ("device-side assert triggered")'
    bi = int(d.err_param)
    if d.err_kind in (ERR_READONLY, ERR_GUARD, ERR_CANARY) and 0 <= bi < len(bufs):
        i = bufs[bi][2]
        p = info.params[i]
        what = f"parameter {i} {p.name!r} ({type_text(info.codes[i])})"
        if d.err_kind == ERR_READONLY:
            return ReadOnlyArgumentError(
                f"kernel {info.name!r} wrote into {what}, whose array is read-only (numpy writeable=False): {msg}. "
                "Pass a writeable array (x.copy()), or make the parameter const if the kernel must not write it.",
                p.name)
        msg = f"{msg}, on {what}"
    return KernelLaunchError(f"kernel {info.name!r} failed: {msg}")


def _raise_for(rc: int, d: _Desc, module: CpuModule, info: KernelInfo, g: tuple, b: tuple,
               bufs: list[tuple[int, ...]]) -> None:
    """Raise the error a launch ended with (runtime return code ``rc``)."""
    if rc == 0:
        return
    shape = f"grid {g}, block {b}"
    if rc == 1:
        raise _launch_error(d, module, info, bufs)
    if rc == 2:
        recs = ctypes.cast(d.records, ctypes.POINTER(_Record))
        _sanitizer.raise_for([recs[i] for i in range(d.nrecords)], list(d.totals), module, info, b)
    if rc == 3:
        raise KeyboardInterrupt(f"kernel {info.name!r} ({shape}) interrupted after {d.elapsed:.2f} s "
                                f"({d.blocks_done} block(s) done); the module stays usable")
    if rc == 4:
        raise LaunchTimeoutError(
            f"kernel {info.name!r} ({shape}) ran past the CPU engine's time limit of {d.time_limit:g} s per launch "
            f"and was stopped ({d.blocks_done} of {g[0] * g[1] * g[2]} block(s) done). An endless loop? Otherwise "
            "raise the limit with workbench.cuda.set_time_limit(seconds) (None: no limit) or "
            "$WORKBENCH_CUDA_TIME_LIMIT.")
    if rc == 5:
        raise LaunchTooLargeError(_too_large_message(info, d, g, b, module.checked))
    raise KernelLaunchError(f"kernel {info.name!r}: the CPU engine returned an unknown status {rc}")


def _human(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _too_large_message(info: KernelInfo, d: _Desc, g: tuple, b: tuple, checked: bool) -> str:
    nblocks = g[0] * g[1] * g[2]
    done = d.blocks_done
    est = (f"about {_human(d.estimate)}" if done else f"at least {_human(d.estimate)} (no block finished in "
                                                       f"{d.elapsed:.2f} s)")
    return (f"kernel {info.name!r}: this launch (grid {g} = {nblocks} blocks of {b[0] * b[1] * b[2]} threads) would "
            f"take {est} on the CPU engine{' in checked mode' if checked else ''}, over the size guard of "
            f"{d.size_guard:g} s, so it was stopped after {d.elapsed:.2f} s ({done} block(s) done). The CPU engine "
            "runs every CUDA thread on the CPU: use a smaller problem in cpu mode, or raise the guard with "
            "workbench.cuda.set_size_guard(seconds) (None: off) or $WORKBENCH_CUDA_SIZE_GUARD.")
