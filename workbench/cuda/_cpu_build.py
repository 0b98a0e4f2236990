"""CPU engine, building: compile CUDA C++ with the system C++ compiler against the workbench runtime, and cache it.

Kernel modules are built with hidden visibility and -Bsymbolic (a kernel named ``write`` or ``time`` runs the
kernel, never the C library's function), and kernels named like something the C/C++ headers declare (``exp``,
``div``, ``index``, ...) are renamed where they are declared. Checked builds are compiled with -fsanitize=thread and
line tables (-g1, as every build) but linked without ThreadSanitizer's runtime (wb_sanitize.h defines the hooks,
compiled once into an object each such module is linked with) and between two 64 KiB TLS redzones, so that
out-of-bounds static shared-memory accesses land in mapped memory. Plain builds are compiled with
-fsanitize=alignment, and linked with --wrap for exit/_exit/_Exit/quick_exit/abort/__assert_fail (the runtime's
versions stop the launch when device code calls them). Profile builds use the same instrumentation as checked ones,
without vectorisation, so each access of the source stays one access, as nvcc compiles it.

Built libraries are cached on disk (:func:`workbench.cuda.toolchain.cache_dir`), keyed by the source, the options,
the compiler and the headers, with the user headers a module includes checked again on every lookup, and loaded
once per process. A cached library that does not load or whose digest (``<so>.sha256``) differs is rebuilt once.
Launching is :mod:`workbench.cuda._cpu`; argument marshalling is :mod:`workbench.cuda._cpu_args`.
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

from workbench.cuda import _elf, _limits, _source
from workbench.cuda.errors import (
    CompileError,
    KernelArgumentError,
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


def _hook_object(cxx: str, kind: str, flags: list[str]) -> Path:
    """Return the object holding the sanitizer hooks of a ``kind`` ("checked" or "profile") build, built once.

    wb_sanitize.h's hooks (``__tsan_read4`` & co., the same for every kernel) are compiled here once per kind,
    compiler and header state, not into every module: about 0.3 s of CPU saved per checked or profile build. They
    are hidden, so each module linked with the object keeps its own copy, reading its own ``wb_san_enabled``.
    """
    macro = "-DWB_CHECKED=1" if kind == "checked" else "-DWB_PROFILE=1"
    cmd = [cxx, *CXXFLAGS, "-I", str(INCLUDE_DIR), macro, "-DWB_SAN_HOOKS=1", *flags]
    key = _hash(" ".join(cmd[1:]), _headers_digest(), _cxx_id(cxx))
    obj = cache_dir() / f"wbhooks-{kind}-{key}.o"
    if not obj.exists():
        tmp = obj.with_suffix(f".{os.getpid()}.tmp.o")
        r = _run_compiler([*cmd, "-c", "-x", "c++", "-", "-o", str(tmp)], f"the CPU engine's {kind} hooks",
                          stdin='#include "wb_cuda.h"\n')
        if r.returncode != 0:
            raise CompileError(f"building the CPU engine's {kind} hooks failed:\n{r.stderr}", r.stderr)
        os.replace(tmp, obj)
    return obj


def _kind_flags(cxx: str, checked: bool, profile: bool) -> list[str]:
    """Return the macro and flags a plain, checked or profile build adds to CXXFLAGS."""
    if checked:
        return ["-DWB_CHECKED=1", *_sanitize_flags(cxx)]
    if profile:
        return ["-DWB_PROFILE=1", *_profile_flags(cxx)]
    return list(PLAIN_FLAGS)


_pch_dirs: dict[str, Path | None] = {}


def _pch_dir(cxx: str, kind_flags: list[str]) -> Path | None:
    """Return a folder holding ``wb_cuda.h.gch``, the kernel prelude precompiled for one kind of build (built once).

    Every module starts with ``#include "wb_cuda.h"`` (22,000 lines once preprocessed): parsing it was 40-50% of a
    small kernel's compile. GCC looks for ``wb_cuda.h.gch`` in each include folder before ``wb_cuda.h``, and uses it
    only when the build's options and macros match the ones it was made with; otherwise (a ``-D`` the prelude reads,
    another ``-std``) it quietly reads the header, so a module compiles the same either way. None when the compiler
    is not GCC or the precompile fails.
    """
    cmd = [cxx, *CXXFLAGS, "-ffunction-sections", "-fdata-sections", "-I", str(INCLUDE_DIR), *kind_flags]
    key = _hash(" ".join(cmd[1:]), _headers_digest(), _cxx_id(cxx))
    folder = cache_dir() / f"pch-{key}"
    if str(folder) in _pch_dirs:
        return _pch_dirs[str(folder)]
    gch = folder / "wb_cuda.h.gch"
    if not gch.exists() and "clang" not in _cxx_id(cxx).lower():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"wb_cuda.h.gch.{os.getpid()}.{threading.get_ident()}.tmp"
        r = _run_compiler([*cmd, "-x", "c++-header", str(INCLUDE_DIR / "wb_cuda.h"), "-o", str(tmp)],
                          "the kernel prelude (precompiled)")
        if r.returncode == 0:
            os.replace(tmp, gch)
        else:
            tmp.unlink(missing_ok=True)
    _pch_dirs[str(folder)] = folder if gch.exists() else None
    return _pch_dirs[str(folder)]


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
    """Return the compile flags of a checked build: -fsanitize=thread and alignment instrumentation.

    Its reports name source lines through CXXFLAGS' -g1 (line tables and inlined frames, all that addr2line -i
    reads): full -g took up to 60% more compile time (attn_flash_wmma.cu: 4.0 s of CPU at -g, 2.5 s at -g1).
    -fno-tree-sra keeps a float4 load one 16-byte access (as on a GPU) instead of four 4-byte ones.
    """
    if "clang" in _cxx_id(cxx).lower():
        return ["-fno-tree-sra", "-fsanitize=thread,alignment", "-mllvm", "-tsan-instrument-func-entry-exit=0"]
    return ["-fno-tree-sra", "-fsanitize=thread,alignment", "--param=tsan-instrument-func-entry-exit=0"]


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
            kind = _kind_flags(cxx, self.checked, self.profile)
            tu = self._translation_unit()
            extra = " ".join(kind) + (f" rz={REDZONE}" if self.checked else "")
            key = _hash(tu, " ".join(flags), " ".join(CXXFLAGS + LDFLAGS), extra, _headers_digest(), _cxx_id(cxx))
            runtime()  # kernel modules resolve wb_* symbols against the (RTLD_GLOBAL) runtime
            so = _cached_so(key)
            if so is None or not _intact(so):
                so = self._build(cxx, flags, kind, tu, key)
            try:
                self._load(so)
            except (OSError, ValueError, IndexError, struct.error):  # a corrupt cache entry: rebuild it once
                _loaded.pop(str(so), None)
                _images.pop(str(so), None)
                so.unlink(missing_ok=True)
                self._load(self._build(cxx, flags, kind, tu, key))
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

    def _build(self, cxx: str, flags: list[str], kind: list[str], tu: str, key: str) -> Path:
        runtime()  # make sure the runtime exists before any kernel module is loaded
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="build-") as td:
            cpp = Path(td) / "kernel.cpp"
            cpp.write_text(tu)
            dep = Path(td) / "kernel.d"
            out = Path(td) / "kernel.so"
            obj = Path(td) / "kernel.o"
            # One section per function and variable: a link rooted at one kernel (see _exact_static_smem) keeps
            # only the __shared__ variables that kernel reaches.
            pch = _pch_dir(cxx, kind)
            cmd = [cxx, *CXXFLAGS, "-ffunction-sections", "-fdata-sections",
                   *(["-I", str(pch)] if pch else []), "-I", str(INCLUDE_DIR), *flags, "-MD", "-MF", str(dep),
                   *kind, "-c", str(cpp), "-o", str(obj)]
            self._check_compile(_run_compiler(cmd, self.source.display_name), cpp)
            # checked: link between the redzones, without ThreadSanitizer's runtime (wb_sanitize.h has the hooks,
            # compiled once into _hook_object)
            objs = [str(_redzone_objects(cxx)[0]), str(obj), str(_redzone_objects(cxx)[1])] if self.checked \
                else [str(obj)]
            if self.checked:
                objs.insert(2, str(_hook_object(cxx, "checked", _sanitize_flags(cxx))))
            elif self.profile:
                objs.append(str(_hook_object(cxx, "profile", _profile_flags(cxx))))
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
    ours = (str(INCLUDE_DIR), "/usr/", str(cache_dir()))  # workbench's and the system's headers, the prelude's .gch
    for tok in body.split():
        p = os.path.abspath(tok)
        if p == str(cpp) or p.startswith(ours) or p.endswith(".gch"):
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


