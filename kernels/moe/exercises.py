"""moe exercises: the align-block-size counting sort, the fused SiLU-and-mul epilogue, the weighted top-k combine."""

from workbench.practice.exercises import register_exercise

ALIGN_SHAPES = [{"T": 1, "top_k": 2, "E": 8, "block": 16},  # most experts get no slot: no block at all
                {"T": 17, "top_k": 4, "E": 60, "block": 16},
                {"T": 5, "top_k": 4, "E": 4, "block": 1}]  # top_k = E, block 1: no padding
# Tiny problems: the Triton interpreter costs ~1 ms per program. T = 1, top_k = E, ragged d and I.
MOE_SHAPES = [{"T": 1, "d": 16, "I": 16, "E": 4, "top_k": 2},
              {"T": 7, "d": 33, "I": 20, "E": 4, "top_k": 2},
              {"T": 3, "d": 16, "I": 16, "E": 2, "top_k": 2}]

register_exercise(
    "moe-align-block-size",
    title="Align block size: a counting sort of the routed slots, padded per expert",
    op="moe_align",
    here=__file__,
    solution="ex_align_solution.py",
    entry="moe_align",
    statement="""
A grouped GEMM over all experts wants every tile of `block` rows to belong to one expert. `moe_align` turns the
router's `topk_ids[T, top_k]` into that layout with a counting sort in one block of Numba CUDA threads:

1. *(given)* fill `sorted_ids` with the sentinel `T*top_k` and `expert_ids` with -1; count the slots per expert
   with `cuda.atomic.add` into a shared-memory histogram.
2. **TODO** (thread 0): the exclusive prefix sum of the counts *rounded up to a multiple of block*:
   `cursor[e]` = where expert e's group starts, `expert_ids[b] = e` for each of its blocks, `n_padded[0]` = the
   total. An expert with no slot gets no block.
3. **TODO** (all threads): the scatter. Each slot `s` claims the next row of its expert's group with an atomic
   increment of `cursor[ids[s]]` and writes `s` there.

The order of slots inside a group may change from run to run (atomics): the contract allows it and the checker
sorts each group first. The checker runs your kernel under the simulator's racecheck: a plain read and write of
`cursor` (two threads may read the same value and claim the same row) is reported as a `race`.

Napkin: DeepSeek-V3 decode, T = 64 and top_k = 8 over E = 256 experts with block 64 gives
512 real rows, but each of the ~220 experts hit gets a whole 64-row block: ~14 000 rows, 96% padding. That is why
decode kernels use a small block.
""",
    hints=[
        "Walk the experts in order keeping a running start: each expert's group begins where the previous padded "
        "group ended, and its padded size is its count rounded up to a multiple of block.",
        "Expert e's group covers rows start .. start + padded - 1, so blocks start // block up to (start + padded) // "
        "block - 1 belong to e in expert_ids. After the last expert the running start is n_padded.",
        "In the scatter, two slots of one expert must never get the same row: claim a row with an atomic increment of "
        "that expert's cursor (cuda.atomic.add returns the value before the increment: that row is yours), and write "
        "the slot's index s there in sorted_ids.",
    ],
    shapes=ALIGN_SHAPES,
    cases=("random", "skewed"),
    seeds=(0,),
)

register_exercise(
    "moe-silu-and-mul",
    title="The fused SiLU-and-mul epilogue of the gate/up grouped GEMM",
    op="moe",
    here=__file__,
    solution="ex_silu_solution.py",
    entry="moe",
    statement="""
A SwiGLU expert computes `SiLU(x W_gate^T) * (x W_up^T)` before the down projection. Unfused, the gate/up GEMM
writes a `[T*top_k, 2I]` tensor and a second kernel reads it back: at the Mixtral prefill shape (T = 4096,
top_k = 2, I = 14336, bf16) that is 470 MB written and read again, ~0.2 ms at 4.3 TB/s for nothing.

The starter's Triton kernel gathers each block's rows from `x` through `sorted_ids // top_k`, keeps **two** fp32
accumulators (the gate tile and the matching up tile, rows `n` and `I + n` of `w1[e]`), and then stores only the
gate. **TODO:** write the epilogue so the kernel stores `SiLU(gate) * up`. The down projection and the combine
are given (solved, from the other exercise).
""",
    hints=[
        "SiLU(g) = g * sigmoid(g); Triton has tl.sigmoid.",
        "The epilogue combines the two fp32 tiles elementwise, SiLU of the gate tile times the up tile; the store "
        "that follows converts to the output dtype.",
    ],
    shapes=MOE_SHAPES,
    cases=("random", "one_expert"),
    dtypes=("float32",),
    seeds=(0,),
)

register_exercise(
    "moe-weighted-combine",
    title="The weighted top-k combine, fused into the down projection",
    op="moe",
    here=__file__,
    solution="ex_combine_solution.py",
    entry="moe",
    statement="""
Each token's output is `sum_j weight[t, j] * expert_{ids[t, j]}(x[t])`. The down-projection kernel computes one
expert's rows for a block of slots; the starter then *stores* them into the token's output row, unweighted.

**TODO:** fuse the combine into the epilogue: load each row's router weight (`weight_ptr` holds one float32 per
slot `t*top_k + j`), scale the row, and **add** it into `out[token]`. A token's `top_k` slots are usually in
different experts' blocks, handled by different programs in any order, so the add must be atomic
(`tl.atomic_add` on the fp32 output; it is cast to the input dtype afterwards). The alternative, writing
`[T*top_k, d]` and summing in another kernel, costs a round trip: 2 x 117 MB at the Mixtral prefill shape in bf16.
""",
    hints=[
        "weight_ptr holds one fp32 router weight per slot: load it for the block's rows (padding rows get 0) and "
        "scale each row of acc by its weight.",
        "A token's top_k slots sit in different experts' row blocks, so several programs add into the same output "
        "row: the store must become an atomic add (tl.atomic_add), with the same mask.",
    ],
    shapes=MOE_SHAPES,
    cases=("random", "one_expert"),
    dtypes=("float32",),
    seeds=(0,),
)
