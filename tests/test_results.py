"""Check record validation, saving (never emulated runs into results/), loading and the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _bench_fakes import make_record

from workbench import results as R


def test_valid_record_passes() -> None:
    R.validate_record(make_record())
    R.validate_record(make_record(emulated=True))


def test_every_field_has_a_check() -> None:
    assert list(R.FIELD_CHECKS) == list(R.RECORD_FIELDS)
    R.validate_record({**make_record(), "device": {**make_record()["device"], "cc": None, "sm_count": None}})


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda r: r.pop("time_ms"), "missing field.*time_ms"),
        (lambda r: r.update(dtype="torch.float16"), "'dtype'"),
        (lambda r: r.update(shape={"M": 1.5}), "'shape'"),
        (lambda r: r.update(bound="latency"), "'bound'"),
        (lambda r: r.update(p20_ms=5.0), "p20_ms <= time_ms <= p80_ms"),
        (lambda r: r.update(tflops=r["tflops"] * 1000), "'tflops'.*flops / time_ms"),
        (lambda r: r["device"].pop("cc"), "device.cc missing"),
        (lambda r: r["versions"].pop("triton"), "versions.*triton"),
        (lambda r: r.update(date="28/10/2026"), "'date'"),
        (lambda r: r.update(emulated="no"), "'emulated'"),
        (lambda r: r.update(op=" "), "field 'op' is ' '; expected non-empty str$"),
        (lambda r: r.update(dtype="bf16"), "'dtype'.*as torch names them"),
        (lambda r: r.update(shape={"M": -1}), r"entry 'M': -1 is not a str -> non-negative int"),
        (lambda r: r.update(shape={}), "'shape' is {}"),
        (lambda r: r.update(time_ms=float("nan")), "'time_ms'"),
        (lambda r: r.update(flops=-1.0), "'flops'"),
        (lambda r: r.update(pct_peak=True), "'pct_peak'"),
        (lambda r: r.update(gbps=r["gbps"] * 2), "'gbps'.*bytes / time_ms"),
        (lambda r: r.update(emulated=True), "'tflops'.*emulated records must have None"),
        (lambda r: r["device"].update(name=""), "device.name must be a non-empty str"),
        (lambda r: r["device"].update(cc="sm_90"), "device.cc must be a str like '9.0'"),
        (lambda r: r["device"].update(sm_count=True), "device.sm_count must be an int"),
        (lambda r: r["device"].update(mem_gb="80"), "device.mem_gb must be a number"),
        (lambda r: r.update(versions=None), "'versions' is None"),
        (lambda r: r["versions"].update(torch=2.13), "versions.torch must be a str or None"),
        (lambda r: r.update(date=None), "'date' is None"),
        (lambda r: r.update(command=None), "'command'"),
    ],
)
def test_bad_records_name_the_field(change, match: str) -> None:
    rec = make_record()
    change(rec)
    with pytest.raises(R.RecordError, match=match):
        R.validate_record(rec)


def test_emulated_record_must_not_carry_performance() -> None:
    rec = make_record(emulated=True)
    rec["tflops"] = 1.0
    with pytest.raises(R.RecordError, match="emulated times are not GPU performance"):
        R.validate_record(rec)


def test_save_refuses_emulated_into_results_dir(tmp_path: Path) -> None:
    results_dir = tmp_path / "results"
    with pytest.raises(R.RecordError, match="only real-GPU"):
        R.save_results([make_record(), make_record(emulated=True)], results_dir / "x.json", "cmd",
                       results_dir=results_dir)
    assert not (results_dir / "x.json").exists()
    # the real repo results/ dir is protected by default
    with pytest.raises(R.RecordError, match="only real-GPU"):
        R.save_results([make_record(emulated=True)], R.RESULTS_DIR / "never.json", "cmd")
    assert not (R.RESULTS_DIR / "never.json").exists()
    # emulated runs may go elsewhere
    out = R.save_results([make_record(emulated=True)], tmp_path / "out" / "emu.json", "cmd",
                         results_dir=results_dir)
    assert json.loads(out.read_text())["records"][0]["emulated"] is True


def test_save_then_load_roundtrip(tmp_path: Path) -> None:
    recs = [make_record("naive"), make_record("tiled"), make_record("x", op="softmax")]
    path = R.save_results(recs, tmp_path / "h200-2026-10-28.json", "python -m workbench bench",
                          host_note="test box", results_dir=tmp_path)
    doc = json.loads(path.read_text())
    assert doc["schema"] == R.SCHEMA
    assert doc["provenance"]["gpu"] == "NVIDIA H200" and doc["provenance"]["host_note"] == "test box"
    assert doc["provenance"]["driver"] == "580.159.03" and doc["provenance"]["date"] == "2026-10-28"
    assert len(R.load_recorded(results_dir=tmp_path)) == 3
    assert [r["variant"] for r in R.load_recorded("gemm", results_dir=tmp_path)] == ["naive", "tiled"]
    summary = R.recorded_summary(tmp_path)
    assert summary == [{"file": path.name, "gpu": "NVIDIA H200", "date": "2026-10-28",
                        "driver": "580.159.03", "ops": ["gemm", "softmax"], "n_records": 3}]


def test_load_skips_emulated_and_invalid(tmp_path: Path) -> None:
    bad = make_record("bad")
    del bad["bytes"]
    doc = {"schema": R.SCHEMA, "provenance": {}, "records": [make_record("ok"), make_record("emu", emulated=True),
                                                             bad]}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    (tmp_path / "b.json").write_text('{"schema": "other"}')
    with pytest.warns(UserWarning):
        got = R.load_recorded(results_dir=tmp_path)
    assert [r["variant"] for r in got] == ["ok"]


def test_load_skips_non_utf8_files_and_directories_with_a_warning(tmp_path: Path) -> None:
    doc = {"schema": R.SCHEMA, "provenance": {"gpu": "NVIDIA H200"}, "records": [make_record("ok")]}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    (tmp_path / "latin1.json").write_bytes(b'{"schema": "caf\xe9"}')  # Latin-1, not UTF-8
    (tmp_path / "x.json").mkdir()
    with pytest.warns(UserWarning) as ws:
        got = R.load_recorded(results_dir=tmp_path)
    assert [r["variant"] for r in got] == ["ok"]
    msgs = [str(w.message) for w in ws]
    assert any("latin1.json" in m and "UTF-8" in m for m in msgs), msgs
    assert any("x.json" in m and "directory" in m for m in msgs), msgs
    assert [row["file"] for row in R.recorded_summary(tmp_path)] == ["a.json"]


def test_load_tolerates_no_files(tmp_path: Path) -> None:
    assert R.load_recorded(results_dir=tmp_path / "missing") == []
    assert R.load_recorded(results_dir=tmp_path) == []
    assert R.recorded_summary(tmp_path) == []


def test_fill_derived() -> None:
    rec = make_record(n=8192, time_ms=2.0)
    rec.update(tflops=None, gbps=None, pct_peak=None, bound=None)
    R.fill_derived(rec)
    assert rec["bound"] == "compute"
    assert rec["tflops"] == pytest.approx(2 * 8192**3 / 2e-3 / 1e12)
    assert rec["pct_peak"] == pytest.approx(100 * rec["tflops"] / 989.5)
    R.validate_record(rec)
    emu = R.fill_derived(make_record(emulated=True))
    assert emu["tflops"] is None and emu["pct_peak"] is None


def test_collect_versions_has_every_key() -> None:
    v = R.collect_versions()
    assert set(v) == set(R.VERSION_KEYS) and v["python"]


def test_one_malformed_file_is_skipped_with_its_name_and_the_good_ones_load(tmp_path: Path) -> None:
    doc = {"schema": R.SCHEMA, "provenance": {"gpu": "NVIDIA H200"}, "records": [make_record("ok")]}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    (tmp_path / "huge.json").write_text('{"schema": ' + "9" * 5000 + "}")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    odd = dict(doc, records=[dict(make_record("odd"), time_ms=1e999, shape={"M": 10**400}), [1, 2], None])
    (tmp_path / "odd.json").write_text(json.dumps(odd))
    with pytest.warns(UserWarning) as ws:
        got = R.load_recorded(results_dir=tmp_path)
    assert [r["variant"] for r in got] == ["ok"]
    msgs = " ".join(str(w.message) for w in ws)
    assert "huge.json" in msgs and "deep.json" in msgs and "odd.json" in msgs
    rows = {row["file"]: row["n_records"] for row in R.recorded_summary(tmp_path)}
    assert rows.get("a.json") == 1 and not rows.get("odd.json") and "huge.json" not in rows
