"""Exercise starters hold what the learner writes plus a call: the given code lives in the op's kernel folder.

A starter is its solution file outside the ``# >>> learner`` regions (workbench/practice/starters.py). Every code
line out there is one the learner reads but does not write: imports, the signatures of the functions they fill in,
and the call into the given kernel and launch (``kernels/<op>/ex_common.py``). The given kernel calls the
learner's helpers: a Triton kernel by name (kernels/_triton_hooks.py), a Numba kernel built around its
``@cuda.jit(device=True)`` helpers, a CUDA C kernel (an ``ex_*.cuh`` beside ex_common.py) appended to the learner's
``__device__`` source. Counted here, so that the loads, loops and launch plumbing of a kernel cannot drift back into
a notebook's starter cell.
"""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.practice import starters

MAX_GIVEN = 15  # imports, decorators, signatures, docstrings, returns and the call

# Starters that still carry their kernel's given code, each with the most given lines it may have: moving the given
# part into the op's ex_common.py lowers the count; then lower the number here, or drop the entry once the starter
# fits MAX_GIVEN. Every starter fits today.
NOT_YET: dict[str, int] = {}


def given_lines(ex_id: str) -> list[str]:
    """Return the code lines of ``ex_id``'s starter outside its learner regions (no blanks, no comment lines)."""
    text = wb.exercise(ex_id).solution_file.read_text()
    out, inside = [], False
    for line in text.splitlines():
        if starters._OPEN.match(line) or starters._CLOSE.match(line):
            inside = bool(starters._OPEN.match(line))
            continue
        s = line.strip()
        if not inside and s and not s.startswith(("#", "//")):
            out.append(s)
    return out


@pytest.mark.parametrize("ex_id", wb.exercises())
def test_starter_gives_only_signatures_and_a_call(ex_id):
    n = len(given_lines(ex_id))
    most = NOT_YET.get(ex_id, MAX_GIVEN)
    assert n <= most, (
        f"{ex_id}: its starter gives {n} code lines besides the learner's part (at most {most}); move the given "
        f"kernel code into kernels/{wb.exercise(ex_id).op}/ex_common.py and call it from the starter")
    if ex_id in NOT_YET:
        assert n > MAX_GIVEN, f"{ex_id}: its starter fits MAX_GIVEN = {MAX_GIVEN} now ({n}): drop it from NOT_YET"


def test_not_yet_names_only_exercises():
    assert set(NOT_YET) <= set(wb.exercises())


def test_attention_starters_call_the_given_kernel():
    for ex_id, call in (("attention-online-softmax", "return flash_forward("),
                        ("attention-causal-skip", "return flash_forward("),
                        ("attention-bwd-dkdv", "return flash_backward(")):
        starter = wb.exercise(ex_id).starter
        assert call in starter and "tl.load(" not in starter and "[grid](" not in starter, ex_id


# Each starter's call into its op's given kernel (ex_common.py), and what only the given part may hold: the kernel
# entry point, its shared and local arrays, its output allocation and stores, its launch.
GIVEN_CALLS = {
    "gemm-smem-tiling": "return smem_gemm(tile_gemm, a, b)",
    "gemm-register-blocking": "return regblock_gemm(block_gemm, a, b)",
    "moe-align-block-size": "return align(padded_offsets, scatter, topk_ids, E, block)",
    "softmax-online": "return online_softmax(online_update, x)",
    "softmax-warp-shuffle": "return warp_softmax(SOURCE, x)",
    "transpose-coalesce": "return tile_transpose(SOURCE, x)",
    "transpose-bank-conflicts": "return tile_transpose(SOURCE, x)",
    "decode-block-table-gather": "return paged_decode(token_slots, q, k_cache, v_cache, block_table, seq_lens, scale)",
    "decode-gqa-map": "return gqa_decode(SOURCE, q, k_cache, v_cache, block_table, seq_lens, scale)",
    "decode-lse-merge": "return lse_fold(fold_split, o, lse)",
}
GIVEN_ONLY = ("__global__", "RawKernel", "cuda.shared.array", "cuda.local.array", "wb.empty", "tl.store(", "[grid")


@pytest.mark.parametrize("ex_id", sorted(GIVEN_CALLS))
def test_numba_cuda_and_triton_starters_call_the_given_kernel(ex_id):
    starter = wb.exercise(ex_id).starter
    assert GIVEN_CALLS[ex_id] in starter, ex_id
    assert not [g for g in GIVEN_ONLY if g in starter], ex_id


def test_a_given_kernel_refuses_a_helper_it_cannot_call():
    import torch

    from kernels.gemm.ex_common import smem_gemm
    from kernels.moe.ex_common import align
    from kernels.softmax.ex_common import warp_softmax

    def tile_gemm(*args):  # a plain Python function: a GPU kernel cannot call it
        return None

    x = torch.zeros(2, 2)
    with pytest.raises(TypeError, match=r"smem_gemm: tile_gemm must be a @cuda.jit\(device=True\) function"):
        smem_gemm(tile_gemm, x, x)
    with pytest.raises(TypeError, match=r"moe_align exercise: padded_offsets must be a @cuda.jit\(device=True\)"):
        align(tile_gemm, tile_gemm, torch.zeros(2, 2, dtype=torch.int32), 4, 4)
    with pytest.raises(TypeError, match="warp_softmax: expected the exercise's CUDA source text"):
        warp_softmax("__device__ float warp_max(float v) { return v; }", x)
