"""vecadd exercises: a Triton kernel with a mask, and a Numba launch grid that covers the tail."""

from workbench.practice.exercises import register_exercise

register_exercise(
    "vecadd-triton",
    title="Vector add in Triton: offsets and a mask",
    op="vecadd",
    here=__file__,
    solution="ex_triton_solution.py",
    entry="vecadd",
    statement="""
Write `vecadd(x, y)` with a Triton kernel: each program handles `BLOCK` consecutive elements. Compute this
program's offsets, mask the ones past `n`, load `x` and `y` under the mask and store `x + y` under the mask.
The checker tries n = 1, 17, 1023, 1025 and 4099, so the last program is usually partial.
""",
    hints=[
        "pid = tl.program_id(0); offs = pid * BLOCK + tl.arange(0, BLOCK) gives this program's element indices.",
        "mask = offs < n. Pass mask=mask to tl.load and to tl.store: masked lanes neither read nor write.",
        "Launch ceil(n / BLOCK) programs: grid = (triton.cdiv(n, BLOCK),).",
    ],
    dtypes=("float32", "float16"),
)

register_exercise(
    "vecadd-numba-grid",
    title="Vector add in Numba: a grid that covers every element",
    op="vecadd",
    here=__file__,
    solution="ex_numba_solution.py",
    entry="vecadd",
    statement="""
The kernel is written; the launch is not. Choose the number of blocks so that every element gets a thread
when n is not a multiple of the block size, and make sure the extra threads of the last block do nothing.
""",
    hints=[
        "With 256 threads per block, n = 1025 needs 5 blocks, not 4: round the division up.",
        "blocks = (n + THREADS - 1) // THREADS; the kernel's `if i < n` keeps the extra threads idle.",
    ],
    dtypes=("float32",),
    seeds=(0,),
)
