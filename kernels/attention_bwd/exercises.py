"""attention_bwd exercises: the dK/dV step of a FlashAttention backward in Triton."""

from workbench.practice.exercises import register_exercise

# Sq, Sk in {1, 17, 40}: 1 to 3 tiles of 16 each way, causal with Sq = Sk, Sq < Sk and Sq > Sk. fp32 only: the
# backward runs two kernels, ~0.5 s per case under the interpreter, so fp16 would double a ~3 s check. The largest
# case has B, H > 1 so the checker's pattern guess looks at the values, not at a size-1 batch dimension.
SHAPES = [{"B": 1, "H": 1, "Sq": 1, "Sk": 1, "D": 16, "causal": False},
          {"B": 1, "H": 1, "Sq": 40, "Sk": 40, "D": 16, "causal": False},
          {"B": 1, "H": 1, "Sq": 17, "Sk": 40, "D": 16, "causal": True},
          {"B": 1, "H": 1, "Sq": 40, "Sk": 17, "D": 16, "causal": True},
          {"B": 2, "H": 2, "Sq": 17, "Sk": 17, "D": 32, "causal": True}]

register_exercise(
    "attention-bwd-dkdv",
    title="FlashAttention backward in Triton: the dK/dV step",
    op="attention_bwd",
    here=__file__,
    solution="ex_dkdv_solution.py",
    entry="attention_bwd",
    statement="""
The backward pass gets what a FlashAttention forward saved: O and the logsumexp `lse` of each query row, so
`P = exp(S - lse)` can be rebuilt tile by tile from q and k instead of being stored (storing it costs
Sq x Sk x 4 B = 64 MiB per (batch, head) at S = 4096, against 4 MiB for q, k, v and o in fp16 at D = 128).
With `S = scale * q k^T` and the upstream gradient `dO`, per (batch, head):

- `dV = P^T dO`
- `dP = dO V^T`, `dS = P * (dP - Delta)` with `Delta_i = rowsum(dO_i * O_i)` (the softmax backward)
- `dQ = scale * dS K`, `dK = scale * dS^T Q`

**Why two kernels.** `dK_j` and `dV_j` sum over all query rows, `dQ_i` over all keys. A program that owns a key
tile can keep its dK and dV in registers over the whole loop and store them once, with no atomics; `dq_kernel`
(given, complete) is the mirror image over query tiles. Per pair of 16-row tiles the dK/dV kernel reads q and dO
(2 x 16 x D elements) and does four 16 x 16 x D matmuls (S, dP, dV, dK); K and V are read once per program.

**Your part.** The wrapper computes `Delta` in torch. `dkdv_kernel` loads its key tile's K and V, loops over the
query tiles and computes the scaled, masked scores `s` (-inf where masked: past Sq or Sk, or above the causal
diagonal). Write `dkdv_step`: add one query tile's share to `dk` and `dv` and return them. The untouched starter
returns them unchanged, so dK and dV come out as zeros: dq passes, dk and dv fail.
""",
    hints=[
        "P = exp(S - lse) is the forward's probability tile ([BLOCK_M, BLOCK_N]), 0 where s is -inf. dV is [BLOCK_N, "
        "D]: it accumulates P transposed times dO.",
        "dP = dO V^T is [BLOCK_M, BLOCK_N]; the softmax backward gives dS = P * (dP - Delta), Delta broadcast over "
        "the columns. dq_kernel above computes the same P, dP and dS: read it.",
        "dK accumulates dS transposed times Q, times the softmax scale (dq_kernel's last matmul, with the other "
        "operand). For float32 inputs keep every tl.dot exact with input_precision='ieee'.",
    ],
    shapes=SHAPES,
    dtypes=("float32",),
    seeds=(0,),
)
