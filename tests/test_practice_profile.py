"""Profile drills: the tables behind them, the limiter and fix vocabularies, grading, display and the record.

Every drill's tables are measured once per run (one module fixture; ``wb.profile`` and ``wb.inspect`` each run at most
once per kernel, and a second run reads the on-disk cache keyed by the sources). The grading tests then reuse them.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

import workbench as wb
from workbench import hardware
from workbench.practice import catalogue
from workbench.practice import profile_drill as pd
from workbench.practice import store as progress_store
from workbench.practice.base import DrillDataError
from workbench.practice.profile_drill import FIXES, LIMITERS, ProfileDrill, match_terms

PROFILE = [d for d in catalogue().values() if d.kind == "profile"]
#: What a metric's better direction is, for the evidence check (lower is better unless listed here).
HIGHER_BETTER = {"global load efficiency", "global store efficiency", "theoretical occupancy", "blocks per SM",
                 "last-wave fill", "wave efficiency", "SM fill (blocks / SMs)", "DRAM-only bound", "peak",
                 "arithmetic intensity (counted bytes)"}
#: Evidence rows that describe the problem rather than score the kernel (split-K adds waves by design).
CONTEXT_ROWS = {"SMs on the device", "ridge point", "tile intensity (DRAM)", "waves", "blocks in the last wave"}


def ids(ds):
    return [d.id for d in ds]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    """Every attempt these tests make goes to a throwaway progress file, never the learner's."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    progress_store._pending.clear()
    yield
    progress_store._pending.clear()


@pytest.fixture(scope="module")
def tables():
    """Every profile drill's (table, fixed table), measured once for the module (or read from the disk cache)."""
    return {d.id: d.tables() for d in PROFILE}


# ------------------------------------------------------------------------------------------------ the catalogue
def test_at_least_ten_profile_drills_over_the_chapters_and_limiters():
    assert len(PROFILE) >= 10
    listed = wb.drills(kind="profile")
    assert ids(listed) == ids(PROFILE)
    chapters = Counter(d.chapter for d in PROFILE)
    assert set(chapters) == {"00-workbench-tour", "01-gemm", "02-softmax", "03-flash-attention", "04-fused-moe",
                             "06-decode-attention"}
    limiters = Counter(d.limiter for d in PROFILE)
    assert len(limiters) >= 8, limiters
    assert {d.spec.kind for d in PROFILE} == set(pd.TABLE_KINDS)


@pytest.mark.parametrize("d", PROFILE, ids=ids(PROFILE))
def test_every_profile_drill_has_hints_and_a_usable_model_answer(d):
    assert isinstance(d, ProfileDrill) and len(d.hints) >= 2
    ans = d.model_answer()
    assert match_terms(ans["limiter"], LIMITERS) == [d.limiter]
    assert match_terms(ans["fix"], FIXES) == [d.fixes[0]]


#: A number typed into prose: digits not part of a name (fp32, L2 and 2D are names; 16-byte and 0.5 are numbers).
NUMBER = re.compile(r"(?<![\w.])\d[\d.,]*(?!\w)")


def _prose(d):
    return [d.context, d.why, *d.hints, d.title]


@pytest.mark.parametrize("d", PROFILE, ids=ids(PROFILE))
def test_no_number_is_typed_into_the_prose(d):
    """Numbers come from {{...}} placeholders; digits may appear only in code spans (`tile[TILE + 1]`, `float4`)."""
    for text in _prose(d):
        bare = re.sub(r"\{\{[^{}]*\}\}", "", re.sub(r"`[^`]*`", "", text))
        assert not NUMBER.findall(bare), (d.id, NUMBER.findall(bare))


# ------------------------------------------------------------------------------------------------ the tables
@pytest.mark.parametrize("d", PROFILE, ids=ids(PROFILE))
def test_the_evidence_rows_are_worse_in_the_drill_than_in_the_fix(d, tables):
    this, fixed = tables[d.id]
    for text in (d.context, d.why):
        assert "{{" not in pd.fill(text, this, fixed, d.id)
    for row in d.evidence:
        v = this.value(row)
        assert v is not None, (d.id, row)
        if fixed is None or isinstance(v, str) or row in CONTEXT_ROWS:
            continue
        best = [c.values[row] for c in fixed.columns]
        if row in HIGHER_BETTER:
            assert all(b > v for b in best), (d.id, row, v, best)
        else:
            assert all(b < v for b in best), (d.id, row, v, best)


def test_the_tables_say_what_they_are(tables):
    for d in PROFILE:
        this, _ = tables[d.id]
        note = " ".join(this.notes).lower()
        assert "not measured" in note or "a model" in note or "without a gpu" in note, (d.id, note)
        assert "measured on a gpu" not in this.markdown().lower()


def test_hardware_facts_come_from_the_hardware_table(tables):
    dev = hardware.get_device(pd.DEVICE_KEY)
    waves_t = next(tables[d.id][0] for d in PROFILE if d.spec.kind == "waves")
    assert waves_t.value("SMs on the device") == dev.sm_count
    roof = next(tables[d.id][0] for d in PROFILE if d.spec.kind == "roofline")
    assert roof.value("peak") == hardware.peak_tflops(dev, "float32")
    assert roof.value("ridge point") == pytest.approx(hardware.ridge_point(dev, "float32"))


def test_the_wave_model():
    assert pd.waves(324, 264) == {"waves": 2, "blocks in the last wave": 60, "last-wave fill": 60 / 264,
                                  "wave efficiency": 324 / 528}
    assert pd.waves(264, 264)["wave efficiency"] == 1.0


def test_the_waves_drill_tile_is_the_kernels_grid():
    """The ladder's BM x BN, which the waves model divides the problem by, is what the kernel launches."""
    d = next(d for d in PROFILE if d.spec.kind == "waves")
    bm, bn, _ = pd.rung_tile("gemm", d.spec.kernel.variant)
    p = wb.profile(f"gemm/{d.spec.kernel.variant}", M=2 * bm, N=bn, K=8, dtype="float32")
    assert [r.grid for r in p.launches] == [(1, 2, 1)]


def test_tables_are_kept_on_disk_keyed_by_the_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    spec = next(d.spec for d in PROFILE if d.spec.kind == "roofline")
    calls = []
    real = pd.MEASURE["roofline"]
    monkeypatch.setitem(pd.MEASURE, "roofline", lambda s: calls.append(s) or real(s))
    monkeypatch.setattr(pd, "_MEMO", {})
    first = pd.tables(spec)
    monkeypatch.setattr(pd, "_MEMO", {})
    again = pd.tables(spec)
    assert len(calls) == 1 and again[0].to_json() == first[0].to_json()
    files = list((tmp_path / "profile-drills").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["this"]["rows"] == list(pd.ROOF_ROWS)


# ------------------------------------------------------------------------------------------------ vocabulary
SYNONYMS = {
    "uncoalesced-stores": ["uncoalesced stores", "Strided writes", "non-coalesced stores", "scattered stores"],
    "uncoalesced-loads": ["uncoalesced loads", "strided reads", "poor load coalescing"],
    "bank-conflicts": ["bank conflicts", "shared-memory bank conflicts", "smem bank conflicts"],
    "excess-traffic": ["no data reuse", "redundant global traffic", "materialised intermediates", "re-reads",
                       "traffic amplification"],
    "memory-bound": ["memory-bound at roofline", "bandwidth bound", "it's memory bandwidth bound"],
    "compute-bound": ["compute-bound", "FMA bound", "math-bound"],
    "low-occupancy": ["low occupancy", "occupancy limited by registers"],
    "too-few-blocks": ["too few blocks", "latency bound", "grid too small", "idle SMs", "low SM utilisation"],
    "register-spills": ["register spills", "spilling to local memory", "spills"],
    "tail-effect": ["tail effect", "wave quantisation", "wave quantization", "partial last wave"],
}
FIX_SYNONYMS = {
    "pad-shared": ["pad the shared tile", "padding (33 columns)", "add an extra column to the tile"],
    "swizzle": ["XOR swizzle", "swizzled shared layout"],
    "shared-tile": ["stage through a shared-memory tile", "tile in shared memory", "use shared memory tiling"],
    "swap-mapping": ["map threadIdx.x over columns", "swap the thread mapping"],
    "warp-per-row": ["one warp per row", "a block per row"],
    "keep-row": ["keep the row in registers", "read the row once"],
    "fuse": ["fuse the kernels", "kernel fusion", "one fused kernel"],
    "flash": ["FlashAttention", "flash attention with online softmax"],
    "tensor-cores": ["use tensor cores", "wmma", "mma.sync in bf16"],
    "cap-registers": ["__launch_bounds__(256, 2)", "cap registers at 128", "reduce register usage"],
    "uncap-registers": ["remove the register cap", "drop the launch bounds", "allow more registers"],
    "smaller-thread-tile": ["a smaller thread tile", "fewer accumulators per thread"],
    "split-kv": ["split-KV", "flash-decoding", "split the keys across blocks"],
    "gqa-group": ["one block per KV head", "GQA grouping", "share each page across the query group"],
    "split-k": ["split-K", "split the K dimension"],
    "stream-k": ["stream-K", "a persistent kernel"],
    "smaller-tiles": ["smaller tiles", "smaller block tiles"],
    "fewer-bytes": ["lower precision", "store bf16"],
    "nothing": ["nothing", "nothing, it is already optimal"],
}


@pytest.mark.parametrize("lim", sorted(SYNONYMS))
def test_limiter_synonyms_map_to_one_limiter(lim):
    for text in SYNONYMS[lim]:
        assert match_terms(text, LIMITERS) == [lim], text


@pytest.mark.parametrize("fix", sorted(FIX_SYNONYMS))
def test_fix_synonyms_map_to_one_fix(fix):
    for text in FIX_SYNONYMS[fix]:
        assert match_terms(text, FIXES) == [fix], text


@pytest.mark.parametrize("text, vocab, want", [
    ("the stores are not coalesced", LIMITERS, "uncoalesced-stores"),
    ("writes aren't coalesced", LIMITERS, "uncoalesced-stores"),
    ("it's DRAM bound", LIMITERS, "memory-bound"),
    ("the grid is too small for the GPU", LIMITERS, "too-few-blocks"),
    ("shared memory transpose", FIXES, "shared-tile"),
    ("increase maxrregcount", FIXES, "uncap-registers"),
    ("use bf16 tensor cores", FIXES, "tensor-cores"),
    ("swap threadIdx.x and threadIdx.y", FIXES, "swap-mapping"),
])
def test_natural_phrasings(text, vocab, want):
    assert match_terms(text, vocab) == [want]


def test_every_accepted_limiter_and_fix_has_tested_synonyms():
    assert {d.limiter for d in PROFILE} <= set(SYNONYMS)
    assert {f for d in PROFILE for f in d.fixes} <= set(FIX_SYNONYMS)


# ------------------------------------------------------------------------------------------------ grading
def _wrong_limiter(d):
    return next(t for t in SYNONYMS if t != d.limiter)


def _wrong_fix(d):
    return next(f for f in FIX_SYNONYMS if f not in d.fixes and f not in d.compatible
                and f not in {a for x in d.fixes for a in FIXES[x].absorbs})


@pytest.mark.parametrize("d", PROFILE, ids=ids(PROFILE))
def test_model_answer_passes_and_each_half_wrong_fails(d, tables):
    h = d.fresh()
    assert h.submit(limiter=SYNONYMS[d.limiter][-1], fix=FIX_SYNONYMS[d.fixes[-1]][0]).passed
    assert d.fresh().submit(d.model_answer()).passed
    wrong_lim = d.fresh().submit(limiter=SYNONYMS[_wrong_limiter(d)][0], fix=FIX_SYNONYMS[d.fixes[0]][0])
    assert not wrong_lim.passed and "Limiter: not" in wrong_lim.feedback and "Fix: right" in wrong_lim.feedback
    wrong_fix = d.fresh().submit(limiter=SYNONYMS[d.limiter][0], fix=FIX_SYNONYMS[_wrong_fix(d)][0])
    assert not wrong_fix.passed and "Limiter: right" in wrong_fix.feedback and "Fix: right" not in wrong_fix.feedback


def test_feedback_cites_the_rows_with_both_kernels_numbers(tables):
    d = wb.drill("tour-profile-transpose-stores")
    this, fixed = tables[d.id]
    res = d.submit(limiter="uncoalesced writes", fix="stage the tile through shared memory")
    assert res.passed
    per_store = pd.fmt_value("sectors per store request", this.value("sectors per store request"))
    fixed_store = pd.fmt_value("sectors per store request", fixed.value("sectors per store request"))
    assert f"**sectors per store request**: {per_store} in `cuda_naive`; {fixed_store} in `cuda_smem`" in res.feedback
    assert "| `cuda_naive` | `cuda_smem` |" in res.feedback  # the two tables side by side


def test_salad_negation_and_vague_answers_do_not_pass(tables):
    d = wb.drill("tour-profile-transpose-banks")
    with pytest.raises(ValueError, match="names 2 limiters"):
        d.submit(limiter="bank conflicts and uncoalesced loads", fix="pad")
    with pytest.raises(ValueError, match="not what it is not"):
        d.submit(limiter="not uncoalesced stores", fix="pad")
    with pytest.raises(ValueError, match="names no limiter"):
        d.submit(limiter="it is slow", fix="pad")
    with pytest.raises(ValueError, match="names no change"):
        d.submit(limiter="bank conflicts", fix="make it faster")
    salad = d.submit(limiter="bank conflicts", fix="pad, fuse, use tensor cores, split-k")
    assert not salad.passed and "also names" in salad.feedback
    both = d.fresh().submit(limiter="bank conflicts", fix="pad the shared tile or swizzle it")
    assert both.passed  # two right changes, named together
    with pytest.raises(TypeError, match="limiter"):
        d.submit("bank conflicts")


def test_a_failed_attempt_shows_the_answer_and_is_recorded_as_a_reveal(tables):
    d = wb.drill("softmax-profile-second-read")
    res = d.submit(limiter="memory-bound", fix="fuse")
    assert not res.passed and "not at the roof" in res.feedback and "The limiter:" in res.feedback
    assert d._answer_seen
    events = [e["event"] for e in progress_store.events() if e["drill"] == d.id]
    assert events == ["attempt", "reveal"]


def test_show_renders_markdown_in_a_notebook(tables):
    d = wb.drill("gemm-profile-register-occupancy")
    md = d._repr_markdown_()
    assert "| registers per thread |" in md and "limiter=" in md
    this, fixed = tables[d.id]
    assert f"| {this.value('registers per thread')} |" in md
    assert fixed.columns[0].label not in md  # the fixed kernel's table only after an attempt


def test_bad_drill_data_is_named(tmp_path):
    from workbench.practice.loading import load_file

    base = """chapter = "01-gemm"
[[drill]]
id = "x-profile"
kind = "profile"
level = "easy"
topic = "gemm"
title = "t"
table = "counters"
variant = "cuda_naive"
shape = {M = 32, N = 32, K = 32}
limiter = "LIMITER"
fixes = ["swap-mapping"]
evidence = ["EVIDENCE"]
context = "c"
why = "w"
hints = ["h", "i"]
"""
    f = tmp_path / "gemm" / "drills.toml"
    f.parent.mkdir()
    for lim, ev, match in (("slow", "sectors per load request", "limiter must be an id"),
                           ("uncoalesced-loads", "registers per thread", "evidence names rows")):
        f.write_text(base.replace("LIMITER", lim).replace("EVIDENCE", ev))
        with pytest.raises(DrillDataError, match=f"x-profile.*{match}"):
            load_file(f)
    f.write_text(base.replace("LIMITER", "uncoalesced-loads").replace("EVIDENCE", "sectors per load request")
                 .replace('"swap-mapping"', '"swap"'))
    with pytest.raises(DrillDataError, match="'fixes' takes ids"):
        load_file(f)
    with pytest.raises(DrillDataError, match="placeholder"):
        pd.fill("{{this:no such row}}", pd.Table("t", ["a"], [pd.Column("k", {"a": 1})]), None, "where")


def test_the_cache_key_follows_the_sources_and_the_spec_travels_as_json(tmp_path, monkeypatch):
    """A changed kernel file measures again; gpu mode hands the spec to a cpu-mode child as JSON."""
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}")
    monkeypatch.setattr(pd, "_source_files", lambda spec: [src])
    spec = PROFILE[0].spec
    before = spec.key()
    src.write_text("__global__ void k() { }")
    assert spec.key() != before
    for d in PROFILE:
        assert pd.spec_from_json(json.loads(json.dumps(pd.spec_to_json(d.spec)))) == d.spec
