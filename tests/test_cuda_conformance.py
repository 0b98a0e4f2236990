"""Conformance of the CPU engine: small CUDA kernels (tests/cuda/*.cu), each checked against numpy."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from workbench._mode import MODE

pytestmark = pytest.mark.skipif(MODE != "cpu", reason="CPU-engine conformance (gpu mode runs kernels with cupy)")

CU = Path(__file__).parent / "cuda"
FILES = ["warp_reduce", "transpose", "histogram", "dyn_smem", "fp16", "wmma", "bugs", "sgemm", "vec_math",
         "atomics", "warp_vote", "templates", "softmax", "inline_ptx"]
EXPRS = {"templates": ["scale_t<float,64>", "scale_t<double,32>"]}
# Files that no GPU compiles, built with the NVRTC gate off (frontend=False): they probe CPU-engine extensions.
CPU_ONLY = {"atomics": "float atomicMax/atomicMin, which CUDA does not have",
            "bugs": "#include <assert.h> (NVRTC has no libc headers; CUDA's assert needs none)"}
rng = np.random.default_rng(0)


@pytest.fixture(scope="session")
def mods():
    """Compile every conformance file once per session (two at a time), plus the checked build of bugs.cu."""
    from workbench import cuda

    def build(item):
        name, checked = item
        return (name, checked), cuda.RawModule(code=CU / f"{name}.cu", name_expressions=EXPRS.get(name),
                                               checked=checked, frontend=name not in CPU_ONLY).compile()

    jobs = [(f, False) for f in FILES] + [("bugs", True)]
    with ThreadPoolExecutor(2) as ex:
        built = dict(ex.map(build, jobs))
    return {k[0] if not k[1] else k[0] + "+checked": v for k, v in built.items()}


def fn(mods, module, name):
    return mods[module].get_function(name)


def i32(v):
    return np.int32(v)


# ------------------------------------------------------------------------------------------------ warps
def test_warp_shuffle_reduction(mods):
    x = rng.standard_normal(1024).astype(np.float32)
    out = np.zeros(32, np.float32)
    fn(mods, "warp_reduce", "warp_sum")((4,), (256,), (x, out, i32(1024)))
    np.testing.assert_allclose(out, x.reshape(32, 32).sum(1), rtol=1e-5, atol=1e-5)


def test_block_reduction_with_tail(mods):
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(4, np.float32)
    fn(mods, "warp_reduce", "block_sum")((4,), (256,), (x, out, i32(n)))
    ref = np.add.reduceat(x, [0, 256, 512, 768])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)


def test_syncwarp_tree_reduction(mods):
    x = rng.integers(-100, 100, 512).astype(np.int32)
    out = np.zeros(16, np.int32)
    fn(mods, "warp_reduce", "syncwarp_sum")((2,), (256,), (x, out))
    np.testing.assert_array_equal(out, x.reshape(16, 32).sum(1))


def test_ballot_any_all(mods):
    x = rng.choice([-1, 1], 128).astype(np.int32)
    x[32:64] = 1  # a warp where all lanes agree
    b = np.zeros(4, np.uint32)
    a = np.zeros(4, np.int32)
    al = np.zeros(4, np.int32)
    fn(mods, "warp_vote", "vote")((2,), (64,), (x, b, a, al))
    pos = (x > 0).reshape(4, 32)
    ref_b = (pos * (1 << np.arange(32, dtype=np.uint64))).sum(1).astype(np.uint32)
    np.testing.assert_array_equal(b, ref_b)
    np.testing.assert_array_equal(a, pos.any(1))
    np.testing.assert_array_equal(al, pos.all(1))


def test_shuffle_variants(mods):
    x = np.arange(64, dtype=np.int32) * 10
    out = np.zeros((64, 4), np.int32)
    fn(mods, "warp_vote", "shfl_variants")((1,), (64,), (x, out))
    lane = np.arange(64) % 32
    base = np.arange(64) - lane
    seg = lane % 16
    ref_bcast = x[base + 3]
    ref_up = np.where(lane >= 2, x[np.arange(64) - 2], x)
    ref_down = np.where(seg + 5 < 16, x[np.minimum(np.arange(64) + 5, 63)], x)
    ref_xor = x[base + (lane ^ 7)]
    np.testing.assert_array_equal(out, np.stack([ref_bcast, ref_up, ref_down, ref_xor], 1))


def test_syncthreads_count_and_or(mods):
    x = rng.choice([-1, 1], 3 * 128).astype(np.int32)
    x[256:] = 1
    out = np.zeros((3, 3), np.int32)
    fn(mods, "warp_vote", "count_positive")((3,), (128,), (x, out))
    pos = (x > 0).reshape(3, 128)
    np.testing.assert_array_equal(out, np.stack([pos.sum(1), pos.any(1), pos.all(1)], 1))


# ------------------------------------------------------------------------------------------------ shared memory
def test_transpose_padded_tile(mods):
    w, h = 100, 70
    a = rng.standard_normal((h, w)).astype(np.float32)
    out = np.zeros((w, h), np.float32)
    fn(mods, "transpose", "transpose_padded")(((w + 31) // 32, (h + 31) // 32), (32, 8), (a, out, i32(w), i32(h)))
    np.testing.assert_array_equal(out, a.T)


def test_dynamic_shared_memory_reverse(mods):
    x = rng.standard_normal(8 * 128).astype(np.float32)
    out = np.zeros_like(x)
    fn(mods, "dyn_smem", "reverse_dyn")((8,), (128,), (x, out), shared_mem=128 * 4)
    np.testing.assert_array_equal(out, x.reshape(8, 128)[:, ::-1].ravel())


def test_dynamic_shared_memory_scan(mods):
    x = rng.integers(0, 10, 4 * 256).astype(np.int32)
    out = np.zeros_like(x)
    fn(mods, "dyn_smem", "scan_dyn")((4,), (256,), (x, out), shared_mem=2 * 256 * 4)
    np.testing.assert_array_equal(out, np.cumsum(x.reshape(4, 256), 1).ravel())


def test_tiled_sgemm_non_multiple_sizes(mods):
    M, N, K = 70, 50, 33
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = np.zeros((M, N), np.float32)
    fn(mods, "sgemm", "sgemm_tiled")(((N + 15) // 16, (M + 15) // 16), (16, 16), (A, B, C, i32(M), i32(N), i32(K)))
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)


def test_pipeline_memcpy_async_staging(mods):
    x = rng.standard_normal(3 * 512).astype(np.float32)
    out = np.zeros(3 * 128, np.float32)
    fn(mods, "templates", "pipeline_sum4")((3,), (128,), (x, out))
    np.testing.assert_allclose(out, x.reshape(-1, 4).sum(1), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------------ atomics
@pytest.mark.parametrize("kernel", ["histogram_global", "histogram_smem"])
def test_histogram_atomics_many_blocks(mods, kernel):
    data = rng.integers(0, 256, 200_000).astype(np.uint8)
    bins = np.zeros(256, np.uint32)
    fn(mods, "histogram", kernel)((64,), (256,), (data, bins, i32(data.size)))
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=256))


def test_atomics_int_and_float(mods):
    n = 4096
    xi = rng.integers(-1000, 1000, n).astype(np.int32)
    xf = (rng.standard_normal(n) * 10).astype(np.float32)
    iout = np.array([0, np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, -12345], np.int32)
    fout = np.array([0, -np.inf, np.inf], np.float32)
    fn(mods, "atomics", "atomics_mix")((16,), (256,), (xi, xf, iout, fout, i32(n)))
    assert iout[0] == xi.sum() and iout[1] == xi.max() and iout[2] == xi.min()
    assert iout[3] == 2 * n  # CAS loop increments by 2 per thread
    assert iout[4] in set(xi.tolist())
    np.testing.assert_allclose(fout[0], xf.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
    assert fout[1] == xf.max() and fout[2] == xf.min()


# ------------------------------------------------------------------------------------------------ half / bf16
def _special_floats():
    vals = [0.0, -0.0, 1.0, -2.5, 65504.0, 65519.0, 65520.0, 1e5, -1e5, 6.1e-5, 6.0e-8, 2.9802322e-08, 1e-9,
            np.inf, -np.inf, 1.0009765625, 1.00048828125, 1.000732421875, 3.14159265]
    return np.concatenate([np.array(vals, np.float32), rng.standard_normal(2000).astype(np.float32) * 100,
                           rng.standard_normal(500).astype(np.float32) * 1e-5])


def test_half_round_trip_is_rne(mods):
    x = _special_floats()
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16)
    h = np.zeros(x.size, np.float16)
    back = np.zeros_like(x)
    fn(mods, "fp16", "half_roundtrip")(((x.size + 255) // 256,), (256,), (x, h, back, i32(x.size)))
    np.testing.assert_array_equal(h.view(np.uint16), ref.view(np.uint16))
    np.testing.assert_array_equal(back, ref.astype(np.float32))


def test_bf16_round_trip_is_rne(mods):
    torch = pytest.importorskip("torch")
    x = _special_floats() * np.float32(1e30)  # exercise overflow to inf too
    x = np.concatenate([x, _special_floats()])
    h = np.zeros(x.size, np.uint16)  # bf16 bits
    back = np.zeros_like(x)
    fn(mods, "fp16", "bf16_roundtrip")(((x.size + 255) // 256,), (256,), (x, h, back, i32(x.size)))
    ref = torch.from_numpy(x).to(torch.bfloat16)
    np.testing.assert_array_equal(h, ref.view(torch.int16).numpy().view(np.uint16))
    np.testing.assert_array_equal(back, ref.float().numpy())


def test_half_arithmetic(mods):
    n = 512
    a = (rng.standard_normal(n) * 2).astype(np.float16)
    b = (rng.standard_normal(n) * 2 + 0.1).astype(np.float16)
    out = np.zeros(8 * n, np.float16)
    fn(mods, "fp16", "half_arith")((2,), (256,), (a, b, out, i32(n)))
    o = out.reshape(8, n)
    np.testing.assert_array_equal(o[0], a + b)
    np.testing.assert_array_equal(o[1], a * b)
    np.testing.assert_array_equal(o[4], np.maximum(a, b))
    np.testing.assert_array_equal(o[5], a - b)
    np.testing.assert_array_equal(o[6], -a)
    np.testing.assert_array_equal(o[7], a / b)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(o[2].astype(np.float64), af * bf + af, rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(o[3].astype(np.float64), np.exp(af), rtol=2e-3)


def test_half2_vector_ops(mods):
    n = 256
    x = rng.standard_normal(n).astype(np.float16)
    y = rng.standard_normal(n).astype(np.float16)
    out = np.zeros(n, np.float16)
    alpha = np.float16(1.5)
    fn(mods, "fp16", "half2_axpy")((1,), (128,), (x, y, out, alpha, i32(n // 2)))
    np.testing.assert_array_equal(out, (alpha * x) + y)


def test_bf16_dot_uses_raw_bits_arrays(mods):
    torch = pytest.importorskip("torch")
    a = torch.randn(1000).to(torch.bfloat16)
    b = torch.randn(1000).to(torch.bfloat16)
    out = np.zeros(1, np.float32)
    fn(mods, "fp16", "bf16_dot")((1,), (128,), (a, b.view(torch.int16).numpy(), out, i32(1000)))
    ref = (a.float() * b.float()).sum().item()
    np.testing.assert_allclose(out[0], ref, rtol=1e-4, atol=1e-3)


# ------------------------------------------------------------------------------------------------ WMMA
def test_wmma_half_gemm_16x16x16(mods):
    M, N, K = 32, 48, 64
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    Bt = np.ascontiguousarray(B.T)
    C = np.zeros((M, N), np.float32)
    fn(mods, "wmma", "wmma_gemm_half")((N // 16, M // 16), (32,), (A, Bt, C, i32(M), i32(N), i32(K)))
    np.testing.assert_allclose(C, 2 * (A.astype(np.float32) @ B.astype(np.float32)), rtol=1e-4, atol=1e-3)


def test_wmma_bf16_accumulate(mods):
    torch = pytest.importorskip("torch")
    A = torch.randn(16, 16).to(torch.bfloat16)
    B = torch.randn(16, 16).to(torch.bfloat16)
    C = rng.standard_normal((16, 16)).astype(np.float32)
    ref = C + (A.float() @ B.float()).numpy()
    fn(mods, "wmma", "wmma_bf16_acc")((1,), (32,), (A, B, C))
    np.testing.assert_allclose(C, ref, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------ vectors, math
def test_float4_loads_and_make_float4(mods):
    x = rng.standard_normal(4 * 300).astype(np.float32)
    out = np.zeros_like(x)
    fn(mods, "vec_math", "scale_float4")((3,), (128,), (x, out, np.float32(3.0), i32(300)))
    np.testing.assert_array_equal(out, x * np.float32(3.0))


def test_math_functions(mods):
    x = rng.uniform(0.1, 3.0, 300).astype(np.float32)
    out = np.zeros((300, 10), np.float32)
    fn(mods, "vec_math", "math_funcs")((3,), (128,), (x, out, i32(300)))
    xd = x.astype(np.float64)
    ref = np.stack([np.exp(xd), np.exp(xd), np.exp2(xd), np.maximum(xd, 0.5), 1 / np.sqrt(xd), 1 / xd,
                    xd * xd + 1, np.log(xd), xd, np.tanh(xd)], 1)
    np.testing.assert_allclose(out, ref, rtol=2e-6)


def test_integer_intrinsics_and_minmax(mods):
    x = rng.integers(1, 2**32 - 1, 100, dtype=np.uint64).astype(np.uint32)
    out = np.zeros((100, 4), np.uint32)
    fn(mods, "vec_math", "int_funcs")((1,), (128,), (x, out, i32(100)))
    bits = ((x[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint32)
    popc = bits.sum(1)
    clz = np.array([32 - int(v).bit_length() for v in x])
    brev = np.array([int(f"{int(v):032b}"[::-1], 2) for v in x], np.uint32)
    mm = np.maximum(x, 1000) - np.minimum(x, 1000)
    np.testing.assert_array_equal(out, np.stack([popc, clz, brev, mm], 1))


def test_softmax_rows_online(mods):
    x = rng.standard_normal((8, 100)).astype(np.float32) * 4
    y = np.zeros_like(x)
    fn(mods, "softmax", "softmax_rows")((8,), (32,), (x, y, i32(100)))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_3d_grid_and_block_indices(mods):
    grid, block = (3, 2, 2), (4, 2, 3)
    n = 12 * 24
    out = np.full(n, -1, np.int32)
    fn(mods, "softmax", "index3d")(grid, block, (out,))
    np.testing.assert_array_equal(out, np.arange(n))


# ------------------------------------------------------------------------------------------------ templates
def test_templates_by_name_expressions(mods):
    x = rng.standard_normal(200).astype(np.float32)
    y = np.zeros_like(x)
    fn(mods, "templates", "scale_t<float,64>")((4,), (64,), (x, y, np.float32(2.0), i32(200)))
    np.testing.assert_array_equal(y, 2 * x)
    xd = x.astype(np.float64)
    yd = np.zeros_like(xd)
    fn(mods, "templates", "scale_t<double,32>")((7,), (32,), (xd, yd, -1.5, i32(200)))  # Python float -> double
    np.testing.assert_array_equal(yd, -1.5 * xd)


def test_raw_kernel_from_path():
    from workbench import cuda

    k = cuda.RawKernel(CU / "templates.cu", "scale_f32")
    x = np.arange(10, dtype=np.float32)
    y = np.zeros_like(x)
    k((1,), (32,), (x, y, np.float32(3), 10))
    np.testing.assert_array_equal(y, 3 * x + 1)


# ------------------------------------------------------------------------------------------------ planted bugs
def test_missing_syncthreads_gives_wrong_result(mods):
    for _ in range(3):  # deterministic: fails every time, on every block, for the threads that read too early
        x = rng.standard_normal(4 * 256).astype(np.float32)  # fresh data: stale shared memory never matches
        ref = x.reshape(4, 256)[:, ::-1].ravel()
        bad = np.zeros_like(x)
        fn(mods, "bugs", "reverse_nosync")((4,), (256,), (x, bad))
        good = np.zeros_like(x)
        fn(mods, "bugs", "reverse_sync")((4,), (256,), (x, good))
        np.testing.assert_array_equal(good, ref)
        assert not np.allclose(bad, ref)
        wrong = (bad != ref).reshape(4, 256)
        # thread t reads s[255 - t]: threads 0..127 run before its writer, threads 128..255 after
        assert wrong[:, :128].all() and not wrong[:, 128:].any()


def test_checked_mode_reports_out_of_bounds_write(mods):
    from workbench.cuda import MemcheckError

    out = np.zeros(100, np.float32)
    with pytest.raises(MemcheckError) as ei:
        fn(mods, "bugs+checked", "oob_write")((1,), (128,), (out, i32(100)))
    e = ei.value
    assert e.total == 1
    r = e.records[0]
    assert r["kind"] == "write" and r["param"] == "out" and r["thread"] == (100, 0, 0) and r["block"] == (0, 0, 0)
    assert r["offset"] == 400 and r["buffer_bytes"] == 400 and r["size"] == 4
    msg = str(e)
    assert "oob_write" in msg and "Invalid __global__ write of size 4" in msg and "(100, 0, 0)" in msg
    np.testing.assert_array_equal(out, np.ones(100, np.float32))  # the valid writes happened


def test_checked_mode_reports_vector_read_past_end(mods):
    from workbench.cuda import MemcheckError

    x = np.ones(4 * 64, np.float32)
    out = np.zeros(64, np.float32)
    with pytest.raises(MemcheckError) as ei:
        fn(mods, "bugs+checked", "oob_read_vec4")((2,), (32,), (x, out, i32(64)))
    r = ei.value.records[0]
    assert r["kind"] == "read" and r["size"] == 16 and r["param"] == "in"
    assert r["block"] == (1, 0, 0) and r["thread"] == (31, 0, 0)


def test_unchecked_build_of_same_kernel_is_silent(mods):
    out = np.zeros(200, np.float32)  # big enough buffer: no error to report
    fn(mods, "bugs", "oob_write")((1,), (128,), (out, i32(100)))
    assert out[:101].sum() == 101


def test_divergent_barrier_is_reported_as_deadlock(mods):
    from workbench.cuda import KernelLaunchError

    with pytest.raises(KernelLaunchError, match=r"divergent_barrier.*deadlock"):
        fn(mods, "bugs", "divergent_barrier")((1,), (64,), (np.zeros(64, np.float32),))


def test_device_assert(mods):
    from workbench.cuda import KernelLaunchError

    x = np.arange(64, dtype=np.int32)
    fn(mods, "bugs", "device_assert")((1,), (64,), (x, i32(64)))
    x[37] = -1
    pat = r"device-side assert failed: x\[i\] >= 0.*bugs\.cu:\d+.*thread \(37,0,0\)"
    with pytest.raises(KernelLaunchError, match=pat):
        fn(mods, "bugs", "device_assert")((1,), (64,), (x, i32(64)))


def test_inline_ptx_is_gpu_only(mods):
    from workbench.cuda import GpuOnlyError

    out = np.zeros(32, np.uint32)
    fn(mods, "inline_ptx", "no_ptx")((1,), (32,), (out,))  # the module's other kernels still run
    np.testing.assert_array_equal(out, np.arange(32))
    with pytest.raises(GpuOnlyError) as ei:
        fn(mods, "inline_ptx", "lane_id_ptx")((1,), (32,), (out,))
    msg = str(ei.value)
    assert "lane_id_ptx" in msg and "inline PTX" in msg and "workbench.inspect" in msg and "inline_ptx.cu:4" in msg
