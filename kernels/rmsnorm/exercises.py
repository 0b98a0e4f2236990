"""rmsnorm exercise: the row sum of squares as a cupy.ReductionKernel (the CuPy rung's kernel generator)."""

from workbench.practice.exercises import register_exercise

register_exercise(
    "rmsnorm-reduction-kernel",
    title="A ReductionKernel for the row sum of squares",
    op="rmsnorm",
    here=__file__,
    solution="ex_sumsq_solution.py",
    entry="rmsnorm",
    statement="""
RMSNorm needs one number per row before it can scale anything: the sum of squares `ss = sum_j x[i,j]^2`.
`cupy.ReductionKernel` writes that reduction for you from four short C++ strings:

* `map_expr`: what one element contributes, written with the input names (`x`);
* `reduce_expr`: how two partial results `a` and `b` combine (partial sums from different threads meet in a
  shared-memory tree, in no fixed order, so the operation must be associative);
* `post_map_expr`: what to store, from the final value `a` (given: `ss = a`);
* `identity`: the value every thread's partial result starts from, which must not change the result.

Complete the TODO strings so that `sum_squares(a, axis=1)` returns each row's sum of squares in float32. The
scaling kernel and the call are written. The checker runs float32 and float16 and a "large" case with |x| ~ 300,
whose squares (9e4) do not fit in float16. In cpu mode the kernel cupy would generate runs on the CPU engine:
`print(sum_squares.cached_code)` after a call shows where your strings went.
""",
    hints=[
        "map_expr is an expression of x: its square, computed in float so an fp16 input cannot overflow: "
        "\"(float)x * (float)x\".",
        "A sum reduces with \"a + b\". Any associative, commutative combination works there; \"a\" alone drops b.",
        "The identity of a sum is \"0\": a thread with no elements (or a row of one element) must add nothing.",
    ],
    shapes=[{"M": 1, "N": 1}, {"M": 5, "N": 33}, {"M": 3, "N": 1030}],
    dtypes=("float32", "float16"),
    seeds=(0,),
)
