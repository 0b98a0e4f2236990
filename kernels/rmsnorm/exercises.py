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
        "map_expr is an expression of the input x: what one element adds to the row's sum. Square it in float, not in "
        "T: an fp16 x of 300 squares to 9e4, past fp16's largest value, 65504.",
        "reduce_expr combines two partial sums a and b; the starter's \"a\" keeps one and drops the other. Partial "
        "sums meet in a tree in no fixed order, so use the associative, commutative operation of a sum.",
        "identity is where every thread's partial sum starts, before its first element: it must change nothing. The "
        "starter's \"1\" adds one to the sum of every thread that takes part, so each row's sum comes out too big.",
    ],
    shapes=[{"M": 1, "N": 1}, {"M": 5, "N": 33}, {"M": 3, "N": 1030}],
    dtypes=("float32", "float16"),
    seeds=(0,),
)
