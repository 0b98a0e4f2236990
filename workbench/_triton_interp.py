"""Make the Triton interpreter undo its patches of ``triton.language`` after a device-function call.

Triton 3.7's interpreter swaps ``triton.language``'s builtins for interpreter versions while a kernel runs and
restores them afterwards, but a call of a ``@triton.jit`` *helper* (``tl.max``, ``tl.sum``, ``tl.cdiv``: device
functions) patches them again and never restores them. The leaked patches are harmless to later interpreted runs,
but they break ``workbench.inspect``, which compiles Triton kernels for real in the same process: a cpu-mode
notebook that ran a kernel using ``tl.max`` could no longer inspect one. Restoring the helper call's own patch
scope when it returns keeps nesting right (the enclosing kernel's patches are what it restores to).
"""

from __future__ import annotations

from typing import Any

_DONE = False


def install() -> None:
    """Wrap ``InterpretedFunction.__call__`` (device calls) so its patch scope is restored on return (once)."""
    global _DONE
    if _DONE:
        return
    _DONE = True
    try:
        from triton.runtime import interpreter as ti
    except ImportError:  # no triton: nothing to fix
        return
    if not (hasattr(ti, "_patch_lang") and hasattr(ti, "_LangPatchScope")
            and hasattr(ti.InterpretedFunction, "rewrite")):
        return  # another Triton version: leave it alone

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
        scope = ti._patch_lang(self.fn)
        try:
            fn = self.rewrite()
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                raise ti.InterpreterError(repr(e)) from e
        finally:
            scope.restore()

    __call__.__doc__ = "Call the device function under the interpreter, restoring triton.language afterwards."
    ti.InterpretedFunction.__call__ = __call__
