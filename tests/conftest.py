"""Shared setup for the workbench tests: decide the mode before anything imports numba or triton.

The suite runs on GPU-less CI in cpu mode (Triton interpreter, Numba CUDA simulator). ``WORKBENCH_MODE`` is set
to ``cpu`` unless the caller chose a mode, and ``workbench`` is imported here, first, so that no test module can
import numba/triton in a state that contradicts the mode.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("WORKBENCH_MODE", "cpu")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import workbench  # noqa: E402  (must come after WORKBENCH_MODE is decided)
from tests._ops import cuda_engine_ready  # noqa: E402, F401  (test files import it from here)

CPU_MODE = workbench.mode() == "cpu"
requires_cpu_mode = pytest.mark.skipif(not CPU_MODE, reason="asserts cpu-mode (emulated) behaviour")


def pytest_configure(config: pytest.Config) -> None:
    """Give the run one folder for reports its xdist workers share (tests/_ops.py), made before they start."""
    from tests._ops import SHARED_ENV

    if hasattr(config, "workerinput") or os.environ.get(SHARED_ENV):
        return  # a worker (it inherited the controller's folder), or a caller that chose one
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="wb-test-reports-")
    os.environ[SHARED_ENV] = folder
    config.add_cleanup(lambda: (os.environ.pop(SHARED_ENV, None), shutil.rmtree(folder, ignore_errors=True)))


def inline_headers(path: Path, swap: dict[str, str], seen: set[Path] | None = None) -> str:
    """Return ``path``'s source with its local headers inlined (once each), a header named in ``swap`` replaced by
    its text (an emulation of inline PTX the CPU engine cannot run).

    As text, so the CPU engine's cache recognises the source from run to run.
    """
    seen = set() if seen is None else seen
    out = []
    for line in path.read_text().splitlines(keepends=True):
        m = re.match(r'\s*#include "([^"]+)"', line)
        header = (path.parent / m.group(1)).resolve() if m else None
        if header is None:
            out.append(line)
        elif header.name in swap:
            out.append(swap[header.name])
        elif header not in seen:
            seen.add(header)
            out.append(inline_headers(header, swap, seen))
    return "".join(out)


@functools.lru_cache(maxsize=1)
def load_script(rel_path: str):
    """Import a script that is not in a package (``benchmarks/moe_goals.py``) as a module, by its path."""
    import importlib.util

    path = ROOT / rel_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def subprocess_env(**overrides: str | None) -> dict[str, str]:
    """Return a clean environment for a child Python: no mode variables unless given, repo on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("WORKBENCH_MODE", "NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


class InspectChild:
    """Run a ``wb.inspect`` script in a child Python started now, and read its last stdout line as JSON.

    Started when a test module is imported, the child's ~20 s of Triton + ptxas work overlaps that module's
    interpreter tests. The child has run nothing under the interpreter (see test_attention_triton.py for why that
    matters). Without ptxas/cuobjdump it is not started and ``result()`` skips, saying what is missing.
    """

    def __init__(self, script: str) -> None:
        from workbench.cuda.errors import ToolchainNotFoundError
        from workbench.inspection import find_cuda_tool

        self.missing: str | None = None
        try:
            find_cuda_tool("ptxas")
            find_cuda_tool("cuobjdump")
        except ToolchainNotFoundError as e:
            self.missing = str(e)
        self.proc = None if self.missing else subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=subprocess_env(WORKBENCH_MODE="cpu"))
        if self.proc is not None:  # tests deselected (-k): do not leave it running past the session
            atexit.register(lambda: self.proc.poll() is None and self.proc.kill())

    def result(self) -> dict:
        """Wait for the child and return its JSON (call once, from a module-scoped fixture)."""
        if self.proc is None:
            pytest.skip(f"no CUDA toolchain for wb.inspect: {self.missing}")
        out, err = self.proc.communicate(timeout=600)
        assert self.proc.returncode == 0, err[-4000:]
        return json.loads(out.strip().splitlines()[-1])
