"""MXFP4 GEMM with Triton's ``tl.dot_scaled``: packed e2m1 codes and e8m0 scales handed to one instruction.

``tl.dot_scaled(a, a_scale, "e2m1", b, b_scale, "e2m1", acc)`` takes the operands as stored: ``a`` a [BM, BK/2]
tile of bytes (two values each, low nibble first, packed along K), ``b`` a [BK/2, BN] tile (a transposed view
of the weight's rows, packed along K), and one e8m0 byte per 32 values for each row of a and of b
([BM, BK/32], [BN, BK/32]: b's scales are *not* transposed).

* **sm_100 (Blackwell)**: native. The block-scaled tensor-core MMA (``tcgen05.mma`` with ``kind::mxf4``) reads
  the codes and the scales itself; FP4 runs at twice the FP8 rate.
* **sm_90 (Hopper)**: emulated. Hopper's tensor cores have no FP4 or block scales, so Triton upcasts both tiles
  to bf16 in registers (decode, times the scale) and runs an ordinary bf16 wgmma: correct, at bf16 speed at
  best, and the decode costs extra instructions per element. ``wb.inspect`` of this variant compiles for sm_90
  and shows the bf16 HGMMA; ``triton_decode`` is the same idea written out.
* **cpu mode**: refused. The Triton interpreter (3.7) has no ``dot_scaled``: its builder lacks
  ``create_dot_scaled``, so the call fails inside the interpreter. ``triton_decode`` runs there instead.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._launch import triton_spec
from workbench import empty, register

from .reference import OP_NAME, validate


@triton.jit
def mxfp4_dot_scaled_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                            BK: tl.constexpr):
    # a: [M, K/2] bytes, as: [M, K/32]; b: [N, K/2] bytes, bs: [N, K/32]; c: [M, N] bf16. K % BK == 0 here
    # (the launcher picks BK to divide K: K is a multiple of 32, so BK = 32 always works).
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rkb = tl.arange(0, BK // 2)  # bytes of one K step
    rks = tl.arange(0, BK // 32)  # scales of one K step
    kb = K // 2
    ks = K // 32
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * kb + (k0 // 2 + rkb)[None, :], mask=rm[:, None] < M, other=0)
        b = tl.load(b_ptr + rn[None, :] * kb + (k0 // 2 + rkb)[:, None], mask=rn[None, :] < N, other=0)
        sa = tl.load(as_ptr + rm[:, None] * ks + (k0 // 32 + rks)[None, :], mask=rm[:, None] < M, other=127)
        sb = tl.load(bs_ptr + rn[:, None] * ks + (k0 // 32 + rks)[None, :], mask=rn[:, None] < N, other=127)
        acc = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


CFG = {"BM": 128, "BN": 128, "BK": 128}  # 64 bytes of codes and 4 scales per row per K step


def _spec() -> dict:
    # The GPU launch at the bench shapes (N, K multiples of 16), for wb.inspect on sm_90: the emulated path.
    return triton_spec(mxfp4_dot_scaled_kernel, torch.uint8, types={"c_ptr": torch.bfloat16},
                       divisible_ints=["N", "K"], **CFG, num_warps=8, num_stages=3)


@register(OP_NAME, "triton_dot_scaled", backend="triton", gpu_only=True, bf16_dot=False, inspect_spec=_spec,
          gpu_note="the Triton interpreter has no tl.dot_scaled (its builder lacks create_dot_scaled); "
                   "on a GPU it is native on sm_100 and emulated by a bf16 upcast on sm_90",
          idea="tl.dot_scaled on packed e2m1 + e8m0 scales: native block-scaled MMA on sm_100, a bf16 upcast on "
               "Hopper.")
def triton_dot_scaled(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor
                      ) -> torch.Tensor:
    shape = validate(a, a_scale, b, b_scale)
    m, n, k = shape["M"], shape["N"], shape["K"]
    c = empty((m, n), torch.bfloat16, a.device)
    if c.numel() == 0 or k == 0:
        return c.zero_() if c.numel() else c
    bk = next(x for x in (CFG["BK"], 64, 32) if k % x == 0)
    grid = (triton.cdiv(m, CFG["BM"]), triton.cdiv(n, CFG["BN"]))
    mxfp4_dot_scaled_kernel[grid](a, a_scale, b, b_scale, c, m, n, k, BM=CFG["BM"], BN=CFG["BN"], BK=bk,
                                  num_warps=8, num_stages=3)
    return c


def compiled_ptx(cc: int = 100) -> str:
    """Return the PTX Triton makes of this variant's GPU launch for compute capability ``cc`` (100: sm_100a).

    ``wb.inspect`` compiles for the architectures of ``workbench/cuda/arch.py``, which stop at sm_90; Triton itself
    targets Blackwell too (it ships ptxas for sm_100), so this compiles the same spec as ``wb.inspect`` does,
    without a GPU: at ``cc=100`` the K loop is ``tcgen05.mma ... kind::mxf4.block_scale`` (codes and scales
    straight to the tensor cores), at ``cc=90`` a decode to bf16 and ``wgmma ... bf16.bf16``.
    """
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    from workbench.inspection import _jit_stdlib, divisible_by_16  # the compile wb.inspect runs, any target

    spec = _spec()
    fn = spec["fn"] if isinstance(spec["fn"], JITFunction) else JITFunction(spec["fn"].fn)
    attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k in divisible_by_16(spec)}
    with _jit_stdlib(fn.fn):
        k = triton.compile(ASTSource(fn, dict(spec["signature"]), dict(spec["constexprs"]), attrs),
                           target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": spec["num_warps"], "num_stages": spec["num_stages"]})
    return k.asm["ptx"]
