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

Then it counts your kernel with `wb.profile` at M = N = K = 32: the tiles exist to cut global traffic, so a kernel
that reads `a` and `b` straight from global memory in its inner loop is correct but does not pass.
""",
    hints=[
        "Per K step each thread loads one element of each tile: thread (ty, tx) takes a's element in its own row at "
        "offset tx of the K slice, and b's element in its own column at offset ty. Both loads are coalesced "
        "(consecutive tx, consecutive addresses); out-of-range elements load as float32(0.0), adding nothing.",
        "Two barriers (cuda.syncthreads) per step: after the loads (the tile is complete before anyone reads it) and "
        "after the inner product (nobody overwrites a tile others still read). Leave either out and the checker's "
        "racecheck names the two threads and lines (diagnosis race); on a GPU whole tiles come out wrong.",
        "The inner product runs over the TILE elements of the shared tiles, row ty of the a-tile against column tx of "
        "the b-tile. The block can hang over the edge of c, so guard the final store with both bounds.",
    ],
    shapes=SMALL, dtypes=("float32",), seeds=(0,),
    # at 32^3 (4 blocks of 16 x 16): each thread loads 2 floats per 16-wide K slice, M*N*K*(1/16 + 1/16)*4 bytes
    budgets={"global load bytes requested": "<= 16384  # at M = N = K = 32 each thread loads one element of a and "
                                            "one of b per 16-wide slice of K: M*N*K*(1/16 + 1/16)*4 = 16,384 B. "
                                            "An untiled kernel loads a whole row of a and column of b per output: "
                                            "2*M*N*K*4 = 262,144 B"},
    budget_shape={"M": 32, "N": 32, "K": 32},
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

The check then counts your kernel with `wb.profile` at M = N = K = 32: computing the four outputs one after the
other, each with its own loads, is correct, but it requests twice the bytes and does not pass.
""",
    hints=[
        "For each k, load T values of a's column k (rows row0 .. row0 + T - 1) into ra and T values of b's row k "
        "(columns col0 .. col0 + T - 1) into rb, 0 outside the matrix.",
        "Then every pair (i, j) gets one multiply-add from ra[i] and rb[j]: T*T FMAs for 2*T loads, so each loaded "
        "value is used T times.",
        "The starter accumulates and stores only acc[0, 0]: store all T*T accumulators, each guarded by its own row "
        "and column bound.",
    ],
    shapes=SMALL, dtypes=("float32",), seeds=(0,),
    budgets={"global load bytes requested": "<= 131072  # at M = N = K = 32, 2 + 2 loads per k feed a 2x2 block: "
                                            "2*M*N*K/2*4 = 131,072 B. One load of a and one of b per output "
                                            "(the 1x1 kernel, or the 2x2 block computed element by element) is "
                                            "2*M*N*K*4 = 262,144 B"},
    budget_shape={"M": 32, "N": 32, "K": 32},
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
        "A group is GROUP_M tile-rows times all n_n tile-columns, GROUP_M * n_n programs. Which group a program is "
        "in, and so its first tile-row, follows from integer division of pid by that count.",
        "When n_m is not a multiple of GROUP_M the last group is short: its size is the smaller of what is left (n_m "
        "minus its first tile-row) and GROUP_M (tl.minimum). Use that size, not GROUP_M, below.",
        "Inside a group, consecutive programs walk down the group's tile-rows and then move one tile-column right: "
        "the program's position within its group, split by the group's size into remainder and quotient, gives the "
        "tile-row offset and the tile-column.",
    ],
    shapes=[{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 9}, {"M": 127, "N": 65, "K": 129}],
    dtypes=("float32", "float16"), seeds=(0,),
)
