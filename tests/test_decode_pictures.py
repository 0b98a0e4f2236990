"""Notebook 06's pictures: the block table and its pool drawn from real decode_attention inputs, the toy page
allocator behind the decode-step slider, and the quantized cache's error-against-bytes figure."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("plotly.graph_objects", reason="plotly is not installed (notebook wheels not carried)")

import workbench as wb  # noqa: E402
from workbench import decode_pictures as dp  # noqa: E402

SMALL = {"B": 3, "Hq": 4, "Hkv": 2, "L": 9, "D": 8, "page": 4}


def _inputs(**kw):
    shape = {**SMALL, **kw}
    q, k, v, table, lens = wb.make_inputs("decode_attention", seed=0, **shape)
    return table, lens, k.shape[0], k.shape[1], k


def test_the_pool_panel_is_the_caches_ownership():
    table, lens, n_pages, page, k = _inputs()
    fig = dp.block_table_figure(table, lens, n_pages, page)
    left, right = fig.data[0], fig.data[1]
    assert (left.type, right.type) == ("heatmap", "heatmap")
    owned = 0
    nan_slot = k.isnan().any(-1).any(-1)  # [P, page]: make() poisons exactly the slots nobody owns
    for p in range(n_pages):
        for s in range(page):
            z, text = right.z[p][s], right.text[p][s]
            assert (z == -1) == bool(nan_slot[p, s]), (p, s)
            owned += z != -1
            assert (text == "") == (z == -1)
    assert owned == int(lens.sum()) == fig.layout.meta["owned_slots"]
    for b, n in enumerate(lens.tolist()):  # token t of sequence b: page table[b, t // page], slot t % page
        for t in range(n):
            p = int(table[b, t // page])
            assert right.z[p][t % page] == b and right.text[p][t % page] == f"t{t}"


def test_the_table_panel_marks_used_entries_and_junk():
    table, lens, n_pages, page, _ = _inputs()
    left = dp.block_table_figure(table, lens, n_pages, page).data[0]
    for b, n in enumerate(lens.tolist()):
        used = -(-n // page)
        for j, pid in enumerate(table[b].tolist()):
            assert left.z[b][j] == (b if j < used else -1)
            assert left.text[b][j] == str(pid)  # junk ids (-1, P + 7) are written too, greyed
            assert ("junk" in left.hovertext[b][j]) == (j >= used)


def test_the_figure_fits_jupyterlabs_default_width():
    table, lens, n_pages, page, _ = _inputs()
    fig = dp.block_table_figure(table, lens, n_pages, page)
    assert fig.layout.width is None  # the notebook's width (~850 px), not a fixed one
    assert all(len(a.text) <= 45 for a in fig.layout.annotations)  # the two panel titles, ~300 px each at 14 px
    assert [t.name for t in fig.data[2:]] == [f"seq {b}: {n} tokens" for b, n in enumerate(lens.tolist())]
    big = dp.block_table_figure(*dp.allocate([60] * 12, 0, 4, 200), 200, 4)  # 800 pool cells: hover only
    assert big.data[1].texttemplate == "" and fig.data[1].texttemplate == "%{text}"


def test_allocate_hands_out_each_page_once_and_only_when_needed():
    prompts, page, pool = (6, 1, 9), 4, 14
    before = None
    for step in range(9):
        table, lens = dp.allocate(prompts, step, page, pool, maxp=5)
        assert lens == [n + step for n in prompts]
        pages = [p for row in table for p in row if p != -1]
        assert len(pages) == len(set(pages)) and all(0 <= p < pool for p in pages)
        for row, n in zip(table, lens, strict=True):
            used = -(-n // page)
            assert all(p != -1 for p in row[:used]) and all(p == -1 for p in row[used:])
        if before is not None:  # earlier pages stay where they were
            assert all(r0[:len([p for p in r0 if p != -1])] == r1[:len([p for p in r0 if p != -1])]
                       for r0, r1 in zip(before, table, strict=True))
        before = table
    assert dp.allocate(prompts, 8, page, pool, seed=1) != dp.allocate(prompts, 8, page, pool, seed=0)


@pytest.mark.parametrize("kw,match", [
    ({"n_pages": 2}, "pool of 2 pages is full at prefill"),
    ({"n_pages": 5, "steps": 7}, "full at decode step"),
    ({"page": 0}, "page must be an int >= 1"),
    ({"prompt_lens": (3, 0)}, "each prompt length must be an int >= 1"),
    ({"maxp": 1}, "maxp = 1 entries cannot hold"),
])
def test_allocate_says_what_is_wrong(kw, match):
    args = {"prompt_lens": (6, 1), "steps": 0, "page": 4, "n_pages": 8, **kw}
    with pytest.raises(ValueError, match=match):
        dp.allocate(**args)


@pytest.mark.parametrize("change,match", [
    (lambda t, n, p: (t, n[:-1], p), "rows"),
    (lambda t, n, p: ([[0.5] * len(t[0])] * len(t), n, p), "array of integers"),
    (lambda t, n, p: (t, [n[0] + 99] + n[1:], p), r"seq_lens\[0\]"),
    (lambda t, n, p: ([[p + 1] + r[1:] for r in t], n, p), "outside the pool"),
    (lambda t, n, p: ([[t[0][0]] + r[1:] for r in t], n, p), "claimed by sequence 0 and sequence 1"),
])
def test_block_table_figure_refuses_inputs_that_do_not_fit(change, match):
    table, lens, n_pages, page, _ = _inputs()
    t, n, p = change(table.tolist(), lens.tolist(), n_pages)
    with pytest.raises(ValueError, match=match):
        dp.block_table_figure(t, n, p, page)


def test_the_slider_grows_the_sequences_page_by_page():
    pytest.importorskip("ipywidgets", reason="ipywidgets is not installed (notebook wheels not carried)")
    box = dp.block_table_explorer(prompt_lens=(6, 1, 9), page=4, n_pages=14, max_steps=8, step=0)
    assert list(box.children) == [box.step_slider, box.info, box.figure]
    pool0 = [list(r) for r in box.figure.data[1].z]
    box.step_slider.value = 3
    table, lens = box.state(3)
    assert lens == [9, 4, 12] and "lengths [9, 4, 12]" in box.info.value
    assert [list(r) for r in box.figure.data[1].z] != pool0
    want = dp.block_table_figure(table, lens, 14, 4)
    assert [list(r) for r in box.figure.data[1].z] == [list(r) for r in want.data[1].z]
    assert box.figure.data[2].name == "seq 0: 9 tokens"
    with pytest.raises(ValueError, match="step must be in"):
        dp.block_table_explorer(step=99)


ROWS = [{"format": "bf16", "kv_bytes_per_token_head": 512, "rms_err": 1e-3, "max_abs_err": 7e-3},
        {"format": "int8", "kv_bytes_per_token_head": 264, "rms_err": 4.5e-3, "max_abs_err": 1.5e-2},
        {"format": "e4m3", "kv_bytes_per_token_head": 264, "rms_err": 1.6e-2, "max_abs_err": 0.0}]


def test_error_vs_bytes_draws_each_format_apart():
    fig = dp.error_vs_bytes_figure(ROWS)
    assert [t.name for t in fig.data] == ["bf16", "int8", "e4m3"]
    bf16, int8, e4m3 = fig.data
    assert list(bf16.y) == [1e-3, 7e-3] and fig.layout.yaxis.type == "log"
    assert int8.x[0] != e4m3.x[0] and abs(int8.x[0] - 264) < 15 and abs(e4m3.x[0] - 264) < 15  # side by side
    assert 0 < e4m3.y[1] < min(r["rms_err"] for r in ROWS)  # a zero error at the floor, not dropped
    assert "264 B per token and KV head" in e4m3.hovertext[0] and "0.00e+00" in e4m3.hovertext[1]


def test_error_vs_bytes_figure_takes_the_studys_rows():
    pytest.importorskip("kernels.decode_attention_q8.reference")
    from kernels.decode_attention_q8.reference import error_vs_bytes

    rows = error_vs_bytes(B=2, Hq=4, Hkv=2, L=32, D=32, page=8)
    fig = dp.error_vs_bytes_figure(rows)
    assert [t.name for t in fig.data] == [r["format"] for r in rows]
    assert all(math.isfinite(y) and y > 0 for t in fig.data for y in t.y)
    with pytest.raises(ValueError, match="expected error_vs_bytes rows"):
        dp.error_vs_bytes_figure([{"format": "int8"}])
    with pytest.raises(ValueError, match="expected error_vs_bytes rows"):
        dp.error_vs_bytes_figure([])
