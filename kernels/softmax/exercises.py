"""softmax exercises: a warp-shuffle reduction in CUDA C, the online-softmax recurrence, a fused Triton row."""

from workbench.practice.exercises import register_exercise

SMALL = [{"M": 1, "N": 1}, {"M": 5, "N": 33}, {"M": 3, "N": 1025}]

register_exercise(
    "softmax-warp-shuffle",
    title="Warp-shuffle reductions in CUDA C: one warp per row",
    op="softmax",
    here=__file__,
    solution="ex_warp_solution.py",
    entry="softmax",
    statement="""
Each row is handled by one warp of 32 threads: lane `l` reads elements `l, l+32, l+64, ...` (coalesced) and keeps
its own partial max and partial sum. Complete `warp_max` and `warp_sum` so that every lane ends up with the value
of the **whole warp**, using `__shfl_xor_sync`: in five butterfly steps (lanes 16, 8, 4, 2, 1 apart) each lane
combines its value with its partner's. No shared memory, no `__syncthreads()`.
""",
    hints=[
        "__shfl_xor_sync(0xffffffffu, v, off) returns v from the lane whose index is yours XOR off: a butterfly pairs "
        "lanes 16 apart, then 8, 4, 2 and 1.",
        "warp_max: at each of the five steps, keep the larger of your value and your partner's (fmaxf). After the "
        "last step every lane holds the maximum of all 32.",
        "warp_sum is the same loop with an addition instead of the max. Every lane of the mask must take part in each "
        "shuffle, so keep the loop outside any per-lane `if`.",
    ],
    shapes=SMALL,
    dtypes=("float32",),
    seeds=(0,),
    budgets={"barriers": "== 0  # one warp holds the row: shuffles move values between its lanes, so no "
                         "__syncthreads() is needed",
             "shared load requests": "== 0  # the reduction lives in registers: no shared-memory round trip",
             "sectors per load request": "<= 4  # lane l reads l, l + 32, ...: 32 neighbouring floats per load"},
    budget_shape={"M": 4, "N": 1024},
)

register_exercise(
    "softmax-online",
    title="Online softmax: the max and the sum in one pass",
    op="softmax",
    here=__file__,
    solution="ex_online_solution.py",
    entry="softmax",
    statement="""
The kernel reads each row in chunks of `BLOCK_N` and keeps a running max `m` and a running sum `s` of
`exp(x - m)`. When a chunk raises the max from `m` to `m_new`, every term already in `s` was computed against the
old max. Fix the update so that after each chunk `s == sum(exp(x_seen - m_new))`. This recurrence is the heart of
FlashAttention (notebook 03). The checker's edge rows include one that is `-inf` everywhere but its last element:
its first chunks hold only `-inf`, where a rescale `exp(m - m_new)` would compute `exp(-inf - -inf)` = NaN.
""",
    hints=[
        "exp(x - m_new) = exp(x - m) * exp(m - m_new): every term already in the running sum s is relative to the old "
        "max m.",
        "So before adding the new block's terms, multiply the old sum by the factor that moves it from m to the new "
        "reference (ref). ref is 0 while the whole row so far is -inf, which keeps that factor finite.",
    ],
    shapes=SMALL,
    dtypes=("float32", "float16"),
    seeds=(0,),
)

register_exercise(
    "softmax-triton-row",
    title="A fused softmax row in Triton",
    op="softmax",
    here=__file__,
    solution="ex_row_solution.py",
    entry="softmax",
    statement="""
One program per row, the whole row in registers (`BLOCK_N` is the next power of two >= N): load it once, compute
max, exp, sum and divide in float32, and store once. That is 2 x N elements of DRAM traffic, the minimum.
The checker includes rows with -inf entries, a row near 1e4 (overflows without the max) and an all -inf row
(which must give NaN, like torch.softmax).
""",
    hints=[
        "Masked lanes must not change the max or the sum: load them as -inf, since exp(-inf) = 0.",
        "Row `row` starts row * N elements in: load at that offset plus cols, convert to float32, subtract the row "
        "max (tl.max over the row), exponentiate, divide by the sum (tl.sum).",
        "Store at the same offsets under the same mask, converted back to the output's element type "
        "(y_ptr.dtype.element_ty), so float16 inputs give float16 outputs.",
    ],
    shapes=SMALL,
    dtypes=("float32", "float16"),
    seeds=(0,),
)
