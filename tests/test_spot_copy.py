"""A spot-the-bug drill runs a copy of its kernel's files: the copy must find every header its .cu includes."""

from __future__ import annotations

from workbench.practice.spot import _copy_cuda


def test_the_copy_mirrors_kernels_so_shared_headers_resolve(tmp_path):
    kernels = tmp_path / "kernels"
    (kernels / "op" / "cu").mkdir(parents=True)
    (kernels / "include").mkdir()
    (kernels / "include" / "helpers.cuh").write_text("#define H 1\n")
    (kernels / "op" / "cu" / "local.cuh").write_text('#include "../../include/helpers.cuh"\n')
    cu = kernels / "op" / "cu" / "wrong.cu"
    text = '#include "local.cuh"\n#include "../../include/helpers.cuh"\n#include <math_constants.h>\n'
    cu.write_text(text)
    out = tmp_path / "copy"
    _copy_cuda(cu, text + "// fixed\n", kernels / "op", out)
    assert (out / "op" / "cu" / "wrong.cu").read_text().endswith("// fixed\n")  # the given text, not the file's
    assert (out / "op" / "cu" / "local.cuh").is_file() and (out / "include" / "helpers.cuh").is_file()
