"""wb.profile on Triton under the interpreter: exact bytes requested, programs, tl.dot FLOPs, atomics (by hand)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import workbench as wb
from tests.conftest import requires_cpu_mode
from workbench import _triton_interp, profile_counters

pytestmark = requires_cpu_mode


@triton.jit
def _gemm_tile(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty))


def _gemm(a: torch.Tensor, b: torch.Tensor, bm: int, bn: int, bk: int) -> torch.Tensor:
    (m, k), n = a.shape, b.shape[1]
    c = wb.empty((m, n), a.dtype, a.device)
    _gemm_tile[(m // bm, n // bn)](a, b, c, m, n, k, BM=bm, BN=bn, BK=bk)
    return c


@triton.jit
def _hist(idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i = tl.load(idx_ptr + offs, mask=mask)
    tl.atomic_add(out_ptr + i, 1, mask=mask)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_triton_vecadd_requests_3_n_elements_masked_tail_excluded(dtype):
    n = 1000  # one program of BLOCK = 1024: 24 lanes masked off at each access
    x, y = wb.make_inputs("vecadd", N=n, dtype=dtype)
    p = wb.profile(wb.variant("vecadd", "triton_block"), x, y)
    elem = x.element_size()
    m = p.metrics
    assert m["wb__global_load_bytes.sum"] == 2 * n * elem
    assert m["wb__global_store_bytes.sum"] == n * elem
    assert m["wb__global_bytes.sum"] == 3 * n * elem == wb.get_op("vecadd").bytes(dtype=dtype, N=n)
    assert m["triton__load_elements.sum"] == 2 * n and m["triton__store_elements.sum"] == n
    assert m["triton__programs.sum"] == 1 and m["triton__load_calls.sum"] == 2 and m["triton__store_calls.sum"] == 1
    assert m["triton__dot_flops.sum"] == 0 and m["wb__global_atomics.sum"] == 0
    assert [(r.kernel, r.backend, r.grid) for r in p.launches] == [("add_kernel", "triton", (1, 1, 1))]
    torch.testing.assert_close(p.output, x + y)


def test_triton_gemm_tile_loads_follow_mnk_over_the_tile():
    # Each of the (M/BM)(N/BN) programs loads a BM x K panel of a and a K x BN panel of b:
    # a: M*N*K/BN elements, b: M*N*K/BM elements.
    M, N, K, BM, BN, BK = 64, 32, 48, 32, 16, 16
    a, b = wb.make_inputs("gemm", M=M, N=N, K=K)
    with _triton_interp.counting() as recs:
        p = wb.profile(lambda: _gemm(a, b, BM, BN, BK))
    elem = 4
    assert p["global load bytes"] == M * N * K * (1 / BN + 1 / BM) * elem == 36_864
    assert p["global store bytes"] == M * N * elem
    assert p["tl.dot FLOPs"] == 2 * M * N * K
    assert p["tl.dot calls"] == (M // BM) * (N // BN) * (K // BK) == 12
    assert p["Triton programs"] == (M // BM) * (N // BN) == 4
    assert p["tl.dot FLOPs per loaded byte"] == pytest.approx(2 / (elem * (1 / BM + 1 / BN)))
    (rec,) = recs  # the same launch, seen by the interpreter's own counting: bytes by tensor argument
    assert rec.by_arg["a_ptr"]["load"] == M * N * K // BN * elem
    assert rec.by_arg["b_ptr"]["load"] == M * N * K // BM * elem
    assert rec.by_arg["c_ptr"] == {"load": 0, "store": M * N * elem, "atomic": 0}
    torch.testing.assert_close(p.output, a @ b)


def test_bigger_tiles_load_less():
    a, b = wb.make_inputs("gemm", M=32, N=32, K=16)
    small = wb.profile(lambda: _gemm(a, b, 16, 16, 16))
    big = wb.profile(lambda: _gemm(a, b, 32, 32, 16))
    assert small["global load bytes"] == 2 * big["global load bytes"]
    assert small["tl.dot FLOPs"] == big["tl.dot FLOPs"] == 2 * 32 * 32 * 16


def test_atomics_count_live_lanes_and_every_launch_is_a_record():
    idx = torch.tensor([0, 1, 1, 3, 3, 3, 2], dtype=torch.int32)
    out = torch.zeros(4, dtype=torch.int32)

    def two_launches():
        _hist[(1,)](idx, out, 7, BLOCK=8)
        _hist[(2,)](idx, out, 5, BLOCK=4)

    p = wb.profile(two_launches)
    assert [(r.kernel, r.grid) for r in p.launches] == [("_hist", (1, 1, 1)), ("_hist", (2, 1, 1))]
    assert [r.counts["wb__global_atomics.sum"] for r in p.launches] == [7, 5]
    assert p["global atomics"] == 12 and p["Triton programs"] == 3
    assert p["global load bytes"] == (7 + 5) * 4
    assert out.tolist() == [2, 4, 1, 5]  # [1, 2, 1, 3] + [1, 2, 0, 2]


def test_nothing_is_counted_outside_profile_and_racecheck_only_when_sanitizing():
    from workbench._sanitize import sanitizing
    from workbench.cuda.errors import RaceError

    idx = torch.zeros(8, dtype=torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    p = wb.profile(lambda: _hist[(2,)](idx, out, 8, BLOCK=4))  # atomics from two programs: no race
    assert p["global atomics"] == 8
    with _triton_interp.counting() as recs:
        _hist[(1,)](idx, out, 8, BLOCK=8)
    assert len(recs) == 1 and not profile_counters.active()
    x, y = wb.make_inputs("vecadd", N=8)
    v = wb.variant("vecadd", "wrong_in_place")  # stores into its input: counted, not a sanitizer finding
    assert wb.profile(v, x, y)["global store bytes"] == 8 * 4
    with sanitizing(), pytest.raises(RaceError):  # the checker's run still sees a race where there is one
        _racy[(2,)](out)


@triton.jit
def _racy(out_ptr):
    tl.store(out_ptr, tl.program_id(0))  # every program stores to element 0: a write-write race


def test_profile_report_says_triton_traffic_is_requested_bytes_not_sectors():
    x, y = wb.make_inputs("vecadd", N=64)
    text = str(wb.profile(wb.variant("vecadd", "triton_block"), x, y).report())
    assert "tl.load elements" in text and "not sectors" in text and "coalescing" in text


def test_every_triton_counter_is_in_the_catalogue_at_import():
    from workbench import profile_metrics

    assert {k: profile_metrics.METRICS[k].kind for k in _triton_interp.TRITON_METRICS.values()} == dict.fromkeys(
        _triton_interp.TRITON_METRICS.values(), "sum")
    assert "triton__dot_flops_per_load_byte.ratio" in profile_metrics.METRICS and callable(wb.profile)
