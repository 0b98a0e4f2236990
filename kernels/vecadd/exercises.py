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
The checker tries n = 1, 17, 1023, 1025, 1032 and 4099, so the last program is usually partial.
""",
    hints=[
        "Each program owns BLOCK consecutive elements starting at its program id times BLOCK; tl.arange(0, BLOCK) "
        "gives the offsets within the block.",
        "Lanes whose index is n or more must neither load nor store: compare the offsets with n and pass that boolean "
        "vector as mask= to every tl.load and tl.store.",
        "Load x and y at their pointers plus the offsets, add them, and store the sum at out_ptr plus the offsets, "
        "all three under the one mask. The launch already rounds the program count up (triton.cdiv), so the last, "
        "partial program is then handled too.",
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
        "With 256 threads per block, n = 1025 elements need 5 blocks: 4 blocks cover only 1024.",
        "Round the division up instead of down (the integer form of ceil(n / THREADS)); the kernel's `if i < n` "
        "already keeps the extra threads of the last block idle.",
    ],
    dtypes=("float32",),
    seeds=(0,),
)
