"""gpu mode of ``wb.profile``: run the call again under Nsight Compute (``ncu``) in a subprocess and read its counters.

:func:`run_under_ncu` saves the call's inputs, starts ``ncu`` on a child Python that rebuilds the call (a registered
variant by name, or a function importable from a module), runs it once to compile and autotune, then once more with
the profiler on. :func:`parse_ncu_csv` turns ncu's CSV into one :class:`~workbench.profile_counters.LaunchRecord` per
kernel under the catalogue's keys (:mod:`workbench.profile_metrics`), computing the ``wb__`` totals that ncu has no
single name for. The result is a :class:`~workbench.profile_counters.Profile` whose ``source`` is ``"ncu"``.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from workbench.profile_counters import LaunchRecord, NcuNotFoundError, Profile, ProfileError
from workbench.profile_metrics import METRICS

__all__ = ["find_ncu", "ncu_metrics", "parse_ncu_csv", "run_under_ncu"]

# ncu values read besides the catalogue's ncu keys: what the wb__ totals are computed from, and the launch shape.
_NCU_EXTRA = ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
              "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
              "launch__thread_count", "launch__grid_size", "launch__block_size")


def ncu_metrics() -> list[str]:
    """Return the Nsight Compute metric names gpu mode requests (the catalogue's ncu keys and what derives wb__)."""
    names = [k for k, m in METRICS.items() if m.ncu]
    return list(dict.fromkeys(names + list(_NCU_EXTRA)))


_NCU_HELP = ("wb.profile in gpu mode runs the call under NVIDIA Nsight Compute's command-line profiler `ncu`, which "
             "is not on PATH. Install Nsight Compute (it comes with the CUDA toolkit: add its bin folder, e.g. "
             "/usr/local/cuda/bin, to PATH; or `sudo apt-get install nsight-compute`, or the installer from "
             "https://developer.nvidia.com/nsight-compute), or set $WORKBENCH_NCU to the ncu executable. Reading "
             "counters needs permission to the GPU's performance counters (root, or the driver's "
             "NVreg_RestrictProfilingToAdminUsers=0). Without a GPU, profile in cpu mode (WORKBENCH_MODE=cpu) for the "
             "emulators' exact counts.")


def find_ncu() -> str:
    """Return the ncu executable ($WORKBENCH_NCU, else ``ncu`` on PATH) or raise NcuNotFoundError saying what to do."""
    env = os.environ.get("WORKBENCH_NCU")
    exe = env if env and Path(env).is_file() else shutil.which("ncu")
    if not exe:
        raise NcuNotFoundError(_NCU_HELP)
    return exe


_CHILD = """
import sys, torch
sys.path[:0] = {path!r}
from workbench.profile_ncu import _ncu_child
_ncu_child({spec!r})
"""


def _replayable(replay: dict, name: str) -> None:
    if replay["kind"] == "variant":
        return
    mod, qual = replay.get("module"), replay.get("qualname") or ""
    if not mod or mod == "__main__" or "<" in qual:
        raise ProfileError(
            f"wb.profile({name}) in gpu mode runs the call again under ncu in a subprocess, which cannot rebuild a "
            "lambda, a closure or a function defined in a notebook. Pass a registered variant (wb.profile(v, "
            "*inputs) or wb.profile('op/variant', M=...)), or a function importable from a module, with its inputs.")


def run_under_ncu(replay: dict, name: str, timeout: float = 1800) -> Profile:
    """Run the call under ncu in a subprocess and return its real values (gpu mode)."""
    import torch

    exe = find_ncu()
    _replayable(replay, name)
    with tempfile.TemporaryDirectory(prefix="wb-ncu-") as td:
        spec = Path(td) / "call.pt"
        cpu = lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x  # noqa: E731
        payload = {**replay, "inputs": [cpu(x) for x in replay["inputs"]],
                   "devices": [str(x.device) if isinstance(x, torch.Tensor) else None for x in replay["inputs"]]}
        torch.save(payload, spec)
        log = Path(td) / "ncu.csv"
        cmd = [exe, "--metrics", ",".join(ncu_metrics()), "--csv", "--page", "raw", "--profile-from-start", "off",
               "--target-processes", "all", "--log-file", str(log), sys.executable, "-c",
               _CHILD.format(path=[p for p in sys.path if p], spec=str(spec))]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        text = log.read_text() if log.exists() else ""
        if r.returncode != 0 or not text.strip():
            raise ProfileError(f"ncu failed on {name} (exit {r.returncode}):\n{(r.stderr or text or r.stdout)[-3000:]}")
    launches = parse_ncu_csv(text)
    if not launches and "ERR_NVGPUCTRPERM" in text:
        raise ProfileError("ncu has no permission to read the GPU's performance counters (ERR_NVGPUCTRPERM): run as "
                           "root, or see https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    return Profile(launches, "ncu", name)


def _num(s: str) -> float | None:
    s = s.strip().replace(",", "")
    if not s or s.lower() in ("n/a", "nan", "-"):
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    return int(v) if v.is_integer() else v


def _parse_dims(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", s or ""))


def parse_ncu_csv(text: str) -> list[LaunchRecord]:
    """Return one LaunchRecord per kernel of ``ncu --csv --page raw`` output (a units row after the header)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = rows[0], [r for r in rows[1:] if r and r[0].strip().isdigit()]
    col = {h: i for i, h in enumerate(header)}
    out = []
    for r in body:
        vals = {h: _num(r[i]) for h, i in col.items() if i < len(r) and (h in METRICS or h in _NCU_EXTRA)}
        vals = {k: v for k, v in vals.items() if v is not None}
        counts = {k: v for k, v in vals.items() if k in METRICS and METRICS[k].kind == "sum"}
        for k, m in METRICS.items():
            if m.from_ncu is not None and k not in counts:
                v = m.from_ncu(vals)
                if v is not None:
                    counts[k] = v
        rec = LaunchRecord(r[col["Kernel Name"]] if "Kernel Name" in col else "?", "ncu",
                           _parse_dims(r[col["Grid Size"]]) if "Grid Size" in col else (),
                           _parse_dims(r[col["Block Size"]]) if "Block Size" in col else None, counts)
        rec.ncu_values = vals  # type: ignore[attr-defined]  # every value ncu gave, derived ones included
        out.append(rec)
    return out


def _ncu_child(spec_path: str) -> None:
    """Subprocess under ncu: rebuild the call, run it once (compile, autotune), then once more with the profiler on."""
    import importlib

    import torch

    spec = torch.load(spec_path, weights_only=False)
    inputs = [x.to(d) if isinstance(x, torch.Tensor) and d else x for x, d in zip(spec["inputs"], spec["devices"],
                                                                                   strict=True)]
    kw = spec["kwargs"]
    if spec["kind"] == "variant":
        from workbench.registry import variant

        fn: Any = variant(spec["op"], spec["name"])
    else:
        fn = importlib.import_module(spec["module"])
        for part in spec["qualname"].split("."):
            fn = getattr(fn, part)
    fn(*inputs, **kw)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn(*inputs, **kw)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
