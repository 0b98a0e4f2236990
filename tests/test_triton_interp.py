"""The Triton interpreter fixes of workbench/_triton_interp.py that no other test file covers."""

from __future__ import annotations

import textwrap

import torch

import workbench  # noqa: F401  (installs the interpreter fixes in cpu mode)

KERNEL = textwrap.dedent('''
    import triton
    import triton.language as tl

    @triton.jit
    def twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
''')


def test_a_notebook_kernel_leaves_no_file_in_its_globals(tmp_path):
    """A kernel defined in a notebook runs in __main__'s globals: the interpreter must not add __file__ there.

    With triton/runtime/interpreter.py as __main__.__file__, every process started with spawn afterwards (the
    expert-parallel ranks of notebook 04) ran that file as its main module and died on its relative import.
    """
    src = tmp_path / "cell.py"  # the interpreter reads the kernel's source through inspect, as from a notebook cell
    src.write_text(KERNEL)
    ns: dict = {"__name__": "__main__"}
    exec(compile(KERNEL, str(src), "exec"), ns)  # noqa: S102  (a notebook cell's namespace: no __file__)
    x = torch.arange(5, dtype=torch.float32)
    y = torch.zeros_like(x)
    ns["twice"][(1,)](x, y, 5, BLOCK=8)
    assert torch.equal(y, 2 * x)
    assert "__file__" not in ns and "__cached__" not in ns
