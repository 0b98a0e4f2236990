"""Turn the tarball of a GPU run (scripts/gpu-run.sh) into committed records under results/, with provenance.

    python scripts/import-gpu-results.py out/gpu-run/gpu-run-20261202T101500Z.tar.gz
    python scripts/import-gpu-results.py RUN.tar.gz --host-note "H200 box, 1st run" --dry-run

Every records file in the tarball's results/ is read with ``workbench.results.load_results_file`` and every record
checked with ``validate_record``; emulated records (a ``--smoke`` dry run, a cpu-mode fallback) are refused, since
results/ holds only real-GPU runs. Accepted files are written with ``save_results`` (which checks them again) and a
``host_note`` naming the tarball, the run's git commit and device; each goal summary (``results/goals/*.json``)
whose mode is ``gpu`` goes to ``<dest>/goals/``, and the run's summary.txt to ``<dest>/gpu-runs/<stamp>.txt``.
Existing files are never overwritten (``--force`` replaces them). Exit status: 0 imported, 2 refused.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from workbench.results import RecordError, load_results_file, save_results, validate_record  # noqa: E402


def unpack(tarball: Path, into: Path) -> Path:
    """Extract ``tarball`` (plain files and folders only, nothing outside ``into``); return the run folder."""
    with tarfile.open(tarball, "r:gz") as tf:
        members = tf.getmembers()
        for m in members:
            if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in Path(m.name).parts:
                raise RecordError(f"{tarball.name}: refusing the member {m.name!r} (not a plain file inside)")
        tf.extractall(into, members=members, filter="data")
    runs = [p for p in into.iterdir() if p.is_dir() and p.name.startswith("gpu-run-")]
    if len(runs) != 1:
        raise RecordError(f"{tarball.name}: expected one gpu-run-<stamp>/ folder, found {[p.name for p in runs]}")
    return runs[0]


def read_records(run: Path) -> dict[Path, dict]:
    """Return {file: results document} for the run's records files; raise RecordError if any is not GPU-made."""
    docs = {}
    for f in sorted((run / "results").glob("*.json")):
        doc = load_results_file(f)
        for i, rec in enumerate(doc["records"]):
            try:
                validate_record(rec)
            except RecordError as e:
                raise RecordError(f"{f.name}: record {i}: {e}") from None
        emulated = [f"{r['op']}/{r['variant']}" for r in doc["records"] if r["emulated"]]
        if emulated:
            raise RecordError(f"{f.name}: {len(emulated)} emulated record(s) ({', '.join(emulated[:4])}): this run "
                              "was not on a GPU (a --smoke dry run?); results/ holds only real-GPU runs")
        if doc["records"]:
            docs[f] = doc
    if not docs:
        raise RecordError(f"{run.name}: no records in results/ (did every goal step fail? read summary.txt)")
    return docs


def _write(path: Path, force: bool) -> Path:
    if path.exists() and not force:
        raise RecordError(f"{path} exists; pass --force to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def import_run(tarball: Path, dest: Path, host_note: str = "", force: bool = False, dry_run: bool = False
               ) -> list[Path]:
    """Import one GPU run's records, goal summaries and summary into ``dest``; return the files written."""
    with tempfile.TemporaryDirectory(prefix="gpu-import-") as td:
        run = unpack(tarball, Path(td))
        docs = read_records(run)
        summary = (run / "summary.txt").read_text() if (run / "summary.txt").is_file() else ""
        git = re.search(r"^git: (.+)$", summary, re.M)
        stamp = run.name.removeprefix("gpu-run-")
        written: list[Path] = []
        for f, doc in docs.items():
            prov = doc["provenance"]
            note = "; ".join(x for x in (f"scripts/gpu-run.sh run {stamp} ({tarball.name})",
                                         f"git {git.group(1)}" if git else "", prov.get("host_note") or "",
                                         host_note) if x)
            out = dest / f.name
            if not dry_run:
                save_results(doc["records"], _write(out, force), prov["command"], host_note=note, results_dir=dest)
            written.append(out)
        for g in sorted((run / "results" / "goals").glob("*.json")):
            goals = json.loads(g.read_text())
            if goals.get("mode") != "gpu":
                raise RecordError(f"goals/{g.name}: mode {goals.get('mode')!r}, not a GPU run")
            out = dest / "goals" / g.name
            if not dry_run:
                shutil.copyfile(g, _write(out, force))
            written.append(out)
        if summary:
            out = dest / "gpu-runs" / f"{stamp}.txt"
            if not dry_run:
                _write(out, force).write_text(summary)
            written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    """Import the tarball named on the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tarball", type=Path)
    p.add_argument("--dest", type=Path, default=ROOT / "results", help="default: the repo's results/")
    p.add_argument("--host-note", default="", help="free text for the provenance (machine, anything unusual)")
    p.add_argument("--force", action="store_true", help="replace files that exist")
    p.add_argument("--dry-run", action="store_true", help="check everything, write nothing")
    a = p.parse_args(argv)
    try:
        written = import_run(a.tarball, a.dest, a.host_note, a.force, a.dry_run)
    except (RecordError, OSError, tarfile.TarError, json.JSONDecodeError) as e:
        print(f"import-gpu-results: {e}", file=sys.stderr)
        return 2
    for w in written:
        print(f"{'would write' if a.dry_run else 'wrote'} {w}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
