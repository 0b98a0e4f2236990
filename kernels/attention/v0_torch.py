"""Attention in PyTorch: the materialized textbook version, and SDPA pinned to each of its backends.

``torch_sdpa`` (registered with the contract) lets PyTorch choose; the variants here pin one backend each with
``torch.nn.attention.sdpa_kernel`` so the notebook can race our kernels against every vendor path the device has:
``math`` (composite ops, materializes S), ``efficient`` (memory-efficient attention, xFormers lineage),
``flash`` (FlashAttention-2 on CUDA; a tiled C++ kernel on CPU) and ``cudnn`` (cuDNN's fused attention, Hopper+).
"""

from __future__ import annotations

import functools
import math
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from workbench import MODE, register

FP = ("float32", "float16", "bfloat16")
HALF = ("float16", "bfloat16")


@register("attention", "torch_naive", backend="torch",
          idea="Textbook attention in torch ops: S = QK^T/sqrt(D) and P = softmax(S) written to memory, O(S^2) bytes.")
def torch_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                scale: float | None = None) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)).float() * scale  # [B,H,Sq,Sk] fp32: 4*Sq*Sk bytes per head, the O(N^2) buffer
    if causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril(0)
        s = s.masked_fill(~keep, float("-inf"))
    return (torch.softmax(s, dim=-1).to(v.dtype) @ v).to(q.dtype)


@functools.cache
def _probe(backend: SDPBackend, dtype: str, sq: int, sk: int, d: int, causal: bool) -> str | None:
    """Return None when SDPA's ``backend`` accepts this problem on the device, else its reason."""
    dev = torch.device("cuda" if MODE == "gpu" else "cpu")
    dt = getattr(torch, dtype)
    q = torch.zeros(1, 1, sq, d, dtype=dt, device=dev)
    kv = torch.zeros(1, 1, sk, d, dtype=dt, device=dev)
    try:
        with warnings.catch_warnings():  # SDPA warns with each backend's reason before it raises
            warnings.simplefilter("ignore")
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, kv, kv, is_causal=causal)
    except RuntimeError as e:
        return str(e).splitlines()[0]
    return None


def _sdpa(backend: SDPBackend, label: str, dtypes: tuple[str, ...]):
    def supports(shape: dict) -> str | None:
        for dt in dtypes:  # one dtype the backend takes is enough to keep the variant; the rest are per dtype
            why = _probe(backend, dt, shape["Sq"], shape["Sk"], shape["D"], bool(shape.get("causal", False)))
            if why is None:
                return None
        return (f"attention/torch_sdpa_{label}: SDPA's {label} backend does not take Sq={shape['Sq']}, "
                f"Sk={shape['Sk']}, D={shape['D']}, causal={shape.get('causal', False)} on this device ({why})")

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
           scale: float | None = None) -> torch.Tensor:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    fn.__name__ = fn.__qualname__ = f"torch_sdpa_{label}"
    return supports, fn


_BACKENDS = [
    # name, backend, dtypes on a GPU, GPU-only?, idea
    ("math", SDPBackend.MATH, FP, False,
     "SDPA, math backend: composite matmul + softmax ops that materialize S (the slow, exact fallback)."),
    ("efficient", SDPBackend.EFFICIENT_ATTENTION, FP, True,
     "SDPA, memory-efficient backend: tiled fused kernel from xFormers, fp32 too, O(N) memory."),
    ("flash", SDPBackend.FLASH_ATTENTION, HALF if MODE == "gpu" else FP, False,
     "SDPA, flash backend: FlashAttention-2 on CUDA (fp16/bf16); a tiled C++ kernel on CPU."),
    ("cudnn", SDPBackend.CUDNN_ATTENTION, HALF, True,
     "SDPA, cuDNN backend: NVIDIA's fused attention graph (sm_80+; Hopper's fastest vendor path)."),
]

for _label, _backend, _dtypes, _gpu_only, _idea in _BACKENDS:
    _supports, _fn = _sdpa(_backend, _label, _dtypes)
    globals()[_fn.__name__] = register("attention", _fn.__name__, backend="torch", dtypes=_dtypes, gpu_only=_gpu_only,
                                       gpu_note="PyTorch builds it for CUDA only", supports=_supports, idea=_idea)(_fn)
