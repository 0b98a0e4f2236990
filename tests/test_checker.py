"""The checker's own rules: each diagnosis fires on its pattern, plain functions are checked like variants."""

from __future__ import annotations

import math

import pytest
import torch

import workbench as wb
from tests.conftest import ROOT
from workbench.checker import DIAGNOSES

# Every op's variants and known-wrong kernels are checked in tests/test_ops.py; here: the checker's own rules.


# ------------------------------------------------------------------------------------ plain functions


def vecadd_one_unwritten(x, y):
    out = wb.empty_like(x)
    out[:5] = x[:5] + y[:5]
    out[6:] = x[6:] + y[6:]  # index 5 is never written
    return out


def test_poison_catches_one_unwritten_element():
    rep = wb.check(vecadd_one_unwritten, "vecadd", shapes=[{"N": 1023}], seeds=(0,))
    assert not rep.ok
    (c,) = rep.cases
    assert c.n_mismatch == 1 and c.n_elements == 1023
    assert c.first_indices == [(5,)]
    assert c.worst["index"] == (5,) and c.worst["got"] == "nan"
    assert c.worst["expected"] != "nan"
    assert rep.diagnosis == "unwritten"
    # outside the checker, empty_like is not poisoned, and the element gets whatever memory held
    x, y = wb.make_inputs("vecadd", N=8)
    with wb.registry.poisoning():
        assert torch.isnan(wb.empty_like(x)).all()
        assert (wb.empty((4,), torch.int32) == wb.registry.POISON_INT).all()


def vecadd_nan_at_7(x, y):
    out = x + y
    out[7] = float("nan")
    return out


def test_nan_where_reference_is_finite_fails():
    rep = wb.check(vecadd_nan_at_7, "vecadd", shapes=[{"N": 17}, {"N": 1023}], seeds=(0,))
    assert not rep.ok
    assert all(c.n_mismatch == 1 and c.first_indices == [(7,)] for c in rep.cases)
    assert math.isinf(rep.cases[0].max_abs_err)


def softmax_nan_to_zero(x):
    return torch.softmax(x, dim=-1).nan_to_num(nan=0.0)


def softmax_ok(x):
    return torch.softmax(x, dim=-1)


def test_softmax_all_inf_rows_must_be_nan():
    rep = wb.check(softmax_nan_to_zero, "softmax", shapes=[{"M": 17, "N": 33}], seeds=(0,))
    assert not rep.ok
    rand = [c for c in rep.cases if c.case == "random"]
    edge = [c for c in rep.cases if c.case == "edge"]
    assert rand and all(c.ok for c in rand)  # no -inf rows in random inputs: right there
    (e,) = edge
    assert not e.ok and e.n_mismatch == 33  # exactly the all -inf row (row 2)
    assert {i[0] for i in e.first_indices} == {2}
    assert e.diagnosis == "special_values" and rep.diagnosis == "special_values"
    assert e.worst["expected"] == "nan" and e.worst["got"] == "0"
    # and NaN where the reference is NaN passes
    assert wb.check(softmax_ok, "softmax", shapes=[{"M": 17, "N": 33}], seeds=(0,)).ok


def vecadd_scaled(x, y):
    return (x + y) * 1.5


def test_uniform_scale_is_named():
    rep = wb.check(vecadd_scaled, "vecadd", shapes=[{"N": 1023}], seeds=(0,))
    assert not rep.ok and rep.diagnosis == "scale"
    assert "same factor" in rep.summary()


def gemm_racy_tiles(a, b):
    c = torch.matmul(a, b)
    c[16:32, 16:32] += 1.0  # two whole 16x16 tiles in the interior are wrong
    c[32:48, 0:16] = 0.0
    return c


def test_whole_wrong_tiles_are_a_missing_barrier():
    rep = wb.check(gemm_racy_tiles, "gemm", shapes=[{"M": 64, "N": 64, "K": 64}, {"M": 127, "N": 65, "K": 129}],
                   seeds=(0,))
    assert not rep.ok
    assert all(c.n_mismatch == 512 for c in rep.cases)
    assert rep.diagnosis == "missing_barrier", rep.summary()
    assert all(c.diagnosis == "missing_barrier" for c in rep.cases)


def vecadd_noisy(x, y):
    # Gaussian noise of 0.7 tolerances (vecadd's own atol + rtol |ref|) moves every element by a fair share of it and
    # pushes the tail past 1 tolerance (~15% of elements), with no tile or tail pattern and nothing far off.
    z = x + y
    atol, rtol = wb.get_op("vecadd").tolerance(z.dtype, {"N": z.numel()})
    g = torch.Generator(device=z.device).manual_seed(0)
    return z + 0.7 * (atol + rtol * z.abs()) * torch.randn(z.shape, generator=g, device=z.device)


def vecadd_few_far_off(x, y):
    z = x + y
    z[torch.arange(3, z.numel() - 1, 97)] += 1.0  # a few elements, each off by ~10^5 tolerances
    return z


def test_spread_small_errors_are_precision_and_few_far_off_ones_scattered():
    rep = wb.check(vecadd_noisy, "vecadd", shapes=[{"N": 1025}], seeds=(0,))
    assert not rep.ok and 0 < rep.cases[0].n_mismatch < 1025 // 2  # under the >50% rule's reach
    assert rep.diagnosis == "precision", rep.summary()
    rep = wb.check(vecadd_few_far_off, "vecadd", shapes=[{"N": 1025}], seeds=(0,))
    assert not rep.ok and rep.diagnosis == "scattered", rep.summary()


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "int32"])
def test_poison_is_told_apart_from_computed_nans(dtype):
    from workbench.registry import is_poison, poison_

    dt = wb.registry.as_dtype(dtype)
    t = poison_(torch.zeros(6, dtype=dt))
    assert is_poison(t).all()
    if not dt.is_floating_point:
        return
    assert torch.isnan(t.float()).all()  # still a NaN to any comparison
    made = torch.tensor([float("inf"), 0.0, 1.0], dtype=torch.float32)
    computed = torch.stack([made[0] - made[0], made[1] / made[1], torch.tensor(float("nan"))]).to(dt)
    if dt.itemsize > 1:  # a payload fits: the canonical NaNs of arithmetic are not poison
        assert not is_poison(computed).any()
    else:  # e4m3fn has one NaN: every NaN counts as poison
        assert is_poison(computed).all()


def softmax_no_max(x):
    e = torch.exp(x.float())
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def test_overflow_nan_is_computed_not_unwritten():
    rep = wb.check(softmax_no_max, "softmax", shapes=[{"M": 17, "N": 33}], seeds=(0,), dtypes=("float32",))
    assert not rep.ok and rep.diagnosis == "computed_nan", rep.summary()
    assert "subtracting the row max" in rep.summary()


def vecadd_raises(x, y):
    raise ValueError("kaboom: shared memory exhausted")


def test_raising_function_is_a_failing_case_with_its_message():
    rep = wb.check(vecadd_raises, "vecadd", shapes=[{"N": 17}], seeds=(0, 1))
    assert not rep.ok and len(rep.cases) == 2
    assert rep.diagnosis == "error"
    for c in rep.cases:
        assert c.diagnosis == "error"
        assert "ValueError" in c.detail and "kaboom: shared memory exhausted" in c.detail
        assert "test_checker.py" in c.detail  # where it raised
    assert "kaboom" in rep.summary()


def vecadd_short(x, y):
    return (x + y)[:-1]


def vecadd_double(x, y):
    return (x + y).double()


def vecadd_numpy(x, y):
    return (x + y).numpy()


@pytest.mark.parametrize("fn,words", [(vecadd_short, "shape"), (vecadd_double, "dtype float64"),
                                      (vecadd_numpy, "ndarray")])
def test_bad_output(fn, words):
    rep = wb.check(fn, "vecadd", shapes=[{"N": 17}], seeds=(0,))
    assert not rep.ok and rep.diagnosis == "bad_output"
    assert all(c.diagnosis == "bad_output" and words in c.detail for c in rep.cases)


def test_low_precision_rule_sets_torch_err_only_where_it_applies():
    def my_add(x, y):
        return x + y

    rep = wb.check(my_add, "vecadd", dtypes=["float32", "float16"], shapes=[{"N": 1023}], seeds=(0,))
    assert rep.ok
    by = {c.dtype: c for c in rep.cases}
    assert by["float32"].torch_err is None
    x, y = wb.make_inputs("vecadd", N=1023, dtype="float16", seed=0)
    expect = float((torch.add(x, y).double() - (x.double() + y.double())).abs().max())
    assert by["float16"].torch_err == pytest.approx(expect)
    base = wb.check(wb.variant("vecadd", "torch_add"), dtypes=["float16"], shapes=[{"N": 1023}], seeds=(0,))
    assert base.cases[0].torch_err is None  # the baseline is not compared with itself


def test_low_precision_rule_widens_fp16_tolerance_to_twice_torch_error():
    n = 1023
    x, y = wb.make_inputs("vecadd", N=n, dtype="float16", seed=0)
    ref = x.double() + y.double()
    torch_err = float((torch.add(x, y).double() - ref).abs().max())
    atol, rtol = wb.get_op("vecadd").tolerance(torch.float16, {"N": n})
    assert 2 * torch_err > atol, "precondition: torch's own fp16 error exceeds the op's atol"
    # pick a small element and a wrong value for it whose error lies between the plain and the widened tolerance
    i = int((ref.abs() < 0.5).nonzero()[0, 0])
    plain_tol = atol + rtol * abs(float(ref[i]))
    wide_tol = 2 * torch_err + rtol * abs(float(ref[i]))
    target = float(ref[i]) + (plain_tol + wide_tol) / 2
    val = torch.tensor(target, dtype=torch.float16)
    err = abs(float(val) - float(ref[i]))
    assert plain_tol < err < wide_tol

    def off_by_a_bit(a, b):
        out = a + b
        out[i] = val
        return out

    rep = wb.check(off_by_a_bit, "vecadd", dtypes=["float16"], shapes=[{"N": n}], seeds=(0,), probes=False)
    assert rep.ok, rep.summary()

    def off_by_more(a, b):
        out = a + b
        out[i] = float(ref[i]) + 2 * wide_tol
        return out

    rep = wb.check(off_by_more, "vecadd", dtypes=["float16"], shapes=[{"N": n}], seeds=(0,), probes=False)
    assert not rep.ok
    (c,) = rep.cases
    assert c.worst["index"] == (i,)
    assert c.worst["tol"] == pytest.approx(wide_tol)


def test_report_fields_and_summary():
    def vecadd_tail_wrong(x, y):
        out = x + y
        out[-3:] += 10.0  # 1020..1022: the partial last tile of 4
        return out

    rep = wb.check(vecadd_tail_wrong, "vecadd", shapes=[{"N": 1023}], seeds=(0, 1), probes=False)
    assert not rep.ok and len(rep.failures) == 2
    c = rep.failures[0]
    assert c.n_elements == 1023 and c.n_mismatch == 3
    assert c.first_indices == [(1020,), (1021,), (1022,)]
    assert c.worst["index"] in c.first_indices
    assert c.worst["abs_err"] == pytest.approx(10.0, rel=1e-3)
    assert c.max_abs_err == pytest.approx(10.0, rel=1e-3)
    assert rep.diagnosis == "masking"
    s = rep.summary()
    assert "2 of 2 runs are wrong" in s and "3/1023 mismatches" in s and "first at [(1020,)" in s
    assert DIAGNOSES["masking"] in s
    with pytest.raises(AssertionError) as ei:
        rep.raise_if_failed()
    assert str(ei.value) == s
    with pytest.raises(AssertionError):
        wb.check(vecadd_tail_wrong, "vecadd", shapes=[{"N": 1023}], seeds=(0,), raise_on_fail=True)
    assert "<table>" in rep._repr_html_()


def test_check_needs_the_op_for_plain_functions():
    with pytest.raises(TypeError, match="name the op"):
        wb.check(vecadd_scaled)


def test_wrong_signature_raises_type_error():
    def three(x, y, z):
        return x

    with pytest.raises(TypeError, match=r"vecadd\(x\[N\], y\[N\]\)"):
        wb.check(three, "vecadd")


def _gemm2(a, b):
    return torch.matmul(a, b)


def _softmax1(x):
    return torch.softmax(x, dim=-1)


@pytest.mark.parametrize("fn,op", [(_gemm2, "gemm"), (_softmax1, "softmax")])
def test_signature_counts_inputs_not_shape_commas(fn, op):
    # "gemm(a[M,K], b[K,N])" has two inputs, not four
    assert wb.check(fn, op, shapes=wb.get_op(op).check_shapes[:2], seeds=(0,)).ok


def test_signature_counts_inputs_with_parentheses_inside_shapes():
    from workbench.checker import _signature_args

    # moe_fp8's scale shapes hold parentheses: "w1s[E,G(2I),G(d)]" is one input, and ")" ends no argument list
    args = _signature_args(wb.get_op("moe_fp8").signature)
    assert len(args) == 8 and args[3] == "w1s[E,G(2I),G(d)]" and args[-1] == "renormalize=True"
    assert _signature_args("f(x[N], eps=1e-6) -> [N]") == ["x[N]", "eps=1e-6"]


# ------------------------------------------------------------------------- sanitizers and mutated inputs
NEW_DIAGNOSES = ("mutated_input", "out_of_bounds", "uninitialized", "race")


def test_every_new_diagnosis_has_a_known_wrong_kernel_and_is_documented():
    import workbench.checker as checker

    expected = {v.expected_diagnosis for op in wb.ops() for v in wb.known_wrong(op)}
    readme = (ROOT / "README.md").read_text()
    for d in NEW_DIAGNOSES:
        assert d in expected, f"no known-wrong kernel is diagnosed {d}"
        assert d in DIAGNOSES and f"``{d}``" in checker.__doc__ and f"`{d}`" in readme, d
    for d in DIAGNOSES:  # the op contracts' own diagnoses (explain) are in the one table too
        assert d in checker.__doc__ or d in ("error", "bad_output"), d


def vecadd_mutates_x(x, y):
    out = (x + y) * 1.5
    x.add_(100)
    return out


def test_mutating_an_input_is_a_failure_even_where_it_widened_the_tolerance():
    # The example: in fp16 the torch baseline, run after the call on the mutated x, made the "2x torch error"
    # bound so wide that this wrong function passed. The inputs are now snapshotted and the baseline runs first.
    rep = wb.check(vecadd_mutates_x, "vecadd", dtypes=["float16"], shapes=[{"N": 1023}], seeds=(0,))
    assert not rep.ok and rep.diagnosis == "mutated_input", rep.summary()
    (c,) = rep.cases
    assert "input x was changed by the call: 1023/1023 elements differ" in c.detail
    assert "mutated_input" in rep.summary()

    def same_but_pure(x, y):
        return (x + y) * 1.5

    pure = wb.check(same_but_pure, "vecadd", dtypes=["float16"], shapes=[{"N": 1023}], seeds=(0,))
    assert not pure.ok and pure.diagnosis == "scale"  # the tolerance the baseline sets on pristine inputs

    def touches_but_restores(x, y):  # what the inputs hold afterwards is what counts, bit for bit
        saved = x.clone()
        x.mul_(2.0)
        x.copy_(saved)
        return x + y

    assert wb.check(touches_but_restores, "vecadd", shapes=[{"N": 17}], seeds=(0,)).ok


def test_sanitizer_errors_become_their_diagnoses():
    from workbench._sanitize import active
    from workbench.cuda.errors import MemcheckError, RaceError, UninitializedError

    seen = []

    def raising(kind):
        def fn(x, y):
            seen.append(active())  # the checker runs every call sanitized
            raise kind(f"{kind.tool}: thread (3, 0, 0) of block (1, 0, 0) at add.cu:7, offset 1025", [], 1)

        return fn

    for kind, diag in ((MemcheckError, "out_of_bounds"), (RaceError, "race"), (UninitializedError, "uninitialized")):
        rep = wb.check(raising(kind), "vecadd", shapes=[{"N": 17}], seeds=(0,))
        assert rep.diagnosis == diag and all(c.diagnosis == diag for c in rep.cases)
        assert "thread (3, 0, 0) of block (1, 0, 0) at add.cu:7, offset 1025" in rep.cases[0].detail
        assert diag in rep.summary() and DIAGNOSES[diag] in rep.summary()
    assert seen and all(seen)


def test_triton_out_of_bounds_names_kernel_argument_and_offset():
    rep = wb.check(wb.variant("vecadd", "wrong_unmasked"), shapes=[{"N": 1025}], dtypes=["float32"], seeds=(0,))
    (c,) = rep.cases
    assert c.diagnosis == "out_of_bounds"
    assert "Triton kernel add_unmasked" in c.detail and "x_ptr + 1025" in c.detail and "program (4, 0, 0)" in c.detail
    assert "wrong.py:" in c.detail  # the line of the load


def test_triton_programs_storing_to_one_element_race():
    import triton
    import triton.language as tl

    @triton.jit
    def sum_into_first(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        part = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
        tl.store(out_ptr + tl.program_id(0) * 0, part)  # every program stores its partial sum to out[0]

    def vecadd_racy(x, y):
        out = wb.empty_like(x)
        sum_into_first[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
        return x + y

    rep = wb.check(vecadd_racy, "vecadd", shapes=[{"N": 200}], seeds=(0,))
    assert rep.diagnosis == "race", rep.summary()
    assert "WAW hazard in Triton kernel sum_into_first: program (1, 0, 0) stores to out_ptr + 0" in rep.cases[0].detail


def test_a_skip_reason_is_listed_once():
    if wb.mode() != "cpu":
        pytest.skip("bf16 Triton runs on a GPU")
    rep = wb.check(wb.variant("vecadd", "triton_block"), dtypes=["bfloat16", "float32"], seeds=(0,))
    assert len(rep.skipped) == 1 and rep.summary().count("bfloat16 under the Triton interpreter") == 1


def test_quiet_floating_point_silences_only_inside(recwarn):
    import warnings

    import numpy as np

    from workbench.checker import quiet_floating_point

    warnings.simplefilter("always")
    with quiet_floating_point():
        np.log(np.array([-1.0]))  # "invalid value encountered in log"
    assert not recwarn.list
    np.log(np.array([-1.0]))
    assert len(recwarn.list) == 1 and "encountered" in str(recwarn.list[0].message)


def test_unravel_matches_numpy():
    """The report's element indices: the checker's own unravel agrees with numpy's, trailing dim fastest."""
    import numpy as np

    from workbench.checker import _unravel

    for shape in [(7,), (3, 5), (2, 1, 4), (2, 3, 4, 5)]:
        for k in (0, 1, int(np.prod(shape)) // 2, int(np.prod(shape)) - 1):
            assert _unravel(k, shape) == tuple(int(i) for i in np.unravel_index(k, shape))
    assert _unravel(0, ()) == ()
