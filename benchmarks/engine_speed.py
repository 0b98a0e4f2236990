"""Measure the CPU engine against Numba's CUDA simulator on the same 16x16 shared-memory tiled SGEMM.

Prints, from one run: the engine and the simulator at 64^3 (and the speed-up), the engine at 256^3, the cost
of the engine's sanitizers: a checked launch (memcheck + racecheck + initcheck, one worker thread) against a normal
launch on one worker and on all of them, at 64^3; and the cost of wb.profile's counting (profile mode) against a
normal launch at 128^3, both on one worker (target: at most 5x).
The simulator runs in a subprocess because NUMBA_ENABLE_CUDASIM must be set before numba is imported.
Usage: python benchmarks/engine_speed.py [--repeat 3] [--skip-numba] [--profile-only]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SGEMM = ROOT / "tests" / "cuda" / "sgemm.cu"

_NUMBA_SIM = r"""
import json, os, sys, time
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np
from numba import cuda, float32

TS = 16

@cuda.jit
def sgemm_tiled(A, B, C, M, N, K):
    As = cuda.shared.array((TS, TS), float32)
    Bs = cuda.shared.array((TS, TS), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * TS + ty, cuda.blockIdx.x * TS + tx
    acc = float32(0.0)
    for t in range(0, K, TS):
        As[ty, tx] = A[row, t + tx] if row < M and t + tx < K else 0.0
        Bs[ty, tx] = B[t + ty, col] if t + ty < K and col < N else 0.0
        cuda.syncthreads()
        for k in range(TS):
            acc += As[ty, k] * Bs[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc

n, repeat = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
A = rng.standard_normal((n, n)).astype(np.float32)
B = rng.standard_normal((n, n)).astype(np.float32)
C = np.zeros((n, n), np.float32)
times = []
for _ in range(repeat):
    t = time.perf_counter()
    sgemm_tiled[(n // TS, n // TS), (TS, TS)](A, B, C, n, n, n)
    times.append(time.perf_counter() - t)
print(json.dumps({"best": min(times), "err": float(np.abs(C - A @ B).max())}))
"""


def _sgemm_problem(n: int) -> tuple:
    """Return (A, B, C, kernel arguments, grid) of the tiled SGEMM at n^3 (16x16 blocks), seeded."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    C = np.zeros((n, n), np.float32)
    return A, B, C, (A, B, C, np.int32(n), np.int32(n), np.int32(n)), ((n + 15) // 16, (n + 15) // 16)


def engine_time(n: int, repeat: int, checked: bool = False) -> tuple[float, float]:
    """Return (best seconds, max abs error) of the engine's tiled SGEMM at n^3 (compile excluded).

    ``checked``: the launch runs under memcheck, racecheck and initcheck (RawKernel(..., checked=True)).
    """
    from workbench import cuda

    k = cuda.RawKernel(SGEMM, "sgemm_tiled", checked=checked).compile()
    A, B, C, args, grid = _sgemm_problem(n)
    k(grid, (16, 16), args)  # warm-up (fiber stacks, pool threads)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        k(grid, (16, 16), args)
        best = min(best, time.perf_counter() - t)
    return best, float(np.abs(C - A @ B).max())


def numba_sim_time(n: int, repeat: int) -> tuple[float, float]:
    """Return (best seconds, max abs error) of Numba's CUDA simulator on the same SGEMM (in a subprocess)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", _NUMBA_SIM, str(n), str(repeat)], capture_output=True, text=True,
                         env=env, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"numba simulator run failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["best"], r["err"]


def profile_cost(n: int = 128, repeat: int = 7) -> tuple[float, float]:
    """Return (best seconds of a normal launch, of a profiled one) of the tiled SGEMM at n^3, on one worker.

    The two are measured in alternation (best of ``repeat`` each), so a busy machine slows both alike;
    ``wb.profile`` builds the profile module once before timing.
    """
    os.environ["WORKBENCH_CPU_THREADS"] = "1"
    import workbench as wb
    from workbench import cuda

    k = cuda.RawKernel(SGEMM, "sgemm_tiled").compile()
    _, _, _, args, grid = _sgemm_problem(n)

    def run() -> None:
        k(grid, (16, 16), args)

    run()
    prof = wb.profile(run)  # compiles the profile build
    assert prof["shared bank conflicts"] == 0 and prof["sectors per load request"] == 4, prof.report()
    normal = profiled = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        normal = min(normal, time.perf_counter() - t)
        t = time.perf_counter()
        wb.profile(run)
        profiled = min(profiled, time.perf_counter() - t)
    return normal, profiled


def print_profile_cost(repeat: int) -> None:
    """Print the cost of profile mode at 128^3 (the issue's budget: at most 5x a normal launch)."""
    normal, profiled = profile_cost(128, max(repeat, 7))
    print(f"profile mode (wb.profile), 128^3, 1 worker: profiled {profiled * 1e3:8.2f} ms | normal "
          f"{normal * 1e3:6.2f} ms ({profiled / normal:4.1f}x; target <= 5x)")


def main() -> None:
    """Run the comparison and print both figures."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-numba", action="store_true", help="leave out the (slow) Numba simulator run")
    ap.add_argument("--profile-only", action="store_true", help="only measure the cost of profile mode")
    args = ap.parse_args()
    os.environ.setdefault("WORKBENCH_MODE", "cpu")
    if args.profile_only:
        print_profile_cost(args.repeat)
        return
    from workbench.cuda import _cpu

    nthr = _cpu.n_threads()
    print(f"CPU engine: {nthr} worker thread(s); numba simulator: NUMBA_ENABLE_CUDASIM=1 (subprocess)")
    e64, err_e = engine_time(64, args.repeat)
    if not args.skip_numba:
        s64, err_s = numba_sim_time(64, max(1, min(args.repeat, 2)))
        print(f"tiled SGEMM 16x16,  64^3: engine {e64 * 1e3:8.2f} ms | numba sim {s64 * 1e3:9.1f} ms | "
              f"speed-up {s64 / e64:7.0f}x   (max err {err_e:.1e} / {err_s:.1e})")
    e256, err_256 = engine_time(256, args.repeat)
    print(f"tiled SGEMM 16x16, 256^3: engine {e256 * 1e3:8.2f} ms   (target < 3000 ms; max err {err_256:.1e})")
    sanitizer_cost(args.repeat, e64, nthr)
    print_profile_cost(args.repeat)


def sanitizer_cost(repeat: int, e64: float, nthr: int) -> None:
    """Print the checked launch's time at 64^3 against a normal launch on one worker and on ``nthr``."""
    os.environ["WORKBENCH_CPU_THREADS"] = "1"  # checked launches always run on one worker (deterministic reports)
    one, _ = engine_time(64, max(repeat, 5))
    chk, err = engine_time(64, max(repeat, 5), checked=True)
    print(f"sanitizers (memcheck+racecheck+initcheck), 64^3: checked {chk * 1e3:8.2f} ms | normal, 1 worker "
          f"{one * 1e3:6.2f} ms ({chk / one:5.1f}x) | normal, {nthr} worker(s) {e64 * 1e3:6.2f} ms "
          f"({chk / e64:5.1f}x)   (max err {err:.1e})")


if __name__ == "__main__":
    main()
