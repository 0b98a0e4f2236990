"""wb.where(op) stays true: every listed file exists, every variant, known-wrong kernel, exercise and drill of the op
is listed, and every notebook link lands on a heading of that notebook."""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

import workbench as wb
from workbench import where_places
from workbench.practice import catalogue
from workbench.practice.exercises import exercise, exercises

OPS = wb.ops()
HOMES = {op: nb for nb, ops in where_places.NOTEBOOKS.items() for op in ops}


@functools.cache
def _where(op: str) -> where_places.Where:
    return wb.where(op)


@functools.cache
def _anchors(nb: Path) -> set[str]:
    return {where_places.heading_anchor(text) for _, text in where_places.notebook_headings(nb)}


@pytest.mark.parametrize("op", OPS)
def test_every_listed_file_exists_and_every_link_lands(op: str) -> None:
    w = _where(op)
    missing = [p for p in w.paths() if not p.is_file()]
    assert not missing, f"where({op!r}) lists files that do not exist: {missing}"
    for p in w.of("notebook"):
        assert p.path.suffix == ".ipynb" and p.anchor in _anchors(p.path), f"{p.location} is no heading"
    assert len(w.of("contract")) == 1, f"{op}: no contract"
    assert w.of("notebook") or op not in HOMES, f"{op}: where_places.NOTEBOOKS gives it a notebook but no section there"


@pytest.mark.parametrize("op", OPS)
def test_every_variant_wrong_kernel_exercise_and_drill_is_listed(op: str) -> None:
    w = _where(op)
    by_kind = {k: {p.name for p in w.of(k)} for k in where_places.KINDS}
    assert by_kind["variant"] == {v.name for v in wb.variants(op)}
    assert by_kind["known_wrong"] == {v.name for v in wb.known_wrong(op)}
    assert by_kind["exercise"] == {e for e in exercises() if exercise(e).op == op}
    assert by_kind["drill"] == {d.id for d in catalogue().values() if d.op == op}
    listed = {p.path.resolve() for p in w.of("cuda_c")}
    assert {v.cu_file.resolve() for v in wb.variants(op, include_wrong=True) if v.cu_file} <= listed
    for v in wb.variants(op, include_wrong=True):  # each kernel's file is the one that defines it
        (p,) = [p for p in w if p.name == v.name and p.kind in ("variant", "known_wrong")]
        assert p.path == v.source and (p.line is None or 0 < p.line <= len(p.path.read_text().splitlines()))


def test_notebook_map_names_every_taught_op_once_beside_its_drills() -> None:
    assert sum(len(ops) for ops in where_places.NOTEBOOKS.values()) == len(HOMES) and set(HOMES) <= set(OPS)
    chapters = {d.op: d.chapter for d in catalogue().values()}
    for op, nb in HOMES.items():
        assert (where_places.NOTEBOOK_DIR / f"{nb}.ipynb").is_file()
        assert chapters.get(op, nb) == nb, f"{op}: its drills say chapter {chapters[op]}, the map says {nb}"
    heads = [t.lower() for nb in where_places.NOTEBOOK_DIR.glob("*.ipynb")
             for _, t in where_places.notebook_headings(nb)]
    for op in set(OPS) - set(HOMES):  # an op no notebook teaches yet: no heading or drill chapter claims it
        names = (op, *(e for e in exercises() if exercise(e).op == op))
        assert op not in chapters and not [h for h in heads if any(n in h for n in names)], \
            f"{op} is taught in a notebook: add it to where_places.NOTEBOOKS"


def test_text_and_html_render_every_place() -> None:
    w = _where("softmax")
    text = str(w)
    assert text.startswith("softmax: ") and repr(w) == text
    for p in w:
        assert p.location in text
    page = w._repr_html_()
    hrefs = [html.unescape(h) for h in re.findall(r"href='([^']+)'", page)]
    assert len(hrefs) == len(w) + sum(len(p.also) for p in w)
    for h in hrefs:  # links are relative to notebooks/, where the notebooks that call wb.where live
        path, _, anchor = unquote(h).partition("#")
        target = (where_places.NOTEBOOK_DIR / path).resolve()
        assert target.is_file(), h
        assert not anchor or anchor in _anchors(target), h
    assert "02-softmax.ipynb#2-%C2%B7-The-contract-and-the-float64-reference" in page
    assert [p.name for p in w.of("notebook")][0].startswith("02 · Softmax")


def test_heading_anchor_is_the_rendered_text() -> None:
    nb = where_places.NOTEBOOK_DIR / "01-gemm.ipynb"
    heads = [t for _, t in where_places.notebook_headings(nb)]
    assert "Exercise gemm-smem-tiling: shared-memory tiling in Numba" in heads  # backticks rendered away
    assert where_places.heading_anchor("Exercise gemm-smem-tiling: tiling") == "Exercise-gemm-smem-tiling:-tiling"
    assert where_places._rendered("**Bold** [link](x.md) `code` <b>tag</b>") == "Bold link code tag"


def test_unknown_op_and_kind_say_what_is_known(capsys) -> None:
    with pytest.raises(KeyError, match="known ops are"):
        wb.where("nosuch")
    with pytest.raises(ValueError, match="kinds are"):
        _where("vecadd").of("variants")
    from workbench.__main__ import main

    assert main(["where", "vecadd"]) == 0
    out = capsys.readouterr().out
    assert "wrong_no_bounds_check" in out and "notebooks/00-workbench-tour.ipynb#" in out
    with pytest.raises(SystemExit):
        main(["where", "nosuch"])
    assert "unknown op 'nosuch'" in capsys.readouterr().err
