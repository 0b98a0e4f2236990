"""workbench.cupy against cupy's documented semantics: ElementwiseKernel, ReductionKernel, fuse and the facade.

Value tests build arrays with ``cp.asarray`` and read them back with ``cp.asnumpy``, so they hold for cupy itself
on a GPU too; tests of the CPU stand-in's messages and generated code are cpu-mode only.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import workbench.cupy as cp
from tests.conftest import requires_cpu_mode

F32, F64 = np.float32, np.float64


def arr(a, dtype=F32):
    return cp.asarray(np.asarray(a, dtype=dtype))


def host(a):
    return np.asarray(cp.asnumpy(a))


squared_diff = cp.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)", "squared_diff")
squared_diff_generic = cp.ElementwiseKernel("T x, T y", "T z", "T diff = x - y;\nz = diff * diff;",
                                            "squared_diff_generic")
l2norm = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")


# ------------------------------------------------------------------------------------------- ElementwiseKernel


def test_elementwise_broadcasts_and_takes_scalars():
    x = arr(np.arange(10).reshape(2, 5))
    y = arr(np.arange(5))
    np.testing.assert_array_equal(host(squared_diff(x, y)), [[0] * 5, [25] * 5])
    np.testing.assert_array_equal(host(squared_diff(x, 5)), [[25, 16, 9, 4, 1], [0, 1, 4, 9, 16]])
    z = cp.empty((2, 5), dtype=F32)
    assert squared_diff(x, y, z) is z  # a given output is filled and returned
    np.testing.assert_array_equal(host(z), [[0] * 5, [25] * 5])


def test_elementwise_output_is_allocated_with_the_broadcast_shape_and_placeholder_type():
    x = arr(np.arange(6).reshape(3, 1, 2), F64)
    y = arr(np.ones((4, 1)), F64)
    z = squared_diff_generic(x, y)
    assert z.shape == (3, 4, 2) and z.dtype == F64
    np.testing.assert_allclose(host(z), (host(x) - host(y)) ** 2)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.uint8])
def test_type_placeholder_takes_the_argument_dtype(dtype):
    x = arr([3, 1, 4, 1, 5], dtype)
    y = arr([1, 1, 2, 0, 2], dtype)
    z = squared_diff_generic(x, y)
    assert z.dtype == dtype
    np.testing.assert_array_equal(host(z), ((host(x) - host(y)) ** 2).astype(dtype))


def test_raw_argument_and_the_loop_index():
    add_reverse = cp.ElementwiseKernel("T x, raw T y", "T z", "z = x + y[_ind.size() - i - 1]", "add_reverse")
    x = arr(np.arange(6), F64)
    y = arr(10 * np.arange(6), F64)
    np.testing.assert_array_equal(host(add_reverse(x, y)), host(x) + host(y)[::-1])


def test_raw_flat_index_follows_c_order_of_a_strided_array():
    copy_flat = cp.ElementwiseKernel("raw T src", "T dst", "dst = src[i]", "copy_flat")
    a = arr(np.arange(12).reshape(3, 4)).T  # non-contiguous view: src[i] is the i-th element in C order of a.T
    out = cp.empty(12, dtype=F32)
    copy_flat(a, out)
    np.testing.assert_array_equal(host(out), host(a).ravel())


def test_all_raw_needs_size():
    iota = cp.ElementwiseKernel("raw T x", "raw T y", "y[i] = x[i] + i", "iota_add")
    x = arr(np.zeros(7))
    y = cp.empty(7, dtype=F32)
    iota(x, y, size=7)
    np.testing.assert_array_equal(host(y), np.arange(7))
    with pytest.raises(ValueError):
        iota(x, y)  # the loop size is undecided
    with pytest.raises(ValueError):
        squared_diff(arr([1.0]), arr([2.0]), size=1)  # size= with non-raw arrays


def test_ind_size_is_the_size_after_broadcasting():
    k = cp.ElementwiseKernel("T x", "int64 n", "n = _ind.size()", "loop_size")
    x = arr(np.zeros((1, 3)))
    n = cp.empty((4, 3), dtype=np.int64)
    k(x, n)
    assert (host(n) == 12).all()


def test_strided_and_negative_stride_inputs():
    base = arr(np.arange(40).reshape(5, 8))
    x = base[::2, ::-3]  # every other row, every third column backwards: [3, 3]
    y = base[:3, 2:8:2]  # a strided [3, 3] block
    np.testing.assert_array_equal(host(squared_diff(x, y)), (host(x) - host(y)) ** 2)
    t = base.T
    np.testing.assert_array_equal(host(squared_diff(t, 1)), (host(t) - 1) ** 2)


def test_several_outputs_return_a_tuple_and_no_return_returns_none():
    divmod_k = cp.ElementwiseKernel("int32 a, int32 b", "int32 q, int32 r", "q = a / b; r = a % b", "divmod_k")
    q, r = divmod_k(arr([7, 9, 10], np.int32), arr([2, 4, 3], np.int32))
    np.testing.assert_array_equal(host(q), [3, 2, 3])
    np.testing.assert_array_equal(host(r), [1, 1, 1])
    tup = cp.ElementwiseKernel("T x", "T y", "y = x", "ident", return_tuple=True)
    out = tup(arr([1.0]))
    assert isinstance(out, tuple) and len(out) == 1
    quiet = cp.ElementwiseKernel("T x", "T y", "y = x", "ident_none", no_return=True)
    assert quiet(arr([1.0])) is None


def test_scalars_are_converted_to_the_parameter_type():
    scale = cp.ElementwiseKernel("T x, float32 s, int32 k", "T y", "y = x * s + k", "scale_add")
    np.testing.assert_allclose(host(scale(arr([1.0, 2.0]), 0.5, 3)), [3.5, 4.0])
    assign = cp.ElementwiseKernel("int32 k", "int32 y", "y = k", "assign_int")
    out = cp.empty(2, dtype=np.int32)
    assign(2.75, out)  # assigned like numpy: truncated
    np.testing.assert_array_equal(host(out), [2, 2])


def test_preamble_loop_prep_and_after_loop():
    k = cp.ElementwiseKernel(
        "T x", "T y", "y = twice(x) + bias", "with_preamble",
        preamble="template <typename U> __device__ U twice(U v) { return v + v; }",
        loop_prep="const float bias = 1.0f;", after_loop="")
    np.testing.assert_array_equal(host(k(arr([1.0, 2.0]))), [3.0, 5.0])


def test_placeholder_typedefs_come_before_the_preamble():
    # cupy writes `typedef <dtype> T;` above the preamble, so helper functions may use the placeholders too
    k = cp.ElementwiseKernel("T x", "T y", "y = twice_t(x)", "typed_preamble",
                             preamble="__device__ T twice_t(T v) { return v + v; }")
    np.testing.assert_array_equal(host(k(arr([1.5, -2.0], F64))), [3.0, -4.0])


def test_strided_output_is_written_in_place():
    out = cp.zeros((3, 4), dtype=F32).T  # a transposed [4,3] view
    squared_diff(arr(np.arange(12).reshape(4, 3)), 1, out)
    np.testing.assert_array_equal(host(out), (np.arange(12).reshape(4, 3) - 1.0) ** 2)


def test_float16_arithmetic_happens_in_float_like_cupy():
    # cupy's float16 converts to float for arithmetic: x * x of 300 is 9e4, which fp16 itself could not hold.
    sq = cp.ElementwiseKernel("float16 x", "float32 y", "y = x * x", "half_square")
    np.testing.assert_array_equal(host(sq(arr([300.0], np.float16))), [90000.0])
    half = cp.ElementwiseKernel("T x", "T y", "y = x * 0.5f + 1", "half_affine")
    got = half(arr([2.0, 3.0, 65504.0], np.float16))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(host(got), np.array([2.0, 2.5, 32753.0], np.float16))


def test_bool_and_zero_d_and_empty():
    pos = cp.ElementwiseKernel("T x", "bool p", "p = x > 0", "positive")
    np.testing.assert_array_equal(host(pos(arr([-1.0, 0.0, 2.0]))), [False, False, True])
    z = squared_diff(arr(3.0), arr(1.0))  # 0-d arrays
    assert z.shape == () and float(host(z)) == 4.0
    e = squared_diff(arr(np.zeros((0, 3))), arr(np.zeros(3)))
    assert e.shape == (0, 3)


def test_reserved_and_malformed_parameters_are_refused():
    with pytest.raises(ValueError):
        cp.ElementwiseKernel("T i", "T y", "y = i", "uses_i")


# --------------------------------------------------------------------------------------------- ReductionKernel


def test_reduction_doc_example_and_axes():
    x = arr(np.arange(10).reshape(2, 5))
    np.testing.assert_allclose(host(l2norm(x, axis=1)), [5.477226, 15.9687195], rtol=1e-6)
    xs = host(x).astype(F64)
    np.testing.assert_allclose(host(l2norm(x)), np.sqrt((xs ** 2).sum()), rtol=1e-6)
    np.testing.assert_allclose(host(l2norm(x, axis=0)), np.sqrt((xs ** 2).sum(0)), rtol=1e-6)
    np.testing.assert_allclose(host(l2norm(x, axis=-1)), np.sqrt((xs ** 2).sum(1)), rtol=1e-6)


@pytest.mark.parametrize("axis", [0, 1, 2, (0, 2), (1, 2), (0, 1, 2), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_axis_and_keepdims_match_numpy(axis, keepdims):
    g = np.random.default_rng(0)
    xs = g.standard_normal((3, 37, 5)).astype(F32)
    got = l2norm(arr(xs), axis=axis, keepdims=keepdims)
    want = np.sqrt((xs.astype(F64) ** 2).sum(axis=axis, keepdims=keepdims))
    assert got.shape == want.shape
    np.testing.assert_allclose(host(got), want, rtol=2e-6)


@pytest.mark.parametrize("shape,axis", [((3, 4099), 1), ((700, 33), 0), ((2, 9, 300), (0, 2)), ((1, 1), 1)])
def test_reduction_on_transposed_and_large_inputs(shape, axis):
    g = np.random.default_rng(1)
    xs = g.standard_normal(shape).astype(F32)
    x = arr(xs).T  # non-contiguous: the reduced axes move
    ax = tuple(len(shape) - 1 - a for a in (axis if isinstance(axis, tuple) else (axis,)))
    np.testing.assert_allclose(host(l2norm(x, axis=ax)), np.sqrt((xs.T.astype(F64) ** 2).sum(axis=ax)), rtol=2e-6)


def test_reduction_identity_post_map_and_reduce_type():
    count = cp.ReductionKernel("T x", "int32 n", "x > 0 ? 1 : 0", "a + b", "n = a", "0", "count_pos")
    np.testing.assert_array_equal(host(count(arr([[1, -2, 3], [-1, -1, 0]]), axis=1)), [2, 0])
    mx = cp.ReductionKernel("T x", "T m", "x", "max(a, b)", "m = a * 2", "-1e30f", "max_times_two",
                            reduce_type="float")
    np.testing.assert_array_equal(host(mx(arr([[1, 7, 3], [-5, -4, -9]]), axis=1)), [14, -8])


def test_reduction_broadcasts_its_inputs():
    dot = cp.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "row_dot")
    xs = np.arange(12, dtype=F32).reshape(3, 4)
    ws = np.array([1, 0, 2, -1], dtype=F32)
    np.testing.assert_array_equal(host(dot(arr(xs), arr(ws), axis=1)), xs @ ws)


def test_reduction_takes_scalars():
    shifted = cp.ReductionKernel("T x, float32 c", "float32 y", "(x - c) * (x - c)", "a + b", "y = a", "0",
                                 "shifted_sum_squares")
    np.testing.assert_array_equal(host(shifted(arr([[1, 2, 3], [4, 5, 6]]), 2, axis=1)), [2, 29])


def test_reduction_output_argument():
    x = arr(np.arange(6).reshape(2, 3))
    out = cp.empty(2, dtype=F32)
    assert l2norm(x, out, axis=1) is out
    out2 = cp.empty(2, dtype=F32)
    assert l2norm(x, axis=1, out=out2) is out2
    np.testing.assert_allclose(host(out2), host(out))
    with pytest.raises(ValueError):
        l2norm(x, cp.empty(3, dtype=F32), axis=1)  # wrong output shape


def test_reduction_of_empty_rows_gives_the_post_mapped_identity():
    total = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a + 1", "0", "sum_plus_one")
    np.testing.assert_array_equal(host(total(arr(np.zeros((3, 0))), axis=1)), [1, 1, 1])
    no_identity = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", None, "sum_no_identity")
    with pytest.raises(ValueError):
        no_identity(arr(np.zeros((3, 0))), axis=1)


def test_reduction_in_float16_accumulates_in_the_reduce_type():
    s32 = cp.ReductionKernel("T x", "float32 y", "x", "a + b", "y = a", "0", "half_sum_f32")
    s16 = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "half_sum_f16")
    x = arr(np.full(4096, 30.0), np.float16)  # 122880 > 65504, the largest fp16
    assert float(host(s32(x))) == 122880.0
    assert np.isinf(host(s16(x)))


# -------------------------------------------------------------------------------------------------------- fuse


def test_fuse_decorator_forms():
    @cp.fuse(kernel_name="squared_diff_fused")
    def sqd(x, y):
        return (x - y) * (x - y)

    @cp.fuse
    def sum_sq(x):
        return cp.sum(x * x, axis=-1)

    x = arr(np.arange(10))
    y = arr(np.arange(10)[::-1].copy())
    np.testing.assert_array_equal(host(sqd(x, y)), [81, 49, 25, 9, 1, 1, 9, 25, 49, 81])
    np.testing.assert_array_equal(host(sum_sq(arr(np.ones((2, 3))))), [3, 3])


# ------------------------------------------------------------------------------------------------ the facade


def test_torch_round_trip_is_a_view():
    t = torch.arange(6, dtype=torch.float32, device="cuda" if cp.MODE == "gpu" else "cpu")
    a = cp.from_torch(t)
    back = cp.to_torch(a)
    back[0] = 42.0
    assert float(t[0]) == 42.0
    assert cp.to_torch(a, torch.float16).dtype == torch.float16
    b = cp.from_torch(t.to(torch.bfloat16))
    assert b.dtype == np.float32  # numpy has no bfloat16: a float32 copy


@requires_cpu_mode
def test_cpu_mode_facade_is_numpy_with_cupy_extras():
    from workbench import cuda

    assert cp.exp is np.exp and cp.float32 is np.float32 and cp.xp() is np
    assert cp.get_array_module(np.ones(1)) is np
    assert isinstance(cp.asnumpy(np.ones(2)), np.ndarray)
    assert cp.RawKernel is cuda.RawKernel
    with pytest.raises(AttributeError, match="no attribute 'not_a_cupy_name'"):
        cp.not_a_cupy_name  # noqa: B018


# ------------------------------------------------------------------------- CPU stand-in: code and error messages


@requires_cpu_mode
def test_generated_elementwise_code_has_cupys_shape():
    x = arr(np.ones((4, 5)))
    squared_diff_generic(x, x)
    code = squared_diff_generic.cached_codes[(np.dtype(F32),) * 3]
    assert code.startswith("#include <cupy/carray.cuh>\ntypedef float T;\n")
    assert 'extern "C" __global__ void squared_diff_generic(const CArray<float, 1, 1, 1, 0> _raw_x' in code
    assert "CIndexer<1, 1> _ind)" in code  # reduce_dims collapsed the contiguous [4,5] to one axis
    assert "CUPY_FOR(i, _ind.size()) {\n    _ind.set(i);\n    const T &x = _raw_x[_ind.get()];" in code
    assert "T &z = _raw_z[_ind.get()];\n    T diff = x - y;\nz = diff * diff;;" in code


@requires_cpu_mode
def test_generated_reduction_code_has_cupys_shape():
    # a kernel of its own: the shared l2norm keeps the code of whichever shape another test ran first
    mine = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
    mine(arr(np.ones((3, 5))), axis=1)
    code = mine.cached_codes[(np.dtype(F32),) * 2]
    for part in ("typedef float T;\ntypedef int IndexT;", "#define REDUCE(a, b) (a + b)",
                 "#define POST_MAP(a) (y = sqrt(a))", "typedef T _type_reduce;",
                 "CIndexer<2, 1> _in_ind, CIndexer<1, 1> _out_ind, const int _block_stride",
                 "_type_reduce _s = _type_reduce(0);", "const T x = _raw_x[_in_ind.get()];",
                 "_type_reduce _a = static_cast<_type_reduce>(x * x);", "T &y = _raw_y[_out_ind.get()];",
                 "__shared__ __align__(16) char _sdata_raw[512 * sizeof(_type_reduce)];"):
        assert part in code, part


@requires_cpu_mode
def test_block_specs_follow_cupy():
    from workbench.cupy._reduction import block_specs

    assert block_specs(1000 * 1000, 1000, 1) == (512, 1, 1000)  # long rows: one output per block
    assert block_specs(33 * 700, 33, 32) == (512, 32, 2)  # short columns, contiguous outputs: 32 per block
    assert block_specs(8, 4, 1) == (512, 256, 1)  # two elements per output: 256 outputs per block


@requires_cpu_mode
def test_syntax_error_names_the_snippet_line_and_the_generated_line():
    bad = cp.ElementwiseKernel("T x", "T z", "T t = x * 2;\nz = t +* ;", "bad_syntax")
    with pytest.raises(cp.KernelCompileError) as e:
        bad(arr([1.0]))
    msg = str(e.value)
    assert "ElementwiseKernel 'bad_syntax'" in msg
    m = re.search(r"line 2 of your operation: `z = t \+\* ;`\n +\(line (\d+) of the generated kernel\)", msg)
    assert m, msg
    line = int(m.group(1))
    assert bad.cached_code.splitlines()[line - 1].strip() == "z = t +* ;;"
    assert f">> {line} | z = t +* ;;" in msg


@requires_cpu_mode
@pytest.mark.parametrize("part,kw", [("map_expr", {"map_expr": "x * q"}), ("reduce_expr", {"reduce_expr": "a +* b"}),
                                     ("post_map_expr", {"post_map_expr": "y = = a"}),
                                     ("identity", {"identity": "0 0"})])
def test_reduction_errors_name_the_snippet(part, kw):
    args = {"in_params": "T x", "out_params": "T y", "map_expr": "x", "reduce_expr": "a + b",
            "post_map_expr": "y = a", "identity": "0", "name": f"bad_{part}"}
    args.update(kw)
    k = cp.ReductionKernel(**args)
    with pytest.raises(cp.KernelCompileError, match=f"line 1 of your {part}: `{re.escape(kw[part])}`"):
        k(arr([1.0, 2.0]))


@requires_cpu_mode
def test_type_mismatch_names_the_parameter():
    with pytest.raises(cp.KernelTypeError, match="parameter 'y'.*declared float32, got an array of float64"):
        squared_diff(arr([1.0]), arr([1.0], F64))
    with pytest.raises(cp.KernelTypeError, match="parameter 'y'.*placeholder T is float32 \\(from 'x'\\)"):
        squared_diff_generic(arr([1.0]), arr([1.0], F64))
    with pytest.raises(cp.KernelTypeError, match="parameter 'z'.*declared float32, got an array of int32"):
        squared_diff(arr([1.0]), arr([1.0]), cp.empty(1, dtype=np.int32))


@requires_cpu_mode
def test_undecidable_placeholder_names_it():
    k = cp.ElementwiseKernel("X x, Y y", "Z z", "z = (x - y) * (x - y)", "super_generic")
    with pytest.raises(cp.KernelTypeError, match="placeholder Z of output parameter 'z'"):
        k(arr([1.0]), arr([2.0]))
    z = cp.empty(1, dtype=F64)
    k(arr([1.0]), arr([3], np.int32), z)  # documented: give the output to fix Z
    assert float(host(z)[0]) == 4.0
    s = cp.ElementwiseKernel("T x", "float32 y", "y = x", "scalar_only")
    with pytest.raises(cp.KernelTypeError, match="placeholder T of input parameter 'x'.*scalars do not bind"):
        s(2.0, cp.empty(1, dtype=F32))


@requires_cpu_mode
def test_broadcast_failure_names_the_parameter():
    with pytest.raises(ValueError, match=r"parameter 'y' with shape \(4,\) does not broadcast with 'x' \(2, 3\)"):
        squared_diff(arr(np.zeros((2, 3))), arr(np.zeros(4)))
    dot = cp.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "row_dot_bad")
    with pytest.raises(ValueError, match="parameter 'w'"):
        dot(arr(np.zeros((2, 3))), arr(np.zeros(2)), axis=1)


@requires_cpu_mode
def test_bad_arguments_name_what_was_expected():
    with pytest.raises(TypeError, match="Wrong number of arguments for 'squared_diff'"):
        squared_diff(arr([1.0]))
    with pytest.raises(TypeError, match="parameter 'x' takes an array or a scalar.*torch.Tensor"):
        squared_diff(torch.ones(2), arr([1.0, 2.0]))
    with pytest.raises(TypeError, match="output parameter 'z' takes an array"):
        squared_diff(arr([1.0]), arr([1.0]), [0.0])
    # outputs broadcast with the inputs (cupy's rule), then must have the broadcast shape
    with pytest.raises(ValueError, match="output 'z' has shape \\(1,\\), but the broadcast shape .* is \\(3,\\)"):
        squared_diff(arr([1.0, 2.0, 3.0]), arr([1.0]), cp.empty(1, dtype=F32))
    with pytest.raises(ValueError, match="parameter 'z' with shape \\(3,\\) does not broadcast"):
        squared_diff(arr([1.0, 2.0]), arr([1.0]), cp.empty(3, dtype=F32))
    with pytest.raises(ValueError, match="read-only"):
        squared_diff(arr([1.0]), arr([1.0]), np.broadcast_to(np.zeros(1, F32), (1,)))
    narrow = cp.ElementwiseKernel("int8 k", "int8 y", "y = k", "narrow")
    with pytest.raises(cp.KernelTypeError, match="parameter 'k' \\(int8\\) cannot hold the scalar 300"):
        narrow(300, cp.empty(1, dtype=np.int8))
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        l2norm(arr(np.zeros((2, 3))), axis=2)
    raw_red = cp.ReductionKernel("T x, raw T w", "T y", "x * w[0]", "a + b", "y = a", "0", "raw_red")
    with pytest.raises(NotImplementedError, match="reduced axes must lead"):
        raw_red(arr(np.zeros((2, 3))), arr(np.ones(1)), axis=1)


@requires_cpu_mode
@pytest.mark.parametrize("params,match", [("floatt x", "unknown type 'floatt'"), ("T", "cannot parse 'T'"),
                                          ("const T x", "unknown keyword 'const'"), ("T _x", "reserved"),
                                          ("T x, T x", "more than once"), ("complex64 x", "not supported")])
def test_malformed_parameter_lists(params, match):
    with pytest.raises(ValueError if "supported" not in match else TypeError, match=match):
        cp.ElementwiseKernel(params, "T y", "y = 0", "malformed")


@requires_cpu_mode
def test_kernel_name_must_be_an_identifier():
    with pytest.raises(ValueError, match="invalid kernel name"):
        cp.ElementwiseKernel("T x", "T y", "y = x", "not a name")


def test_without_a_usable_cupy_kernels_still_define_and_calls_say_why():
    from workbench.cupy import _missing

    if cp.MODE == "cpu":
        assert cp.why_unavailable() is None and cp.why_unavailable({"N": 1}) is None
    k = _missing.ElementwiseKernel("T x", "T y", "y = x", "k")  # a variant module can still be imported
    with pytest.raises(RuntimeError, match="ElementwiseKernel: .*cupy"):
        k(np.ones(1))
    f = _missing.fuse(kernel_name="f")(lambda x: x)
    with pytest.raises(RuntimeError, match="fuse: .*cupy"):
        f(np.ones(1))


@requires_cpu_mode
def test_reduce_dims_false_keeps_the_shape():
    k = cp.ElementwiseKernel("T x", "T y", "y = x + 1", "keep_dims", reduce_dims=False)
    got = k(arr(np.zeros((2, 3, 4))))
    assert (host(got) == 1).all()
    assert "CIndexer<3, 1> _ind" in k.cached_code and "CArray<float, 3, 1, 1, 0> _raw_x" in k.cached_code


# ------------------------------------------------------------------------------------- bounds of raw arguments
read_far = cp.ElementwiseKernel("T x, raw T y", "T z", "z = x + y[i + 100000]", "read_far")


@requires_cpu_mode
@pytest.mark.parametrize("attempt", range(3))  # every time, not in some runs
def test_a_raw_read_far_past_the_end_is_a_global_memcheck_error_every_time(attempt):
    from workbench.cuda.errors import MemcheckError

    x = arr(np.ones(17))
    with pytest.raises(MemcheckError, match=r"__global__ access .* element 100000 of parameter 'y'") as ei:
        read_far(x, x)
    assert "__shared__" not in str(ei.value) and ei.value.tool == "memcheck"


@requires_cpu_mode
def test_a_raw_read_before_the_start_and_a_reduction_read_are_caught():
    from workbench.cuda.errors import MemcheckError

    before = cp.ElementwiseKernel("T x, raw T y", "T z", "z = x + y[i - 1]", "read_before")
    with pytest.raises(MemcheckError, match="before its start"):
        before(arr(np.ones(5)), arr(np.ones(5)))
    ok = cp.ElementwiseKernel("T x, raw T y", "T z", "z = x + y[_ind.size() - i - 1]", "read_mirror")
    assert host(ok(arr([1, 2, 3]), arr([10, 20, 30]))).tolist() == [31, 22, 13]


@requires_cpu_mode
def test_the_checker_names_a_raw_out_of_bounds_read_out_of_bounds():
    import workbench as wb
    from workbench.interop import to_raw  # noqa: F401  (the facade's torch bridge is what a variant uses)

    def vecadd(x, y):
        out = wb.empty_like(x)
        z = read_far(cp.asarray(x.numpy()), cp.asarray(y.numpy()))
        out.copy_(torch.from_numpy(cp.asnumpy(z)))
        return out

    rep = wb.check(vecadd, "vecadd", shapes=[{"N": 17}], seeds=(0,), probes=False)
    assert rep.diagnosis == "out_of_bounds" and "__global__" in rep.failures[0].detail
