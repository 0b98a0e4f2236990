"""Session fixtures for the browser tests: one JupyterLab server and one headless Chromium for all notebooks.

Without Chromium:

- as root (CI), the tests fail with the fix in the message: ``make test`` installs Debian's chromium first
  (``scripts/install-chromium.sh``), and a CI run that quietly skipped its browser checks would prove nothing;
- as a normal user, who cannot install it, they are skipped, with one loud line saying how to enable them.

``WORKBENCH_SKIP_BROWSER=1`` skips them on purpose; ``WORKBENCH_CHROMIUM`` points at another Chromium binary.
Screenshot paths and per-notebook timings are printed in pytest's terminal summary.
"""

from __future__ import annotations

import os

import pytest
from nbbrowser import CHROMIUM, NotebookRun, chromium_problem, launch_browser, start_lab

# The fixture notebooks plant faults on purpose: never let nbval (or anything else) collect them as tests.
collect_ignore_glob = ["fixtures/*"]

_RUNS: list[NotebookRun] = []


def skip_reason() -> str | None:
    """Return why the browser tests are skipped here (on purpose, or no Chromium for a non-root user), else None."""
    if os.environ.get("WORKBENCH_SKIP_BROWSER") == "1":
        return "WORKBENCH_SKIP_BROWSER=1"
    if not CHROMIUM.exists() and os.geteuid() != 0:
        return (
            f"BROWSER TESTS SKIPPED: {CHROMIUM} not found (needs Debian's chromium). To enable them: "
            "`sudo bash scripts/install-chromium.sh`, or WORKBENCH_CHROMIUM=/path/to/chromium"
        )
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``browser`` marker (select with ``-m browser``, leave out with ``-m 'not browser'``)."""
    config.addinivalue_line("markers", "browser: runs notebooks in JupyterLab in headless Chromium")


@pytest.fixture(scope="session", autouse=True)
def _browser_gate() -> None:
    """Skip every browser test, before any server or browser starts, when :func:`skip_reason` says so."""
    why = skip_reason()
    if why:
        pytest.skip(why)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ARG001
    """Report every skip of :func:`_browser_gate` at the gate itself, so pytest's summary gives it one line."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and report.longrepr[2].endswith(skip_reason() or "\0"):
        report.longrepr = (__file__, skip_reason.__code__.co_firstlineno, report.longrepr[2])
    return report


@pytest.fixture(scope="session")
def _browser_ready(_browser_gate: None) -> None:
    problem = chromium_problem()
    if problem:
        pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="session")
def lab_server(_browser_ready: None):
    """Yield the project's JupyterLab, started on a free loopback port with no token; stop it at the end."""
    server = start_lab()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser(_browser_ready: None):
    """Yield one headless Debian Chromium driven by playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_browser(p)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def record_run():
    """Return a function that keeps a NotebookRun for the terminal summary."""
    return _RUNS.append


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    """Print one line per notebook run: result, timings, interaction and screenshot path."""
    if not _RUNS:
        return
    terminalreporter.section("browser: notebooks as a learner sees them")
    for run in _RUNS:
        terminalreporter.write_line(run.summary())
