"""The CuTe layout exercises' reference functions, their random inputs, and the classic wrong answers they name.

Each is a concept-as-code drill (``kernels/cute_layouts/drills.toml``, registered in
:mod:`workbench.practice.concept_refs`): the learner writes a small function, the grader compares it with the
reference here, and when the learner's answer is one of the classic wrong ones (``WRONG``), says which mistake it
is. Pure Python: the pure evaluator in :mod:`workbench.cute.algebra`, which the tests check against CuTe itself.
"""

from __future__ import annotations

import random

from workbench.cute.algebra import Layout, local_partition, local_tile

__all__ = ["WRONG", "conflict_free_swizzle", "layout_index", "mma_c_coord", "partition_offsets"]


# ------------------------------------------------------------------------------------------------ a layout's index
def layout_index(shape, stride, i):
    """Offset of 1-D index i in the layout shape:stride (flat tuples): split i colexicographically, dot the stride."""
    offset = 0
    for s, d in zip(shape, stride, strict=True):
        offset += (i % s) * d  # the leftmost mode varies fastest
        i //= s
    return offset


def _lexicographic(shape, stride, i):
    offset = 0
    for s, d in reversed(list(zip(shape, stride, strict=True))):  # the rightmost mode fastest: the row-major reading
        offset += (i % s) * d
        i //= s
    return offset


def _draw_layout_index(rng: random.Random) -> tuple:
    rank = rng.randint(2, 3)
    shape = tuple(rng.randint(2, 8) for _ in range(rank))
    stride = tuple(rng.choice([0, 1, 2, 3, 4, 8, 16, 32, 64]) for _ in range(rank))
    n = 1
    for s in shape:
        n *= s
    return shape, stride, rng.randrange(n)


# ------------------------------------------------------------------------------------------------ the swizzle
def conflict_free_swizzle(row_bytes):
    """(B, M, S) in bytes: chunks of 16 B stay whole (M = 4), the row's B chunk bits take the line index's (S = 3)."""
    chunks = row_bytes // 16  # 16-byte chunks in one row: the xor must stay inside the row
    return (chunks.bit_length() - 1, 4, 3)


def _element_units(row_bytes):
    b, _, s = conflict_free_swizzle(row_bytes)
    return (b, 3, s)


def _always_128(row_bytes):
    return (3, 4, 3)


def _draw_row_bytes(rng: random.Random) -> tuple:
    return (rng.choice([16, 32, 64, 128]),)


# ------------------------------------------------------------------------------------------------ local_partition
def partition_offsets(rows, cols, thr_rows, thr_cols, t):
    """Offsets thread t gets from local_partition of the row-major rows x cols tile by row-major threads."""
    tile = Layout((rows, cols), (cols, 1))
    threads = Layout((thr_rows, thr_cols), (thr_cols, 1))
    part, first = local_partition(tile, threads, t)
    return [first + part(i) for i in range(part.size)]


def _blocked(rows, cols, thr_rows, thr_cols, t):
    tile = Layout((rows, cols), (cols, 1))
    block, first = local_tile(tile, (rows // thr_rows, cols // thr_cols), (t // thr_cols, t % thr_cols))
    return [first + block(i) for i in range(block.size)]


def _thread_colex(rows, cols, thr_rows, thr_cols, t):
    return partition_offsets(rows, cols, thr_rows, thr_cols, (t % thr_rows) * thr_cols + t // thr_rows)


def _draw_partition(rng: random.Random) -> tuple:
    tr, tc = rng.choice([(2, 4), (4, 2), (4, 8), (8, 4), (2, 2)])
    rows, cols = tr * rng.choice([1, 2, 4]), tc * rng.choice([1, 2, 4])
    return rows, cols, tr, tc, rng.randrange(tr * tc)


# ------------------------------------------------------------------------------------------------ a TV layout
MMA_C = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))  # mma.sync m16n8k16's C TV layout, as CuTe reports it


def mma_c_coord(lane, v):
    """(row, column) of value v of lane in the 16x8 C tile: the TV layout gives the column-major index m + 16*n."""
    idx = MMA_C((lane % 4, lane // 4), (v % 2, v // 2))
    return (idx % 16, idx // 16)


def _row_major_reading(lane, v):
    idx = MMA_C((lane % 4, lane // 4), (v % 2, v // 2))
    return (idx // 8, idx % 8)


def _lane_split_swapped(lane, v):
    idx = MMA_C((lane % 8, lane // 8 % 4), (v % 2, v // 2))
    return (idx % 16, idx // 16)


def _draw_lane_value(rng: random.Random) -> tuple:
    return rng.randrange(32), rng.randrange(4)


#: ref name -> ((name of the classic wrong answer, its function, what it gets wrong), ...)
WRONG = {
    "cute_layout_index": (
        ("the lexicographic (row-major) split", _lexicographic,
         "you split the index with the rightmost mode fastest (row-major, as NumPy does); CuTe splits it "
         "colexicographically: i % shape[0] is the first coordinate, the leftmost mode varies fastest"),
        ("the index itself, strides ignored", lambda shape, stride, i: i,
         "you returned the index: a layout's offset is the coordinate's dot product with the stride"),
    ),
    "cute_conflict_free_swizzle": (
        ("`Swizzle<B,3,S>`: element units", _element_units,
         "M = 3 keeps 8 units whole: 8 bf16 elements, but the question counts bytes, and a 16-byte chunk is 2^4 "
         "bytes (M = 4); Swizzle<3,3,3> is the same swizzle as Swizzle<3,4,3> only on 2-byte element offsets"),
        ("the 128-byte swizzle for every row width", _always_128,
         "B = 3 xors three chunk bits, but a row narrower than 128 bytes has fewer: the top bits are the row's, so "
         "chunks move between rows; B is log2 of the chunks per row"),
    ),
    "cute_partition_offsets": (
        ("a contiguous block per thread (local_tile)", _blocked,
         "each thread got one contiguous block of the tile: that is local_tile of the thread's tile; "
         "local_partition deals the tile round-robin: thread (r, c) takes rows r, r + thr_rows, ... and columns "
         "c, c + thr_cols, ..."),
        ("the thread's coordinate read column-major", _thread_colex,
         "the thread layout is row-major ((thr_rows, thr_cols):(thr_cols, 1)), so thread t sits at row t // thr_cols, "
         "column t % thr_cols; you read it as (t % thr_rows, t // thr_rows)"),
    ),
    "cute_mma_c_coord": (
        ("the tile index read row-major", _row_major_reading,
         "the TV layout's value is the column-major index m + 16 * n of the 16x8 tile (CuTe's default); you split "
         "it as a row-major index"),
        ("the lane split (8, 4) instead of (4, 8)", _lane_split_swapped,
         "the thread mode is (4,8): lane % 4 is its first coordinate (the column pair), lane // 4 the row; you "
         "took lane % 8 first"),
    ),
}

DRAWS = {"cute_layout_index": _draw_layout_index, "cute_conflict_free_swizzle": _draw_row_bytes,
         "cute_partition_offsets": _draw_partition, "cute_mma_c_coord": _draw_lane_value}
