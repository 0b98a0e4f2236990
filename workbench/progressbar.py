"""Progress bars for work a learner waits on: checks, benchmarks, sweeps.

``tqdm.auto`` draws a widget bar in a notebook and a text bar in a terminal, with the cases done out of the
total, the case running now, the elapsed time and an ETA. Bars show only where someone watches:

- ``progress=True`` / ``False`` (the option of :func:`workbench.check`, :func:`workbench.bench`, ...) decides;
- else ``WORKBENCH_PROGRESS=1`` / ``0`` decides;
- else they are off under pytest (unit tests and nbval, whose kernels inherit ``PYTEST_CURRENT_TEST``), and on
  in a notebook kernel or when stderr is a terminal (off in logs and pipes).

A bar appears only once its work has lasted ``DELAY_S`` (quick checks stay silent). In a terminal a library
bar vanishes when its work is done (``leave=False``): the result printed next is what stays; in a notebook the
finished bar stays, with the time the work took.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "WORKBENCH_PROGRESS"
DELAY_S = 0.5  # work shorter than this never shows a bar
_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def _in_notebook() -> bool:
    """Return True inside a Jupyter kernel (where tqdm.auto draws a widget)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def enabled(progress: bool | None = None) -> bool:
    """Return whether to draw progress bars, given the caller's ``progress`` option (None: decide here)."""
    if progress is not None:
        return bool(progress)
    env = os.environ.get(ENV, "").strip().lower()
    if env in _OFF:
        return False
    if env in _ON:
        return True
    if env:
        raise ValueError(f"{ENV}={os.environ[ENV]!r}: expected 1 (show progress bars) or 0 (hide them)")
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    if _in_notebook():
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


class Bar:
    """One progress bar: ``tqdm.auto`` underneath, shown only once its work has lasted ``DELAY_S``.

    Quick work never draws a bar (no flashing bars, no widget in the notebook); slow work shows one within
    ``DELAY_S`` even while its first step still runs, with that step's name. Silent when progress is off.
    """

    def __init__(self, total: int | None, desc: str, *, progress: bool | None = None, unit: str = "case",
                 leave: bool = False) -> None:
        self._lock = threading.Lock()
        self._shown = False
        self._timer: threading.Timer | None = None
        tqdm = _tqdm()
        self.disable = tqdm is None or not enabled(progress)
        if self.disable:
            self._t = None
            return
        # In a notebook a finished bar stays (green, with its time): closing a widget while JupyterLab may still be
        # drawing it raises errors in the page.
        self._t = tqdm(total=total, desc=desc, unit=unit, leave=leave or _in_notebook(), delay=DELAY_S,
                       dynamic_ncols=True, file=sys.stderr)
        # The timer's thread shows the bar in this context: in a notebook, the running cell (ipykernel keeps the
        # cell an output belongs to in context variables; without them the widget would go nowhere).
        self._timer = threading.Timer(DELAY_S, contextvars.copy_context().run, args=(self._show,))
        self._timer.daemon = True
        self._timer.start()

    def _show(self) -> None:
        with self._lock:
            if self._t is not None and not self._t.disable:
                self._shown = True
                self._t.refresh()

    def running(self, label: str) -> None:
        """Name the step about to run (on the bar at once if it is shown, else when it appears)."""
        with self._lock:
            if self._t is not None and not self._t.disable:
                self._t.set_postfix_str(label, refresh=self._shown)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps done."""
        with self._lock:
            if self._t is not None and not self._t.disable:
                self._t.update(n)
                self._shown = self._shown or self._t.format_dict["elapsed"] >= DELAY_S

    def close(self) -> None:
        """End the bar: in a terminal a library bar vanishes (``leave=False``); one left short of its total stays."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self._t is not None:
                self._t.close()

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(total: int | None, desc: str, *, progress: bool | None = None, unit: str = "case",
        leave: bool = False) -> Bar:
    """Return a :class:`Bar` over ``total`` steps labelled ``desc`` (a silent one when progress is off).

    Use it as a context manager; ``update()`` after each step, ``running(label)`` to name the one starting.
    """
    return Bar(total, desc, progress=progress, unit=unit, leave=leave)


def track(items: Iterable[T], desc: str, *, describe: Callable[[T], str] | None = None,
          progress: bool | None = None, unit: str = "case", leave: bool = False) -> Iterator[T]:
    """Yield ``items`` while a bar shows how many are done, which one runs (``describe(item)``) and the ETA."""
    items = list(items)
    with bar(len(items), desc, progress=progress, unit=unit, leave=leave) as b:
        yield from steps(b, items, describe)


def steps(b: Bar, items: Iterable[T], describe: Callable[[T], str] | None = None) -> Iterator[T]:
    """Yield ``items`` as steps of the shared bar ``b``: name each before it runs, count it once its body ends."""
    for item in items:
        if describe is not None and not b.disable:
            b.running(describe(item))
        yield item
        b.update()


def counted(fn: Callable[..., T], b: Bar, describe: Callable[[int], str] | None = None) -> Callable[..., T]:
    """Return ``fn`` wrapped so that bar ``b`` advances after each call (and names call ``k`` before it runs)."""
    calls = [0]

    def wrapped(*args: Any, **kw: Any) -> T:
        if describe is not None and not b.disable:
            b.running(describe(calls[0]))
        out = fn(*args, **kw)
        calls[0] += 1
        b.update()
        return out

    return wrapped


def write(line: str) -> None:
    """Print ``line`` to stdout now, above any bar in the terminal (``tqdm.write``), so bars are not torn."""
    tqdm = _tqdm()
    if tqdm is None:
        print(line, flush=True)
        return
    tqdm.write(line, file=sys.stdout)
    sys.stdout.flush()


def _tqdm() -> Any:
    """Return ``tqdm.auto.tqdm``, or None where tqdm is missing (a bare GPU box): work then runs without bars."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm
