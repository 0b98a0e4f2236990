"""Show drills: markdown in a notebook, plain text in a terminal, numbered listings, a countdown, a browser."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Sequence
from typing import Any


def in_notebook() -> bool:
    """Return True inside an IPython kernel (a notebook), False in a terminal or a plain script."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and type(ip).__name__ != "TerminalInteractiveShell"


def markdown_to_text(md: str) -> str:
    """Return ``md`` readable as plain text: no HTML tags, no emphasis markers, code fences kept."""
    text = re.sub(r"<br\s*/?>", "\n", md)
    text = re.sub(r"</?(?:b|i|em|strong|span|div|p|code|table|tr|td|th|ol|ul|li|details|summary)\b[^<>]*>", "", text)
    text = html.unescape(text)
    text = re.sub(r"(?<!\*)\*\*(?!\*)(.+?)\*\*", r"\1", text)
    text = re.sub(r"^#+\s*", "", text, flags=re.M)
    return text


def display_markdown(md: str) -> None:
    """Display ``md`` rendered in a notebook, or print it as plain text elsewhere."""
    if in_notebook():
        from IPython.display import Markdown, display

        display(Markdown(md))
    else:
        print(markdown_to_text(md))


def numbered(lines: Sequence[str], start: int = 1, language: str = "", width: int | None = None) -> str:
    """Return a fenced markdown code block of ``lines`` numbered from ``start`` (numbers right-aligned in ``width``)."""
    width = width or len(str(start + len(lines) - 1))
    body = "\n".join(f"{i:>{width}} | {s}" for i, s in enumerate(lines, start))
    return f"```{language}\n{body}\n```"


def mmss(seconds: float) -> str:
    """Return ``seconds`` as m:ss (negative: -m:ss)."""
    sign = "-" if seconds < 0 else ""
    s = int(round(abs(seconds)))
    return f"{sign}{s // 60}:{s % 60:02d}"


def countdown(total_seconds: float, started_monotonic: float, label: str = "time left") -> Any:
    """Return a countdown widget: a browser-side ticking Play widget driving a bar and a 'm:ss left' label.

    The Play widget ticks in the browser once a second, so the countdown moves without a Python thread; the
    label follows whenever the kernel is idle. The drill's own clock (monotonic, in Python) is what counts.
    Without ipywidgets this returns a plain string.
    """
    elapsed = max(0, int(time.monotonic() - started_monotonic))
    total = max(1, int(round(total_seconds)))
    try:
        import ipywidgets as w
    except ImportError:
        return f"{label}: {mmss(total - elapsed)} of {mmss(total)}"
    play = w.Play(value=min(elapsed, total), min=0, max=total, step=1, interval=1000, description="clock",
                  show_repeat=False, repeat=False, playing=True)
    bar = w.IntProgress(value=min(elapsed, total), min=0, max=total, bar_style="info",
                        layout=w.Layout(width="320px"))
    w.jslink((play, "value"), (bar, "value"))
    text = w.HTML(f"<b>{mmss(total - elapsed)}</b> {label} (of {mmss(total)})")

    def tick(change: dict) -> None:
        left = total - (time.monotonic() - started_monotonic)
        colour = "#cf222e" if left < 0 else "#1a7f37"
        text.value = f"<b style='color:{colour}'>{mmss(left)}</b> {label} (of {mmss(total)})"
        if left <= 0:
            bar.bar_style = "danger"

    play.observe(tick, names="value")
    return w.HBox([play, bar, text])
