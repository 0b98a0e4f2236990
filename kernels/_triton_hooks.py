"""Given Triton kernels that call a learner's ``@triton.jit`` helpers by name, so a starter holds only those helpers.

An exercise's kernel (loads, loops, stores: the given part) lives in the op's ``ex_common.py`` and calls the helper
the learner writes by a global name (``dkdv_step(...)``). :func:`with_helpers` returns that kernel with the names
bound to the learner's functions: the same code, the same source file (tracebacks and ``wb.inspect`` name it), its
globals plus the helpers. Triton resolves a kernel's callees through its globals both when it compiles (the GPU,
and the sm_90 gate in cpu mode) and under the interpreter, so one binding serves every mode.
"""

from __future__ import annotations

import types
from typing import Any

import triton
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

_BOUND: dict[tuple, tuple[tuple, Any]] = {}  # (kernel id, (name, helper id)...) -> (helpers kept alive, kernel)


def _require_jit(caller: str, name: str, helper: Any) -> None:
    if not isinstance(helper, (JITFunction, InterpretedFunction)):
        what = "a plain Python function" if callable(helper) else f"{type(helper).__name__} {helper!r}"
        raise TypeError(f"{caller}: {name} must be a @triton.jit function (the kernel calls it on the GPU), got "
                        f"{what}; put @triton.jit on the line above `def {name}`")


def with_helpers(kernel: Any, caller: str = "with_helpers", **helpers: Any) -> Any:
    """Return ``kernel`` (a ``@triton.jit`` function) with the helpers it calls by these names bound to ``helpers``.

    Each name must be a global the kernel's code calls, and each helper a ``@triton.jit`` function; otherwise a
    TypeError names ``caller`` and what was expected. Bindings are cached while the helpers live, so a launch per
    call compiles once per helper, as the kernel itself would.
    """
    fn = getattr(kernel, "fn", None)
    if not isinstance(kernel, (JITFunction, InterpretedFunction)) or fn is None:
        raise TypeError(f"{caller}: expected a @triton.jit kernel, got {kernel!r}")
    for name, helper in helpers.items():
        if name not in fn.__code__.co_names:
            raise TypeError(f"{caller}: kernel {fn.__name__} calls no helper named {name!r}")
        _require_jit(caller, name, helper)
    key = (id(kernel), tuple(sorted((n, id(h)) for n, h in helpers.items())))
    hit = _BOUND.get(key)
    if hit is not None:
        return hit[1]
    namespace = dict(fn.__globals__)
    namespace.update(helpers)
    bound = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    bound.__qualname__, bound.__module__, bound.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
    bound.__annotations__ = dict(fn.__annotations__)  # the tl.constexpr parameters
    bound.__kwdefaults__ = fn.__kwdefaults__
    out = triton.jit(bound)
    _BOUND[key] = ((kernel, *helpers.values()), out)
    return out
