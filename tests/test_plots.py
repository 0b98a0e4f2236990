"""Check the figures: expected traces, 'none recorded' notes, emulated exclusion, explorer updates, HTML."""

from __future__ import annotations

from pathlib import Path

import pytest

# A GPU box without the notebook wheels has no plotly: skip this file there instead of failing the whole
# collection (which used to stop every other test of the GPU run).
go = pytest.importorskip("plotly.graph_objects", reason="plotly is not installed (notebook wheels not carried)")

from _bench_fakes import FakeVariant, make_record  # noqa: E402

from workbench import explorers, hardware, plots  # noqa: E402

NONE_RECORDED = "No real-GPU results recorded yet for"


def _texts(fig: go.Figure) -> str:
    return " | ".join(a.text or "" for a in fig.layout.annotations)


def _records() -> list[dict]:
    return [
        make_record(v, n, time_ms=n**3 / 1e9 * (1 if v == "tiled" else 3))
        for v in ("naive", "tiled")
        for n in (256, 512, 1024, 2048)
    ]


def test_throughput_one_line_per_variant_with_provenance() -> None:
    fig = plots.throughput_vs_size(_records())
    assert [t.name for t in fig.data] == ["naive", "tiled"]
    assert list(fig.data[0].x) == [256, 512, 1024, 2048]
    assert fig.layout.xaxis.type == "log"
    assert "recorded on NVIDIA H200, 2026-10-28" in fig.layout.title.text
    assert NONE_RECORDED not in _texts(fig)
    assert fig.data[0].line.color == plots.variant_color("naive")


def test_throughput_gbps_and_size_key() -> None:
    fig = plots.throughput_vs_size(_records(), metric="gbps", size_key="K")
    assert fig.layout.yaxis.title.text == "GB/s" and fig.layout.xaxis.title.text == "K"
    with pytest.raises(KeyError, match="size_key 'Q'"):
        plots.throughput_vs_size(_records(), size_key="Q")
    with pytest.raises(ValueError, match="metric"):
        plots.throughput_vs_size(_records(), metric="flops")


@pytest.mark.parametrize("make", [
    lambda: plots.throughput_vs_size([], op="softmax"),
    lambda: plots.compare_variants([], op="softmax"),
    lambda: plots.roofline(op="softmax"),
    lambda: plots.throughput_vs_size(None, op="softmax"),
])
def test_zero_records_show_none_recorded(make) -> None:
    fig = make()
    text = _texts(fig)
    assert f"{NONE_RECORDED} softmax" in text
    assert "python -m workbench bench --op softmax" in text


def test_emulated_records_are_excluded_with_a_note() -> None:
    emu = [make_record("naive", n, emulated=True) for n in (256, 512)]
    for fig in (plots.throughput_vs_size(emu, op="gemm"), plots.compare_variants(emu, op="gemm"),
                plots.roofline(emu, op="gemm")):
        text = _texts(fig)
        assert "2 emulated (CPU) record(s) excluded" in text
        assert NONE_RECORDED in text
        assert not any(t.name and t.name.startswith("naive") for t in fig.data)


def test_compare_variants_bars_at_largest_shared_shape() -> None:
    fig = plots.compare_variants(_records())
    assert [t.type for t in fig.data] == ["bar", "bar"]
    assert [t.name for t in fig.data] == ["naive", "tiled"]
    assert "M=2048, N=2048, K=2048" in fig.layout.title.text
    assert "% of peak" in fig.data[0].hovertext[0]
    assert fig.data[1].marker.color == plots.variant_color("tiled")


def test_roofline_traces_ceilings_records_and_predictions() -> None:
    pts = [{"label": "naive", "intensity": 1.0}, {"label": "tiled", "intensity": 1000.0, "predicted": True}]
    fig = plots.roofline(_records(), points=pts)
    names = [t.name for t in fig.data]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert any(n.startswith("datasheet roof: 4,800 GB/s, float16 989.5") for n in names)
    assert any("fp32 SIMT 67" in n for n in names)
    assert any(n.startswith("measured copy bandwidth 4,300") for n in names)
    measured = [t for t in fig.data if t.legendgroup == "measured"]
    predicted = [t for t in fig.data if t.legendgroup == "predicted"]
    assert [t.name for t in measured] == ["naive (measured)", "tiled (measured)"]
    assert [t.name for t in predicted] == ["naive (predicted)", "tiled (predicted)"]
    assert all(t.legendgrouptitle.text == "predicted (napkin math)" for t in predicted)
    assert all(t.marker.symbol == "diamond-open" for t in predicted)
    assert all(t.marker.symbol == "circle" for t in measured)
    # drawn at the attainable bound min(peak, bw * I)
    assert predicted[0].y[0] == pytest.approx(4800 * 1.0 / 1e3)
    assert predicted[1].y[0] == pytest.approx(989.5)


def test_roofline_bf16_shows_measured_matmul_ceiling_and_unknown_gpu_note() -> None:
    fig = plots.roofline(device="H200", dtype="bfloat16")
    assert any(t.name.startswith("measured bfloat16 matmul 790") for t in fig.data)
    with pytest.raises(KeyError, match="No datasheet entry for 'NVIDIA B200'.*Known devices: .*H200"):
        plots.roofline(device="NVIDIA B200", points=[{"label": "x", "intensity": 3.0}])
    with pytest.raises(ValueError, match="predictions"):
        plots.roofline(points=[{"label": "x", "intensity": 1.0, "predicted": False}])


def test_save_html_is_standalone(tmp_path: Path) -> None:
    path = plots.save_html(plots.roofline(op="gemm"), tmp_path / "sub" / "roof.html")
    html = path.read_text()
    assert path.exists() and "<html>" in html[:200] and html.rstrip().endswith("</html>")
    assert "plotly.js v" in html or "Plotly" in html
    assert len(html) > 1_000_000  # plotly.js embedded, no CDN needed
    assert 'src="https://cdn.plot.ly' not in html


def _explorer(records=None):
    variants = [FakeVariant("naive", 1, "numba"), FakeVariant("tiled", 32), FakeVariant("torch", 128, "torch")]
    return explorers.explorer(
        "gemm", variants, None, None, [256, 512, 1024, 2048], ["float32", "float16"],
        lambda n: {"M": n, "N": n, "K": n}, records=records if records is not None else _records(),
    )


def _predicted(fig) -> dict[str, tuple]:
    return {t.name: (tuple(t.x), tuple(t.y)) for t in fig.data if t.legendgroup == "predicted" and t.visible}


def test_explorer_controls_update_figures_in_place() -> None:
    box = _explorer()
    roof, thr = box.figures
    assert box.roofline_figure is roof and box.throughput_figure is thr
    n_traces = len(roof.data)
    box.size_slider.value = 256
    box.dtype_dropdown.value = "float32"
    before = _predicted(roof)
    assert set(before) == {"naive (predicted)", "tiled (predicted)", "torch (predicted)"}

    box.size_slider.value = 2048  # intensity grows with size for the tiled variant
    after_size = _predicted(roof)
    assert after_size["tiled (predicted)"][0] != before["tiled (predicted)"][0]

    box.dtype_dropdown.value = "float16"  # fewer bytes per element: higher intensity, higher roof
    after_dtype = _predicted(roof)
    assert after_dtype["tiled (predicted)"][0][0] > after_size["tiled (predicted)"][0][0]
    assert "float16" in roof.fig.layout.title.text

    box.variant_select.value = ("tiled",)
    assert set(_predicted(roof)) == {"tiled (predicted)"}
    visible_lines = [t.name for t in thr.data if t.visible]
    assert visible_lines == ["tiled"]
    assert len(roof.data) == n_traces  # updated in place, same trace slots


def test_explorer_shows_recorded_points_at_selected_size_and_dtype() -> None:
    box = _explorer()
    roof, thr = box.figures
    box.dtype_dropdown.value = "float16"
    box.size_slider.value = 1024
    measured = {t.name: tuple(t.y) for t in roof.data if t.legendgroup == "measured" and t.visible}
    assert set(measured) == {"naive (measured)", "tiled (measured)"}
    assert all(len(y) == 1 for y in measured.values())
    assert NONE_RECORDED not in _texts(thr.fig)
    box.dtype_dropdown.value = "float32"  # nothing recorded in fp32
    assert not [t for t in roof.data if t.legendgroup == "measured" and t.visible]
    assert NONE_RECORDED in _texts(thr.fig)


def test_explorer_without_records_says_none_recorded() -> None:
    box = _explorer(records=[make_record("naive", 512, emulated=True)])
    roof, thr = box.figures
    assert NONE_RECORDED in _texts(thr.fig) and NONE_RECORDED in _texts(roof.fig)
    assert "emulated (CPU) record(s) excluded" in _texts(roof.fig)
    assert _predicted(roof)


def test_explorer_without_records_draws_the_napkin_bound() -> None:
    """No GPU record: the throughput figure shows the op's best possible TFLOP/s per size, labelled a model."""
    variants = [FakeVariant("naive", 1, "numba"), FakeVariant("tiled", 32)]
    box = explorers.explorer("gemm", variants, lambda M, N, K, dtype: 2 * M * N * K,
                             lambda M, N, K, dtype: 3 * M * N * 4, [256, 4096], ["float32", "float16"],
                             lambda n: {"M": n, "N": n, "K": n}, records=[], device="H200")
    thr = box.throughput_figure
    (bound,) = [t for t in thr.data if t.name == "napkin bound"]
    assert bound.visible and "not a measurement" in bound.legendgrouptitle.text
    h200 = hardware.DEVICES["H200"]
    bw = (h200.measured_bandwidth_gbs or h200.bandwidth_gbs) * 1e9
    t_256 = max(3 * 256**2 * 4 / bw, 2 * 256**3 / (hardware.peak_tflops(h200, "float32") * 1e12))
    assert list(bound.x) == [256, 4096] and bound.y[0] == pytest.approx(2 * 256**3 / t_256 / 1e12)
    assert bound.y[1] == pytest.approx(hardware.peak_tflops(h200, "float32"))  # 4096^3 is compute-bound
    box.dtype_dropdown.value = "float16"  # the widget keeps its trace slots
    assert [t.name for t in box.throughput_figure.data][-1] == "napkin bound"
    measured = _explorer()  # fp16 records exist at some sizes: the bound hides beside them
    measured.dtype_dropdown.value = "float16"
    assert not [t for t in measured.throughput_figure.data if t.name == "napkin bound" and t.visible]


# ------------------------------------------------------------------------------------- traffic model (counters)
def _table(op: str, shape: dict, compulsory: float, rows: list[tuple[str, str, float | None]], dtype: str = "float32"):
    """A counters table built by hand: (label, backends, global bytes) per row."""
    import torch

    from workbench.counters import CountersRow, CountersTable

    made = [CountersRow(label, be, 1, None, None, None, None, gb, None if gb is None else gb / compulsory,
                        note="" if gb is not None else "not counted")
            for label, be, gb in rows]
    return CountersTable(op, shape, getattr(torch, dtype), compulsory, made)


def _h200():
    from workbench import hardware

    spec = hardware.DEVICES["H200"]
    return spec, spec.measured_bandwidth_gbs, hardware.peak_tflops(spec, "float32")


def test_traffic_model_memory_bound_is_counted_bytes_over_copy_bandwidth() -> None:
    _, bw, _ = _h200()
    n = 1024  # vecadd: 1 FLOP and 12 compulsory bytes per element
    t = _table("vecadd", {"N": n}, 12 * n, [("grid", "cuda", 12 * n), ("chunked", "cuda", 96 * n),
                                            ("torch", "-", None)])
    grid, chunked = plots.traffic_model(t, device="H200")  # the uncounted row is left out
    assert chunked["time_s"] == pytest.approx(96 * n / (bw * 1e9))
    assert grid["gbps"] == pytest.approx(bw) and chunked["gbps"] == pytest.approx(bw / 8)  # 8x the bytes
    assert chunked["tflops"] == pytest.approx(n / chunked["time_s"] / 1e12)
    assert chunked["intensity"] == pytest.approx(1 / 12)  # drawn where a measurement of vecadd would be
    assert chunked["bound"] == "memory" and chunked["scope"] == "L1-level requests only"
    assert chunked["model"] == plots.MODEL_LABEL == "model from emulated counters, not a measurement"


def test_traffic_model_compute_bound_is_flops_over_peak() -> None:
    _, _, peak = _h200()
    m = 1024  # 2 m^3 FLOPs against 12 m^2 bytes: far past the fp32 ridge
    t = _table("gemm", {"M": m, "N": m, "K": m}, 12 * m * m, [("smem", "triton", 12 * m * m)])
    (p,) = plots.traffic_model(t, device="H200")
    assert p["bound"] == "compute" and p["tflops"] == pytest.approx(peak)
    assert p["time_s"] == pytest.approx(2 * m**3 / (peak * 1e12))
    assert p["scope"] == "bytes Triton's unmasked lanes request"


def test_model_legend_title_stays_narrow_when_backends_mix() -> None:
    """Numba, CUDA C and Triton rows together: one scope per line, Numba counted as L1-level requests like CUDA C."""
    n = 1024
    t = _table("vecadd", {"N": n}, 12 * n,
               [("simt", "numba", 12 * n), ("grid", "cuda", 12 * n), ("block", "triton", 12 * n)])
    fig = plots.roofline(None, device="H200", counted=t)
    title = next(tr for tr in fig.data if tr.legendgroup == "model").legendgrouptitle.text
    assert title.split("<br>")[1:] == ["(L1-level requests only)", "(bytes Triton's unmasked lanes request)"]
    assert max(len(line) for line in title.split("<br>")) <= len(plots.MODEL_LABEL)


def test_roofline_without_records_draws_the_model_labelled_as_such() -> None:
    _, bw, _ = _h200()
    n = 1024
    t = _table("vecadd", {"N": n}, 12 * n, [("grid", "cuda", 12 * n), ("chunked", "cuda", 96 * n)])
    fig = plots.roofline(None, device="H200", counted=t)
    model = [tr for tr in fig.data if tr.legendgroup == "model"]
    assert [tr.name for tr in model] == ["grid (model)", "chunked (model)"]
    title = "model from emulated counters, not a measurement<br>(L1-level requests only)"
    assert model[0].legendgrouptitle.text == title
    assert list(model[1].x) == pytest.approx([1 / 12]) and list(model[1].y) == pytest.approx([bw / 12 / 8 / 1e3])
    assert "Squares: model from emulated counters, not a measurement" in _texts(fig)
    assert f"{NONE_RECORDED} vecadd" in _texts(fig)  # still says no GPU result exists
    assert fig.layout.title.text.startswith("Roofline: vecadd, float32")


def test_bars_and_lines_from_the_model_beside_no_records() -> None:
    _, bw, _ = _h200()
    tables = [_table("vecadd", {"N": n}, 12 * n, [("grid", "cuda", 12 * n), ("chunked", "cuda", 96 * n)])
              for n in (1024, 4096)]
    bars = plots.compare_variants(None, metric="gbps", counted=tables[1], device="H200")
    assert [tr.name for tr in bars.data] == ["grid (model)", "chunked (model)"]
    assert [tr.y[0] for tr in bars.data] == pytest.approx([bw, bw / 8])
    assert bars.data[0].marker.pattern.shape == "/" and bars.data[0].text[0].startswith("model: ")
    assert "none-recorded" not in [a.name for a in bars.layout.annotations]  # no banner over the bars
    assert f"{NONE_RECORDED} vecadd: on a GPU machine" in _texts(bars)
    lines = plots.throughput_vs_size(None, metric="gbps", counted=tables, device="H200")
    assert [tr.name for tr in lines.data] == ["grid (model)", "chunked (model)"]
    assert list(lines.data[1].x) == [1024, 4096] and list(lines.data[1].y) == pytest.approx([bw / 8] * 2)
    assert lines.layout.xaxis.title.text == "N" and plots.MODEL_LABEL in lines.data[0].legendgrouptitle.text


def test_model_beside_recorded_gpu_points() -> None:
    recs = _records()
    n = 512
    t = _table("gemm", {"M": n, "N": n, "K": n}, 6 * n * n, [("tiled", "cuda", 12 * n * n)], "float16")
    fig = plots.roofline(recs, counted=t)  # the records are fp16 GEMMs on an H200
    names = [tr.name for tr in fig.data]
    assert "tiled (measured)" in names and "tiled (model)" in names
    assert NONE_RECORDED not in _texts(fig)
    fig32 = plots.roofline(recs, counted=_table("gemm", {"M": n, "N": n, "K": n}, 12 * n * n, [("tiled", "cuda", 1)]))
    assert "tiled (model)" not in [tr.name for tr in fig32.data]
    assert "modelled rows of other dtypes not shown (this roofline is float16)" in _texts(fig32)
