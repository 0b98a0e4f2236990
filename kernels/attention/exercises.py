"""attention exercises: FlashAttention's online-softmax update in Triton, then causal tile skipping and masking."""

from workbench.practice.exercises import register_exercise

# Sk = 17 and 40 take 2 and 3 key tiles of 16. The largest case has B, H > 1 so the checker's pattern guess looks at
# the values, not at a size-1 batch dimension. About 1.5 s per check under the interpreter.
ONLINE_SHAPES = [{"B": 1, "H": 1, "Sq": 1, "Sk": 1, "D": 16, "causal": False},
                 {"B": 1, "H": 2, "Sq": 17, "Sk": 17, "D": 32, "causal": False},
                 {"B": 1, "H": 1, "Sq": 17, "Sk": 40, "D": 16, "causal": False},
                 {"B": 2, "H": 2, "Sq": 40, "Sk": 40, "D": 32, "causal": False}]

# Causal with Sq = Sk, Sq < Sk and Sq > Sk (top-left aligned), plus one non-causal case that must stay right.
# The starter visits all 3 x 3 tile pairs at S = 40, the solution 6 of them.
CAUSAL_SHAPES = [{"B": 1, "H": 1, "Sq": 1, "Sk": 1, "D": 16, "causal": True},
                 {"B": 1, "H": 1, "Sq": 17, "Sk": 40, "D": 16, "causal": False},
                 {"B": 1, "H": 2, "Sq": 17, "Sk": 40, "D": 16, "causal": True},
                 {"B": 1, "H": 2, "Sq": 40, "Sk": 17, "D": 16, "causal": True},
                 {"B": 2, "H": 2, "Sq": 40, "Sk": 40, "D": 16, "causal": True}]

register_exercise(
    "attention-online-softmax",
    title="FlashAttention forward in Triton: the online-softmax update",
    op="attention",
    here=__file__,
    solution="ex_online_solution.py",
    entry="attention",
    statement="""
**Why fuse.** Plain attention writes the scores `S = scale * q k^T` and the probabilities `P` to memory and reads
them back. Napkin for one (batch, head) at S = 4096: S and P in fp32 are 4096^2 x 4 B = 64 MiB each, written and
read once: 256 MiB of traffic, against 4 x 4096 x 128 x 2 B = 4 MiB for q, k, v and o (fp16, D = 128). A fused
kernel that never stores S moves ~60x fewer bytes.

**How.** One program owns a tile of `BLOCK_M = 16` query rows (grid: query tiles x B*H) and walks over K and V in
tiles of `BLOCK_N = 16` keys, keeping per row a running max `m_i`, a running sum `l_i` of `exp(s - m_i)` and an
accumulator `acc` of `exp(s - m_i) * v`. At the end `o = acc / l_i`. This is the online softmax of notebook 02
(section 5, and exercise `softmax-online`), with a row of V riding along with each weight.

**Your part.** When a key tile raises a row's max from `m_i` to `m_new`, `l_i` and `acc` still hold terms weighted
by `exp(s - m_i)`, while the new tile's `p` is `exp(s - m_new)`. Fix the update at the TODO so both are rescaled
to the new max before `p` is added. The untouched starter is right only when all keys fit in one tile
(Sk <= 16); the checker uses Sk = 1, 17 and 40.
""",
    hints=[
        "exp(s - m_new) = exp(s - m_i) * exp(m_i - m_new): every term already in l_i and in acc must be multiplied by "
        "alpha = exp(m_i - m_new) (<= 1; exactly 1 when the max did not move).",
        "alpha holds one number per row ([BLOCK_M]) while acc is [BLOCK_M, BLOCK_D]: broadcast alpha over acc's "
        "columns.",
        "Rescale both running quantities first, then add the new tile's share (its row sums to l_i, its P V product "
        "to acc). On the first tile m_i = -inf, so alpha = 0 and the zeros stay zeros.",
    ],
    shapes=ONLINE_SHAPES,
    dtypes=("float32", "float16"),
    seeds=(0,),
)

register_exercise(
    "attention-causal-skip",
    title="Causal FlashAttention in Triton: skip the masked tiles, mask the diagonal",
    op="attention",
    here=__file__,
    solution="ex_causal_solution.py",
    entry="attention",
    statement="""
Causal attention (SDPA's `is_causal`): query `i` sees keys `j <= i`, aligned at the top-left corner also when
Sq != Sk (rows past Sk see every key). The starter is the solved kernel of `attention-online-softmax` with a
`CAUSAL` flag that does nothing yet: it visits every key tile and masks nothing. Two changes, both marked TODO:

1. **Skip the masked tiles.** With square 16 x 16 tiles, the diagonal of query tile `pid_m` lies in key tile
   `pid_m`; every key tile after it is fully masked. Stop the loop there. Napkin: with T = S / 16 tiles per side
   the loop then visits T(T+1)/2 of the T^2 tile pairs: at S = 4096 (T = 256) 50.2% of the K/V reads and of the
   two matmuls, so causal runs in about half the time. The checker only sees the outputs, not the skipped work:
   time both versions on a GPU to see it.
2. **Mask inside the diagonal tile**: scores of pairs with key index > query index become -inf before the max,
   so `exp` turns them into 0. Key 0 is in every row's first tile, so each row's max stays finite (no NaN guard).

The checker runs causal shapes with Sq = Sk, Sq < Sk and Sq > Sk, and one non-causal shape that must stay right.
""",
    hints=[
        "Query tile pid_m holds rows pid_m * BLOCK_M ... (pid_m + 1) * BLOCK_M - 1; keys from (pid_m + 1) * BLOCK_M "
        "on are masked for all of them, and keys past Sk do not exist.",
        "So with CAUSAL the loop over key tiles can end at the smaller of that bound and Sk, and without it at Sk. "
        "CAUSAL is a constexpr: the choice is made when the kernel is compiled.",
        "Inside the loop, after the Sk mask, when CAUSAL set to -inf the scores of keys later than their query "
        "(column index greater than row index: tl.where on the two index vectors). Doing it on every visited tile is "
        "correct; only the diagonal tile changes.",
    ],
    shapes=CAUSAL_SHAPES,
    dtypes=("float32",),  # fp16 adds nothing the online exercise does not check, and would double ~4 s
    seeds=(0,),
    # S = 64: T = 4 tiles of 16 per side; the diagonal loop visits T(T+1)/2 = 10 of the 16 tile pairs, 2 dots each
    budgets={"tl.dot calls": "<= 20  # at S = 64 (4 x 4 tiles of 16) the causal loop visits 1 + 2 + 3 + 4 = 10 "
                             "tile pairs, two tl.dot each; the key tiles past the diagonal are fully masked: stop "
                             "the loop there instead of computing them and masking everything"},
    budget_shape={"B": 1, "H": 1, "Sq": 64, "Sk": 64, "D": 16, "causal": True},
)
