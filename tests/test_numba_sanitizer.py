"""The Numba CUDA simulator hooks: poisoned shared memory, and memcheck / racecheck / initcheck under sanitizing.

Each known-wrong kernel here is the classic mistake a learner makes (a missing barrier, a plain read-modify-write
where an atomic belongs, a tile that is not zero-filled, a missing bounds check), and the test checks the report
names it: the tool, the array, the threads, blocks and source lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import workbench as wb
from tests.conftest import ROOT, requires_cpu_mode, subprocess_env
from workbench._sanitize import sanitizing
from workbench.cuda.errors import MemcheckError, RaceError, SanitizerError, UninitializedError
from workbench.practice.exercises import exercise, exercises
from workbench.practice.learner_code import load_entry
from workbench.practice.starters import solution_text

pytestmark = requires_cpu_mode

if wb.mode() == "cpu":
    from numba import cuda, float32, float64, int32, int64
    from numba.core.types import float16

    from workbench import _numba_sim as sim


def line_of(path: Path, text: str) -> int:
    """Return the 1-based line of the only line of ``path`` containing ``text``."""
    hits = [i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def edited(src: Path, tmp_path: Path, name: str, replacements: list[tuple[str, str]]) -> Path:
    """Write a copy of ``src`` with each (old, new) replaced once: a learner's wrong answer, as a file.

    An exercise's solution is read as a learner sees it (without its learner-region markers and starter lines).
    """
    text = solution_text(src)
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    out = tmp_path / f"{name}.py"
    out.write_text(text)
    return out


def lines_of(err: SanitizerError) -> set[int]:
    return {a["line"] for r in err.records for a in (r["first"], r["second"])}


# --------------------------------------------------------------------------------------- poisoned memory
def test_shared_memory_starts_poisoned_for_every_dtype_and_every_block():
    @cuda.jit
    def read_unwritten(f32, f64, f16, i32, i64, flag):
        a = cuda.shared.array(4, float32)
        b = cuda.shared.array(4, float64)
        c = cuda.shared.array(4, float16)
        d = cuda.shared.array(4, int32)
        e = cuda.shared.array(4, int64)
        t, blk = cuda.threadIdx.x, cuda.blockIdx.x
        if blk == 0:  # block 0 writes; block 1 must not see it (every block has its own shared memory)
            a[t] = 1.0
            d[t] = 1
        cuda.syncthreads()
        f32[blk, t], f64[blk, t], f16[blk, t], i32[blk, t], i64[blk, t] = a[t], b[t], c[t], d[t], e[t]
        flag[blk, t] = 1

    outs = [np.zeros((2, 4), dt) for dt in (np.float32, np.float64, np.float16, np.int32, np.int64)]
    flag = np.zeros((2, 4), np.int32)
    read_unwritten[2, 4](*outs, flag)
    f32, f64, f16, i32, i64 = outs
    assert (f32[0] == 1).all() and (i32[0] == 1).all()
    assert np.isnan(f32[1]).all() and np.isnan(f64).all() and np.isnan(f16).all()
    assert sim.is_poison(f32[1]).all() and sim.is_poison(f64).all() and sim.is_poison(f16).all()
    assert (i32[1] == 0x7FFF7FFF).all() and (i64 == 0x7FFF7FFF7FFF7FFF).all()
    # the poison is not the checker's own (unwritten outputs), so the two stay apart
    assert not sim.is_poison(wb.registry.poison_(torch.empty(4)).numpy()).any()


def test_local_and_dynamic_shared_arrays_start_poisoned():
    @cuda.jit
    def read_unwritten(out_local, out_dyn):
        loc = cuda.local.array(3, float32)
        dyn = cuda.shared.array(0, float32)
        t = cuda.threadIdx.x
        out_local[t] = loc[2]
        out_dyn[t] = dyn[t]

    a, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    read_unwritten[1, 4, 0, 16](a, b)
    assert sim.is_poison(a).all() and sim.is_poison(b).all()


def test_two_shared_arrays_on_one_line_do_not_alias():
    @cuda.jit
    def two_on_a_line(out):
        a = cuda.shared.array(4, float32); b = cuda.shared.array(4, float32)  # noqa: E702  (the point)
        t = cuda.threadIdx.x
        a[t] = 1.0
        b[t] = 2.0
        cuda.syncthreads()
        out[t] = a[t] * 10 + b[t]

    out = np.zeros(4, np.float32)
    two_on_a_line[1, 4](out)
    assert (out == 12).all()


# ---------------------------------------------------------------------------------------------- racecheck
def test_racy_counter_is_a_race_and_the_atomic_counter_is_not():
    @cuda.jit
    def racy(c):
        c[0] = c[0] + 1

    @cuda.jit
    def atomic(c):
        cuda.atomic.add(c, 0, 1)

    c = np.zeros(1, np.int32)
    racy[4, 8](c)  # unchecked: the simulator gives 32, the right answer by luck
    with sanitizing(), pytest.raises(RaceError) as info:
        racy[4, 8](c)
    err = info.value
    line = racy.py_func.__code__.co_firstlineno + 2
    scopes = {r["scope"]: r for r in err.records}
    assert set(scopes) == {"block", "grid"}
    waw = scopes["block"]  # two threads of one block store to c[0] with no barrier between
    assert (waw["hazard"], waw["space"], waw["array"], waw["index"]) == ("WAW", "global", "c", (0,))
    assert waw["first"]["thread"] == (0, 0, 0) and waw["second"]["thread"] == (1, 0, 0)
    assert waw["first"]["line"] == waw["second"]["line"] == line
    assert waw["read_modify_write"] and "read-modify-write" in str(err)  # both threads read c[0] first
    across = scopes["grid"]  # and what block 0 wrote, block 1 reads: blocks are never ordered
    assert across["first"]["block"] == (0, 0, 0) and across["second"]["block"] == (1, 0, 0)
    assert err.total == 5 and err.tool == "racecheck"  # 4 blocks x 1 interval, + the cross-block hazard
    assert "racy" in str(err) and f"{Path(__file__).name}:{line}" in str(err) and "atomic" in str(err)
    c[0] = 0
    with sanitizing():
        atomic[4, 8](c)
    assert c[0] == 32


def test_race_verdict_is_the_same_on_every_run():
    @cuda.jit
    def shift_left(x):  # in place: thread i reads x[i + 1] while thread i + 1 writes it (WAR)
        i = cuda.threadIdx.x
        if i < x.size - 1:
            x[i] = x[i + 1]

    seen = set()
    for _ in range(3):
        with sanitizing(), pytest.raises(RaceError) as info:
            shift_left[1, 16](np.arange(16, dtype=np.float32))
        seen.add(json.dumps([info.value.total, info.value.records], default=str))
    assert len(seen) == 1
    r = info.value.records[0]
    assert r["hazard"] == "WAR" and r["first"]["access"] == "read" and r["second"]["access"] == "write"
    assert (r["index"], r["first"]["thread"], r["second"]["thread"]) == ((1,), (0, 0, 0), (1, 0, 0))


def test_shared_histogram_with_atomics_and_barriers_is_clean():
    @cuda.jit
    def hist(ids, out):
        h = cuda.shared.array(8, int32)
        t = cuda.threadIdx.x
        if t < 8:
            h[t] = 0
        cuda.syncthreads()
        cuda.atomic.add(h, ids[t], 1)
        cuda.atomic.max(h, 7, 0)
        cuda.syncthreads()
        if t < 8:
            out[t] = h[t]

    ids = (np.arange(32) % 5).astype(np.int32)
    out = np.zeros(8, np.int32)
    with sanitizing():
        hist[1, 32](ids, out)
    assert out.tolist() == [7, 7, 6, 6, 6, 0, 0, 0]


# ---------------------------------------------------------------------------------------------- initcheck
def test_atomic_on_a_counter_nobody_zeroed_is_an_uninitialized_read():
    @cuda.jit
    def hist(ids, out):
        h = cuda.shared.array(8, int32)
        t = cuda.threadIdx.x
        cuda.atomic.add(h, ids[t], 1)  # the classic: the zeroing loop is missing
        cuda.syncthreads()
        if t < 8:
            out[t] = h[t]

    with sanitizing(), pytest.raises(UninitializedError) as info:
        hist[1, 8](np.zeros(8, np.int32), np.zeros(8, np.int32))
    r = info.value.records[0]
    assert (r["space"], r["array"], r["index"], r["thread"]) == ("shared", "h", (0,), (0, 0, 0))
    assert r["line"] == hist.py_func.__code__.co_firstlineno + 4


def test_dynamic_shared_memory_is_checked_too():
    @cuda.jit
    def reads_dyn(out):
        buf = cuda.shared.array(0, float32)
        t = cuda.threadIdx.x
        buf[t] = t
        cuda.syncthreads()
        out[t] = buf[t] + buf[t + 4]  # buf[t + 4] is past what the threads wrote, inside the 64 bytes

    with sanitizing(), pytest.raises(UninitializedError) as info:
        reads_dyn[1, 4, 0, 64](np.zeros(4, np.float32))
    assert {r["array"] for r in info.value.records} == {"buf"} and info.value.total == 4
    with sanitizing(), pytest.raises(MemcheckError, match="buf"):
        reads_dyn[1, 4, 0, 16](np.zeros(4, np.float32))  # 16 bytes = 4 floats: buf[t + 4] is out of bounds


# ----------------------------------------------------------------------------------------------- memcheck
def test_missing_bounds_check_is_reported_per_thread_block_and_line():
    @cuda.jit
    def add(x, y, out, n):
        i = cuda.grid(1)
        out[i] = x[i] + y[i]  # no `if i < n`

    n = 10
    x, y, out = (np.ones(n, np.float32) for _ in range(3))
    with pytest.raises(IndexError):  # unchecked, the simulator's own error
        add[2, 8](x, y, out, n)
    with sanitizing(), pytest.raises(MemcheckError) as info:
        add[2, 8](x, y, out, n)
    err = info.value
    assert err.total == 18 and err.tool == "memcheck"  # 6 threads x (read x, read y, write out)
    line = add.py_func.__code__.co_firstlineno + 3
    first = err.records[0]
    assert (first["space"], first["array"], first["index"], first["shape"]) == ("global", "x", (10,), (10,))
    assert (first["block"], first["thread"], first["line"], first["kind"]) == ((1, 0, 0), (2, 0, 0), line, "read")
    assert {(r["array"], r["kind"]) for r in err.records} == {("x", "read"), ("y", "read"), ("out", "write")}
    assert "add" in str(err) and f":{line}" in str(err) and "outside its shape (10,)" in str(err)


def test_negative_and_shared_and_local_indices_are_bounds_checked():
    @cuda.jit
    def neg(out):
        i = cuda.threadIdx.x
        out[i - 1] = 1.0  # numpy would wrap out[-1] to the last element

    @cuda.jit
    def shared_oob(out):
        s = cuda.shared.array((4, 4), float32)
        t = cuda.threadIdx.x
        s[0, t] = 1.0  # t = 4 is past the row (numpy would raise; a GPU writes the next row)
        out[0] = 0.0

    @cuda.jit
    def local_oob(out):
        acc = cuda.local.array(4, float32)
        for j in range(5):
            acc[j] = 0.0
        out[0] = acc[0]

    with sanitizing(), pytest.raises(MemcheckError, match="negative index") as info:
        neg[1, 4](np.zeros(4, np.float32))
    assert info.value.total == 1 and info.value.records[0]["index"] == (-1,)
    with sanitizing(), pytest.raises(MemcheckError) as info:
        shared_oob[1, 5](np.zeros(1, np.float32))
    r = info.value.records[0]
    assert (r["space"], r["array"], r["index"], r["shape"], r["thread"]) == ("shared", "s", (0, 4), (4, 4), (4, 0, 0))
    with sanitizing(), pytest.raises(MemcheckError) as info:
        local_oob[1, 2](np.zeros(1, np.float32))
    assert {(r["space"], r["array"], r["index"]) for r in info.value.records} == {("local", "acc", (4,))}
    assert info.value.total == 2


def test_an_exception_after_an_out_of_bounds_read_reports_the_read():
    @cuda.jit
    def gather(idx, x, out):
        i = cuda.threadIdx.x
        j = idx[i + 1]  # past idx for the last thread: the read gives 0 under memcheck and the kernel goes on
        out[i] = x[j] + 8 // int(j)  # ... into a ZeroDivisionError, which the memcheck report explains

    with sanitizing(), pytest.raises(MemcheckError, match="then the kernel raised") as info:
        gather[1, 4](np.arange(1, 5, dtype=np.int32), np.ones(8, np.float32), np.zeros(4, np.float32))
    assert info.value.records[0]["array"] == "idx" and info.value.records[0]["index"] == (4,)


def test_a_loop_running_off_an_array_is_stopped_and_reported():
    @cuda.jit
    def run_off(x, out):
        s = float32(0.0)
        for j in range(10 * sim._MAX_OOB):  # the bound should have been x.size
            s += x[j]
        out[0] = s

    with sanitizing(), pytest.raises(MemcheckError, match="stopped after") as info:
        run_off[1, 1](np.ones(10, np.float32), np.zeros(1, np.float32))
    assert info.value.total == sim._MAX_OOB and info.value.records[0]["index"] == (10,)


# ----------------------------------------------------------------------------------- the exercises' lessons
GEMM_SMEM = ROOT / "kernels/gemm/ex_smem_solution.py"


def gemm_inputs(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)


def test_gemm_smem_solution_is_clean_and_a_missing_barrier_is_a_race(tmp_path):
    a, b = gemm_inputs(9, 18, 20)  # the exercise's shape: K = 20 is two 16-wide tiles
    with sanitizing():
        c = load_entry(GEMM_SMEM, "gemm")(a, b)
    torch.testing.assert_close(c, a @ b)

    second = "            acc += sa[ty, i] * sb[i, tx]\n        cuda.syncthreads()\n"
    path = edited(GEMM_SMEM, tmp_path, "no_second_barrier", [(second, "            acc += sa[ty, i] * sb[i, tx]\n")])
    with sanitizing(), pytest.raises(RaceError) as info:
        load_entry(path, "gemm")(a, b)
    err = info.value
    read, write_a = line_of(path, "acc += sa[ty, i]"), line_of(path, "sa[ty, tx] =")
    hazards = {(r["hazard"], r["array"]) for r in err.records}
    assert ("WAR", "sa") in hazards  # the next tile's store lands while others still read this one
    war = next(r for r in err.records if r["array"] == "sa")
    assert (war["first"]["access"], war["first"]["line"]) == ("read", read)
    assert (war["second"]["access"], war["second"]["line"]) == ("write", write_a)
    assert war["first"]["block"] == war["second"]["block"] and war["first"]["thread"] != war["second"]["thread"]
    assert f"no_second_barrier.py:{read}" in str(err) and "cuda.syncthreads()" in str(err)

    first = "        cuda.syncthreads()\n        for i in range(TILE):"
    path = edited(GEMM_SMEM, tmp_path, "no_first_barrier", [(first, "        for i in range(TILE):")])
    with sanitizing(), pytest.raises(RaceError) as info:
        load_entry(path, "gemm")(a, b)
    r = info.value.records[0]
    assert r["hazard"] == "RAW" and (r["first"]["access"], r["second"]["access"]) == ("write", "read")


def test_gemm_smem_without_zero_fill_gives_nan_and_an_uninitialized_read(tmp_path):
    path = edited(GEMM_SMEM, tmp_path, "no_zero_fill", [
        ("        sa[ty, tx] = float32(a[row, k0 + tx]) if row < m and k0 + tx < k else float32(0.0)\n",
         "        if row < m and k0 + tx < k:\n            sa[ty, tx] = a[row, k0 + tx]\n"),
        ("        sb[ty, tx] = float32(b[k0 + ty, col]) if k0 + ty < k and col < n else float32(0.0)\n",
         "        if k0 + ty < k and col < n:\n            sb[ty, tx] = b[k0 + ty, col]\n")])
    gemm = load_entry(path, "gemm")
    a, b = gemm_inputs(9, 18, 5)  # K smaller than one tile: the tile's tail is never loaded
    c = gemm(a, b)  # unchecked: the poisoned tail turns every output into NaN
    assert torch.isnan(c).all()
    with sanitizing(), pytest.raises(UninitializedError) as info:
        gemm(a, b)
    r = info.value.records[0]
    assert (r["space"], r["array"], r["index"], r["thread"], r["block"]) == \
        ("shared", "sa", (0, 5), (0, 0, 0), (0, 0, 0))
    assert r["line"] == line_of(path, "acc += sa[ty, i]")
    assert {r["array"] for r in info.value.records} <= {"sa", "sb"}


def test_moe_align_solution_is_clean_and_a_plain_slot_claim_is_a_race(tmp_path):
    src = ROOT / "kernels/moe/ex_align_solution.py"
    ids = torch.tensor([[3, 1], [3, 2], [3, 1], [0, 3]], dtype=torch.int32)  # expert 3 four times, expert 1 twice
    with sanitizing():
        sorted_ids, expert_ids, n_padded = load_entry(src, "moe_align")(ids, 4, 4)
    assert n_padded.item() == 16 and sorted(sorted_ids[12:16].tolist()) == [0, 2, 4, 7]

    claim = "        pos = cuda.atomic.add(cursor, ids[s], 1)\n"
    plain = "        e = ids[s]\n        pos = cursor[e]\n        cursor[e] = pos + 1\n"
    path = edited(src, tmp_path, "plain_claim", [(claim, plain)])
    with sanitizing(), pytest.raises(RaceError) as info:
        load_entry(path, "moe_align")(ids, 4, 4)
    err = info.value
    cursor = [r for r in err.records if r["array"] == "cursor"]
    assert cursor and {r["space"] for r in cursor} == {"shared"}
    assert all(r["hazard"] == "WAW" and r["read_modify_write"] for r in cursor)  # the claim is not atomic
    assert {r["index"] for r in cursor} == {(1,), (3,)}  # the experts two threads claim from
    assert lines_of(err) & {line_of(path, "pos = cursor[e]"), line_of(path, "cursor[e] = pos + 1")}
    assert {a["line"] for r in cursor for a in (r["first"], r["second"])} <= \
        {line_of(path, "pos = cursor[e]"), line_of(path, "cursor[e] = pos + 1")}
    assert "align_kernel" in str(err).splitlines()[0] and "cursor[" in str(err).splitlines()[1]


# ------------------------------------------------------------------------- every correct numba kernel, clean
SMALL = {"vecadd": [{"N": 1025}], "gemm": [{"M": 17, "N": 33, "K": 20}], "softmax": [{"M": 3, "N": 70}],
         "attention": [{"B": 1, "H": 1, "Sq": 33, "Sk": 40, "D": 16, "causal": True}],  # 2 row blocks, 1-2 key tiles
         "moe": [{"T": 3, "d": 33, "I": 20, "E": 8, "top_k": 2}]}
NUMBA_VARIANTS = [(op, v.name) for op in wb.ops() for v in wb.variants(op) if v.backend == "numba"]


@pytest.mark.parametrize(("op", "name"), NUMBA_VARIANTS, ids=[f"{o}/{n}" for o, n in NUMBA_VARIANTS])
def test_every_correct_numba_variant_runs_clean_under_sanitizing(op, name):
    v = wb.variant(op, name)
    shapes = SMALL.get(op) or [next(s for s in wb.get_op(op).check_shapes if v.why_not_here(shape=s) is None)]
    with sanitizing():
        report = wb.check(v, shapes=shapes, dtypes=[v.dtypes[0]], seeds=(0,))
    assert report, str(report)


NUMBA_EXERCISES = [x for x in exercises() if "numba" in exercise(x).solution_file.read_text()]


@pytest.mark.parametrize("ex_id", NUMBA_EXERCISES)
def test_every_numba_exercise_solution_runs_clean_under_sanitizing(ex_id):
    ex = exercise(ex_id)
    with sanitizing():
        report = wb.check(load_entry(ex.solution_file, ex.entry), ex.op, **ex.check_kw)
    assert report, str(report)


def test_the_numba_exercises_are_the_ones_this_file_names():
    assert {"gemm-smem-tiling", "moe-align-block-size"} <= set(NUMBA_EXERCISES)


# -------------------------------------------------------------------------------------------- cost, hooks
def test_sanitizing_costs_a_small_factor_on_a_memory_bound_kernel():
    @cuda.jit
    def reduce_rows(x, out, n):
        s = cuda.shared.array(32, float32)
        t = cuda.threadIdx.x
        s[t] = x[t]
        cuda.syncthreads()
        acc = float32(0.0)
        for i in range(n):
            acc += s[(t + i) % 32] * x[(t + 3 * i) % 32]
        out[t] = acc

    x, out = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)

    def best(on: bool) -> float:
        """The least CPU time of five launches: the process's CPU time, which other processes' load (a parallel
        test run) does not stretch as it stretches wall time (74 ms against 11 ms once, by the clock, under load)."""
        times = []
        for _ in range(5):
            t0 = time.process_time()
            with sanitizing(on):
                reduce_rows[1, 32](x, out, 300)
            times.append(time.process_time() - t0)
        return min(times)

    plain, checked = best(False), best(True)
    assert checked < 6 * plain, f"sanitized {checked * 1e3:.0f} ms vs {plain * 1e3:.0f} ms unchecked, of CPU"


def test_simulator_changes_fail_loudly():
    kmod, api = sys.modules[sim._KERNEL_MOD], sys.modules[sim._API_MOD]
    sim._check_internals(kmod, api)  # the installed numba-cuda is what the hooks were written for

    class Shared:  # a release whose shared allocator took other arguments
        def __init__(self, dynshared_size):
            self._allocations, self._dynshared, self._dynshared_size = {}, None, dynshared_size

        def array(self, shape, dtype, alignment=None, order="C"):
            raise AssertionError

    changed = types.SimpleNamespace(**{k: getattr(api, k) for k in dir(api) if not k.startswith("__")})
    changed.FakeCUDAShared = Shared
    with pytest.raises(sim.SimulatorChanged, match=r"FakeCUDAShared\.array\(self, shape, dtype, alignment\)") as e:
        sim._check_internals(kmod, changed)
    assert "numba-cuda==" in str(e.value) and "_numba_sim.py" in str(e.value)


HOOK_CHILD = textwrap.dedent("""
    import json
    from numba import cuda, float32  # numba's simulator first (NUMBA_ENABLE_CUDASIM=1), then the workbench
    import workbench
    from workbench import _numba_sim

    @cuda.jit
    def k(out):
        s = cuda.shared.array(1, float32)
        out[0] = s[0]

    import numpy as np
    out = np.zeros(1, np.float32)
    k[1, 1](out)
    print("RESULT " + json.dumps({"installed": _numba_sim.installed(), "nan": bool(np.isnan(out[0]))}))
""")


def test_hooks_install_whether_numba_comes_before_or_after_workbench():
    assert sim.installed()  # here conftest imported workbench first: the post-import hook did it
    env = subprocess_env(WORKBENCH_MODE="cpu", NUMBA_ENABLE_CUDASIM="1")
    p = subprocess.run([sys.executable, "-c", HOOK_CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    assert json.loads(line[-1][7:]) == {"installed": True, "nan": True}
