"""cooperative_groups on the CPU engine (tests/cuda/cg_kernels.cu), and __shared__ alignment (smem_align.cu).

The kernels are written as llm.c's dev/cuda writes them: warp reductions with cg::reduce over a 32-thread tile,
block reductions through meta_group_rank() and shared memory, layernorm statistics, Packed128 bf16 vectors, and
a float4 read of a shared float tile. Each also passes the NVRTC gate, which compiles it against CUDA's own headers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench._mode import MODE

pytestmark = pytest.mark.skipif(MODE != "cpu", reason="the CPU engine's cooperative groups (gpu mode runs cupy)")

CU = Path(__file__).parent / "cuda"
TILES = (1, 2, 4, 8, 16, 32)
rng = np.random.default_rng(7)
i32 = np.int32


@pytest.fixture(scope="module")
def cg():
    from workbench import cuda

    return cuda.RawModule(code=CU / "cg_kernels.cu", name_expressions=[f"tile_probe<{n}>" for n in TILES]).compile()


def test_the_gpu_compiler_accepts_the_kernels(cg):
    v = cg._verdict  # NVRTC (sm_90, cupy's options, CUDA's real <cooperative_groups.h>) compiled the same file
    assert v is not None and v.ok, v and v.log
    assert {"softmax_warp_cg", "row_stats_block_cg", "layernorm_stats_cg", "scale_rowsum_bf16_packed"} <= set(v.entries)
    assert set(v.lowered) == {f"tile_probe<{n}>" for n in TILES}


def test_softmax_warp_reduce(cg):
    n, c = 7, 100  # 3 warps (rows) per block, the last block part empty
    x = rng.standard_normal((n, c)).astype(np.float32) * 4
    out = np.zeros_like(x)
    cg.get_function("softmax_warp_cg")((3,), (96,), (out, x, i32(n), i32(c)))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("block", [96, 256])
def test_block_reduction_through_meta_group_rank(cg, block):
    n, c = 3, 1000
    x = rng.standard_normal((n, c)).astype(np.float32)
    s, lo, hi = (np.zeros(n, np.float32) for _ in range(3))
    cg.get_function("row_stats_block_cg")((n,), (block,), (x, s, lo, hi, i32(c)), checked=True)  # race-free too
    np.testing.assert_allclose(s, x.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(lo, x.min(1))
    np.testing.assert_array_equal(hi, x.max(1))


def test_layernorm_mean_rstd(cg):
    n, c = 10, 768
    x = rng.standard_normal((n, c)).astype(np.float32) * 2 + 1
    mean, rstd = np.zeros(n, np.float32), np.zeros(n, np.float32)
    cg.get_function("layernorm_stats_cg")((3,), (128,), (mean, rstd, x, i32(n), i32(c)))
    np.testing.assert_allclose(mean, x.mean(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(x.var(1) + 1e-5), rtol=1e-4)


def _to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest, ties to even), as raw uint16 bits."""
    b = x.astype(np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def test_packed128_bf16_vectors(cg):
    n, c = 5, 512
    x = _to_bf16(rng.standard_normal((n, c)).astype(np.float32))
    out, rowsum = np.zeros_like(x), np.zeros(n, np.float32)
    cg.get_function("scale_rowsum_bf16_packed")((2,), (128,), (out, rowsum, x, np.float32(0.5), i32(n), i32(c)))
    np.testing.assert_array_equal(out, _to_bf16(_from_bf16(x) * np.float32(0.5)))
    np.testing.assert_allclose(rowsum, _from_bf16(x).sum(1), rtol=1e-4, atol=1e-3)


def _tile_expect(n: int, block: int, pred: np.ndarray) -> np.ndarray:
    r = np.arange(block)
    tr, base, v = r % n, r - r % n, 100 + r
    tiles = [slice(b, b + n) for b in base]
    e = np.zeros((block, 16), np.int64)
    e[:, 0], e[:, 1], e[:, 2], e[:, 3], e[:, 4] = tr, r // n, -(-block // n), n, n
    e[:, 5] = 100 + base
    e[:, 6] = np.where(tr + 1 < n, v + 1, v)
    e[:, 7] = np.where(tr >= 1, v - 1, v)
    e[:, 8] = 100 + base + (tr ^ 1) if n > 1 else v
    e[:, 9] = [pred[t].any() for t in tiles]
    e[:, 10] = [pred[t].all() for t in tiles]
    e[:, 11] = [sum(int(p) << i for i, p in enumerate(pred[t])) for t in tiles]
    e[:, 12] = [v[t].sum() for t in tiles]
    e[:, 13] = [v[t].max() for t in tiles]
    e[:, 14] = [v[t].min() for t in tiles]
    e[:, 15] = tr * 1000 + n
    return e


@pytest.mark.parametrize("n", TILES)
def test_tiled_partition(cg, n):
    block = (16, 4)  # 64 threads, ranked x fastest: two warps
    pred = (rng.random(64) < 0.6).astype(np.int32)
    pred[:n] = 1  # one tile all true
    out = np.zeros((64, 16), np.int32)
    cg.get_function(f"tile_probe<{n}>")((1,), block, (out, pred))
    got = out.astype(np.int64)
    got[:, 11] &= 0xFFFFFFFF
    np.testing.assert_array_equal(got, _tile_expect(n, 64, pred))


def test_a_block_that_tiles_do_not_divide_stops_the_launch(cg):
    from workbench.cuda import KernelLaunchError

    out = np.zeros((48, 16), np.int32)
    with pytest.raises(KernelLaunchError, match=r"group of 48 threads cannot be split into tiles of 32"):
        cg.get_function("tile_probe<32>")((1,), (48,), (out, np.ones(48, np.int32)))
    cg.get_function("tile_probe<16>")((1,), (48,), (out, np.ones(48, np.int32)))  # 48 = 3 x 16: fine
    assert (out[:, 2] == 3).all()


def test_thread_block_and_grid_groups(cg):
    grid, block = (2, 3), (4, 2, 2)
    nb, nt = 6, 16
    out = np.zeros((nb * nt, 8), np.int32)
    cg.get_function("block_grid_probe")(grid, block, (out,))
    tz, ty, tx = np.meshgrid(range(2), range(2), range(4), indexing="ij")
    for by in range(3):
        for bx in range(2):
            br = by * 2 + bx
            o = out[br * nt:(br + 1) * nt]
            np.testing.assert_array_equal(o[:, 0], np.arange(nt))
            assert (o[:, 1] == nt).all() and (o[:, 2] == nt).all() and (o[:, 3] == bx + 10 * by).all()
            np.testing.assert_array_equal(o[:, 4], (tx + 10 * ty + 100 * tz).ravel())
            assert (o[:, 5] == 4 + 20 + 200).all() and (o[:, 6] == br).all() and (o[:, 7] == nb * nt).all()


def test_grid_sync_needs_a_cooperative_launch(cg):
    from workbench.cuda import KernelLaunchError

    with pytest.raises(KernelLaunchError, match=r"grid_group::sync\(\) needs a cooperative launch"):
        cg.get_function("grid_sync_probe")((2,), (32,), (np.zeros(64, np.int32),))


def test_tile_sizes_that_are_not_powers_of_two_are_refused():
    from workbench import cuda

    src = ('#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\nextern "C" __global__ void k(int* o) '
           "{ auto t = cg::tiled_partition<3>(cg::this_thread_block()); o[0] = t.size(); }\n")
    with pytest.raises(cuda.FrontendError, match="NVRTC"):
        cuda.RawKernel(src, "k").compile()
    with pytest.raises(cuda.CompileError, match="N must be a power of two"):
        cuda.RawKernel(src, "k", frontend=False).compile()  # the engine's own header says so too


# ------------------------------------------------------------------------------------------ __shared__ alignment
@pytest.fixture(scope="module")
def smem():
    from workbench import cuda

    return cuda.RawModule(code=CU / "smem_align.cu").compile()


def test_shared_variables_are_aligned_as_nvcc_aligns_them(smem):
    out = np.zeros(6, np.uint32)
    smem.get_function("smem_addresses")((1,), (32,), (out,), shared_mem=64)
    assert (out % 16 == 0).all(), f"shared addresses mod 256: {out} (each must be 16-byte aligned)"
    assert out[3] % 128 == 0, "__align__(128) not honoured"


@pytest.mark.parametrize("checked", [False, True])
def test_float4_reads_of_a_shared_float_tile(smem, checked):
    a = rng.standard_normal((4, 128)).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    out = np.zeros(4, np.float32)
    smem.get_function("row_dot4")((4,), (32,), (a, b, out, i32(128)), checked=checked)  # memcheck: no misalignment
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
