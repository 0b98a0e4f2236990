"""CPU stand-in for ``cupy.ElementwiseKernel``: generate the CUDA C kernel cupy would, run it on the CPU engine.

Semantics follow cupy's documentation: non-raw arrays (inputs and given outputs) broadcast together; a ``raw``
parameter is a whole array indexed by hand (``y[_ind.size() - i - 1]``); ``i`` is the loop index and
``_ind.size()`` the loop size; type placeholders bind from outputs, then inputs; scalars are converted to their
parameter's type; omitted outputs are allocated with the broadcast shape. Arrays are numpy arrays here (cupy's
stand-in); the learner's C++ snippet is compiled for real, and a compile error names its line.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from workbench.cupy import _arrays, _types
from workbench.cupy._compile import CodeBuilder, compile_generated
from workbench.cupy._types import KernelTypeError, Param

_NAME = re.compile(r"^[A-Za-z_]\w*$")


def check_name(kind: str, name: Any) -> str:
    """Return ``name`` if it is a valid kernel (C identifier) name, else raise ValueError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{kind}: invalid kernel name {name!r}: it must be a C identifier such as 'my_kernel'")
    return name


def snippet(who: str, what: str, text: Any) -> str:
    """Return a code snippet argument, or raise TypeError naming it when it is not a string."""
    if not isinstance(text, str):
        raise TypeError(f"{who}: {what} must be a string of CUDA C++ code, got {type(text).__name__}")
    return text


def split_args(who: str, params: tuple[Param, ...], args: tuple, outputs: bool) -> list[Any]:
    """Check each argument is an array (or, for inputs, a scalar); raise TypeError naming the parameter."""
    out = []
    for p, a in zip(params, args, strict=True):
        if isinstance(a, np.ndarray):
            if outputs and not a.flags.writeable:
                raise ValueError(f"{who}: output {p.name!r} is a read-only array; pass a writable array")
            out.append(a)
        elif not outputs and _types.is_scalar(a):
            out.append(a)
        else:
            want = "an array" if outputs else "an array or a scalar"
            raise KernelTypeError(f"{who}: {'output' if outputs else 'input'} parameter {p.name!r} takes {want} "
                                  f"(numpy arrays stand in for cupy arrays in cpu mode), got {_types.describe(a)}")
    return out


class GeneratedKernel:
    """What ElementwiseKernel and ReductionKernel share: parameters, the argument count, the generated code kept.

    A subclass names its ``_kind`` (the cupy class it stands in for) and calls :meth:`_declare` first.
    """

    _kind = "GeneratedKernel"
    _generated_for = "the argument types of that call"  # what one generated kernel is specialised on
    _raw_outputs_need = "their size is undecided; pass the output arrays"
    _out_shape_is = "the broadcast shape of the arguments is"

    def _declare(self, name: Any, in_params: str, out_params: str, options: tuple[str, ...]) -> str:
        """Parse the name and parameters; return the ``who`` that starts every error message."""
        self.name = self.__name__ = check_name(self._kind, name)
        who = self._who = f"{self._kind} {name!r}"
        self.in_params = _types.parse_params(in_params, True, who, "in_params")
        self.out_params = _types.parse_params(out_params, False, who, "out_params")
        clash = {p.name for p in self.in_params} & {p.name for p in self.out_params}
        if clash:
            raise ValueError(f"{who}: {sorted(clash)} named in both in_params and out_params")
        self.nin, self.nout = len(self.in_params), len(self.out_params)
        self.nargs = self.nin + self.nout
        self.options = tuple(options)
        self._cached_codes: dict[tuple, str] = {}
        return who

    def _check_count(self, args: tuple) -> None:
        if len(args) not in (self.nin, self.nargs):
            raise TypeError(f"Wrong number of arguments for {self.name!r}: it takes {self.nin} inputs "
                            f"({', '.join(p.name for p in self.in_params)}) or {self.nargs} with the outputs "
                            f"({', '.join(p.name for p in self.out_params)}), got {len(args)}")

    def _outputs(self, outs: list, out_types: list, shape: tuple[int, ...], sized: bool = False) -> list[np.ndarray]:
        """Allocate the outputs (none given) or check the given ones' shapes against ``shape``."""
        if not outs:
            raw = [p.name for p in self.out_params if p.raw]
            if raw and not sized:
                raise ValueError(f"{self._who}: cannot allocate raw output(s) {raw}: {self._raw_outputs_need}")
            return [np.empty(shape, t) for t in out_types]
        for p, a in zip(self.out_params, outs, strict=True):
            if not p.raw and a.shape != shape:
                raise ValueError(f"{self._who}: output {p.name!r} has shape {a.shape}, but {self._out_shape_is} "
                                 f"{shape}")
        return outs

    def _param_decls(self, args: list) -> list[str]:
        """Return the kernel's C parameter of each argument: a CArray for an array (``_raw_x`` unless raw), else
        the scalar."""
        decls = []
        for p, a in zip(self.in_params + self.out_params, args, strict=True):
            const = "const " if p.is_const else ""
            if isinstance(a, np.ndarray):
                var = p.name if p.raw else f"_raw_{p.name}"
                decls.append(f"{const}{_arrays.carray_ctype(_types.c_name(a.dtype, self._who), a)} {var}")
            else:
                decls.append(f"{const}{_types.c_name(a.dtype, self._who)} {p.name}")
        return decls

    # ------------------------------------------------------------------------------------------------ reading
    @property
    def cached_codes(self) -> dict[tuple, str]:
        """Return the generated kernels so far, keyed by the dtypes of the array arguments."""
        return dict(self._cached_codes)

    @property
    def cached_code(self) -> str:
        """Return the (first) generated kernel; call the kernel once first."""
        if not self._cached_codes:
            raise RuntimeError(f"{self._who}: no code generated yet: the kernel is generated and compiled at its "
                               f"first call, for {self._generated_for}")
        return next(iter(self._cached_codes.values()))

    def __repr__(self) -> str:
        return (f"<workbench.cupy.{self._kind} {self.name!r} ({', '.join(map(str, self.in_params))}) -> "
                f"({', '.join(map(str, self.out_params))}), CPU stand-in>")


class ElementwiseKernel(GeneratedKernel):
    """User-defined elementwise kernel, with ``cupy.ElementwiseKernel``'s signature and semantics (CPU stand-in).

    ``in_params``/``out_params``: ``"T x, raw float32 y"``; ``operation``: the C++ loop body, run once per
    element ``i`` of the broadcast shape; ``name``: the kernel's name; ``preamble`` is inserted above the kernel,
    ``loop_prep``/``after_loop`` above and below the loop. Call with the inputs (and optionally all outputs);
    ``size=`` sets the loop size when every array is ``raw``; ``block_size`` (default 128) threads per block.
    """

    _kind = "ElementwiseKernel"

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel",
                 reduce_dims: bool = True, preamble: str = "", no_return: bool = False, return_tuple: bool = False,
                 loop_prep: str = "", after_loop: str = "", options: tuple[str, ...] = ()) -> None:
        who = self._declare(name, in_params, out_params, options)
        self.operation = snippet(who, "operation", operation)
        self.preamble = snippet(who, "preamble", preamble)
        self.loop_prep = snippet(who, "loop_prep", loop_prep)
        self.after_loop = snippet(who, "after_loop", after_loop)
        self.reduce_dims = bool(reduce_dims)
        self.no_return, self.return_tuple = bool(no_return), bool(return_tuple)

    # ------------------------------------------------------------------------------------------------ calling
    def __call__(self, *args: Any, size: int | None = None, block_size: int = 128, stream: Any = None) -> Any:
        """Run the kernel over the broadcast shape of the non-raw arrays (or ``size`` when all are raw)."""
        who = self._who
        self._check_count(args)
        if not isinstance(block_size, (int, np.integer)) or block_size <= 0:
            raise ValueError(f"{who}: block_size must be a positive int, got {block_size!r}")
        ins = split_args(who, self.in_params, args[:self.nin], outputs=False)
        outs = split_args(who, self.out_params, args[self.nin:], outputs=True) if len(args) == self.nargs else []
        shape = self._loop_shape(ins, outs, size)
        in_types, out_types, tmap = _types.decide_types(
            who, self.in_params, self.out_params,
            [a.dtype if isinstance(a, np.ndarray) else None for a in ins], [a.dtype for a in outs] if outs else None)
        outs = self._outputs(outs, out_types, shape, size is not None)
        ret = None if self.no_return else (outs[0] if self.nout == 1 and not self.return_tuple else tuple(outs))
        if math.prod(shape) == 0:
            return ret
        ins = [_types.to_scalar(who, p, a, t) if not isinstance(a, np.ndarray) else a
               for p, a, t in zip(self.in_params, ins, in_types, strict=True)]
        self._launch(ins, outs, shape, tmap, int(block_size))
        return ret

    def _loop_shape(self, ins: list, outs: list, size: int | None) -> tuple[int, ...]:
        named = [(p.name, a) for p, a in zip(self.in_params + self.out_params, ins + outs, strict=False)
                 if not p.raw and isinstance(a, np.ndarray)]
        if size is not None:
            if named:
                raise ValueError(f"{self._who}: size= can be given only when every array argument is raw; "
                                 f"{[n for n, _ in named]} are not")
            if not isinstance(size, (int, np.integer)) or size < 0:
                raise ValueError(f"{self._who}: size must be a non-negative int, got {size!r}")
            return (int(size),)
        if not named:
            raise ValueError(f"{self._who}: the loop size is undecided: every array argument is raw (or there are "
                             "none); pass size=N")
        return _arrays.broadcast_shape(self._who, named)

    def _launch(self, ins: list, outs: list[np.ndarray], shape: tuple[int, ...], tmap: dict,
                block_size: int) -> None:
        params = self.in_params + self.out_params
        args = ins + outs
        idx = [k for k, (p, a) in enumerate(zip(params, args, strict=True))
               if not p.raw and isinstance(a, np.ndarray)]
        views = [np.broadcast_to(args[k], shape) if k < self.nin else args[k] for k in idx]
        if self.reduce_dims:
            views, shape = _arrays.reduce_dims(views, shape)
        for k, v in zip(idx, views, strict=True):
            args[k] = v
        b = self._generate(args, tmap, len(shape))
        self._cached_codes.setdefault(tuple(a.dtype for a in args if isinstance(a, np.ndarray)), b.code)
        kernel = compile_generated(self._who, b, self.name, self.options)
        n = math.prod(shape)
        block = min(block_size, n)
        report = _arrays.BoundsReport(self._who, [p.name for p in params], args)
        packed = [_arrays.pack_carray(a, report, k) if isinstance(a, np.ndarray) else _arrays.pack_scalar(a)
                  for k, a in enumerate(args)]
        kernel(((n + block - 1) // block,), (block,), (*packed, _arrays.pack_indexer(shape)))
        report.raise_if_found()

    # ------------------------------------------------------------------------------------------------ codegen
    def _generate(self, args: list, tmap: dict, ndim: int) -> CodeBuilder:
        """Return the generated kernel for these arguments (cupy's layout: typedefs, preamble, kernel, loop)."""
        who = self._who
        params = self.in_params + self.out_params
        b = CodeBuilder()
        b.add("".join(f"typedef {_types.c_name(t, who)} {k};\n" for k, t in tmap.items()))
        if self.preamble:
            b.add_snippet("preamble", self.preamble)
        decls = [*self._param_decls(args), f"CIndexer<{ndim}, 1> _ind"]
        b.add(f'extern "C" __global__ void {self.name}({", ".join(decls)}) {{')
        b.add_snippet("loop_prep", self.loop_prep, "  {};")
        b.add("  #pragma unroll 1\n  CUPY_FOR(i, _ind.size()) {\n    _ind.set(i);")
        for p, a in zip(params, args, strict=True):
            if isinstance(a, np.ndarray) and not p.raw:
                b.add(f"    {'const ' if p.is_const else ''}{p.ctype} &{p.name} = _raw_{p.name}[_ind.get()];")
        b.add_snippet("operation", self.operation, "    {};")
        b.add("  }")
        b.add_snippet("after_loop", self.after_loop, "  {};")
        b.add("}")
        return b

