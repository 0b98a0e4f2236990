"""Bad input: every contract violation is an OpError naming the op and what it expected."""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from tests.conftest import requires_cpu_mode


def _baseline(op):
    return wb.variants(op, backend="torch")[0]


def _inputs(op, dtype="float32", which=1):
    spec = wb.get_op(op)
    sizes, kw = spec.split(spec.check_shapes[which])
    return list(wb.make_inputs(op, dtype=dtype, **sizes)), kw


def _expect_op_error(op, args, kw, *words):
    """Both the baseline variant and the float64 reference refuse ``args`` with an OpError naming the op."""
    for fn in (_baseline(op), wb.reference(op)):
        with pytest.raises(wb.OpError) as ei:
            fn(*args, **kw)
        msg = str(ei.value)
        assert msg.startswith(f"{op}:"), msg
        for w in words:
            assert w in msg, f"{w!r} not in {msg!r}"
    return msg


# ---------------------------------------------------------------------------------------------- shapes


def test_gemm_inner_dims_mismatch():
    a = torch.randn(4, 5)
    b = torch.randn(6, 3)
    _expect_op_error("gemm", [a, b], {}, "inner sizes must match", "(4, 5)", "(6, 3)")


def test_gemm_wrong_rank():
    _expect_op_error("gemm", [torch.randn(4), torch.randn(4, 3)], {}, "input a[M,K]", "2-D", "(4,)")


def test_attention_k_with_different_d():
    q = torch.randn(1, 2, 8, 16)
    k = torch.randn(1, 2, 8, 32)
    v = torch.randn(1, 2, 8, 32)
    _expect_op_error("attention", [q, k, v], {}, "k must be [B,H,Sk,D]", "[1,2,Sk,16]", "(1, 2, 8, 32)")


def test_attention_v_shape_differs_from_k():
    q, k, v = (torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 9, 16))
    _expect_op_error("attention", [q, k, v], {}, "v must have k's shape")


def test_attention_causal_must_be_bool():
    args, _ = _inputs("attention")
    _expect_op_error("attention", args, {"causal": 1}, "causal must be a bool")


def test_moe_w2_wrong_shape():
    (x, logits, w1, w2, k), _ = _inputs("moe")
    bad_w2 = torch.randn(w2.shape[0], w2.shape[1], w2.shape[2] + 1)
    _expect_op_error("moe", [x, logits, w1, bad_w2, k], {}, "w2 must be [E,d,I]", str(tuple(bad_w2.shape)))


def test_moe_router_logits_wrong_shape():
    (x, logits, w1, w2, k), _ = _inputs("moe")
    _expect_op_error("moe", [x, logits[:, :-1].contiguous(), w1, w2, k], {}, "router_logits must be [T,E]")


def test_softmax_1d_input():
    _expect_op_error("softmax", [torch.randn(10)], {}, "input x[M,N]", "must be 2-D", "(10,)")


def test_vecadd_length_mismatch():
    _expect_op_error("vecadd", [torch.randn(5), torch.randn(6)], {}, "same N", "5", "6")


# ---------------------------------------------------------------------------------------------- dtypes

OPS = ("vecadd", "gemm", "softmax", "attention", "moe")


def _tensors_to(args, dtype):
    return [a.to(dtype) if isinstance(a, torch.Tensor) else a for a in args]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.float64])
def test_unsupported_dtype(op, dtype):
    args, kw = _inputs(op)
    msg = _expect_op_error(op, _tensors_to(args, dtype), kw, "must have dtype in", str(dtype).split(".")[1])
    assert "float32" in msg and "float16" in msg and "bfloat16" in msg


@pytest.mark.parametrize("op", ["vecadd", "gemm", "attention", "moe"])
def test_mixed_dtypes(op):
    args, kw = _inputs(op)
    args = list(args)
    args[1] = args[1].half()
    _expect_op_error(op, args, kw, "must share one dtype", "float16", "float32")


# ---------------------------------------------------------------------------------------- device, layout


@pytest.mark.parametrize("op", OPS)
def test_wrong_device(op):
    args, kw = _inputs(op)
    args = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    _expect_op_error(op, args, kw, "must be on device", repr(wb.device().type), "'meta'")


@pytest.mark.parametrize("op", OPS)
def test_non_contiguous(op):
    args, kw = _inputs(op, which=-1)
    first = args[0]
    if first.dim() == 1:
        view = torch.randn(2 * first.shape[0])[::2]  # a strided 1-D view
    else:
        view = first.transpose(-1, -2).contiguous().transpose(-1, -2)  # same shape, column-major
    assert view.shape == first.shape and not view.is_contiguous()
    _expect_op_error(op, [view, *args[1:]], kw, "must be contiguous", ".contiguous()")


def test_not_a_tensor():
    _expect_op_error("vecadd", [[1.0, 2.0], torch.randn(2)], {}, "must be a torch.Tensor", "list")


# ----------------------------------------------------------------------------------------- moe top_k


@pytest.mark.parametrize("top_k", [0, 9, -1, 2.0, True, "2", None])
def test_moe_top_k_out_of_range_or_not_int(top_k):
    (x, logits, w1, w2, _), _ = _inputs("moe")  # E = 8
    assert w1.shape[0] == 8
    _expect_op_error("moe", [x, logits, w1, w2, top_k], {}, "top_k must be an int in [1, E=8]", repr(top_k))


def test_moe_top_k_at_bounds_is_fine():
    (x, logits, w1, w2, _), _ = _inputs("moe")
    for k in (1, 8):
        assert _baseline("moe")(x, logits, w1, w2, k).shape == x.shape


# ------------------------------------------------------------------------------------ unknown names


def test_unknown_op_names_known_ops():
    for call in (lambda: wb.get_op("nosuch"), lambda: wb.variants("nosuch"), lambda: wb.reference("nosuch"),
                 lambda: wb.make_inputs("nosuch", N=1), lambda: wb.check(lambda x: x, "nosuch")):
        with pytest.raises(KeyError) as ei:
            call()
        msg = str(ei.value)
        assert "'nosuch'" in msg
        assert all(op in msg for op in OPS), msg


def test_unknown_variant_names_known_variants():
    with pytest.raises(KeyError) as ei:
        wb.variant("gemm", "nosuch")
    msg = str(ei.value)
    assert "'nosuch'" in msg and "torch_matmul" in msg
    assert all(v.name in msg for v in wb.variants("gemm", include_wrong=True))


def test_unknown_dtype_and_backend():
    with pytest.raises(ValueError, match="unknown dtype"):
        wb.make_inputs("vecadd", N=4, dtype="float13")
    with pytest.raises(wb.OpError, match="supports dtypes"):
        wb.make_inputs("vecadd", N=4, dtype="int32")
    with pytest.raises(ValueError, match="backend 'opencl'"):
        wb.variants("vecadd", backend="opencl")
    with pytest.raises(wb.OpError, match="input cases"):
        wb.make_inputs("gemm", M=2, N=2, K=2, case="edge")


# ------------------------------------------------------------------------------- cannot run here


@requires_cpu_mode
def test_bf16_to_triton_in_cpu_mode_is_unsupported_here():
    v = wb.variant("vecadd", "triton_block")
    x, y = wb.make_inputs("vecadd", N=16, dtype="bfloat16")
    with pytest.raises(wb.UnsupportedHere, match="interpreter"):
        v(x, y)
    assert not v.runs_here("bfloat16") and v.runs_here("float16")


@requires_cpu_mode
def test_bf16_to_numba_in_cpu_mode_is_unsupported_here():
    v = wb.variant("vecadd", "numba_grid")
    x, y = wb.make_inputs("vecadd", N=16, dtype="bfloat16")
    with pytest.raises(wb.UnsupportedHere, match="bfloat16"):
        v(x, y)


@requires_cpu_mode
def test_checker_skips_what_cannot_run_here_and_says_why():
    rep = wb.check(wb.variant("vecadd", "triton_block"), dtypes=["bfloat16"], shapes=[{"N": 8}])
    assert not rep.cases and not rep.ok
    assert rep.skipped and "interpreter" in rep.skipped[0]
    assert "nothing was checked" in rep.summary()


def test_exercise_wrong_signature_is_a_type_error():
    ex = wb.exercise("vecadd-triton")

    def three(a, b, c):
        return a

    with pytest.raises(TypeError, match=r"called as vecadd\(x\[N\], y\[N\]\)"):
        ex.check(three)


def test_check_wrong_variant_for_op():
    with pytest.raises(ValueError, match="not a variant of op 'vecadd'"):
        wb.check(wb.variant("gemm", "torch_matmul"), "vecadd")


# ------------------------------------------------------------------------------- sizes and empty problems


@pytest.mark.parametrize("size,words", [(4.5, "must be an int"), (-1, "must be >= 0"), (True, "must be an int"),
                                        ("8", "must be an int")])
def test_make_inputs_refuses_bad_sizes_with_op_error(size, words):
    with pytest.raises(wb.OpError) as ei:
        wb.make_inputs("gemm", M=size, N=4, K=4)
    assert "gemm" in str(ei.value) and "size M" in str(ei.value) and words in str(ei.value)


def test_make_inputs_sizes_the_contract_refuses_are_op_errors():
    with pytest.raises(wb.OpError, match="moe_align"):
        wb.make_inputs("moe_align", T=4, top_k=3, E=2, block=16)  # top_k > E
    with pytest.raises(wb.OpError, match="head dimension D must be >= 1"):
        wb.make_inputs("attention", B=1, H=1, Sq=4, Sk=4, D=0)


# One empty dimension at a time: every runnable variant returns what the float64 reference (torch's semantics) gives,
# an empty tensor, or zeros for an empty inner dimension, instead of a launch error, a crash or a wild write.
EMPTY = [("softmax", {"M": 0, "N": 33}), ("softmax", {"M": 5, "N": 0}),  # M = 0: a CUDA row block read past x
         ("rmsnorm", {"M": 0, "N": 33}), ("rmsnorm", {"M": 5, "N": 0}),  # M = 0: cuda_vec wrote past out
         ("gemm", {"M": 0, "N": 33, "K": 9}), ("gemm", {"M": 17, "N": 0, "K": 9}),
         ("gemm_fp8", {"M": 0, "N": 33, "K": 9}), ("gemm_fp8", {"M": 17, "N": 33, "K": 0}),
         ("moe", {"T": 3, "d": 16, "I": 0, "E": 4, "top_k": 2}),
         ("attention_bwd", {"B": 1, "H": 0, "Sq": 17, "Sk": 17, "D": 16, "causal": False}),  # was SIGFPE (torch)
         ("attention_bwd", {"B": 1, "H": 2, "Sq": 0, "Sk": 17, "D": 16, "causal": True})]


@pytest.mark.parametrize("op,shape", EMPTY, ids=[f"{o}-{'-'.join(f'{k}{v}' for k, v in s.items())}" for o, s in EMPTY])
def test_empty_problems_give_empty_results(op, shape):
    from tests.conftest import cuda_engine_ready

    _, kw = wb.get_op(op).split(shape)
    inputs = wb.make_inputs(op, **shape)
    ref = wb.reference(op)(*inputs, **kw)
    refs = list(ref) if isinstance(ref, tuple) else [ref]
    dt = wb.get_op(op).dtype_of(*inputs) if wb.get_op(op).dtype_of else inputs[0].dtype
    failed = []
    for v in wb.variants(op, runnable=True):
        if (v.backend == "cuda" and cuda_engine_ready()) or v.why_not_here(dt, shape):
            continue
        try:
            out = v(*inputs, **kw)
        except Exception as e:  # noqa: BLE001  (collect every variant's failure, then report them together)
            failed.append(f"{v.name}: {type(e).__name__}: {e}")
            continue
        for o, r in zip(out if isinstance(out, tuple) else (out,), refs, strict=True):
            if tuple(o.shape) != tuple(r.shape):
                failed.append(f"{v.name}: shape {tuple(o.shape)}, expected {tuple(r.shape)}")
            elif not torch.allclose(o.double().cpu(), r.cpu(), atol=0.0, rtol=0.0):  # empty, or exact zeros
                failed.append(f"{v.name}: values differ")
    assert not failed, failed


# ------------------------------------------------------------------------- bfloat16 under the interpreter


def _bf16_dot_gemm(a, b):
    import triton
    import triton.language as tl

    @triton.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr, n: tl.constexpr):
        r = tl.arange(0, n)
        a = tl.load(a_ptr + r[:, None] * n + r[None, :])
        b = tl.load(b_ptr + r[:, None] * n + r[None, :])
        tl.store(c_ptr + r[:, None] * n + r[None, :], tl.dot(a, b).to(c_ptr.dtype.element_ty))

    c = wb.empty((a.shape[0], b.shape[1]), a.dtype)
    dot_kernel[(1,)](a, b, c, n=a.shape[0])
    return c


@requires_cpu_mode
def test_bf16_dot_in_a_learners_triton_kernel_is_unsupported_here():
    # Before: the interpreter's bf16 tl.dot worked on raw 16-bit patterns, off by ~1e10, and the checker blamed an
    # indexing bug. Now the interpreter refuses it, naming the kernel, as the registered variants are refused.
    with pytest.raises(wb.UnsupportedHere, match=r"dot_kernel.*tl\.dot on bfloat16") as ei:
        wb.check(_bf16_dot_gemm, "gemm", dtypes=["bfloat16"], shapes=[{"M": 16, "N": 16, "K": 16}])
    assert "GPU" in str(ei.value)
    assert wb.check(_bf16_dot_gemm, "gemm", dtypes=["float16"], shapes=[{"M": 16, "N": 16, "K": 16}]).ok


@requires_cpu_mode
def test_bf16_arithmetic_in_a_triton_kernel_is_unsupported_here():
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < n
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    x, y = wb.make_inputs("vecadd", N=100, dtype="bfloat16")
    with pytest.raises(wb.UnsupportedHere, match=r"add_kernel.*arithmetic \(add\) on bfloat16"):
        add_kernel[(1,)](x, y, torch.empty_like(x), 100, BLOCK=128)
    f = x.float()
    out = torch.empty_like(f)
    add_kernel[(1,)](f, y.float(), out, 100, BLOCK=128)  # float32 stays fine
    assert torch.equal(out, f + y.float())
