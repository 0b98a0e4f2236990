"""The NVRTC gate of the CPU engine: what a GPU's compiler refuses is refused in cpu mode too, with its own log.

Every module the CPU engine builds first goes through NVRTC for sm_90 with cupy's options (workbench.cuda._frontend).
"""

from __future__ import annotations

import json
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest

from workbench._mode import MODE

pytestmark = pytest.mark.skipif(MODE != "cpu", reason="the CPU engine's front-end gate (gpu mode compiles with cupy)")

K = 'extern "C" __global__ void k(int* x) { %s }\n'
REFUSED = {
    "system": ('extern "C" int system(const char*);\n' + K % 'x[0] = system("true");',
               "Unresolved extern function 'system'"),
    "fopen": (K % 'x[0] = fopen("/tmp/wb", "w") != 0;', 'identifier "fopen" is undefined'),
    "host function": ("__host__ int twice(int a) { return 2 * a; }\n" + K % "x[0] = twice(x[0]);",
                      "__host__ function is not allowed"),
    "raw syscall": ('extern "C" long syscall(long, ...);\n' + K % "x[0] = (int)syscall(39);",
                    "Unresolved extern function 'syscall'"),
    "stdint.h": ("#include <stdint.h>\n" + K % "x[0] = (int32_t)1;", 'cannot open source file "stdint.h"'),
    "stdio.h": ("#include <stdio.h>\n" + K % 'printf("hi");', 'cannot open source file "stdio.h"'),
    "rdtsc": (K % 'unsigned lo, hi; asm volatile("rdtsc" : "=a"(lo), "=d"(hi)); x[0] = lo;', "asm operand"),
    "pause": (K % 'asm volatile("pause"); x[0] = 1;', "ptxas"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_the_gpu_compiler_refuses_is_refused(case):
    from workbench import cuda

    code, says = REFUSED[case]
    x = np.zeros(1, np.int32)
    with pytest.raises(cuda.FrontendError) as e:
        cuda.RawKernel(code, "k")((1,), (1,), (x,))
    msg = str(e.value)
    assert "the GPU compiler refuses kernel 'k'" in msg and "NVRTC" in msg and "sm_90" in msg
    assert says in msg and says in e.value.log  # NVRTC's own words
    assert "frontend=False" in msg  # the opt-out is named
    assert isinstance(e.value, cuda.CompileError)


def test_malloc_and_printf_in_device_code_are_allowed_as_on_a_gpu(capfd):
    from workbench import cuda

    code = K % 'int* p = (int*)malloc(4 * sizeof(int)); p[1] = 7; x[0] = p[1]; free(p); printf("got %d\\n", x[0]);'
    x = np.zeros(1, np.int32)
    cuda.RawKernel(code, "k")((1,), (1,), (x,))
    assert x[0] == 7


def test_a_file_is_named_with_the_line(tmp_path):
    from workbench import cuda

    p = tmp_path / "probe.cu"
    p.write_text("// a probe\n" + REFUSED["fopen"][0])
    with pytest.raises(cuda.FrontendError, match=r"(?s)refuses kernel 'k' of .*probe\.cu.*probe\.cu\(2\): error"):
        cuda.RawKernel(p, "k").compile()


def test_a_mangled_kernel_name_is_refused_as_cupy_would_not_find_it():
    from workbench import cuda

    code = "__global__ void foo(float* x) { x[0] = 1; }\n"
    with pytest.raises(cuda.FrontendError, match=r'(?s)kernel .foo.*_Z3fooPf.*extern "C".*name_expressions'):
        cuda.RawKernel(code, "foo").compile()
    x = np.zeros(1, np.float32)
    cuda.RawModule(code=code, name_expressions=["foo"]).get_function("foo")((1,), (1,), (x,))  # cupy's way
    assert x[0] == 1
    t = "template <int N> __global__ void t(float* x) { x[0] = N; }\n"
    cuda.RawKernel(t, "t<3>")((1,), (1,), (x,))  # a template: RawKernel passes it as a name expression
    assert x[0] == 3


def test_opt_out_by_argument_and_by_environment(monkeypatch):
    from workbench import cuda

    code = "__host__ __device__ int twice(int a) { return 2 * a; }\n" + K % "x[0] = twice(x[0]);"
    host = "__host__ int twice(int a) { return 2 * a; }\n" + K % "x[0] = twice(x[0]);"
    x = np.full(1, 4, np.int32)
    cuda.RawKernel(code, "k")((1,), (1,), (x,))  # __host__ __device__ is fine on a GPU
    cuda.RawKernel(host, "k", frontend=False)((1,), (1,), (x,))  # a CPU-only probe, on purpose
    assert x[0] == 16
    monkeypatch.setenv("WORKBENCH_FRONTEND", "0")
    cuda.RawModule(code=host).get_function("k")((1,), (1,), (x,))
    assert x[0] == 32


def test_both_compilers_failing_shows_both():
    from workbench import cuda

    with pytest.raises(cuda.FrontendError, match=r"(?s)NVRTC.*undefined.*CPU engine's build failed too"):
        cuda.RawKernel(K % "x[0] = not_declared_anywhere;", "k").compile()


# The gate compiles with --Ofast-compile=max first, then a refusal again with cupy's own options. Each source here
# must get cupy's verdict and kernels: refusals from the front end, from ptxas (shared-memory limit, x86 assembly, an
# unresolved function) and from the parameter space, and two that only optimisation tells apart: an unused 80 KB
# shared array (accepted), and a call to an undefined function in a branch the optimiser proves dead (accepted by
# cupy; refused when optimising less, so the second compile decides).
SMEM = K % "__shared__ int s[20000]; s[threadIdx.x] = 1; __syncthreads(); x[0] = s[5];"
DEAD_CALL = "__device__ int f(int);\n" + K % "if (x[0] < 0 && x[0] > 0) x[0] = f(1);"
SAME_VERDICT = {
    "plain": (K % "x[threadIdx.x] += 1;", True),
    "80 KB of shared memory, used": (SMEM, False),
    "80 KB of shared memory, unused": (K % "__shared__ int s[20000]; x[0] = 1;", True),
    "x86 assembly": (K % 'int v; asm("movl $1, %0" : "=r"(v)); x[0] = v;', False),
    "undefined device function": ("__device__ int f(int);\n" + K % "x[0] = f(1);", False),
    "undefined device function, in dead code": (DEAD_CALL, True),
    "40 KB of parameters": ("struct B { char c[40000]; };\n"
                            'extern "C" __global__ void k(B b, int* x) { x[0] = b.c[0]; }\n', False),
    "mangled kernel": ("__global__ void k(int* x) { x[0] = 1; }\n", True),
}


@pytest.mark.parametrize("case", list(SAME_VERDICT))
def test_the_gates_verdict_is_cupys(case, monkeypatch):
    from workbench.cuda import _frontend

    code, ok = SAME_VERDICT[case]
    code = f"// {uuid.uuid4()}: never judged before\n" + code
    as_cupy = _frontend.compile_like_cupy(code, "k.cu", (), "sm_90")
    calls = []
    real = _frontend.compile_like_cupy
    monkeypatch.setattr(_frontend, "compile_like_cupy", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    gate = _frontend.verdict(code, None, "k.cu", ())
    assert as_cupy.ok == gate.ok == ok, (as_cupy.log, gate.log)
    assert (gate.entries, gate.log) == (_frontend.cubin_entries(as_cupy.image), as_cupy.log)
    assert calls[0] == _frontend.FAST_COMPILE  # the pinned NVRTC (13.0) has the option
    again = not ok or "if (x[0] < 0 && x[0] > 0)" in code  # a refusal is compiled again as cupy compiles it
    assert calls[1:] == ([()] if again else [])


def test_the_dead_call_is_what_optimising_less_would_refuse():
    from workbench.cuda import _frontend

    assert not _frontend.compile_like_cupy(DEAD_CALL, "k.cu", _frontend.FAST_COMPILE, "sm_90").ok
    assert _frontend.gate_extra_options("12.6") == ()  # NVRTC before 12.8 has no --Ofast-compile
    assert _frontend.gate_extra_options("12.8") == _frontend.gate_extra_options("13.0") == _frontend.FAST_COMPILE


def test_the_verdict_is_cached_on_disk_once_per_module(monkeypatch):
    from workbench import cuda
    from workbench.cuda import _frontend

    calls = []
    real = _frontend.compile_like_cupy
    monkeypatch.setattr(_frontend, "compile_like_cupy", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    code = f"// {uuid.uuid4()}: a source never seen before\n" + K % "x[0] = 41 + WB_GATE_X;"
    m = cuda.RawModule(code=code, options=("-DWB_GATE_X=1",))
    m.get_function("k")
    m._cpu_module(True)  # the checked build: no second NVRTC run
    first = m._verdict
    assert first.ok and not first.cached and len(calls) <= 1
    again = cuda.RawModule(code=code, options=("-DWB_GATE_X=1",))
    again.get_function("k")
    assert again._verdict.cached and again._verdict.entries == ["k"]
    other = cuda.RawModule(code=code, options=("-DWB_GATE_X=2",))  # other options: another verdict
    other.get_function("k")
    assert not other._verdict.cached


def test_a_corrupt_cache_entry_is_compiled_again():
    from workbench.cuda import _frontend, _gpu_source, load_source

    src = load_source(K % "x[0] = 5;")
    text, opts = _gpu_source(src, ())
    v = _frontend.verdict(text, None, src.display_name, opts)
    path = Path(v.cache_path)
    assert json.loads(path.read_text())["entries"] == ["k"]
    path.write_text('{"ok": tr')  # a write cut short
    again = _frontend.verdict(text, None, src.display_name, opts)
    assert again.ok and not again.cached and json.loads(path.read_text())["ok"] is True


def test_a_header_edit_gives_a_new_verdict(tmp_path):
    from workbench import cuda

    (tmp_path / "h.cuh").write_text("#define VALUE 1\n")
    p = tmp_path / "k.cu"
    p.write_text('#include "h.cuh"\n' + K % "x[0] = VALUE;")
    cuda.RawKernel(p, "k").compile()
    (tmp_path / "h.cuh").write_text('#define VALUE fopen("x", "r") != 0\n')
    with pytest.raises(cuda.FrontendError, match="fopen"):
        cuda.RawKernel(p, "k").compile()


def test_without_nvrtc_the_gate_warns_once_and_lets_code_through(monkeypatch):
    from workbench import cuda
    from workbench.cuda import _frontend

    def missing():
        raise RuntimeError("no NVRTC library: pip install nvidia-cuda-nvrtc")

    monkeypatch.setattr(_frontend, "nvrtc_version", missing)
    monkeypatch.setattr(_frontend, "_warned_missing", False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        x = np.zeros(1, np.int32)
        cuda.RawKernel("__global__ void k(int* x) { x[0] = 3; }\n", "k")((1,), (1,), (x,))
        cuda.RawKernel("__global__ void k(int* x) { x[0] = 4; }\n", "k")((1,), (1,), (x,))
    assert x[0] == 4
    msgs = [str(m.message) for m in w if "front-end gate" in str(m.message)]
    assert len(msgs) == 1 and "pip install nvidia-cuda-nvrtc" in msgs[0]


def test_gate_arch_follows_an_arch_option():
    from workbench.cuda._frontend import gate_arch

    assert gate_arch(("-DX=1",)) == (("-DX=1",), "sm_90")
    assert gate_arch(("-arch=sm_80", "-DX=1")) == (("-DX=1",), "sm_80")
    assert gate_arch(("-arch", "compute_90")) == ((), "sm_90")


def test_an_arch_specific_kernel_is_judged_for_its_target():
    from workbench import cuda
    from workbench.cuda._frontend import compile_like_cupy

    code = K % 'asm volatile("setmaxnreg.dec.sync.aligned.u32 64;"); x[0] = 1;'
    assert not compile_like_cupy(code, "k.cu", (), "sm_90").ok  # sm_90a only
    with pytest.raises(cuda.FrontendError, match="setmaxnreg"):
        cuda.RawKernel(code, "k").compile()
    cuda.RawKernel(code, "k", arch="sm_90a").compile()  # on a GPU: nvcc for sm_90a, so the gate compiles for it too
