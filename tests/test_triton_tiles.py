"""The Triton tile helpers kernels share (kernels/_triton_tiles.py): the grouped tile order."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import workbench as wb
from kernels._triton_tiles import grouped_tile


@triton.jit
def _order_kernel(out_ptr, n_m, n_n, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pm, pn = grouped_tile(pid, n_m, n_n, GROUP_M)
    tl.store(out_ptr + 2 * pid, pm)
    tl.store(out_ptr + 2 * pid + 1, pn)


def test_grouped_tile_visits_every_tile_once_group_by_group():
    """5 x 3 tiles in groups of 2 tile-rows (the last group short): each tile once, a group's rows walked first."""
    n_m, n_n = 5, 3
    out = torch.full((n_m * n_n, 2), -1, dtype=torch.int32, device=wb.device())
    _order_kernel[(n_m * n_n,)](out, n_m, n_n, GROUP_M=2)
    order = [tuple(r) for r in out.cpu().tolist()]
    assert sorted(order) == [(m, n) for m in range(n_m) for n in range(n_n)]
    assert order[:6] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)] and order[-3:] == [(4, 0), (4, 1), (4, 2)]
