"""Rewrite each notebook's "Drills for this chapter" tables and counts from the drill registry.

    python scripts/update-drill-tables.py          # rewrite notebooks/0?-*.ipynb in place
    python scripts/update-drill-tables.py --check  # exit 1 and name the notebooks whose tables are stale

The tables are written into the notebook (a learner reads them without running a cell); tests/test_notebook_refs.py
asserts they equal ``wb.drills(chapter=...)``. This script keeps the prose around them and rewrites only the
"**In short:**" sentence and the per-kind tables.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = (("implement", "Implement from a blank page", "implement from a blank page"),
         ("spot_the_bug", "Spot the bug", "spot the bug"),
         ("napkin", "Napkin math", "napkin math"),
         ("concept", "Concepts", "concepts"),
         ("profile", "Profiles", "profiles"))
SHORT = re.compile(r"\*\*In short:\*\* \d+ interview drills on this chapter's kernels: .*?\.(?=\n\n)", re.S)
TABLES = re.compile(r"\n\*\*(?:" + "|".join(re.escape(h) for _, h, _ in KINDS) + r")\*\*\n\n\| id \|.*", re.S)


def _sentence(counts: dict[str, int]) -> str:
    parts = [f"{label} ({counts[k]})" for k, _, label in KINDS if counts.get(k)]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"**In short:** {sum(counts.values())} interview drills on this chapter's kernels: {listed}."


def _tables(drills: list) -> str:
    out = []
    for kind, head, _ in KINDS:
        rows = [d for d in drills if d.kind == kind]
        if rows:
            out.append(f"**{head}**\n\n| id | level | topic | title |\n|---|---|---|---|\n"
                       + "".join(f"| `{d.id}` | {d.level} | {d.topic} | {d.title} |\n" for d in rows))
    return "\n" + "\n".join(out)


def _wrap(sentence: str, width: int = 118) -> str:
    words, lines, line = sentence.split(" "), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return "\n".join(lines + [line])


def rewrite(text: str, drills: list) -> str:
    """Return the drills cell ``text`` with its counts sentence and tables made from ``drills``."""
    counts = {k: sum(1 for d in drills if d.kind == k) for k, _, _ in KINDS}
    text, n = SHORT.subn(lambda _m: _wrap(_sentence(counts)), text, count=1)
    if n != 1:
        raise ValueError("no '**In short:** N interview drills on this chapter's kernels: ...' sentence")
    m = TABLES.search(text)
    if not m:
        raise ValueError("no drill tables (a '**Implement from a blank page**' ... heading and table)")
    return text[:m.start()] + _tables(drills).rstrip("\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="report stale notebooks, change nothing")
    args = p.parse_args(argv)
    os.environ.setdefault("WORKBENCH_MODE", "cpu")
    sys.path.insert(0, str(ROOT))
    import workbench as wb

    stale = []
    for nb in sorted((ROOT / "notebooks").glob("0?-*.ipynb")):
        doc = json.loads(nb.read_text())
        for cell in doc["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] != "markdown" or "Drills for this chapter" not in src:
                continue
            new = rewrite(src, list(wb.drills(chapter=nb.stem)))
            if new != src:
                stale.append(nb.name)
                lines = new.splitlines(keepends=True)
                cell["source"] = lines
        if nb.name in stale and not args.check:
            nb.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    for name in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {name}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
