"""The progress store: every attempt, reveal and give-up, in SQLite under ``$WORKBENCH_HOME``.

The file is ``$WORKBENCH_HOME/progress.sqlite3`` (default ``~/.local/share/kernel-workbench/progress.sqlite3``),
read and written with the standard library's ``sqlite3``. It survives kernel restarts and upgrades: the ``meta``
table carries the schema version, an older file is migrated in one transaction, a newer one is refused
untouched.

Nothing here ever deletes or rewrites a row. A file that is not a readable SQLite database (corrupt, or not a
database at all) or one that stays locked by another process gets a clear message naming the file and what to
do; the file is left as it is, and the events of this session wait in memory and are written with the next
event that reaches a healthy file (``flush()`` retries by hand). Events still waiting when Python exits are
written then (atexit), or, when the file is still locked or broken, appended to a side journal
(``progress.journal.jsonl`` beside it) that the next write merges into the file: an attempt is never silently
lost. A home folder that is read-only, or a file rather than a folder, and a schema version that is not a
number (a damaged or foreign file) get clear messages naming the path. A failing store never fails a drill:
``record`` warns and goes on; ``events()`` raises :class:`ProgressStoreError`, since a summary of a file it
cannot read would be wrong.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import json
import os
import sqlite3
import sys
import warnings
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
DEFAULT_HOME = "~/.local/share/kernel-workbench"
FILE_NAME = "progress.sqlite3"
JOURNAL_NAME = "progress.journal.jsonl"
LOCK_TIMEOUT_S = 2.0
# attempt: a graded submission; reveal: the model answer (reveal(), model_answer(), an exercise's solution()) was
# shown; give_up: an attempt ended as a fail; self_assessed: the learner marked a free-text answer against a rubric
# (``score``: the share of the rubric met, 0..1), which is never a pass.
EVENTS = ("attempt", "reveal", "give_up", "self_assessed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    drill TEXT NOT NULL,
    kind TEXT NOT NULL,
    topic TEXT NOT NULL,
    level TEXT NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('attempt', 'reveal', 'give_up', 'self_assessed')),
    passed INTEGER,
    seconds REAL,
    hints INTEGER NOT NULL DEFAULT 0,
    timed INTEGER NOT NULL DEFAULT 0,
    over_time INTEGER NOT NULL DEFAULT 0,
    revealed_before INTEGER NOT NULL DEFAULT 0,
    mock TEXT,
    answer TEXT,
    score REAL
);
CREATE INDEX IF NOT EXISTS events_drill ON events (drill);
"""

# The columns version 1 had (version 2 added ``score`` and the ``self_assessed`` event).
V1_COLUMNS = ("at", "drill", "kind", "topic", "level", "event", "passed", "seconds", "hints", "timed", "over_time",
              "revealed_before", "mock", "answer")


def _v1_to_v2(con: sqlite3.Connection) -> None:
    """Rebuild ``events`` with the version 2 schema (SQLite cannot widen a CHECK in place), every row kept."""
    cols = ", ".join(V1_COLUMNS)
    con.execute("ALTER TABLE events RENAME TO events_v1")
    con.execute("DROP INDEX IF EXISTS events_drill")
    for stmt in filter(str.strip, _SCHEMA.split(";")):
        con.execute(stmt)
    con.execute(f"INSERT INTO events (id, {cols}) SELECT id, {cols} FROM events_v1 ORDER BY id")
    con.execute("DROP TABLE events_v1")


# Migrations from version v to v + 1, each run inside the upgrade's transaction. Version 1 is the first schema.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2}

COLUMNS = (*V1_COLUMNS, "score")

_pending: list[dict[str, Any]] = []  # events not yet written (the file was locked or unreadable)


class ProgressStoreError(RuntimeError):
    """The progress database cannot be read or written; the message names the file and what to do."""


def home() -> Path:
    """Return the workbench's data folder: ``$WORKBENCH_HOME``, else ``~/.local/share/kernel-workbench``."""
    return Path(os.environ.get("WORKBENCH_HOME") or DEFAULT_HOME).expanduser()


def path() -> Path:
    """Return the progress database file."""
    return home() / FILE_NAME


def _explain(p: Path, e: Exception) -> str:
    text = str(e)
    if isinstance(e, sqlite3.OperationalError) and "locked" in text:
        return (f"progress database {p} is locked by another process ({text}) and stayed locked for "
                f"{LOCK_TIMEOUT_S:g} s. Nothing was lost: this session's events wait in memory and are written with "
                "the next one (or call workbench.practice.store.flush()). Close the other notebook or process "
                "that writes it, if one is stuck.")
    if isinstance(e, sqlite3.DatabaseError):
        return (f"progress database {p} is not a readable SQLite database ({text}). It was left exactly as it is "
                "and no row in it was changed. Move it aside to start a fresh one (mv "
                f"'{p}' '{p}.broken'), or restore a backup; this session's events wait in memory until then.")
    if isinstance(e, ProgressStoreError):
        return text
    return f"progress database {p} cannot be used ({type(e).__name__}: {text})"


def _usable_home(p: Path) -> None:
    """Raise :class:`ProgressStoreError` naming the folder when the database's folder cannot hold it."""
    folder = p.parent
    for up in (folder, *folder.parents):
        if up.exists():
            break
    if up.exists() and not up.is_dir():
        raise ProgressStoreError(f"the progress folder {folder} cannot be made: {up} is a file, not a folder. Set "
                                 "WORKBENCH_HOME to a folder (or move the file away).")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ProgressStoreError(f"the progress folder {folder} cannot be made ({e.strerror or e}). Set "
                                 "WORKBENCH_HOME to a writable folder.") from e
    if not p.exists() and not os.access(folder, os.W_OK | os.X_OK):
        raise ProgressStoreError(f"the progress folder {folder} is read-only: the database {p.name} cannot be "
                                 "created there. Set WORKBENCH_HOME to a writable folder.")
    if p.exists() and p.is_dir():
        raise ProgressStoreError(f"progress database {p} is a folder, not a file: move it away.")


def _connect(p: Path) -> sqlite3.Connection:
    _usable_home(p)
    return sqlite3.connect(str(p), timeout=LOCK_TIMEOUT_S)


def _version(con: sqlite3.Connection) -> int | None:
    has_meta = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    if not has_meta:
        return None
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if not row:
        return None
    try:
        return int(str(row[0]).strip())
    except ValueError:
        raise ProgressStoreError(
            f"progress database {path()} has schema version {row[0]!r}, which is not a version number: it was not "
            "written by the Kernel Workbench, or it is damaged. It was left as it is; move it aside to start a "
            "fresh one, or set WORKBENCH_HOME to another folder.") from None


def _ensure_schema(con: sqlite3.Connection, p: Path) -> None:
    """Create the schema in a new file, migrate an older one, refuse a newer one (untouched)."""
    version = _version(con)
    if version is not None and version > SCHEMA_VERSION:
        raise ProgressStoreError(
            f"progress database {p} has schema version {version}, written by a newer Kernel Workbench; this one "
            f"reads up to version {SCHEMA_VERSION}. Upgrade the workbench, or set WORKBENCH_HOME to another folder. "
            "The file was not changed.")
    if version is not None and version < 1:
        raise ProgressStoreError(f"progress database {p} has schema version {version}, which no Kernel Workbench "
                                 "wrote (versions start at 1): it is damaged. It was left as it is; move it aside.")
    if version == SCHEMA_VERSION:
        return
    con.isolation_level = None  # explicit transaction: DDL included, all or nothing
    con.execute("BEGIN IMMEDIATE")
    try:
        version = _version(con)  # another process may have created or migrated it meanwhile
        if version is None:
            for stmt in filter(str.strip, _SCHEMA.split(";")):
                con.execute(stmt)
            con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            con.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('created', ?)", (_now(),))
        elif version < SCHEMA_VERSION:
            for v in range(version, SCHEMA_VERSION):
                if v not in MIGRATIONS:
                    raise ProgressStoreError(f"progress database {p}: no migration from schema version {v} to "
                                             f"{v + 1}; the file was not changed")
                MIGRATIONS[v](con)
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.isolation_level = ""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _event_row(drill: Any, event: str, *, passed: bool | None, seconds: float | None, over_time: bool,
               answer: str, revealed_before: bool, score: float | None = None) -> dict[str, Any]:
    mock = getattr(drill, "_mock", None)
    return {"at": _now(), "drill": drill.id, "kind": drill.kind, "topic": drill.topic, "level": drill.level,
            "event": event, "passed": None if passed is None else int(bool(passed)),
            "seconds": None if seconds is None else round(float(seconds), 3),
            "hints": int(getattr(drill, "_hints_shown", 0)), "timed": int(getattr(drill, "_clock", None) is not None
                                                                            or mock is not None),
            "over_time": int(bool(over_time)), "revealed_before": int(bool(revealed_before)),
            "mock": getattr(mock, "id", None), "answer": (answer or "")[:500],
            "score": None if score is None else float(score)}


def record(drill: Any, event: str, *, passed: bool | None = None, seconds: float | None = None,
           over_time: bool = False, answer: str = "", revealed_before: bool = False,
           score: float | None = None) -> bool:
    """Write one event of ``drill``; return True when it (and anything pending) reached the file.

    ``drill`` is anything with ``id``, ``kind``, ``topic`` and ``level`` (a drill, or an exercise's record
    handle). A ``self_assessed`` event carries ``score`` (0..1) and never ``passed``. On a locked or unreadable
    file it warns with the reason and keeps the event for the next write.
    """
    if event not in EVENTS:
        raise ValueError(f"progress: event must be one of {EVENTS}, got {event!r}")
    if event == "self_assessed":
        if passed is not None:
            raise ValueError(f"progress: a self_assessed event of {drill.id} is never a pass or a fail (passed=None)")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
            raise ValueError(f"progress: a self_assessed event of {drill.id} needs score, the share of the rubric "
                             f"met in [0, 1], got {score!r}")
    _pending.append(_event_row(drill, event, passed=passed, seconds=seconds, over_time=over_time, answer=answer,
                               revealed_before=revealed_before, score=score))
    return flush(warn=True)


def journal_path() -> Path:
    """Return the side journal: events that could not reach the database when a process exited."""
    return home() / JOURNAL_NAME


def _take_journal() -> tuple[Path | None, list[dict[str, Any]]]:
    """Move the journal aside (atomically: one process merges it) and return (its new path, its events)."""
    j = journal_path()
    if not j.is_file():
        return None, []
    taken = j.with_name(f"{j.name}.merging-{os.getpid()}")
    try:
        j.rename(taken)
    except OSError:
        return None, []
    return taken, _read_journal(taken)


def _give_back(taken: Path | None) -> None:
    """Put a journal taken by :func:`_take_journal` back (appended to any newer one) after a failed merge."""
    if taken is None or not taken.exists():
        return
    with open(journal_path(), "a", encoding="utf-8") as f:
        f.write(taken.read_text(encoding="utf-8", errors="replace"))
    taken.unlink()


def flush(warn: bool = True) -> bool:
    """Write the events waiting in memory (and any journal left by an earlier process); return True when none is
    left (warn with the reason otherwise)."""
    if not _pending and not journal_path().is_file():
        return True
    p = path()
    taken = None
    try:
        with closing(_connect(p)) as con:
            _ensure_schema(con, p)
            taken, journalled = _take_journal()
            with con:
                con.executemany(f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES "
                                f"({', '.join(':' + c for c in COLUMNS)})", journalled + _pending)
        _pending.clear()
        if taken is not None:
            taken.unlink()
        return True
    except (sqlite3.Error, ProgressStoreError, OSError) as e:
        _give_back(taken)
        if warn:
            warnings.warn(f"progress not saved yet: {_explain(p, e)} ({len(_pending)} event(s) waiting)",
                          RuntimeWarning, stacklevel=3)
        return False


@atexit.register
def flush_at_exit() -> None:
    """Write what still waits when Python exits; what cannot reach the database goes to the side journal."""
    if not _pending or flush(warn=False):
        return
    j = journal_path()
    try:
        with open(j, "a", encoding="utf-8") as f:
            for row in _pending:
                f.write(json.dumps(row) + "\n")
        print(f"kernel-workbench: {len(_pending)} progress event(s) could not reach {path()}; kept in {j}, merged "
              "by the next write", file=sys.stderr)
        _pending.clear()
    except OSError as e:
        print(f"kernel-workbench: {len(_pending)} progress event(s) are lost: neither {path()} nor the journal {j} "
              f"can be written ({e})", file=sys.stderr)


def pending() -> int:
    """Return how many events wait in memory for a writable file."""
    return len(_pending)


def events() -> list[dict[str, Any]]:
    """Return every recorded event (oldest first), plus any still waiting in memory.

    Raises :class:`ProgressStoreError` naming the file when it cannot be read. A missing file is no progress yet.
    """
    p = path()
    rows: list[dict[str, Any]] = []
    if p.exists():
        try:
            with closing(_connect(p)) as con:
                version = _version(con)
                if version is not None and version > SCHEMA_VERSION:
                    _ensure_schema(con, p)  # raises with the upgrade message, touching nothing
                if version is not None:
                    if version < SCHEMA_VERSION:
                        _ensure_schema(con, p)
                    con.row_factory = sqlite3.Row
                    rows = [dict(r) for r in con.execute(f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY id")]
        except (sqlite3.Error, OSError) as e:
            raise ProgressStoreError(_explain(p, e)) from e
    return rows + _journal_rows() + [dict(r) for r in _pending]


def _journal_rows() -> list[dict[str, Any]]:
    """Return the events waiting in the side journal (not yet merged into the database)."""
    j = journal_path()
    return _read_journal(j) if j.is_file() else []


def _read_journal(j: Path) -> list[dict[str, Any]]:
    """Return the well-formed events of journal file ``j`` (one JSON object a line), each with every column."""
    out = []
    for line in j.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("event") in EVENTS:
            out.append({c: row.get(c) for c in COLUMNS})
    return out
