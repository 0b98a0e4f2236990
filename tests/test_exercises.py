"""Exercises: the solution passes, the untouched starter fails helpfully, hints come one at a time."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import warnings

import pytest

import workbench as wb
from tests.conftest import ROOT
from workbench.practice import starters
from workbench.practice.exercises import Exercise, load_file, register_exercise
from workbench.practice.learner_code import load_entry

IDS = wb.exercises()


def test_there_are_exercises():
    assert {"vecadd-triton", "vecadd-numba-grid"} <= set(IDS)


@pytest.mark.parametrize("ex_id", IDS)
def test_exercise_is_well_formed(ex_id):
    ex = wb.exercise(ex_id)
    assert isinstance(ex, Exercise) and ex.id == ex_id
    assert ex.op in wb.ops()
    assert ex.statement.strip() and ex.title.strip() and ex.hints
    assert ex.starter_file.is_file() and ex.solution_file.is_file()
    assert f"def {ex.entry}" in ex.starter
    md = ex._repr_markdown_()
    assert ex.entry in md and ex.starter in md


@pytest.mark.parametrize("ex_id", IDS)
def test_solution_passes(ex_id, capsys):
    ex = wb.exercise(ex_id)
    rep = ex.check(load_entry(ex.solution_file, ex.entry))
    out = capsys.readouterr().out
    assert rep, rep.summary()
    assert out.startswith("Correct")


@pytest.fixture(scope="module")
def starter_runs():
    """Check each untouched starter once (the Numba simulator is slow): {id: (report, printed feedback)}.

    At the exercise's first dtype only: what these tests read (that it fails, the diagnosis, the feedback's wording,
    the shapes that pass) shows there already, and the second dtype (fp16, in nine exercises) doubled those
    starters' runs: 31 s of CPU for all 28 starters with it, 26 s without (cold caches, after the solutions). The
    solutions and the classic mistakes are still checked at every dtype.
    """
    runs = {}
    for ex_id in IDS:
        ex = wb.exercise(ex_id)
        if len(ex.check_kw.get("dtypes") or ()) > 1:  # a copy: wb.exercise hands out the registered exercise
            ex = dataclasses.replace(ex, check_kw={**ex.check_kw, "dtypes": ex.check_kw["dtypes"][:1]})
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rep = ex.check(load_entry(ex.starter_file, ex.entry))
        runs[ex_id] = (rep, buf.getvalue())
    return runs


@pytest.mark.parametrize("ex_id", IDS)
def test_untouched_starter_fails_helpfully(ex_id, starter_runs):
    rep, out = starter_runs[ex_id]
    assert not rep
    d = rep.diagnosis
    assert d is not None
    if d == "over_budget":  # a speed exercise's starter is correct but slow: it is told which budget it misses
        assert rep.correct and out.startswith("Correct, but "), out
        assert rep.budgets.missed[0].message in out and "wb.profile(" in out
    else:
        assert out.startswith(("Not yet", "Almost")), out
        # it says what is wrong: the diagnosis, or that nothing was written
        assert d in out or "wrote none" in out, out
    assert "ex.hint()" in out


def test_triton_starter_is_told_it_wrote_nothing(starter_runs):
    rep, out = starter_runs["vecadd-triton"]
    assert rep.diagnosis in ("unwritten", "unwritten_rows", "masking")
    assert out.startswith("Not yet: your kernel wrote none of the outputs")


def test_numba_starter_is_told_about_the_tail(starter_runs):
    rep, out = starter_runs["vecadd-numba-grid"]
    assert rep.diagnosis == "masking"
    assert out.startswith("Almost")  # small sizes fit one block and pass
    assert "masking" in out


@pytest.mark.parametrize("ex_id", IDS)
def test_hints_one_at_a_time_then_no_more(ex_id, capsys):
    ex = wb.exercise(ex_id)
    n = len(ex.hints)
    for i in range(1, n + 1):
        msg = ex.hint()
        assert msg.startswith(f"Hint {i}/{n}: ") and msg.endswith(ex.hints[i - 1])
        assert capsys.readouterr().out.strip() == msg
    for _ in range(2):
        msg = ex.hint()
        assert msg.startswith("No more hints") and f"({n} shown)" in msg
        assert "solution()" in msg
    # fetching the exercise again starts the hints over
    assert wb.exercise(ex_id).hint().startswith(f"Hint 1/{n}")


@pytest.mark.parametrize("ex_id", IDS)
def test_solution_returns_source(ex_id):
    ex = wb.exercise(ex_id)
    src = ex.solution()
    assert f"def {ex.entry}(" in src
    assert src == starters.solution_text(ex.solution_file)
    assert src != ex.starter
    assert ">>> learner" not in src and "<<< learner" not in src and ">>> learner" not in ex.starter


@pytest.mark.parametrize("ex_id", IDS)
def test_starter_is_the_solution_outside_the_learner_regions(ex_id):
    """The starter is generated: outside the marked regions it is the solution, line for line, in order."""
    ex = wb.exercise(ex_id)
    text = ex.solution_file.read_text()
    assert text.count(">>> learner") == text.count("<<< learner") >= 1
    outside, inside = [], False
    for line in text.splitlines():
        if line.strip().endswith((">>> learner", "<<< learner")):
            inside = line.strip().endswith(">>> learner")
        elif not inside:
            outside.append(line)
    for lines in (ex.starter.splitlines(), starters.solution_text(ex.solution_file).splitlines()):
        it = iter(lines)
        assert all(any(a == b for b in it) for a in outside)  # `outside` is a subsequence of both texts
    assert ex.starter_file.read_text() == ex.starter



def _notebook_starter_cells() -> list[tuple[str, str, str]]:
    """Return (notebook, exercise id, cell text) of every notebook cell holding an exercise's starter."""
    cells = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            text = "".join(cell["source"])
            m = re.match(r"# The starter of ([\w-]+):", text)
            if m and cell["cell_type"] == "code":
                cells.append((nb.name, m.group(1), text))
    return cells


def test_notebook_starter_cells_are_the_generated_starters():
    """A notebook's editable starter cell is a copy: its header comment, then the starter, exactly."""
    cells = _notebook_starter_cells()
    assert len(cells) >= 10 and {ex for _, ex, _ in cells} <= set(IDS)
    for nb, ex_id, text in cells:
        header = re.match(r"(?:#[^\n]*\n)*?# and the check prints why it fails\.\n", text)
        assert header, f"{nb}: the starter cell of {ex_id} lost its header comment"
        assert text[header.end():] == wb.exercise(ex_id).starter.rstrip("\n"), (
            f"{nb}: the starter cell of {ex_id} differs from the starter generated from "
            f"{wb.exercise(ex_id).solution_file.name}; copy wb.exercise({ex_id!r}).starter into it")

def test_learner_regions_give_the_starter_and_the_solution(tmp_path):
    src = ("def f(x):\n"
           "    # >>> learner\n"
           "    #> # TODO: double x\n"
           "    #>\n"
           "    #> return x\n"
           "    return 2 * x\n"
           "    # <<< learner\n"
           "\n"
           "K = '''\n"
           "  // >>> learner\n"
           "  //> v = 0;  // TODO\n"
           "  v = 2 * x;\n"
           "  // <<< learner\n"
           "'''\n")
    p = tmp_path / "ex_f_solution.py"
    p.write_text(src)
    assert starters.starter_text(p) == ("def f(x):\n    # TODO: double x\n\n    return x\n\n"
                                        "K = '''\n  v = 0;  // TODO\n'''\n")
    assert starters.solution_text(p) == "def f(x):\n    return 2 * x\n\nK = '''\n  v = 2 * x;\n'''\n"
    assert load_entry(p, "f")(3) == 6


@pytest.mark.parametrize("bad,what", [
    ("# >>> learner\n# >>> learner\n# <<< learner\n", "nested"),
    ("# <<< learner\n", "unmatched"),
    ("// >>> learner\n# <<< learner\n", "unmatched"),
    ("# >>> learner\nx = 1\n", "never closed"),
])
def test_malformed_learner_regions_are_refused(bad, what, tmp_path):
    p = tmp_path / "ex_bad_solution.py"
    p.write_text(bad)
    with pytest.raises(starters.RegionError, match=what):
        starters.starter_text(p)


def test_register_exercise_refuses_a_starter_file():
    with pytest.raises(TypeError, match="generated from the solution"):
        register_exercise("x", title="x", op="vecadd", statement="x", solution="s.py", starter="t.py", entry="f",
                          hints=["h"], here=__file__)


@pytest.mark.parametrize("ex_id", IDS)
def test_wrong_signature_names_the_expected_one(ex_id):
    ex = wb.exercise(ex_id)
    # an exercise with its own checker (a formula, not a kernel) is called like its solution's entry
    sig = wb.get_op(ex.op).signature.split(" ->")[0] if ex.checker is None else f"{ex.entry}{ex._signature()}"

    def too_many(a, b, c, d, e, f, g, h, i):  # more required inputs than any op has (moe_fp8: 7)
        return a

    with pytest.raises(TypeError) as ei:
        ex.check(too_many)
    assert sig in str(ei.value) and "too_many(a, b, c, d, e, f, g, h, i)" in str(ei.value)
    with pytest.raises(TypeError, match="check\\(\\) takes your function"):
        ex.check("not a function")


def test_unknown_exercise_lists_known_ids():
    with pytest.raises(KeyError) as ei:
        wb.exercise("no-such-drill")
    msg = str(ei.value)
    assert "no-such-drill" in msg
    assert all(i in msg for i in IDS)


def test_load_entry_missing_entry(tmp_path):
    p = tmp_path / "x.py"
    p.write_text("def other():\n    return 1\n")
    with pytest.raises(NameError, match="does not define vecadd"):
        load_entry(p, "vecadd")


# ------------------------------------------------------------------------------------------ classic mistakes
# Each exercise's classic mistake, written into its own solution (so it stays in step with it): the exercise's check
# must reject it with the diagnosis that names the mistake. (exercise, mistake, [(solution text, wrong text)], name)
MISTAKES = [
    ("vecadd-triton", "no mask on the loads and the store",
     [("x = tl.load(x_ptr + offs, mask=mask)", "x = tl.load(x_ptr + offs)"),
      ("y = tl.load(y_ptr + offs, mask=mask)", "y = tl.load(y_ptr + offs)"),
      ("tl.store(out_ptr + offs, x + y, mask=mask)", "tl.store(out_ptr + offs, x + y)")], "out_of_bounds"),
    ("vecadd-numba-grid", "no `if i < n`",
     [("    if i < n:  # the extra threads of the last block do nothing\n        out[i]", "    out[i]")],
     "out_of_bounds"),
    ("softmax-warp-shuffle", "__shfl_down_sync: only lane 0 gets the whole warp's max and sum",
     [("fmaxf(v, __shfl_xor_sync(", "fmaxf(v, __shfl_down_sync("), ("v += __shfl_xor_sync(", "v += __shfl_down_sync(")],
     "normalizer"),
    ("softmax-online", "no -inf guard: exp(-inf - -inf) on a leading all -inf chunk",
     [('ref = tl.where(m_new == -float("inf"), 0.0, m_new)', "ref = m_new")], "computed_nan"),
    ("softmax-triton-row", "padding lanes loaded as 0 count in the sum",
     [('other=-float("inf")', "other=0.0")], "normalizer"),
    ("gemm-smem-tiling", "no second barrier before the next slice overwrites the tiles",
     [("        cuda.syncthreads()\n    if row", "    if row")], "race"),
    ("gemm-smem-tiling", "no zero fill of the out-of-range part of the a tile (K < one tile)",
     [("        sa[ty, tx] = float32(a[row, k0 + tx]) if row < m and k0 + tx < k else float32(0.0)",
       "        if row < m and k0 + tx < k:\n            sa[ty, tx] = float32(a[row, k0 + tx])")], "uninitialized"),
    ("gemm-register-blocking", "no row guard on the loads of a",
     [("ra[i] = float32(a[row0 + i, kk]) if row0 + i < m else float32(0.0)", "ra[i] = float32(a[row0 + i, kk])")],
     "out_of_bounds"),
    ("gemm-triton-grouped", "the last group taken as GROUP_M tile-rows tall",
     [("group_m = tl.minimum(n_m - first_m, GROUP_M)", "group_m = GROUP_M")], "masking"),
    ("moe-align-block-size", "a plain read and write of the cursor instead of an atomic",
     [("        pos = cuda.atomic.add(cursor, ids[s], 1)",
       "        pos = cursor[ids[s]]\n        cursor[ids[s]] = pos + 1")],
     "race"),
    ("moe-align-block-size", "rounding up by a whole extra block",
     [("padded = (counts[e] + block - 1) // block * block", "padded = (counts[e] + block) // block * block")],
     "out_of_bounds"),
    ("moe-silu-and-mul", "SiLU(gate) without the up half",
     [("act = gate * tl.sigmoid(gate) * up", "act = gate * tl.sigmoid(gate)")], "swiglu"),
    ("moe-weighted-combine", "tl.store instead of tl.atomic_add into a token's row",
     [("tl.atomic_add(out_ptr + tok[:, None] * d", "tl.store(out_ptr + tok[:, None] * d")], "race"),
    ("attention-online-softmax", "acc not rescaled when the max grows",
     [("acc = acc * alpha[:, None] + tl.dot(", "acc = acc + tl.dot(")], "online_rescale"),
    ("attention-causal-skip", "no mask inside the tiles that straddle the diagonal",
     [('        s = tl.where(offs_m[:, None] >= offs_n[None, :], s, -float("inf"))', "        s = s")],
     "causal_diagonal"),
    ("rmsnorm-reduction-kernel", "the map without the square: a row sum of x, not of x * x",
     [('"(float)x * (float)x"', '"x"')], "computed_nan"),
    ("attention-bwd-dkdv", "dK without the softmax scale",
     [('dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision="ieee") * scale',
       'dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision="ieee")')], "scale"),
    ("gemm-register-blocking", "the 2x2 block computed element by element: a and b loaded once per multiply-add",
     [("""    for kk in range(k):
        for i in range(T):
            ra[i] = float32(a[row0 + i, kk]) if row0 + i < m else float32(0.0)
        for j in range(T):
            rb[j] = float32(b[kk, col0 + j]) if col0 + j < n else float32(0.0)
        for i in range(T):
            for j in range(T):
                acc[i, j] += ra[i] * rb[j]
""", """    for i in range(T):
        for j in range(T):
            for kk in range(k):
                ra[0] = float32(a[row0 + i, kk]) if row0 + i < m else float32(0.0)
                rb[0] = float32(b[kk, col0 + j]) if col0 + j < n else float32(0.0)
                acc[i, j] += ra[0] * rb[0]
""")], "over_budget"),
    ("softmax-warp-shuffle", "the warp max through shared memory and __syncthreads() instead of shuffles",
     [("""    for (int off = 16; off > 0; off >>= 1)  // butterfly: 16, 8, 4, 2, 1 lanes apart
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;""", """    __shared__ float part[32];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int i = 0; i < 32; ++i) v = fmaxf(v, part[i]);
    __syncthreads();
    return v;""")], "over_budget"),
    ("transpose-coalesce", "no __syncthreads() between loading the tile and reading it",
     [("    __syncthreads();  // every element of the tile is loaded before any thread reads one another thread "
       "loaded\n", "")], "race"),
    ("transpose-bank-conflicts", "the padding on the wrong dimension: a column of tile[33][32] is still one bank",
     [("tile[TILE][TILE + 1];", "tile[TILE + 1][TILE];")], "over_budget"),
    ("moe-fp8-requant", "one scale of 1 for every row instead of amax / 448 per row and group",
     [("scale = tl.math.div_rn(tl.maximum(tl.max(tl.abs(h), axis=1), 1e-12), 448.0)",
       "scale = tl.full((h.shape[0],), 1.0, tl.float32)")], "precision"),
    ("decode-block-table-gather", "off-by-one tail: t <= n reads token n, behind a junk table entry when n fills its "
     "last page", [("valid = t < n  #", "valid = t <= n  #")], "out_of_bounds"),
    ("decode-gqa-map", "h % Hkv: the groups interleaved instead of consecutive",
     [("return h / group;", "return h % Hkv;")], "scattered"),
    ("decode-lse-merge", "the split merged without rescaling the running output",
     [("acc = acc * alpha + tl.where(", "acc = acc + tl.where(")], "online_rescale"),
    ("decode-lse-merge", "an empty split weighted by exp(-inf) = 0 instead of skipped: 0 * NaN",
     [("tl.where(live, w * o, 0.0)", "w * o")], "computed_nan"),
    ("decode-lse-merge", "no -inf guard: exp(-inf - -inf) while every split so far is empty",
     [('m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)', "m_ref = m_new")], "computed_nan"),
    ("int8-epilogue", "the scales loaded without masks: the edge tiles read past scale_a[M] and scale_b[N]",
     [("tl.load(sa_ptr + rm, mask=rm < M, other=0.0)", "tl.load(sa_ptr + rm)"),
      ("tl.load(sb_ptr + rn, mask=rn < N, other=0.0)", "tl.load(sb_ptr + rn)")], "out_of_bounds"),
    ("layernorm-welford-merge", "no guard for two empty states: 0 / 0 in the lanes past the end of a short row",
     [("    if (nt == 0.0f) return;", "")], "computed_nan"),
    ("layernorm-bwd-two-stage", "the partial rows summed across the columns (axis 1) instead of down them",
     [("return tl.sum(acc, axis=0)", "return tl.sum(acc, axis=1)")], "scattered"),
    ("rope-pair-index", "GPT-J's first feature with rotate-half's partner: 2i + D/2 runs past the head",
     [("second = first + 1", "second = first + HALF")], "out_of_bounds"),
    ("ring-attention-overlap", "the received block used without waiting for its irecv",
     [("        for req in reqs:\n            req.wait()\n", "")], "missing_wait"),
    ("reduce-scatter-ring", "the all-reduce's indices: the last chunk received is rank + 1, so chunk rank is partial",
     [("send_c, recv_c = (rank - s - 1) % world, (rank - s - 2) % world",
       "send_c, recv_c = (rank - s) % world, (rank - s - 1) % world")], "partial_sum"),
    ("bus-factor", "all-reduce counted as one pass of the ring, like a reduce-scatter",
     [('"all_reduce": 2 * (n - 1)}', '"all_reduce": n - 1}')], "bus_factor"),
]


assert {m[0] for m in MISTAKES} == set(IDS), "every exercise needs its classic mistake here"


def _mistaken(ex, edits, tmp_path):
    """Return the exercise's solution with ``edits`` applied, loaded from a file (Triton needs the source)."""
    src = starters.solution_text(ex.solution_file)
    for old, new in edits:
        assert src.count(old) == 1, f"{ex.solution_file.name} no longer holds exactly one {old!r}"
        src = src.replace(old, new)
    path = tmp_path / ex.solution_file.name
    path.write_text(src)
    return load_entry(path, ex.entry)


@pytest.mark.parametrize("ex_id,mistake,edits,diagnosis", MISTAKES, ids=[f"{m[0]}: {m[1]}" for m in MISTAKES])
def test_classic_mistake_is_rejected_with_its_diagnosis(ex_id, mistake, edits, diagnosis, tmp_path, capsys):
    ex = wb.exercise(ex_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rep = ex.check(_mistaken(ex, edits, tmp_path))
    out = capsys.readouterr().out
    assert not rep.ok and rep.diagnosis == diagnosis, rep.summary()
    if diagnosis == "over_budget":  # correct, but slow: the budget it misses, with what is possible
        assert out.startswith("Correct, but ") and " possible: " in out and "Stuck? ex.hint()" in out, out
    else:
        assert out.startswith(("Not yet", "Almost")) and f"What is wrong: {diagnosis}" in out, out
        assert "Runs by shape:" in out and "Stuck? ex.hint()" in out
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]


def test_feedback_shows_the_run_that_raised_and_names_the_wrong_outputs(tmp_path, capsys):
    ex = wb.exercise("moe-align-block-size")
    rep = ex.check(_mistaken(ex, MISTAKES[10][2], tmp_path))  # rounding up by an extra block: runs off the end
    out = capsys.readouterr().out
    assert rep.diagnosis == "out_of_bounds"
    # the message of the failing run itself, with the array, index and thread (not the first wrong-values run)
    assert "sorted_ids[20] is outside its shape (20,)" in out or "expert_ids[20] is outside its shape (20,)" in out
    lines = out.splitlines()
    by_shape = [ln.strip() for ln in lines[lines.index("  Runs by shape:") + 1:] if ln.startswith("    ")]
    assert len(by_shape) == len(ex.check_kw["shapes"])
    assert any(ln.startswith("FAIL  T=5, top_k=4, E=4, block=1") and "out_of_bounds" in ln for ln in by_shape)
    # a slot id stored as its expert id: only sorted_ids is wrong, and the feedback says which output
    rep = ex.check(_mistaken(ex, [("        sorted_ids[pos] = s", "        sorted_ids[pos] = ids[s]")], tmp_path))
    out = capsys.readouterr().out
    assert not rep.ok and "Wrong output: sorted_ids (expert_ids, n_padded right)" in out, out


def test_feedback_lists_passing_and_failing_shapes(starter_runs):
    rep, out = starter_runs["vecadd-numba-grid"]  # the starter launches n // 256 blocks: small sizes pass
    assert "pass  N=1: " in out and "FAIL  N=1025: " in out


# ------------------------------------------------------------------------------------------ speed: budgets
def test_transpose_starters_are_correct_but_told_what_is_slow(starter_runs):
    rep, out = starter_runs["transpose-coalesce"]
    assert rep.correct and rep.diagnosis == "over_budget"
    assert out.startswith("Correct, but 32 sectors per store request where 4 are possible: a warp store that walks "
                          "down a column of out"), out
    assert [r.value for r in rep.budgets.results] == [4, 32]  # loads coalesced, stores 32 sectors per request
    rep, out = starter_runs["transpose-bank-conflicts"]
    assert rep.correct and rep.diagnosis == "over_budget"
    assert out.startswith("Correct, but 32 wavefronts per shared load request where 1 is possible: "), out
    assert "\n  Also: 3,968 shared bank conflicts where 0 are possible: " in out  # 128 warp reads x 31 extra passes


def test_a_swizzled_tile_meets_the_bank_conflict_budget_too(tmp_path, capsys):
    ex = wb.exercise("transpose-bank-conflicts")
    swizzled = [("tile[TILE][TILE + 1];", "tile[TILE][TILE];"),  # no padding: element (r, c) at column c ^ r
                ("tile[ty + k][tx] = x", "tile[ty + k][tx ^ (ty + k)] = x"),
                ("= tile[tx][ty + k];", "= tile[tx][(ty + k) ^ tx];")]
    rep = ex.check(_mistaken(ex, swizzled, tmp_path))
    assert rep.ok, rep.summary()
    assert capsys.readouterr().out.startswith("Correct: ")


def test_causal_skip_budget_counts_the_tiles_visited(tmp_path, capsys):
    # the diagonal masked (so every value is right) but every key tile still visited: 4 x 4 tile pairs, not 10
    ex = wb.exercise("attention-causal-skip")
    rep = ex.check(_mistaken(ex, [("hi = tl.minimum((pid_m + 1) * BLOCK_M, Sk) if CAUSAL else Sk", "hi = Sk")],
                             tmp_path))
    (miss,) = rep.budgets.missed
    assert rep.correct and miss.value == 32
    assert capsys.readouterr().out.startswith("Correct, but 32 tl.dot calls where 20 are possible: at S = 64")


def test_an_untiled_gemm_is_correct_but_over_the_tiling_budget(capsys):
    # the rung before the exercise: coalesced, but every output reads its row of a and column of b from global memory
    ex = wb.exercise("gemm-smem-tiling")
    rep = ex.check(wb.variant("gemm", "numba_coalesced"))
    (miss,) = rep.budgets.missed
    assert rep.correct and rep.diagnosis == "over_budget" and miss.value == 2 * 32**3 * 4
    assert capsys.readouterr().out.startswith("Correct, but 262,144 global load bytes requested where 16,384 are "
                                              "possible: at M = N = K = 32 each thread loads"), miss.message


def test_a_malformed_exercises_toml_names_the_file_and_the_exercise(tmp_path):
    bad = tmp_path / "exercises.toml"
    bad.write_text("[exercise]\nid = 'x'\n")  # a table, not an array of tables
    with pytest.raises(ValueError, match=r"exercises\.toml: not a list of \[\[exercise\]\] tables"):
        load_file(bad)
    bad.write_text("[[exercise]]\nid = 'toml-probe'\ntitle = 't'\nop = 'vecadd'\nsolution = 'none.py'\n"
                   "entry = 'f'\nstatement = 's'\nhints = ['h']\nno_such_key = 1\n")
    with pytest.raises(ValueError, match=r"exercises\.toml: exercise 'toml-probe'"):
        load_file(bad)
