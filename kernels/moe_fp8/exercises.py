"""moe_fp8 exercise: requantize the SwiGLU output in the gate/up epilogue (DeepSeek-V3's 1x128 groups)."""

from workbench.practice.exercises import register_exercise

# Tiny problems (the interpreter costs ~1 ms per program); I = 136: two groups along I, the second ragged.
SHAPES = [{"T": 1, "d": 16, "I": 16, "E": 4, "top_k": 2},
          {"T": 7, "d": 33, "I": 20, "E": 4, "top_k": 2},
          {"T": 4, "d": 40, "I": 136, "E": 4, "top_k": 2}]

register_exercise(
    "moe-fp8-requant",
    title="fp8 MoE: requantize SiLU(gate) * up per 1x128 group inside the gate/up epilogue",
    op="moe_fp8",
    here=__file__,
    solution="ex_requant_solution.py",
    entry="moe_fp8",
    statement="""
In DeepSeek-V3's fp8 recipe (the `moe_fp8` contract) the down projection reads the SwiGLU output in e4m3, with
one float32 scale per token and group of 128 channels. A program of the gate/up kernel owns 128 columns of the
intermediate, so each of its rows is exactly one group: the amax is a row max inside the tile, and the kernel
can write the down GEMM's operand at 1 byte per element, in the same pass that computes it.

The starter's kernel runs the K loop in steps of 128 (one scale of x and one 128x128 block of w1 per step, each
step's `tl.dot` scaled into fp32 accumulators) and computes `h = SiLU(gate) * up` in fp32. Then it stores `h`
as it is. **TODO:** requantize it. Per row, `scale = max(amax, 1e-12) / 448`, so the group's largest value lands
on e4m3's largest, 448. Then `q = e4m3_rne(h / scale)` (rounds onto the e4m3 grid, ties to even; the Triton
interpreter's own fp8 cast drops carries). Store `q` and each row's scale. Divide with `tl.math.div_rn`: the
contract's recipe divides in IEEE arithmetic, and Triton's `/` is an approximation within 2 ulp.

Routing, x's quantization, the alignment and the down kernel are given (`kernels/moe_fp8/ex_common.py`).
""",
    hints=[
        "Each row of h (128 columns, one quantization group) gets one scale: its largest magnitude (a max of absolute "
        "values along the columns), at least 1e-12, divided by 448, e4m3's largest value. Columns past I hold 0 and "
        "do not move it.",
        "Both divisions, the scale's and h's by its row's scale (broadcast over the columns), use tl.math.div_rn as "
        "the contract does; e4m3_rne rounds h / scale onto the e4m3 grid: that is q. The two stores below already "
        "write q and scale.",
    ],
    shapes=SHAPES,
    cases=("random", "one_expert"),
    dtypes=("bfloat16",),
    seeds=(0,),
)
