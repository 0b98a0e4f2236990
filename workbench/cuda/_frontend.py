"""The GPU compiler's front end as a gate for the CPU engine: NVRTC compiles CUDA C as ``cupy.RawKernel`` would.

Before the CPU engine builds a module (cpu mode), its source goes through NVRTC for sm_90 with the options cupy 14.2
uses on a GPU, to a cubin (so ptxas runs too). What a GPU refuses is then refused here with NVRTC's own log
(:class:`~workbench.cuda.errors.FrontendError`): host functions called from device code (``system``, ``fopen``,
a plain host function), libc headers (NVRTC has none, as under cupy), x86 inline assembly (ptxas), and a kernel
asked for by a name the cubin does not export (a C++-mangled ``__global__`` without ``extern "C"``).

How cupy 14.2 compiles (``cupy._core.core.assemble_cupy_compiler_options`` and ``cupy.cuda.compiler``): its CCCL
include folders first (here the CUDA toolkit's ``include/cccl``, the same libraries, which ``<cooperative_groups.h>``
needs), ``--std=c++17`` unless an option sets ``-std``, ``-I<cupy's include folder>``,
``-I<CUDA root>/include`` (``CUDA_PATH``, else nvcc's root, else /usr/local/cuda), ``-ftz=true``,
``-arch=sm_<cc>`` and ``--device-as-default-execution-space``. cupy's own ``cupy/*.cuh`` folder is left out here (no
kernel of this project includes it). NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel through ``cuda.bindings.nvrtc``
(cuda-bindings).

The gate first compiles with one option more than cupy: ``--Ofast-compile=max`` (NVRTC 12.8 and later), which makes
the optimiser do less, for 3-10 times less CPU (``attn_flash_simt.cu``: 5.1 s to 0.45 s; the project's 42 ``.cu``
files: 28 s to 7.6 s). Front-end errors, ptxas' limits and bad inline assembly are refused either way, but less
optimisation can keep what the optimiser would have removed (a call to an undefined function in code it proves dead),
so a refusal is compiled again with cupy's own options, and that compile's verdict and log are the gate's. The other
way (accepted when optimising less, refused by cupy's full optimisation) no refusal is known: optimising adds no
front-end, shared-memory or assembly error (``tests/test_cuda_frontend.py`` compares both on its cases, and every
shipped ``.cu`` compiles both ways). ``tests/test_nvrtc.py`` also compiles each ``.cu`` for sm_80 with cupy's options
unchanged.

Verdicts are cached on disk (``<cache_dir>/frontend``), keyed by the source, the local headers it includes, the
options, the name expressions and the NVRTC version. Without NVRTC the gate warns once and lets code through.
Opt out per module with ``RawModule(..., frontend=False)`` / ``RawKernel(..., frontend=False)``, or for the whole
process with ``WORKBENCH_FRONTEND=0`` (for CPU-only probes that no GPU would compile).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.cuda.errors import FrontendError

__all__ = ["Result", "Verdict", "check", "check_kernel_name", "compile_like_cupy", "cupy_options", "cuda_root",
           "enabled", "gate_arch", "gate_extra_options", "load_nvrtc", "nvrtc_version", "verdict"]

DEFAULT_ARCH = "sm_90"
#: What the gate adds to cupy's options first (NVRTC >= 12.8): optimise less (a refusal is compiled again without it).
FAST_COMPILE = ("--Ofast-compile=max",)
_STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel (an entry point) in a cubin's symbol table
_ARCH_OPT = re.compile(r"^(?:-arch|--gpu-architecture)[= ]?(?P<a>(?:sm|compute)_\d+[a-z]?)$")
OPT_OUT = "RawModule(..., frontend=False) / RawKernel(..., frontend=False), or WORKBENCH_FRONTEND=0"


def load_nvrtc() -> Any:
    """Return ``cuda.bindings.nvrtc`` with its library loaded, or raise RuntimeError saying what to install."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise RuntimeError(f"cuda-bindings is not installed ({e}): pip install cuda-bindings") from e
    try:
        err, _major, _minor = nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001  (cuda.pathfinder's DynamicLibNotFoundError and friends)
        raise RuntimeError(f"no NVRTC library ({type(e).__name__}: {str(e).splitlines()[0]}): "
                           "pip install nvidia-cuda-nvrtc (pyproject.toml pins it)") from e
    if int(err) != 0:
        raise RuntimeError(f"nvrtcVersion failed: {err}")
    return nvrtc


def nvrtc_version() -> str:
    """Return NVRTC's version as ``major.minor`` (raises RuntimeError when NVRTC is missing)."""
    _, major, minor = load_nvrtc().nvrtcVersion()
    return f"{major}.{minor}"


def cuda_root() -> str | None:
    """Return the CUDA root cupy would find: CUDA_PATH, else nvcc's root, else /usr/local/cuda (if present)."""
    if os.environ.get("CUDA_PATH"):
        return os.environ["CUDA_PATH"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        root = Path(os.path.realpath(nvcc)).parent.parent
        if (root / "include" / "cuda_fp16.h").is_file():
            return str(root)
        # a wrapper script on PATH (exec /usr/local/cuda-13.0/bin/nvcc): fall through to the usual place
    return "/usr/local/cuda" if os.path.isdir("/usr/local/cuda/include") else None


def cupy_options(options: tuple[str, ...], arch: str) -> tuple[str, ...]:
    """Return the NVRTC options cupy 14.2 compiles a RawKernel with, given the options workbench passes it."""
    root = cuda_root()
    cccl = os.path.join(root, "include", "cccl") if root else ""
    # cupy puts its bundled CCCL (libcudacxx, CUB, Thrust) first; CUDA 13 keeps the same headers in include/cccl,
    # which <cooperative_groups.h> needs (<cuda/std/type_traits>)
    opts = [f"-I{cccl}"] if cccl and os.path.isdir(cccl) else []
    opts += list(options)
    if not any("-std=" in o for o in opts):
        opts.append("--std=c++17")
    if root:
        opts.append(f"-I{os.path.join(root, 'include')}")
    return (*opts, "-ftz=true", f"-arch={arch}", "--device-as-default-execution-space")


@dataclass
class Result:
    """One NVRTC compile: whether it succeeded, its log, the image and the lowered names of the name expressions."""

    ok: bool
    log: str
    image: bytes  # the cubin (-arch=sm_XX), or the PTX text (-arch=compute_XX)
    lowered: dict[str, str] = field(default_factory=dict)

    def has_kernel(self, name: str) -> bool:
        """Return True when the cubin's symbol table (or the PTX) holds the extern "C" kernel ``name``."""
        if self.image.startswith(b"\x7fELF"):
            return name in cubin_entries(self.image)
        return b".entry " + name.encode() + b"(" in self.image


def cubin_entries(image: bytes) -> list[str]:
    """Return the kernels (entry-point symbols, as the driver looks them up) of an ELF64 cubin."""
    if not image.startswith(b"\x7fELF") or len(image) < 0x40:
        return []
    (shoff,) = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for sh in secs:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        stroff = secs[sh[6]][4]
        for j in range(sh[5] // 24):
            st_name, info, other, _shndx, _v, _s = struct.unpack_from("<IBBHQQ", image, sh[4] + j * 24)
            if info & 0xF == 2 and other & _STO_CUDA_ENTRY:  # STT_FUNC, an entry
                out.append(image[stroff + st_name:image.index(b"\0", stroff + st_name)].decode(errors="replace"))
    return out


def _log(nvrtc: Any, prog: Any) -> str:
    _, n = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.decode(errors="replace").rstrip("\0 \n")


def _image(nvrtc: Any, prog: Any, ptx: bool) -> bytes:
    _, size = (nvrtc.nvrtcGetPTXSize if ptx else nvrtc.nvrtcGetCUBINSize)(prog)
    image = b" " * size
    (nvrtc.nvrtcGetPTX if ptx else nvrtc.nvrtcGetCUBIN)(prog, image)
    return image


def compile_like_cupy(text: str, filename: str, options: tuple[str, ...], arch: str = DEFAULT_ARCH,
                      name_expressions: Sequence[str] = ()) -> Result:
    """Compile ``text`` for ``arch`` with cupy's options (and name expressions); return log, image, lowered names.

    ``text`` and ``options`` are what ``workbench.cuda._gpu_source`` hands cupy. ``arch`` is ``sm_XX`` (a cubin:
    NVRTC runs ptxas, as cupy does on a GPU) or ``compute_XX`` (PTX only). NVRTC releases the GIL while it compiles.
    """
    nvrtc = load_nvrtc()
    opts = [o.encode() for o in cupy_options(tuple(options), arch)]
    _, prog = nvrtc.nvrtcCreateProgram(text.encode(), filename.encode(), 0, [], [])
    try:
        for e in name_expressions:
            nvrtc.nvrtcAddNameExpression(prog, e.encode())
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        ok = int(err) == 0
        lowered: dict[str, str] = {}
        if ok:
            for e in name_expressions:
                r, low = nvrtc.nvrtcGetLoweredName(prog, e.encode())
                if int(r) == 0:
                    lowered[e] = low.decode() if isinstance(low, bytes) else str(low)
        image = _image(nvrtc, prog, arch.startswith("compute_")) if ok else b""
        return Result(ok, _log(nvrtc, prog), image, lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


# ------------------------------------------------------------------------------------------------ the gate
@dataclass
class Verdict:
    """What NVRTC said of one module: ok, its log, the kernels the cubin exports and the lowered name expressions."""

    ok: bool
    log: str
    entries: list[str]
    lowered: dict[str, str]
    arch: str
    nvrtc: str
    cached: bool = False  # read from the disk cache
    cache_path: str = ""  # the cache file holding it


_warned_missing = False


def enabled(frontend: bool | None = None) -> bool:
    """Return whether the gate runs: ``frontend`` if given, else not when ``WORKBENCH_FRONTEND`` is 0/false/off."""
    if frontend is not None:
        return bool(frontend)
    return os.environ.get("WORKBENCH_FRONTEND", "1").strip().lower() not in ("0", "false", "no", "off")


def gate_arch(options: Sequence[str]) -> tuple[tuple[str, ...], str]:
    """Split an ``-arch`` option off ``options``; return (the other options, the arch: the option's, else sm_90)."""
    opts, arch, skip = [], DEFAULT_ARCH, False
    for i, o in enumerate(options):
        if skip:
            skip = False
            continue
        if o in ("-arch", "--gpu-architecture") and i + 1 < len(options):
            o, skip = f"{o}={options[i + 1]}", True
        m = _ARCH_OPT.match(o)
        if m:
            arch = m.group("a").replace("compute_", "sm_")  # a cubin either way: ptxas must run
        else:
            opts.append(o)
    return tuple(opts), arch


def gate_extra_options(version: str) -> tuple[str, ...]:
    """Return what the gate adds to cupy's options for NVRTC ``version`` (``major.minor``): FAST_COMPILE from 12.8."""
    major, minor = (int(x) for x in version.split(".")[:2])
    return FAST_COMPILE if (major, minor) >= (12, 8) else ()


def _judge(text: str, display_name: str, opts: tuple[str, ...], arch: str, exprs: tuple[str, ...],
           version: str) -> Result:
    """Compile optimising less (gate_extra_options); compile a refusal again with cupy's own options and return that."""
    extra = gate_extra_options(version)
    r = compile_like_cupy(text, display_name, (*opts, *extra), arch, exprs)
    if extra and not r.ok:
        r = compile_like_cupy(text, display_name, opts, arch, exprs)
    return r


def _key(text: str, path: str | None, options: tuple[str, ...], exprs: tuple[str, ...], version: str) -> str:
    from workbench.cuda.toolchain import local_includes

    parts = [text, path or "", *options, "\0exprs", *exprs, version]
    if path:
        for h in local_includes(text, Path(path).parent):
            parts += [str(h), h.read_text(errors="replace")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _cache_file(key: str) -> Path:
    from workbench.cuda.toolchain import cache_dir

    d = cache_dir() / "frontend"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"v-{key}.json"


def _read_cached(path: Path) -> Verdict | None:
    try:
        m = json.loads(path.read_text())
        return Verdict(bool(m["ok"]), str(m["log"]), list(m["entries"]), dict(m["lowered"]), str(m["arch"]),
                       str(m["nvrtc"]), cached=True, cache_path=str(path))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or corrupt: compile again


def _write_cached(path: Path, v: Verdict) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps({"ok": v.ok, "log": v.log, "entries": v.entries, "lowered": v.lowered,
                               "arch": v.arch, "nvrtc": v.nvrtc}))
    os.replace(tmp, path)


def _warn_missing(why: str) -> None:
    global _warned_missing
    if not _warned_missing:
        _warned_missing = True
        warnings.warn(f"the CUDA C front-end gate is off: {why}. Without it the CPU engine also runs code a GPU "
                      "would refuse (host calls, x86 asm, mangled kernel names).", stacklevel=4)


def verdict(text: str, path: str | None, display_name: str, options: Sequence[str],
            name_expressions: Sequence[str] = ()) -> Verdict | None:
    """Return NVRTC's verdict on a module as the GPU path compiles it (cached on disk); None without NVRTC.

    ``text`` and ``options`` are what ``workbench.cuda._gpu_source`` hands cupy on a GPU.
    """
    try:
        version = nvrtc_version()
    except RuntimeError as e:
        _warn_missing(str(e))
        return None
    opts, arch = gate_arch(tuple(options))
    exprs = tuple(name_expressions)
    cache = _cache_file(_key(text, path, cupy_options(opts, arch), exprs, version))
    v = _read_cached(cache)
    if v is None:
        r = _judge(text, display_name, opts, arch, exprs, version)
        v = Verdict(r.ok, r.log, cubin_entries(r.image), r.lowered, arch, version, cache_path=str(cache))
        _write_cached(cache, v)
    return v


def check(v: Verdict | None, source: Any, what: str = "", cpu_error: Exception | None = None) -> None:
    """Raise FrontendError with NVRTC's log when the verdict ``v`` says the GPU compiler refuses the module.

    ``source``: the module's :class:`~workbench.cuda._source.Source`; ``what`` names the kernel when one was asked
    for; ``cpu_error``: the CPU engine's own error for the same source, quoted after NVRTC's log.
    """
    if v is None or v.ok:
        return
    also = f"\n\nThe CPU engine's build failed too:\n{str(cpu_error)[:1500]}" if cpu_error else ""
    raise FrontendError(
        f"the GPU compiler refuses {what or source.display_name}: this is what NVRTC {v.nvrtc} says when it "
        f"compiles it for {v.arch} as cupy.RawKernel/RawModule does on a GPU, so the CPU engine does not run it "
        f"either:\n{v.log[-4000:]}\n\n(a CPU-only probe that no GPU would compile can opt out: {OPT_OUT}){also}",
        v.log, source.path)


def _mangled_as(name: str, entries: Sequence[str]) -> list[str]:
    """Return the C++-mangled entries of ``entries`` whose function is called ``name``."""
    tag = f"{len(name)}{name}"
    return [e for e in entries if e.startswith("_Z") and re.search(rf"(?<!\d){tag}(?:E|I|[A-Zv]|$)", e)]


def check_kernel_name(v: Verdict | None, name: str, name_expressions: Sequence[str], display_name: str) -> None:
    """Raise FrontendError when cupy on a GPU would not find kernel ``name`` in the module NVRTC built.

    cupy looks a name up as given (``cuModuleGetFunction``) unless it is one of the name expressions, whose lowered
    (mangled) name it uses. A ``__global__`` without ``extern "C"`` is exported under its C++-mangled name only.
    """
    if v is None or not v.ok or name in name_expressions or name in v.entries:
        return
    mangled = _mangled_as(name, v.entries)
    how = (f"the cubin exports it only under its C++-mangled name{'s' if len(mangled) > 1 else ''} "
           f"{', '.join(mangled)}" if mangled else
           f"the cubin exports no kernel called {name!r} (its kernels: {', '.join(v.entries) or 'none'})")
    raise FrontendError(
        f"kernel {name!r} of {display_name}: on a GPU cupy would not find it: {how}. Declare it "
        f"extern \"C\" __global__ ..., or pass the name (a template instantiation such as 'kern<float>') in "
        f"name_expressions=[...] (RawKernel passes a name with '<...>' there itself).", "",
        None if display_name.startswith("<") else display_name)
