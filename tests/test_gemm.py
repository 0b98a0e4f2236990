"""gemm and gemm_fp8: the checked variants cover every check shape, the ladder's order, the TMA kernels' aligned
shapes, GPU-only kernels compile for sm_90, contracts reject bad inputs, exercises grade starters and solutions.

Every variant passes the checker in tests/test_ops.py (sizes in tests/_ops.py: the Numba simulator costs ~15 us per
multiply-add, so Numba variants are checked at 64^3 in fp32 only, fp16 on the two small shapes, and refuse larger
shapes in cpu mode); known-wrong kernels get their diagnosis there too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import workbench as wb
from tests._ops import variant_reports
from tests.conftest import CPU_MODE, cuda_engine_ready

EXPECTED = [
    "torch_matmul",
    "numba_naive", "numba_coalesced", "numba_smem", "numba_regblock",
    "cuda_naive", "cuda_coalesced", "cuda_smem", "cuda_1d_blocktile", "cuda_2d_blocktile", "cuda_vectorized",
    "cuda_nobank", "cuda_warptile", "cuda_wmma", "cuda_mma_sync", "cuda_wgmma_tma",
    "triton_tile", "triton_grouped", "triton_autotuned", "triton_persistent_tma",
]
WRONG = {"wrong_fp16_accumulator": "precision", "wrong_missing_syncthreads": "race",
         "wrong_k_tail": "k_tail", "wrong_floor_grid": "unwritten_rows"}


def _registered() -> list[str]:
    return [v.name for v in wb.variants("gemm")]


def test_variants_registered_in_teaching_order():
    names = _registered()
    assert [n for n in EXPECTED if n in names] == [n for n in names if n in EXPECTED]
    missing = [n for n in EXPECTED if n not in names]
    assert not missing, f"not registered: {missing}"
    for v in wb.variants("gemm"):
        assert v.idea and "\n" not in v.idea
        if v.backend == "cuda":
            assert v.cu_file is not None and v.cu_file.is_file(), v.name


@pytest.mark.parametrize("name", [n for n in EXPECTED if n != "torch_matmul"])
def test_every_required_shape_is_checked_or_refused_with_reason(name):
    """tests/test_ops.py requires each variant's reports to pass; here: they cover every gemm check shape."""
    v = wb.variant("gemm", name)
    if not v.runs_here():
        pytest.skip(v.why_not_here())
    if v.backend == "cuda" and (why := cuda_engine_ready()):
        pytest.skip(why)
    reports = variant_reports("gemm", name)
    shapes = {tuple(c.shape.values()) for r in reports for c in r.cases}
    # Every required shape is checked, unless the variant refuses it with a reason (TMA: K, N multiples of 8).
    want = {(1, 1, 1), (17, 33, 9), (64, 64, 64)} | ({(127, 65, 129)} if v.backend != "numba" else set())
    refused = {s for s in want if v.supports is not None and v.supports(dict(zip("MNK", s, strict=True)))}
    assert want - refused <= shapes
    assert all(v.supports(dict(zip("MNK", s, strict=True))) for s in refused)
    if v.backend == "numba" and CPU_MODE:  # fp16 on the two small shapes only
        assert {c.dtype for r in reports for c in r.cases} == {"float32", "float16"}


# Shapes the TMA kernels accept (K, N multiples of 8) that still cut every tile: M and N edges of one and of
# several tiles, a K tail shorter than the 64-deep k tile, one row.
TMA_SHAPES = [{"M": 1, "N": 8, "K": 8}, {"M": 129, "N": 264, "K": 200}, {"M": 300, "N": 520, "K": 136},
              {"M": 1000, "N": 1032, "K": 1096}]


@pytest.mark.parametrize("name", ["cuda_wgmma_tma", "triton_persistent_tma"])
def test_tma_variants_on_aligned_ragged_shapes(name):
    v = wb.variant("gemm", name)
    assert v.supports({"M": 17, "N": 33, "K": 9}) and "multiples of 8" in v.supports({"M": 17, "N": 33, "K": 9})
    assert all(v.supports(s) is None for s in TMA_SHAPES)
    if CPU_MODE:
        pytest.skip(f"{name} is GPU-only")
    r = wb.check(v, shapes=TMA_SHAPES, seeds=(0,))
    assert r.ok, r.summary()
    assert len(r.cases) == len(TMA_SHAPES) * len(v.dtypes)


def test_numba_refuses_large_shapes_with_reason():
    v = wb.variant("gemm", "numba_naive")
    why = v.why_not_here("float32", {"M": 127, "N": 65, "K": 129})
    if CPU_MODE:
        assert why and "simulator" in why and "GPU" in why
    assert v.why_not_here("float32", {"M": 64, "N": 64, "K": 64}) is None


def test_known_wrong_kernels_are_registered_with_their_diagnosis():
    """They are checked with every op's in tests/test_ops.py; here: the ladder keeps them, last."""
    for name, diagnosis in WRONG.items():
        v = wb.variant("gemm", name)
        assert v.known_wrong and v.expected_diagnosis == diagnosis
        assert name not in _registered()


def test_contract_rejects_bad_inputs():
    a, b = wb.make_inputs("gemm", M=4, N=5, K=3)
    v = wb.variant("gemm", "cuda_smem")
    with pytest.raises(wb.OpError, match="inner sizes"):
        v(a, b[:2].contiguous())
    with pytest.raises(wb.OpError, match="share one dtype"):
        v(a, b.half())


# ------------------------------------------------------------------------------------ compile for sm_90 (no GPU)
_TRITON_COMPILE = textwrap.dedent("""
    import importlib.util, json, sys, tempfile
    from pathlib import Path
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    out = {}
    tmp = Path(tempfile.mkdtemp())
    for job in json.loads(sys.stdin.read()):
        path = tmp / (job["variant"] + ".py")  # @triton.jit needs its function in a real file
        path.write_text("import triton\\nimport triton.language as tl\\n\\n@triton.jit\\n" + job["src"])
        spec = importlib.util.spec_from_file_location(job["variant"], path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        k = triton.compile(ASTSource(getattr(mod, job["name"]), job["signature"], job["constexprs"]),
                           target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": job["num_warps"], "num_stages": job["num_stages"]})
        ptx = k.asm["ptx"]
        out[job["variant"]] = {"shared": k.metadata.shared, "wgmma": "wgmma" in ptx,
                               "tma": "cp.async.bulk.tensor" in ptx}
    print(json.dumps(out))
""")


def _undecorated(fn) -> str:
    import inspect as _inspect

    src = textwrap.dedent(_inspect.getsource(fn))
    return "\n".join(line for line in src.splitlines() if not line.startswith("@"))


def _jit_helpers(fn) -> list:
    """Return the Python functions of the module-level @triton.jit helpers ``fn`` calls (kernels._triton_tiles)."""
    return [g.fn for n in fn.__code__.co_names
            if type(g := fn.__globals__.get(n)).__name__ in ("JITFunction", "InterpretedFunction", "_InlineHelper")]


def _triton_jobs(op: str) -> list[dict]:

    jobs = []
    for v in wb.variants(op):
        if v.backend != "triton" or v.inspect_spec is None:
            continue
        s = v.inspect_spec()
        fn = getattr(s["fn"], "fn", s["fn"])
        src = _undecorated(fn)
        for helper in _jit_helpers(fn):  # a @triton.jit helper it calls goes first (the child decorates the first)
            src = _undecorated(helper) + "\n\n@triton.jit\n" + src
        jobs.append({"variant": v.name, "name": fn.__name__, "src": src, "signature": s["signature"],
                     "constexprs": s["constexprs"], "num_warps": s["num_warps"], "num_stages": s["num_stages"]})
    return jobs


def _compile_triton_sm90(op: str) -> dict:
    """Compile every Triton variant of ``op`` for sm_90 in a child without the interpreter; return its facts."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "WORKBENCH_MODE")}
    p = subprocess.run([sys.executable, "-c", _TRITON_COMPILE], input=json.dumps(_triton_jobs(op)),
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("op", ["gemm", "gemm_fp8"])
def test_triton_kernels_compile_for_sm90(op):
    facts = _compile_triton_sm90(op)
    names = [v.name for v in wb.variants(op) if v.backend == "triton"]
    assert set(names) <= set(facts), (names, list(facts))
    for v in wb.variants(op):
        if v.backend == "triton" and v.gpu_only:
            assert facts[v.name]["wgmma"], f"{v.name}: no wgmma in the sm_90 PTX"
    if op == "gemm":
        assert facts["triton_persistent_tma"]["tma"], "no TMA (cp.async.bulk.tensor) in the persistent kernel"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc/ptxas not on PATH")
@pytest.mark.parametrize("name,must", [("cuda_mma_sync", ["HMMA", "LDSM (ldmatrix)", "LDGSTS (cp.async)"]),
                                       ("cuda_wmma", ["HMMA"])])
def test_cuda_tensor_core_kernels_through_wb_inspect(name, must):
    r = wb.inspect(wb.variant("gemm", name), arch="sm_90")
    assert r.spill_stores == 0
    missing = [m for m in must if not r.instruction_mix.get(m)]
    assert not missing, f"{name}: the sm_90 SASS has no {missing}"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc/ptxas not on PATH")
def test_wgmma_kernel_builds_for_sm90a():
    """The cubin a GPU run loads is built here too; its SASS has wgmma, TMA loads and no spills."""
    from workbench.cuda import build_cubin

    v = wb.variant("gemm", "cuda_wgmma_tma")
    assert build_cubin(v.cu_file, "sm_90a").stat().st_size > 10_000
    r = wb.inspect(v, arch="sm_90")  # the spec asks for sm_90a
    assert r.arch == "sm_90a" and r.spill_stores == 0 and r.threads_per_block == 384
    assert r.instruction_mix["HGMMA"] == 4, "one k tile = 4 wgmma.m64n256k16"
    assert r.instruction_mix["UTMALDG (TMA)"] == 5, "a stage = one a box and four b boxes"
    assert r.registers <= 168  # 384 threads, 1 block/SM: 65536 / 384 rounded down to 8
    # An sm_90a cubin runs on sm_90 alone: no sm_80 occupancy (and no "could not compile for sm_80" as if broken).
    assert set(r.occupancy) == {"sm_90"} and any("architecture-specific" in n for n in r.notes), r.notes
    assert not any("could not compile" in n for n in r.notes), r.notes
    from workbench import cuda

    k = cuda.RawKernel(v.cu_file, "hgemm_wgmma_tma_bf16", arch="sm_90a")  # inspect what that kernel would build
    assert wb.inspect(k).arch == "sm_90a"


@pytest.mark.parametrize("op", ["gemm", "gemm_fp8"])
def test_triton_gpu_only_through_wb_inspect(op):
    checked = 0
    for v in wb.variants(op):
        if v.gpu_only and v.backend == "triton":
            r = wb.inspect(v, arch="sm_90")  # in-process, even under the interpreter (cpu mode)
            assert "wgmma.mma_async" in r.ptx, f"{v.name}: no wgmma in the sm_90 PTX"  # fp8 runs as QGMMA in SASS
            if op == "gemm_fp8":  # as launched (N, K % 16 == 0): pipelined 16-byte cp.async loads, no spills
                assert r.spill_stores == 0 and r.instruction_mix["QGMMA (fp8)"], r.ptxas_log
                assert r.opcodes.get("LDGSTS.E.BYPASS.128"), "fp8 tiles should arrive by 16-byte cp.async"
            checked += 1
    assert checked, f"{op} has no GPU-only Triton variant"


# ------------------------------------------------------------------------------------------------------- gemm_fp8
def _fp8_inputs(M=32, N=48, K=64):
    return wb.make_inputs("gemm_fp8", M=M, N=N, K=K, dtype="bfloat16", seed=0)


def test_gemm_fp8_contract_and_baseline():
    spec = wb.get_op("gemm_fp8")
    a, bt, sa, sb = _fp8_inputs()
    assert a.dtype == bt.dtype == torch.float8_e4m3fn and sa.dtype == sb.dtype == torch.float32
    assert tuple(bt.shape) == (48, 64) and sa.shape == sb.shape == (1,)
    ref = spec.reference(a, bt, sa, sb)
    assert ref.dtype == torch.float64 and ref.shape == (32, 48)
    names = [v.name for v in wb.variants("gemm_fp8")]
    assert names[0] == "torch_scaled" and "triton_fp8_hopper" in names
    assert wb.variant("gemm_fp8", "triton_fp8_hopper").gpu_only


@pytest.mark.parametrize("mutate,match", [
    (lambda a, bt, sa, sb: (a.to(torch.float16), bt, sa, sb), "float8_e4m3fn"),
    (lambda a, bt, sa, sb: (a, bt[:, :-1].contiguous(), sa, sb), "K"),
    (lambda a, bt, sa, sb: (a, bt, sa.double(), sb), "float32"),
    (lambda a, bt, sa, sb: (a, bt, torch.ones(2), sb), "one element"),
    (lambda a, bt, sa, sb: (a, bt.t(), sa, sb), "contiguous|K"),
    (lambda a, bt, sa, sb: (a[None], bt, sa, sb), "2-D"),
])
def test_gemm_fp8_rejects_bad_inputs(mutate, match):
    args = mutate(*_fp8_inputs())
    with pytest.raises(wb.OpError, match=match):
        wb.variant("gemm_fp8", "torch_scaled")(*args)
    with pytest.raises(wb.OpError):
        wb.reference("gemm_fp8")(*args)


# ------------------------------------------------------------------------------------------------------ exercises
GEMM_EXERCISES = ["gemm-smem-tiling", "gemm-register-blocking", "gemm-triton-grouped"]


@pytest.mark.parametrize("ex_id", GEMM_EXERCISES)
def test_exercise_starter_fails_helpfully_and_solution_passes(ex_id, capsys):
    from workbench.practice.learner_code import load_entry

    ex = wb.exercise(ex_id)
    starter = load_entry(ex.starter_file, ex.entry)
    r = ex.check(starter)
    msg = capsys.readouterr().out
    assert not r.ok and ("Not yet" in msg or "Almost" in msg) and "hint" in msg
    sol = load_entry(ex.solution_file, ex.entry)
    assert ex.check(sol).ok, capsys.readouterr().out
    assert len(ex.hints) >= 2
