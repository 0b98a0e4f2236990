"""Define the notebooks' jargon (``wb.glossary``): one markdown file, shown whole or one term at a time.

The glossary is ``notebooks/glossary.md``, next to the notebooks, because ``make lab`` roots JupyterLab at
``notebooks/`` and a notebook's links can only open files under that root. Each entry is a ``### term`` heading,
one to three sentences, an optional ``*Also:*`` line of other spellings and a ``*Where:*`` line of the notebook
sections where the term matters (``01 §5``: notebook 01, section 5).

Notebooks link a term's first use to ``glossary.md#<anchor>``. The anchor is the id JupyterLab gives the heading:
its text with every space replaced by ``-`` (``### warp specialisation`` -> ``warp-specialisation``).

>>> import workbench as wb
>>> wb.glossary("wgmma")          # one entry, rendered as markdown in a notebook
>>> wb.glossary()                 # the whole glossary
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Entry", "GlossaryView", "UnknownTerm", "anchor", "entries", "glossary", "lookup", "path"]

_ALSO = "*Also:*"
_WHERE = "*Where:*"


class UnknownTerm(LookupError):
    """Raised when the glossary has no entry for a term; the message names the closest terms."""


@dataclass(frozen=True)
class Entry:
    """One glossary entry: the term, its anchor, other spellings, the definition and where it matters."""

    term: str
    anchor: str
    aliases: tuple[str, ...]
    text: str
    where: tuple[str, ...]
    group: str

    def markdown(self, level: int = 3) -> str:
        """Return the entry as markdown, with the term as a heading of ``level``."""
        lines = [f"{'#' * level} {self.term}", "", self.text]
        if self.aliases:
            lines += ["", f"{_ALSO} {', '.join(self.aliases)}"]
        if self.where:
            lines += ["", f"{_WHERE} {' · '.join(self.where)}"]
        return "\n".join(lines)


class GlossaryView:
    """Show glossary markdown: rendered in a notebook, plain text in a terminal."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def path() -> Path:
    """Return the glossary file, ``notebooks/glossary.md`` in the project checkout."""
    return Path(__file__).resolve().parents[1] / "notebooks" / "glossary.md"


def anchor(heading: str) -> str:
    """Return the id JupyterLab gives a markdown heading with text ``heading``: spaces become ``-``."""
    return heading.strip().replace(" ", "-")


def _key(term: str) -> str:
    return re.sub(r"[\s\-_]+", " ", term.strip().casefold())


def _split_list(line: str, prefix: str, sep: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in line[len(prefix):].split(sep) if p.strip())


def _parse(text: str) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    group, cur = "", None

    def close() -> None:
        if cur is None:
            return
        term = cur["term"]
        if term in out:
            raise ValueError(f"glossary: {term!r} is defined twice")
        body = " ".join(cur["body"]).strip()
        if not body:
            raise ValueError(f"glossary: {term!r} has no definition")
        out[term] = Entry(term, anchor(term), cur["aliases"], body, cur["where"], group)

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("### "):
            close()
            cur = {"term": line[4:].strip(), "aliases": (), "where": (), "body": []}
        elif line.startswith("## "):
            close()
            cur, group = None, line[3:].strip()
        elif cur is None:
            continue
        elif line.startswith(_ALSO):
            cur["aliases"] = _split_list(line, _ALSO, ",")
        elif line.startswith(_WHERE):
            cur["where"] = _split_list(line, _WHERE, "·")
        elif line:
            cur["body"].append(line)
    close()
    return out


@functools.lru_cache(maxsize=4)
def _load(file: str, mtime: float) -> tuple[dict[str, Entry], dict[str, str]]:
    found = _parse(Path(file).read_text(encoding="utf-8"))
    index: dict[str, str] = {}
    for e in found.values():
        for name in (e.term, *e.aliases):
            index.setdefault(_key(name), e.term)
    return found, index


def _tables() -> tuple[dict[str, Entry], dict[str, str]]:
    p = path()
    if not p.is_file():
        raise FileNotFoundError(f"glossary: {p} is missing (it lives in the project checkout, next to the notebooks)")
    return _load(str(p), p.stat().st_mtime)


def entries() -> dict[str, Entry]:
    """Return every entry, keyed by its term, in the glossary's order."""
    return dict(_tables()[0])


def lookup(term: str) -> Entry:
    """Return the entry for ``term``: its heading or any ``*Also:*`` spelling, case-insensitive, plural allowed.

    Raises :class:`UnknownTerm` naming the closest terms when there is none.
    """
    if not isinstance(term, str) or not term.strip():
        raise UnknownTerm(f"glossary: expected a term such as 'wgmma', got {term!r}")
    found, index = _tables()
    k = _key(term)
    for cand in (k, k[:-1] if k.endswith("s") else k, k[:-2] if k.endswith("es") else k):
        if cand in index:
            return found[index[cand]]
    close = difflib.get_close_matches(k, list(index), n=3, cutoff=0.6)
    hint = f"; closest: {', '.join(found[index[c]].term for c in close)}" if close else ""
    raise UnknownTerm(f"glossary: no entry for {term!r}{hint} (wb.glossary() lists them all)")


def glossary(term: str | None = None) -> GlossaryView:
    """Show the glossary (``term=None``) or the entry for ``term``, rendered as markdown in a notebook."""
    if term is None:
        return GlossaryView(path().read_text(encoding="utf-8"))
    return GlossaryView(lookup(term).markdown())
