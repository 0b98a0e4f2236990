"""The drills as data: the issue's targets, spot-the-bug keys that are the real bug, implement models that pass.

Kept cheap for cpu mode: implement models run at the op's two smallest ragged shapes, spot-the-bug kernels at
each drill's witness shape (the cheapest one that shows the bug), and drills whose fixed listing *is* a correct
kernel of the repo are proven by comparing syntax trees instead of running them.
"""

from __future__ import annotations

import dataclasses
import io
import math
import tokenize
from collections import Counter
from pathlib import Path

import pytest

import workbench as wb
from workbench.practice import catalogue
from workbench.practice import store as progress_store
from workbench.practice.answers import FUNCTIONS
from workbench.practice.base import TOPICS
from workbench.practice.implement import BACKEND_NAMES

ROOT = Path(__file__).resolve().parent.parent
DRILLS = catalogue()
ALL = list(DRILLS.values())
SPOT = [d for d in ALL if d.kind == "spot_the_bug"]
IMPLEMENT = [d for d in ALL if d.kind == "implement"]
NAPKIN = [d for d in ALL if d.kind == "napkin"]
CONCEPT = [d for d in ALL if d.kind == "concept"]


def ids(ds):
    return [d.id for d in ds]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    """Every attempt these tests make goes to a throwaway progress file, never the learner's."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    progress_store._pending.clear()
    yield
    progress_store._pending.clear()


# ------------------------------------------------------------------------------------------------ targets


def test_the_issue_targets():
    kinds = Counter(d.kind for d in ALL)
    assert len(ALL) >= 60
    assert kinds["implement"] >= 12 and kinds["spot_the_bug"] >= 19
    assert kinds["napkin"] >= 15 and kinds["concept"] >= 15


def test_every_topic_and_every_notebook_has_at_least_8_drills():
    topics = Counter(d.topic for d in ALL)
    assert {t: topics[t] for t in TOPICS if topics[t] < 8} == {}
    chapters = Counter(d.chapter for d in ALL)
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert set(chapters) <= notebooks, set(chapters) - notebooks
    assert {c: n for c, n in chapters.items() if n < 8} == {}
    for nb in ("01-gemm", "02-softmax", "03-flash-attention", "04-fused-moe", "06-decode-attention",
               "07-norms-and-numerics", "08-communication", "09-cute-layouts"):
        assert chapters[nb] >= 8


def test_every_level_is_used_for_every_kind():
    for kind in ("implement", "spot_the_bug", "napkin", "concept"):
        assert {d.level for d in ALL if d.kind == kind} == {"easy", "medium", "hard"}, kind


def test_one_spot_the_bug_drill_per_known_wrong_kernel():
    wrong = {(op, v.name) for op in wb.ops() for v in wb.known_wrong(op)}
    shown = [(d.op, d.variant) for d in SPOT]
    assert len(shown) == len(set(shown))
    assert set(shown) == wrong


def test_the_ops_that_had_no_known_wrong_kernel_have_one_now():
    for op in ("attention_bwd", "moe", "rmsnorm", "moe_topk", "gemm_fp8"):
        assert wb.known_wrong(op), op


def test_implement_drills_cover_the_pairs_interviews_ask_for():
    pairs = {(d.op, d.backend) for d in IMPLEMENT}
    need = {("vecadd", "cuda"), ("vecadd", "triton"), ("softmax", "cuda"), ("softmax", "triton"), ("rmsnorm", "cuda"),
            ("rmsnorm", "triton"), ("gemm", "cuda"), ("gemm", "triton"), ("attention", "triton"),
            ("moe_align", "cuda"), ("moe_topk", "triton")}
    assert need <= pairs, need - pairs
    assert any(d.model in ("cuda_online", "triton_online") for d in IMPLEMENT)  # online softmax
    assert wb.variant("gemm", DRILLS["gemm-implement-cuda-smem"].model).cu_file.name == "sgemm_smem.cu"


CONCEPT_SUBJECTS = {  # the nine the issue names: each has a drill
    "FA1 vs FA2 vs FA3": ["attention-concept-fa2", "attention-concept-fa3"],
    "why online softmax is exact": ["softmax-concept-online-exact"],
    "wgmma vs mma.sync": ["gemm-concept-wgmma-vs-mma"],
    "TMA and mbarriers": ["gemm-concept-tma-mbarrier"],
    "bank conflicts and swizzles": ["gemm-concept-swizzle"],
    "split-K and determinism": ["gemm-concept-splitk-determinism"],
    "fp8 block scales": ["moe-fp8-concept-block-scales"],
    "prefill vs decode": ["attention-concept-prefill-decode", "moe-concept-prefill-decode"],
    "expert-parallel all-to-all": ["moe-concept-ep-all-to-all"],
}


@pytest.mark.parametrize("subject", list(CONCEPT_SUBJECTS))
def test_concept_drills_cover_the_required_subjects(subject):
    for i in CONCEPT_SUBJECTS[subject]:
        assert DRILLS[i].kind == "concept", i


# ------------------------------------------------------------------------------------------------ spot the bug


@pytest.mark.parametrize("d", SPOT, ids=ids(SPOT))
def test_spot_key_lines_are_lines_that_differ_from_the_correct_kernel(d):
    wrong, fixed = d.listing().lines, d.listing(fixed=True).lines
    key = d.key()
    assert key and wrong != fixed
    assert all(1 <= k <= len(wrong) for k in key)
    import difflib

    differing: set[int] = set()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, wrong, fixed, autojunk=False).get_opcodes():
        if tag != "equal":
            # a replaced or deleted line differs; an inserted one differs between the two lines around the gap
            differing.update({i1, i1 + 1} if tag == "insert" else range(i1 + 1, i2 + 1))
    assert set(key) <= differing


@pytest.mark.parametrize("d", SPOT, ids=ids(SPOT))
def test_spot_listing_hides_what_gives_the_bug_away(d):
    text = "\n".join(d.listing().lines)
    for word in ("bug", "wrong", "should be", "known"):
        assert word not in text.lower(), (d.id, word)
    for part in d.listing().parts:
        src = "\n".join(part.lines)
        if part.language == "python":
            toks = list(tokenize.generate_tokens(io.StringIO(src + "\n").readline))
            assert not [t for t in toks if t.type == tokenize.COMMENT], d.id
        else:
            assert "//" not in src and "/*" not in src, d.id


SPOT_WITH_COUNTERPART = [d for d in SPOT if d.correct]
SPOT_TO_RUN = [d for d in SPOT if not d.correct]


@pytest.mark.parametrize("d", SPOT_WITH_COUNTERPART, ids=ids(SPOT_WITH_COUNTERPART))
def test_spot_fixed_listing_is_the_correct_kernel_of_the_repo(d):
    assert d.counterpart_mismatches() == []


@pytest.mark.parametrize("d", SPOT_TO_RUN, ids=ids(SPOT_TO_RUN))
def test_spot_file_fails_with_its_diagnosis_and_the_fixed_file_passes(d):
    """Run the kernel's file as it is and with the fix: the key lines are exactly what separates fail from pass."""
    assert d.witness, f"{d.id}: a drill without 'correct' needs a witness shape to run"
    v = d.kernel
    shape = dict(d.witness)
    wrong = wb.check(d.materialize(False), d.op, shapes=[shape], dtypes=v.dtypes[:1], quick=True)
    fixed = wb.check(d.materialize(True), d.op, shapes=[shape], dtypes=v.dtypes[:1], quick=True)
    assert not wrong.ok and wrong.diagnosis == v.expected_diagnosis, wrong.summary()
    assert fixed.ok, fixed.summary()


def test_spot_model_answer_passes_and_the_neighbouring_line_fails():
    d = wb.drill("vecadd-bug-triton-mask")
    key = d.model_answer()
    assert d.submit(key).passed
    assert d.submit(list(key.lines)).passed
    other = next(n for n in range(1, len(d.listing().lines) + 1) if n not in key.lines)
    res = d.submit(other)
    assert not res.passed and "fine as written" in res.feedback
    assert "What this code does under the checker" in res.feedback and "masking" in res.feedback


# ------------------------------------------------------------------------------------------------ napkin


@pytest.mark.parametrize("d", NAPKIN, ids=ids(NAPKIN))
def test_napkin_answer_recomputes_from_code_and_wrong_numbers_fail(d):
    n = d.compute()
    assert math.isfinite(n.value) and n.value > 0 and n.steps
    assert FUNCTIONS[d.answer_fn](**d.args).value == n.value  # the same code, not a stored number
    assert d.submit(n.value).passed
    assert not d.submit(n.value * 1.5).passed
    assert not d.submit(n.value / 2).passed
    statement = d.statement()
    assert "{" not in statement.replace("{dtype}", "") or "}" not in statement  # every template field filled


def test_napkin_answers_follow_the_hardware_table(monkeypatch):
    from workbench import hardware

    d = wb.drill("vecadd-napkin-time")
    before = d.model_answer()
    spec = hardware.DEVICES["H200"]
    monkeypatch.setitem(hardware.DEVICES, "H200", dataclasses.replace(spec, bandwidth_gbs=spec.bandwidth_gbs / 2))
    monkeypatch.setitem(hardware._INDEX, "h200", "H200")
    assert d.model_answer() == pytest.approx(2 * before)


def test_napkin_occupancy_at_168_registers_comes_from_the_occupancy_calculator():
    from workbench.cuda import arch

    d = wb.drill("gemm-napkin-occupancy-168")
    assert d.model_answer() == pytest.approx(100 * arch.occupancy(256, 168, 0, "sm_90")["occupancy"])


# ------------------------------------------------------------------------------------------------ concept


@pytest.mark.parametrize("d", CONCEPT, ids=ids(CONCEPT))
def test_concept_model_answer_passes(d):
    f = d.fresh()
    res = f.submit(f.model_answer())
    if f.self_graded:
        assert not res.passed  # free text is marked by the learner, never passed by the program
    else:
        assert res.passed, res.feedback


def test_concept_free_text_is_self_graded():
    d = wb.drill("softmax-concept-online-exact")
    res = d.submit("It is faster because it reads the row once.")
    assert not res.passed and "Model answer" in res.feedback and "self_assess" in res.feedback


# ------------------------------------------------------------------------------------------------ implement


def _tiny(d):
    """The drill checked at its second-smallest check shape (the smallest is often 1 element) and one dtype.

    A drill's own ``shapes`` (the sizes its model supports, e.g. TMA's multiples of 8) come before the op's.
    """
    spec = wb.get_op(d.op)
    shapes = sorted(d.shapes or spec.check_shapes, key=lambda s: math.prod(int(s.get(k, 1)) for k in spec.shape_keys))
    return dataclasses.replace(d, shapes=(shapes[min(1, len(shapes) - 1)],), dtypes=tuple(d.checked_dtypes()[:1]))


@pytest.mark.parametrize("d", IMPLEMENT, ids=ids(IMPLEMENT))
def test_implement_model_solution_passes_and_blank_page_fails(d):
    d = _tiny(d)
    blank = d.submit(d.blank())
    assert not blank.passed and "NotImplementedError" in blank.feedback
    res = d.submit(d.model_answer())
    assert res.passed, res.feedback


def test_implement_blank_page_is_the_contract_only():
    d = wb.drill("softmax-implement-triton-row")
    page = d.blank()
    assert "def softmax(x: torch.Tensor) -> torch.Tensor:" in page
    assert "TODO" not in page and "tl.max" not in page
    assert wb.get_op("softmax").signature in page


def test_implement_rejects_a_function_that_launches_no_kernel_of_its_backend():
    import torch

    d = _tiny(wb.drill("vecadd-implement-cuda"))
    res = d.submit(lambda x, y: torch.add(x, y))
    assert not res.passed and "launched no CUDA C" in res.feedback


def test_implement_takes_source_text():
    d = _tiny(wb.drill("vecadd-implement-triton"))
    src = Path(wb.variant("vecadd", "triton_block").source).read_text().replace("def triton_block(", "def vecadd(")
    src = "\n".join(s for s in src.splitlines() if not s.startswith("@register(") and "idea=" not in s)
    assert d.submit(src).passed


@pytest.mark.parametrize("budgets, match", [
    ('budgets = { dram_bytes = "<= 1e6" }', "no profile metric named 'dram_bytes'"),
    ('budgets = { "global load efficiency" = 0.9 }', "must be a string such as"),
    ('budget_shape = { N = 64 }', "'budget_shape' says where budgets are measured, but there are no 'budgets'"),
])
def test_implement_budgets_are_checked_when_loaded(tmp_path, budgets, match):
    from workbench.practice.base import DrillDataError
    from workbench.practice.loading import load_file

    p = tmp_path / "drills.toml"
    src = Path(DRILLS["vecadd-implement-cuda"].source).read_text()
    src = "\n".join(ln for ln in src.splitlines() if not ln.startswith(("budgets = ", "budget_shape = ")))
    p.write_text(src.replace('model = "cuda_grid"', f'model = "cuda_grid"\n{budgets}', 1))
    with pytest.raises(DrillDataError, match=match):
        load_file(p)


def test_drills_about_speed_carry_budgets_their_models_meet():
    speed = {d.id for d in IMPLEMENT if d.budgets}
    assert {"vecadd-implement-cuda", "gemm-implement-cuda-smem", "gemm-implement-triton",
            "softmax-implement-online-cuda", "attention-implement-triton-flash"} <= speed
    assert "budgets, counted by `wb.profile` at N=4096" in wb.drill("vecadd-implement-cuda").statement()
    # (every model meeting its budgets: test_implement_model_solution_passes_and_blank_page_fails)


def test_a_correct_but_uncoalesced_answer_is_told_its_efficiency():
    from tests.test_budgets import vecadd_chunked

    res = _tiny(wb.drill("vecadd-implement-cuda")).submit(vecadd_chunked)
    assert not res.passed, res.feedback
    assert res.feedback.startswith("Correct, but a global load efficiency of 12.5% where 90% is possible: neighbouring "
                                   "threads should add neighbouring elements"), res.feedback


def test_one_thread_per_row_softmax_is_correct_but_not_the_block_per_row_drill():
    naive = wb.variant("softmax", "cuda_naive")  # the rung before: a thread walks its row alone

    def softmax(x):
        return naive(x)

    res = _tiny(wb.drill("softmax-implement-cuda-row")).submit(softmax)
    assert not res.passed
    assert res.feedback.startswith("Correct, but a global load efficiency of 12.5% where 90% is possible: the block's "
                                   "threads stride over the row"), res.feedback


# ------------------------------------------------------------------------------------------------ the new wrong kernels


NEW_WRONG = [("rmsnorm", "wrong_mean_over_rows", {"M": 17, "N": 33}),
             ("moe_topk", "wrong_ties_high_id", {"T": 5, "E": 4, "top_k": 4}),
             ("moe", "wrong_combine_store", {"T": 5, "d": 16, "I": 16, "E": 4, "top_k": 4}),
             ("attention_bwd", "wrong_no_delta", {"B": 1, "H": 1, "Sq": 17, "Sk": 17, "D": 16, "causal": False}),
             ("gemm_fp8", "wrong_fp16_accumulator", {"M": 17, "N": 33, "K": 9})]


@pytest.mark.parametrize("op,name,shape", NEW_WRONG, ids=[f"{o}/{n}" for o, n, _ in NEW_WRONG])
def test_new_known_wrong_kernels_get_their_diagnosis(op, name, shape):
    v = wb.variant(op, name)
    rep = wb.check(v, shapes=[shape], dtypes=v.dtypes[:1], quick=True)
    assert not rep.ok and rep.diagnosis == v.expected_diagnosis, rep.summary()



# ------------------------------------------------------------------------------ the backend does the work
NOOP_TRITON = """
import torch
import triton
import triton.language as tl
import workbench as wb


@triton.jit
def noop(x_ptr):
    pass


def vecadd(x, y):
    {body}
"""
CHEATS = {
    "torch arithmetic beside a no-op launch": ("noop[(1,)](x)\n    return x + y", "torch.add on an input"),
    "the op's own reference": ("noop[(1,)](x)\n    return wb.reference('vecadd')(x, y).to(x.dtype)",
                               "on an input"),
    "a copy into a launched buffer": ("out = wb.empty_like(x)\n    noop[(1,)](out)\n    out.copy_((x + 0))\n"
                                      "    return out", "on an input"),
    "numpy arithmetic returned": ("r = torch.from_numpy(x.numpy() + y.numpy())\n    noop[(1,)](r)\n    return r",
                                  "was not allocated during the call"),
    "a buffer no launch was given": ("out = wb.empty_like(x)\n    noop[(1,)](x)\n    return out",
                                     "not a buffer any Triton"),
}


@pytest.mark.parametrize("cheat", list(CHEATS))
def test_a_triton_drill_fails_when_the_kernel_does_not_do_the_work(cheat):
    body, words = CHEATS[cheat]
    d = _tiny(wb.drill("vecadd-implement-triton"))
    res = d.submit(NOOP_TRITON.replace("{body}", body))
    assert not res.passed and "outside_backend" in res.feedback and words in res.feedback, res.feedback


def test_every_implement_drill_states_the_rule_in_its_text():
    for d in IMPLEMENT:
        text = d.statement()
        assert "**The rule:**" in text and d.rule() in text
        assert BACKEND_NAMES[d.backend] in d.rule() and "poisoned" in d.rule()


def test_probes_stay_within_the_sizes_the_drill_promises():
    """The attention drill promises D in {16, 32, 64}: its probes draw no other head dim, though the draw moves D
    between the planned ones (with these shapes, seeds 1-3 drew D=18 and D=23, which the model refuses, before
    ``runs_like``)."""
    d = wb.drill("attention-implement-triton-flash")
    kw = {k: v for k, v in d._check_kw().items() if k not in ("budgets", "budget_shape")}
    assert kw["runs_like"].name == d.model
    kw["shapes"] = [{"B": 1, "H": 1, "Sq": 3, "Sk": 5, "D": 16}, {"B": 1, "H": 1, "Sq": 4, "Sk": 2, "D": 64}]
    model = wb.variant("attention", d.model)

    def learner(q, k, v, causal=False, scale=None):  # a plain function, as a submission is
        return model(q, k, v, causal=causal, scale=scale)

    for seed in range(4):
        rep = wb.check(learner, "attention", seed=seed, **kw)
        assert rep.ok, rep.summary()
        assert {c.shape["D"] for c in rep.probes if c.probe == "drawn"} <= {16, 32, 64}
    with pytest.raises(TypeError, match="runs_like must be a registered Variant"):
        wb.check(learner, "attention", runs_like=learner)
