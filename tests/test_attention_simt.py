"""attention, Numba and CUDA C variants: naive and flash Numba, SIMT and wmma FlashAttention against the float64
reference (causal, Sq != Sk, ragged tiles and head dims), head-dim refusals, and the tensor-core kernel's SASS."""

from __future__ import annotations

import shutil

import pytest
import torch

import workbench as wb
from tests.conftest import CPU_MODE, cuda_engine_ready

NAMES = ("numba_naive", "numba_flash", "cuda_flash_simt", "cuda_flash_wmma")


def _shape(b: int, h: int, sq: int, sk: int, d: int, causal: bool, **kw: float) -> dict:
    return {"B": b, "H": h, "Sq": sq, "Sk": sk, "D": d, "causal": causal, **kw}


# The Numba simulator costs ~0.1 s per query row (naive) or per 32-row tile: a handful of rows, fp32 and fp16.
NUMBA_SHAPES = {
    "numba_naive": [_shape(1, 1, 5, 9, 16, True), _shape(1, 2, 3, 1, 16, False)],
    # 33 rows: two row tiles (the second skips no key tile); Sk = 40: a ragged second key tile.
    "numba_flash": [_shape(1, 1, 33, 17, 16, True), _shape(1, 1, 7, 40, 32, False, scale=0.3)],
}
# The CPU engine runs the CUDA C kernels fast enough for the op's own shapes plus these: several key tiles (online
# rescale), causal with more rows than keys and the reverse, head dims that need padding, explicit scales.
CUDA_EXTRA = [_shape(1, 1, 70, 130, 128, True), _shape(2, 1, 130, 70, 48, True, scale=2.0),
              _shape(1, 2, 65, 65, 17, False, scale=0.05), _shape(1, 1, 1, 200, 64, False),
              _shape(1, 1, 3, 5, 1, True)]


def _skip_cuda(v: wb.Variant) -> None:
    if v.backend == "cuda" and cuda_engine_ready():
        pytest.skip(cuda_engine_ready())


def test_registered_in_teaching_order():
    names = [v.name for v in wb.variants("attention")]
    assert [n for n in names if n in NAMES] == list(NAMES)
    assert names.index("torch_sdpa") < names.index("numba_naive")
    for name in ("cuda_flash_simt", "cuda_flash_wmma"):
        v = wb.variant("attention", name)
        assert v.cu_file is not None and v.cu_file.exists()
        assert v.inspect_spec is not None and v.inspect_spec()["kind"] == "cuda"
    assert wb.variant("attention", "cuda_flash_wmma").dtypes == (torch.float16, torch.bfloat16)


@pytest.mark.parametrize("name", NAMES)
def test_variant_passes_checker(name):
    v = wb.variant("attention", name)
    _skip_cuda(v)
    if v.backend == "numba":
        shapes = NUMBA_SHAPES[name] if CPU_MODE else None
        rep = wb.check(v, shapes=shapes, seeds=(0,) if CPU_MODE else (0, 1))
    else:
        rep = wb.check(v, shapes=wb.get_op("attention").check_shapes + CUDA_EXTRA, seeds=(0, 1))
    assert rep.ok, rep.summary()
    assert not rep.skipped, rep.skipped
    dts = {c.dtype for c in rep.cases}
    want = {"float16", "bfloat16"} if name == "cuda_flash_wmma" else {"float32", "float16"}
    if v.backend == "cuda" and name != "cuda_flash_wmma":
        want.add("bfloat16")
    assert want <= dts, f"{name} was not checked in {want - dts}"
    shapes = [c.shape for c in rep.cases]
    assert any(s["causal"] for s in shapes) and any(s["Sq"] != s["Sk"] for s in shapes)


@pytest.mark.parametrize("name", ["numba_flash", "cuda_flash_simt", "cuda_flash_wmma"])
def test_empty_key_and_query_sets(name):
    v = wb.variant("attention", name)
    _skip_cuda(v)
    dt = "float16" if name != "numba_flash" else "float32"
    rep = wb.check(v, shapes=[_shape(1, 1, 3, 0, 16, False), _shape(1, 1, 0, 3, 16, True)], dtypes=(dt,), seeds=(0,))
    assert rep.ok, rep.summary()


@pytest.mark.parametrize("name", ["numba_flash", "cuda_flash_simt", "cuda_flash_wmma"])
def test_unsupported_head_dim_is_refused_naming_the_supported_set(name):
    v = wb.variant("attention", name)
    dt = "float16"
    why = v.why_not_here(dt, _shape(1, 1, 4, 4, 160, False))
    assert why and name in why and "D <= 128" in why and "160" in why
    assert v.why_not_here(dt, _shape(1, 1, 4, 4, 100, False)) is None  # padded, not refused
    q = torch.zeros(1, 1, 2, 160, dtype=torch.float16, device=wb.device())
    with pytest.raises(wb.UnsupportedHere, match="D <= 128"):
        v(q, q, q)
    if v.backend == "cuda":  # the launcher itself refuses too, as an OpError, when called around the registry
        with pytest.raises(wb.OpError, match=r"attention: .*D <= 128 \(padded to 16, 32, 64, 128\)"):
            v.fn(q, q, q)


def test_wmma_refuses_fp32_and_numba_refuses_long_score_rows():
    why = wb.variant("attention", "cuda_flash_wmma").why_not_here("float32")
    assert why and "float16" in why and "bfloat16" in why
    why = wb.variant("attention", "numba_naive").why_not_here("float32", _shape(1, 1, 1, 9000, 16, False))
    assert why and "Sk <= 8192" in why and "numba_flash" not in why


@pytest.mark.skipif(not CPU_MODE, reason="cpu-mode limits")
@pytest.mark.parametrize("name", ["numba_naive", "numba_flash"])
def test_numba_cpu_limits_say_why(name):
    why = wb.variant("attention", name).why_not_here("float32", _shape(4, 16, 1024, 1024, 128, False))
    assert why and "simulator" in why and "GPU" in why


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc/ptxas not on PATH")
def test_wmma_kernel_runs_on_tensor_cores_without_spills():
    r = wb.inspect(wb.variant("attention", "cuda_flash_wmma"), arch="sm_90")
    assert r.registers > 0 and r.spill_stores == 0
    assert r.instruction_mix.get("HMMA"), "the sm_90 SASS of attn_flash_wmma has no HMMA"
