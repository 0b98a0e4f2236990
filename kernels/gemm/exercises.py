"""gemm exercises: shared-memory tiling and register blocking in Numba, grouped program order in Triton."""

from workbench.practice.exercises import register_exercise

SMALL = [{"M": 9, "N": 18, "K": 20}, {"M": 9, "N": 18, "K": 5}]  # ragged; K = 5 < one 16-wide tile

register_exercise(
    "gemm-smem-tiling",
    title="GEMM in Numba: shared-memory tiles and two barriers",
    op="gemm",
    here=__file__,
    solution="ex_smem_solution.py",
    entry="gemm",
    statement="""
Each 16x16 block computes a 16x16 tile of `c`. For every 16-wide slice of K, the block's 256 threads load one
16x16 tile of `a` and one of `b` into shared memory (one element each), wait for each other, accumulate 16
products from shared memory, and wait again before the next slice overwrites the tiles. Out-of-range elements
load as 0, so ragged M, N and K need no special case in the inner loop. Finish the TODOs.

The checker runs K = 20 and K = 5 (smaller than one tile: most of each tile is out of range) under the Numba
simulator's sanitizer: shared memory starts as garbage (NaN), a read of an element no thread wrote is reported
(`uninitialized`), and so is a missing barrier (`race`, with both threads and their lines).
""",
    hints=[
        "Thread (ty, tx) loads sa[ty, tx] = a[row, k0 + tx] and sb[ty, tx] = b[k0 + ty, col]: both coalesced, "
        "since consecutive tx read consecutive addresses. Use float32(0.0) when the index is out of range.",
        "cuda.syncthreads() after the loads (the tile is complete) and after the inner loop (nobody still reads it "
        "when the next slice overwrites it). Leaving either out is a race: on a GPU whole tiles come out wrong, and "
        "the checker's racecheck names the two threads and lines (diagnosis race).",
        "Store with `if row < m and col < n: c[row, col] = acc` -- the block may hang over the edge of c.",
    ],
    shapes=SMALL, dtypes=("float32",), seeds=(0,),
)

register_exercise(
    "gemm-register-blocking",
    title="GEMM in Numba: a 2x2 register block per thread",
    op="gemm",
    here=__file__,
    solution="ex_regblock_solution.py",
    entry="gemm",
    statement="""
Give each thread a 2x2 block of `c`. Per k, load two values of `a` (rows row0, row0+1) and two of `b`
(columns col0, col0+1) into registers and do all four multiply-adds: 4 FMAs per 4 loads instead of 1 per 2.
With 8x8 = 64 threads per block the block covers a 16x16 tile. The starter only computes the first element.
""",
    hints=[
        "ra[i] = a[row0 + i, kk] for i in range(T) (0 when row0 + i >= m); rb[j] = b[kk, col0 + j] likewise.",
        "Then a double loop: acc[i, j] += ra[i] * rb[j]. Each loaded value is used T = 2 times.",
        "Store each acc[i, j] to c[row0 + i, col0 + j] only when both indices are inside c.",
    ],
    shapes=SMALL, dtypes=("float32",), seeds=(0,),
)

register_exercise(
    "gemm-triton-grouped",
    title="GEMM in Triton: grouped (L2-friendly) program order",
    op="gemm",
    here=__file__,
    solution="ex_grouped_solution.py",
    entry="gemm",
    statement="""
The kernel computes one BM x BN tile of `c` per program, launched as a 1-D grid. Map the program id to a tile so
that consecutive programs walk *down* GROUP_M tile-rows before moving one tile column right. Programs that run at
the same time then share GROUP_M panels of `a` and a few panels of `b` in L2, instead of streaming every panel
of `b` once per tile-row. The starter sends every program to tile (0, 0).
""",
    hints=[
        "A group holds GROUP_M * n_n programs: group = pid // (GROUP_M * n_n); its first tile-row is "
        "group * GROUP_M.",
        "The last group can be short: group_m = min(n_m - first_m, GROUP_M) (tl.minimum).",
        "Inside the group: pid_m = first_m + (pid % per_group) % group_m; pid_n = (pid % per_group) // group_m.",
    ],
    shapes=[{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 9}, {"M": 127, "N": 65, "K": 129}],
    dtypes=("float32", "float16"), seeds=(0,),
)
