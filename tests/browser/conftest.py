"""Session fixtures for the browser tests: one JupyterLab server and one headless Chromium for all notebooks.

Missing Chromium is a failure with the fix in the message (``bash scripts/install-chromium.sh``), not a skip:
a suite that quietly skips its browser checks proves nothing. ``WORKBENCH_SKIP_BROWSER=1`` skips them on
purpose. Screenshot paths and per-notebook timings are printed in pytest's terminal summary.
"""

from __future__ import annotations

import os

import pytest
from nbbrowser import NotebookRun, chromium_problem, launch_browser, start_lab

# The fixture notebooks plant faults on purpose: never let nbval (or anything else) collect them as tests.
collect_ignore_glob = ["fixtures/*"]

_RUNS: list[NotebookRun] = []


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``browser`` marker (select with ``-m browser``, leave out with ``-m 'not browser'``)."""
    config.addinivalue_line("markers", "browser: runs notebooks in JupyterLab in headless Chromium")


@pytest.fixture(scope="session")
def _browser_ready() -> None:
    if os.environ.get("WORKBENCH_SKIP_BROWSER") == "1":
        pytest.skip("WORKBENCH_SKIP_BROWSER=1")
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
