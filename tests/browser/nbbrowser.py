"""Drive the project's JupyterLab in headless Chromium and report what a learner would see.

One JupyterLab server (no token, loopback, ``WORKBENCH_MODE=cpu``) and one Chromium per test session;
``run_notebook`` opens one notebook in a fresh page, runs all cells through the menu (Run > Run All Cells),
waits for the kernel, then inspects the page: error outputs, plotly figures, widget placeholders, console
errors. It changes one control (slider, else dropdown) and checks that a figure's data changed, and saves
a full-page screenshot. It returns the list of failures as plain sentences, so the same code judges the
real notebooks and the planted-fault fixtures.

JupyterLab runs with isolated config/data/runtime/settings/workspace dirs (so nothing from the user's own
Jupyter setup leaks in), autosave off (running a notebook never writes its outputs back to the repo) and
windowing off (every cell is in the DOM, so the screenshot and the checks see all of them).

The pages run as on a machine too slow for anywidget (``SLOW_ANYWIDGET_JS``): a plotly ``go.FigureWidget`` whose
module loads in over 2 s drops every later update (anywidget 0.11), which on a busy 2-core machine happened now and
then; here it happens every time, so a notebook that shows one fails its control check at once, not once in a while.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "out" / "browser"
CHROMIUM = Path(os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium"))
# The machine has no outside network: without these, Chromium keeps trying (and logging) refused connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Seconds a notebook may take to run all its cells (cpu emulation is slow); override for slow machines.
RUN_TIMEOUT_S = float(os.environ.get("WORKBENCH_BROWSER_TIMEOUT", "300"))
# Seconds to wait, after the kernel went idle, for plots and widgets to finish rendering.
RENDER_SETTLE_S = 30.0
# After a control changed: seconds the kernel may take to run its callback (it goes busy, then idle again; a
# machine under load is slow), then seconds for the front end to draw the new figure once the kernel is idle.
INTERACT_TIMEOUT_S = 240.0
FIGURE_AFTER_IDLE_S = 90.0
# JupyterLab's default layout (the file browser open beside the notebook) in a 1280 x 800 window: figures are
# ~850 px wide, and must be readable at that width.
VIEWPORT = {"width": 1280, "height": 800}

# Console errors that are not the page's own code failing. Keep this short, and say why for each.
CONSOLE_ALLOW = [
    # The browser asks for /favicon.ico on its own; JupyterLab does not serve one at that path.
    re.compile(r"favicon\.ico"),
    # No outside network here: a request to any non-loopback host fails by construction.
    re.compile(r"net::ERR_(NAME_NOT_RESOLVED|INTERNET_DISCONNECTED|CONNECTION_REFUSED).*https?://(?!127\.0\.0\.1)"),
]

SETTINGS_OVERRIDES = {
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}


def chromium_problem() -> str | None:
    """Return why the browser tests cannot run here (no Chromium, no playwright), or None when they can."""
    if not CHROMIUM.exists():
        return (
            f"{CHROMIUM} not found: the browser tests need Debian's chromium package. Run "
            "`bash scripts/install-chromium.sh` as root (`make test` does), or set WORKBENCH_SKIP_BROWSER=1 "
            "to skip them."
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return (
            "playwright is not installed: run `pip install -e .[browser]` (the Python package; no browser download)."
        )
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read() or b"null")


@dataclass
class LabServer:
    """A running JupyterLab: its base URL, process and log file."""

    url: str
    proc: subprocess.Popen
    log_path: Path
    home: Path

    def log_size(self) -> int:
        """Return the log's current size, to read only what a later step added."""
        return self.log_path.stat().st_size

    def log_since(self, offset: int) -> str:
        """Return the server log (which includes the kernels' stderr) written after ``offset``."""
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")

    def shutdown_sessions(self) -> None:
        """Shut down every kernel session, so the next notebook starts with the CPUs free."""
        for s in _get(f"{self.url}api/sessions") or []:
            req = urllib.request.Request(f"{self.url}api/sessions/{s['id']}", method="DELETE")
            try:
                urllib.request.urlopen(req, timeout=10).close()
            except urllib.error.URLError:
                pass

    def stop(self) -> None:
        """Stop the server (and its kernels) and remove its temporary dirs."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when the test process dies (even by SIGKILL)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass


def start_lab(timeout_s: float = 120.0) -> LabServer:
    """Start the project's JupyterLab on a free loopback port with no token, from this environment.

    ``jupyter`` is the one next to this Python (the project's venv), so the ``python3`` kernel is the venv's.
    Kernels get ``WORKBENCH_MODE=cpu`` unless the caller set another mode.
    """
    home = Path(tempfile.mkdtemp(prefix="kw-lab-"))
    dirs = {name: home / name for name in ("config", "data", "runtime", "app-settings", "user-settings", "ws")}
    for d in dirs.values():
        d.mkdir()
    (dirs["app-settings"] / "overrides.json").write_text(json.dumps(SETTINGS_OVERRIDES, indent=1))
    port = _free_port()
    jupyter = Path(sys.executable).parent / "jupyter"
    cmd = [
        str(jupyter), "lab", "--no-browser", "--allow-root",
        "--ServerApp.token=", "--ServerApp.password=",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={REPO}",
        f"--LabApp.app_settings_dir={dirs['app-settings']}",
        f"--LabApp.user_settings_dir={dirs['user-settings']}",
        f"--LabApp.workspaces_dir={dirs['ws']}",
        "--LabApp.news_url=None",
        "--LabApp.expose_app_in_browser=True",
    ]
    env = dict(
        os.environ,
        WORKBENCH_MODE=os.environ.get("WORKBENCH_MODE", "cpu"),
        # what a learner sees: progress bars (widgets) on slow checks and timings, whatever the test run's setting
        WORKBENCH_PROGRESS="1",
        # drill attempts made while notebook 05 runs go to a throwaway progress store, never the learner's
        WORKBENCH_HOME=str(home / "workbench-home"),
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        PYTHONUNBUFFERED="1",
    )
    log_path = home / "lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    server = LabServer(url=f"http://127.0.0.1:{port}/", proc=proc, log_path=log_path, home=home)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            text = server.log_since(0)
            server.stop()
            raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{text[-3000:]}")
        try:
            _get(f"{server.url}api/status", timeout=2)
            break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                text = server.log_since(0)
                server.stop()
                raise RuntimeError(f"JupyterLab did not answer within {timeout_s:.0f}s:\n{text[-3000:]}") from None
            time.sleep(0.25)
    return server


_SHOW_FILE_BROWSER_JS = """() => {
  const app = window.jupyterapp;
  if (app.shell.leftCollapsed) app.commands.execute('application:toggle-left-area');
  return true;
}"""
# anywidget 0.11 gives each widget model AbortSignal.timeout(2000) to load its module, then drops the messages that
# model receives (plotly's FigureWidget module is 5 MB: 1.4 s to load on an idle 2-core machine). Cut that 2 s to
# 1 ms in every page. Other timeouts are left alone.
SLOW_ANYWIDGET_JS = """(() => {
  const timeout = AbortSignal.timeout.bind(AbortSignal);
  AbortSignal.timeout = (ms) => timeout(ms === 2000 ? 1 : ms);
})();"""

_CONTEXTS: dict[int, Any] = {}
_PAGES: dict[int, Any] = {}  # the page (a booted JupyterLab) the next notebook opens in
_CLOSE_ALL_JS = """() => {
  const app = window.jupyterapp;
  for (const w of Array.from(app.shell.widgets('main'))) {
    if (w.context && w.context.model) w.context.model.dirty = false;
    w.dispose();
  }
}"""


def _context(browser: Any) -> Any:
    """Return the one browser context (tab group) every notebook opens in, so JupyterLab's ~20 MB of scripts
    come from the HTTP cache after the first notebook instead of being fetched and parsed again for each."""
    ctx = _CONTEXTS.get(id(browser))
    if ctx is None:
        ctx = _CONTEXTS[id(browser)] = browser.new_context(viewport=dict(VIEWPORT))
        ctx.add_init_script(SLOW_ANYWIDGET_JS)
    return ctx


def launch_browser(playwright: Any) -> Any:
    """Launch Debian's Chromium through playwright (``executable_path``: no browser download)."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


# ---------------------------------------------------------------------------------------------------------
# in-page inspection

# Returns, for each cell: type, first source line, execution count, prompt text, outputs (type, mime types,
# error name/value, whether it shows a traceback or a widget placeholder), how many plotly figures the
# outputs should draw (plotly mime bundles + FigureWidget models inside each displayed widget tree) and the
# plotly figures that are actually drawn (their trace counts and a signature of their data).
_SNAPSHOT_JS = r"""
async () => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.widgets) return {error: 'no notebook panel is open'};
  const PLOTLY = 'application/vnd.plotly.v1+json', WIDGET = 'application/vnd.jupyter.widget-view+json';
  const findManager = (w) => {
    if (!w) return null;
    if (w._manager && w._manager.promise) return w._manager.promise;
    for (const c of (w.widgets || [])) { const m = findManager(c); if (m) return m; }
    return null;
  };
  const countFigures = async (model, seen, broken) => {
    if (!model || seen.has(model)) return 0;
    seen.add(model);
    if (model.get('_view_name') === 'ErrorWidgetView') broken.push(String(model.get('msg') || 'error widget'));
    if (model.get('_anywidget_id') !== undefined && model.get('_data') !== undefined
        && model.get('_layout') !== undefined) return 1;
    let n = 0;
    for (const key of ['children', 'outputs']) {
      const v = model.get(key);
      if (!Array.isArray(v)) continue;
      for (const c of v) {
        if (c && typeof c.get === 'function') n += await countFigures(c, seen, broken);
        else if (c && c.data && c.data[PLOTLY]) n += 1;
      }
    }
    return n;
  };
  const plotInfo = (el) => {
    const data = Array.isArray(el.data) ? el.data : null;
    let sig = null;
    if (data) sig = JSON.stringify(data.map(t => [t.type, t.name, t.x, t.y, t.visible]));
    return {traces: data ? data.length : null, drawn: !!el.querySelector('.main-svg'), sig};
  };
  const cells = [];
  const ws = panel.content.widgets;
  for (let i = 0; i < ws.length; i++) {
    const cw = ws[i], m = cw.model;
    const src = m.sharedModel.getSource();
    const cell = {index: i, type: m.type, head: src.split('\n').find(l => l.trim()) || '', empty: !src.trim(),
                  count: null, prompt: '', outputs: [], expectedPlots: 0, plots: []};
    if (m.type === 'code') {
      cell.count = m.executionCount;
      const p = cw.node.querySelector('.jp-InputArea-prompt');
      cell.prompt = p ? p.textContent.trim() : '';
      for (let j = 0; j < m.outputs.length; j++) {
        const o = m.outputs.get(j).toJSON();
        const child = cw.outputArea.widgets[j];
        const node = child ? child.node : null;
        const text = node ? node.textContent : '';
        const errorViews = node ? node.querySelectorAll('.jupyter-widgets-error-widget').length : 0;
        const TB = /Traceback \(most recent call last\)/;
        const PLACEHOLDER = /Loading widget\.\.\.|Error (displaying|creating) widget[^\n]*|Javascript Error[^\n]*/;
        const out = {type: o.output_type, errorViews, mimes: Object.keys(o.data || {}),
                     ename: o.ename, evalue: o.evalue, text: text.slice(0, 300),
                     traceback: TB.test(text) || (o.output_type === 'stream' && TB.test(o.text || '')),
                     placeholder: (text.match(PLACEHOLDER) || [null])[0]};
        const d = o.data || {};
        if (d[PLOTLY]) cell.expectedPlots += 1;
        if (d[WIDGET] && d[WIDGET].model_id) {
          const mp = findManager(child);
          if (!mp) out.inspectError = 'could not find the widget manager behind this output';
          else {
            try {
              const manager = await mp;
              const model = await manager.get_model(d[WIDGET].model_id);
              const broken = [];
              cell.expectedPlots += await countFigures(model, new Set(), broken);
              if (broken.length) out.widgetErrors = broken;
            } catch (e) { out.inspectError = 'widget model not found: ' + e; }
          }
        }
        cell.outputs.push(out);
      }
      cell.plots = [...cw.node.querySelectorAll('.jp-Cell-outputArea .js-plotly-plot')].map(plotInfo);
    }
    cells.push(cell);
  }
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {cells, kernelStatus: kernel ? kernel.status : 'none'};
}
"""

_KERNEL_IDLE_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!(k && k.status === 'idle' && w.content && w.content.widgets.length);
}"""

# Done when no cell waits or runs ([*]) and either every non-empty code cell has a count, or a cell has an
# error output (Run All stops there; the cells below keep an empty prompt).
_RUN_DONE_JS = r"""() => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  if (!k || k.status !== 'idle') return false;
  let allCounted = true, errored = false;
  for (const cw of w.content.widgets) {
    if (cw.model.type !== 'code') continue;
    const p = cw.node.querySelector('.jp-InputArea-prompt');
    if (p && p.textContent.includes('*')) return false;
    if (cw.model.sharedModel.getSource().trim() && cw.model.executionCount === null) allCounted = false;
    for (let j = 0; j < cw.model.outputs.length; j++)
      if (cw.model.outputs.get(j).type === 'error') errored = true;
  }
  return allCounted || errored;
}"""


def _cell_name(cell: dict) -> str:
    head = cell["head"].strip()
    if len(head) > 60:
        head = head[:57] + "..."
    return f"cell {cell['index']} ({head!r})" if head else f"cell {cell['index']}"


def judge(snapshot: dict) -> tuple[list[str], bool]:
    """Return (failures, still_rendering) for a page snapshot.

    ``still_rendering`` is True when some failure may go away by waiting (a placeholder still shown, a plot
    not drawn yet); tracebacks and unexecuted cells are final.
    """
    if "error" in snapshot:
        return [f"cannot inspect the notebook: {snapshot['error']}"], True
    failures: list[str] = []
    pending = False
    stopped_at = None
    for cell in snapshot["cells"]:
        if cell["type"] != "code":
            continue
        name = _cell_name(cell)
        for out in cell["outputs"]:
            if out["type"] == "error":
                failures.append(f"{name} raised {out['ename']}: {out['evalue']}")
                stopped_at = stopped_at or name
            elif out["traceback"]:
                failures.append(f"{name} shows a traceback: {out['text'][:200]!r}")
            if out["placeholder"]:
                failures.append(f"{name}: a widget did not render, it shows {out['placeholder']!r}")
                pending = pending or out["placeholder"].startswith("Loading")
            if out["errorViews"] or out.get("widgetErrors"):
                why = "; ".join(out.get("widgetErrors") or ["an error view in place of the widget"])
                failures.append(f"{name}: {out['errorViews']} widget(s) failed to render: {why[:300]}")
            if out.get("inspectError"):
                failures.append(f"{name}: {out['inspectError']}")
                pending = True
        drawn = [p for p in cell["plots"] if p["drawn"] and p["traces"]]
        if len(drawn) < cell["expectedPlots"]:
            failures.append(
                f"{name} displays {cell['expectedPlots']} plotly figure(s) but only {len(drawn)} rendered with data "
                f"(figures on the page: {[(p['traces'], p['drawn']) for p in cell['plots']]} as (traces, drawn))"
            )
            pending = True
        if not cell["empty"] and cell["count"] is None and stopped_at is None:
            failures.append(f"{name} did not run (prompt {cell['prompt']!r})")
    return failures, pending


def _evaluate(page: Any, js: str) -> Any:
    """Evaluate ``js`` in the page, first checking (with a timeout) that its main thread still answers.

    ``page.evaluate`` itself has no timeout: on a page frozen by a huge figure it would wait forever.
    """
    page.wait_for_function("() => true", timeout=15_000)
    return page.evaluate(js)


def _console_failures(messages: list[str]) -> list[str]:
    return [f"browser console error: {m[:300]}" for m in messages if not any(p.search(m) for p in CONSOLE_ALLOW)]


# What a learner can see change in a figure: each trace's data and labels, and the layout's markers/notes.
_FIGURES_JS = r"""() => [...document.querySelectorAll('.jp-Notebook .jp-Cell-outputArea .js-plotly-plot')].map(el => {
  if (!Array.isArray(el.data)) return null;
  const traces = {};
  el.data.forEach((t, i) => {
    for (const k of ['x', 'y', 'z', 'text', 'hovertext', 'customdata', 'visible'])
      if (t[k] !== undefined) traces[`trace ${JSON.stringify(t.name || String(i))}.${k}`] = JSON.stringify(t[k]);
  });
  const lay = el.layout || {};
  for (const k of ['shapes', 'annotations']) if (lay[k]) traces[`layout.${k}`] = JSON.stringify(lay[k]);
  return traces;
})"""


def _figures(page: Any) -> list[dict[str, str] | None]:
    return _evaluate(page, _FIGURES_JS)


def _changes(before: list, after: list) -> list[str]:
    """Return 'figure N: key' for every part of a figure that differs between two ``_figures`` reads."""
    if len(before) != len(after):
        return [f"the number of figures went from {len(before)} to {len(after)}"]
    out = []
    for n, (b, a) in enumerate(zip(before, after, strict=True)):
        if a is None:
            continue
        b = b or {}
        out += [f"figure {n}: {k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return out


# What a learner cannot read in a figure: a text (title, note, label, legend) cut off at the figure's edge, or
# two texts drawn over each other. Boxes come from the rendered SVG: annotation backgrounds, the title, the
# legend's background (its visible, scrollable area) and scatter text labels. Hidden figures are skipped.
_LAYOUT_JS = r"""() => {
  const problems = [];
  const figs = [...document.querySelectorAll('.jp-Notebook .jp-Cell-outputArea .js-plotly-plot')];
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim().slice(0, 70);
  figs.forEach((el, n) => {
    const svg = el.querySelector('.main-svg');
    if (!svg || !el.offsetParent) return;
    const F = svg.getBoundingClientRect();
    if (F.width < 50 || F.height < 50) return;
    const t = el.querySelector('.infolayer .gtitle');
    const head = JSON.stringify(clean(t ? t.textContent : '') || 'untitled');
    const name = `figure ${n} (${head}, ${Math.round(F.width)} px wide)`;
    const boxes = [];
    const add = (node, what) => {
      if (!node) return;
      const r = node.getBoundingClientRect();
      if (r.width < 1 || r.height < 1) return;
      const cut = Math.max(0, F.left - r.left) + Math.max(0, r.right - F.right)
                + Math.max(0, F.top - r.top) + Math.max(0, r.bottom - F.bottom);
      if (cut > 2) problems.push(`${name}: ${what} is cut off at the figure's edge (${Math.round(cut)} px outside)`);
      boxes.push([r, what]);
    };
    if (t) add(t, `the title ${JSON.stringify(clean(t.textContent))}`);
    el.querySelectorAll('.infolayer g.annotation').forEach(g => {
      const text = g.querySelector('.annotation-text-g');
      add(text && (text.querySelector('rect.bg') || text), `the note ${JSON.stringify(clean(g.textContent))}`);
    });
    const legend = el.querySelector('.infolayer g.legend');
    if (legend) add(legend.querySelector('rect.bg') || legend, 'the legend');
    el.querySelectorAll('.scatterlayer .textpoint text')
      .forEach(x => add(x, `the label ${JSON.stringify(clean(x.textContent))}`));
    for (let i = 0; i < boxes.length; i++)
      for (let j = i + 1; j < boxes.length; j++) {
        const [a, wa] = boxes[i], [b, wb] = boxes[j];
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 2 && h > 2) problems.push(`${name}: ${wa} and ${wb} are drawn over each other`);
      }
  });
  return problems;
}"""


def figure_layout_problems(page: Any) -> list[str]:
    """Return, per rendered figure, every text cut off at its edge and every two texts drawn over each other."""
    return _evaluate(page, _LAYOUT_JS)


def _slider_controls(page: Any) -> list[tuple[str, Any]]:
    """Return (description, apply) for the first slider: apply moves it one step and returns the new value."""
    handles = page.locator(".jp-Notebook .jp-Cell-outputArea .widget-slider .noUi-handle")
    if not handles.count():
        return []
    handle = handles.first
    box = handle.locator("xpath=ancestor::*[contains(concat(' ', @class, ' '), ' widget-slider ')][1]")
    readout = box.locator(".widget-readout").first
    label = box.locator(".widget-label").first
    desc = label.inner_text().strip() if label.count() else "?"

    def apply() -> tuple[str, str | None]:
        old = readout.inner_text() if readout.count() else ""
        handle.scroll_into_view_if_needed()
        handle.focus()
        page.keyboard.press("ArrowRight")
        new = readout.inner_text() if readout.count() else ""
        if new == old:  # already at the right end
            page.keyboard.press("ArrowLeft")
            new = readout.inner_text() if readout.count() else ""
        what = f"moved slider {desc!r} from {old!r} to {new!r}"
        return what, (f"{what}: the slider did not move" if new == old else None)

    return [(f"slider {desc!r}", apply)]


def _dropdown_controls(page: Any) -> list[tuple[str, Any]]:
    """Return (description, apply) for the first dropdown: apply picks another option."""
    selects = page.locator(".jp-Notebook .jp-Cell-outputArea .widget-dropdown select")
    if not selects.count():
        return []
    select = selects.first
    box = select.locator("xpath=ancestor::*[contains(concat(' ', @class, ' '), ' widget-dropdown ')][1]")
    label = box.locator(".widget-label").first
    desc = label.inner_text().strip() if label.count() else "?"

    def apply() -> tuple[str, str | None]:
        select.scroll_into_view_if_needed()
        options = select.locator("option").all_inner_texts()
        old = select.evaluate("s => s.options[s.selectedIndex] ? s.options[s.selectedIndex].text : ''")
        others = [o for o in options if o != old]
        if not others:
            return f"dropdown {desc!r}", f"dropdown {desc!r} has a single option; nothing to change"
        select.select_option(label=others[0])
        return f"picked {others[0]!r} instead of {old!r} in dropdown {desc!r}", None

    return [(f"dropdown {desc!r}", apply)]


# Counts the notebook kernel's busy/idle transitions from now on (reset on each call), so that a control's
# effect is awaited by what the kernel does rather than by a fixed time.
_KERNEL_WATCH_JS = """() => {
  const sc = window.jupyterapp.shell.currentWidget.sessionContext;
  window.__kwKernel = {busy: 0, idle: 0};
  if (!sc.__kwWatched) {
    sc.__kwWatched = true;
    sc.statusChanged.connect((_, s) => {
      const log = window.__kwKernel;
      if (log && s === 'busy') log.busy++;
      if (log && s === 'idle') log.idle++;
    });
  }
  return true;
}"""
_KERNEL_STATE_JS = """() => {
  const sc = window.jupyterapp.shell.currentWidget.sessionContext;
  const k = sc.session && sc.session.kernel;
  return {status: k ? k.status : 'none', busy: (window.__kwKernel || {}).busy || 0};
}"""


def _await_figure_change(page: Any, before: list) -> tuple[list[str] | None, str]:
    """Wait until a figure changed, or say why not: the kernel never ran the callback, never finished it within
    ``INTERACT_TIMEOUT_S``, or finished it and no figure changed within ``FIGURE_AFTER_IDLE_S`` after."""
    start, idle_since = time.monotonic(), None
    while True:
        page.wait_for_timeout(250)
        after = _figures(page)
        changed = _changes(before, after)
        if changed and all(f is not None for f in after):
            return changed, ""
        state, now = _evaluate(page, _KERNEL_STATE_JS), time.monotonic()
        if state["busy"] and state["status"] == "idle":  # the callback ran: now the front end must draw
            idle_since = idle_since or now
            if now - idle_since > FIGURE_AFTER_IDLE_S:
                return None, (f"the kernel ran the callback (busy, then idle after {idle_since - start:.0f}s) and "
                              f"no figure changed within {FIGURE_AFTER_IDLE_S:.0f}s after")
            continue
        idle_since = None
        if now - start > INTERACT_TIMEOUT_S:
            if state["busy"]:
                return None, f"the kernel was still {state['status']} after {INTERACT_TIMEOUT_S:.0f}s"
            return None, f"the kernel never went busy within {INTERACT_TIMEOUT_S:.0f}s (it stayed {state['status']})"


def _interact(page: Any) -> tuple[str | None, str | None]:
    """Change the first slider, else the first dropdown, until a figure changes; return (what, failure)."""
    controls = _slider_controls(page) + _dropdown_controls(page)
    if not controls:
        return None, "no slider or dropdown rendered in the outputs, so no control could be changed"
    tried = []
    for _, apply in controls:
        _evaluate(page, _KERNEL_WATCH_JS)
        before = _figures(page)
        what, problem = apply()
        if problem:
            tried.append(problem)
            continue
        changed, why = _await_figure_change(page, before)
        if changed:
            shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
            return f"{what}; changed {shown}", None
        tried.append(f"{what}, but {why}")
    return None, "; ".join(tried)


def _renderer_pids() -> list[int]:
    """Return the pids of Chromium renderer processes started (through playwright) by this process."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        for pid in children.get(todo.pop(), []):
            todo.append(pid)
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"--type=renderer" in f.read():
                        found.append(pid)
            except OSError:
                continue
    return found


class _Watchdog:
    """Kill this process's Chromium renderers if a phase overruns its time.

    A page frozen by its own JavaScript (a figure too big to draw) can block a playwright call for good:
    in-page waits never get to run their timeout. Killing the renderer makes the blocked call fail at once
    (the page "crashed"), so the run ends with a stall failure instead of hanging the suite. The browser
    itself survives, and the next notebook gets a new page.
    """

    def __init__(self) -> None:
        self._timer: threading.Timer | None = None
        self.fired: str | None = None

    def arm(self, phase: str, seconds: float) -> None:
        """Restart the countdown for ``phase``."""
        self.cancel()
        self._timer = threading.Timer(seconds, self._fire, args=(phase, seconds))
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        """Stop the countdown."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self, phase: str, seconds: float) -> None:
        self.fired = f"the page stopped answering while it {phase} (renderer killed after {seconds:.0f}s)"
        for pid in _renderer_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@dataclass
class NotebookRun:
    """What opening and running one notebook in the browser showed."""

    path: str
    failures: list[str] = field(default_factory=list)
    interaction: str | None = None
    screenshot: Path | None = None
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)
    cells: int = 0
    plots: int = 0

    def summary(self) -> str:
        """Return one line for the test output."""
        state = "ok" if not self.failures else f"{len(self.failures)} failure(s)"
        return (
            f"{self.path}: {state}, {self.cells} cells, {self.plots} figure(s) rendered, "
            f"interaction: {self.interaction or 'none'}, {self.seconds:.1f}s {self.stages}, "
            f"screenshot: {self.screenshot}"
        )


def _full_page_screenshot(page: Any, path: Path) -> None:
    """Grow the viewport to the notebook's height (the notebook scrolls inside the page), then screenshot."""
    _evaluate(page, "() => window.jupyterapp.shell.leftCollapsed || "
                    "window.jupyterapp.commands.execute('application:toggle-left-area')")
    page.wait_for_timeout(300)
    extra = _evaluate(
        page,
        """() => {
      const s = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
      const cells = s ? s.querySelectorAll('.jp-Cell') : [];
      if (!cells.length) return 0;
      s.scrollTop = 0;
      return cells[cells.length - 1].getBoundingClientRect().bottom - s.getBoundingClientRect().bottom + 40;
    }"""
    )
    vp = page.viewport_size
    page.set_viewport_size({"width": vp["width"], "height": min(vp["height"] + max(int(extra), 0), 16000)})
    page.wait_for_timeout(800)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(vp)


def _page_for(browser: Any) -> tuple[Any, bool]:
    """Return (page, reused): the page the previous notebook left booted, else a new one."""
    page = _PAGES.pop(id(browser), None)
    if page is not None and not page.is_closed():
        return page, True
    return _context(browser).new_page(), False


def _open_and_run(page: Any, server: LabServer, rel_path: str, reuse: bool, run_timeout_s: float,
                  watchdog: _Watchdog, mark: Any) -> None:
    """Open the notebook (in the booted JupyterLab when ``reuse``), wait for its kernel, then Run All Cells."""
    watchdog.arm("opened the notebook and started its kernel", 150)
    if reuse:  # JupyterLab is already up in this page (booting it costs ~5 s): open the notebook in it
        page.evaluate("(p) => { window.jupyterapp.commands.execute('docmanager:open', {path: p}); return 1; }",
                      rel_path)
    else:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", rel_path).strip("-").lower()
        page.goto(f"{server.url}lab/workspaces/{slug}/tree/{rel_path}?reset", wait_until="domcontentloaded")
    page.wait_for_function(_KERNEL_IDLE_JS, timeout=120_000, polling=250)
    _evaluate(page, _SHOW_FILE_BROWSER_JS)  # JupyterLab's default layout (the screenshot closes it)
    mark("open")
    watchdog.arm("ran all cells", run_timeout_s + 5)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    run_all = page.locator(".lm-Menu-item:visible .lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$"))
    run_all.click(no_wait_after=True)
    page.wait_for_function(_RUN_DONE_JS, timeout=run_timeout_s * 1000, polling=500)
    mark("run")


def _judge_page(page: Any, run: NotebookRun, interact: bool, watchdog: _Watchdog, mark: Any,
                settle_s: float = RENDER_SETTLE_S) -> None:
    """Wait for the outputs to render, judge them and the figures' layout, then move a control and judge again."""
    watchdog.arm("rendered the outputs and reacted to a control",
                 settle_s + 2 * (INTERACT_TIMEOUT_S + FIGURE_AFTER_IDLE_S) + 60)
    deadline = time.monotonic() + settle_s
    while True:
        snap = _evaluate(page, _SNAPSHOT_JS)
        failures, pending = judge(snap)
        if not pending or time.monotonic() > deadline:
            break
        page.wait_for_timeout(500)
    run.failures += failures + figure_layout_problems(page)
    cells = snap.get("cells", [])
    run.cells = len(cells)
    run.plots = sum(1 for c in cells for p in c["plots"] if p["drawn"] and p["traces"])
    mark("render")
    if interact:
        run.interaction, problem = _interact(page)
        if problem:
            run.failures.append(problem)
        later = judge(_evaluate(page, _SNAPSHOT_JS))[0] + figure_layout_problems(page)
        run.failures += [f for f in dict.fromkeys(later) if f not in run.failures]
        mark("interact")


def _stall_failure(page: Any, watchdog: _Watchdog, error: Exception, run_timeout_s: float) -> str:
    """Say how the run stalled: the watchdog's phase, else (the page still answers) the cells still running."""
    from playwright.sync_api import Error as PlaywrightError

    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    where = watchdog.fired or "the page did not answer"
    if not watchdog.fired:
        watchdog.arm("was asked which cells still run", 15)
        try:  # the page still answers: the kernel is the slow one, so name the cells still running
            snap = _evaluate(page, _SNAPSHOT_JS)
            busy = [_cell_name(c) for c in snap.get("cells", []) if "*" in c.get("prompt", "")]
            where = f"still running: {busy or 'no cell marked [*]'}"
        except PlaywrightError:
            where = watchdog.fired or "the page did not answer"
    return (f"the page or the kernel stalled: the notebook did not open, run (limit {run_timeout_s:.0f}s) "
            f"and render in time; {where} ({first})")


def _screenshot(page: Any, run: NotebookRun, stalled: bool, watchdog: _Watchdog) -> None:
    """Save the run's screenshot under out/browser (the visible part only, fast, when the page stalled)."""
    from playwright.sync_api import Error as PlaywrightError

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    run.screenshot = OUT_DIR / (Path(run.path).stem + ".png")
    watchdog.arm("was screenshotted", 60)
    try:
        if stalled:
            page.screenshot(path=str(run.screenshot), timeout=3_000)  # a killed renderer: fail fast
        else:
            _full_page_screenshot(page, run.screenshot)
    except PlaywrightError as e:
        run.screenshot = None
        if not stalled:
            run.failures.append(f"could not take the screenshot: {str(e).splitlines()[0]}")


def _release(browser: Any, page: Any, server: LabServer, stalled: bool) -> None:
    """Close the notebook and its kernel; keep the page for the next notebook unless it stalled."""
    from playwright.sync_api import Error as PlaywrightError

    kept = False
    if not stalled:
        try:  # close the notebook (unsaved outputs are dropped, no dialog) and keep the page for the next one
            _evaluate(page, _CLOSE_ALL_JS)
            kept = True
        except PlaywrightError:
            kept = False
    server.shutdown_sessions()
    if kept:
        page.wait_for_timeout(500)  # let the closed kernel's last messages land before the next notebook
        _PAGES[id(browser)] = page
        return
    try:
        page.close()
    except PlaywrightError:  # its renderer was killed by the watchdog
        pass


def run_notebook(
    browser: Any, server: LabServer, rel_path: str, *, interact: bool = True, run_timeout_s: float = RUN_TIMEOUT_S,
    render_settle_s: float = RENDER_SETTLE_S,
) -> NotebookRun:
    """Open ``rel_path`` (relative to the repo) in JupyterLab, run all cells via the menu, judge the result.

    The first notebook boots JupyterLab in a new page; later ones open in that page (``docmanager:open``) once the
    previous notebook is closed, unless a stall killed the page. Each runs in JupyterLab's default layout
    (``VIEWPORT``, the file browser open), where its figures must be readable.

    ``run_timeout_s`` bounds opening plus running all cells; past it (a frozen page, a hung kernel) the run
    fails as stalled. ``render_settle_s`` bounds the wait for outputs to render once the kernel is idle (a planted
    figure that never renders waits all of it).
    """
    from playwright.sync_api import Error as PlaywrightError

    t0 = time.monotonic()
    run = NotebookRun(path=rel_path)
    nb_file = REPO / rel_path
    digest = hashlib.sha256(nb_file.read_bytes()).hexdigest()
    log_offset = server.log_size()
    console: list[str] = []
    page, reuse = _page_for(browser)

    def on_console(m: Any) -> None:
        if m.type == "error":
            console.append(f"{m.text} [{m.location.get('url', '')}]")

    def on_error(e: Any) -> None:
        console.append(f"uncaught {e}")

    page.on("console", on_console)
    page.on("pageerror", on_error)
    stage = [t0]

    def mark(name: str) -> None:
        now = time.monotonic()
        run.stages[name] = round(now - stage[0], 1)
        stage[0] = now

    stalled = False
    watchdog = _Watchdog()
    try:
        try:
            _open_and_run(page, server, rel_path, reuse, run_timeout_s, watchdog, mark)
            _judge_page(page, run, interact, watchdog, mark, render_settle_s)
        except PlaywrightError as e:
            stalled = True
            run.failures.append(_stall_failure(page, watchdog, e, run_timeout_s))
        _screenshot(page, run, stalled, watchdog)
        mark("screenshot")
    finally:
        watchdog.cancel()
        # The run is judged: stop listening before teardown, whose widget traffic to a closing kernel ("Could not
        # send widget sync message") is the test's doing, not something a learner sees.
        page.remove_listener("console", on_console)
        page.remove_listener("pageerror", on_error)
        _release(browser, page, server, stalled)
    run.failures += _console_failures(console)
    kernel_log = server.log_since(log_offset)
    if "Traceback (most recent call last)" in kernel_log:
        tb = kernel_log[kernel_log.index("Traceback (most recent call last)"):]
        run.failures.append(f"the server or kernel logged a traceback (e.g. in a widget callback): {tb[:600]}")
    if hashlib.sha256(nb_file.read_bytes()).hexdigest() != digest:
        run.failures.append(f"{rel_path} changed on disk while the test ran (autosave should be off)")
    run.seconds = time.monotonic() - t0
    return run
