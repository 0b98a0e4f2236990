"""attention and attention_bwd, Triton FlashAttention-2: forward and backward pass the checker (fp32, fp16; causal,
Sq != Sk, ragged tiles), gradients match autograd, the saved lse is the logsumexp, known-wrong kernels get their
diagnosis, unsupported head dims are refused, and the sm_90 builds use wgmma without spills.

Budget: ~40-60 s on 2 cores; the interpreter costs ~1 ms per program plus ~0.1 ms per tile step, so cpu mode runs
one small config (32x16 forward tiles) and the explicit shapes here stay under 50 rows.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import pytest
import torch

import workbench as wb
from kernels._launch import _by_dtype
from tests._ops import variant_report, wrong_report
from tests.conftest import ROOT, subprocess_env

# Load both ops' variants through their packages first: importing a variant module directly registers it on the
# spot, which would put triton_fa2 ahead of the Numba/CUDA C ladder.
wb.variants("attention")
wb.variants("attention_bwd")
from kernels.attention import v6_triton_fa2 as fa2  # noqa: E402
from kernels.attention_bwd import v1_triton_fa2_bwd as fa2_bwd  # noqa: E402

WRONG = {"wrong_no_rescale": "online_rescale", "wrong_causal_off_by_one": "causal_diagonal"}


def _shape(b: int, h: int, sq: int, sk: int, d: int, causal: bool) -> dict:
    return {"B": b, "H": h, "Sq": sq, "Sk": sk, "D": d, "causal": causal}


def _scores64(q: torch.Tensor, k: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril(0)
        s = s.masked_fill(~keep, float("-inf"))
    return s


def test_registered_after_the_simt_ladder():
    names = [v.name for v in wb.variants("attention")]
    assert "triton_fa2" in names and names.index("torch_sdpa") < names.index("triton_fa2")
    if "cuda_flash_mma" in names:
        assert names.index("cuda_flash_mma") < names.index("triton_fa2")
    assert {v.name: v.expected_diagnosis for v in wb.known_wrong("attention")}.items() >= WRONG.items()
    assert "triton_fa2_bwd" in [v.name for v in wb.variants("attention_bwd")]
    for op, name in (("attention", "triton_fa2"), ("attention_bwd", "triton_fa2_bwd")):
        v = wb.variant(op, name)
        assert v.backend == "triton" and v.inspect_spec()["kind"] == "triton"


# Beyond the op's check shapes: causal with several query tiles, full key tiles below the diagonal and Sq != Sk
# both ways (cpu tiles: forward 32x16, dK/dV 16x32, dQ 32x16), and an explicit scale.
EXTRA = [_shape(1, 1, 70, 45, 16, True), {**_shape(1, 1, 45, 70, 32, True), "scale": 0.5}]


@pytest.mark.parametrize("op,name", [("attention", "triton_fa2"), ("attention_bwd", "triton_fa2_bwd")])
def test_checked_at_the_op_check_shapes_and_passes_the_extra_ones(op, name):
    """tests/test_ops.py requires the check at the op's shapes to pass; here: what it covers, and the extra shapes."""
    v = wb.variant(op, name)
    rep = variant_report(op, name)
    assert not [w for w in rep.skipped if "bfloat16" not in w], rep.skipped
    extra = wb.check(v, shapes=EXTRA, seeds=(0,), probes=False)  # the report above holds the probes
    assert extra.ok, extra.summary()
    assert {"float32", "float16"} <= {c.dtype for c in rep.cases}
    shapes = [c.shape for c in rep.cases]
    assert any(s["causal"] for s in shapes) and any(not s["causal"] for s in shapes)
    assert any(s["Sq"] != s["Sk"] for s in shapes)
    if op == "attention":
        assert {1, 17, 64, 100} <= {s["Sq"] for s in shapes}


def test_empty_query_and_key_sets():
    rep = wb.check(wb.variant("attention", "triton_fa2"), shapes=[_shape(1, 1, 3, 0, 16, False),
                                                                   _shape(1, 1, 0, 3, 16, True)],
                   dtypes=("float32",), seeds=(0,))
    assert rep.ok, rep.summary()


@pytest.mark.parametrize("dtype,causal,scale", [("float32", False, None), ("float16", True, 0.3)])
def test_lse_is_the_logsumexp_of_the_scaled_masked_scores(dtype, causal, scale):
    q, k, v = wb.make_inputs("attention", B=1, H=2, Sq=45, Sk=37, D=32, dtype=dtype, seed=3)
    o, lse = fa2.fa2_forward(q, k, v, causal, scale)
    s = _scores64(q, k, causal, 1 / math.sqrt(32) if scale is None else scale)
    assert lse.dtype == torch.float32 and lse.shape == (1, 2, 45)
    tol = 1e-5 if dtype == "float32" else 1e-3  # fp16 scores: the dot rounds nothing, the inputs already are fp16
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, dim=-1), atol=tol, rtol=tol)
    ref = wb.reference("attention")(q, k, v, causal=causal, scale=scale)
    torch.testing.assert_close(o.double(), ref, atol=2e-3 if dtype == "float16" else 2e-5, rtol=1e-3)


@pytest.mark.parametrize("causal,scale", [(True, None), (False, 0.7)])
def test_gradients_of_fa2_forward_match_autograd(causal, scale):
    # The whole chain as training runs it: FA-2 forward (o, lse), then its backward, against autograd through
    # the float64 reference forward.
    q, k, v = wb.make_inputs("attention", B=2, H=1, Sq=40, Sk=27, D=16, dtype="float32", seed=5)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(7)).to(q.device)
    o, lse = fa2.fa2_forward(q, k, v, causal, scale)
    got = fa2_bwd.fa2_backward(q, k, v, o, lse, do, causal, scale)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = wb.reference("attention")(*leaves, causal=causal, scale=scale)
    want = torch.autograd.grad(out, leaves, do.double())
    for name, g, w in zip(("dq", "dk", "dv"), got, want, strict=True):
        assert g.dtype == torch.float32 and g.shape == w.shape, name
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("name", sorted(WRONG))
def test_known_wrong_kernels_fail_where_their_bug_shows(name):
    v = wb.variant("attention", name)
    assert v.expected_diagnosis == WRONG[name]
    rep = wrong_report("attention", name)  # its diagnosis: tests/test_ops.py
    assert not rep.ok, name
    # Each bug is visible where it should be: the off-by-one only when causal, no_rescale only with >1 key tile.
    bad = {(c.shape["Sk"], c.shape["causal"]) for c in rep.failures}
    if name == "wrong_causal_off_by_one":
        assert all(causal for _, causal in bad)
    else:
        assert all(sk > 16 for sk, _ in bad) and any(not causal for _, causal in bad)


@pytest.mark.parametrize("d", [48, 256, 8])
def test_unsupported_head_dim_is_refused_naming_the_supported_set(d):
    fwd, bwd = wb.variant("attention", "triton_fa2"), wb.variant("attention_bwd", "triton_fa2_bwd")
    why = fwd.why_not_here("float32", _shape(1, 1, 4, 4, d, False))
    assert why and "triton_fa2" in why and f"D={d}" in why and "[16, 32, 64, 128]" in why
    why = bwd.why_not_here("float32", _shape(1, 1, 4, 4, d, False))
    assert why and "triton_fa2_bwd" in why and "[16, 32, 64, 128]" in why
    q = torch.zeros(1, 1, 4, d, device=wb.device())
    with pytest.raises(wb.UnsupportedHere, match=r"\[16, 32, 64, 128\]"):
        fwd(q, q, q)
    with pytest.raises(wb.OpError, match=r"attention/triton_fa2: head dim .*\[16, 32, 64, 128\]"):
        fa2.fa2_forward(q, q, q)
    lse = torch.zeros(1, 1, 4, device=wb.device())
    with pytest.raises(wb.OpError, match=r"attention_bwd/triton_fa2_bwd: head dim .*\[16, 32, 64, 128\]"):
        fa2_bwd.fa2_backward(q, q, q, q, lse, q)


def test_gpu_configs_are_pruned_per_dtype_and_head_dim():
    # Every 16-bit config left compiles for sm_90 without spills at D = 64 and 128 (see the tables in the modules);
    # the pruners must hand fp32 only the small FMA tiles and drop 128x64 at 4 warps for D = 128 (it spills).
    # The split by dtype is tuned()'s (kernels/_launch.py); each module's pruner then keeps what fits.
    half, single = torch.empty(1, dtype=torch.float16), torch.empty(1, dtype=torch.float32)
    fwd_all = fa2.CONFIGS + fa2.FP32_CONFIGS
    prune_fwd = _by_dtype(fa2.FP32_CONFIGS, "q_ptr", fa2._prune)
    keep = prune_fwd(fwd_all, {"q_ptr": half}, HEAD_D=128)
    assert keep and all(c in fa2.CONFIGS for c in keep)
    assert not any(c.kwargs == {"BLOCK_M": 128, "BLOCK_N": 64} and c.num_warps == 4 for c in keep)
    assert any(c.num_warps == 4 and c.kwargs["BLOCK_M"] == 128 for c in prune_fwd(fwd_all, {"q_ptr": half},
                                                                                    HEAD_D=64))
    for d in (16, 64, 128):
        keep = prune_fwd(fwd_all, {"q_ptr": single}, HEAD_D=d)
        assert keep and all(c in fa2.FP32_CONFIGS for c in keep)
        for cfgs, fp32, kind in ((fa2_bwd.DKDV_CONFIGS, fa2_bwd.FP32_DKDV, ("BLOCK_M", "BLOCK_N")),
                                 (fa2_bwd.DQ_CONFIGS, fa2_bwd.FP32_DQ, ("BLOCK_N", "BLOCK_M"))):
            prune = _by_dtype(fp32, "q_ptr", fa2_bwd._pruner(*kind, fp32[-1]))
            assert all(c in fp32 for c in prune(cfgs + fp32, {"q_ptr": single}, HEAD_D=d))
            assert prune(cfgs + fp32, {"q_ptr": half}, HEAD_D=d) == cfgs


# wb.inspect runs in a child process that has run nothing under the interpreter. In a process that has (the checks
# above), Triton 3.7's interpreter leaves triton.language.core patched once a kernel calls a stdlib @jit helper
# such as tl.max or tl.sum (InterpretedFunction.__call__ never restores its _patch_lang), and a later in-process
# sm_90 compile fails inside those helpers unless Triton's on-disk cache already holds the kernel.
_INSPECT = textwrap.dedent("""
    import json
    import workbench as wb
    from kernels.attention import v6_triton_fa2 as fa2
    from kernels.attention_bwd import v1_triton_fa2_bwd as fa2_bwd

    specs = {"forward": fa2.inspect_spec("fp16", 128), "forward_causal": fa2.inspect_spec("fp16", 128, causal=True),
             "dkdv": fa2_bwd.inspect_spec("dkdv", "fp16", 128), "dq": fa2_bwd.inspect_spec("dq", "fp16", 128)}
    out = {}
    for name, spec in specs.items():
        r = wb.inspect(spec, arch="sm_90")
        out[name] = {"registers": r.registers, "spill_stores": r.spill_stores, "spill_loads": r.spill_loads,
                     "wgmma": "wgmma.mma_async" in r.ptx, "hgmma": r.instruction_mix["HGMMA"],
                     "smem": r.shared_static}
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def sm90() -> dict:
    p = subprocess.run([sys.executable, "-c", _INSPECT], capture_output=True, text=True, timeout=600, cwd=ROOT,
                       env=subprocess_env(WORKBENCH_MODE="cpu"))
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("what", ["forward", "forward_causal", "dkdv", "dq"])
def test_sm90_build_uses_wgmma_without_spills(sm90, what):
    # Measured with ptxas (Triton 3.7, fp16, D = 128): forward 128x64/8 warps: 188 registers (causal: 192),
    # 128 KiB shared; dK/dV 32x128/8 warps: 231; dQ 128x32/8 warps: 139; no spills. (128x64 at 4 warps would spill,
    # 255 registers + 180 B: it is pruned at D = 128.)
    r = sm90[what]
    assert 0 < r["registers"] <= 255
    assert r["wgmma"], f"{what}: no wgmma in the sm_90 PTX"
    assert r["hgmma"] > 0, f"{what}: no HGMMA in the sm_90 SASS"
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0, f"{what}: spills at {r['registers']} registers: {r}"
