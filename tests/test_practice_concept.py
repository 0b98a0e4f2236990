"""Concept drills that test understanding: forms graded honestly, answers that cannot be gamed, facts computed.

Checks the issue's done-when conditions on every concept drill: "pick the longest option" and any single answer
position win on at most 40% of the choice drills (in the stored order and over shuffled displays), keyword salad
and negations never pass (free text is self-graded only), and a wrong concept-as-code function fails with the
input where it differs. Everything here is cheap: no kernel runs.
"""

from __future__ import annotations

import math
import string
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.practice import catalogue
from workbench.practice import store as S
from workbench.practice.base import DrillDataError
from workbench.practice.concept import FORMS, normalise
from workbench.practice.concept_refs import REFS
from workbench.practice.loading import load_file

L = string.ascii_lowercase
CONCEPT = [d for d in catalogue().values() if d.kind == "concept"]
CHOICE = [d for d in CONCEPT if d.form == "choice"]
SELECT = [d for d in CONCEPT if d.form == "select"]
SEEDS = range(12)  # shuffled displays per drill that the balance checks count


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    S._pending.clear()
    yield
    S._pending.clear()


def right_letter(d, attempt=0):
    """The letter the grader accepts at ``attempt`` (without the reveal a learner's model_answer() records)."""
    perm = d.order(attempt)
    return L[perm.index(L.index(d.answer))]


def true_letters(d, attempt=0):
    perm = d.order(attempt)
    return {L[i] for i, p in enumerate(perm) if d.statements[p].true}


# ------------------------------------------------------------------------------------------------ the catalogue


def test_forms_mix_and_counts():
    forms = Counter(d.form for d in CONCEPT)
    assert set(forms) == set(FORMS), forms
    assert len(CONCEPT) >= 41  # the 29 drills of before, and at least 12 new ones
    assert forms["choice"] <= len(CONCEPT) / 3, forms  # at most a third single-answer multiple choice
    assert {d.topic for d in CONCEPT} >= {"gemm", "softmax", "attention", "moe", "memory", "tensor-cores", "numerics"}


def test_every_concept_drill_has_a_hint_that_does_not_give_the_answer():
    for d in CONCEPT:
        assert d.hints, d.id
        text = normalise(" ".join(d.hints))
        if d.form == "choice":
            assert normalise(d.choices[L.index(d.answer)]) not in text, d.id
        if d.form == "blank":
            for spellings in d.blanks:
                assert not any(len(normalise(s)) > 3 and normalise(s) in text for s in spellings), (d.id, spellings)


# ------------------------------------------------------------------------------------------------ cannot be gamed


def _share(wins: int, total: int) -> float:
    return wins / total if total else 0.0


def test_longest_option_wins_on_at_most_40_percent_of_choice_drills():
    longest = [d for d in CHOICE if len(d.choices[L.index(d.answer)]) == max(map(len, d.choices))]
    assert _share(len(longest), len(CHOICE)) <= 0.4, [d.id for d in longest]
    shortest = [d for d in CHOICE if len(d.choices[L.index(d.answer)]) == min(map(len, d.choices))]
    assert _share(len(shortest), len(CHOICE)) <= 0.4, [d.id for d in shortest]


@pytest.mark.parametrize("letter", list("abcd"))
def test_no_answer_position_wins_more_than_40_percent(letter):
    stored = sum(d.answer == letter for d in CHOICE)
    assert _share(stored, len(CHOICE)) <= 0.4, f"({letter}) is the stored answer of {stored} of {len(CHOICE)}"
    shown = [right_letter(d.fresh().reshuffle(seed), k) == letter for d in CHOICE for seed in SEEDS for k in (0, 1)]
    assert _share(sum(shown), len(shown)) <= 0.4
    select_wins = [true_letters(d.fresh().reshuffle(seed)) == {letter} for d in SELECT for seed in SEEDS]
    assert _share(sum(select_wins), len(select_wins)) <= 0.4


def test_select_drills_defeat_the_obvious_strategies():
    all_true = sum(all(s.true for s in d.statements) for d in SELECT)
    longest_only = sum({i for i, s in enumerate(d.statements) if s.true}
                       == {max(range(len(d.statements)), key=lambda i: len(d.statements[i].text))} for d in SELECT)
    longer_half = 0
    for d in SELECT:
        by_len = sorted(range(len(d.statements)), key=lambda i: -len(d.statements[i].text))
        longer_half += {i for i, s in enumerate(d.statements) if s.true} == set(by_len[:len(by_len) // 2 + 1])
    assert max(all_true, longest_only, longer_half) <= 0.4 * len(SELECT), (all_true, longest_only, longer_half)
    assert len({sum(s.true for s in d.statements) for d in SELECT}) >= 2  # the number of true ones varies


def test_the_shuffle_is_seeded_shown_and_changes_per_attempt():
    d = wb.drill("gemm-concept-smem-tiling").reshuffle(7)
    again = wb.drill("gemm-concept-smem-tiling").reshuffle(7)
    assert d.order() == again.order() and d.statement() == again.statement()
    assert "seed 7" in d.statement() and "attempt 1" in d.statement()
    first = d.order()
    right = d.letter_of("Each staged element")
    assert f"**({right})** Each staged element" in d.statement()  # the letters shown are the ones graded
    assert not d.submit("a" if right != "a" else "b").passed
    assert "attempt 2" in d.statement()
    orders = {tuple(wb.drill("gemm-concept-smem-tiling").reshuffle(7).order(k)) for k in range(6)}
    assert len(orders) > 1 and tuple(first) in orders
    assert len({wb.drill(d.id).seed for _ in range(6)}) > 1  # each handle draws its own seed
    with pytest.raises(ValueError, match="reshuffle"):
        d.reshuffle(-1)


# ------------------------------------------------------------------------------------------------ the forms


def test_choice_rejects_a_letter_outside_the_options():
    d = wb.drill("softmax-concept-max-subtraction")
    with pytest.raises(ValueError, match="one letter"):
        d.submit("e")
    with pytest.raises(TypeError):
        d.submit(2)


def test_select_judges_every_statement():
    d = wb.drill("softmax-concept-warp-reduce").reshuffle(3)
    truth = true_letters(d)
    assert d.submit("".join(sorted(truth))).passed
    d = wb.drill("softmax-concept-warp-reduce").reshuffle(3)
    one_off = sorted(truth)[1:]  # one true statement left out
    res = d.submit(set(one_off))
    assert not res.passed and f"5 of 6 statements judged correctly; not ({sorted(truth)[0]})" in res.feedback
    assert "Each statement:" in res.feedback and "false" in res.feedback  # each one judged, with why
    assert not d.submit("none").passed
    assert not wb.drill(d.id).submit("abcdef").passed
    with pytest.raises(ValueError, match="not among the letters"):
        d.submit("az")
    with pytest.raises(TypeError):
        d.submit(3)


def test_order_accepts_steps_of_a_group_in_either_order_and_names_the_first_misplaced_step():
    d = wb.drill("attention-concept-fa2-loop-order").reshuffle(1)
    perm = d.order()
    letters = [L[perm.index(i)] for i in range(len(perm))]
    assert d.submit("".join(letters)).passed
    d = wb.drill(d.id).reshuffle(1)
    swapped = letters[:4] + [letters[5], letters[4]] + letters[6:]  # l and acc updates: either order
    assert d.submit(swapped).passed
    d = wb.drill(d.id).reshuffle(1)
    wrong = letters[:2] + [letters[3], letters[2]] + letters[4:]  # exp before the new max
    res = d.submit(",".join(wrong))
    assert not res.passed and "holds up to step 3" in res.feedback and "in either order" in res.feedback
    with pytest.raises(ValueError, match="missing"):
        d.submit("".join(letters[:-1]))
    with pytest.raises(ValueError, match="repeated"):
        d.submit("".join(letters[:-1] + letters[:1]))


def test_blank_accepts_documented_spellings_only():
    d = wb.drill("gemm-concept-ldmatrix-blank")
    assert d.submit([" `LDMATRIX.sync.aligned` ", "hmma.16816.f32."]).passed
    res = wb.drill(d.id).submit(["ldmatrix", "IMMA"])
    assert not res.passed and "blank 2 ('IMMA')" in res.feedback
    assert not wb.drill(d.id).submit(["ld.shared", "HMMA"]).passed
    with pytest.raises(TypeError, match="2 non-empty string"):
        d.submit("ldmatrix")
    f = wb.drill("gemm-fp8-concept-scale-blank")
    assert f.submit(["448", "amax / 448"]).passed and wb.drill(f.id).submit(["448.0", "AMAX/448"]).passed
    assert not wb.drill(f.id).submit(["448", "448/amax"]).passed
    assert normalise("x ** 2 × y") == normalise("x^2*y")


# ------------------------------------------------------------------------------------------------ concept as code


def test_code_drills_accept_a_right_function_or_expression():
    assert wb.drill("moe-concept-busbw-code").submit(lambda algbw, n: 2 * algbw * (n - 1) / n).passed
    assert wb.drill("moe-concept-busbw-code").submit("algbw * 2 * (n - 1) / n").passed

    def online(m, d, x):
        import math as M

        new = max(m, x)
        return new, d * M.exp(m - new) + M.exp(x - new)

    assert wb.drill("softmax-concept-online-code").submit(online).passed
    assert wb.drill("gemm-concept-swizzle-code").submit(lambda o: o ^ ((o >> 3) & 0x70)).passed
    assert wb.drill("gemm-concept-bank-ways-code").submit(lambda s: math.gcd(s, 32) if s else 1).passed


def test_a_wrong_function_fails_with_the_input_where_it_differs():
    res = wb.drill("moe-concept-busbw-code").submit(lambda algbw, n: algbw * (n - 1) / n)  # all-gather's factor
    assert not res.passed and "f(algbw=100, n=2) returned 50" in res.feedback
    assert "the reference returns 100" in res.feedback
    res = wb.drill("softmax-concept-online-code").submit(lambda m, d, x: (max(m, x), d + math.exp(x - max(m, x))))
    assert not res.passed and "f(m=2, d=1, x=2)" not in res.feedback  # that input does not tell them apart
    assert "returned" in res.feedback and "A model answer" in res.feedback
    def merge(o1, a, o2, b):  # right algebra, but exp(lse) itself
        return (o1 * np.exp(a) + o2 * np.exp(b)) / (np.exp(a) + np.exp(b)), np.log(np.exp(a) + np.exp(b))

    naive = wb.drill("attention-concept-lse-merge-code").submit(merge)
    assert not naive.passed and "lse1=1000" in naive.feedback  # exp(1000) overflows: the naive merge gives NaN
    gcd = wb.drill("gemm-concept-bank-ways-code").submit(lambda s: math.gcd(s, 32))
    assert not gcd.passed and "f(stride_words=0) returned 32" in gcd.feedback  # a broadcast is 1 way


def test_a_function_that_raises_fails_and_a_malformed_one_is_refused():
    res = wb.drill("moe-align-concept-padded-code").submit(lambda counts, block: 1 / 0)
    assert not res.passed and "raised ZeroDivisionError" in res.feedback
    d = wb.drill("moe-align-concept-padded-code")
    with pytest.raises(ValueError, match="2 argument"):
        d.submit(lambda counts: 0)
    with pytest.raises(ValueError, match="does not parse"):
        d.submit("sum(counts) +")
    with pytest.raises(ValueError, match=r"uses \['open'\]"):
        d.submit("open('x')")
    with pytest.raises(TypeError):
        d.submit(42)
    assert d._attempts == 0  # a malformed answer is refused before grading: not an attempt


def test_every_reference_survives_its_fixed_inputs_and_draws_vary():
    import random

    for r in REFS.values():
        for args in r.fixed:
            out = r.fn(*args)
            flat = np.concatenate([np.ravel(np.asarray(o, dtype=float)) for o in (out if isinstance(out, tuple)
                                                                                  else (out,))])
            assert np.all(np.isfinite(flat)), (r.name, args)
        rng = random.Random(0)
        assert len({repr(r.draw(rng)) for _ in range(5)}) > 1, r.name


def test_occupancy_question_quotes_the_architecture_tables():
    from workbench.cuda import arch

    lim = arch.get("sm_90")
    text = wb.drill("gemm-concept-occupancy-code").statement()
    assert f"at most {lim.max_warps_per_sm} warps" in text and f"{lim.regs_per_sm} per SM" in text
    assert f"{lim.max_smem_per_sm} bytes per SM" in text and "{" not in text


# ------------------------------------------------------------------------------------------------ free text


@pytest.mark.parametrize("text", [
    "rescale exp(m - m') identity final max",  # keyword salad
    "It does NOT rescale the running sum; the result is only an approximation of the final max identity.",  # negation
    Path(__file__).read_text()[:400],  # anything at all
])
def test_free_text_is_never_passed_only_self_assessed(text):
    d = wb.drill("softmax-concept-online-exact")
    res = d.submit(text)
    assert not res.passed and str(res).startswith("SELF-GRADE") and "Rubric" in res.feedback
    msg = d.self_assess("ac")
    assert "2/3" in msg and "not a pass" in msg and "(b)" in msg
    events = [(e["event"], e["passed"]) for e in S.events()]
    assert events == [("reveal", None), ("self_assessed", None)]
    assert S.events()[-1]["score"] == pytest.approx(2 / 3)
    assert not wb.progress().statuses[d.id].passed


def test_self_assess_needs_a_written_answer_and_valid_points():
    d = wb.drill("attention-concept-split-kv-explain")
    with pytest.raises(RuntimeError, match="write your answer first"):
        d.self_assess("a")
    with pytest.raises(TypeError, match="a few sentences"):
        d.submit("ok")
    d.submit("Decode has one query per sequence, so the keys are split over blocks and merged by lse weights.")
    with pytest.raises(ValueError, match="not among the letters"):
        d.self_assess("ad")
    assert "3/3" in d.self_assess("abc")
    with pytest.raises(RuntimeError, match="graded by the program"):
        wb.drill("gemm-concept-smem-tiling").self_assess("a")


# ------------------------------------------------------------------------------------------------ the facts


def test_fp8_facts_match_torch():
    import torch

    e4m3, e5m2 = torch.finfo(torch.float8_e4m3fn).max, torch.finfo(torch.float8_e5m2).max
    assert e4m3 == 448 and e5m2 == 57344
    assert "448" in wb.drill("gemm-fp8-concept-scale-blank").blanks[0]
    assert math.log2(e5m2 / e4m3) == 7  # "e4m3 gives up 7 binades at the top"
    assert math.sqrt(torch.finfo(torch.float16).max) == pytest.approx(255.9, abs=0.05)  # rmsnorm's statement


# ------------------------------------------------------------------------------------------------ bad data


def _toml(tmp_path, body: str) -> Path:
    p = tmp_path / "op" / "drills.toml"
    p.parent.mkdir(exist_ok=True)
    p.write_text('chapter = "01-gemm"\n\n[[drill]]\nid = "x-concept"\nkind = "concept"\nlevel = "easy"\n'
                 'topic = "gemm"\ntitle = "t"\nquestion = "q ___"\nwhy = "w"\n' + body)
    return p


@pytest.mark.parametrize("body, match", [
    ('form = "quiz"\nhints = ["h"]\n', "form 'quiz' is not one of"),
    ('form = "select"\nchoices = ["a", "b", "c"]\nhints = ["h"]\n', "takes \\['statements'\\]; missing"),
    ('form = "blank"\nblanks = [["x"], ["y"]]\nhints = ["h"]\n', "has 1 blank"),
    ('form = "blank"\nblanks = [["x"]]\n', "at least one hint"),
    ('form = "code"\nref = "nope"\nhints = ["h"]\n', "ref 'nope' is not in"),
    ('form = "order"\nsteps = ["a", "b"]\nhints = ["h"]\n', "3 to 9 distinct steps"),
    ('form = "select"\nhints = ["h"]\n[[drill.statements]]\ntext = "s"\ntrue = "yes"\n', "every statement is a table"),
    ('key_ideas = []\nhints = ["h"]\n', "unknown key 'key_ideas'"),
    ('form = "explain"\nrubric = ["only one"]\nmodel_answer = "m"\nhints = ["h"]\n', "at least 2 points"),
])
def test_bad_concept_data_is_refused_naming_the_drill(tmp_path, body, match):
    with pytest.raises(DrillDataError, match=match) as e:
        load_file(_toml(tmp_path, body))
    assert "x-concept" in str(e.value)


def test_the_occupancy_reference_is_the_workbench_calculator():
    import random

    from workbench.cuda import arch

    r, rng = REFS["blocks_per_sm"], random.Random(1)
    for args in [*r.fixed, *(r.draw(rng) for _ in range(300))]:
        assert r.fn(*args) == arch.occupancy(*args, "sm_90")["blocks_per_sm"], args
