"""Triton code written as the tutorials write it runs unchanged in cpu mode (workbench/_triton_gate.py).

The kernels here are written for these tests in the tutorials' style: a vector add launched on
``driver.active.get_active_torch_device()``, a persistent fused softmax sized from the device properties and
``warmup()``'s register count, and a grouped-order matmul under ``@triton.autotune``. Sizes are tiny: the
interpreter takes about a millisecond per program.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import triton
import triton.language as tl

import workbench  # noqa: F401  (cpu mode: installs the interpreter fixes and the reference driver first)
from tests.conftest import requires_cpu_mode

pytestmark = requires_cpu_mode

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr,
                   num_stages: tl.constexpr):
    first = tl.program_id(0)
    step = tl.num_programs(0)
    for row in tl.range(first, n_rows, step, num_stages=num_stages):
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        z = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_row_stride + cols, z / tl.sum(z, axis=0), mask=mask)


def test_driver_answers_as_the_reference_gpu():
    drv = triton.runtime.driver.active
    assert DEVICE == torch.device("cpu")
    assert drv.get_current_device() == 0
    target = drv.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == ("cuda", 90, 32)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        props = drv.utils.get_device_properties(DEVICE.index)  # the tutorials pass DEVICE.index: None on cpu
    assert props["multiprocessor_count"] == 132 and props["max_shared_mem"] == 227 * 1024
    assert props["max_num_regs"] == 65536 and props["warpSize"] == 32
    assert "reference GPU" in props["source"] and "not this machine" in props["source"]
    with pytest.raises(KeyError, match="do not hold it"):
        props["mem_clock_rate"]  # noqa: B018  (not in the workbench's tables: no invented figure)


def test_vector_add_as_pasted():
    torch.manual_seed(0)
    x, y = torch.rand(1000, device=DEVICE), torch.rand(1000, device=DEVICE)
    out = torch.empty_like(x)
    assert x.device == DEVICE and out.device == DEVICE
    grid = lambda meta: (triton.cdiv(1000, meta["BLOCK_SIZE"]),)  # noqa: E731  (the tutorial's idiom)
    add_kernel[grid](x, y, out, 1000, BLOCK_SIZE=256)
    assert torch.equal(out, x + y)


def test_fused_softmax_occupancy_from_warmup():
    props = triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)
    x = torch.randn(9, 50, device=DEVICE)
    y = torch.empty_like(x)
    num_warps, num_stages, block = 4, 2, triton.next_power_of_2(50)
    kernel = softmax_kernel.warmup(y, x, x.stride(0), y.stride(0), 9, 50, BLOCK_SIZE=block, num_stages=num_stages,
                                   num_warps=num_warps, grid=(1,))
    kernel._init_handles()
    assert 0 < kernel.n_regs <= 255 and kernel.n_spills == 0
    assert kernel.metadata.shared >= 0 and kernel.metadata.num_warps == num_warps
    occupancy = props["max_num_regs"] // (kernel.n_regs * props["warpSize"] * num_warps)
    occupancy = min(occupancy, props["max_shared_mem"] // max(kernel.metadata.shared, 1))
    programs = min(props["multiprocessor_count"] * occupancy, 9)
    kernel[(programs, 1, 1)](y, x, x.stride(0), y.stride(0), 9, 50, block, num_stages)
    torch.testing.assert_close(y, torch.softmax(x, dim=1))
    with pytest.raises(ValueError, match="compiled \\(warmed up\\) with BLOCK_SIZE=64"):
        kernel[(1,)](y, x, x.stride(0), y.stride(0), 9, 50, 128, num_stages)


def test_warmup_registers_are_what_inspect_reports():
    """warmup's n_regs is ptxas's count for the same sm_90 build that workbench.inspect reads."""
    x = torch.randn(4, 32)
    k = softmax_kernel.warmup(x, x, 32, 32, 4, 32, BLOCK_SIZE=32, num_stages=1, num_warps=1, grid=(1,))
    rep = workbench.inspect(softmax_kernel, signature={"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32",
                                                       "out_row_stride": "i32", "n_rows": "i32", "n_cols": "i32"},
                            constexprs={"BLOCK_SIZE": 32, "num_stages": 1}, num_warps=1, num_stages=1,
                            args={"n_rows": 4})
    assert k.n_regs == rep.registers


def _configs():
    return [  # the first asks for 1 MiB of shared memory: an H200 refuses it, as the tutorial's autotune skips
        triton.Config({"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8},
                      num_stages=4, num_warps=8),
        triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 2},
                      num_stages=3, num_warps=4),
        triton.Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2},
                      num_stages=2, num_warps=2),
    ]


CALLS: list[str] = []


@triton.autotune(configs=_configs(), key=["M", "N", "K"], reset_to_zero=["c_ptr"],
                 prune_configs_by={"early_config_prune": lambda cfgs, nargs, **kw: cfgs})
@triton.heuristics(values={"EVEN_K": lambda args: args["K"] % args["BLOCK_SIZE_K"] == 0})
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, EVEN_K: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * num_pid_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    group_m = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + ((pid % per_group) % group_m)
    pid_n = (pid % per_group) // group_m
    rm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    rk = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        if EVEN_K:
            a, b = tl.load(a_ptrs), tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.atomic_add(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc, mask=mask)  # c must start at 0


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    c = torch.full((m, n), 7.0, device=a.device)  # reset_to_zero clears it before each config runs
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1))
    return c


def test_autotune_picks_the_first_config_that_compiles_and_runs_and_says_so():
    torch.manual_seed(0)
    a = torch.randn(40, 32, device=DEVICE, dtype=torch.float16)
    b = torch.randn(32, 24, device=DEVICE, dtype=torch.float16)
    with pytest.warns(workbench._triton_gate.CpuAutotuneNote, match="first config that runs"):
        c = matmul(a, b)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)  # ran once more after tuning: zeroed
    best = matmul_kernel.best_config
    assert best.kwargs["BLOCK_SIZE_M"] == 32 and best.num_warps == 4  # the 256x256x128 config does not fit an H200
    assert "emulated time does not rank configs" in matmul_kernel.cpu_mode_note
    (key, picked), = matmul_kernel.cache.items()
    assert key[:3] == (40, 24, 32) and picked is best
    a2 = torch.randn(16, 32, device=DEVICE, dtype=torch.float16)
    torch.testing.assert_close(matmul(a2, b), a2.float() @ b.float(), atol=1e-2, rtol=1e-2)
    assert len(matmul_kernel.cache) == 2  # a new key tunes again; the old one stays cached


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x * 2, mask=offs < n)


def test_autotune_hooks_and_restore_value_behave_as_on_a_gpu():
    seen: list[str] = []
    tuner = triton.autotune(
        configs=[triton.Config({"BLOCK": 16}, num_warps=1), triton.Config({"BLOCK": 32}, num_warps=1)],
        key=["n"], restore_value=["x_ptr"],
        pre_hook=None, post_hook=None)(scale_kernel)
    x = torch.arange(20, dtype=torch.float32)
    with pytest.warns(workbench._triton_gate.CpuAutotuneNote):
        tuner[lambda meta: (triton.cdiv(20, meta["BLOCK"]),)](x, 20)
    assert torch.equal(x, 2 * torch.arange(20, dtype=torch.float32))  # restored after the tuning run, then doubled
    hooked = triton.autotune(
        configs=[triton.Config({"BLOCK": 16}, num_warps=1), triton.Config({"BLOCK": 32}, num_warps=1)], key=["n"],
        pre_hook=lambda kw, reset_only=False: seen.append("pre"),
        post_hook=lambda kw, exception: seen.append(f"post:{exception}"))(scale_kernel)
    with pytest.warns(workbench._triton_gate.CpuAutotuneNote):
        hooked[lambda meta: (triton.cdiv(20, meta["BLOCK"]),)](x, 20)
    assert seen == ["pre", "post:None", "pre"]  # one tuning run (pre, post), then the reset-only pre before the launch
    assert hooked.best_config.kwargs == {"BLOCK": 16}


@triton.jit
def far_load(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr + 10**9))


@triton.jit
def past_end_store(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.full((BLOCK,), 1.0, tl.float32))  # no mask: BLOCK > n runs past the end


def test_unmasked_far_load_and_store_past_the_end_are_errors_not_crashes():
    from workbench.cuda.errors import MemcheckError

    x, y = torch.randn(16), torch.zeros(1)
    with pytest.raises(MemcheckError, match=r"out-of-bounds load in Triton kernel far_load \(.*test_triton_paste.py"):
        far_load[(1,)](x, y)
    z = torch.zeros(10)
    with pytest.raises(MemcheckError, match=r"past_end_store .*x_ptr \+ 10 \(element offset; x_ptr holds 10"):
        past_end_store[(1,)](z, 10, BLOCK=16)
    past_end_store[(1,)](torch.zeros(16), 16, BLOCK=16)  # the process lives on, and an in-bounds launch runs


@triton.jit
def gather_rows(table_ptr, out_ptr, BLOCK: tl.constexpr):
    # A table of tensor addresses, as the grouped-GEMM tutorial passes its groups: the rows are not arguments.
    g = tl.program_id(0)
    src = tl.load(table_ptr + g).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + g * BLOCK + offs, tl.load(src + offs))


def test_pointers_loaded_from_a_table_reach_tensors_not_passed():
    rows = [torch.full((8,), float(i)) for i in range(3)]
    table = torch.tensor([r.data_ptr() for r in rows], dtype=torch.int64)
    out = torch.zeros(24)
    gather_rows[(3,)](table, out, BLOCK=8)
    assert torch.equal(out, torch.cat(rows))
