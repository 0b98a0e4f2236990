"""benchmarks/kernel_goals.py: refuses to make GPU figures without a GPU (its --smoke run: tests/test_gpu_run.py)."""

from __future__ import annotations

import json

import pytest
import torch

import workbench as wb
from tests.conftest import ROOT, load_script

kernel_goals = load_script("benchmarks/kernel_goals.py")

pytestmark = pytest.mark.skipif(wb.mode() == "gpu", reason="the cpu-mode behaviour of the goal script")


def test_refuses_without_a_gpu_bad_ops_and_results_dir(capsys):
    assert kernel_goals.main([]) == 2
    assert "GPU figures only come from a GPU" in capsys.readouterr().err
    assert kernel_goals.main(["--smoke", "--out-dir", str(ROOT / "results")]) == 2
    assert kernel_goals.main(["--smoke", "--op", "decode,nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown op" in err and "'decode'" in err and "['nope']" in err


def test_ratio_is_baseline_time_over_ours_and_goals_are_the_issues():
    goals = {"goals": {}}
    base = {"time_ms": 2.0, "emulated": False}
    kernel_goals._ratio(goals, "x", base, ("mine", {"time_ms": 2.5, "emulated": False}), 0.9)
    assert goals["goals"]["x"] == {"ratio": 0.8, "goal": 0.9, "variant": "mine"}
    kernel_goals._ratio(goals, "y", base, ("mine", {"time_ms": 1.0, "emulated": True}), 0.9)
    assert "y" not in goals["goals"]  # an emulated time never makes a goal ratio
    doc = kernel_goals.__doc__
    for text in (">= 0.95 at 8192^3", ">= 0.90 of cuBLAS SGEMM with TF32 off", ">= 0.60", ">= 0.90 and Triton",
                 ">= 1.1x", ">= 0.75", ">= 0.80", ">= 0.70", ">= 0.85 of the copy", "M = 8192 rows of N = 4096",
                 ">= 1.6x bf16 ``torch.matmul`` at 8192^3"):
        assert text in doc


# --------------------------------------------------------------------------------------------- the decode goal
def test_decode_goal_shape_and_the_kv_bytes_it_must_read():
    assert kernel_goals.DECODE_GOAL == {"B": 8, "Hq": 32, "Hkv": 8, "L": 8192, "D": 128, "page": 16}
    assert kernel_goals.DECODE_KERNELS[0] == "triton_split"
    assert kernel_goals.kv_bytes(kernel_goals.DECODE_GOAL, torch.bfloat16) == 2 * 8 * 8192 * 8 * 128 * 2  # 268 MB
    # on make's case "full" the op's byte count is exact: the KV bytes plus q, out, block table and seq_lens
    spec = wb.get_op("decode_attention")
    rest = spec.bytes(dtype=torch.bfloat16, **kernel_goals.DECODE_GOAL) - kernel_goals.kv_bytes(
        kernel_goals.DECODE_GOAL, torch.bfloat16)
    assert rest == 2 * 8 * 32 * 128 * 2 + 4 * 8 * (8192 // 16 + 1)


def test_inputs_case_gives_every_sequence_l_tokens_inside_the_block_only():
    from workbench.benchmark_goals import inputs_case

    shape = {"B": 6, "Hq": 4, "Hkv": 2, "L": 13, "D": 8, "page": 4}
    assert len(set(wb.make_inputs("decode_attention", **shape)[4].tolist())) > 1  # the checker's mixed batch
    with pytest.raises(RuntimeError, match="inside"), inputs_case("decode_attention", "full"):
        q, k, v, table, lens = wb.make_inputs("decode_attention", **shape)
        assert lens.tolist() == [13] * 6 and bool(torch.isnan(k).any())  # spare pages still NaN
        raise RuntimeError("inside")
    assert len(set(wb.make_inputs("decode_attention", **shape)[4].tolist())) > 1  # restored, even after an error


def _seen_lens_variant(name: str, body):
    """A decode_attention Variant (not registered) that notes each call's seq_lens before running ``body``."""
    from workbench.registry import Variant

    seen: list[list[int]] = []

    def fn(q, k_cache, v_cache, block_table, seq_lens, scale=None):
        seen.append(seq_lens.tolist())
        return body(q, k_cache, v_cache, block_table, seq_lens, scale)

    return Variant(op="decode_attention", name=name, backend="torch", idea="test", fn=fn,
                   dtypes=(torch.float32,)), seen


def test_a_case_timing_is_checked_on_the_ops_own_cases_and_timed_on_the_case():
    from kernels.decode_attention import reference as R
    from workbench.benchmark_goals import _bench

    shape = {"B": 3, "Hq": 4, "Hkv": 2, "L": 9, "D": 8, "page": 4}
    v, seen = _seen_lens_variant("sdpa_noting_lens", R.torch_sdpa)
    rec = _bench(v, shape, torch.float32, "cmd", "full")
    assert rec["emulated"] and rec["variant"] == "sdpa_noting_lens" and rec["shape"] == shape
    checked = [lens for lens in seen if len(set(lens)) > 1]
    assert checked, "the check ran on the op's mixed batches"
    assert seen[-4:] == [[9, 9, 9]] * 4  # the warm-up and the timed calls (cpu mode: 1 + 3) on case "full"

    def shortest_for_all(q, k, v_, table, lens, scale):  # right only when every sequence has one length
        return R.torch_sdpa(q, k, v_, table, torch.full_like(lens, int(lens.min())), scale)

    wrong, _ = _seen_lens_variant("shortest_for_all", shortest_for_all)
    with pytest.raises(AssertionError, match="fails the checker"):
        _bench(wrong, shape, torch.float32, "cmd", "full")


def test_quiet_write_saves_partial_results_without_the_summary(tmp_path, capsys):
    from workbench.benchmark_goals import write

    rec = wb.bench(wb.variant("vecadd", "torch_add"), N=1024)
    goals = {"goals": {"x": {"ratio": 2.0, "goal": 1.0}}}
    out, gfile = write(goals, [rec], tmp_path, "partial", "cmd", ["a note"], quiet=True)
    assert capsys.readouterr().out == ""  # a section's save says nothing; the final write prints the summary
    assert json.loads(gfile.read_text())["goals"]["x"]["met"] and json.loads(out.read_text())["records"]
    goals["goals"]["y"] = {"ratio": 0.5, "goal": 1.0}
    out2, gfile2 = write(goals, [rec, rec], tmp_path, "partial", "cmd", ["a note"])
    assert (out2, gfile2) == (out, gfile) and len(json.loads(out.read_text())["records"]) == 2  # replaced
    assert "NOT met" in capsys.readouterr().out


STOPPER = """
import pathlib, runpy, sys, time
import workbench as wb
ready, out_dir = pathlib.Path(sys.argv[1]), sys.argv[2]
real, calls = wb.bench, []
def slow_bench(*args, **kwargs):  # the second measurement hangs, as a slow kernel would
    calls.append(1)
    if len(calls) == 2:
        ready.write_text("measuring")
        time.sleep(120)
    return real(*args, **kwargs)
wb.bench = slow_bench
sys.argv = ["benchmarks/kernel_goals.py", "--smoke", "--op", "attention", "--out-dir", out_dir]
runpy.run_path("benchmarks/kernel_goals.py", run_name="__main__")
"""


def test_sigterm_mid_op_keeps_what_finished(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import subprocess_env
    from workbench.results import load_results_file

    ready = tmp_path / "ready"
    p = subprocess.Popen([sys.executable, "-c", STOPPER, str(ready), str(tmp_path / "out")], cwd=ROOT,
                         env=subprocess_env(WORKBENCH_MODE="cpu"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    t0 = time.time()
    while not ready.exists() and p.poll() is None and time.time() - t0 < 240:
        time.sleep(0.2)
    assert ready.exists(), p.communicate()
    p.send_signal(signal.SIGTERM)  # what `timeout` sends when a step runs out of time
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, (out, err)
    assert "what finished is saved" in err
    (records,) = (tmp_path / "out").glob("*-attention.json")
    doc = load_results_file(records)  # complete and valid: written before the signal, atomically
    assert [(r["op"], r["variant"]) for r in doc["records"]] == [("attention", "torch_sdpa")]
    (goals,) = (tmp_path / "out" / "goals").glob("attention-*.json")
    g = json.loads(goals.read_text())
    assert g["tflops"]["smoke"] == {"torch_sdpa": None} and "bwd_d128_S8k" not in g["tflops"]
    assert any("stopped by SIGTERM" in n for n in g["notes"]), g["notes"]
    assert not list((tmp_path / "out").rglob("*.tmp"))


def test_checks_reuse_the_goal_shapes_autotune_result():
    # A real triton.autotune object (run by the interpreter here): inside reuse_tuning, a new key takes the pinned
    # config without timing any, unless the kernel's own prune drops it there; keys met inside are then forgotten.
    import triton
    import triton.language as tl

    from workbench.benchmark_goals import launched, reuse_tuning

    @triton.jit
    def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    configs = [triton.Config({"BLOCK": b}, num_warps=1) for b in (16, 32, 64)]
    tuner = triton.autotune(configs, key=["n"], prune_configs_by={
        "early_config_prune": lambda cs, named, **kw: [c for c in cs if c.kwargs["BLOCK"] <= named["n"]] or cs[:1]})(
        double)

    def call(n: int):
        x = torch.arange(n, dtype=torch.float32)
        out = torch.empty_like(x)
        tuner[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        assert torch.equal(out, 2 * x)

    tuner.cache[("goal",)] = configs[1]  # what tuning at the goal shape left
    with launched([tuner]) as used, reuse_tuning({tuner: configs[1]}):
        call(50)  # BLOCK 32 is kept by the prune: the pinned config
        assert tuner.best_config == configs[1]
        call(20)  # the prune keeps only BLOCK 16 here
        assert tuner.best_config == configs[0]
    assert used == [tuner] and set(tuner.cache) == {("goal",)}
    assert "_bench" not in vars(tuner) and "run" not in vars(tuner)


# ------------------------------------------------------------------------------------------------ the CuTe goal
def test_cute_goal_refuses_without_a_gpu_and_smoke_times_torch_alone(tmp_path, capsys):
    assert kernel_goals.main(["--op", "cute"]) == 2
    assert "GPU figures only come from a GPU" in capsys.readouterr().err
    assert kernel_goals.CUTE_GOAL == {"M": 8192, "N": 8192, "K": 8192}
    assert "``cute_wgmma_tma`` >= 0.85 of ``torch.matmul``" in kernel_goals.__doc__
    assert kernel_goals.cute_missing() is None  # the DSL is a pinned dependency: importable here
    assert kernel_goals.main(["--op", "cute", "--smoke", "--out-dir", str(tmp_path)]) == 0
    (g,) = (tmp_path / "goals").glob("cute-*.json")
    g = json.loads(g.read_text())
    assert g["op"] == "cute" and g["mode"] == "cpu" and g["goals"] == {}  # CPU times never make a ratio
    assert set(g["times_ms"]) == {"torch_matmul"} and g["shape"] == kernel_goals.CUTE_SMOKE


def test_cute_goal_notes_a_missing_dsl_and_times_nothing(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cutlass" else real(name, *a))
    monkeypatch.setenv("WB_CUTE_AOT", str(tmp_path))  # and no ahead-of-time build there
    why = kernel_goals.cute_missing()
    assert why and "nvidia-cutlass-dsl is not installed" in why and "python -m kernels._cute_aot" in why
    assert "out/cute-aot" in why

    class Run:
        goals: dict = {"goals": {}}
        notes: list = []

        def time(self, *a, **k):
            pytest.fail("timed without the DSL")

        def save(self):
            pass

    run = Run()
    kernel_goals.cute_goals(run, gpu=True)
    assert run.notes == [why] and run.goals["goals"] == {}
