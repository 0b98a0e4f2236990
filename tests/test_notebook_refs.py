"""Cross-references inside a notebook name the section they point to, and the name matches its heading."""

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
