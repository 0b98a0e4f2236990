"""wb.show_source shows a rung's own code (launcher, kernels, helpers from headers); wb.diff compares two rungs."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench as wb
from workbench.rung_source import c_definitions, diff_text, rung


def test_numba_rung_is_its_own_kernel_not_the_file():
    text = rung(wb.variant("gemm", "numba_coalesced")).text()
    assert "def coalesced_kernel" in text and "def numba_coalesced" in text
    for other in ("def naive_kernel", "def smem_kernel", "def regblock_kernel", "def numba_naive"):
        assert other not in text
    assert len(text.splitlines()) < len(wb.variant("gemm", "numba_coalesced").source.read_text().splitlines()) / 2


def test_cuda_rung_shows_the_helpers_it_calls_from_headers():
    r = rung(wb.variant("softmax", "cuda_block"))
    helpers = [p for p in r.parts if p.helper]
    assert helpers and all(p.path.name == "kernel_helpers.cuh" for p in helpers)
    block_merge = next(p for p in helpers if "block_merge" in p.title)
    assert block_merge.text.count("__syncthreads()") == 2  # the rung's subject: its two barriers
    own = "\n".join(p.text for p in r.parts if not p.helper)
    assert "softmax_block_f32" in own and "block_merge(mx, s)" in own
    assert "warp_sum" not in r.text()  # a header helper it never calls stays out
    md = r.markdown()
    assert "<details>" in md and "block_merge" in md


def test_one_kernel_of_a_multi_kernel_file():
    text = rung(wb.variant("transpose", "cuda_padded")).text()
    assert "transpose_padded_f32" in text and "#define TILE 32" in text
    assert "transpose_naive_f32(" not in text and "transpose_smem_f32(" not in text.replace('"transpose_smem', "")


@pytest.mark.parametrize("op", wb.ops())
def test_every_rung_has_its_launcher_and_kernel(op):
    for v in wb.variants(op) + wb.known_wrong(op):
        r = rung(v)
        text = r.text()
        assert r.parts, f"{op}/{v.name}: nothing shown"
        assert v.fn.__name__ in text or "def " in text, f"{op}/{v.name}: launcher missing"
        if v.cu_file is not None:
            assert "__global__" in text, f"{op}/{v.name}: no kernel shown from {v.cu_file}"


def test_full_shows_the_files(capsys):
    v = wb.variant("gemm", "numba_naive")
    text = wb.show_source(v, full=True)
    assert "def smem_kernel" in text and "def naive_kernel" in text
    text = wb.show_source(v)
    assert "def naive_kernel" in text and "def smem_kernel" not in text
    assert "numba_naive" in capsys.readouterr().out


def test_diff_shows_only_what_changed():
    d = diff_text(wb.variant("transpose", "cuda_smem"), wb.variant("transpose", "cuda_padded"))
    plus = [ln for ln in d.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert "+    __shared__ float tile[TILE][TILE + 1];" in plus
    assert not any("#define" in ln for ln in plus)  # the shared preamble is context, not a change
    assert wb.diff("cuda_smem", "cuda_smem", op="transpose") == ""
    with pytest.raises(TypeError, match="op="):
        wb.diff("cuda_smem", "cuda_padded")


def test_c_definitions_ignore_braces_in_comments_and_strings(tmp_path: Path):
    f = tmp_path / "k.cu"
    f.write_text('// a } in a comment {\n#define N 4\n'
                 'struct alignas(16) Packed { float v[4]; };\n'
                 '/* block { */ __device__ int helper(int x) { const char* s = "}{"; return x + N; }\n\n'
                 '// the kernel\ntemplate <int B>\n'
                 '__global__ void k(int* y) { if (threadIdx.x) { y[0] = helper(1); } }\n'
                 'extern "C" __global__ void k_4(int* y) { k<4>(y); }\n')
    defs = {d.name: d for d in c_definitions(f)}
    assert list(defs) == ["Packed", "helper", "k", "k_4"]
    assert defs["k"].text.startswith("// the kernel\ntemplate <int B>") and defs["k"].line == 6
