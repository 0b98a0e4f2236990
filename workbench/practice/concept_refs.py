"""Reference functions of the concept-as-code drills, and the random inputs each is checked on.

A concept-as-code drill asks for an idea written as a small function (the online-softmax update, the merge of
two partial softmaxes, the 128-byte swizzle, ...). The learner's function is called on the :class:`Ref`'s
``fixed`` inputs (edge cases every answer must survive), then on ``trials`` inputs drawn by ``draw`` from a
generator seeded by the drill's id, and compared with ``fn``: exactly for integers, within ``rtol``/``atol``
otherwise. The reference's source is the model answer, so each one is written to be read.

Facts a question quotes (an architecture's limits) come from ``given()``, computed from the workbench's tables.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Ref:
    """One reference: its parameters (in call order), the function, and how to draw inputs for it."""

    name: str
    params: tuple[str, ...]
    fn: Callable[..., Any]
    draw: Callable[[random.Random], tuple]
    fixed: tuple[tuple, ...] = ()
    rtol: float = 1e-6
    atol: float = 1e-9
    returns: str = ""  # what the function returns, in words (shown in the statement)
    given: Callable[[], dict[str, Any]] | None = None  # facts the question's {placeholders} quote
    wrong: tuple[tuple[str, Callable[..., Any], str], ...] = ()  # classic wrong answers: (name, function, mistake)

    @property
    def signature(self) -> str:
        return f"f({', '.join(self.params)})"


# ------------------------------------------------------------------------------------------------ softmax


def online_softmax_step(m, d, x):
    """Fold one more element x into the running (max, sum of exp(x_j - max))."""
    m_new = max(m, x)
    return m_new, d * math.exp(m - m_new) + math.exp(x - m_new)


def _draw_online(rng: random.Random) -> tuple:
    m = rng.uniform(-20, 20)
    return m, rng.uniform(1, 50), m + rng.choice([-1, 1]) * rng.expovariate(0.3)


# ------------------------------------------------------------------------------------------------ attention


def lse_merge(o1, lse1, o2, lse2):
    """Merge two partial attention outputs, each normalised over its own keys, into the output over all keys."""
    lse = max(lse1, lse2) + math.log(math.exp(lse1 - max(lse1, lse2)) + math.exp(lse2 - max(lse1, lse2)))
    return o1 * math.exp(lse1 - lse) + o2 * math.exp(lse2 - lse), lse


def _draw_merge(rng: random.Random) -> tuple:
    n = rng.randint(2, 6)
    base = rng.uniform(-5, 5) * 10 ** rng.randint(0, 2)  # up to +-500: exp(lse) alone overflows fp64 past 709
    o1 = np.array([rng.gauss(0, 1) for _ in range(n)])
    o2 = np.array([rng.gauss(0, 1) for _ in range(n)])
    return o1, base + rng.uniform(-8, 8), o2, base + rng.uniform(-8, 8)


def merge_splits(o, lse):
    """Merge S split-KV partials o[S, d] (each normalised over its own keys) by their log-sum-exps lse[S].

    An empty split (lse = -inf) adds nothing, whatever its row of o holds; with every split empty the output is 0.
    """
    live = np.isfinite(lse)
    if not live.any():
        return np.zeros(o.shape[1])
    w = np.exp(lse[live] - lse[live].max())  # each live split's share, the largest 1
    return w @ o[live] / w.sum()


def _draw_splits(rng: random.Random) -> tuple:
    s, d = rng.randint(1, 6), rng.randint(2, 4)
    g = np.random.default_rng(rng.getrandbits(32))
    o = g.normal(size=(s, d))
    lse = rng.uniform(-5, 5) * 10 ** rng.randint(0, 2) + g.uniform(-8, 8, size=s)  # up to +-500: exp overflows
    if s > 1 and rng.random() < 0.5:  # a short sequence's last split has no keys
        lse[-1], o[-1] = -np.inf, np.nan
    return o, lse


def fa2_step(m, l, acc, s, v):  # noqa: E741
    """One key block of the FlashAttention-2 forward for one query row: scores s[Bc], values v[Bc, d].

    The accumulator stays unnormalised; the division by l happens once, after the last block.
    """
    m_new = max(m, float(np.max(s)))
    p = np.exp(s - m_new)
    scale = math.exp(m - m_new)
    return m_new, l * scale + float(p.sum()), acc * scale + p @ v


def _draw_fa2(rng: random.Random) -> tuple:
    bc, d = rng.randint(2, 5), rng.randint(2, 4)
    g = np.random.default_rng(rng.getrandbits(32))
    m = rng.uniform(-4, 4)
    return (m, rng.uniform(1, 20), g.normal(size=d) * 5, g.normal(size=bc) * 3 + rng.uniform(-4, 4),
            g.normal(size=(bc, d)))


# ------------------------------------------------------------------------------------------------ memory


def swizzle_128b(offset):
    """The 128-byte swizzle on a byte offset: bits 4-6 (the 16-byte chunk in a 128-byte row) XOR bits 7-9 (row % 8)."""
    return offset ^ (((offset >> 7) & 7) << 4)


def _draw_offset(rng: random.Random) -> tuple:
    return (rng.randrange(0, 1 << 14),)


def bank_conflict_ways(stride_words):
    """Worst n-way conflict when lane t reads 32-bit word t * stride_words (lanes reading one word share it)."""
    words_per_bank: dict[int, set[int]] = {}
    for t in range(32):
        w = t * stride_words
        words_per_bank.setdefault(w % 32, set()).add(w)
    return max(len(ws) for ws in words_per_bank.values())


def sectors_per_warp(stride_elems, elem_bytes):
    """32-byte sectors one warp's load touches when lane t reads element t * stride_elems (aligned base)."""
    return len({(t * stride_elems * elem_bytes) // 32 for t in range(32)})


def blocks_per_sm(threads, regs, smem_bytes):
    """Resident blocks per SM on sm_90 (H100): the smallest of the four limits (the occupancy calculator's rules)."""
    f = _occupancy_facts()  # the limits, from workbench.cuda.arch
    warps = -(-threads // 32)
    by_warps = f["warps"] // warps
    regs_per_warp = -(-32 * regs // f["reg_unit"]) * f["reg_unit"]
    warps_by_regs = f["regs"] // regs_per_warp // f["warp_gran"] * f["warp_gran"]
    by_regs = warps_by_regs // warps
    smem = -(-(smem_bytes + f["smem_reserved"]) // f["smem_unit"]) * f["smem_unit"]
    by_smem = f["smem"] // smem
    return min(by_warps, f["blocks"], by_regs, by_smem)


@functools.cache
def _occupancy_facts() -> dict[str, Any]:
    from workbench.cuda import arch

    L = arch.get("sm_90")  # noqa: N806
    return {"warps": L.max_warps_per_sm, "blocks": L.max_blocks_per_sm, "regs": L.regs_per_sm,
            "reg_unit": L.reg_alloc_unit, "warp_gran": L.warp_alloc_granularity, "smem": L.max_smem_per_sm,
            "smem_unit": L.smem_alloc_unit, "smem_reserved": L.smem_reserved_per_block,
            "max_smem_block": L.max_smem_per_block}


def _draw_occupancy(rng: random.Random) -> tuple:
    smem = 0 if rng.random() < 0.25 else rng.randrange(0, _occupancy_facts()["max_smem_block"] + 1, 4)
    return 32 * rng.randint(1, 32), rng.randint(16, 255), smem


# ------------------------------------------------------------------------------------------------ moe


def allreduce_busbw(algbw, n):
    """nccl-tests' bus bandwidth of an all-reduce over n ranks: each rank sends and receives 2(n-1)/n of the data."""
    return algbw * 2 * (n - 1) / n


def topk_route(logits, k):
    """Mixtral-style routing weights: a softmax over the k largest logits, zero for every other expert."""
    top = np.argsort(logits)[::-1][:k]
    w = np.zeros_like(logits, dtype=float)
    e = np.exp(logits[top] - logits[top].max())
    w[top] = e / e.sum()
    return w


def _draw_route(rng: random.Random) -> tuple:
    e = rng.randint(4, 16)
    return np.array([rng.gauss(0, 3) for _ in range(e)]), rng.randint(1, min(4, e))


def padded_slots(counts, block):
    """moe_align's n_padded: each expert's slots rounded up to whole blocks (an expert with none gets none)."""
    return int(sum(-(-int(c) // block) * block for c in counts))


def _draw_counts(rng: random.Random) -> tuple:
    return [rng.choice([0, rng.randint(1, 300)]) for _ in range(rng.randint(2, 16))], rng.choice([16, 32, 64, 128])


# ------------------------------------------------------------------------------------------------ the table

_INF = float("-inf")

REFS: dict[str, Ref] = {r.name: r for r in (
    Ref("online_softmax_step", ("m", "d", "x"), online_softmax_step, _draw_online,
        fixed=((_INF, 0.0, 1.5), (2.0, 1.0, 2.0), (0.0, 1.0, 800.0)),
        returns="the pair (m_new, d_new)"),
    Ref("lse_merge", ("o1", "lse1", "o2", "lse2"), lse_merge, _draw_merge,
        fixed=((np.array([1.0, 2.0]), 1000.0, np.array([3.0, -1.0]), 999.0),
               (np.array([0.5]), 0.0, np.array([-0.5]), 0.0)),
        returns="the pair (o, lse): the output over both key sets and its log-sum-exp"),
    Ref("merge_splits", ("o", "lse"), merge_splits, _draw_splits,
        fixed=((np.array([[1.0, 2.0], [3.0, -1.0]]), np.array([1000.0, 999.0])),
               (np.array([[0.5, 1.0], [np.nan, np.nan]]), np.array([2.0, -np.inf])),
               (np.array([[np.nan, np.nan], [np.nan, np.nan]]), np.array([-np.inf, -np.inf]))),
        returns="the merged output, an array of d values"),
    Ref("fa2_step", ("m", "l", "acc", "s", "v"), fa2_step, _draw_fa2,
        fixed=((_INF, 0.0, np.zeros(2), np.array([0.5, -1.0, 2.0]), np.ones((3, 2))),),
        returns="the triple (m_new, l_new, acc_new)"),
    Ref("swizzle_128b", ("offset",), swizzle_128b, _draw_offset, fixed=((0,), (16,), (128,), (1023,), (1024 + 144,)),
        rtol=0, atol=0, returns="the swizzled byte offset (an int)"),
    Ref("bank_conflict_ways", ("stride_words",), bank_conflict_ways, lambda rng: (rng.randint(0, 160),),
        fixed=((0,), (1,), (2,), (32,), (33,)), rtol=0, atol=0, returns="n, for an n-way conflict (an int)"),
    Ref("sectors_per_warp", ("stride_elems", "elem_bytes"), sectors_per_warp,
        lambda rng: (rng.randint(0, 40), rng.choice([1, 2, 4, 8])),
        fixed=((0, 4), (1, 4), (1, 2), (2, 4), (8, 4), (1, 8)), rtol=0, atol=0, returns="the number of sectors"),
    Ref("blocks_per_sm", ("threads", "regs", "smem_bytes"), blocks_per_sm, _draw_occupancy,
        fixed=((256, 32, 0), (256, 168, 0), (128, 64, 49152), (1024, 64, 0), (64, 40, 1000)),
        rtol=0, atol=0, returns="resident blocks per SM (an int)", given=_occupancy_facts),
    Ref("allreduce_busbw", ("algbw", "n"), allreduce_busbw, lambda rng: (rng.uniform(1, 900), rng.randint(2, 1024)),
        fixed=((100.0, 2), (100.0, 8)), returns="the bus bandwidth, in the unit of algbw"),
    Ref("topk_route", ("logits", "k"), topk_route, _draw_route,
        fixed=((np.array([1.0, 3.0, 2.0, 0.0]), 2), (np.array([750.0, 740.0, -5.0]), 2)),
        returns="an array of E weights: the top-k experts' weights, 0 elsewhere"),
    Ref("padded_slots", ("counts", "block"), padded_slots, _draw_counts,
        fixed=(([0, 1, 16, 17], 16), ([64, 0], 64)), rtol=0, atol=0, returns="n_padded (an int)"),
)}


def _cute_refs() -> tuple[Ref, ...]:
    """Return the CuTe layout exercises' references (workbench/cute/refs.py), each with its classic wrong answers."""
    from workbench.cute import refs as c

    return (
        Ref("cute_layout_index", ("shape", "stride", "i"), c.layout_index, c.DRAWS["cute_layout_index"],
            fixed=(((4, 8), (8, 1), 5), ((2, 3, 4), (1, 2, 6), 23), ((4, 8), (1, 0), 9)), rtol=0, atol=0,
            returns="the offset (an int)", wrong=c.WRONG["cute_layout_index"]),
        Ref("cute_conflict_free_swizzle", ("row_bytes",), c.conflict_free_swizzle,
            c.DRAWS["cute_conflict_free_swizzle"], fixed=((128,), (64,), (32,), (16,)), rtol=0, atol=0,
            returns="the swizzle's (B, M, S), in bytes (a tuple of 3 ints)",
            wrong=c.WRONG["cute_conflict_free_swizzle"]),
        Ref("cute_partition_offsets", ("rows", "cols", "thr_rows", "thr_cols", "t"), c.partition_offsets,
            c.DRAWS["cute_partition_offsets"], fixed=((8, 16, 2, 4, 5), (4, 4, 2, 2, 1)), rtol=0, atol=0,
            returns="the offsets thread t owns, in the order of its partition (a list of ints)",
            wrong=c.WRONG["cute_partition_offsets"]),
        Ref("cute_mma_c_coord", ("lane", "v"), c.mma_c_coord, c.DRAWS["cute_mma_c_coord"],
            fixed=((1, 0), (4, 0), (0, 1), (0, 2), (31, 3)), rtol=0, atol=0,
            returns="(row, column) in the 16x8 C tile (a tuple of 2 ints)", wrong=c.WRONG["cute_mma_c_coord"]),
    )


REFS.update({r.name: r for r in _cute_refs()})


def get(name: str) -> Ref:
    """Return the reference ``name``; a KeyError names the known ones."""
    if name not in REFS:
        raise KeyError(f"no concept reference {name!r}; known: {sorted(REFS)}")
    return REFS[name]
