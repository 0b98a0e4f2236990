"""attention and attention_bwd contracts: what the torch checks cover, the multi-output checker, bad input."""

from __future__ import annotations

import math

import pytest
import torch

import workbench as wb
from tests._ops import variant_report

BWD_SHAPES = [{"B": 1, "H": 2, "Sq": 17, "Sk": 17, "D": 16, "causal": False},
              {"B": 1, "H": 1, "Sq": 33, "Sk": 17, "D": 16, "causal": True},
              {"B": 2, "H": 1, "Sq": 17, "Sk": 40, "D": 32, "causal": False}]


TORCH = [("attention", v.name) for v in wb.variants("attention", backend="torch")] + [
    ("attention_bwd", v.name) for v in wb.variants("attention_bwd", backend="torch")]


@pytest.mark.parametrize("op,name", TORCH)
def test_torch_variants_are_checked_causal_and_with_sq_not_sk(op, name):
    """tests/test_ops.py requires the report to pass; here: it covers masks, Sq != Sk and the dtypes."""
    v = wb.variant(op, name)
    if not v.runs_here():
        assert v.gpu_only and wb.mode() == "cpu" and "GPU-only" in v.why_not_here()
        return
    rep = variant_report(op, name)
    assert {c.shape["causal"] for c in rep.cases} == {False, True}
    assert any(c.shape["Sq"] != c.shape["Sk"] for c in rep.cases)
    assert {"float32", "float16"} <= {c.dtype for c in rep.cases}


def test_attention_bwd_saved_forward_matches_its_definition():
    shape = {"B": 1, "H": 2, "Sq": 9, "Sk": 13, "D": 8, "causal": True}
    q, k, v, o, lse, do = wb.make_inputs("attention_bwd", dtype="float32", seed=3, **shape)
    assert lse.dtype == torch.float32 and lse.shape == (1, 2, 9)
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(8)
    s = s.masked_fill(~torch.ones(9, 13, dtype=torch.bool).tril(0), float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(o.double(), wb.reference("attention")(q, k, v, causal=True), atol=1e-6, rtol=1e-6)
    # the causal flag reaches make(): the non-causal saved forward differs
    _, _, _, o2, lse2, _ = wb.make_inputs("attention_bwd", dtype="float32", seed=3, **{**shape, "causal": False})
    assert not torch.allclose(lse, lse2)


def _flash(q, k, v, o, lse, do, causal=False, scale=None):
    return wb.variant("attention_bwd", "torch_flash_bwd")(q, k, v, o, lse, do, causal=causal, scale=scale)


def test_checker_names_the_wrong_output_and_its_pattern():
    def dk_scaled(*a, **kw):
        dq, dk, dv = _flash(*a, **kw)
        return dq, dk * 1.1, dv

    rep = wb.check(dk_scaled, "attention_bwd", shapes=BWD_SHAPES[:1], dtypes=["float32"], seeds=(0,))
    assert not rep.ok and rep.diagnosis == "scale"
    assert rep.failures[0].worst["output"] == "dk"
    assert "worst at dk[" in rep.summary()


def test_checker_catches_an_unwritten_gradient():
    def dv_unwritten(q, k, v, o, lse, do, causal=False, scale=None):
        dq, dk, _ = _flash(q, k, v, o, lse, do, causal=causal, scale=scale)
        return dq, dk, wb.empty_like(v)  # poisoned under the checker, never written

    rep = wb.check(dv_unwritten, "attention_bwd", shapes=BWD_SHAPES[:1], dtypes=["float32"], seeds=(0,))
    assert not rep.ok and rep.failures[0].worst["output"] == "dv"
    assert rep.diagnosis in ("unwritten_rows", "unwritten")


@pytest.mark.parametrize(("ret", "msg"), [
    (lambda dq, dk, dv: dq, "expected a tuple of 3 tensors (dq, dk, dv)"),
    (lambda dq, dk, dv: (dq, dk), "expected a tuple of 3 tensors"),
    (lambda dq, dk, dv: (dq, dk.float().double(), dv), "returned dk dtype float64, expected float32"),
    (lambda dq, dk, dv: (dq, dk, dv[:, :, :1]), "returned dv shape"),
])
def test_checker_rejects_malformed_tuples(ret, msg):
    def fn(*a, **kw):
        return ret(*_flash(*a, **kw))

    rep = wb.check(fn, "attention_bwd", shapes=BWD_SHAPES[:1], dtypes=["float32"], seeds=(0,))
    assert not rep.ok and rep.diagnosis == "bad_output"
    assert msg in rep.failures[0].detail


def test_attention_bwd_bad_input_names_what_was_expected():
    shape = {"B": 1, "H": 1, "Sq": 5, "Sk": 7, "D": 8}
    q, k, v, o, lse, do = wb.make_inputs("attention_bwd", **shape)
    ref = wb.reference("attention_bwd")
    with pytest.raises(wb.OpError, match=r"attention_bwd: input lse\[B,H,Sq\] must have dtype in \['float32'\]"):
        ref(q, k, v, o, lse.double(), do)
    with pytest.raises(wb.OpError, match=r"attention_bwd: lse must be \[B,H,Sq\] = \[1,1,5\]"):
        ref(q, k, v, o, lse[:, :, :4].contiguous(), do)
    with pytest.raises(wb.OpError, match=r"attention_bwd: do must have q's shape"):
        ref(q, k, v, o, lse, do[:, :, :4].contiguous())
    with pytest.raises(wb.OpError, match=r"attention_bwd: inputs must share one dtype"):
        ref(q, k, v, o.half(), lse, do)
    with pytest.raises(wb.OpError, match=r"attention_bwd: k must be \[B,H,Sk,D\]"):
        ref(q, k[..., :4].contiguous(), v, o, lse, do)


def test_peak_memory_shows_standard_quadratic_and_flash_linear():
    # Standard attention holds S and P ([B,H,N,N] fp32 each); a flash kernel only its output ([B,H,N,D]).
    # Measured in a fresh process, as in a notebook kernel: a long-lived test worker's heap makes the resident
    # set a noisy yardstick.
    import json
    import subprocess
    import sys

    from tests.conftest import subprocess_env

    code = ("import json, workbench as wb\n"
            "x = wb.make_inputs('attention', B=1, H=2, Sq=1024, Sk=1024, D=64)\n"
            "print(json.dumps([wb.peak_memory(wb.variant('attention', n), *x)\n"
            "                  for n in ('torch_naive', 'torch_sdpa_flash')]))\n")
    r = subprocess.run([sys.executable, "-c", code], env=subprocess_env(WORKBENCH_MODE="cpu"), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    naive, flash = json.loads(r.stdout.strip().splitlines()[-1])
    s_bytes = 2 * 1024 * 1024 * 4
    assert naive["bytes"] >= 1.5 * s_bytes, naive
    assert flash["bytes"] < 0.25 * s_bytes, flash
    assert naive["method"] and naive["device"] == "cpu"
