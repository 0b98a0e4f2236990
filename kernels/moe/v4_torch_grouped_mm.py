"""MoE with ``torch._grouped_mm``: one grouped GEMM launch per projection instead of one GEMM per expert.

The torch loop runs two matmuls per expert hit (16 launches for E = 8, top_k = 2, up to 2E for bigger models) and a
host sync to find which experts were hit. Here the routed slots are sorted by expert once, so each expert's rows
are contiguous in a permuted copy of x, and ``torch._grouped_mm(x_perm, w1.transpose(-2, -1), offs=offs)`` runs
every expert's ``x_e @ w1[e].T`` in one launch: ``offs`` (int32, the cumulative row counts) tells it where each
expert's group ends, and an expert with no rows is an empty group. Then SiLU-and-mul, the second grouped GEMM
against ``w2``, and a weighted ``index_add_`` back into token order (the top-k combine, in fp32).

What it costs next to the fused Triton kernel (``moe/triton_fused``): the permuted copy of x (T*k*d elements
written and read again), the [T*k, 2I] gate/up activations written and read back for SwiGLU (at T = 4096, k = 2,
I = 14336 in bf16: 470 MB each way), and separate launches for the elementwise steps. What it gains: no padding
to a block size, no custom kernels, and on a GPU PyTorch's CUTLASS grouped GEMM.

``torch._grouped_mm`` is a private API (PyTorch 2.8+) and what it accepts depends on the build: the variant is only
registered where torch has it, and ``supports`` probes the call once per (device, dtype, shape class). Found on
PyTorch 2.13 (CPU): float32, float16 and bfloat16 all work, but every operand's row stride must be a multiple of
16 bytes, so d and I must be multiples of 16 / element size (4 in float32, 8 in float16/bfloat16); otherwise it
raises "strides should be multiple of 16 bytes". The transposed weight views themselves are fine (their unit
stride is along d or I; their other strides are d and I elements again).
"""

from __future__ import annotations

import functools

import torch

from kernels.moe.reference import DTYPES, route, swiglu
from workbench import MODE, UnsupportedHere, empty, register

_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


@functools.cache
def _probe(device: str, dtype: torch.dtype, d: int, i: int) -> str | None:
    """Return None when this torch runs both grouped GEMMs for d and I on ``device``, else its first error line.

    The probe is tiny (two experts, one of them empty, three rows); ``supports`` calls it with d and I reduced to
    their class mod 16, so one probe answers for every shape that has the same alignment.
    """
    dev = torch.device(device)
    x = torch.zeros(3, d, dtype=dtype, device=dev)
    w1 = torch.zeros(2, 2 * i, d, dtype=dtype, device=dev)
    w2 = torch.zeros(2, d, i, dtype=dtype, device=dev)
    offs = torch.tensor([0, 3], dtype=torch.int32, device=dev)  # expert 0 empty, expert 1 three rows
    try:
        h = torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs)
        torch._grouped_mm(h[:, :i].contiguous(), w2.transpose(-2, -1), offs=offs)
    except (RuntimeError, NotImplementedError, ValueError) as e:
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return None


def _device() -> str:
    return "cuda" if MODE == "gpu" else "cpu"


def _class(n: int) -> int:
    return 16 + n % 16  # same residue mod 16 (so the same byte alignment in every dtype), never 0


def _why_not(dtype: torch.dtype, d: int, i: int) -> str | None:
    why = _probe(_device(), dtype, _class(d), _class(i))
    if why is None:
        return None
    esize = torch.empty(0, dtype=dtype).element_size()
    return (f"moe/torch_grouped_mm: torch._grouped_mm (torch {torch.__version__}, {_device()}) refuses d={d}, I={i} "
            f"in {_NAMES[dtype]}: {why} (row strides must be multiples of 16 bytes: d and I multiples of "
            f"{16 // esize} in {_NAMES[dtype]})")


def _supports(shape: dict, dtype: torch.dtype | None = None) -> str | None:
    """Refuse a shape (at ``dtype``) that this torch's grouped GEMM cannot run; None otherwise.

    With a dtype (the registry passes it when it knows it) the probe answers for that dtype. Without one, the
    shape is refused when any dtype the device takes refuses it (the alignment rule is in bytes: d = I = 20 runs
    in float32 but not in float16).
    """
    d, i = int(shape["d"]), int(shape["I"])
    if dtype is not None:
        never = _probe(_device(), dtype, 16, 16)
        if never:
            return (f"moe/torch_grouped_mm: torch._grouped_mm (torch {torch.__version__}) does not take "
                    f"{_NAMES[dtype]} on {_device()}: {never}")
        return _why_not(dtype, d, i)
    taken = [dt for dt in DTYPES if _probe(_device(), dt, 16, 16) is None]
    if not taken:
        why = _probe(_device(), DTYPES[0], 16, 16)
        return f"moe/torch_grouped_mm: torch._grouped_mm does not run on {_device()} in any dtype here ({why})"
    for dt in taken:
        why = _why_not(dt, d, i)
        if why:
            return why
    return None


def _run(x: torch.Tensor, router_logits: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, top_k: int,
         renormalize: bool = True) -> torch.Tensor:
    t, d = x.shape
    e, two_i, _ = w1.shape
    i = two_i // 2
    never = _probe(_device(), x.dtype, 16, 16)
    if never:
        raise UnsupportedHere(f"moe/torch_grouped_mm: torch._grouped_mm (torch {torch.__version__}) does not take "
                              f"{_NAMES[x.dtype]} on {_device()}: {never}")
    why = _why_not(x.dtype, d, i)
    if why:
        raise UnsupportedHere(why)
    if t == 0:
        return empty((0, d), x.dtype, x.device)
    if i == 0:  # experts without hidden units output zeros (and a 0-wide grouped GEMM is refused for its stride)
        return torch.zeros((t, d), dtype=x.dtype, device=x.device)
    weights, ids = route(router_logits, top_k, renormalize)  # fp32 weights [T,k], int64 ids [T,k]
    flat = ids.reshape(-1)
    order = torch.sort(flat, stable=True).indices  # slot indices grouped by expert
    token = order // top_k
    offs = torch.cumsum(torch.bincount(flat, minlength=e), 0).to(torch.int32)  # group ends; empty groups repeat
    x_perm = x[token]  # [T*k, d]: the permuted copy the fused kernel avoids
    h = torch._grouped_mm(x_perm, w1.transpose(-2, -1), offs=offs)  # [T*k, 2I] in x's dtype
    a = swiglu(h, x.dtype)  # a new contiguous [T*k, I]: the next grouped GEMM needs a 16-B row stride
    y = torch._grouped_mm(a, w2.transpose(-2, -1), offs=offs)  # [T*k, d]
    out = torch.zeros((t, d), dtype=torch.float32, device=x.device)
    out.index_add_(0, token, y.float() * weights.reshape(-1)[order, None])  # top-k combine in fp32
    return out.to(x.dtype)


if hasattr(torch, "_grouped_mm"):
    torch_grouped_mm = register(
        "moe", "torch_grouped_mm", backend="torch", supports=_supports,
        idea="Sort slots by expert, torch._grouped_mm for gate/up and down (one launch each), index_add combine.",
    )(_run)
