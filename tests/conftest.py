"""Shared setup for the workbench tests: decide the mode before anything imports numba or triton.

The suite runs on GPU-less CI in cpu mode (Triton interpreter, Numba CUDA simulator). ``WORKBENCH_MODE`` is set
to ``cpu`` unless the caller chose a mode, and ``workbench`` is imported here, first, so that no test module can
import numba/triton in a state that contradicts the mode.
"""

from __future__ import annotations

import atexit
import functools
import itertools
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
from tests._ops import cuda_engine_ready, pinned_seed  # noqa: E402, F401  (test files import the first from here)

CPU_MODE = workbench.mode() == "cpu"


@pytest.fixture(autouse=True)
def _pinned_draws(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Draw the probe shapes of every unseeded check from the test's name and the call's count, not afresh.

    ``wb.check`` (and the distributed checker) draw a new seed per call; a test that counts on a report's exact
    failures would then pass or fail by the draw. Pinned, a run of the suite is reproducible, and successive calls in
    one test still draw different shapes. ``scripts/sweep-drawn.py`` explores many draws instead.
    """
    from workbench import checker

    real, calls = checker._draw_seed, itertools.count()

    def pinned(seed: int | None) -> int:
        if seed is None:
            seed = pinned_seed(f"{request.node.nodeid}#{next(calls)}")
        return real(seed)

    monkeypatch.setattr(checker, "_draw_seed", pinned)


requires_cpu_mode = pytest.mark.skipif(not CPU_MODE, reason="asserts cpu-mode (emulated) behaviour")


# Test files whose few tests wait on one long fixture or child process (with --durations on the 2-core machine:
# the GPU script's dry run, every profile drill's tables, the exercise checks, the sm_90 inspect children, spawned
# ranks, CLI and mode subprocesses: 10-75 s each). pytest-xdist's --dist loadfile hands out the files with the most
# tests first, which put these last: the run ended on one of them while the other worker sat idle. Workers order
# the files as SCHEDULE_FIRST, then the rest with the most tests first (xdist's own order); a name that no longer
# exists is ignored. Its last files leave their core idle for a third to nine tenths of their time (progress-bar
# delays, Numba-simulator threads handing the GIL to each other, spawned ranks, time limits: 3-12 s each, measured
# per file once the browser test had ended): run early, while `make test` runs the browser test beside them, the
# browser's kernel uses that core.
SCHEDULE_FIRST = (
    "tests/test_gpu_run.py", "tests/test_practice_profile.py", "tests/test_exercises.py",
    "tests/test_attention_triton.py", "tests/test_inspection.py", "tests/test_moe_ep.py", "tests/test_kernel_goals.py",
    "tests/test_mode.py", "tests/test_cli.py", "tests/test_numba_optional.py", "tests/test_toolchain.py",
    "tests/test_moe_fp8.py", "tests/test_moe_triton.py",
    "tests/test_progressbar.py", "tests/test_invariance.py", "notebooks/08-communication.ipynb",
    "tests/test_numba_sanitizer.py", "notebooks/00-workbench-tour.ipynb", "tests/test_timer.py",
)


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]  # the unit of --dist loadfile (xdist's LoadFileScheduling._split_scope)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers, order the files as SCHEDULE_FIRST says (a file's own tests keep their order)."""
    if not hasattr(config, "workerinput"):
        return  # a plain run keeps pytest's order
    first = {f: n for n, f in enumerate(SCHEDULE_FIRST)}
    count: dict[str, int] = {}
    seen: dict[str, int] = {}
    for n, item in enumerate(items):
        f = _file_of(item)
        count[f] = count.get(f, 0) + 1
        seen.setdefault(f, n)
    items.sort(key=lambda i: (first.get(_file_of(i), len(first)), -count[_file_of(i)], seen[_file_of(i)]))


def pytest_configure(config: pytest.Config) -> None:
    """Give the run one folder for reports its xdist workers share (tests/_ops.py), made before they start; keep
    xdist from re-sorting the files by test count (the workers' order is SCHEDULE_FIRST's)."""
    from tests._ops import SHARED_ENV

    if not hasattr(config, "workerinput") and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
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
    """Run a ``wb.inspect`` script in a child Python, and read its last stdout line as JSON.

    Started by the module's first test (``start``, from an autouse module fixture), the child's ~20 s of Triton +
    ptxas work overlaps that module's interpreter tests. Not at import: each pytest-xdist worker imports every test
    module to collect it, so a child started there ran once per worker, and all but one result went unread. The
    child has run nothing under the interpreter (see test_attention_triton.py for why that matters). Without
    ptxas/cuobjdump it is not started and ``result()`` skips, saying what is missing.
    """

    def __init__(self, script: str) -> None:
        from workbench.cuda.errors import ToolchainNotFoundError
        from workbench.inspection import find_cuda_tool

        self.script = script
        self.proc: subprocess.Popen | None = None
        self.missing: str | None = None
        try:
            find_cuda_tool("ptxas")
            find_cuda_tool("cuobjdump")
        except ToolchainNotFoundError as e:
            self.missing = str(e)

    def start(self) -> None:
        """Start the child (once; not without the toolchain)."""
        if self.proc is not None or self.missing:
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=subprocess_env(WORKBENCH_MODE="cpu"))
        proc = self.proc  # tests deselected after the first (-k): do not leave it running past the session
        atexit.register(lambda: proc.poll() is None and proc.kill())

    def result(self) -> dict:
        """Wait for the child (started now if no test started it) and return its JSON (call once, from a
        module-scoped fixture)."""
        self.start()
        if self.proc is None:
            pytest.skip(f"no CUDA toolchain for wb.inspect: {self.missing}")
        out, err = self.proc.communicate(timeout=600)
        assert self.proc.returncode == 0, err[-4000:]
        return json.loads(out.strip().splitlines()[-1])
