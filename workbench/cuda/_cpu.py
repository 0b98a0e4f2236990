"""CPU engine: compile CUDA C++ with the system C++ compiler against the workbench runtime and run it on the CPU."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.cuda import _source
from workbench.cuda.errors import (
    CompileError,
    GpuOnlyError,
    KernelArgumentError,
    KernelLaunchError,
    LaunchConfigError,
    MemcheckError,
    ToolchainNotFoundError,
)

_HERE = Path(__file__).resolve().parent
INCLUDE_DIR = _HERE / "include"
RUNTIME_SRC = _HERE / "runtime" / "wb_runtime.cpp"
CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-fno-strict-aliasing", "-fno-math-errno", "-w")
_lock = threading.RLock()


# ----------------------------------------------------------------------------------------------- toolchain
def cache_dir() -> Path:
    """Return the directory of compiled kernels ($WORKBENCH_CACHE/cuda or ~/.cache/kernel-workbench/cuda)."""
    root = os.environ.get("WORKBENCH_CACHE")
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kernel-workbench"
    d = base / "cuda"
    d.mkdir(parents=True, exist_ok=True)
    return d


def find_cxx() -> str:
    """Return the C++ compiler to use ($CXX, else g++, c++ or clang++ on PATH)."""
    cand = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    for c in cand:
        exe = shutil.which(c)
        if exe:
            return exe
    raise ToolchainNotFoundError(
        "the CPU engine needs a C++17 compiler to build CUDA kernels, and none was found "
        f"(looked for {', '.join(cand)} on PATH). Install one, e.g. `sudo apt-get install g++` "
        "(Debian/Ubuntu), `conda install -c conda-forge cxx-compiler`, or Xcode command-line tools on macOS; "
        "or set $CXX.")


_cxx_id_cache: dict[str, str] = {}


def _cxx_id(cxx: str) -> str:
    if cxx not in _cxx_id_cache:
        try:
            out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
        except OSError as e:  # pragma: no cover
            raise ToolchainNotFoundError(f"cannot run the C++ compiler {cxx!r}: {e}") from e
        _cxx_id_cache[cxx] = out.splitlines()[0] if out else cxx
    return _cxx_id_cache[cxx]


def _hash(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:24]


def _headers_digest() -> str:
    return _hash(*(f.name + f.read_text() for f in sorted(INCLUDE_DIR.glob("*"))))


def _run_compiler(cmd: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except FileNotFoundError as e:
        raise ToolchainNotFoundError(f"cannot run {cmd[0]!r} to compile {what}: {e}") from e


_runtime: ctypes.CDLL | None = None


def runtime() -> ctypes.CDLL:
    """Build (once, cached on disk) and load the engine runtime library."""
    global _runtime
    with _lock:
        if _runtime is not None:
            return _runtime
        cxx = find_cxx()
        key = _hash(RUNTIME_SRC.read_text(), (INCLUDE_DIR / "wb_abi.h").read_text(), _cxx_id(cxx))
        so = cache_dir() / f"wbrt-{key}.so"
        if not so.exists():
            tmp = so.with_suffix(f".{os.getpid()}.tmp")
            cmd = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-I", str(INCLUDE_DIR), str(RUNTIME_SRC),
                   "-o", str(tmp), "-lpthread"]
            r = _run_compiler(cmd, "the CPU engine runtime")
            if r.returncode != 0:
                raise CompileError(f"building the CPU engine runtime failed:\n{r.stderr}", r.stderr)
            os.replace(tmp, so)
        lib = ctypes.CDLL(str(so), mode=ctypes.RTLD_GLOBAL)
        lib.wb_launch.restype = ctypes.c_int
        lib.wb_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 6 + [
            ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int,
            ctypes.POINTER(ctypes.c_long)]
        _runtime = lib
        return lib


class _Entry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("sig", ctypes.CFUNCTYPE(ctypes.c_char_p)), ("invoke", ctypes.c_void_p)]


class _OOB(ctypes.Structure):
    _fields_ = [("param", ctypes.c_int), ("kind", ctypes.c_int), ("offset", ctypes.c_int64),
                ("size", ctypes.c_uint64), ("buf_bytes", ctypes.c_uint64), ("block", ctypes.c_uint * 3),
                ("thread", ctypes.c_uint * 3), ("line", ctypes.c_int), ("file", ctypes.c_char_p)]


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


class CpuModule:
    """A compiled (shared-library) module holding one or more kernels."""

    def __init__(self, src: _source.Source, options: tuple[str, ...], names: list[str] | None,
                 name_expressions: tuple[str, ...], checked: bool) -> None:
        self.source = src
        self.options = tuple(options)
        self.checked = checked
        self.decls = _source.find_kernels(src.text)
        self._explicit = names
        self._name_expressions = tuple(name_expressions)
        self._discovered = False
        self.names: list[str] = []
        self._lib: ctypes.CDLL | None = None
        self.kernels: dict[str, KernelInfo] = {}

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
        body = _source.rewrite_for_cpu(self.source.text, disp, self.checked)
        reg = "".join(f"WB_KERNEL({json.dumps(n)}, {n})\n" for n in self.names)
        return ('#include "wb_cuda.h"\n' + _source.line_directive(disp) + body + "\n" +
                '#line 1 "<workbench kernel table>"\n'
                'extern "C" __attribute__((visibility("default"))) const wb::kernel_entry wb_kernels[] = {\n'
                + reg + "{nullptr, nullptr, nullptr}};\n")

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
            tu = self._translation_unit()
            key = _hash(tu, " ".join(flags), " ".join(CXXFLAGS), _headers_digest(), _cxx_id(cxx))
            runtime()  # kernel modules resolve wb_* symbols against the (RTLD_GLOBAL) runtime
            so = _cached_so(key)
            if so is None:
                so = self._build(cxx, flags, tu, key)
            lib = _loaded.get(str(so))
            if lib is None:
                lib = ctypes.CDLL(str(so))
                _loaded[str(so)] = lib
            self._lib = lib
            table = ctypes.cast(lib.wb_kernels, ctypes.POINTER(_Entry))
            i = 0
            while table[i].name:
                name = table[i].name.decode()
                codes = _parse_sig(table[i].sig().decode())
                base = name.split("<")[0].strip()
                decl = next((d for d in self.decls if d.name == base and len(d.params) == len(codes)), None)
                params = decl.params if decl else [_source.Param("?", f"#{j}", (0, 0)) for j in range(len(codes))]
                self.kernels[name] = KernelInfo(name, codes, table[i].invoke, params)
                i += 1
            return self

    def _build(self, cxx: str, flags: list[str], tu: str, key: str) -> Path:
        runtime()  # make sure the runtime exists before any kernel module is loaded
        with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="build-") as td:
            cpp = Path(td) / "kernel.cpp"
            cpp.write_text(tu)
            dep = Path(td) / "kernel.d"
            out = Path(td) / "kernel.so"
            cmd = [cxx, *CXXFLAGS, "-I", str(INCLUDE_DIR), *flags, "-MD", "-MF", str(dep), str(cpp), "-o", str(out)]
            r = _run_compiler(cmd, self.source.display_name)
            if r.returncode != 0:
                log = r.stderr.replace(str(cpp), "<workbench generated>")
                errs = [ln for ln in log.splitlines() if ": error" in ln or ": fatal error" in ln]
                head = "\n".join(errs[:10]) if errs else log[-2000:]
                raise CompileError(
                    f"compiling {self.source.display_name} for the CPU engine failed:\n{head}\n\n"
                    f"full compiler output:\n{_trim(log)}", log, self.source.path)
            deps = {p: _file_hash(p) for p in _parse_deps(dep.read_text() if dep.exists() else "", cpp)}
            # The file name carries the state of the user headers too: a rebuilt module gets a new name, so that
            # dlopen (which returns an already-loaded library for a known path) loads the new code.
            so = cache_dir() / f"k-{key}-{_hash(json.dumps(deps, sort_keys=True))[:12]}.so"
            os.replace(out, so)
            tmp_meta = cache_dir() / f"k-{key}.json.{os.getpid()}.tmp"
            tmp_meta.write_text(json.dumps({"so": so.name, "deps": deps}))
            os.replace(tmp_meta, cache_dir() / f"k-{key}.json")
            return so

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


def convert_args(info: KernelInfo, args: tuple | list) -> tuple[Any, list[Any]]:
    """Return (void** array, keep-alive list) for ``args``, or raise KernelArgumentError."""
    if not isinstance(args, (tuple, list)):
        raise KernelArgumentError(f"kernel {info.name!r}: args must be a tuple of arguments, got {_describe(args)}")
    n = len(info.codes)
    if len(args) != n:
        sig = ", ".join(f"{_type_text(c)} {p.name}" for c, p in zip(info.codes, info.params, strict=True))
        raise KernelArgumentError(
            f"kernel {info.name!r} takes {n} argument{'s' if n != 1 else ''} ({sig}) but {len(args)} were given")
    keep: list[Any] = []
    arr = (ctypes.c_void_p * max(n, 1))()
    for i, (code, a) in enumerate(zip(info.codes, args, strict=True)):
        p = info.params[i]
        where = f"kernel {info.name!r}, parameter {i} {p.name!r} ({_type_text(code)})"
        if code.startswith("*"):
            rec = _PtrArg()
            rec.ptr, rec.bytes = _pointer(where, code, a, keep)
        else:
            rec = _scalar(where, code, a)
        keep.append(rec)
        arr[i] = ctypes.cast(ctypes.pointer(rec), ctypes.c_void_p)
    keep.append(arr)
    return arr, keep


def _pointer(where: str, code: str, a: Any, keep: list) -> tuple[int | None, int]:
    pointee = code[2:] if code.startswith("*c") else code[1:]
    if a is None:
        return None, 0
    mod = type(a).__module__
    if mod.startswith("torch"):
        if a.device.type != "cpu":
            raise KernelArgumentError(f"{where}: got a tensor on {a.device}; the CPU engine needs CPU tensors")
        if not a.is_contiguous():
            raise KernelArgumentError(f"{where}: the tensor is not contiguous; pass t.contiguous()")
        got = _TORCH_TO_CODE.get(str(a.dtype), "s?")
        if not _pointee_ok(pointee, got):
            raise KernelArgumentError(f"{where}: expected a buffer of {_C_NAMES.get(pointee, pointee)}, "
                                      f"got {_describe(a)}")
        keep.append(a)
        return a.data_ptr(), a.numel() * a.element_size()
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
    return a.ctypes.data, a.nbytes


def _scalar(where: str, code: str, a: Any) -> ctypes.Array:
    if code.startswith("s"):
        size = int(code[1:])
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
    if code in ("f16", "bf16"):
        if code == "f16" and isinstance(a, np.float16):
            return ctypes.create_string_buffer(a.tobytes(), 2)
        if code == "bf16" and isinstance(a, np.generic) and a.dtype.name == "bfloat16":
            return ctypes.create_string_buffer(a.tobytes(), 2)
        raise KernelArgumentError(f"{where}: expected {'np.float16' if code == 'f16' else 'a bfloat16 scalar'}, "
                                  f"got {_describe(a)}")
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
    if isinstance(v, (int, np.integer)):
        v = (int(v),)
    if not isinstance(v, (tuple, list)) or not 1 <= len(v) <= 3:
        raise LaunchConfigError(f"kernel {kernel!r}: {what} must be an int or a tuple of 1-3 ints, got {v!r}")
    t = [int(x) for x in v] + [1] * (3 - len(v))
    if any(x < 1 for x in t):
        raise LaunchConfigError(f"kernel {kernel!r}: {what} dimensions must be >= 1, got {tuple(v)}")
    return t[0], t[1], t[2]


def n_threads() -> int:
    """Return how many OS threads run blocks ($WORKBENCH_CPU_THREADS, default: all cores)."""
    env = os.environ.get("WORKBENCH_CPU_THREADS")
    if env:
        return max(1, int(env))
    return os.cpu_count() or 1


def launch(module: CpuModule, info: KernelInfo, grid: Any, block: Any, args: tuple, shared_mem: int,
           max_dynamic_smem: int) -> None:
    """Run kernel ``info`` of ``module`` over ``grid`` x ``block`` on the CPU (synchronously)."""
    g = _dims(grid, "grid", info.name)
    b = _dims(block, "block", info.name)
    nthr = b[0] * b[1] * b[2]
    if b[0] > 1024 or b[1] > 1024 or b[2] > 64 or nthr > 1024:
        raise LaunchConfigError(f"kernel {info.name!r}: block {b} is invalid: at most 1024 threads per block "
                                f"(x, y <= 1024, z <= 64); got {nthr}")
    if g[0] > 2**31 - 1 or g[1] > 65535 or g[2] > 65535:
        raise LaunchConfigError(f"kernel {info.name!r}: grid {g} is invalid (x < 2^31, y and z <= 65535)")
    shared_mem = int(shared_mem)
    if shared_mem < 0:
        raise LaunchConfigError(f"kernel {info.name!r}: shared_mem must be >= 0, got {shared_mem}")
    if shared_mem > max(48 * 1024, max_dynamic_smem):
        raise LaunchConfigError(
            f"kernel {info.name!r}: shared_mem={shared_mem} bytes exceeds the 48 KiB default limit for dynamic shared "
            "memory; on a GPU you must first raise it with kernel.max_dynamic_shared_size_bytes = N "
            "(cudaFuncAttributeMaxDynamicSharedMemorySize), up to 227 KiB on sm_90")
    arr, keep = convert_args(info, args)
    rt = runtime()
    err = ctypes.create_string_buffer(2048)
    cap = 64
    recs = (_OOB * cap)()
    total = ctypes.c_long(0)
    rc = rt.wb_launch(info.invoke, ctypes.cast(arr, ctypes.c_void_p), g[0], g[1], g[2], b[0], b[1], b[2],
                      shared_mem, n_threads(), err, len(err), ctypes.cast(recs, ctypes.c_void_p), cap,
                      ctypes.byref(total))
    del keep
    if rc == 1:
        msg = err.value.decode(errors="replace")
        if "inline PTX" in msg:
            raise GpuOnlyError(
                f"kernel {info.name!r} executes inline PTX asm, which only a GPU can run: {msg}. "
                "Inspect it without a GPU with workbench.inspect(kernel) (nvcc: PTX, SASS, registers), "
                "or run it in gpu mode.")
        raise KernelLaunchError(f"kernel {info.name!r} failed: {msg}")
    if rc == 2:
        records = [_oob_dict(recs[i], info) for i in range(min(cap, total.value))]
        raise MemcheckError(_memcheck_report(info.name, records, total.value), records, total.value)


_KINDS = {0: "read", 1: "write", 2: "access", 3: "misaligned access"}


def _oob_dict(r: _OOB, info: KernelInfo) -> dict:
    pname = info.params[r.param].name if 0 <= r.param < len(info.params) else f"#{r.param}"
    return {"kind": _KINDS.get(r.kind, "access"), "size": int(r.size), "param": pname, "param_index": int(r.param),
            "offset": int(r.offset), "buffer_bytes": int(r.buf_bytes), "block": tuple(r.block),
            "thread": tuple(r.thread)}


def _memcheck_report(kernel: str, records: list[dict], total: int) -> str:
    lines = [f"checked launch of kernel {kernel!r}: {total} invalid __global__ access(es)"]
    for r in records[:10]:
        off, nb = r["offset"], r["buffer_bytes"]
        rel = (f"{off - nb} bytes after the end" if off >= nb else
               f"{-off} bytes before the start" if off < 0 else f"at byte offset {off} (misaligned)")
        kind = r["kind"]
        what = "Misaligned address" if kind == "misaligned access" else f"Invalid __global__ {kind}"
        lines.append(f"  {what} of size {r['size']} on {r['param']!r} ({rel} of a {nb}-byte buffer)\n"
                     f"      by thread {r['thread']} in block {r['block']}")
    if total > 10:
        lines.append(f"  ... and {total - 10} more")
    return "\n".join(lines)
