"""Define the benchmark record format, check records, and save and load recorded results (``results/*.json``).

A record is one timed (op, variant, shape, dtype) on one device; results/README.md documents every field.
``results/`` holds only real-GPU runs with their provenance: :func:`save_results` refuses emulated records
there, and :func:`load_recorded` returns only validated, non-emulated records.

This module does not import torch at import time (only :func:`collect_versions` looks at it, lazily).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from workbench import dtypes

__all__ = [
    "SCHEMA",
    "RESULTS_DIR",
    "RECORD_FIELDS",
    "FIELD_CHECKS",
    "VERSION_KEYS",
    "RecordError",
    "collect_versions",
    "fill_derived",
    "load_recorded",
    "load_results_file",
    "recorded_summary",
    "save_results",
    "validate_record",
]

SCHEMA = "kernel-workbench/bench/1"
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"

#: Every record field and what it must hold (for error messages; see results/README.md for meanings).
RECORD_FIELDS: dict[str, str] = {
    "op": "non-empty str",
    "variant": "non-empty str",
    "backend": "non-empty str",
    "shape": "dict of str -> int",
    "dtype": "str such as 'float16'",
    "time_ms": "float > 0 (median)",
    "p20_ms": "float > 0",
    "p80_ms": "float > 0",
    "flops": "float >= 0",
    "bytes": "float >= 0",
    "tflops": "float >= 0 or None",
    "gbps": "float >= 0 or None",
    "pct_peak": "float >= 0 or None",
    "bound": "'compute', 'memory' or None",
    "emulated": "bool",
    "device": "dict with name, cc, sm_count, mem_gb",
    "versions": "dict with python, torch, triton, numba, numba_cuda, cupy, cuda, driver",
    "date": "ISO date str",
    "command": "str",
}
VERSION_KEYS = ("python", "torch", "triton", "numba", "numba_cuda", "cupy", "cuda", "driver")


class RecordError(ValueError):
    """A benchmark record or results file does not follow the schema."""


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_text(x: Any) -> bool:
    return isinstance(x, str) and bool(x.strip())


#: A field check returns None when the value is fine, else why not ("" when the field's expectation says it all).
Check = Callable[[Any], "str | None"]


def _when(ok: Callable[[Any], bool], why: str = "") -> Check:
    """Return a check that passes the values ``ok`` accepts and explains the rest with ``why``."""
    return lambda v: None if ok(v) else why


def _each(*checks: Check) -> Check:
    """Return a check that runs ``checks`` in order and reports the first complaint."""
    return lambda v: next((why for why in (c(v) for c in checks) if why is not None), None)


def _check_shape(shape: Any) -> str | None:
    if not isinstance(shape, Mapping) or not shape:
        return ""
    for k, v in shape.items():
        if not isinstance(k, str) or not _is_int(v) or v < 0:
            return f"entry {k!r}: {v!r} is not a str -> non-negative int"
    return None


#: device entries that may be None, and what each must be otherwise.
_DEVICE_ENTRIES: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("cc", lambda v: isinstance(v, str) and re.fullmatch(r"\d+\.\d+", v) is not None,
     "device.cc must be a str like '9.0' or None"),
    ("sm_count", _is_int, "device.sm_count must be an int or None"),
    ("mem_gb", _is_num, "device.mem_gb must be a number or None"),
)


def _check_device(dev: Any) -> str | None:
    if not isinstance(dev, Mapping) or not _is_text(dev.get("name")):
        return "device.name must be a non-empty str"
    for key, ok, why in _DEVICE_ENTRIES:
        if key not in dev:
            return f"device.{key} missing (use None when unknown)"
        if dev[key] is not None and not ok(dev[key]):
            return why
    return None


def _check_versions(vers: Any) -> str | None:
    if not isinstance(vers, Mapping):
        return ""
    absent = [k for k in VERSION_KEYS if k not in vers]
    if absent:
        return f"missing {absent} (use None for what is not installed)"
    wrong = [k for k in VERSION_KEYS if vers[k] is not None and not isinstance(vers[k], str)]
    return f"versions.{wrong[0]} must be a str or None" if wrong else None


def _check_date(date: Any) -> str | None:
    if not isinstance(date, str):
        return ""
    try:
        _dt.datetime.fromisoformat(date)
    except ValueError:
        return "not ISO 8601, e.g. '2026-10-28' or '2026-10-28T14:03:00'"
    return None


_positive = _when(lambda v: _is_num(v) and v > 0)
_non_negative = _when(lambda v: _is_num(v) and v >= 0)
_rate = _when(lambda v: v is None or (_is_num(v) and v >= 0))

#: The check of each field, in RECORD_FIELDS order (a field's check looks at that field alone).
FIELD_CHECKS: dict[str, Check] = {
    "op": _when(_is_text), "variant": _when(_is_text), "backend": _when(_is_text),
    "shape": _check_shape,
    "dtype": _each(_when(_is_text), _when(lambda v: v in dtypes.NAMES,
                                          f"one of {dtypes.NAMES}, as torch names them without 'torch.'")),
    "time_ms": _positive, "p20_ms": _positive, "p80_ms": _positive,
    "flops": _non_negative, "bytes": _non_negative,
    "tflops": _rate, "gbps": _rate, "pct_peak": _rate,
    "bound": _when(lambda v: v in ("compute", "memory", None)),
    "emulated": _when(lambda v: isinstance(v, bool)),
    "device": _check_device, "versions": _check_versions, "date": _check_date,
    "command": _when(lambda v: isinstance(v, str)),
}


def _bad(where: str, rec: Mapping[str, Any], key: str, why: str = "") -> RecordError:
    return RecordError(f"{where}: field {key!r} is {rec[key]!r}; expected {RECORD_FIELDS[key]}"
                       + (f" ({why})" if why else ""))


def _check_agreement(rec: Mapping[str, Any], where: str) -> None:
    """Check what ties fields together: p20 <= time <= p80, no rates on emulated records, rates = totals / time."""
    if not rec["p20_ms"] <= rec["time_ms"] <= rec["p80_ms"]:
        raise RecordError(
            f"{where}: expected p20_ms <= time_ms <= p80_ms, "
            f"got {rec['p20_ms']} / {rec['time_ms']} / {rec['p80_ms']}"
        )
    for key in ("tflops", "gbps", "pct_peak"):
        if rec[key] is not None and rec["emulated"]:
            raise _bad(where, rec, key, "emulated records must have None here: emulated times are not GPU performance")
    seconds = rec["time_ms"] * 1e-3
    for key, total, scale in (("tflops", "flops", 1e12), ("gbps", "bytes", 1e9)):
        if rec[key] is not None and rec[total] > 0:
            expect = rec[total] / seconds / scale
            if not math.isclose(rec[key], expect, rel_tol=0.05):
                raise _bad(where, rec, key, f"{total} / time_ms gives {expect:.4g}")


def validate_record(rec: Mapping[str, Any]) -> None:
    """Check one record against the schema; raise RecordError naming the missing or bad field.

    Each field has its check in :data:`FIELD_CHECKS`. Beyond types, it checks that p20 <= time <= p80, that
    emulated records carry no tflops/gbps/pct_peak (emulated times are never GPU performance), and that
    tflops/gbps agree with flops/bytes over time_ms.
    """
    if not isinstance(rec, Mapping):
        raise RecordError(f"a record must be a dict, got {type(rec).__name__}")
    where = f"record {rec.get('op', '?')}/{rec.get('variant', '?')}"
    missing = [k for k in RECORD_FIELDS if k not in rec]
    if missing:
        raise RecordError(
            f"{where}: missing field(s) {missing}; expected "
            + ", ".join(f"{k} ({RECORD_FIELDS[k]})" for k in missing)
        )
    for key, check in FIELD_CHECKS.items():
        why = check(rec[key])
        if why is not None:
            raise _bad(where, rec, key, why)
    _check_agreement(rec, where)


def fill_derived(rec: dict[str, Any], device: Any = None) -> dict[str, Any]:
    """Fill tflops, gbps, pct_peak and bound of ``rec`` from flops, bytes, time_ms and the device's datasheet.

    ``device`` is a DeviceSpec or name (default: ``rec['device']['name']``). Emulated records get None for all
    four. pct_peak is a percentage (0-100) of the bound resource's datasheet peak: TFLOP/s against the dtype's
    peak (fp32 = SIMT) when compute-bound, GB/s against bandwidth when memory-bound; None for unknown devices.
    Returns ``rec`` (changed in place).
    """
    from workbench import hardware

    if rec.get("emulated"):
        rec.update(tflops=None, gbps=None, pct_peak=None, bound=None)
        return rec
    seconds = rec["time_ms"] * 1e-3
    rec["tflops"] = rec["flops"] / seconds / 1e12 if rec["flops"] else None
    rec["gbps"] = rec["bytes"] / seconds / 1e9 if rec["bytes"] else None
    rec["pct_peak"] = rec["bound"] = None
    spec = hardware.lookup(device if device is not None else rec["device"]["name"])
    if spec is None or not rec["bytes"] or not rec["flops"]:
        if spec is not None and rec["bytes"]:
            rec["bound"] = "memory"
            rec["pct_peak"] = 100 * rec["gbps"] / spec.bandwidth_gbs
        return rec
    try:
        ridge = hardware.ridge_point(spec, rec["dtype"])
        peak = hardware.peak_tflops(spec, rec["dtype"])
    except ValueError:
        return rec
    if rec["flops"] / rec["bytes"] >= ridge:
        rec["bound"] = "compute"
        rec["pct_peak"] = 100 * rec["tflops"] / peak
    else:
        rec["bound"] = "memory"
        rec["pct_peak"] = 100 * rec["gbps"] / spec.bandwidth_gbs
    return rec


def collect_versions() -> dict[str, str | None]:
    """Return the versions block of a record: python, torch, triton, numba, numba_cuda, cupy, cuda, driver.

    Package versions come from installed metadata; cuda is torch's CUDA build (None on CPU builds); driver is
    read from ``nvidia-smi`` when it is on PATH.
    """
    from importlib import metadata

    def ver(*dists: str) -> str | None:
        for d in dists:
            try:
                return metadata.version(d)
            except metadata.PackageNotFoundError:
                continue
        return None

    out: dict[str, str | None] = {
        "python": platform.python_version(),
        "torch": ver("torch"),
        "triton": ver("triton"),
        "numba": ver("numba"),
        "numba_cuda": ver("numba-cuda", "numba_cuda"),
        "cupy": ver("cupy-cuda13x", "cupy-cuda12x", "cupy"),
        "cuda": None,
        "driver": None,
    }
    if out["torch"]:
        import torch

        out["cuda"] = torch.version.cuda
    import shutil
    import subprocess

    if shutil.which("nvidia-smi"):
        try:
            res = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10, check=False,
            )
            if res.returncode == 0 and res.stdout.strip():
                out["driver"] = res.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return out


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def save_results(
    records: Iterable[Mapping[str, Any]],
    path: str | Path,
    command: str,
    *,
    host_note: str = "",
    results_dir: str | Path = RESULTS_DIR,
) -> Path:
    """Validate ``records`` and write them as one results file at ``path``; return the path.

    Refuses (RecordError) to write emulated records, or an empty list, into ``results_dir`` (the repo's
    ``results/``): only real-GPU runs belong there. Elsewhere (e.g. ``out/``), emulated records may be saved.
    The provenance block (gpu, driver, versions, date, command, host_note) is taken from the records.
    """
    recs = [dict(r) for r in records]
    for r in recs:
        validate_record(r)
    path = Path(path)
    if _inside(path, Path(results_dir)):
        emulated = [f"{r['op']}/{r['variant']}" for r in recs if r["emulated"]]
        if emulated:
            raise RecordError(
                f"refusing to save {len(emulated)} emulated record(s) ({', '.join(emulated[:5])}"
                f"{', ...' if len(emulated) > 5 else ''}) into {results_dir}: results/ holds only real-GPU "
                "runs. Save emulated runs elsewhere (e.g. out/), or run `python -m workbench bench` on a GPU "
                "machine."
            )
        if not recs:
            raise RecordError(f"refusing to save an empty results file into {results_dir}")
    gpus = sorted({r["device"]["name"] for r in recs})
    first = recs[0] if recs else {}
    provenance = {
        "gpu": ", ".join(gpus) if gpus else None,
        "driver": first.get("versions", {}).get("driver"),
        "versions": dict(first.get("versions", {})),
        "date": max((r["date"] for r in recs), default=_dt.date.today().isoformat()),
        "command": command,
        "host_note": host_note,
    }
    doc = {"schema": SCHEMA, "provenance": provenance, "records": recs}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return path


def load_results_file(path: str | Path) -> dict[str, Any]:
    """Read one results file and check its schema tag and provenance; raise RecordError if it is not one."""
    path = Path(path)
    if path.is_dir():
        raise RecordError(f"{path}: is a directory, not a results file")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RecordError(f"{path}: not valid JSON ({e})") from None
    except UnicodeDecodeError as e:
        raise RecordError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}), so not a results file") from None
    except OSError as e:
        raise RecordError(f"{path}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise RecordError(f"{path}: not a results file: {e}") from None
    except RecursionError:
        raise RecordError(f"{path}: not a results file: JSON nested too deeply to read") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise RecordError(f"{path}: schema is {got!r}, expected {SCHEMA!r}")
    if not isinstance(doc.get("provenance"), dict) or not isinstance(doc.get("records"), list):
        raise RecordError(f"{path}: expected a 'provenance' dict and a 'records' list")
    return doc


def load_recorded(op: str | None = None, results_dir: str | Path = RESULTS_DIR) -> list[dict[str, Any]]:
    """Return the recorded real-GPU records in ``results_dir`` (optionally only those of ``op``).

    Emulated records are dropped; files or records that fail validation are skipped with a warning naming
    them. No directory or no files gives [].
    """
    folder = Path(results_dir)
    if not folder.is_dir():
        return []
    out: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = load_results_file(path)
        except RecordError as e:
            warnings.warn(f"skipping results file: {e}", stacklevel=2)
            continue
        for i, rec in enumerate(doc["records"]):
            why = _invalid(rec)
            if why:
                warnings.warn(f"{path.name}: skipping record {i}: {why}", stacklevel=2)
                continue
            if rec["emulated"] or (op is not None and rec["op"] != op):
                continue
            out.append(rec)
    return out


def _invalid(rec: Any) -> str | None:
    """Return why ``rec`` is not a valid record (whatever odd value makes the validation itself fail), or None."""
    try:
        validate_record(rec)
    except RecordError as e:
        return str(e)
    except (TypeError, ValueError, OverflowError, RecursionError, KeyError, AttributeError) as e:
        return f"malformed ({type(e).__name__}: {e})"
    return None


def recorded_summary(results_dir: str | Path = RESULTS_DIR) -> list[dict[str, Any]]:
    """Return which GPUs and dates are recorded: one dict per results file.

    Each has file, gpu, date, driver, ops (sorted), and n_records (valid, non-emulated ones).
    """
    folder = Path(results_dir)
    rows: list[dict[str, Any]] = []
    if not folder.is_dir():
        return rows
    for path in sorted(folder.glob("*.json")):
        try:
            doc = load_results_file(path)
        except RecordError:
            continue
        good = []
        for rec in doc["records"]:
            if _invalid(rec):
                continue
            if not rec["emulated"]:
                good.append(rec)
        prov = doc["provenance"]
        rows.append(
            {
                "file": path.name,
                "gpu": prov.get("gpu"),
                "date": prov.get("date"),
                "driver": prov.get("driver"),
                "ops": sorted({r["op"] for r in good}),
                "n_records": len(good),
            }
        )
    return rows
