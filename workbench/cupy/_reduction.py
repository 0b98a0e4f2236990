"""CPU stand-in for ``cupy.ReductionKernel``: generate the CUDA C reduction cupy would, run it on the CPU engine.

The learner writes four snippets: ``map_expr`` (what each element contributes, from the inputs), ``reduce_expr``
(how two partial results ``a`` and ``b`` combine), ``post_map_expr`` (what to store, from the reduced ``a``) and
``identity`` (the start value). The generated kernel is cupy's: the reduced axes are moved to the front, each block
reduces ``_block_stride`` outputs with ``block_size`` threads (a strided loop, then a shared-memory tree), and
``_in_ind``/``_out_ind`` index the inputs and outputs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from workbench.cupy import _arrays, _types
from workbench.cupy._compile import CodeBuilder, compile_generated
from workbench.cupy._elementwise import GeneratedKernel, snippet, split_args

BLOCK_SIZE = 512  # cupy's default threads per block for a reduction (256 on ROCm)


def normalize_axis(who: str, axis: Any, ndim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Return (reduced axes sorted, kept axes) for ``axis`` (None: all), or raise naming the bad axis."""
    if axis is None:
        return tuple(range(ndim)), ()
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    norm = []
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool):
            raise TypeError(f"{who}: axis must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= ax < ndim:
            raise np.exceptions.AxisError(f"{who}: axis {ax} is out of bounds for the broadcast inputs of "
                                          f"dimension {ndim}")
        norm.append(int(ax) % ndim)
    if len(set(norm)) != len(norm):
        raise ValueError(f"{who}: duplicate value in axis={axis!r}")
    reduce_axis = tuple(sorted(norm))
    return reduce_axis, tuple(d for d in range(ndim) if d not in reduce_axis)


def block_specs(in_size: int, out_size: int, contiguous_size: int, block_size: int = BLOCK_SIZE
                ) -> tuple[int, int, int]:
    """Return (block_size, block_stride, blocks) as cupy picks them: a block serves ``block_stride`` outputs (a power
    of two), more of them when each output reduces few elements or when outputs are contiguous in memory."""
    per_output = max(1, in_size // max(out_size, 1))
    stride = max(min(contiguous_size, 32), block_size // per_output)
    stride = 1 << (stride.bit_length() - 1)  # the largest power of two <= stride
    return block_size, stride, (out_size + stride - 1) // stride


def contiguous_size(arrays: list[np.ndarray], out_shape: tuple[int, ...]) -> int:
    """Return how many consecutive outputs the inputs hold contiguously in their trailing (kept) axes."""
    best = 1
    for a in arrays:
        run = 1
        for j in range(1, len(out_shape) + 1):
            if j > a.ndim or a.strides[a.ndim - j] != run * a.itemsize:
                break
            run *= out_shape[len(out_shape) - j]
        best = max(best, run)
    return best


class ReductionKernel(GeneratedKernel):
    """User-defined reduction kernel, with ``cupy.ReductionKernel``'s signature and semantics (CPU stand-in).

    ``map_expr`` maps the inputs of one element to a value of ``reduce_type`` (default: the first output's type),
    ``reduce_expr`` combines two such values ``a`` and ``b``, ``post_map_expr`` writes the result ``a`` to the
    outputs, ``identity`` starts the reduction ('' means none: empty reductions then raise). Call with the inputs
    (and optionally the outputs), ``axis=`` (None: all axes) and ``keepdims=``; returns the first output.
    """

    _kind = "ReductionKernel"
    _generated_for = "the argument types and axes of that call"
    _raw_outputs_need = "pass the output arrays"
    _out_shape_is = "the reduction of the inputs gives shape"

    def __init__(self, in_params: str, out_params: str, map_expr: str, reduce_expr: str, post_map_expr: str,
                 identity: str | None, name: str = "reduce_kernel", reduce_type: str | None = None,
                 reduce_dims: bool = True, preamble: str = "", options: tuple[str, ...] = ()) -> None:
        who = self._declare(name, in_params, out_params, options)
        if not self.in_params or not self.out_params:
            raise ValueError(f"{who}: a reduction needs at least one input and one output parameter")
        self.map_expr = snippet(who, "map_expr", map_expr)
        self.reduce_expr = snippet(who, "reduce_expr", reduce_expr)
        self.post_map_expr = snippet(who, "post_map_expr", post_map_expr)
        self.identity = "" if identity is None else snippet(who, "identity", str(identity))
        self.reduce_type = self.out_params[0].ctype if reduce_type is None else snippet(who, "reduce_type",
                                                                                         reduce_type)
        self.preamble = snippet(who, "preamble", preamble)
        self.reduce_dims = bool(reduce_dims)

    # ------------------------------------------------------------------------------------------------ calling
    def __call__(self, *args: Any, out: np.ndarray | None = None, axis: Any = None, keepdims: bool = False,
                 stream: Any = None) -> np.ndarray:
        """Reduce the broadcast inputs over ``axis`` and return the first output."""
        who = self._who
        self._check_count(args)
        out_args = list(args[self.nin:])
        if out is not None:
            if self.nout != 1 or out_args:
                raise ValueError(f"{who}: out= is for a kernel with one output given no positional output")
            out_args = [out]
        ins = split_args(who, self.in_params, args[:self.nin], outputs=False)
        outs = split_args(who, self.out_params, tuple(out_args), outputs=True) if out_args else []
        named = [(p.name, a) for p, a in zip(self.in_params, ins, strict=True)
                 if not p.raw and isinstance(a, np.ndarray)]
        if not named:
            raise ValueError(f"{who}: no non-raw array input, so there is nothing to reduce over")
        a_shape = _arrays.broadcast_shape(who, named)
        in_types, out_types, tmap = _types.decide_types(
            who, self.in_params, self.out_params,
            [a.dtype if isinstance(a, np.ndarray) else None for a in ins], [a.dtype for a in outs] if outs else None)
        reduce_axis, out_axis = normalize_axis(who, axis, len(a_shape))
        out_shape = tuple(1 if d in reduce_axis else a_shape[d] for d in range(len(a_shape))) if keepdims else \
            tuple(a_shape[d] for d in out_axis)
        outs = self._outputs(outs, out_types, out_shape)
        if outs[0].size == 0:
            return outs[0]
        if self.identity == "" and 0 in a_shape:
            raise ValueError(f"zero-size array to reduction operation {self.name} which has no identity")
        ins = [a if isinstance(a, np.ndarray) else _types.to_scalar(who, p, a, t)
               for p, a, t in zip(self.in_params, ins, in_types, strict=True)]
        self._launch(ins, outs, a_shape, reduce_axis + out_axis, out_shape, tmap)
        return outs[0]

    def _launch(self, ins: list, outs: list[np.ndarray], a_shape: tuple[int, ...], perm: tuple[int, ...],
                out_shape: tuple[int, ...], tmap: dict) -> None:
        nonraw_in = [k for k, (p, a) in enumerate(zip(self.in_params, ins, strict=True))
                     if not p.raw and isinstance(a, np.ndarray)]
        if perm != tuple(range(len(perm))) and any(p.raw for p in self.in_params + self.out_params):
            raise NotImplementedError(f"{self._who}: with a raw parameter the reduced axes must lead (axis=0, "
                                      "(0, 1), ...), as cupy requires; transpose the input instead")
        in_views = [np.broadcast_to(ins[k], a_shape).transpose(perm) for k in nonraw_in]
        in_shape = tuple(a_shape[d] for d in perm)
        nonraw_out = [k for k, p in enumerate(self.out_params) if not p.raw]
        out_views = [outs[k] for k in nonraw_out]
        if self.reduce_dims:
            in_views, in_shape = _arrays.reduce_dims(in_views, in_shape)
            out_views, out_shape = _arrays.reduce_dims(out_views, out_shape)
        for k, v in zip(nonraw_in, in_views, strict=True):
            ins[k] = v
        outs = list(outs)
        for k, v in zip(nonraw_out, out_views, strict=True):
            outs[k] = v
        in_size, out_size = math.prod(in_shape), math.prod(out_shape)
        block, stride, blocks = block_specs(in_size, out_size, contiguous_size(in_views, out_shape))
        tmap = {**tmap, "IndexT": np.dtype(np.int64 if in_size // max(out_size, 1) > _arrays.INT32_MAX else np.int32)}
        b = self._generate(ins, outs, tmap, len(in_shape), len(out_shape), block)
        self._cached_codes.setdefault(tuple(a.dtype for a in ins + outs if isinstance(a, np.ndarray)), b.code)
        kernel = compile_generated(self._who, b, self.name, self.options)
        report = _arrays.BoundsReport(self._who, [p.name for p in self.in_params + self.out_params], ins + outs)
        packed = [_arrays.pack_carray(a, report, k) if isinstance(a, np.ndarray) else _arrays.pack_scalar(a)
                  for k, a in enumerate(ins + outs)]
        kernel((blocks,), (block,), (*packed, _arrays.pack_indexer(in_shape), _arrays.pack_indexer(out_shape),
                                     np.int32(stride)))
        report.raise_if_found()

    # ------------------------------------------------------------------------------------------------ codegen
    def _generate(self, ins: list, outs: list, tmap: dict, in_ndim: int, out_ndim: int, block: int) -> CodeBuilder:
        """Return the generated reduction kernel (cupy's structure: macros, strided map-reduce, shared-memory tree)."""
        who = self._who
        b = CodeBuilder()
        b.add("".join(f"typedef {_types.c_name(t, who)} {k};\n" for k, t in tmap.items()))
        if self.preamble:
            b.add_snippet("preamble", self.preamble)
        b.add_snippet("reduce_expr", self.reduce_expr, "#define REDUCE(a, b) ({})")
        b.add_snippet("post_map_expr", self.post_map_expr, "#define POST_MAP(a) ({})")
        b.add("#define _REDUCE(_offset) if (_tid < _offset) { \\\n"
              "  _type_reduce _a = _sdata[_tid], _b = _sdata[(_tid + _offset)]; \\\n"
              "  _sdata[_tid] = REDUCE(_a, _b); \\\n}\n")
        b.add_snippet("reduce_type", self.reduce_type, "typedef {} _type_reduce;")
        b.add(f'extern "C" __global__ void {self.name}({self._params(ins, outs, in_ndim, out_ndim)}) {{')
        # cupy declares a plain char array; __align__ makes the cast to _type_reduce* aligned wherever the compiler
        # places it (the CPU engine's memcheck reports the misaligned float loads of an odd placement).
        b.add(f"  __shared__ __align__(16) char _sdata_raw[{block} * sizeof(_type_reduce)];\n"
              "  _type_reduce *_sdata = reinterpret_cast<_type_reduce*>(_sdata_raw);\n"
              "  unsigned int _tid = threadIdx.x;\n"
              "  IndexT _J_offset = _tid >> __popc(_block_stride - 1);  // _tid / _block_stride\n"
              "  ptrdiff_t _j_offset = (ptrdiff_t)_J_offset * _out_ind.size();\n"
              f"  IndexT _J_stride = {block} >> __popc(_block_stride - 1);\n"
              "  ptrdiff_t _j_stride = (ptrdiff_t)_J_stride * _out_ind.size();\n"
              "  for (ptrdiff_t _i_base = (ptrdiff_t)blockIdx.x * _block_stride; _i_base < _out_ind.size();\n"
              "       _i_base += (ptrdiff_t)gridDim.x * _block_stride) {")
        b.add_snippet("identity", self.identity, "    _type_reduce _s = _type_reduce({});")
        b.add("    ptrdiff_t _i = _i_base + (_tid & (_block_stride - 1));  // _tid % _block_stride\n"
              "    IndexT _J = _J_offset;\n"
              "    for (ptrdiff_t _j = _i + _j_offset; _j < _in_ind.size(); _j += _j_stride, _J += _J_stride) {\n"
              "      _in_ind.set(_j);")
        for p, a in zip(self.in_params, ins, strict=True):
            if isinstance(a, np.ndarray) and not p.raw:
                b.add(f"      const {p.ctype} {p.name} = _raw_{p.name}[_in_ind.get()];")
        b.add_snippet("map_expr", self.map_expr, "      _type_reduce _a = static_cast<_type_reduce>({});")
        b.add("      _s = REDUCE(_s, _a);\n"
              "    }\n"
              "    _sdata[_tid] = _s;\n"
              "    __syncthreads();\n"
              f"    for (unsigned int _block = {block} / 2; _block >= _block_stride; _block >>= 1) {{\n"
              "      if (_tid < _block) { _REDUCE(_block); }\n"
              "      __syncthreads();\n"
              "    }\n"
              "    if (_tid < _block_stride) { _s = _sdata[_tid]; }\n"
              "    if (_tid < _block_stride && _i < _out_ind.size()) {\n"
              "      _out_ind.set(static_cast<ptrdiff_t>(_i));")
        for p in self.out_params:
            if not p.raw:
                b.add(f"      {p.ctype} &{p.name} = _raw_{p.name}[_out_ind.get()];")
        b.add("      POST_MAP(_s);\n"
              "    }\n"
              "  }\n"
              "}")
        return b

    def _params(self, ins: list, outs: list, in_ndim: int, out_ndim: int) -> str:
        decls = self._param_decls(ins + outs)
        decls += [f"CIndexer<{in_ndim}, 1> _in_ind", f"CIndexer<{out_ndim}, 1> _out_ind", "const int _block_stride"]
        return ", ".join(decls)

