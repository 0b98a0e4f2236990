"""The decode_attention contract: one new query token per sequence against a paged KV cache (FlashInfer NHD layout).

``decode_attention(q[B,Hq,D], k_cache[P,page,Hkv,D], v_cache[P,page,Hkv,D], block_table[B,maxp] int32,
seq_lens[B] int32, scale=None) -> [B,Hq,D]``

* The cache is a pool of ``P`` pages of ``page`` token slots each, every slot holding ``Hkv`` heads of ``D``
  values ("NHD": token, head, dim). Sequence ``b``'s token ``t`` (``0 <= t < seq_lens[b]``) lives in page
  ``block_table[b, t // page]``, slot ``t % page``. Page ids are arbitrary (shuffled, non-contiguous): the block
  table is the only way from a token to its slot.
* ``seq_lens[b] >= 1``. Entries of ``block_table[b]`` past ``ceil(seq_lens[b] / page)`` must never be read: they
  hold junk (``make`` puts out-of-range page ids there, ``-1`` and ``P + 7``, as an allocator's free slots would),
  and the pages and slots no sequence owns are NaN (``make``, as vLLM's tests do), so a kernel that reads past a
  sequence's end computes NaN or faults.
* GQA/MQA: ``Hq % Hkv == 0``; query head ``h`` reads KV head ``h // (Hq // Hkv)`` (``group = Hq // Hkv``
  consecutive query heads share one KV head; ``Hkv = 1`` is MQA, ``Hkv = Hq`` plain multi-head attention).
* ``out[b, h] = softmax(scale * K_b q[b, h]) V_b`` over the sequence's ``seq_lens[b]`` tokens; ``scale`` defaults
  to ``1/sqrt(D)``. q, k_cache and v_cache share one dtype (fp32, fp16, bf16), which the output has; the index
  tensors are int32.

The reference gathers each sequence's pages in float64 and runs softmax attention. Split-KV kernels
(``cuda_split``, ``triton_split``) compute one partial output and log-sum-exp per split of a sequence's pages
(:func:`split_ranges`) and merge them with the rule of the ``lse_merge`` op, defined at the end of this file:
``lse_merge(o[S,B,H,D], lse[S,B,H]) -> [B,H,D]``.
"""

from __future__ import annotations

import math

import torch

from workbench.contracts import elem_size, randn, require, require_same_dtype, require_tensor
from workbench.registry import Op, contract, register, register_op

OP_NAME = "decode_attention"
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def validate(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
             seq_lens: torch.Tensor, scale: float | None = None) -> dict:
    """Check the inputs of decode_attention and return the shape {B, Hq, Hkv, L, D, page} (L: the longest
    sequence; reading seq_lens is one device sync)."""
    require_tensor(OP_NAME, "q", q, 3, DTYPES, "[B,Hq,D]")
    require_tensor(OP_NAME, "k_cache", k_cache, 4, DTYPES, "[P,page,Hkv,D]")
    require_tensor(OP_NAME, "v_cache", v_cache, 4, DTYPES, "[P,page,Hkv,D]")
    require_same_dtype(OP_NAME, q=q, k_cache=k_cache, v_cache=v_cache)
    require_tensor(OP_NAME, "block_table", block_table, 2, (torch.int32,), "[B,maxp]")
    require_tensor(OP_NAME, "seq_lens", seq_lens, 1, (torch.int32,), "[B]")
    b, hq, d = q.shape
    n_pages, page, hkv, dk = k_cache.shape
    require(OP_NAME, tuple(v_cache.shape) == tuple(k_cache.shape),
            f"v_cache must have k_cache's shape {tuple(k_cache.shape)}, got {tuple(v_cache.shape)}")
    require(OP_NAME, dk == d, f"k_cache[P,page,Hkv,D] must have q's head dim D={d}, got {tuple(k_cache.shape)}")
    require(OP_NAME, d >= 1, f"the head dim D must be >= 1, got q {tuple(q.shape)}")
    require(OP_NAME, page >= 1, f"the page size (k_cache.shape[1]) must be >= 1, got {page}")
    require(OP_NAME, hkv >= 1 and hq % hkv == 0,
            f"Hq must be a multiple of Hkv (query head h reads KV head h // (Hq // Hkv)): got Hq={hq}, Hkv={hkv}")
    require(OP_NAME, block_table.shape[0] == b and seq_lens.shape[0] == b,
            f"block_table[B,maxp] and seq_lens[B] need B={b} rows (q's batch), got {tuple(block_table.shape)} and "
            f"{tuple(seq_lens.shape)}")
    require(OP_NAME, scale is None or (isinstance(scale, (int, float)) and not isinstance(scale, bool)
                                      and math.isfinite(scale)),
            f"scale must be None or a finite float, got {scale!r}")
    longest = 0
    if b:
        lo, hi = (int(x) for x in torch.stack([seq_lens.min(), seq_lens.max()]).tolist())
        require(OP_NAME, lo >= 1, f"every seq_lens[b] must be >= 1 (a decode step attends to its own token), "
                                  f"got min {lo}")
        cap = block_table.shape[1] * page
        require(OP_NAME, hi <= cap,
                f"seq_lens[b] = {hi} does not fit the block table: maxp * page = {block_table.shape[1]} * {page} "
                f"= {cap} tokens")
        longest = hi
    return {"B": b, "Hq": hq, "Hkv": hkv, "L": longest, "D": d, "page": page}


def default_scale(d: int, scale: float | None) -> float:
    """Return the softmax scale: ``scale``, or ``1/sqrt(D)``."""
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def gather(cache: torch.Tensor, pages: torch.Tensor, n: int) -> torch.Tensor:
    """Return the first ``n`` tokens of one sequence, [n, Hkv, D], from the pages ``pages`` (its block table row)."""
    page = cache.shape[1]
    used = pages[:(n + page - 1) // page].long()
    return cache[used].reshape(-1, cache.shape[2], cache.shape[3])[:n]


def _attend64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Return softmax attention of q[Hq, D] over k, v [n, Hkv, D] in float64 (GQA: head h reads h // group)."""
    group = q.shape[0] // k.shape[1]
    k = k.double().repeat_interleave(group, dim=1)  # [n, Hq, D]
    v = v.double().repeat_interleave(group, dim=1)
    s = torch.einsum("hd,nhd->hn", q.double(), k) * scale
    return torch.einsum("hn,nhd->hd", torch.softmax(s, dim=-1), v)


def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
              seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Gather each sequence's tokens through the block table in float64 and run softmax attention."""
    shape = validate(q, k_cache, v_cache, block_table, seq_lens, scale)
    sc = default_scale(shape["D"], scale)
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    for b, n in enumerate(seq_lens.tolist()):
        out[b] = _attend64(q[b], gather(k_cache, block_table[b], n), gather(v_cache, block_table[b], n), sc)
    return out


# ------------------------------------------------------------------------------------------ split-KV, shared
def split_ranges(n_pages: int, num_splits: int) -> list[tuple[int, int]]:
    """Return the page ranges [lo, hi) of a sequence's ``num_splits`` splits: ceil(n_pages / num_splits) pages
    each, the last ones ragged or empty (lo >= hi). Every split-KV kernel here splits this way."""
    per = (n_pages + num_splits - 1) // num_splits
    return [(min(s * per, n_pages), min((s + 1) * per, n_pages)) for s in range(num_splits)]


# ------------------------------------------------------------------------------------------ the classic mistakes
def _prefix_lengths(out: torch.Tensor, ref: torch.Tensor, q: torch.Tensor, k_cache: torch.Tensor,
                    v_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: list[int], scale: float,
                    atol: float, rtol: float) -> list[int] | None:
    """Return, per sequence, how many of its first tokens the output attended to (its length when right), or None
    when some sequence's output is no prefix's attention. A prefix of 0 tokens is an all-zero output."""
    from workbench.checker import close_to

    kept = []
    for b, n in enumerate(seq_lens):
        if close_to(out[b], ref[b], atol, rtol):
            kept.append(n)
            continue
        k, v = gather(k_cache, block_table[b], n), gather(v_cache, block_table[b], n)
        for m in range(n - 1, -1, -1):
            alt = _attend64(q[b], k[:m], v[:m], scale) if m else torch.zeros_like(ref[b])
            if close_to(out[b], alt, atol, rtol):
                kept.append(m)
                break
        else:
            return None
    return kept


def merge_without_rescale(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Return lse_merge's classic mistake in float64: the splits merged online (in order) with the running weight
    sum rescaled when the max grows, but the running output not (o[S, ..., D], lse[S, ...])."""
    m = torch.full(lse.shape[1:], float("-inf"), dtype=torch.float64)
    w_sum = torch.zeros(lse.shape[1:], dtype=torch.float64)
    acc = torch.zeros(o.shape[1:], dtype=torch.float64)
    for s in range(lse.shape[0]):
        ls = lse[s].double()
        live = torch.isfinite(ls)
        m_new = torch.where(live, torch.maximum(m, ls), m)
        alpha = torch.where(torch.isfinite(m), torch.exp(m - m_new), torch.zeros_like(m))
        w = torch.where(live, torch.exp(ls - m_new), torch.zeros_like(m))
        w_sum = w_sum * alpha + w
        acc = acc + w[..., None] * torch.where(live[..., None], o[s].double(), torch.zeros_like(acc))  # no * alpha
        m = m_new
    return torch.where(w_sum[..., None] > 0, acc / w_sum.clamp_min(1e-300)[..., None], torch.zeros_like(acc))


def split_partials(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                   seq_lens: list[int], scale: float, num_splits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the float64 partial outputs [S, B, Hq, D] and lse [S, B, Hq] of :func:`split_ranges`' splits
    (an empty split: lse = -inf, output 0)."""
    page = k_cache.shape[1]
    b_, hq, d = q.shape
    o = torch.zeros((num_splits, b_, hq, d), dtype=torch.float64, device=q.device)
    lse = torch.full((num_splits, b_, hq), float("-inf"), dtype=torch.float64, device=q.device)
    group = hq // k_cache.shape[2]
    for b, n in enumerate(seq_lens):
        k = gather(k_cache, block_table[b], n).double().repeat_interleave(group, dim=1)
        v = gather(v_cache, block_table[b], n).double().repeat_interleave(group, dim=1)
        for s, (lo, hi) in enumerate(split_ranges((n + page - 1) // page, num_splits)):
            t0, t1 = lo * page, min(hi * page, n)
            if t0 >= t1:
                continue
            sc = torch.einsum("hd,nhd->hn", q[b].double(), k[t0:t1]) * scale
            lse[s, b] = torch.logsumexp(sc, dim=-1)
            o[s, b] = torch.einsum("hn,nhd->hd", torch.softmax(sc, dim=-1), v[t0:t1])
    return o, lse


def decode_attention_partial(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                             seq_lens: torch.Tensor, scale: float | None = None,
                             num_splits: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Return decode_attention's split-KV partials in float64: (o_partials [S,B,Hq,D], lse [S,B,Hq]), S = num_splits.

    Each sequence's ceil(seq_lens[b] / page) pages are cut as every split-KV kernel here cuts them
    (:func:`split_ranges`: ceil(n_pages / S) pages per split, the last splits ragged or empty). ``o_partials[s, b, h]``
    is the softmax attention of query head h over split s's tokens alone and ``lse[s, b, h]`` the natural-log
    log-sum-exp of that split's scaled scores; an empty split (a short sequence has fewer pages than splits) has
    lse = -inf and o = 0. Merged by the ``lse_merge`` rule they give :func:`reference`'s output: the pair is how
    the merge is tested alone, against the partials a split kernel should write (``lse_merge`` takes fp32 lse and
    o in fp32, fp16 or bf16: ``wb.reference("lse_merge")(o.float(), lse.float())``).
    """
    validate(q, k_cache, v_cache, block_table, seq_lens, scale)
    require(OP_NAME, isinstance(num_splits, int) and not isinstance(num_splits, bool) and num_splits >= 1,
            f"num_splits must be an int >= 1, got {num_splits!r}")
    lens = [int(n) for n in seq_lens.tolist()]
    return split_partials(q, k_cache, v_cache, block_table, lens, default_scale(q.shape[-1], scale), num_splits)


SPLIT_COUNTS = (2, 3, 4, 8, 16)  # the num_splits a split-KV kernel might use, for recognising its merge mistake


def explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Name decode attention's classic mistakes by recomputing them: a dropped sequence tail (``masking``: every
    sequence's output is the attention over a prefix of its tokens, some too short: an off-by-one bound, or a loop
    over whole chunks only); split-KV partials merged without rescaling the running output (``online_rescale``)."""
    from workbench.checker import close_to

    q, k_cache, v_cache, block_table, seq_lens = inputs[:5]
    out, ref = outs[0], refs[0]
    lens = [int(n) for n in seq_lens.tolist()]
    sc = default_scale(q.shape[-1], kw.get("scale"))
    kept = _prefix_lengths(out, ref, q, k_cache, v_cache, block_table, lens, sc, atol, rtol)
    if kept is not None and kept != lens:
        return "masking"
    for s in SPLIT_COUNTS:
        o, lse = split_partials(q, k_cache, v_cache, block_table, lens, sc, s)
        if close_to(out, merge_without_rescale(o, lse), atol, rtol):
            return "online_rescale"
    return None


# ------------------------------------------------------------------------------------------------ inputs, costs
def seq_lens_for(b: int, longest: int, page: int, g: torch.Generator) -> list[int]:
    """Return B sequence lengths: the first ``longest``, then 1, page, page + 1 and a random one in turn (each
    clipped to [1, longest]): a batch mixes one-token sequences, full last pages and one-slot last pages."""
    cycle = [1, page, page + 1]
    lens = []
    for i in range(b):
        n = longest if i == 0 else (cycle[(i - 1) % 4] if (i - 1) % 4 < 3
                                    else int(torch.randint(1, longest + 1, (1,), generator=g)))
        lens.append(max(1, min(n, longest)))
    return lens


#: make's input case that the checker does not try: every sequence L tokens long, a serving batch at one context
#: length (benchmarks/kernel_goals.py times the decode goal on it, where the op's byte count B * L is exact).
FULL = "full"


def make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    """Return (q, k_cache, v_cache, block_table, seq_lens): case "random" mixes the lengths (:func:`seq_lens_for`),
    case :data:`FULL` gives every sequence L tokens; both shuffle the pages and poison what no sequence owns."""
    g = torch.Generator().manual_seed(seed)
    b, hq, hkv, longest, d, page = (sizes[k] for k in ("B", "Hq", "Hkv", "L", "D", "page"))
    if page < 1 or hkv < 1 or hq % hkv:
        raise ValueError(f"no inputs for page={page}, Hq={hq}, Hkv={hkv}: page >= 1 and Hq % Hkv == 0")
    if case not in ("random", FULL):
        raise ValueError(f"decode_attention has the input cases 'random' and {FULL!r}, not {case!r}")
    longest = max(1, longest)
    lens = [longest] * b if case == FULL else seq_lens_for(b, longest, page, g)
    n_used = [(n + page - 1) // page for n in lens]
    n_pages = sum(n_used) + 2  # two spare pages no sequence owns (NaN)
    maxp = (longest + page - 1) // page + 1  # one entry more than the longest needs: always some junk entries
    cpu = torch.device("cpu")
    perm = torch.randperm(n_pages, generator=g).to(torch.int32)  # shuffled, non-contiguous page ids
    table = torch.empty((b, maxp), dtype=torch.int32)
    k = randn((n_pages, page, hkv, d), torch.float32, g, cpu)
    v = randn((n_pages, page, hkv, d), torch.float32, g, cpu)
    owned = torch.zeros((n_pages, page), dtype=torch.bool)
    nxt = 0
    for i, (n, used) in enumerate(zip(lens, n_used, strict=True)):
        for j in range(maxp):
            if j < used:
                table[i, j] = perm[nxt]
                slots = min(page, n - j * page)
                owned[int(perm[nxt]), :slots] = True
                nxt += 1
            else:  # junk an allocator leaves: a free marker or a page id past the pool
                table[i, j] = -1 if (i + j) % 2 else n_pages + 7
    k[~owned] = float("nan")  # unused pages and the slots past each sequence's end
    v[~owned] = float("nan")
    q = randn((b, hq, d), torch.float32, g, cpu)
    return (q.to(dtype).to(device), k.to(dtype).to(device), v.to(dtype).to(device), table.to(device),
            torch.tensor(lens, dtype=torch.int32).to(device))


def flops(B: int, Hq: int, Hkv: int, L: int, D: int, page: int, scale: float | None = None) -> float:
    return 4.0 * B * Hq * L * D  # q . k and p * v per token and query head (L: the longest sequence)


def nbytes(B: int, Hq: int, Hkv: int, L: int, D: int, page: int, scale: float | None = None,
           dtype: torch.dtype = torch.float32) -> float:
    # q and out, each sequence's K and V read once per KV head, the block table rows and seq_lens (int32), for B
    # sequences of L tokens: exact for make's case FULL; the random case's mixed batch holds fewer tokens.
    return (2 * B * Hq * D + 2 * B * L * Hkv * D) * elem_size(dtype) + 4 * B * ((L + page - 1) // page + 1)


def tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype]


def _shape(b: int, hq: int, hkv: int, longest: int, d: int, page: int) -> dict:
    return {"B": b, "Hq": hq, "Hkv": hkv, "L": longest, "D": d, "page": page}


# GQA ratios 1, 4 and 8 (Hkv = 2 with a group > 1 tells h // group from h % Hkv); seq_lens 1, page and page + 1
# mixed in each batch (seq_lens_for); B = 1 and 17; tiny D and pages for the emulators.
CHECK_SHAPES = [_shape(1, 1, 1, 1, 16, 4), _shape(3, 4, 1, 9, 16, 4), _shape(2, 8, 2, 13, 32, 4),
                _shape(17, 2, 2, 17, 16, 8), _shape(2, 16, 2, 9, 16, 4)]

OP = register_op(Op(
    name=OP_NAME,
    signature=("decode_attention(q[B,Hq,D], k_cache[P,page,Hkv,D], v_cache[P,page,Hkv,D], block_table[B,maxp], "
               "seq_lens[B], scale=None) -> [B,Hq,D]"),
    shape_keys=("B", "Hq", "Hkv", "L", "D", "page"),
    **contract(globals()),
    check_shapes=CHECK_SHAPES,
    call_kwargs=("scale",),
    flags={"scale": (None, 0.3)},
    package="kernels.decode_attention.variants",
    bench_shapes={"gpu": [_shape(b, 32, 8, n, 128, 16) for b, n in ((1, 4096), (16, 2048), (64, 4096), (256, 1024))],
                  "quick": [_shape(64, 32, 8, 4096, 128, 16)],
                  "cpu": [_shape(4, 8, 2, 33, 32, 8)]},
    size_key=lambda s: s["B"] * s["L"],
    doc="One query token per sequence against a paged KV cache (block table, GQA): memory-bound, split-KV.",
))


def dense_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
             longest: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gather the paged cache into dense [B, Hkv, L, D] K and V (zeros past each sequence) and a key mask [B, L].

    Only the block-table entries a sequence uses are read: positions past its end gather its token 0 (slot 0 of
    its first page, which every sequence owns) and are then replaced by zeros, since a NaN slot under a masked-out
    (zero) probability would still make NaN in SDPA's P @ V.
    """
    page = k_cache.shape[1]
    t = torch.arange(longest, device=k_cache.device)
    valid = t[None, :] < seq_lens[:, None].long()  # [B, L]
    entry = (t // page)[None, :].expand(valid.shape).where(valid, 0)  # past the end: entry 0 (token 0's page)
    pages = torch.gather(block_table.long(), 1, entry)  # [B, L]
    slots = (t % page)[None, :].expand(valid.shape).where(valid, 0)

    def dense(cache: torch.Tensor) -> torch.Tensor:
        x = cache[pages, slots]  # [B, L, Hkv, D]
        return x.where(valid[:, :, None, None], torch.zeros((), dtype=x.dtype, device=x.device)).transpose(1, 2)

    return dense(k_cache), dense(v_cache), valid


@register(OP_NAME, "torch_sdpa", backend="torch",
          idea="Vendor baseline: gather the pages into dense K/V, expand the KV heads, one masked SDPA call.")
def torch_sdpa(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
               seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    b, hq, d = q.shape
    if b == 0:
        return torch.empty_like(q)
    longest = int(seq_lens.max())
    k, v, valid = dense_kv(k_cache, v_cache, block_table, seq_lens, longest)
    group = hq // k_cache.shape[2]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # [B, Hq, L, D]
    mask = valid[:, None, None, :]  # [B, 1, 1, L]: keys past the sequence's end take no part
    out = torch.nn.functional.scaled_dot_product_attention(q[:, :, None, :], k, v, attn_mask=mask, scale=scale)
    return out[:, :, 0, :]


# ====================================================================================================
# The lse_merge contract, an op of its own so that the split-KV merge is checked alone: merge S split-KV partial
# attention outputs by their log-sum-exp.
#
# `lse_merge(o[S,B,H,D], lse[S,B,H]) -> [B,H,D]`
#
# A split-KV attention kernel cuts each sequence's keys into S splits and computes, per split s, the softmax
# attention over that split's keys alone, `o[s]`, and the natural-log log-sum-exp of that split's scores,
# `lse[s] = log(sum_j exp(score_j))`. The full attention is the partials weighted by each split's share of the
# total softmax mass::
#
#     m = max_s lse[s];   w_s = exp(lse[s] - m);   out = sum_s w_s o[s] / sum_s w_s
#
# (subtracting the max keeps every weight <= 1: no overflow). A split with `lse = -inf` is empty (no keys): it
# contributes nothing, whatever its `o` holds (`make` puts NaN there: `0 * NaN` is NaN, so an empty split must be
# skipped, not weighted by 0). When every split of a (b, h) is empty the result is 0.
#
# `o` is fp32, fp16 or bf16 (the output's dtype); `lse` is always float32. FlashInfer's `merge_states` and
# vLLM's `merge_attn_states` are this op.

MERGE_OP = "lse_merge"


def merge_validate(o: torch.Tensor, lse: torch.Tensor) -> dict:
    """Check the inputs of lse_merge and return the shape {S, B, H, D}."""
    require_tensor(MERGE_OP, "o", o, 4, DTYPES, "[S,B,H,D]")
    require_tensor(MERGE_OP, "lse", lse, 3, (torch.float32,), "[S,B,H]")
    s, b, h, d = o.shape
    require(MERGE_OP, tuple(lse.shape) == (s, b, h),
            f"lse must be [S,B,H] = {[s, b, h]} to match o {tuple(o.shape)}, got {tuple(lse.shape)}")
    return {"S": s, "B": b, "H": h, "D": d}


def merge_reference(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Weight each non-empty split by exp(lse - max lse) in float64 and normalise; all-empty rows give 0."""
    merge_validate(o, lse)
    ls = lse.double()
    live = torch.isfinite(ls)
    m = torch.where(live, ls, torch.full_like(ls, float("-inf"))).amax(dim=0, keepdim=True) if ls.shape[0] else ls
    w = torch.where(live, torch.exp(ls - m), torch.zeros_like(ls))  # [S, B, H]
    acc = (w[..., None] * torch.where(live[..., None], o.double(), torch.zeros((), dtype=torch.float64))).sum(0)
    total = w.sum(0)[..., None]
    return torch.where(total > 0, acc / total.clamp_min(1e-300), torch.zeros_like(acc))


def merge_explain(outs: list[torch.Tensor], refs: list[torch.Tensor], inputs: tuple, kw: dict, atol: float,
            rtol: float) -> str | None:
    """Name the merge's classic mistake: the running output not rescaled when the running max grows."""
    from workbench.checker import close_to

    if close_to(outs[0], merge_without_rescale(inputs[0], inputs[1]), atol, rtol):
        return "online_rescale"
    return None


def merge_make(sizes: dict, dtype: torch.dtype, seed: int, device: torch.device, case: str = "random") -> tuple:
    g = torch.Generator().manual_seed(seed)
    s, b, h, d = (sizes[k] for k in ("S", "B", "H", "D"))
    o = randn((s, b, h, d), torch.float32, g, torch.device("cpu"))
    lse = randn((s, b, h), torch.float32, g, torch.device("cpu"), scale=3.0)  # weights spread over e^+-9
    if s > 1 and b and h:  # the last split of batch 0 is empty (a short sequence): its o is junk
        lse[-1, 0, :] = float("-inf")
        o[-1, 0, :] = float("nan")
    if s and b * h > 1:  # every split of the last (b, h) empty: the result is 0
        lse[:, -1, -1] = float("-inf")
        o[:, -1, -1] = float("nan")
    return o.to(dtype).to(device), lse.to(device)


def merge_flops(S: int, B: int, H: int, D: int) -> float:
    return 2.0 * S * B * H * D


def merge_nbytes(S: int, B: int, H: int, D: int, dtype: torch.dtype = torch.float32) -> float:
    return (S + 1) * B * H * D * elem_size(dtype) + 4 * S * B * H


def merge_tolerance(dtype: torch.dtype, shape: dict) -> tuple[float, float]:
    return {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}[dtype]


MERGE = register_op(Op(
    name=MERGE_OP,
    signature="lse_merge(o[S,B,H,D], lse[S,B,H]) -> [B,H,D]",
    shape_keys=("S", "B", "H", "D"),
    make=merge_make, validate=merge_validate, reference=merge_reference, flops=merge_flops,
    bytes=merge_nbytes, tolerance=merge_tolerance, explain=merge_explain,
    check_shapes=[{"S": 1, "B": 1, "H": 1, "D": 1}, {"S": 3, "B": 2, "H": 3, "D": 16},
                  {"S": 4, "B": 17, "H": 2, "D": 33}, {"S": 5, "B": 3, "H": 4, "D": 64}],
    dtype_of=lambda o, lse: o.dtype,
    package="kernels.decode_attention.variants",
    bench_shapes={"gpu": [{"S": s, "B": 64, "H": 32, "D": 128} for s in (2, 4, 8, 16)],
                  "quick": [{"S": 8, "B": 64, "H": 32, "D": 128}], "cpu": [{"S": 4, "B": 4, "H": 8, "D": 64}]},
    size_key=lambda s: s["S"] * s["B"] * s["H"],
    doc="Merge split-KV partial attention outputs by their log-sum-exp (FlashInfer merge_states).",
))


@register(MERGE_OP, "torch_merge", backend="torch",
          idea="Vendor-style baseline: weights exp(lse - max lse) in fp32, empty splits masked out, normalised sum.")
def torch_merge(o: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    live = torch.isfinite(lse)
    m = torch.where(live, lse, torch.full_like(lse, float("-inf"))).amax(dim=0, keepdim=True)
    w = torch.where(live, torch.exp(lse - m), torch.zeros_like(lse))
    acc = (w[..., None] * torch.where(live[..., None], o.float(), torch.zeros((), device=o.device))).sum(0)
    total = w.sum(0)[..., None]
    return torch.where(total > 0, acc / total.clamp_min(1e-30), torch.zeros_like(acc)).to(o.dtype)
