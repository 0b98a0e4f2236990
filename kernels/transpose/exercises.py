"""transpose exercises: coalesce the stores through a shared tile, then remove the tile's bank conflicts.

Both starters are correct and slow: the checker passes their values and the budgets, counted by ``wb.profile`` on
the CPU engine at 64 x 64, reject them (a 64-float row is 256 bytes, so a coalesced warp access is exactly 4
sectors).
"""

from workbench.practice.exercises import register_exercise

SHAPES = [{"M": 1, "N": 1}, {"M": 33, "N": 17}, {"M": 64, "N": 96}, {"M": 70, "N": 45}]
AT = {"M": 64, "N": 64}
COALESCED = {
    "sectors per load request": "<= 4  # a warp reads 32 neighbouring floats of a row of x: 128 bytes, 4 sectors",
    "sectors per store request": "<= 4  # a warp store that walks down a column of out puts each of its 32 lanes "
                                 "in its own 32-byte sector, 8x the traffic; write along rows of out instead",
}

register_exercise(
    "transpose-coalesce",
    title="Transpose in CUDA C: coalesce the writes through shared memory",
    op="transpose",
    here=__file__,
    solution="ex_coalesce_solution.py",
    entry="transpose",
    statement="""
A GPU moves global memory in 32-byte sectors. When the 32 lanes of a warp touch 32 consecutive floats, one request
moves 4 sectors and uses every byte; when they are 4*M bytes apart, it moves 32 sectors and uses one float of
each: 12.5% of the traffic is useful.

The starter is correct. Each block of 32 x 8 threads moves one 32 x 32 tile; a warp reads a row segment of `x`
(coalesced) and writes it down a column of `out` (32 sectors per store). Stage the tile in shared memory: load it
along rows of `x`, `__syncthreads()`, then write rows of `out` by reading the tile along its columns.

The check runs the usual correctness cases, then counts your kernel with `wb.profile` at M = N = 64 (exact counts
on the CPU engine): loads and stores must both be 4 sectors per request. Try
`wb.profile(transpose, x).report()` on your version and on the starter.
""",
    hints=[
        "`__shared__ float tile[32][32];` Thread (tx, ty) loads tile[ty + k][tx] = x[row][col] for k = 0, 8, 16, 24: "
        "the same coalesced reads as the starter.",
        "After the barrier (every thread waits until the whole tile is loaded), the block writes the transposed "
        "tile: out row = blockIdx.x * 32 + ty + k, out column = blockIdx.y * 32 + tx. Neighbouring lanes (tx) now "
        "write neighbouring columns of out.",
        "The value for out[orow][ocol] is x[ocol][orow], which sits in tile[tx][ty + k]. Guard with "
        "`orow < n && ocol < m` (out is n x m).",
    ],
    shapes=SHAPES, dtypes=("float32",), seeds=(0,),
    budgets=COALESCED, budget_shape=AT,
)

register_exercise(
    "transpose-bank-conflicts",
    title="Transpose in CUDA C: remove the shared tile's 32-way bank conflicts",
    op="transpose",
    here=__file__,
    solution="ex_conflicts_solution.py",
    entry="transpose",
    statement="""
Shared memory has 32 banks, each 4 bytes wide: word `w` of shared memory sits in bank `w % 32`, and a bank serves
one word per pass (a *wavefront*). Lanes of a warp that hit different words of one bank wait for each other.

The starter is the solution of `transpose-coalesce` and is correct: both global sides are coalesced. But when a
warp reads `tile[tx][ty + k]`, its 32 lanes walk down a column of the `[32][32]` tile: words 32 apart, all in one
bank, 32 wavefronts where 1 would do. Change the tile's layout so that a column spans all 32 banks (the loads into
the tile, along its rows, must stay conflict-free too).

The check counts shared wavefronts and bank conflicts with `wb.profile` at M = N = 64 (the CPU engine's model:
32 banks x 4 bytes, the busiest bank decides) and keeps the global budgets of `transpose-coalesce`.
""",
    hints=[
        "Word (r, c) of a [32][W] float tile is r * W + c, in bank (r * W + c) % 32. With W = 32 a column (c fixed, r "
        "= 0..31) is one bank. Which W puts the 32 rows of a column in 32 different banks?",
        "Pad the tile by one column: `__shared__ float tile[32][33];` (the extra column is never read). The indexing "
        "stays the same.",
        "Another way is a swizzle: keep [32][32] but store element (r, c) at column c ^ r (and read it from there): "
        "the same 32 words, permuted so that a column spans all banks, with no memory wasted.",
    ],
    shapes=SHAPES, dtypes=("float32",), seeds=(0,),
    budgets={
        "wavefronts per shared load request": "<= 1  # the 32 lanes of a warp reading a column of a [32][32] "
                                              "float tile all hit one bank; lay the tile out so a column spans all "
                                              "32 banks",
        "shared bank conflicts": "== 0  # stores into the tile and loads from it, each in one pass",
        **COALESCED,
    },
    budget_shape=AT,
)
