"""CPU engine: compile CUDA C++ with the system C++ compiler against the workbench runtime and run it on the CPU.

Kernel modules are built with hidden visibility and -Bsymbolic (a kernel named ``write`` or ``time`` runs the
kernel, never the C library's function), and kernels named like something the C/C++ headers declare (``exp``,
``div``, ``index``, ...) are renamed where they are declared. Checked builds are compiled with
-fsanitize=thread and -g but linked without ThreadSanitizer's runtime (wb_sanitize.h defines the hooks) and
between two 64 KiB TLS redzones, so that out-of-bounds static shared-memory accesses land in mapped memory; a
checked launch runs on copies of its buffers with a redzone on each side (copied back afterwards), for the
same reason.

Faults: plain builds are compiled with -fsanitize=alignment (wb_cuda.h's handler stops the launch on a misaligned
access) and line tables (-g1), and linked with --wrap for exit/_exit/_Exit/quick_exit/abort/__assert_fail (the
runtime's versions stop the launch when device code calls them). Unchecked launches run on copies of the pointer
arguments' buffers between PROT_NONE guard pages (the runtime's GuardRegion; copied back afterwards, and read-only
where the array is not writeable); SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT of a kernel become the launch's
error, which :func:`_launch_error` words with the source line and the parameter. A cached library that does not
load or whose digest (``<so>.sha256``) differs is rebuilt once.

Profile builds (``profile=True``, what :func:`workbench.profile` launches) use the same instrumentation, but
their hooks only append each access to the fiber's log; the runtime groups the logs into warp-level requests and
counts sectors, shared-memory wavefronts, bank conflicts, atomics and barriers (see ``PROFILE_COUNTERS``). They are
built without vectorisation, so each access of the source stays one access, as nvcc compiles it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import struct
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.cuda import _elf, _limits, _sanitizer, _source
from workbench.cuda.errors import (
    CompileError,
    CudaError,
    GpuOnlyError,
    KernelArgumentError,
    KernelLaunchError,
    LaunchConfigError,
    LaunchTimeoutError,
    LaunchTooLargeError,
    ReadOnlyArgumentError,
)
from workbench.cuda.toolchain import cache_dir, find_cxx, run_tool
from workbench.cuda.toolchain import cxx_id as _cxx_id

_HERE = Path(__file__).resolve().parent
INCLUDE_DIR = _HERE / "include"
RUNTIME_SRC = _HERE / "runtime" / "wb_runtime.cpp"
# -g1: line tables only (no effect on the code), so that a fault of an unchecked launch names its source line.
CXXFLAGS = ("-std=c++17", "-O2", "-g1", "-fPIC", "-fno-strict-aliasing", "-fno-math-errno", "-w",
            "-fvisibility=hidden")
# Plain builds: misaligned typed accesses stop the launch (wb_cuda.h's handler), as a GPU's "misaligned address".
# Its cost is within the noise: SGEMM 64^3 and 128^3 (benchmarks/engine_speed.py), best of 10, on 2 loaded cores.
PLAIN_FLAGS = ("-fsanitize=alignment",)
# Device code that calls exit()/abort() & co. reaches the runtime's __wrap_* versions, which stop the launch.
_WRAPPED = ("exit", "_exit", "_Exit", "quick_exit", "abort", "__assert_fail")
LDFLAGS = ("-shared", "-Wl,-Bsymbolic", *(f"-Wl,--wrap={f}" for f in _WRAPPED))
REDZONE = 64 * 1024  # bytes of TLS before and after a checked module's static shared memory (and around dynamic)
_lock = threading.RLock()


# ----------------------------------------------------------------------------------------------- toolchain
def _hash(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:24]


def _headers_digest() -> str:
    files = sorted(f for f in INCLUDE_DIR.rglob("*") if f.is_file())  # headers in subfolders too
    return _hash(*(str(f.relative_to(INCLUDE_DIR)) + f.read_text() for f in files))


def _run_compiler(cmd: list[str], what: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return run_tool(cmd, f"to compile {what}", stdin=stdin, timeout=600)


_runtime: ctypes.CDLL | None = None


def runtime() -> ctypes.CDLL:
    """Build (once, cached on disk) and load the engine runtime library.

    A cached library that does not load (truncated or garbage) or whose digest no longer matches is rebuilt once.
    """
    global _runtime
    with _lock:
        if _runtime is not None:
            return _runtime
        cxx = find_cxx()
        key = _hash(RUNTIME_SRC.read_text(), (INCLUDE_DIR / "wb_abi.h").read_text(), _cxx_id(cxx))
        so = cache_dir() / f"wbrt-{key}.so"
        lib = _load_verified(so, lambda: _build_runtime(cxx, so), "the CPU engine runtime", ctypes.RTLD_GLOBAL)
        lib.wb_launch2.restype = ctypes.c_int
        lib.wb_launch2.argtypes = [ctypes.c_void_p]
        lib.wb_module_base.restype = ctypes.c_uint64
        lib.wb_module_base.argtypes = [ctypes.c_void_p]
        _runtime = lib
        return lib


def _build_runtime(cxx: str, so: Path) -> None:
    """Compile the runtime library into ``so`` (and its digest beside it)."""
    tmp = so.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-I", str(INCLUDE_DIR), str(RUNTIME_SRC),
           "-o", str(tmp), "-lpthread", "-ldl"]
    r = _run_compiler(cmd, "the CPU engine runtime")
    if r.returncode != 0:
        raise CompileError(f"building the CPU engine runtime failed:\n{r.stderr}", r.stderr)
    _write_digest(tmp, so)
    os.replace(tmp, so)


def _digest_path(so: Path) -> Path:
    return so.with_name(so.name + ".sha256")


def _write_digest(built: Path, so: Path) -> None:
    """Record the digest of the library ``built`` (about to become ``so``)."""
    tmp = _digest_path(so).with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(hashlib.sha256(built.read_bytes()).hexdigest())
    os.replace(tmp, _digest_path(so))


def _intact(so: Path) -> bool:
    """Return whether ``so`` exists and matches the digest recorded when it was built (none recorded: yes)."""
    try:
        data = so.read_bytes()
    except OSError:
        return False
    try:
        want = _digest_path(so).read_text().strip()
    except OSError:
        return bool(data)
    return hashlib.sha256(data).hexdigest() == want


def _load_verified(so: Path, build: Any, what: str, mode: int = ctypes.DEFAULT_MODE) -> ctypes.CDLL:
    """Load the cached library ``so``, building it first if it is missing or corrupt (``build()`` writes it).

    A cached file that is truncated, garbage or not what was built is removed and rebuilt once; a library that
    still does not load after a fresh build raises CompileError.
    """
    if str(so) in _loaded:
        return _loaded[str(so)]
    for attempt in (0, 1):
        if attempt or not _intact(so):
            so.unlink(missing_ok=True)
            build()
        try:
            lib = ctypes.CDLL(str(so), mode=mode)
        except OSError as e:
            if attempt:
                raise CompileError(f"{what} was rebuilt but does not load ({so}): {e}", str(e)) from e
            continue
        _loaded[str(so)] = lib
        return lib
    raise AssertionError("unreachable")


class _Entry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("sig", ctypes.CFUNCTYPE(ctypes.c_char_p)), ("invoke", ctypes.c_void_p),
                ("fn", ctypes.c_void_p)]


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


class _PtrArg(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("bytes", ctypes.c_uint64)]


# ----------------------------------------------------------------------------------------------- options
def translate_options(options: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """Split cupy/NVRTC options into (C++ compiler flags, ignored options)."""
    flags, ignored = [], []
    it = iter(options)
    for o in it:
        if not isinstance(o, str):
            raise TypeError(f"compiler options must be strings, got {o!r}")
        if o in ("-I", "-D", "-U", "--include-path", "--define-macro"):
            v = next(it, "")
            o = {"--include-path": "-I", "--define-macro": "-D"}.get(o, o) + v
        if o.startswith(("--include-path=", "--define-macro=", "--undefine-macro=")):
            k, v = o.split("=", 1)
            o = {"--include-path": "-I", "--define-macro": "-D", "--undefine-macro": "-U"}[k] + v
        if o.startswith(("-D", "-U", "-I")):
            flags.append(o)
        elif re.match(r"^(-std|--std)=c\+\+(17|20|2a|23|2b)$", o):
            flags.append("-std=" + o.split("=")[1])
        else:
            ignored.append(o)  # NVRTC/nvcc-only (-arch, --use_fast_math, -lineinfo, ...) or an older -std
    return flags, ignored


# ----------------------------------------------------------------------------------------------- modules
@dataclass
class KernelInfo:
    """One exported kernel of a compiled module."""

    name: str
    codes: list[str]
    invoke: int
    params: list[_source.Param]
    static_smem: int = 0  # bytes of static __shared__ memory (the variables of this kernel and of helpers)


# Names the kernel prelude does not declare but a kernel module must not define under their own name either:
# POSIX/C functions that the process has (a kernel named `write` used to run the C library's write).
_LIBC_NAMES = frozenset((
    "time write read sync sleep pause kill open close exit abort signal alarm fork pipe dup dup2 link unlink "
    "access chdir getpid raise system clock usleep nanosleep select poll socket connect send recv mmap munmap "
    "fsync truncate main malloc free calloc realloc atexit getenv setenv memcpy memset memmove strlen printf "
    "puts putchar getchar fopen fclose fread fwrite qsort bsearch wait execv execvp nice times ioctl fcntl "
    "stat lstat fstat sigaction kill killpg _exit").split())
_prelude_names: dict[str, frozenset[str]] = {}


def _declared_names(cxx: str) -> frozenset[str]:
    """Return the identifiers the kernel prelude (wb_cuda.h and the C/C++ headers it includes) declares."""
    key = _hash(_headers_digest(), _cxx_id(cxx))
    if key in _prelude_names:
        return _prelude_names[key]
    path = cache_dir() / f"names-{key}.json"
    try:
        names = frozenset(json.loads(path.read_text()))
    except (OSError, ValueError):
        r = _run_compiler([cxx, "-E", "-P", "-std=c++17", "-I", str(INCLUDE_DIR), "-x", "c++", "-"],
                          "the kernel prelude", stdin='#include "wb_cuda.h"\n')
        names = frozenset(re.findall(r"\b[A-Za-z_]\w*\b", r.stdout)) if r.returncode == 0 else frozenset()
        if names:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(sorted(names)))
            os.replace(tmp, path)
    _prelude_names[key] = names | _LIBC_NAMES
    return _prelude_names[key]


_rz_objects: dict[str, tuple[Path, Path]] = {}


def _redzone_objects(cxx: str) -> tuple[Path, Path]:
    """Return the two objects a checked module is linked between: a REDZONE-byte TLS array each."""
    key = _hash(_cxx_id(cxx), str(REDZONE))
    if key in _rz_objects and all(p.exists() for p in _rz_objects[key]):
        return _rz_objects[key]
    out = []
    for side in ("front", "back"):
        obj = cache_dir() / f"wbrz-{key}-{side}.o"
        if not obj.exists():
            src = (f'extern "C" __attribute__((used, aligned(64))) thread_local char wb_rz_{side}[{REDZONE}];\n'
                   f'thread_local char wb_rz_{side}[{REDZONE}];\n')
            tmp = obj.with_suffix(f".{os.getpid()}.tmp.o")
            r = _run_compiler([cxx, "-std=c++17", "-fPIC", "-c", "-x", "c++", "-", "-o", str(tmp)],
                              "the CPU engine's redzones", stdin=src)
            if r.returncode != 0:
                raise CompileError(f"building the CPU engine's TLS redzones failed:\n{r.stderr}", r.stderr)
            os.replace(tmp, obj)
        out.append(obj)
    _rz_objects[key] = (out[0], out[1])
    return _rz_objects[key]


def _profile_flags(cxx: str) -> list[str]:
    """Return the compile flags of a profile build: -fsanitize=thread's access hooks, no vectorisation.

    Vectorising would merge a thread's neighbouring accesses into one (nvcc keeps them apart unless the source uses
    a vector type); -fno-tree-sra keeps a float4 one 16-byte access.
    """
    if "clang" in _cxx_id(cxx).lower():
        return ["-fno-vectorize", "-fno-slp-vectorize", "-fsanitize=thread", "-mllvm",
                "-tsan-instrument-func-entry-exit=0"]
    return ["-fno-tree-sra", "-fno-tree-vectorize", "-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0"]


def _sanitize_flags(cxx: str) -> list[str]:
    """Return the compile flags of a checked build: debug lines, -fsanitize=thread and alignment instrumentation.

    -fno-tree-sra keeps a float4 load one 16-byte access (as on a GPU) instead of four 4-byte ones.
    """
    if "clang" in _cxx_id(cxx).lower():
        return ["-g", "-fno-tree-sra", "-fsanitize=thread,alignment", "-mllvm", "-tsan-instrument-func-entry-exit=0"]
    return ["-g", "-fno-tree-sra", "-fsanitize=thread,alignment", "--param=tsan-instrument-func-entry-exit=0"]


class CpuModule:
    """A compiled (shared-library) module holding one or more kernels."""

    def __init__(self, src: _source.Source, options: tuple[str, ...], names: list[str] | None,
                 name_expressions: tuple[str, ...], checked: bool, profile: bool = False) -> None:
        if checked and profile:
            raise ValueError("a CPU-engine module is built checked or for profiling, not both")
        self.source = src
        self.options = tuple(options)
        self.checked = checked
        self.profile = profile
        self.decls = _source.find_kernels(src.text)
        self._explicit = names
        self._name_expressions = tuple(name_expressions)
        self._discovered = False
        self.names: list[str] = []
        self.symbols: dict[str, str] = {}
        self._lib: ctypes.CDLL | None = None
        self.kernels: dict[str, KernelInfo] = {}
        self.arch = _limits.target_arch(self.options)
        self.so_path = ""
        self.image: _elf.ModuleImage | None = None
        self.base = 0
        self.static_window = (0, 0)  # checked: (TLS offset, bytes) of the static shared memory
        self.extern_shared_names = sorted({m.group("name") for m in _source._EXTERN_SHARED.finditer(
            _source.mask_comments_and_strings(src.text))})

    # -- build
    def _discover(self, cxx: str, flags: list[str]) -> None:
        """Find the kernels, running the preprocessor when macros generate some of them."""
        if self._discovered:
            return
        wanted = list(self._explicit or []) + list(self._name_expressions)
        missing = [n for n in wanted if not any(d.name == n.split("<")[0].strip() for d in self.decls)]
        if missing or not self.decls or _source.global_in_macro(self.source.text):
            self.decls += [d for d in self._preprocessed_decls(cxx, flags)
                           if not any(d.name == e.name for e in self.decls)]
        names = list(self._explicit) if self._explicit is not None else list(
            dict.fromkeys(d.name for d in self.decls if not d.is_template))
        self.names = list(dict.fromkeys(names + list(self._name_expressions)))
        declared = _declared_names(cxx)
        in_text = {k.name for k in _source.find_kernels(self.source.text) if not k.is_template}
        self.symbols = {n: (f"wb_kernel_{n}" if n in declared and n in in_text else n) for n in self.names}
        self._discovered = True

    def _preprocessed_decls(self, cxx: str, flags: list[str]) -> list[_source.KernelDecl]:
        tu = ('#include "wb_cuda.h"\nextern int wb_user_code_begins_here;\n' +
              _source.line_directive(self.source.display_name) + self.source.text + "\n")
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="pp-") as td:
            cpp = Path(td) / "kernel.cpp"
            cpp.write_text(tu)
            r = _run_compiler([cxx, "-E", "-P", "-std=c++17", "-DWB_DISCOVER=1", "-I", str(INCLUDE_DIR), *flags,
                               str(cpp)], self.source.display_name)
        if r.returncode != 0:
            return []  # the real compile will report the error
        text = r.stdout.split("wb_user_code_begins_here;", 1)[-1]
        return _source.find_kernels(text, marker="__wb_global__")

    def _translation_unit(self) -> str:
        disp = self.source.display_name
        rename = {n: s for n, s in self.symbols.items() if s != n}
        body = _source.rewrite_for_cpu(self.source.text, disp, self.checked, rename)
        reg = "".join(f"WB_KERNEL({json.dumps(n)}, {self.symbols.get(n, n)})\n" for n in self.names)
        return ('#include "wb_cuda.h"\n' + _source.line_directive(disp) + body + "\n" +
                '#line 1 "<workbench kernel table>"\n'
                'extern "C" __attribute__((visibility("default"))) WB_NO_SAN void* wb_tls_probe(void) {\n'
                "  static thread_local char wb_tls_anchor;\n  return &wb_tls_anchor;\n}\n"
                'extern "C" __attribute__((visibility("default"))) const wb::kernel_entry wb_kernels[] = {\n'
                + reg + "{nullptr, nullptr, nullptr, nullptr}};\n")

    def compile(self) -> CpuModule:
        """Compile (or fetch from the cache) and load the module."""
        with _lock:
            if self._lib is not None:
                return self
            cxx = find_cxx()
            flags, _ignored = translate_options(self.options)
            if self.source.path:
                flags.append("-I" + os.path.dirname(self.source.path))
            self._discover(cxx, flags)
            for n in self.names:
                base = n.split("<")[0].strip()
                if not any(d.name == base for d in self.decls):
                    avail = ", ".join(sorted({d.name for d in self.decls})) or "none"
                    raise CompileError(
                        f"kernel {n!r} is not defined in {self.source.display_name} "
                        f"(__global__ functions found: {avail})")
            if self.checked:
                flags.append("-DWB_CHECKED=1")
            if self.profile:
                flags.append("-DWB_PROFILE=1")
            tu = self._translation_unit()
            extra = " ".join(_sanitize_flags(cxx)) + f" rz={REDZONE}" if self.checked else ""
            extra += " ".join(_profile_flags(cxx)) if self.profile else ""
            extra += " ".join(PLAIN_FLAGS) if not (self.checked or self.profile) else ""
            key = _hash(tu, " ".join(flags), " ".join(CXXFLAGS + LDFLAGS), extra, _headers_digest(), _cxx_id(cxx))
            runtime()  # kernel modules resolve wb_* symbols against the (RTLD_GLOBAL) runtime
            so = _cached_so(key)
            if so is None or not _intact(so):
                so = self._build(cxx, flags, tu, key)
            try:
                self._load(so)
            except (OSError, ValueError, IndexError, struct.error):  # a corrupt cache entry: rebuild it once
                _loaded.pop(str(so), None)
                _images.pop(str(so), None)
                so.unlink(missing_ok=True)
                self._load(self._build(cxx, flags, tu, key))
            return self

    def _load(self, so: Path) -> None:
        """Load the built module and read its kernel table, TLS layout and static shared-memory sizes."""
        lib = _loaded.get(str(so))
        if lib is None:
            lib = ctypes.CDLL(str(so))
            _loaded[str(so)] = lib
        if not hasattr(lib, "wb_kernels"):
            raise OSError(f"{so} is not a CPU-engine module (no kernel table)")
        self.so_path = str(so)
        self.image = _images.get(str(so)) or _images.setdefault(str(so), _elf.read_module(so))
        self.base = int(runtime().wb_module_base(lib._handle))
        if self.checked:  # the static shared memory: from the first user variable to the end of the last one
            front = self.image.tls_symbol("wb_rz_front")
            start = front.value + front.size if front else 0
            user = [t for t in self.image.tls if t.size and t.value >= start and not t.name.startswith("wb_rz_")]
            lo = min((t.value for t in user), default=start)  # (C++ guard variables included: never reported)
            self.static_window = (lo, max((t.value + t.size for t in user), default=lo) - lo)
        table = ctypes.cast(lib.wb_kernels, ctypes.POINTER(_Entry))
        entries = []
        i = 0
        while table[i].name:
            entries.append((table[i].name.decode(), _parse_sig(table[i].sig().decode()), table[i].invoke,
                            (table[i].fn or 0) - self.base))
            i += 1
        prefixes = {self.image.static_prefix(fn) for *_, fn in entries} - {None}
        kernels: dict[str, KernelInfo] = {}
        for name, codes, invoke, fn in entries:
            base = name.split("<")[0].strip()
            decl = next((d for d in self.decls if d.name == base and len(d.params) == len(codes)), None)
            params = decl.params if decl else [_source.Param("?", f"#{j}", (0, 0)) for j in range(len(codes))]
            static = self._static_smem(fn, prefixes)
            if static > self.arch.default_smem_per_block:  # maybe helpers' variables this kernel never uses
                static = self._exact_static_smem(so, self.image.funcs.get(fn, ""), static)
            kernels[name] = KernelInfo(name, codes, invoke, params, static)
        for k in kernels.values():
            msg = _limits.check_static_smem(k.name, k.static_smem, self.arch)
            if msg:
                raise CompileError(f"compiling {self.source.display_name}: {msg}", msg, self.source.path)
        self.kernels = kernels
        self._lib = lib

    def _exact_static_smem(self, so: Path, symbol: str, estimate: int) -> int:
        """Return the static shared bytes the kernel ``symbol`` reaches: link its object alone, with --gc-sections.

        The estimate of :meth:`_static_smem` counts every helper's ``__shared__`` variables for every kernel; when
        that is over the limit, this link (cached next to the module) tells what the kernel really uses.
        """
        obj, memo = so.with_suffix(".o"), so.with_suffix(".smem.json")
        try:
            known = json.loads(memo.read_text())
        except (OSError, ValueError):
            known = {}
        if symbol in known:
            return int(known[symbol])
        if not symbol or not obj.exists():
            return estimate
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="smem-") as td:
            vs = Path(td) / "local.map"
            vs.write_text("{ local: *; };\n")
            out = Path(td) / "one.so"
            r = _run_compiler([find_cxx(), "-shared", "-Wl,--gc-sections", f"-Wl,--undefined={symbol}",
                               f"-Wl,--version-script={vs}", str(obj), "-o", str(out)], self.source.display_name)
            if r.returncode != 0:
                return estimate
            img = _elf.read_module(out)
        exact = sum(t.size for t in img.tls if not _elf.is_internal_tls(t.name))
        known[symbol] = exact
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known))
        os.replace(tmp, memo)
        return exact

    def _static_smem(self, fn_offset: int, kernel_prefixes: set) -> int:
        """Return the static shared bytes of the kernel at ``fn_offset``: its own plus helpers' and file-scope."""
        own = self.image.static_prefix(fn_offset) if self.image else None
        total = 0
        for s in self.image.tls if self.image else ():
            if _elf.is_internal_tls(s.name):
                continue
            if own and s.name.startswith(own):
                total += s.size
            elif not any(s.name.startswith(p) for p in kernel_prefixes):
                total += s.size  # a __device__ helper's or a file-scope __shared__ variable: counted for every kernel
        return total

    def _build(self, cxx: str, flags: list[str], tu: str, key: str) -> Path:
        runtime()  # make sure the runtime exists before any kernel module is loaded
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="build-") as td:
            cpp = Path(td) / "kernel.cpp"
            cpp.write_text(tu)
            dep = Path(td) / "kernel.d"
            out = Path(td) / "kernel.so"
            obj = Path(td) / "kernel.o"
            # One section per function and variable: a link rooted at one kernel (see _exact_static_smem) keeps
            # only the __shared__ variables that kernel reaches.
            cmd = [cxx, *CXXFLAGS, "-ffunction-sections", "-fdata-sections", "-I", str(INCLUDE_DIR), *flags,
                   "-MD", "-MF", str(dep), *(_sanitize_flags(cxx) if self.checked else []),
                   *(_profile_flags(cxx) if self.profile else []),
                   *(PLAIN_FLAGS if not (self.checked or self.profile) else []), "-c", str(cpp),
                   "-o", str(obj)]
            self._check_compile(_run_compiler(cmd, self.source.display_name), cpp)
            # checked: link between the redzones, without ThreadSanitizer's runtime (wb_sanitize.h has the hooks)
            objs = [str(_redzone_objects(cxx)[0]), str(obj), str(_redzone_objects(cxx)[1])] if self.checked \
                else [str(obj)]
            self._check_compile(_run_compiler([cxx, *LDFLAGS, *objs, "-o", str(out)], self.source.display_name),
                                cpp)
            deps = {p: _file_hash(p) for p in _parse_deps(dep.read_text() if dep.exists() else "", cpp)}
            # The file name carries the state of the user headers too: a rebuilt module gets a new name, so that
            # dlopen (which returns an already-loaded library for a known path) loads the new code.
            so = cache_dir() / f"k-{key}-{_hash(json.dumps(deps, sort_keys=True))[:12]}.so"
            os.replace(obj, so.with_suffix(".o"))
            _write_digest(out, so)
            os.replace(out, so)
            tmp_meta = cache_dir() / f"k-{key}.json.{os.getpid()}.tmp"
            tmp_meta.write_text(json.dumps({"so": so.name, "deps": deps}))
            os.replace(tmp_meta, cache_dir() / f"k-{key}.json")
            return so

    def _check_compile(self, r: subprocess.CompletedProcess, cpp: Path) -> None:
        """Raise CompileError with the user's file and line if the compiler failed."""
        if r.returncode == 0:
            return
        log = r.stderr.replace(str(cpp), "<workbench generated>")
        errs = [ln for ln in log.splitlines() if ": error" in ln or ": fatal error" in ln]
        head = "\n".join(errs[:10]) if errs else log[-2000:]
        raise CompileError(
            f"compiling {self.source.display_name} for the CPU engine failed:\n{head}\n\n"
            f"full compiler output:\n{_trim(log)}", log, self.source.path)

    def kernel(self, name: str) -> KernelInfo:
        """Return the compiled kernel ``name``."""
        self.compile()
        if name not in self.kernels:
            templ = [d.name for d in self.decls if d.is_template]
            hint = (f"; template kernels ({', '.join(templ)}) need name_expressions=[...] such as "
                    f"'{templ[0]}<float>'") if templ else ""
            raise KernelArgumentError(
                f"no kernel named {name!r} in this module (available: {', '.join(self.kernels) or 'none'}){hint}")
        return self.kernels[name]


_loaded: dict[str, ctypes.CDLL] = {}
_images: dict[str, _elf.ModuleImage] = {}


def _trim(s: str, n: int = 60) -> str:
    lines = s.splitlines()
    return "\n".join(lines[:n] + ([f"... ({len(lines) - n} more lines)"] if len(lines) > n else []))


def _file_hash(p: str) -> str:
    try:
        return hashlib.sha256(Path(p).read_bytes()).hexdigest()[:16]
    except OSError:
        return "missing"


def _parse_deps(text: str, cpp: Path) -> list[str]:
    """Return the user files (not system or workbench headers) a depfile lists."""
    body = text.replace("\\\n", " ")
    body = body.split(":", 1)[1] if ":" in body else ""
    out = []
    for tok in body.split():
        p = os.path.abspath(tok)
        if p == str(cpp) or p.startswith(str(INCLUDE_DIR)) or p.startswith("/usr/"):
            continue
        out.append(p)
    return out


def _cached_so(key: str) -> Path | None:
    """Return the cached library for ``key`` if it exists and the user headers it was built from are unchanged."""
    meta = cache_dir() / f"k-{key}.json"
    try:
        m = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    so = cache_dir() / m.get("so", "")
    if not so.is_file() or not all(_file_hash(p) == h for p, h in m.get("deps", {}).items()):
        return None
    return so


def _parse_sig(sig: str) -> list[str]:
    inner = sig.strip()[1:-1]
    return [c for c in inner.split(",") if c]


# ----------------------------------------------------------------------------------------------- arguments
_SCALAR_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "u8": np.uint8,
                  "i16": np.int16, "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64,
                  "u64": np.uint64, "b": np.bool_}
_C_NAMES = {"f32": "float", "f64": "double", "f16": "__half", "bf16": "__nv_bfloat16", "i8": "signed char",
            "u8": "unsigned char", "i16": "short", "u16": "unsigned short", "i32": "int", "u32": "unsigned int",
            "i64": "long long", "u64": "unsigned long long", "b": "bool", "v": "void"}
_NP_NAMES = {"f32": "np.float32", "f64": "np.float64", "f16": "np.float16", "i8": "np.int8", "u8": "np.uint8",
             "i16": "np.int16", "u16": "np.uint16", "i32": "np.int32", "u32": "np.uint32", "i64": "np.int64",
             "u64": "np.uint64", "b": "np.bool_"}
_TORCH_TO_CODE = {"torch.float32": "f32", "torch.float64": "f64", "torch.float16": "f16", "torch.bfloat16": "bf16",
                  "torch.int8": "i8", "torch.uint8": "u8", "torch.int16": "i16", "torch.int32": "i32",
                  "torch.int64": "i64", "torch.bool": "b", "torch.uint16": "u16", "torch.uint32": "u32",
                  "torch.uint64": "u64"}


def _dtype_code(dt: np.dtype) -> str:
    if dt.name == "bfloat16":
        return "bf16"
    if dt.kind == "f":
        return {2: "f16", 4: "f32", 8: "f64"}.get(dt.itemsize, f"f{dt.itemsize * 8}")
    if dt.kind in "iu":
        return f"{dt.kind}{dt.itemsize * 8}"
    if dt.kind == "b":
        return "b"
    return f"s{dt.itemsize}"


def _pointee_ok(pointee: str, got: str) -> bool:
    if pointee == got or pointee in ("v", "i8", "u8", "p") or pointee.startswith("s"):
        return True
    if pointee[0] in "iu" and got[0] in "iu" and pointee[1:] == got[1:]:
        return True  # same width, other signedness: bit-compatible
    if pointee == "bf16" and got in ("u16", "i16"):
        return True  # numpy has no bfloat16: raw bits in a uint16 array
    if pointee == "b" and got == "u8":
        return True
    return False


def _type_text(code: str) -> str:
    if code.startswith("*"):
        c = code[1:]
        const = c.startswith("c")
        c = c[1:] if const else c
        return ("const " if const else "") + _C_NAMES.get(c, f"struct({c[1:]} bytes)" if c.startswith("s") else c) + "*"
    return _C_NAMES.get(code, f"struct of {code[1:]} bytes" if code.startswith("s") else code)


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"numpy.ndarray(dtype={v.dtype}, shape={v.shape})"
    if isinstance(v, np.generic):
        return f"np.{type(v).__name__}({v!r})"
    mod = type(v).__module__
    if mod.startswith("torch"):
        return f"torch.Tensor(dtype={getattr(v, 'dtype', '?')}, device={getattr(v, 'device', '?')})"
    if mod.startswith("cupy"):
        return f"cupy.ndarray(dtype={getattr(v, 'dtype', '?')})"
    return f"{type(v).__name__} {v!r}"[:120]


def _alloc_base(a: Any) -> int:
    """Return the start of the allocation an array or tensor argument lives in (a view's owner's first byte)."""
    from workbench.profile_counters import allocation_start

    return allocation_start(a)


def convert_args(info: KernelInfo, args: tuple | list) -> tuple[Any, list[Any], list[tuple[int, ...]]]:
    """Return (void** array, keep-alive list, [(pointer, bytes, parameter index, address of the pointer, allocation,
    flags)]); flags are the runtime's WB_BUF_* bits (1: the array is read-only).

    Raises KernelArgumentError for arguments that do not match the kernel's parameters.
    """
    if not isinstance(args, (tuple, list)):
        raise KernelArgumentError(f"kernel {info.name!r}: args must be a tuple of arguments, got {_describe(args)}")
    n = len(info.codes)
    if len(args) != n:
        sig = ", ".join(f"{_type_text(c)} {p.name}" for c, p in zip(info.codes, info.params, strict=True))
        raise KernelArgumentError(
            f"kernel {info.name!r} takes {n} argument{'s' if n != 1 else ''} ({sig}) but {len(args)} were given")
    keep: list[Any] = []
    bufs: list[tuple[int, ...]] = []
    arr = (ctypes.c_void_p * max(n, 1))()
    for i, (code, a) in enumerate(zip(info.codes, args, strict=True)):
        p = info.params[i]
        where = f"kernel {info.name!r}, parameter {i} {p.name!r} ({_type_text(code)})"
        if code.startswith("*"):
            rec = _PtrArg()
            rec.ptr, rec.bytes, readonly = _pointer(where, code, a, keep)
            if rec.ptr and rec.bytes:
                bufs.append((rec.ptr, rec.bytes, i, ctypes.addressof(rec) + _PtrArg.ptr.offset,
                             _alloc_base(keep[-1]) or rec.ptr, BUF_READONLY if readonly else 0))
        else:
            rec = _scalar(where, code, a)
        keep.append(rec)
        arr[i] = ctypes.cast(ctypes.pointer(rec), ctypes.c_void_p)
    keep.append(arr)
    return arr, keep, bufs


BUF_READONLY = 1  # the runtime's WB_BUF_READONLY: the array is not writeable (its copy is mapped read-only)


def _pointer(where: str, code: str, a: Any, keep: list) -> tuple[int | None, int, bool]:
    """Return (address, bytes, read-only) of a pointer argument; refuse what cupy would refuse."""
    pointee = code[2:] if code.startswith("*c") else code[1:]
    if a is None:
        return None, 0, False
    mod = type(a).__module__
    if mod.startswith("torch"):
        if a.device.type != "cpu":
            raise KernelArgumentError(f"{where}: got a tensor on {a.device}; the CPU engine needs CPU tensors")
        if a.requires_grad:
            raise KernelArgumentError(
                f"{where}: the tensor requires grad, and cupy refuses such tensors (torch gives no "
                "__cuda_array_interface__ for them: a kernel could write it behind autograd's back); pass "
                "t.detach()")
        if not a.is_contiguous():
            raise KernelArgumentError(f"{where}: the tensor is not contiguous; pass t.contiguous()")
        got = _TORCH_TO_CODE.get(str(a.dtype), "s?")
        if not _pointee_ok(pointee, got):
            raise KernelArgumentError(f"{where}: expected a buffer of {_C_NAMES.get(pointee, pointee)}, "
                                      f"got {_describe(a)}")
        keep.append(a)
        return a.data_ptr(), a.numel() * a.element_size(), False
    if mod.startswith("cupy"):
        raise KernelArgumentError(f"{where}: got a cupy array, but the workbench runs in cpu mode; use numpy arrays")
    if isinstance(a, (np.generic, int, float, bool)):
        raise KernelArgumentError(f"{where}: expected a numpy array (or CPU torch tensor), got a scalar {_describe(a)}")
    if not isinstance(a, np.ndarray):
        if hasattr(a, "__array_interface__"):
            a = np.asarray(a)
        else:
            raise KernelArgumentError(f"{where}: expected a numpy array (or CPU torch tensor), got {_describe(a)}")
    if not a.flags.c_contiguous:
        raise KernelArgumentError(
            f"{where}: the array is not C-contiguous (a transpose or a strided view?): the kernel would read its "
            "memory in the wrong order. Pass np.ascontiguousarray(x).")
    got = _dtype_code(a.dtype)
    if not _pointee_ok(pointee, got):
        raise KernelArgumentError(f"{where}: expected an array of {_C_NAMES.get(pointee, pointee)}, got {_describe(a)}")
    keep.append(a)
    return a.ctypes.data, a.nbytes, not a.flags.writeable


def _scalar(where: str, code: str, a: Any) -> ctypes.Array:
    """Return ``a`` as the bytes of a by-value parameter of type ``code``; refuse what a GPU would misread."""
    if code.startswith("s"):
        return _struct(where, int(code[1:]), a)
    if code in ("f16", "bf16"):
        return _half(where, code, a)
    dt = _SCALAR_DTYPES.get(code)
    if dt is None:
        raise KernelArgumentError(f"{where}: unsupported parameter type code {code!r}")
    if isinstance(a, np.ndarray):
        raise KernelArgumentError(f"{where}: expected a scalar ({_NP_NAMES[code]}), got {_describe(a)}")
    if isinstance(a, np.generic):
        if a.dtype != np.dtype(dt):
            raise KernelArgumentError(f"{where}: expected {_NP_NAMES[code]}, got {_describe(a)}; "
                                      f"the GPU would reinterpret its bytes. Convert with {_NP_NAMES[code]}(x).")
        return ctypes.create_string_buffer(a.tobytes(), a.dtype.itemsize)
    return _python_scalar(where, code, dt, a)


def _struct(where: str, size: int, a: Any) -> ctypes.Array:
    if isinstance(a, (bytes, bytearray, memoryview)):
        b = bytes(a)
    elif isinstance(a, (np.ndarray, np.void)):
        b = a.tobytes()
    else:
        raise KernelArgumentError(f"{where}: pass a by-value struct as bytes, a numpy structured scalar or a "
                                  f"small array of exactly {size} bytes; got {_describe(a)}")
    if len(b) != size:
        raise KernelArgumentError(f"{where}: expected {size} bytes, got {len(b)}")
    return ctypes.create_string_buffer(b, size)


def _half(where: str, code: str, a: Any) -> ctypes.Array:
    if code == "f16" and isinstance(a, np.float16):
        return ctypes.create_string_buffer(a.tobytes(), 2)
    if code == "bf16" and isinstance(a, np.generic) and a.dtype.name == "bfloat16":
        return ctypes.create_string_buffer(a.tobytes(), 2)
    raise KernelArgumentError(f"{where}: expected {'np.float16' if code == 'f16' else 'a bfloat16 scalar'}, "
                              f"got {_describe(a)}")


def _python_scalar(where: str, code: str, dt: type, a: Any) -> ctypes.Array:
    """Pack a Python bool/int/float only where cupy would pass the same bytes (bool, int in range, double)."""
    if isinstance(a, bool):
        if code != "b":
            raise KernelArgumentError(f"{where}: got a Python bool; pass {_NP_NAMES[code]}(x)")
        return ctypes.create_string_buffer(np.bool_(a).tobytes(), 1)
    if isinstance(a, int):
        if code[0] not in "iu":
            raise KernelArgumentError(
                f"{where}: got Python int {a}; cupy passes a Python int as a 64-bit integer (long long), which "
                f"a {_C_NAMES[code]} parameter would misread. Pass {_NP_NAMES[code]}({a}).")
        info = np.iinfo(dt)
        if not info.min <= a <= info.max:
            raise KernelArgumentError(f"{where}: {a} does not fit in {_C_NAMES[code]} [{info.min}, {info.max}]")
        return ctypes.create_string_buffer(np.array(a, dt).tobytes(), np.dtype(dt).itemsize)
    if isinstance(a, float):
        if code != "f64":
            raise KernelArgumentError(
                f"{where}: got Python float {a}; cupy passes a Python float as a double, which a "
                f"{_C_NAMES[code]} parameter would misread. Pass {_NP_NAMES[code]}({a}).")
        return ctypes.create_string_buffer(np.float64(a).tobytes(), 8)
    raise KernelArgumentError(f"{where}: expected a scalar ({_NP_NAMES[code]}), got {_describe(a)}")


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
            regions.append((lo, lo + span, _alloc_base(a) or lo, 1))
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
        out[len(bufs) + j] = (f"buffers[{j}]", None, a.itemsize, a.ctypes.data - (_alloc_base(a) or a.ctypes.data),
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
        what = f"parameter {i} {p.name!r} ({_type_text(info.codes[i])})"
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
