"""The decode_attention_q8 contract: decode attention over a quantized paged KV cache (int8 or fp8 e4m3 codes).

``decode_attention_q8(q[B,Hq,D], k_q[P,page,Hkv,D], k_scale[P,page,Hkv], v_q[P,page,Hkv,D], v_scale[P,page,Hkv],
block_table[B,maxp] int32, seq_lens[B] int32, scale=None) -> [B,Hq,D]``

* The cache holds codes, not values: ``k_q`` and ``v_q`` are int8 or ``float8_e4m3fn`` (one dtype for both), and
  every (token slot, KV head) row of D codes has its own float32 scale: ``k = k_q * k_scale[..., None]``, ``v``
  likewise ("per-token-per-head" scales, as vLLM's and FlashInfer's quantized caches keep them). The scales are
  symmetric absmax: ``make`` quantizes a float cache row by row with ``scale = amax(|row|) / 127`` (int8, codes
  rounded to nearest and clamped to +-127) or ``amax / 448`` (e4m3's largest value; codes by torch's
  round-to-nearest-even cast).
* Paging, GQA and the poison are decode_attention's (``kernels/decode_attention/reference.py``): sequence ``b``'s
  token ``t < seq_lens[b]`` lives in page ``block_table[b, t // page]``, slot ``t % page``; query head ``h`` reads
  KV head ``h // (Hq // Hkv)``; entries of ``block_table[b]`` past ``ceil(seq_lens[b] / page)`` are junk page ids
  (``-1``, ``P + 7``). The slots no sequence owns hold junk codes (random int8 codes; e4m3's NaN code 0x7F) and
  NaN scales, so a kernel that reads past a sequence's end computes NaN or faults.
* ``out[b, h] = softmax(scale * K_b q[b, h]) V_b`` over the dequantized K and V of the sequence's ``seq_lens[b]``
  tokens; ``scale`` defaults to ``1/sqrt(D)``. q is fp32, fp16 or bf16 and the output has its dtype (the op's
  dtype); the scales are float32, the index tensors int32. The checker's input cases: ``"random"`` (int8 codes)
  and ``"e4m3"`` (fp8 codes).

The reference dequantizes each sequence's gathered codes in float64 and runs decode_attention's float64 attention
on them: it is exact for the codes it is given. How far the codes are from the float cache they were made from is
a separate question, answered by :func:`error_vs_bytes` (the quantization error study).
"""

from __future__ import annotations

import math

import torch

from kernels.decode_attention import reference as R
from kernels.gemm_fp8.reference import E4M3_MAX, FP8
from workbench.contracts import elem_size, require, require_tensor
from workbench.registry import Op, contract, register, register_op

OP_NAME = "decode_attention_q8"
INT8_MAX = 127.0
#: The code formats: name -> (code dtype, largest code magnitude the absmax scale maps to).
FORMATS: dict[str, tuple[torch.dtype, float]] = {"int8": (torch.int8, INT8_MAX), "e4m3": (FP8, E4M3_MAX)}
CODE_DTYPES = (torch.int8, FP8)
#: The checker's input cases and the code format each makes.
CASE_FORMAT = {"random": "int8", "e4m3": "e4m3"}
SCALE_BYTES = 4  # one float32 scale per (token slot, KV head), for K and for V


def _require_caches(q: torch.Tensor, k_q: torch.Tensor, k_scale: torch.Tensor, v_q: torch.Tensor,
                    v_scale: torch.Tensor) -> None:
    """Check q, the code tensors and their scales (dtypes, ranks, matching shapes)."""
    require_tensor(OP_NAME, "q", q, 3, R.DTYPES, "[B,Hq,D]")
    require_tensor(OP_NAME, "k_q", k_q, 4, CODE_DTYPES, "[P,page,Hkv,D]")
    require_tensor(OP_NAME, "v_q", v_q, 4, CODE_DTYPES, "[P,page,Hkv,D]")
    require(OP_NAME, k_q.dtype == v_q.dtype,
            f"k_q and v_q must share one code dtype (int8 or float8_e4m3fn), got {k_q.dtype} and {v_q.dtype}")
    require(OP_NAME, tuple(v_q.shape) == tuple(k_q.shape),
            f"v_q must have k_q's shape {tuple(k_q.shape)}, got {tuple(v_q.shape)}")
    for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
        require_tensor(OP_NAME, name, s, 3, (torch.float32,), "[P,page,Hkv]")
        require(OP_NAME, tuple(s.shape) == tuple(k_q.shape[:3]),
                f"{name} must be [P,page,Hkv] = {list(k_q.shape[:3])} (one scale per token slot and KV head), "
                f"got {tuple(s.shape)}")
    require(OP_NAME, k_q.shape[3] == q.shape[2] >= 1,
            f"k_q[P,page,Hkv,D] must have q's head dim D={q.shape[2]} >= 1, got {tuple(k_q.shape)}")
    require(OP_NAME, k_q.shape[1] >= 1, f"the page size (k_q.shape[1]) must be >= 1, got {k_q.shape[1]}")
    hq, hkv = q.shape[1], k_q.shape[2]
    require(OP_NAME, hkv >= 1 and hq % hkv == 0,
            f"Hq must be a multiple of Hkv (query head h reads KV head h // (Hq // Hkv)): got Hq={hq}, Hkv={hkv}")


def _longest(block_table: torch.Tensor, seq_lens: torch.Tensor, b: int, page: int) -> int:
    """Check the block table and seq_lens against the batch and page size; return the longest sequence."""
    require_tensor(OP_NAME, "block_table", block_table, 2, (torch.int32,), "[B,maxp]")
    require_tensor(OP_NAME, "seq_lens", seq_lens, 1, (torch.int32,), "[B]")
    require(OP_NAME, block_table.shape[0] == b and seq_lens.shape[0] == b,
            f"block_table[B,maxp] and seq_lens[B] need B={b} rows (q's batch), got {tuple(block_table.shape)} and "
            f"{tuple(seq_lens.shape)}")
    if not b:
        return 0
    lo, hi = (int(x) for x in torch.stack([seq_lens.min(), seq_lens.max()]).tolist())  # one device sync
    require(OP_NAME, lo >= 1, f"every seq_lens[b] must be >= 1 (a decode step attends to its own token), got min {lo}")
    cap = block_table.shape[1] * page
    require(OP_NAME, hi <= cap, f"seq_lens[b] = {hi} does not fit the block table: maxp * page = "
                                f"{block_table.shape[1]} * {page} = {cap} tokens")
    return hi


def validate(q: torch.Tensor, k_q: torch.Tensor, k_scale: torch.Tensor, v_q: torch.Tensor, v_scale: torch.Tensor,
             block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float | None = None) -> dict:
    """Check the inputs of decode_attention_q8 and return the shape {B, Hq, Hkv, L, D, page} (L: the longest
    sequence; reading seq_lens is one device sync)."""
    _require_caches(q, k_q, k_scale, v_q, v_scale)
    require(OP_NAME, scale is None or (isinstance(scale, (int, float)) and not isinstance(scale, bool)
                                      and math.isfinite(scale)),
            f"scale must be None or a finite float, got {scale!r}")
    b, hq, d = q.shape
    page, hkv = k_q.shape[1], k_q.shape[2]
    return {"B": b, "Hq": hq, "Hkv": hkv, "L": _longest(block_table, seq_lens, b, page), "D": d, "page": page}


# ---------------------------------------------------------------------------------------- quantize, dequantize
def quantize(x: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (codes, scales) of ``x[..., D]`` in ``fmt`` ("int8" or "e4m3"), one float32 absmax scale per row.

    ``scale = amax(|row|) / 127`` (int8: codes rounded to nearest, clamped to +-127) or ``/ 448`` (e4m3: torch's
    round-to-nearest-even cast after clamping to +-448). An all-zero row gets a tiny scale and zero codes.
    """
    code_dtype, top = FORMATS[fmt]
    x = x.float()
    scales = x.abs().amax(dim=-1).clamp_min(1e-30) / top
    y = (x / scales[..., None]).clamp(-top, top)
    codes = y.round().to(code_dtype) if code_dtype == torch.int8 else y.to(code_dtype)
    return codes, scales


def dequantize(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Return ``codes * scales[..., None]`` in float64 (exact: int8 and e4m3 codes are exact in float64)."""
    return codes.double() * scales.double()[..., None]


def _tokens(codes: torch.Tensor, scales: torch.Tensor, pages: torch.Tensor, n: int) -> torch.Tensor:
    """Return one sequence's first ``n`` tokens [n, Hkv, D], gathered through its block-table row, in float64."""
    return dequantize(R.gather(codes, pages, n), R.gather(scales[..., None], pages, n)[..., 0])


def reference(q: torch.Tensor, k_q: torch.Tensor, k_scale: torch.Tensor, v_q: torch.Tensor, v_scale: torch.Tensor,
              block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Gather each sequence's codes and scales, dequantize them in float64 and run decode_attention's float64
    attention (GQA: head h reads h // group)."""
    shape = validate(q, k_q, k_scale, v_q, v_scale, block_table, seq_lens, scale)
    sc = R.default_scale(shape["D"], scale)
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    for b, n in enumerate(seq_lens.tolist()):
        k = _tokens(k_q, k_scale, block_table[b], n)
        v = _tokens(v_q, v_scale, block_table[b], n)
        out[b] = R._attend64(q[b], k, v, sc)
    return out


# ------------------------------------------------------------------------------------------ the classic mistakes
def unscaled(scales: torch.Tensor) -> torch.Tensor:
    """Return scales of 1 where ``scales`` is finite (NaN stays NaN): the codes taken as the values."""
    return torch.where(torch.isnan(scales), scales, torch.ones_like(scales))


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Name the quantized cache's classic mistake by recomputing it: a dequantization scale forgotten (V's, K's or
    both: ``scale``); then decode_attention's own mistakes on the dequantized cache (a dropped tail: ``masking``;
    a split merge without rescale: ``online_rescale``)."""
    from workbench.checker import close_to

    q, k_q, k_scale, v_q, v_scale, block_table, seq_lens = inputs[:7]
    for ks, vs in ((k_scale, unscaled(v_scale)), (unscaled(k_scale), v_scale), (unscaled(k_scale), unscaled(v_scale))):
        if close_to(outs[0], reference(q, k_q, ks, v_q, vs, block_table, seq_lens, kw.get("scale")), atol, rtol):
            return "scale"
    k, v = dequantize(k_q, k_scale), dequantize(v_q, v_scale)
    return R.explain(outs, refs, (q, k, v, block_table, seq_lens), kw, atol, rtol)


# ------------------------------------------------------------------------------------------------ inputs, costs
def poisoned(codes: torch.Tensor, scales: torch.Tensor, owned: torch.Tensor, g: torch.Generator) -> None:
    """Write junk into the rows no sequence owns (``~owned``, [P, page, Hkv]), in place: NaN scales, and random
    int8 codes or e4m3's NaN code 0x7F."""
    scales[~owned] = float("nan")
    raw = codes.view(torch.uint8)
    if codes.dtype == torch.int8:
        junk = torch.randint(0, 256, raw.shape, generator=g, dtype=torch.int32).to(torch.uint8)
    else:
        junk = torch.full(raw.shape, 0x7F, dtype=torch.uint8)
    raw[~owned] = junk[~owned]


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    if case not in CASE_FORMAT:
        raise ValueError(f"{OP_NAME} has input cases {list(CASE_FORMAT)}, not {case!r}")
    cpu = torch.device("cpu")
    q, k, v, table, lens = R.make(sizes, torch.float32, seed, cpu)  # decode_attention's pages, lengths, NaN
    owned = ~torch.isnan(k).any(dim=-1)  # [P, page, Hkv]: the rows some sequence owns
    g = torch.Generator().manual_seed(seed + 0x51)
    cache = []
    for x in (k, v):
        codes, scales = quantize(x.nan_to_num(0.0), CASE_FORMAT[case])
        poisoned(codes, scales, owned, g)
        cache += [codes.to(device), scales.to(device)]
    return (q.to(dtype).to(device), *cache, table.to(device), lens.to(device))


def flops(B: int, Hq: int, Hkv: int, L: int, D: int, page: int, scale: float | None = None) -> float:
    return R.flops(B, Hq, Hkv, L, D, page)  # q . k and p * v; the scale multiplies are per token, not per element


def kv_bytes_per_token_head(fmt: str, D: int) -> int:
    """Return the bytes one token's K and V rows of one KV head take in cache format ``fmt`` (scales included):
    2 * D * 2 for fp16/bf16, 2 * (D + 4) for int8/e4m3 (one code byte per value, one float32 scale per row)."""
    if fmt in ("fp16", "bf16"):
        return 2 * D * 2
    return 2 * (D * elem_size(FORMATS[fmt][0]) + SCALE_BYTES)


def nbytes(B: int, Hq: int, Hkv: int, L: int, D: int, page: int, scale: float | None = None,
           dtype: torch.dtype = torch.float32) -> float:
    # q and out in the op's dtype, each sequence's K and V codes and scales read once per KV head (L: the longest
    # sequence), the block table rows and seq_lens (int32).
    return (2 * B * Hq * D * elem_size(dtype) + B * L * Hkv * kv_bytes_per_token_head("int8", D)
            + 4 * B * ((L + page - 1) // page + 1))


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return R.tolerance(dtype, shape)  # the reference is exact for the codes: only the kernel's arithmetic remains


OP = register_op(Op(
    name=OP_NAME,
    signature=("decode_attention_q8(q[B,Hq,D], k_q[P,page,Hkv,D], k_scale[P,page,Hkv], v_q[P,page,Hkv,D], "
               "v_scale[P,page,Hkv], block_table[B,maxp], seq_lens[B], scale=None) -> [B,Hq,D]"),
    shape_keys=R.OP.shape_keys,
    **contract(globals()),
    check_shapes=R.CHECK_SHAPES,
    call_kwargs=("scale",),
    flags={"scale": (None, 0.3)},
    cases=tuple(CASE_FORMAT),
    dtype_of=lambda q, *rest: q.dtype,
    package="kernels.decode_attention_q8.variants",
    bench_shapes=R.OP.bench_shapes,
    size_key=R.OP.size_key,
    doc="Decode attention over an int8 / fp8-e4m3 paged KV cache with per-token-per-head scales: half the bytes.",
))


@register(OP_NAME, "torch_dequant", backend="torch",
          idea="Vendor-style baseline: dequantize the whole cache to fp32, then decode_attention's gather + SDPA.")
def torch_dequant(q: torch.Tensor, k_q: torch.Tensor, k_scale: torch.Tensor, v_q: torch.Tensor,
                  v_scale: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                  scale: float | None = None) -> torch.Tensor:
    k = k_q.float() * k_scale[..., None]  # NaN in the unowned slots: dense_kv zeroes the slots past each end
    v = v_q.float() * v_scale[..., None]
    return R.torch_sdpa(q.float(), k, v, block_table, seq_lens, scale=scale).to(q.dtype)


# ------------------------------------------------------------------------------------ the quantization error study
STUDY_FORMATS = ("fp16", "bf16", "int8", "e4m3")


def _stored(x: torch.Tensor, fmt: str) -> tuple[torch.Tensor, ...]:
    """Return the float cache ``x`` as format ``fmt`` stores it: (values,) for fp16/bf16, (codes, scales) else."""
    if fmt in ("fp16", "bf16"):
        return (x.to(torch.float16 if fmt == "fp16" else torch.bfloat16).float(),)
    return quantize(x.nan_to_num(0.0), fmt)


def error_vs_bytes(B: int = 4, Hq: int = 8, Hkv: int = 2, L: int = 256, D: int = 128, page: int = 16,
                   seed: int = 0) -> list[dict]:
    """Return one row per KV-cache format (fp16, bf16, int8, e4m3): its bytes and its error on decode attention.

    Each row: ``format``; ``kv_bytes_per_token_head``, what one token's K and V rows of one KV head take
    (scales included, :func:`kv_bytes_per_token_head`); ``max_abs_err`` and ``rms_err`` of the attention output
    over the cache stored in that format against the float64 attention over the unquantized float32 cache.
    Both outputs are computed in float64, so the error is the storage format's alone, not any kernel's
    arithmetic. The inputs are decode_attention's (``make``: N(0, 1) q, K and V, mixed lengths up to ``L``).
    """
    sizes = {"B": B, "Hq": Hq, "Hkv": Hkv, "L": L, "D": D, "page": page}
    q, k, v, table, lens = R.make(sizes, torch.float32, seed, torch.device("cpu"))
    exact = R.reference(q, k, v, table, lens)
    rows = []
    for fmt in STUDY_FORMATS:
        ks, vs = _stored(k, fmt), _stored(v, fmt)
        out = (R.reference(q, ks[0], vs[0], table, lens) if len(ks) == 1
               else reference(q, ks[0], ks[1], vs[0], vs[1], table, lens))
        err = (out - exact).abs()
        rows.append({"format": fmt, "kv_bytes_per_token_head": kv_bytes_per_token_head(fmt, D),
                     "max_abs_err": float(err.max()) if err.numel() else 0.0,
                     "rms_err": float(err.pow(2).mean().sqrt()) if err.numel() else 0.0})
    return rows
