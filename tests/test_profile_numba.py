"""wb.profile on the Numba CUDA simulator: the same exact counts as the CUDA C engine, from the simulator's logs.

The simulator runs one OS thread per CUDA thread: the launches here stay at one or two small blocks.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb

pytestmark = pytest.mark.skipif(wb.mode() != "cpu", reason="emulator counts (cpu mode)")
numba_cuda = pytest.importorskip("numba.cuda")
cuda = numba_cuda
from numba import float32, float64  # noqa: E402


@cuda.jit
def copy(x, y, n, stride):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        y[i] = x[i * stride]


@cuda.jit
def columns(x, y):
    t = cuda.shared.array((32, 32), float32)
    r, c = cuda.threadIdx.y, cuda.threadIdx.x
    t[r, c] = x[r, c]
    cuda.syncthreads()
    y[r, c] = t[c, r]


@cuda.jit
def columns_padded(x, y):
    t = cuda.shared.array((32, 33), float32)
    r, c = cuda.threadIdx.y, cuda.threadIdx.x
    t[r, c] = x[r, c]
    cuda.syncthreads()
    y[r, c] = t[c, r]


@cuda.jit
def broadcast_and_atomics(x, y, total):
    t = cuda.shared.array(32, float32)
    i = cuda.threadIdx.x
    t[i] = x[i]
    cuda.syncthreads()
    y[i] = t[0]
    cuda.atomic.add(total, 0, x[i])


@cuda.jit
def doubles(x, y, step):
    t = cuda.shared.array(1024, float64)
    i = cuda.threadIdx.x
    for k in range(32):
        t[k * 32 + i] = x[k * 32 + i]
    cuda.syncthreads()
    y[i] = t[i * step]


def test_coalesced_strided_and_masked_loads():
    n = 256
    x, y = np.arange(n * 32, dtype=np.float32), np.zeros(n, np.float32)
    p = wb.profile(lambda: copy[(2,), (128,)](x, y, n, 1))
    assert p["global load requests"] == n // 32 and p["global load sectors"] == n * 4 // 32
    assert p["sectors per store request"] == 4 and (y == x[:n]).all()
    assert [(r.kernel, r.backend, r.grid, r.block) for r in p.launches] == [("copy", "numba", (2, 1, 1), (128, 1, 1))]
    p = wb.profile(lambda: copy[(2,), (128,)](x, y, n, 32))
    assert p["sectors per load request"] == 32 and p["global load efficiency"] == pytest.approx(0.125)
    p = wb.profile(lambda: copy[(2,), (128,)](x, y, 200, 1))  # 200 of 256 lanes: warps 6 (8 lanes) and 7 (none)
    assert p["global load requests"] == 7
    assert p.get("smsp__sass_thread_inst_executed_op_global_ld_pred_on.sum") == 200
    assert p["global load sectors"] == 200 * 4 // 32


@pytest.mark.parametrize("kernel, wavefronts", [(columns, 32), (columns_padded, 1)])
def test_tile_columns(kernel, wavefronts):
    x, y = np.arange(1024, dtype=np.float32).reshape(32, 32), np.zeros((32, 32), np.float32)
    p = wb.profile(lambda: kernel[(1,), (32, 32)](x, y))
    assert (y == x.T).all()
    assert p["shared load requests"] == 32 and p["wavefronts per shared load request"] == wavefronts
    assert p["shared load bank conflicts"] == 32 * (wavefronts - 1)
    assert p["shared store wavefronts"] == 32 and p["barriers"] == 32


def test_broadcast_atomics_and_8_byte_accesses():
    x, y, total = np.ones(32, np.float32), np.zeros(32, np.float32), np.zeros(1, np.float32)
    p = wb.profile(lambda: broadcast_and_atomics[(1,), (32,)](x, y, total))
    assert total[0] == 32
    assert p["shared load wavefronts"] == 1 and p["shared bank conflicts"] == 0
    assert p["global atomics"] == 32 and p["global atomic requests"] == 1
    assert p["global load requests"] == 2  # x[i] twice; the atomic is neither a load nor a store
    xd, yd = np.arange(1024, dtype=np.float64), np.zeros(32, np.float64)
    p = wb.profile(lambda: doubles[(1,), (32,)](xd, yd, 32))  # a column of a 32x32 double tile
    assert (yd == xd[np.arange(32) * 32]).all()
    assert p["wavefronts per shared load request"] == 32 and p["shared load bank conflicts"] == 30
    assert p["shared store wavefronts"] == 32 * 2  # consecutive doubles: one wavefront per half-warp


def test_numba_variant_matches_the_cuda_c_counts():
    pn = wb.profile("vecadd/numba_grid", N=100, dtype="float32")
    pc = wb.profile("vecadd/cuda_grid", N=100, dtype="float32")
    keys = ["global load requests", "global load sectors", "global store requests", "global store sectors",
            "global bytes"]
    assert [pn[k] for k in keys] == [pc[k] for k in keys]
    assert pn["global load sectors"] == 2 * -(-100 * 4 // 32)
