"""wb.counters_table: a ladder's variants side by side, with numbers worked out by hand.

vecadd at N=1024 fp32 has 12,288 compulsory bytes (x and y read once, z written once: 3 x 4 KiB).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import workbench as wb
from workbench import cuda
from workbench.interop import to_raw

pytestmark = pytest.mark.skipif(wb.mode() != "cpu", reason="emulator counts (cpu mode)")

SRC = r"""
// One thread per element: a warp reads 32 consecutive floats (4 sectors).
extern "C" __global__ void add_grid(const float* x, const float* y, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}
// Each thread adds its own chunk of 8 consecutive elements: a warp's lanes are 32 bytes apart (32 sectors).
extern "C" __global__ void add_chunked(const float* x, const float* y, float* z, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int j = 0; j < 8; ++j) { int i = t * 8 + j; if (i < n) z[i] = x[i] + y[i]; }
}
// n = 1024 as a 32x32 tile: x staged by rows, read back by columns (ld = 32: 32-way conflicts; 33: none);
// thread (r, c) adds element (c, r), so y and z are read and written by columns (32 sectors per request).
extern "C" __global__ void add_via_tile(const float* x, const float* y, float* z, int ld) {
  __shared__ float t[32 * 33];
  int r = threadIdx.y, c = threadIdx.x;
  t[r * ld + c] = x[r * 32 + c];
  __syncthreads();
  z[c * 32 + r] = t[c * ld + r] + y[c * 32 + r];
}
"""

N = 1024
COMPULSORY = 3 * N * 4


@pytest.fixture(scope="module")
def mod():
    return cuda.RawModule(code=SRC)


def _launcher(mod, name, grid, block, extra=()):
    k = mod.get_function(name)

    def run(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = torch.empty_like(x)
        k(grid, block, (to_raw(x), to_raw(y), to_raw(z), *extra))
        return z

    run.__name__ = name
    return run


def test_coalesced_vs_chunked(mod):
    x, y = wb.make_inputs("vecadd", N=N)
    grid = _launcher(mod, "add_grid", (N // 128,), (128,), (np.int32(N),))
    chunked = _launcher(mod, "add_chunked", (1,), (128,), (np.int32(N),))
    t = wb.counters_table("vecadd", [grid, ("chunks of 8", chunked)], x, y)
    assert t.compulsory_bytes == COMPULSORY
    g, c = t["add_grid"], t["chunks of 8"]
    assert (g.sectors_per_load, g.sectors_per_store, g.load_efficiency) == (4, 4, 1.0)
    assert g.global_bytes == COMPULSORY and g.amplification == 1.0
    assert g.bank_conflicts == 0 and g.backends == "cuda" and g.launches == 1
    # 4 warps x 8 iterations x (2 loads + 1 store), each 32 lanes in 32 sectors of 32 B: 96 x 1 KiB.
    assert (c.sectors_per_load, c.sectors_per_store) == (32, 32)
    assert c.load_efficiency == pytest.approx(4 / 32)
    assert c.global_bytes == 96 * 1024 and c.amplification == 8.0
    torch.testing.assert_close(c.profile.output, x + y)  # the profiled call computed the sum
    text = str(t)
    assert "12,288 B" in text and "98,304 B" in text and "8x" in text and "L1-level" in text
    assert "<table" in t._repr_html_() and "| chunks of 8 | cuda | 32 | 32 | 12.5% |" in t._repr_markdown_()


@pytest.mark.parametrize("ld, conflicts", [(32, 32 * 31), (33, 0)])
def test_bank_conflicts_and_column_traffic(mod, ld, conflicts):
    x, y = wb.make_inputs("vecadd", N=N)
    fn = _launcher(mod, "add_via_tile", (1,), (32, 32), (np.int32(ld),))
    r = wb.counters_table("vecadd", {f"ld={ld}": fn}, x, y)[f"ld={ld}"]
    # 32 shared load requests (one per warp), each a column of the tile: 32 wavefronts unpadded, 1 padded.
    assert r.bank_conflicts == conflicts
    # x by rows: 32 requests x 4 sectors; y by columns: 32 x 32; z by columns: 32 x 32 (sectors of 32 B).
    assert r.sectors_per_load == (32 * 4 + 32 * 32) / 64 == 18
    assert r.sectors_per_store == 32
    assert r.global_bytes == (32 * 4 + 32 * 32 + 32 * 32) * 32 == 69_632
    assert r.amplification == pytest.approx(69_632 / COMPULSORY)
    torch.testing.assert_close(r.profile.output.view(32, 32), (x + y).view(32, 32))


def test_registered_variants_by_name_masked_tail_and_triton():
    # N = 1000: 31 full warps and one of 8 lanes per array; the 8 floats at 3968 B are one aligned sector.
    t = wb.counters_table("vecadd", ["cuda_grid", "vecadd/triton_block"], N=1000)
    c, tr = t["cuda_grid"], t["triton_block"]
    assert t.compulsory_bytes == 3 * 1000 * 4 and t.shape == {"N": 1000} and t.dtype == torch.float32
    assert c.global_bytes == 3 * (31 * 4 + 1) * 32 == 12_000 and c.amplification == 1.0
    assert c.sectors_per_load == (31 * 4 + 1) / 32
    # Triton: bytes of unmasked lanes, no sectors and no shared-memory model.
    assert tr.global_bytes == 12_000 and tr.amplification == 1.0 and tr.backends == "triton"
    assert tr.sectors_per_load is None and tr.bank_conflicts is None
    assert "-" in t.cells()[1][2]


def test_uncounted_call_says_so():
    t = wb.counters_table("vecadd", [("torch", lambda x, y: x + y)], N=64)
    r = t["torch"]
    assert r.global_bytes is None and r.amplification is None and not r.counted
    assert "not counted" in str(t) and "torch/numpy operations are not counted" in str(t)


def test_bad_input_names_the_op():
    with pytest.raises(ValueError, match=r"counters_table\('vecadd'\): pass the inputs, or the sizes.*N=\.\.\."):
        wb.counters_table("vecadd", ["cuda_grid"])
    x, y = wb.make_inputs("vecadd", N=8)
    with pytest.raises(ValueError, match="either inputs or sizes"):
        wb.counters_table("vecadd", ["cuda_grid"], x, y, N=8)
    with pytest.raises(ValueError, match="belongs to op 'gemm'"):
        wb.counters_table("vecadd", [wb.variant("gemm", "cuda_naive")], x, y)
    with pytest.raises(ValueError, match="appear twice"):
        wb.counters_table("vecadd", ["cuda_grid", "cuda_grid"], x, y)
    with pytest.raises(TypeError, match="expected variant names"):
        wb.counters_table("vecadd", [3], x, y)
    with pytest.raises(KeyError, match="no row 'nope'"):
        wb.counters_table("vecadd", ["cuda_grid"], x, y)["nope"]


def test_a_call_the_profiler_refuses_is_a_row_saying_why(monkeypatch):
    from workbench import profile_counters as P

    def refuse(*a, **k):
        raise P.NcuNotFoundError("ncu is not on PATH")

    monkeypatch.setattr(P, "profile", refuse)
    t = wb.counters_table("vecadd", ["cuda_grid"], N=64)
    assert t["cuda_grid"].global_bytes is None and "ncu is not on PATH" in str(t)


def test_table_flops_follow_the_call_options():
    from workbench.counters import CountersTable

    shape = {"B": 1, "H": 2, "Sq": 16, "Sk": 16, "D": 8}
    full = CountersTable("attention", shape, torch.float32, 1.0, [])
    causal = CountersTable("attention", shape, torch.float32, 1.0, [], kwargs={"causal": True})
    assert full.flops() == 4 * 2 * 16 * 16 * 8 and causal.flops() == full.flops() / 2


def test_a_variant_that_cannot_run_here_is_a_row_saying_why():
    t = wb.counters_table("gemm", ["cuda_smem", "cuda_wgmma_tma"], M=16, N=16, K=16, dtype="float16")
    assert t["cuda_smem"].counted and t["cuda_smem"].global_bytes > 0
    r = t["cuda_wgmma_tma"]
    assert r.global_bytes is None and r.note.startswith("not run here: gemm/cuda_wgmma_tma is GPU-only")
    assert "cuda_wgmma_tma: not run here" in str(t)
