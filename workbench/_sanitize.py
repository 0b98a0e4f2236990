"""One switch for the emulators' sanitizers: while it is on, every emulated launch runs checked.

The checker turns it on around each kernel call, so a learner's kernel is run as compute-sanitizer would run it:
the CPU engine for CUDA C (memcheck, initcheck, racecheck), the Numba simulator and the Triton interpreter each
with the checks they can make. A found bug raises a :class:`workbench.cuda.errors.SanitizerError` subclass
(``MemcheckError``, ``RaceError``, ``UninitializedError``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("workbench_sanitize", default=False)


def active() -> bool:
    """Return whether emulated launches should run checked right now."""
    return _ACTIVE.get()


@contextlib.contextmanager
def switched(flag: contextvars.ContextVar[bool], on: bool) -> Iterator[None]:
    """Set ``flag`` to ``on`` inside the block (for this thread or task only), then put back what it was."""
    token = flag.set(on)
    try:
        yield
    finally:
        flag.reset(token)


def sanitizing(on: bool = True) -> contextlib.AbstractContextManager[None]:
    """Run emulated launches inside the block checked (``on=True``) or unchecked (``on=False``)."""
    return switched(_ACTIVE, on)
