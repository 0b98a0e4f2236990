"""The ladder table of notebook 01: a row per rung, intensities, bounds and cited ratios computed, HTML escaped."""

from __future__ import annotations

import re

import pytest

from workbench import hardware
from workbench.ladder import Cited, LadderTable, Rung, ladder_table, load_ladder, tile_intensity


def test_tile_intensity_is_the_formula_of_section_1():
    assert tile_intensity(1, 1, 4) == 0.25  # naive: a "1x1 tile" in fp32
    assert tile_intensity(128, 128, 4) == 32.0
    assert tile_intensity(128, 256, 2) == pytest.approx(2 * 128 * 256 / (384 * 2))
    with pytest.raises(ValueError, match="tile_intensity: bm must be a positive number"):
        tile_intensity(0, 4, 4)
    with pytest.raises(ValueError, match="elem_bytes"):
        tile_intensity(4, 4, "4")


def test_gemm_table_has_a_row_per_rung_of_the_ladder_file():
    rungs, cited = load_ladder("gemm")
    table = ladder_table("gemm", "H200")
    assert isinstance(table, LadderTable)
    assert [r.rung for r in table.rows] == rungs
    assert len(table.rows) == 10 and table.row("cuda_naive").rung.name == "naive"
    assert cited is not None and "Boehm" in cited.source and "RTX A6000" in cited.what
    import workbench as wb

    names = {v.name for v in wb.variants("gemm")}
    assert {r.rung.variant for r in table.rows} <= names


def test_bounds_follow_the_device_tables():
    table = ladder_table("gemm", "H200")
    h200 = hardware.get_device("H200")
    bw_tbs = h200.bandwidth_gbs / 1e3
    for row in table.rows:
        r = row.rung
        i = 2 * r.bm * r.bn / ((r.bm + r.bn) * (4 if r.dtype == "float32" else 2))
        peak = hardware.peak_tflops(h200, r.dtype)
        assert row.intensity == pytest.approx(i)
        assert row.bound_tflops == pytest.approx(min(peak, i * bw_tbs))
        assert row.bound_by == ("compute" if i * bw_tbs >= peak else "memory")
    assert table.row("naive").bound_by == "memory" and table.row("cuda_2d_blocktile").bound_by == "compute"


def test_cited_ratios_are_computed_from_the_cited_figures():
    table = ladder_table("gemm")
    v = table.cited.values
    assert f"Boehm: {v['coalesced'] / v['naive']:.2f}x over the rung above" in table.row("coalesced").note
    assert "6.43x" in table.row("coalesced").note  # 1986.5 / 309.0, as the worklog's table gives
    assert f"{100 * v['warptile'] / v['cuBLAS']:.1f}% of cuBLAS" in table.row("warptiling").note
    assert "over the rung above" not in table.row("naive").note  # nothing cited above the first rung
    assert "Boehm" not in table.row("wmma").note  # tensor-core rungs cite nothing
    last = table.row("cuda_wgmma_tma").note
    assert f"{hardware.measured_tflops('H200', 'bfloat16'):.0f} TFLOP/s" in last


def test_html_is_escaped_and_has_a_row_per_rung():
    rungs = [Rung("a<b> & c", "v<1>", 32, 32, "float32", "limit >= 90% <script>"),
             Rung("next", "v2", 64, 64, "bfloat16", "x")]
    out = ladder_table(rungs, "H200")._repr_html_()
    assert "<script>" not in out and "&lt;script&gt;" in out and "a&lt;b&gt; &amp; c" in out
    assert "&gt;= 90%" in out
    assert out.count("<tr>") == 3  # the header and one per rung
    assert len(re.findall(r"<th>", out)) == 6


def test_text_repr_for_terminals():
    table = ladder_table("gemm")
    text = str(table)
    lines = text.splitlines()
    assert lines[0].split()[0] == "rung" and set(lines[1].replace(" ", "")) == {"-"}
    assert len(lines) == 2 + len(table.rows) + 1  # header, rule, a line per rung, the caption
    assert lines[2].startswith("naive") and "cuda_naive" in lines[2] and "0.25" in lines[2]
    assert repr(table) == text
    assert "<" not in text.replace(">=", "")  # plain text, no markup
    assert "H200" in lines[-1] and "Boehm" in lines[-1]


def test_bad_rungs_are_refused_with_the_function_named():
    with pytest.raises(ValueError, match="ladder_table: expected at least one rung"):
        ladder_table([])
    with pytest.raises(TypeError, match="ladder_table: expected Rung objects"):
        ladder_table([("naive", "cuda_naive", (1, 1, 4), "x")])
    cited = Cited("a source", "GFLOP/s", {"x": 1.0}, "S")
    with pytest.raises(KeyError, match="cites 'y', which is not a cited figure"):
        ladder_table([Rung("r", "v", 1, 1, "float32", "l", cited="y")], cited=cited)
    with pytest.raises(FileNotFoundError, match="load_ladder"):
        ladder_table("no_such_op")
    with pytest.raises(KeyError, match="no rung 'nope'"):
        ladder_table("gemm").row("nope")


def test_a_ladder_file_with_a_bad_rung_names_it(tmp_path):
    p = tmp_path / "ladder.toml"
    p.write_text('[[rung]]\nname = "r"\nvariant = "v"\ntile = [1]\ndtype = "float32"\nlimit = "l"\n')
    with pytest.raises(ValueError, match="rung 1: .*expected name, variant, tile"):
        load_ladder("x", p)
