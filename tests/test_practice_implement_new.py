"""The hard implement drills of issue 27: each classic wrong answer is rejected with the diagnosis that names it.

Every model answer passing its drill (budgets included) is tests/test_practice_drills.py's parametrized
``test_implement_model_solution_passes_and_blank_page_fails``, which runs each implement drill once at a tiny
shape; this file runs only the wrong answers, once each, at the drill's own (small) shapes, plus the Hopper
grader's verdicts on made-up compiler reports (no nvcc needed for those).
"""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

import workbench as wb
from workbench.practice import store as progress_store

NEW = {  # id: (backend, model)
    "softmax-implement-numba-block": ("numba", "numba_block_tree"),
    "softmax-implement-cuda-warp": ("cuda", "cuda_warp"),
    "transpose-implement-cuda-tiled": ("cuda", "cuda_padded"),
    "gemm-implement-numba-tiled": ("numba", "numba_smem"),
    "gemm-implement-cuda-wmma": ("cuda", "cuda_wmma"),
    "gemm-implement-hopper-wgmma": ("cuda", "cuda_wgmma_tma"),
    "gemm-fp8-implement-triton": ("triton", "triton_fp8_tile"),
    "attention-bwd-implement-triton": ("triton", "triton_fa2_bwd"),
}
NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc/ptxas not on PATH")


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    """Every attempt these tests make goes to a throwaway progress file, never the learner's."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    progress_store._pending.clear()
    yield
    progress_store._pending.clear()


def test_the_new_drills_exist_with_their_models_and_state_the_rule():
    for drill_id, (backend, model) in NEW.items():
        d = wb.drill(drill_id)
        assert d.kind == "implement" and d.backend == backend and d.model == model, drill_id
        assert wb.variant(d.op, d.model).backend == backend, drill_id
        text = d.statement()
        assert d.rule() in text and "torch may allocate and take views" in text, drill_id
    assert "Numba (@cuda.jit)" in wb.drill("softmax-implement-numba-block").rule()
    assert "from numba import cuda" in wb.drill("gemm-implement-numba-tiled").blank()
    hopper = wb.drill("gemm-implement-hopper-wgmma").statement()
    assert "Graded by the compiler where there is no GPU" in hopper and "arch=\"sm_90a\"" in hopper
    assert "HMMA" in wb.drill("gemm-implement-cuda-wmma").statement()


# ------------------------------------------------------------------------------------------------ Numba

NUMBA_SOFTMAX_NO_TREE_BARRIER = '''
import math

from numba import cuda, float32

import workbench as wb
from workbench.interop import to_numba

T = 32


@cuda.jit
def softmax_kernel(x, out, n):
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    buf = cuda.shared.array(T, float32)
    mx = float32(-math.inf)
    for j in range(t, n, T):
        mx = max(mx, float32(x[r, j]))
    buf[t] = mx
    cuda.syncthreads()
    s = T // 2
    while s > 0:
        if t < s:
            buf[t] = max(buf[t], buf[t + s])
        s //= 2  # no barrier: the next level reads slots this level is still writing
    mx = buf[0]
    cuda.syncthreads()
    acc = float32(0.0)
    for j in range(t, n, T):
        acc += math.exp(float32(x[r, j]) - mx)
    buf[t] = acc
    cuda.syncthreads()
    s = T // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    acc = buf[0]
    for j in range(t, n, T):
        out[r, j] = math.exp(float32(x[r, j]) - mx) / acc


def softmax(x):
    m, n = x.shape
    out = wb.empty_like(x)
    softmax_kernel[m, T](to_numba(x), to_numba(out), n)
    return out
'''


def test_numba_softmax_without_the_tree_barrier_is_a_race():
    res = wb.drill("softmax-implement-numba-block").submit(NUMBA_SOFTMAX_NO_TREE_BARRIER)
    assert not res.passed and "**race**" in res.feedback, res.feedback


NUMBA_GEMM_ONE_BARRIER = '''
from numba import cuda, float32

import workbench as wb
from workbench.interop import to_numba

TILE = 16


@cuda.jit
def gemm_kernel(a, b, c, m, n, k):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    acc = float32(0.0)
    for k0 in range(0, k, TILE):
        sa[ty, tx] = a[row, k0 + tx] if row < m and k0 + tx < k else float32(0.0)
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < k and col < n else float32(0.0)
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        # no barrier here: the next step's loads overwrite tiles other threads are still reading
    if row < m and col < n:
        c[row, col] = acc


def gemm(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = wb.empty((m, n), a.dtype)
    grid = ((n + TILE - 1) // TILE, (m + TILE - 1) // TILE)
    gemm_kernel[grid, (TILE, TILE)](to_numba(a), to_numba(b), to_numba(c), m, n, k)
    return c
'''


def test_numba_tiled_gemm_without_the_second_barrier_is_a_race():
    res = wb.drill("gemm-implement-numba-tiled").submit(NUMBA_GEMM_ONE_BARRIER)
    assert not res.passed and "**race**" in res.feedback, res.feedback


# ------------------------------------------------------------------------------------------------ CUDA C

WARP_SOFTMAX_NO_INF_GUARD = r'''
import numpy as np

import workbench as wb
from workbench.interop import to_raw

SRC = """
#include <math_constants.h>
__device__ void merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);  // no guard: two -inf partials give exp(-inf - -inf) = NaN
    s = s * expf(m - nm) + os * expf(om - nm);
    m = nm;
}
extern "C" __global__ void softmax_warp(const float* x, float* y, int m, int n) {
    int r = blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= m) return;
    int lane = threadIdx.x;
    const float* row = x + (size_t)r * n;
    float mx = -CUDART_INF_F, s = 0.0f;
    for (int j = lane; j < n; j += 32) merge(mx, s, row[j], 1.0f);
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, mx, off);
        float os = __shfl_xor_sync(0xffffffffu, s, off);
        merge(mx, s, om, os);
    }
    for (int j = lane; j < n; j += 32) y[(size_t)r * n + j] = expf(row[j] - mx) / s;
}
"""
KERNEL = wb.cuda.RawKernel(SRC, "softmax_warp")


def softmax(x):
    m, n = x.shape
    y = wb.empty_like(x)
    KERNEL(((m + 3) // 4,), (32, 4), (to_raw(x), to_raw(y), np.int32(m), np.int32(n)))
    return y
'''


def test_warp_softmax_without_the_inf_guard_breaks_the_masked_rows():
    res = wb.drill("softmax-implement-cuda-warp").submit(WARP_SOFTMAX_NO_INF_GUARD)
    assert not res.passed and "-inf" in res.feedback, res.feedback
    assert "**special_values**" in res.feedback or "**computed_nan**" in res.feedback, res.feedback


def test_naive_transpose_is_correct_but_told_its_scattered_stores():
    res = wb.drill("transpose-implement-cuda-tiled").submit(wb.variant("transpose", "cuda_naive"))
    assert not res.passed and res.feedback.startswith("Correct, but"), res.feedback
    assert "global store efficiency" in res.feedback and "write along rows of out" in res.feedback, res.feedback


SIMT_HALF_GEMM = r'''
import numpy as np

import workbench as wb
from workbench.interop import to_raw

SRC = """
#include <cuda_fp16.h>
extern "C" __global__ void hgemm_simt(const __half* a, const __half* b, __half* c, int m, int n, int k) {
    int col = blockIdx.x * 16 + threadIdx.x, row = blockIdx.y * 16 + threadIdx.y;
    if (row >= m || col >= n) return;
    float acc = 0.f;
    for (int i = 0; i < k; ++i) acc += __half2float(a[row * k + i]) * __half2float(b[i * n + col]);
    c[row * n + col] = __float2half(acc);
}
"""
KERNEL = wb.cuda.RawKernel(SRC, "hgemm_simt")


def gemm(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = wb.empty((m, n), a.dtype)
    KERNEL(((n + 15) // 16, (m + 15) // 16), (16, 16), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n),
                                                        np.int32(k)))
    return c
'''


@NVCC
def test_a_correct_simt_gemm_fails_the_tensor_core_drill():
    res = wb.drill("gemm-implement-cuda-wmma").submit(SIMT_HALF_GEMM)
    assert not res.passed and "no launched kernel issues HMMA" in res.feedback, res.feedback
    assert "`hgemm_simt`" in res.feedback and "FFMA x" in res.feedback, res.feedback


@NVCC
def test_a_wmma_kernel_fails_the_hopper_drill():
    d = wb.drill("gemm-implement-hopper-wgmma")
    res = d.submit(wb.variant("gemm", "cuda_wmma"))  # built by NVRTC's generic target
    assert not res.passed and "without `arch=\"sm_90a\"`" in res.feedback, res.feedback
    src = '''
import numpy as np
import workbench as wb
from kernels.gemm.v3_cuda_tensor_cores import CU
from workbench.interop import to_raw

KERNEL = wb.cuda.RawKernel(CU / "hgemm_wmma.cu", "hgemm_wmma_bf16", arch="sm_90a")


def gemm(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = wb.empty((m, n), a.dtype)
    KERNEL(((n + 63) // 64, (m + 63) // 64), (128,), (to_raw(a), to_raw(b), to_raw(c), np.int32(m), np.int32(n),
                                                       np.int32(k)))
    return c
'''
    res = d.submit(src)
    assert not res.passed and "no launched kernel issues HGMMA" in res.feedback, res.feedback
    assert "mma.sync / wmma (HMMA)" in res.feedback and "HMMA x" in res.feedback, res.feedback


def _report(hgmma=0, hmma=0, spill=0):
    mix = {"HGMMA": hgmma, "HMMA": hmma, "FFMA": 0}
    return SimpleNamespace(registers=168, spill_stores=spill, spill_loads=spill, instruction_mix=mix, opcodes={})


def test_the_hopper_verdict_names_spills_the_arch_and_missing_wgmma():
    from workbench.practice.hopper import InspectRule, _verdict

    rule = InspectRule("sm_90a", ("HGMMA",), {"M": 128, "N": 256, "K": 128}, "bfloat16")
    k = SimpleNamespace(name="my_gemm", arch="sm_90a")
    ok, text = _verdict(rule, [(k, _report(hgmma=4))])
    assert ok and "HGMMA x4" in text
    ok, text = _verdict(rule, [(k, _report(hgmma=4, spill=512))])
    assert not ok and "spills registers to local memory (512 B stores, 512 B loads" in text
    ok, text = _verdict(rule, [(k, _report(hmma=16))])
    assert not ok and "no launched kernel issues HGMMA" in text and "shows mma.sync / wmma (HMMA)" in text
    ok, text = _verdict(rule, [(SimpleNamespace(name="my_gemm", arch=None), _report(hgmma=4))])
    assert not ok and "built without `arch=\"sm_90a\"`" in text


def test_a_hopper_answer_that_launches_nothing_or_computes_in_torch_fails():
    import torch

    d = wb.drill("gemm-implement-hopper-wgmma")
    res = d.submit(lambda a, b: wb.empty((a.shape[0], b.shape[1]), a.dtype))
    assert not res.passed and "launched no CUDA C kernel" in res.feedback, res.feedback
    res = d.submit(lambda a, b: torch.matmul(a, b))
    assert not res.passed and "outside any CUDA C" in res.feedback, res.feedback


# ------------------------------------------------------------------------------------------------ Triton


def test_fp8_gemm_with_an_fp16_accumulator_overflows():
    res = wb.drill("gemm-fp8-implement-triton").submit(wb.variant("gemm_fp8", "wrong_fp16_accumulator"))
    assert not res.passed and "**computed_nan**" in res.feedback, res.feedback


def _no_delta_backward(q, k, v, o, lse, do, causal=False, scale=None):
    """A learner's backward: a Triton Delta kernel, the given dQ kernel, and a dK/dV step without - Delta."""
    import math

    import torch
    import triton

    from kernels._triton_hooks import with_helpers
    from kernels.attention_bwd import ex_common, wrong
    from kernels.attention_bwd.v1_triton_fa2_bwd import fa2_bwd_preprocess

    b, h, sq, d = q.shape
    sk = k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    delta = wb.empty((b, h, sq), torch.float32)
    fa2_bwd_preprocess[(triton.cdiv(b * h * sq, 64),)](o, do, delta, b * h * sq, HEAD_D=d, BLOCK=64)
    dq, dk, dv = wb.empty_like(q), wb.empty_like(k), wb.empty_like(v)
    meta = {"CAUSAL": causal, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_D": max(16, d)}
    ex_common.dq_kernel[(triton.cdiv(sq, 16), b * h)](q, k, v, do, lse, delta, dq, sq, sk, d, scale, **meta)
    dkdv = with_helpers(ex_common.dkdv_kernel, "test", dkdv_step=wrong.dkdv_step_no_delta)
    dkdv[(triton.cdiv(sk, 16), b * h)](q, k, v, do, lse, delta, dk, dv, sq, sk, d, scale, **meta)
    return dq, dk, dv


def test_attention_backward_without_delta_gets_dk_wrong():
    res = wb.drill("attention-bwd-implement-triton").submit(_no_delta_backward)
    assert not res.passed and "**scattered**" in res.feedback, res.feedback
    assert "dk" in res.feedback and "0/1 runs pass" not in res.feedback
