"""Notebook text that repeats facts stays true: section references match headings, drill tables the registry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
HEADING = re.compile(r"^## (\d+) · (.+)$", re.M)
# "section 5, *The online softmax*": a reference to this notebook's section 5, with the start of its title
REF = re.compile(r"[Ss]ection (\d+), \*([^*]+)\*")


def _markdown(nb: Path) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def check_refs(cells: list[str]) -> list[str]:
    """Return the references of ``cells`` whose title is not the start of that section's heading."""
    titles = {n: t for text in cells for n, t in HEADING.findall(text)}
    bad = []
    for text in cells:
        for n, title in REF.findall(text):
            if not titles.get(n, "").lower().startswith(title.strip().lower()):
                bad.append(f"section {n}, *{title}*: the heading is {titles.get(n, 'missing')!r}")
    return bad


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_section_references_match_their_headings(nb: Path):
    assert check_refs(_markdown(nb)) == []


def test_a_wrong_reference_is_caught():
    cells = ["## 4 · Why three passes are slow", "## 5 · The online softmax (derivation)",
             "the recurrence (section 4, *The online softmax*)"]
    assert check_refs(cells) == ["section 4, *The online softmax*: the heading is 'Why three passes are slow'"]
    assert check_refs(cells[:2] + ["(section 5, *The online softmax*)"]) == []


# ------------------------------------------------------------------------------------------ drill tables
KIND_HEADINGS = {"Implement from a blank page": "implement", "Spot the bug": "spot_the_bug", "Napkin math": "napkin",
                 "Concepts": "concept", "Profiles": "profile"}
ROW = re.compile(r"^\| `([\w-]+)` \| (\w+) \| ([\w-]+) \| (.+?) \|$", re.M)


def drill_table(text: str) -> dict[str, tuple[str, str, str, str]]:
    """Return {id: (kind, level, topic, title)} from a notebook's hand-written drill tables."""
    rows, kind = {}, None
    for line in text.splitlines():
        head = re.fullmatch(r"\*\*(.+)\*\*", line.strip())
        if head:
            kind = KIND_HEADINGS.get(head.group(1), head.group(1))
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = (kind, m.group(2), m.group(3), m.group(4))
    return rows


@pytest.mark.parametrize("nb", [p for p in NOTEBOOKS if any("Drills for this chapter" in t for t in _markdown(p))],
                         ids=lambda p: p.stem)
def test_drill_tables_are_the_registry(nb: Path):
    import workbench as wb

    text = next(t for t in _markdown(nb) if "Drills for this chapter" in t)
    table = drill_table(text)
    registry = {d.id: (d.kind, d.level, d.topic, d.title) for d in wb.drills(chapter=nb.stem)}
    assert table == registry
    m = re.search(r"\*\*In short:\*\* (\d+) interview drills", text)
    assert m and int(m.group(1)) == len(registry)
    for label, kind in KIND_HEADINGS.items():
        n = sum(1 for k in registry.values() if k[0] == kind)
        said = re.search(rf"{label.lower()} \((\d+)\)", text.lower().replace("\n", " "))
        if n or said:
            assert said and int(said.group(1)) == n, f"{label}: the text says {said and said.group(1)}, drills {n}"
