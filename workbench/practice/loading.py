"""Read the drills: one ``drills.toml`` per op folder in ``kernels/``, parsed with the standard library's tomllib.

A file holds ``chapter`` (the notebook the drills belong to, e.g. ``"01-gemm"``), optionally ``op`` (default: the
folder's name) and an array of ``[[drill]]`` tables. Every key is checked: an unknown key, a missing one, a wrong
type or value is a :class:`DrillDataError` naming the file and the drill, raised when the drills are loaded. The keys
of a ``kind = "implement"`` drill are the schema it shares with the exercises (:mod:`workbench.practice.learner_code`).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.practice.base import KINDS, LEVELS, TOPICS, Drill, DrillDataError
from workbench.practice.learner_code import check_keys, parse_spec, strings

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomllib is 3.11+; tomli is the same parser
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None  # type: ignore[assignment]

FILE_NAME = "drills.toml"
COMMON = {"id": str, "kind": str, "level": str, "topic": str, "title": str}
OPTIONAL_COMMON = {"hints": list, "op": str}
IMPLEMENT_KEYS = {"model": str, "inspect": dict}  # beside the schema implement drills share with exercises
KIND_KEYS: dict[str, tuple[dict[str, type], dict[str, type]]] = {  # kind: (required, optional); implement: _implement
    "spot_the_bug": ({"variant": str, "show": list, "fix": list, "context": str, "why": str},
                     {"rename": dict, "resolve": dict, "edits": list, "check_shapes": list, "witness": dict,
                      "correct": dict}),
    "napkin": ({"question": str, "answer": str, "args": dict, "why": str}, {"tolerance": float}),
    "profile": ({"table": str, "variant": str, "limiter": str, "fixes": list, "evidence": list, "context": str,
                 "why": str},
                {"shape": dict, "dtype": str, "fixed": str, "min_blocks": int, "fixed_min_blocks": int, "grid": bool,
                 "split_k": list, "compatible": list}),
    "concept": ({"question": str, "why": str},
                {"form": str, "choices": list, "answer": str, "statements": list, "steps": list, "blanks": list,
                 "ref": str, "trials": int, "rubric": list, "model_answer": str, "references": list}),
}
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_CHAPTER = re.compile(r"^\d\d-[a-z0-9-]+$")


def kernels_dir() -> Path:
    """Return the ``kernels`` package folder (one sub-folder per op)."""
    import kernels

    return Path(kernels.__file__).parent


def drill_files() -> list[Path]:
    """Return every ``kernels/<op>/drills.toml``, sorted."""
    return sorted(kernels_dir().glob(f"*/{FILE_NAME}"))


def _check_types(where: str, data: dict, required: dict[str, type], optional: dict[str, type]) -> None:
    check_keys(where, data, required, {**optional, **COMMON, **OPTIONAL_COMMON})



def _common(where: str, raw: dict, file_op: str, chapter: str, path: Path) -> dict[str, Any]:
    for key, typ in COMMON.items():  # the rest is checked per kind
        if not isinstance(raw.get(key), typ):
            raise DrillDataError(f"{where}: {'missing key' if key not in raw else 'wrong type for'} {key!r}")
    if not _ID.match(raw["id"]):
        raise DrillDataError(f"{where}: id {raw['id']!r} must be lowercase words joined by '-'")
    for key, allowed in (("kind", KINDS), ("level", LEVELS), ("topic", TOPICS)):
        if raw[key] not in allowed:
            raise DrillDataError(f"{where}: {key} {raw[key]!r} is not one of {list(allowed)}")
    hints = raw.get("hints", [])
    if not isinstance(hints, list):
        raise DrillDataError(f"{where}: 'hints' must be a list of strings")
    return {"id": raw["id"], "kind": raw["kind"], "level": raw["level"], "topic": raw["topic"],
            "title": raw["title"].strip(), "op": raw.get("op", file_op), "chapter": chapter,
            "hints": list(strings(where, "hints", hints)), "source": str(path)}


def _pairs(where: str, key: str, items: list) -> tuple[tuple[str, str, str], ...]:
    out = []
    for it in items:
        if not isinstance(it, dict) or set(it) - {"file", "old", "new"} or not {"old", "new"} <= set(it):
            raise DrillDataError(f"{where}: every entry of {key!r} is a table with 'old', 'new' and optional 'file'")
        file = it.get("file", "py")
        if not isinstance(it["old"], str) or not it["old"] or not isinstance(it["new"], str):
            raise DrillDataError(f"{where}: {key!r}: 'old' must be a non-empty string and 'new' a string")
        out.append((file, it["old"], it["new"]))
    return tuple(out)


def _implement(where: str, raw: dict, common: dict) -> Drill:
    from workbench.practice.implement import ImplementDrill

    spec = parse_spec(where, raw, {**COMMON, **OPTIONAL_COMMON, **IMPLEMENT_KEYS}, ("statement", "backend", "model"))
    rule = None
    if "inspect" in raw:  # graded by the compiled code where no GPU runs it (workbench/practice/hopper.py)
        from workbench.practice.hopper import parse_rule

        if spec.backend != "cuda":
            raise DrillDataError(f"{where}: an 'inspect' rule grades CUDA C kernels; the backend is {spec.backend!r}")
        rule = parse_rule(where, raw["inspect"])
    kw = dict(spec.check)
    return ImplementDrill(**common, backend=spec.backend, model=raw["model"], task=spec.statement,
                          dtypes=kw.pop("dtypes", ()), shapes=kw.pop("shapes", None), budgets=kw.pop("budgets", {}),
                          budget_shape=kw.pop("budget_shape", None), options=kw, inspect=rule)


def _spot(where: str, raw: dict, common: dict) -> Drill:
    from workbench.practice.spot import Fix, SpotTheBugDrill

    fixes = tuple(Fix(old, new, file) for file, old, new in _pairs(where, "fix", raw["fix"]))
    if not fixes:
        raise DrillDataError(f"{where}: 'fix' needs at least one replacement")
    renames = raw.get("rename", {})
    if not all(isinstance(v, str) for v in renames.values()):
        raise DrillDataError(f"{where}: 'rename' maps names to names (strings)")
    shapes = raw.get("check_shapes")
    correct = raw.get("correct", {})
    if not all(isinstance(v, str) and ":" in v for v in correct.values()):
        raise DrillDataError(f"{where}: 'correct' maps a shown name to 'module:function' of a correct kernel")
    return SpotTheBugDrill(**common, variant=raw["variant"], show_items=strings(where, "show", raw["show"]),
                           renames=dict(renames), consts=dict(raw.get("resolve", {})),
                           edits=_pairs(where, "edits", raw.get("edits", [])), fixes=fixes,
                           context=raw["context"].strip(), why=raw["why"].strip(),
                           check_shapes=None if shapes is None else tuple(shapes),
                           witness=raw.get("witness"), correct=dict(correct))


def _napkin(where: str, raw: dict, common: dict) -> Drill:
    from workbench.practice.answers import FUNCTIONS
    from workbench.practice.napkin import NapkinDrill

    if raw["answer"] not in FUNCTIONS:
        raise DrillDataError(f"{where}: answer function {raw['answer']!r} is not in workbench.practice.answers "
                             f"(known: {sorted(FUNCTIONS)})")
    tol = float(raw.get("tolerance", 0.05))
    if not 0 <= tol < 1:
        raise DrillDataError(f"{where}: tolerance is relative, in [0, 1), got {tol}")
    return NapkinDrill(**common, question=raw["question"].strip(), answer_fn=raw["answer"], args=dict(raw["args"]),
                       tolerance=tol, why=raw["why"].strip())


_FORM_KEYS = {"choice": {"choices", "answer"}, "select": {"statements"}, "code": {"ref", "trials"},
              "order": {"steps"}, "blank": {"blanks"}, "explain": {"rubric", "model_answer"}}
_FORM_REQUIRED = {"choice": {"choices", "answer"}, "select": {"statements"}, "code": {"ref"}, "order": {"steps"},
                  "blank": {"blanks"}, "explain": {"rubric", "model_answer"}}


def _concept_choice(where: str, raw: dict) -> dict[str, Any]:
    choices = strings(where, "choices", raw["choices"])
    letters = string.ascii_lowercase[:len(choices)]
    if not 3 <= len(choices) <= 6 or raw["answer"] not in letters:
        raise DrillDataError(f"{where}: 3 to 6 choices and 'answer' one of {list(letters)}")
    if len(set(choices)) != len(choices):
        raise DrillDataError(f"{where}: two choices are the same text")
    return {"choices": choices, "answer": raw["answer"]}


def _concept_select(where: str, raw: dict) -> dict[str, Any]:
    from workbench.practice.concept import Statement

    out = []
    for st in raw["statements"]:
        if not isinstance(st, dict) or set(st) - {"text", "true", "why"} or not {"text", "true"} <= set(st) \
                or not isinstance(st["text"], str) or not st["text"].strip() or not isinstance(st["true"], bool) \
                or not isinstance(st.get("why", ""), str):
            raise DrillDataError(f"{where}: every statement is a table {{text = '...', true = true/false, "
                                 "why = '...'}} (why optional)")
        out.append(Statement(st["text"].strip(), st["true"], st.get("why", "").strip()))
    if not 3 <= len(out) <= 8:
        raise DrillDataError(f"{where}: a select drill has 3 to 8 statements, got {len(out)}")
    return {"statements": tuple(out)}


def _concept_order(where: str, raw: dict) -> dict[str, Any]:
    groups = []
    for g in raw["steps"]:
        group = [g] if isinstance(g, str) else g
        if not isinstance(group, list) or not group or not all(isinstance(x, str) and x.strip() for x in group):
            raise DrillDataError(f"{where}: every step is a string, or a list of strings that may come in any order")
        groups.append(tuple(x.strip() for x in group))
    flat = [x for g in groups for x in g]
    if not 3 <= len(flat) <= 9 or len(set(flat)) != len(flat):
        raise DrillDataError(f"{where}: an order drill has 3 to 9 distinct steps, got {len(flat)}")
    return {"steps": tuple(groups)}


def _concept_blank(where: str, raw: dict) -> dict[str, Any]:
    from workbench.practice.concept import normalise

    blanks = []
    for b in raw["blanks"]:
        if not isinstance(b, list) or not b or not all(isinstance(x, str) and x.strip() for x in b):
            raise DrillDataError(f"{where}: 'blanks' holds one list of accepted spellings per blank")
        blanks.append(tuple(x.strip() for x in b))
    holes = len(re.findall(r"_{3,}", raw["question"]))
    if holes != len(blanks) or not blanks:
        raise DrillDataError(f"{where}: the question has {holes} blank(s) '___' but 'blanks' lists {len(blanks)}")
    for b in blanks:
        if len({normalise(x) for x in b}) != len(b):
            raise DrillDataError(f"{where}: two spellings of one blank are the same once normalised: {list(b)}")
    return {"blanks": tuple(blanks)}


def _concept_code(where: str, raw: dict) -> dict[str, Any]:
    from workbench.practice.concept_refs import REFS

    if raw["ref"] not in REFS:
        raise DrillDataError(f"{where}: ref {raw['ref']!r} is not in workbench.practice.concept_refs "
                             f"(known: {sorted(REFS)})")
    trials = raw.get("trials", 200)
    if not 10 <= trials <= 2000:
        raise DrillDataError(f"{where}: trials is a number of random inputs in [10, 2000], got {trials}")
    return {"ref": raw["ref"], "trials": trials}


def _concept_explain(where: str, raw: dict) -> dict[str, Any]:
    rubric = strings(where, "rubric", raw["rubric"])
    if len(rubric) < 2:
        raise DrillDataError(f"{where}: an explain drill's rubric lists at least 2 points to mark")
    return {"rubric": rubric, "model_text": raw["model_answer"].strip()}


def _concept(where: str, raw: dict, common: dict) -> Drill:
    from workbench.practice.concept import FORMS, ConceptDrill

    form = raw.get("form", "choice")
    if form not in FORMS:
        raise DrillDataError(f"{where}: form {form!r} is not one of {list(FORMS)}")
    other = sorted(k for f, keys in _FORM_KEYS.items() if f != form for k in keys
                   if k in raw and k not in _FORM_KEYS[form])
    missing = sorted(k for k in _FORM_REQUIRED[form] if k not in raw)
    if other or missing:
        raise DrillDataError(f"{where}: a form = {form!r} drill takes {sorted(_FORM_KEYS[form])}"
                             + (f"; missing {missing}" if missing else "") + (f"; not {other}" if other else ""))
    if not common["hints"]:
        raise DrillDataError(f"{where}: a concept drill needs at least one hint (one that helps without giving "
                             "the answer)")
    build = {"choice": _concept_choice, "select": _concept_select, "order": _concept_order, "blank": _concept_blank,
             "code": _concept_code, "explain": _concept_explain}[form]
    return ConceptDrill(**common, form=form, question=raw["question"].strip(), why=raw["why"].strip(),
                        references=strings(where, "references", raw.get("references", [])), **build(where, raw))


def _profile(where: str, raw: dict, common: dict) -> Drill:
    from workbench.practice.profile_drill import build

    return build(where, raw, common)


BUILDERS: dict[str, Callable[[str, dict, dict], Drill]] = {
    "implement": _implement, "spot_the_bug": _spot, "napkin": _napkin, "concept": _concept, "profile": _profile}


def load_file(path: Path) -> list[Drill]:
    """Return the drills of one ``drills.toml``; raise :class:`DrillDataError` naming the file on any problem."""
    if tomllib is None:
        raise DrillDataError("reading drills needs Python >= 3.11 (tomllib) or the tomli package")
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise DrillDataError(f"{path}: {e}") from e
    extra = set(data) - {"chapter", "op", "drill"}
    if extra:
        raise DrillDataError(f"{path}: unknown top-level key(s) {sorted(extra)} (known: chapter, op, drill)")
    chapter, file_op = data.get("chapter"), data.get("op", path.parent.name)
    if not isinstance(chapter, str) or not _CHAPTER.match(chapter):
        raise DrillDataError(f"{path}: 'chapter' must name a notebook like '01-gemm', got {chapter!r}")
    out = []
    for i, raw in enumerate(data.get("drill", [])):
        where = f"{path}: drill {raw.get('id', f'#{i + 1}')!r}"
        common = _common(where, raw, file_op, chapter, path)
        if raw["kind"] in KIND_KEYS:  # an implement drill's keys are checked whole by parse_spec
            _check_types(where, raw, *KIND_KEYS[raw["kind"]])
        out.append(BUILDERS[raw["kind"]](where, raw, common))
    return out


def load_all() -> dict[str, Drill]:
    """Return every drill by id, in file order; duplicate ids are an error naming both files."""
    out: dict[str, Drill] = {}
    for path in drill_files():
        for d in load_file(path):
            if d.id in out:
                raise DrillDataError(f"drill id {d.id!r} is defined twice: in {out[d.id].source} and in {path}")
            out[d.id] = d
    return out
