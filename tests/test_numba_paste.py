"""Numba kernels written the way GPU-Puzzles and the tutorials write them run unchanged on the simulator.

GPU-Puzzles hands ``numba.cuda`` into a factory and compiles the closure it returns (``cuda.jit(puzzle(cuda))``),
so the kernel reaches ``cuda.threadIdx`` through a closure cell, not a global the simulator swaps. Each puzzle here
is one of ours in that style, run at a tiny size and compared with numpy; the launch-configuration tests check that
the simulator refuses what a GPU's driver refuses.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from tests.conftest import requires_cpu_mode
from workbench._sanitize import sanitizing
from workbench.cuda.errors import LaunchConfigError, MemcheckError

pytestmark = requires_cpu_mode

if wb.mode() == "cpu":
    import numba
    from numba import cuda

TPB = 4  # threads per block of the shared-memory puzzles (a notebook global, as in GPU-Puzzles)
HALO_TPB = TPB + 2


def launch(factory, out, inputs, args=(), blocks=(1, 1), threads=(1, 1)) -> np.ndarray:
    """Compile ``factory(numba.cuda)`` and launch it as GPU-Puzzles' harness does: out, inputs, then sizes."""
    kernel = numba.cuda.jit(factory(numba.cuda))
    kernel[blocks, threads](out, *inputs, *args)
    return out


# ------------------------------------------------------------------------------------------------- the puzzles
def map_puzzle(cuda):
    def call(out, a) -> None:
        local_i = cuda.threadIdx.x
        out[local_i] = a[local_i] + 10
    return call


def zip_puzzle(cuda):
    def call(out, a, b) -> None:
        i = cuda.threadIdx.x
        out[i] = a[i] * b[i]
    return call


def guard_puzzle(cuda):
    def call(out, a, size) -> None:
        i = cuda.threadIdx.x
        if i < size:
            out[i] = a[i] - 1
    return call


def map2d_puzzle(cuda):
    def call(out, a, size) -> None:
        row, col = cuda.threadIdx.y, cuda.threadIdx.x
        if row < size and col < size:
            out[row, col] = a[row, col] * 2
    return call


def broadcast_puzzle(cuda):
    def call(out, a, b, size) -> None:
        row, col = cuda.threadIdx.y, cuda.threadIdx.x
        if row < size and col < size:
            out[row, col] = a[row, 0] + b[0, col]
    return call


def blocks_puzzle(cuda):
    def call(out, a, size) -> None:
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if i < size:
            out[i] = a[i] + 100 * cuda.blockIdx.x
    return call


def grid_puzzle(cuda):
    def call(out, a, size) -> None:
        i = cuda.grid(1)
        if i < size:
            out[i] = a[i] + cuda.gridDim.x
    return call


def shared_puzzle(cuda):
    def call(out, a, size) -> None:
        tile = cuda.shared.array(TPB, numba.float32)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * cuda.blockDim.x + t
        tile[t] = a[i] if i < size else 0.0
        cuda.syncthreads()
        if i < size:
            out[i] = tile[TPB - 1 - t]  # another thread's element: wrong without the barrier
    return call


def pooling_puzzle(cuda):
    def call(out, a, size) -> None:
        tile = cuda.shared.array(HALO_TPB, numba.float32)  # a shape must be a constant: no TPB + 2 here
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * cuda.blockDim.x + t
        tile[t + 2] = a[i] if i < size else 0.0
        if t < 2:
            src = i - 2
            tile[t] = a[src] if src >= 0 else 0.0  # guarded: never a negative index
        cuda.syncthreads()
        if i < size:
            out[i] = tile[t] + tile[t + 1] + tile[t + 2]
    return call


def dot_puzzle(cuda):
    def call(out, a, b, size) -> None:
        part = cuda.shared.array(TPB, numba.float32)
        t = cuda.threadIdx.x
        part[t] = a[t] * b[t] if t < size else 0.0
        cuda.syncthreads()
        stride = TPB // 2
        while stride > 0:
            if t < stride:
                part[t] += part[t + stride]
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            out[0] = part[0]
    return call


def scan_puzzle(cuda):
    def call(out, a, size) -> None:
        buf = cuda.shared.array((2, TPB), numba.float32)  # double-buffered Hillis-Steele inclusive scan
        t = cuda.threadIdx.x
        buf[0, t] = a[t] if t < size else 0.0
        cuda.syncthreads()
        src, step = 0, 1
        while step < TPB:
            v = buf[src, t]
            if t >= step:
                v += buf[src, t - step]
            buf[1 - src, t] = v
            cuda.syncthreads()
            src, step = 1 - src, step * 2
        if t < size:
            out[t] = buf[src, t]
    return call


def matmul_puzzle(cuda):
    def call(out, a, b, size) -> None:
        sa = cuda.shared.array((TPB, TPB), numba.float32)
        sb = cuda.shared.array((TPB, TPB), numba.float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row, col = cuda.blockIdx.y * TPB + ty, cuda.blockIdx.x * TPB + tx
        acc = 0.0
        for k0 in range(0, size, TPB):
            sa[ty, tx] = a[row, k0 + tx] if row < size and k0 + tx < size else 0.0
            sb[ty, tx] = b[k0 + ty, col] if k0 + ty < size and col < size else 0.0
            cuda.syncthreads()
            for k in range(TPB):
                acc += sa[ty, k] * sb[k, tx]
            cuda.syncthreads()
        if row < size and col < size:
            out[row, col] = acc
    return call


def atomic_local_puzzle(cuda):
    def call(out, a, size) -> None:
        mine = cuda.local.array(2, numba.float32)
        i = cuda.grid(1)
        mine[0] = a[i] if i < size else 0.0
        mine[1] = mine[0] * mine[0]
        cuda.atomic.add(out, 0, mine[0])
        cuda.atomic.add(out, 1, mine[1])
    return call


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-4, 5, size=shape).astype(np.float32)


@pytest.mark.parametrize("name", ["map", "zip", "guard", "map2d", "broadcast", "blocks", "grid", "atomic_local"])
def test_simple_puzzles_run_as_closures(name):
    a, b = np.arange(8, dtype=np.float32), np.arange(8, dtype=np.float32)[::-1].copy()
    a2, b2 = _f32(3, 1, seed=1), _f32(1, 3, seed=2)
    cases = {
        "map": (map_puzzle, (a[:4],), (), (1, 1), (4, 1), a[:4] + 10),
        "zip": (zip_puzzle, (a[:4], b[:4]), (), (1, 1), (4, 1), a[:4] * b[:4]),
        "guard": (guard_puzzle, (a[:4],), (4,), (1, 1), (8, 1), a[:4] - 1),
        "map2d": (map2d_puzzle, (a[:4].reshape(2, 2),), (2,), (1, 1), (3, 3), a[:4].reshape(2, 2) * 2),
        "broadcast": (broadcast_puzzle, (a2, b2), (3,), (1, 1), (4, 4), a2 + b2),
        "blocks": (blocks_puzzle, (a[:7],), (7,), (2, 1), (4, 1), a[:7] + 100 * (np.arange(7) // 4)),
        "grid": (grid_puzzle, (a[:5],), (5,), (3, 1), (2, 1), a[:5] + 3),
        "atomic_local": (atomic_local_puzzle, (a[:6],), (6,), (2, 1), (4, 1),
                         np.array([a[:6].sum(), (a[:6] ** 2).sum()], np.float32)),
    }
    factory, inputs, args, blocks, threads, want = cases[name]
    out = launch(factory, np.zeros(want.shape, np.float32), inputs, args, blocks, threads)
    np.testing.assert_array_equal(out, want)


def test_shared_memory_puzzles_run_as_closures():
    a, b = _f32(7, seed=3), _f32(4, seed=4)
    out = launch(shared_puzzle, np.zeros(7, np.float32), (a,), (7,), (2, 1), (TPB, 1))
    padded = np.concatenate([a, np.zeros(1, np.float32)])
    np.testing.assert_array_equal(out, padded.reshape(2, TPB)[:, ::-1].reshape(-1)[:7])

    out = launch(pooling_puzzle, np.zeros(7, np.float32), (a,), (7,), (2, 1), (TPB, 1))
    want = a + np.concatenate([[0], a[:-1]]) + np.concatenate([[0, 0], a[:-2]])
    np.testing.assert_allclose(out, want)

    out = launch(dot_puzzle, np.zeros(1, np.float32), (a[:3], b[:3]), (3,), (1, 1), (TPB, 1))
    np.testing.assert_allclose(out, [np.dot(a[:3], b[:3])])

    out = launch(scan_puzzle, np.zeros(4, np.float32), (b,), (4,), (1, 1), (TPB, 1))
    np.testing.assert_allclose(out, np.cumsum(b))


def test_two_shared_arrays_on_one_line_stay_apart():
    def swap(cuda):
        def call(out, a) -> None:
            sa, sb = cuda.shared.array(TPB, numba.float32), cuda.shared.array(TPB, numba.float32)
            t = cuda.threadIdx.x
            sa[t], sb[t] = a[t], -a[t]
            cuda.syncthreads()
            out[t] = sa[t] + 10 * sb[TPB - 1 - t]
        return call

    a = np.arange(TPB, dtype=np.float32)
    out = launch(swap, np.zeros(TPB, np.float32), (a,), (), (1, 1), (TPB, 1))
    np.testing.assert_array_equal(out, a - 10 * a[::-1])


def test_tiled_matmul_puzzle_runs_as_a_closure():
    a, b = _f32(5, 5, seed=5), _f32(5, 5, seed=6)
    out = launch(matmul_puzzle, np.zeros((5, 5), np.float32), (a, b), (5,), (2, 2), (TPB, TPB))
    np.testing.assert_allclose(out, a @ b)


def test_every_thread_of_a_closure_sees_its_own_indices():
    def who(cuda):
        def call(out) -> None:
            x, y = cuda.grid(2)
            out[y, x, 0] = cuda.threadIdx.x + 10 * cuda.threadIdx.y
            out[y, x, 1] = cuda.blockIdx.x + 10 * cuda.blockIdx.y
            out[y, x, 2] = cuda.laneid
        return call

    out = launch(who, np.full((4, 6, 3), -1, np.int32), (), (), (3, 2), (2, 2))
    y, x = np.mgrid[0:4, 0:6]
    np.testing.assert_array_equal(out[..., 0], x % 2 + 10 * (y % 2))
    np.testing.assert_array_equal(out[..., 1], x // 2 + 10 * (y // 2))
    np.testing.assert_array_equal(out[..., 2], x % 2 + 2 * (y % 2))


def test_decorated_closures_device_functions_and_a_global_numba_work():
    def make(scale):
        from numba import cuda as cu  # a local name the simulator's globals swap never sees

        @cu.jit(device=True)
        def twice(v):
            return 2 * v

        @cu.jit
        def scaled(out, a):
            i = cu.threadIdx.x
            out[i] = twice(a[i]) * scale + numba.cuda.blockDim.x  # numba.cuda through the module global
        return scaled

    a = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    make(3)[1, 4](out, a)
    np.testing.assert_array_equal(out, 6 * a + 4)


def test_a_closure_runs_checked_and_its_bug_is_reported():
    def unguarded(cuda):
        def call(out, a) -> None:
            tile = cuda.shared.array(TPB, numba.float32)
            t = cuda.threadIdx.x
            tile[t] = a[t]  # a has 3 elements, the block 4 threads
            cuda.syncthreads()
            out[t] = tile[t]
        return call

    with sanitizing(), pytest.raises(MemcheckError) as info:
        launch(unguarded, np.zeros(4, np.float32), (np.ones(3, np.float32),), (), (1, 1), (TPB, 1))
    r = info.value.records[0]
    assert (r["array"], r["index"], r["thread"], r["kernel"]) == ("a", (3,), (3, 0, 0), "call")


def module_level(out, a):  # the tutorials' style: the module's global ``cuda``, which the simulator swaps
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] * cuda.blockDim.x


def test_the_module_level_style_still_works():
    a = np.arange(5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    cuda.jit(module_level)[2, 4](out, a)
    np.testing.assert_array_equal(out, a * 4)


def test_a_negative_index_wraps_as_numba_compiles_it_for_a_gpu():
    # Numba's CUDA compiler wraps a signed negative index like numpy: for ``a[i - 1]`` its sm_90 PTX is
    # ``setp.lt.s32 %p, %tid, 1; selp.b64 %off, <extent>, 0, %p`` (the extent added when i - 1 < 0). An
    # unchecked launch must give the GPU's answer; the sanitizer still reports it as a likely missing guard.
    def shift(cuda):
        def call(out, a) -> None:
            i = cuda.threadIdx.x
            out[i] = a[i - 1]
        return call

    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(launch(shift, np.zeros(4, np.float32), (a,), (), (1, 1), (4, 1)), np.roll(a, 1))


def test_warp_intrinsics_say_the_simulator_lacks_them():
    from workbench.cuda.errors import GpuOnlyError

    def warp_sum(cuda):
        def call(out, a) -> None:
            v = a[cuda.threadIdx.x]
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, 1)
            out[0] = v
        return call

    with pytest.raises(GpuOnlyError, match=r"cuda.shfl_down_sync: the Numba CUDA simulator has no warp-level"):
        launch(warp_sum, np.zeros(1, np.float32), (np.ones(2, np.float32),), (), (1, 1), (2, 1))


def test_outside_a_kernel_the_in_kernel_names_say_so():
    with pytest.raises(AttributeError, match="inside a running kernel"):
        numba.cuda.threadIdx  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'$"):
        numba.cuda.no_such_thing  # noqa: B018


# ------------------------------------------------------------------------------------- what a GPU's driver refuses
@pytest.mark.parametrize(("grid", "block", "shared", "match"), [
    (1, 2048, 0, r"kernel 'call': block \(2048, 1, 1\) has 2048 threads, over the limit of 1024"),
    (1, (32, 33, 1), 0, r"block \(32, 33, 1\) has 1056 threads, over the limit of 1024"),
    (1, (1, 1, 65), 0, r"z = 65 is over the limit of 64"),
    (0, 32, 0, r"kernel 'call': every grid dimension must be >= 1"),
    ((2, 0), 32, 0, r"every grid dimension must be >= 1"),
    (1, 32.0, 0, r"kernel 'call': the block must be an int or a tuple of 1 to 3 ints, got 32.0"),
    ((8 / 2,), 32, 0, r"the grid must be an int"),
    ((1, 70000), 32, 0, r"y = 70000 is over the limit of 65535"),
    (1, 32, 64 * 1024, r"65536 B dynamic shared memory per block is over the 49152 B"),
    (1, 32, 1.5, r"dynamic shared memory size must be an int"),
])
def test_launches_a_gpu_refuses_are_refused(grid, block, shared, match):
    kernel = numba.cuda.jit(map_puzzle(numba.cuda))
    with pytest.raises(LaunchConfigError, match=match):
        kernel[grid, block, 0, shared]


def test_limit_comes_from_the_arch_table(monkeypatch):
    from workbench import _numba_sim as sim
    from workbench.cuda import arch

    small = arch.ArchLimits(**{**arch.get("sm_90").to_dict(), "max_threads_per_block": 512})
    monkeypatch.setattr(arch, "ARCHS", {**arch.ARCHS, "sm_90": small})
    with pytest.raises(LaunchConfigError, match="over the limit of 512"):
        sim.check_launch("k", 1, 513)
    assert sim.check_launch("k", (2, 3), 512) == ((2, 3, 1), (512, 1, 1))


def test_static_shared_memory_over_the_block_limit_is_refused():
    def big(cuda):
        def call(out) -> None:
            s = cuda.shared.array(13000, numba.float32)  # 52,000 B
            s[cuda.threadIdx.x] = 1.0
            out[0] = s[0]
        return call

    with pytest.raises(LaunchConfigError, match=r"kernel 'call': 52000 B static \+ 0 B dynamic shared memory"):
        launch(big, np.zeros(1, np.float32), (), (), (1, 1), (2, 1))
    with pytest.raises(TypeError):  # Numba's own check raises TypeError for a float size: still one
        numba.cuda.jit(map_puzzle(numba.cuda))[1, 2.5]
