"""Shared by the checker tests: the check shapes cheap enough to emulate, and one report per known-wrong kernel."""

from __future__ import annotations

import fcntl
import functools
import os
import pickle
import zlib
from collections.abc import Callable
from pathlib import Path

import workbench as wb
from workbench.checker import CheckReport

#: Set by tests/conftest.py for the whole run: a folder that pytest-xdist's workers share. A report computed by one
#: worker is read there by the others (test_ops.py and an op's own test file often land on different workers).
SHARED_ENV = "WORKBENCH_TEST_REPORTS"


def shared(kind: str, op: str, name: str, compute: Callable[[], object]) -> object:
    """Return ``compute()`` for (kind, op, name), computed once per test run across workers (a file lock each)."""
    folder = os.environ.get(SHARED_ENV)
    if not folder:
        return compute()
    base = Path(folder) / f"{kind}-{op}-{name}"
    with open(base.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker computing it: wait for its result, do not redo it
        done = base.with_suffix(".pickle")
        if done.exists():
            return pickle.loads(done.read_bytes())
        value = compute()
        try:
            data = pickle.dumps(value)
        except Exception:  # noqa: BLE001  (a report that cannot be pickled is kept by this worker only)
            return value
        done.with_suffix(".tmp").write_bytes(data)
        done.with_suffix(".tmp").replace(done)
        return value


def cost(op: str, shape: dict) -> int:
    """Return the product of ``shape``'s sizes along the op's shape keys (a proxy for emulation time)."""
    n = 1
    for k in wb.get_op(op).shape_keys:
        n *= int(shape.get(k, 1))
    return n


# gemm's cheap check shapes have K = 1, 9 and 64: none is one whole 32-wide K tile plus a tail, the smallest K at
# which a dropped tail is told from other mistakes (k_tail). This one (larger in elements than 17x33, so its
# diagnosis is the report's) stands in for the 127x65x129 left out.
GEMM_K_TAIL = {"M": 24, "N": 40, "K": 33}


def cheap_shapes(op: str, limit: int = 300_000) -> list[dict]:
    """The op's check shapes minus the ones too slow to emulate here (gemm 127x65x129 in the interpreter).

    moe_fp8 keeps all of them (~1 s): its I = 136 shape is the only one that exposes wrong_up_scale_row. gemm gains
    GEMM_K_TAIL in place of the shape it loses.
    """
    shapes = wb.get_op(op).check_shapes
    if op == "moe_fp8":
        return shapes
    kept = [s for s in shapes if cost(op, s) <= limit]
    return kept + [GEMM_K_TAIL] if op == "gemm" and len(kept) < len(shapes) else kept


def _q8_small(shape: dict) -> bool:
    """decode_attention_q8's three cheapest check shapes: one sequence of one token, a group of 4 over one KV head
    and one over two KV heads (D = 32): 3, 18 and 24 Triton programs a run against 102 (B = 17) and 40 (Hq = 16)."""
    return shape["B"] * shape["Hkv"] <= 4 and shape["Hq"] <= 8


#: Known-wrong kernels checked at fewer of the cheap shapes: decode_attention_q8's forgotten V scale is off by the
#: same factor at every shape (diagnosis ``scale``), shown in both code formats at its three cheapest shapes.
WRONG_SHAPES: dict[str, Callable[[dict], bool]] = {"decode_attention_q8": _q8_small}


def pinned_seed(key: str) -> int:
    """Return a probe-draw seed fixed by ``key`` (the same in every run and every worker).

    ``wb.check`` draws afresh on each call; the suite pins the draw so that a run is reproducible (a known-wrong
    kernel may also be wrong at a drawn shape, which would change its report from run to run).
    ``scripts/sweep-drawn.py`` checks the correct variants at many draws instead.
    """
    return zlib.crc32(key.encode()) % 1_000_000


def draw_seed(op: str, name: str) -> int:
    """Return the seed of the probe shapes the suite's shared check of ``op/name`` draws: fixed per kernel."""
    return pinned_seed(f"{op}/{name}")


@functools.cache
def wrong_report(op: str, name: str) -> CheckReport:
    """Check the known-wrong kernel ``op/name`` once per session: its first dtype, one seed, the cheap shapes (those
    ``WRONG_SHAPES`` keeps, for an op it names), the probe shapes of its pinned draw (:func:`draw_seed`).

    tests/test_ops.py asserts the diagnosis; an op's own test file may look closer at the same report.
    """
    v = wb.variant(op, name)
    shapes = [s for s in cheap_shapes(op) if WRONG_SHAPES.get(op, lambda s: True)(s)]
    return shared("wrong", op, name, lambda: wb.check(v, dtypes=v.dtypes[:1], seeds=(0,), shapes=shapes,
                                                      seed=draw_seed(op, name)))


# ------------------------------------------------------------------------------------------ correct variants
# Each op's check sizes, fitted to each backend's cost here. The Numba simulator runs one OS thread per CUDA
# thread (~15 us per gemm multiply-add, ~0.1 s per attention row): a handful of small shapes, fewer dtypes.
# The Triton interpreter costs ~1 ms per program; the CPU engine runs the CUDA C kernels at the op's own shapes.
CPU = wb.mode() == "cpu"
ONE = (0,)
TWO = (0, 1)


def _attn(b: int, h: int, sq: int, sk: int, d: int, causal: bool, **kw: float) -> dict:
    return {"B": b, "H": h, "Sq": sq, "Sk": sk, "D": d, "causal": causal, **kw}


GEMM_SMALL = [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 33, "K": 9}]
SOFTMAX_NUMBA = [{"M": 1, "N": 1}, {"M": 17, "N": 33}, {"M": 4, "N": 24}, {"M": 3, "N": 130}]
RMSNORM_SHAPES = [{"M": 1, "N": 1}, {"M": 17, "N": 33}, {"M": 5, "N": 7}, {"M": 4, "N": 1024}, {"M": 3, "N": 1030},
                  {"M": 8, "N": 264}]
ATTENTION_NUMBA = {
    "numba_naive": [_attn(1, 1, 5, 9, 16, True), _attn(1, 2, 3, 1, 16, False)],
    # 33 rows: two row tiles (the second skips no key tile); Sk = 40: a ragged second key tile.
    "numba_flash": [_attn(1, 1, 33, 17, 16, True), _attn(1, 1, 7, 40, 32, False, scale=0.3)],
}
# Beyond the op's check shapes, for the CUDA C kernels: several key tiles (online rescale), causal with more rows
# than keys and the reverse, head dims that need padding, explicit scales.
ATTENTION_CUDA_EXTRA = [_attn(1, 1, 70, 130, 128, True), _attn(2, 1, 130, 70, 48, True, scale=2.0),
                        _attn(1, 2, 65, 65, 17, False, scale=0.05), _attn(1, 1, 1, 200, 64, False),
                        _attn(1, 1, 3, 5, 1, True)]
# More than 64 slots per expert (two row tiles each), more than one 64-column tile of 2I and of d, ragged K.
MOE_CUDA_EXTRA = [{"T": 70, "d": 65, "I": 70, "E": 2, "top_k": 2}]
HALF_AND_SINGLE = ("float32", "float16")


def _vecadd(v: wb.Variant) -> list[dict]:
    if v.backend == "numba":  # the smallest and the largest cheap ragged shape, one dtype
        cheap = cheap_shapes("vecadd", limit=6000)
        return [{"shapes": [cheap[0], max(cheap[1:], key=lambda s: cost("vecadd", s))], "dtypes": v.dtypes[:1]}]
    return [{"shapes": cheap_shapes("vecadd")}]


def _gemm(v: wb.Variant) -> list[dict]:
    shapes = wb.get_op("gemm").check_shapes
    if v.backend == "numba" and CPU:  # 64^3 in fp32 only, fp16 on the two small shapes
        return [{"shapes": shapes[:3], "dtypes": ["float32"]}, {"shapes": GEMM_SMALL, "dtypes": ["float16"]}]
    return [{}]


def _softmax(v: wb.Variant) -> list[dict]:
    # The contract's check shapes (short rows, N = 1, ragged lengths, the vectorised M = 8, N = 264); numba in cpu
    # mode runs a thread per element, so it takes a cheaper set.
    return [{"shapes": SOFTMAX_NUMBA, "seeds": TWO}] if v.backend == "numba" and CPU else [{"seeds": TWO}]


def _attention(v: wb.Variant) -> list[dict]:
    if v.backend == "numba":
        return [{"shapes": ATTENTION_NUMBA[v.name], "seeds": ONE}] if CPU else [{"seeds": TWO}]
    if v.backend == "cuda":
        return [{"shapes": wb.get_op("attention").check_shapes + ATTENTION_CUDA_EXTRA, "seeds": TWO}]
    return [{"seeds": TWO}] if v.backend == "triton" else [{}]


def _decode_attention_q8(v: wb.Variant) -> list[dict]:
    # In the Triton interpreter a run at B = 17 (68 split and 34 merge programs, each calling jit helpers) takes 1.1
    # to 1.7 s; every shape, dtype and code format was 30 runs, 15 s. float32 (the tightest tolerance) runs every
    # check shape in both code formats; fp16 and bf16, which change only how q is read and the output written, run
    # in both formats at the three cheapest shapes.
    if v.backend != "triton":
        return [{}]
    shapes = wb.get_op("decode_attention_q8").check_shapes
    return [{"dtypes": ["float32"]}, {"dtypes": ["float16", "bfloat16"], "shapes": [s for s in shapes if _q8_small(s)]}]


def _moe(v: wb.Variant) -> list[dict]:
    if v.backend == "numba" and CPU:  # ~1 s a run: the two dtypes split between the two cases
        return [{"dtypes": ["float32"], "cases": ["random"]}, {"dtypes": ["float16"], "cases": ["one_expert"]}]
    if v.backend == "cuda":
        return [{"shapes": wb.get_op("moe").check_shapes + MOE_CUDA_EXTRA}]
    if v.backend == "triton" or v.name == "torch_grouped_mm":
        return [{"dtypes": HALF_AND_SINGLE}]
    return [{}]


RUNS = {
    "vecadd": _vecadd,
    "gemm": _gemm,
    "softmax": _softmax,
    "rmsnorm": lambda v: [{"shapes": RMSNORM_SHAPES, "seeds": TWO}],
    "attention": _attention,
    "attention_bwd": lambda v: [{"seeds": TWO}] if v.backend == "triton" else [{}],
    "moe_topk": lambda v: [{"seeds": TWO}],
    "moe_align": lambda v: [{"seeds": TWO}],
    "decode_attention_q8": _decode_attention_q8,
    "moe": _moe,
    "moe_fp8": lambda v: [{"seeds": TWO}],  # every shape: I = 136 is the one that cuts a 128-wide scale block
}


@functools.cache
def cuda_engine_ready() -> str | None:
    """Return why backend 'cuda' variants cannot run here, or None when they can.

    In cpu mode CUDA C runs on the CPU engine (workbench.cuda), which builds each kernel with a C++17 compiler: on
    a machine without one, CUDA C tests skip saying so. Anything else that stops a kernel (a compile error, a wrong
    result) fails the test, as on a GPU, where cupy compiles it.
    """
    if wb.mode() != "cpu":
        return None
    from workbench.cuda.errors import ToolchainNotFoundError
    from workbench.cuda.toolchain import find_cxx

    try:
        find_cxx()
    except ToolchainNotFoundError as e:
        return str(e)
    return None


def check_runs(op: str, v: wb.Variant) -> list[dict]:
    """Return the ``wb.check`` keywords of each run that checks the correct variant ``v`` (one seed unless said).

    The op's torch baseline runs at the op's own check shapes (tests/test_registry.py holds it to them). The draw
    of probe shapes is pinned per variant (:func:`draw_seed`).
    """
    runs = RUNS.get(op, lambda v: [{}])(v)
    if v.name == wb.variants(op, backend="torch")[0].name:  # the baseline: the op's own shapes, every dtype and case
        runs = [{}]
    elif v.backend == "cupy":  # numpy has no bfloat16: the two dtypes it runs, at the op's own shapes
        runs = [{"dtypes": HALF_AND_SINGLE}]
    return [{"seeds": ONE, "seed": draw_seed(op, v.name), **kw} for kw in runs]


@functools.cache
def variant_reports(op: str, name: str) -> tuple[CheckReport, ...]:
    """Check the correct variant ``op/name`` once per session, one report per run of :func:`check_runs`.

    tests/test_ops.py requires them to pass; an op's own test file looks closer at the same reports (dtypes,
    shapes, cases covered) without running them again.
    """
    v = wb.variant(op, name)
    return shared("variant", op, name, lambda: tuple(wb.check(v, **kw) for kw in check_runs(op, v)))


def variant_report(op: str, name: str) -> CheckReport:
    """The single report of a variant checked in one run (not the split runs: Numba's, decode_attention_q8's Triton)."""
    (rep,) = variant_reports(op, name)
    return rep
