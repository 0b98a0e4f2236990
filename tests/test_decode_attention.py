"""decode_attention and lse_merge: the contract's errors, the poisoned paged inputs, the references against direct
float64 loops, the split-KV merge alone, and what the shared checker reports cover (tests/_ops.py computes them once
per run; test_ops.py asserts that every variant passes and every known-wrong kernel gets its diagnosis)."""

from __future__ import annotations

import math

import pytest
import torch

import workbench as wb
from kernels.decode_attention import decode_attention_partial
from kernels.decode_attention import reference as M
from kernels.decode_attention import reference as R
from tests._ops import variant_reports, wrong_report

OP = "decode_attention"
CPU = torch.device("cpu")


def _inputs(dtype: torch.dtype = torch.float32, seed: int = 0, **shape: int) -> tuple:
    base = {"B": 5, "Hq": 4, "Hkv": 2, "L": 9, "D": 8, "page": 4}
    return wb.make_inputs(OP, dtype=dtype, seed=seed, **{**base, **shape})


# ------------------------------------------------------------------------------------------------- contract errors
def _bad(change):
    q, k, v, bt, sl = _inputs()
    return change(q, k, v, bt, sl)


BAD = [
    (lambda q, k, v, bt, sl: (q[:, :3].contiguous(), k, v, bt, sl), r"decode_attention: Hq must be a multiple of Hkv"),
    (lambda q, k, v, bt, sl: (q, k[:, :0].contiguous(), v[:, :0].contiguous(), bt, sl),
     r"decode_attention: the page size \(k_cache.shape\[1\]\) must be >= 1, got 0"),
    (lambda q, k, v, bt, sl: (q, k, v, bt, sl.clone().fill_(bt.shape[1] * k.shape[1] + 1)),
     r"decode_attention: seq_lens\[b\] = 17 does not fit the block table: maxp \* page = 4 \* 4 = 16"),
    (lambda q, k, v, bt, sl: (q, k, v, bt, sl.clone().fill_(0)), r"decode_attention: every seq_lens\[b\] must be >= 1"),
    (lambda q, k, v, bt, sl: (q.half(), k, v, bt, sl), r"decode_attention: inputs must share one dtype"),
    (lambda q, k, v, bt, sl: (q, k, v.bfloat16(), bt, sl), r"decode_attention: inputs must share one dtype"),
    (lambda q, k, v, bt, sl: (q, k, v, bt.long(), sl), r"decode_attention: input block_table\[B,maxp\].*int32"),
    (lambda q, k, v, bt, sl: (q, k, v, bt, sl.long()), r"decode_attention: input seq_lens\[B\].*int32"),
    (lambda q, k, v, bt, sl: (q, k, v, bt.float(), sl), r"decode_attention: input block_table\[B,maxp\].*int32"),
    (lambda q, k, v, bt, sl: (q, k[..., :4].contiguous(), v[..., :4].contiguous(), bt, sl),
     r"decode_attention: k_cache\[P,page,Hkv,D\] must have q's head dim D=8"),
    (lambda q, k, v, bt, sl: (q, k, v[:-1].contiguous(), bt, sl), r"decode_attention: v_cache must have k_cache's"),
    (lambda q, k, v, bt, sl: (q, k, v, bt[:-1].contiguous(), sl), r"decode_attention: block_table\[B,maxp\] and "),
    (lambda q, k, v, bt, sl: (q[0], k, v, bt, sl), r"decode_attention: input q\[B,Hq,D\] must be 3-D"),
]


@pytest.mark.parametrize("change,msg", BAD, ids=range(len(BAD)))
def test_bad_inputs_raise_op_errors_naming_the_op(change, msg):
    args = _bad(change)
    for fn in (wb.reference(OP), wb.variant(OP, "torch_sdpa"), wb.variant(OP, "triton_split")):
        with pytest.raises(wb.OpError, match=msg):
            fn(*args)


def test_bad_scale_and_make_inputs_refuse_a_ragged_group():
    q, k, v, bt, sl = _inputs()
    with pytest.raises(wb.OpError, match="scale must be None or a finite float"):
        R.validate(q, k, v, bt, sl, scale=float("nan"))
    with pytest.raises(wb.OpError):
        wb.make_inputs(OP, B=2, Hq=6, Hkv=4, L=5, D=8, page=4)


def test_lse_merge_contract_errors():
    o, lse = wb.make_inputs("lse_merge", S=3, B=2, H=3, D=8)
    with pytest.raises(wb.OpError, match=r"lse_merge: input lse\[S,B,H\].*float32"):
        M.merge_validate(o, lse.half())
    with pytest.raises(wb.OpError, match=r"lse_merge: lse must be \[S,B,H\] = \[3, 2, 3\]"):
        M.merge_validate(o, lse[:, :1].contiguous())


# ------------------------------------------------------------------------------------------- the poisoned inputs
@pytest.mark.parametrize("shape", R.CHECK_SHAPES, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_unused_pages_slots_and_table_entries_are_poisoned(shape):
    q, k, v, bt, sl = wb.make_inputs(OP, seed=3, **shape)
    n_pool, page = k.shape[0], k.shape[1]
    owned = torch.zeros((n_pool, page), dtype=torch.bool)
    used_ids = []
    for b, n in enumerate(sl.tolist()):
        used = -(-n // page)
        ids = bt[b, :used].tolist()
        used_ids += ids
        assert all(0 <= i < n_pool for i in ids)
        for j, i in enumerate(ids):
            owned[i, :min(page, n - j * page)] = True
        junk = bt[b, used:]
        assert junk.numel() >= 1 and bool(((junk < 0) | (junk >= n_pool)).all()), "unused entries must be junk ids"
    assert len(set(used_ids)) == len(used_ids), "a page belongs to one sequence"
    assert (~owned).all(dim=1).sum() >= 2, "spare pages no sequence owns"
    for cache in (k, v):
        assert bool(torch.isnan(cache[~owned]).all()) and bool(torch.isfinite(cache[owned]).all())
    if len(used_ids) > 2:
        assert used_ids != sorted(used_ids), "page ids are shuffled"


def test_check_shapes_cover_gqa_ratios_lengths_and_batch_sizes():
    shapes = R.CHECK_SHAPES
    assert {s["Hq"] // s["Hkv"] for s in shapes} >= {1, 4, 8}
    assert any(1 < s["Hkv"] < s["Hq"] for s in shapes), "h % Hkv differs from h // group only here"
    assert {s["B"] for s in shapes} >= {1, 17}
    mixed = 0
    for s in shapes:
        lens = wb.make_inputs(OP, **s)[4].tolist()
        page = s["page"]
        mixed += 1 in lens and any(n % page == 0 for n in lens) and any(n > page and n % page == 1 for n in lens)
    assert mixed >= 2, "one-token sequences, full last pages and one-slot last pages in one batch"


# ------------------------------------------------------------------------------------------------- the reference
def _direct(q, k, v, bt, sl, scale):
    """Attention written as loops over tokens in float64, the block table read token by token."""
    b_, hq, d = q.shape
    page, hkv = k.shape[1], k.shape[2]
    out = torch.zeros((b_, hq, d), dtype=torch.float64)
    for b in range(b_):
        for h in range(hq):
            kvh = h // (hq // hkv)
            scores, rows = [], []
            for t in range(int(sl[b])):
                pid, slot = int(bt[b, t // page]), t % page
                scores.append(float((q[b, h].double() * k[pid, slot, kvh].double()).sum()) * scale)
                rows.append(v[pid, slot, kvh].double())
            mx = max(scores)
            w = [math.exp(s - mx) for s in scores]
            out[b, h] = sum(wi * r for wi, r in zip(w, rows, strict=True)) / sum(w)
    return out


@pytest.mark.parametrize("scale", [None, 0.3])
def test_reference_equals_a_direct_float64_loop(scale):
    args = _inputs(B=6, Hq=8, Hkv=2, L=11, D=8, page=4, seed=2)
    want = _direct(*args, 1 / math.sqrt(8) if scale is None else scale)
    got = wb.reference(OP)(*args, scale=scale)
    assert got.dtype == torch.float64 and torch.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_torch_baselines_agree_with_the_reference_in_every_dtype():
    for dt, tol in ((torch.float32, 1e-5), (torch.float16, 3e-3), (torch.bfloat16, 3e-2)):
        args = _inputs(dt, B=4, Hq=8, Hkv=1, L=10, D=16, page=4)
        ref = wb.reference(OP)(*args)
        for name in ("torch_sdpa", "torch_naive"):
            out = wb.variant(OP, name)(*args)
            assert out.dtype == dt and torch.allclose(out.double(), ref, atol=tol, rtol=tol), (name, dt)


def test_split_partials_merged_by_lse_merge_give_the_reference():
    args = _inputs(B=5, Hq=4, Hkv=2, L=13, D=8, page=4, seed=1)
    lens = args[4].tolist()
    for splits in (1, 2, 3, 8):
        o, lse = R.split_partials(*args[:4], lens, 1 / math.sqrt(8), splits)
        merged = M.merge_reference(o.float(), lse.float())
        assert torch.allclose(merged, R.reference(*args), atol=1e-6), splits
    for n_pages in range(0, 9):
        for splits in (1, 2, 3, 4):
            ranges = R.split_ranges(n_pages, splits)
            covered = [p for lo, hi in ranges for p in range(lo, hi)]
            assert covered == list(range(n_pages)) and len(ranges) == splits


# ---------------------------------------------------------------------------------- decode_attention_partial
def _direct_split(q, k, v, bt, sl, scale, splits):
    """The partials written as loops: split s of sequence b covers tokens [lo * page, min(hi * page, n)) of the
    pages split_ranges gives it; its output is the softmax over those tokens, its lse their log-sum-exp."""
    page = k.shape[1]
    o = torch.zeros((splits, *q.shape), dtype=torch.float64)
    lse = torch.full((splits, *q.shape[:2]), float("-inf"), dtype=torch.float64)
    for b, n in enumerate(sl.tolist()):
        for s, (lo, hi) in enumerate(R.split_ranges(-(-n // page), splits)):
            t0, t1 = lo * page, min(hi * page, n)
            for h in range(q.shape[1]) if t0 < t1 else ():
                kvh = h // (q.shape[1] // k.shape[2])
                ids = [(int(bt[b, t // page]), t % page) for t in range(t0, t1)]
                sc = torch.tensor([float(q[b, h].double() @ k[i, j, kvh].double()) * scale for i, j in ids])
                lse[s, b, h] = torch.logsumexp(sc.double(), 0)
                w = torch.softmax(sc.double(), 0)
                o[s, b, h] = sum(wi * v[i, j, kvh].double() for wi, (i, j) in zip(w, ids, strict=True))
    return o, lse


def test_decode_attention_partial_is_the_split_of_split_ranges_in_float64():
    args = _inputs(B=5, Hq=4, Hkv=2, L=13, D=8, page=4, seed=6)
    for splits, scale in ((1, None), (3, 0.3), (5, None)):  # 5 splits: more than most sequences have pages
        o, lse = decode_attention_partial(*args, scale=scale, num_splits=splits)
        want_o, want_lse = _direct_split(*args, 1 / math.sqrt(8) if scale is None else scale, splits)
        assert o.dtype == lse.dtype == torch.float64 and o.shape == (splits, 5, 4, 8) and lse.shape == (splits, 5, 4)
        assert torch.equal(torch.isinf(lse), torch.isinf(want_lse)), splits  # the same empty splits
        assert torch.allclose(o, want_o, atol=1e-12) and torch.allclose(lse, want_lse, atol=1e-12), splits
    assert int(torch.isfinite(lse[:, 0, 0]).sum()) == 4 and bool(torch.isinf(lse).any())  # 4 pages, 5 splits


def test_decode_attention_partial_merged_by_every_lse_merge_is_the_reference():
    """The merge tested alone: exact partials in, each lse_merge variant's merge out, against decode_attention."""
    for dt, tol in ((torch.float32, 2e-5), (torch.float16, 2e-3)):
        args = _inputs(dt, B=6, Hq=8, Hkv=2, L=17, D=16, page=4, seed=7)
        ref = R.reference(*args)
        for splits in (2, 4, 7):
            o, lse = decode_attention_partial(*args, num_splits=splits)
            assert torch.allclose(M.merge_reference(o.to(dt), lse.float()), ref, atol=tol, rtol=tol), (dt, splits)
            for v in wb.variants("lse_merge"):
                if v.expected_diagnosis is None and v.runs_here(dt):
                    got = v(o.to(dt), lse.float()).double()
                    assert torch.allclose(got, ref, atol=tol, rtol=tol), (v.name, dt, splits)


@pytest.mark.parametrize("rung", ["triton_split", "triton_gqa_dot"])
def test_the_triton_split_kernels_write_decode_attention_partial(rung):
    """Each Triton split kernel's partials (before its merge) are decode_attention_partial's, SPLITS = 2."""
    from kernels.decode_attention import v6_triton_split as V6
    from kernels.decode_attention import v7_triton_gqa_dot as V7

    args = _inputs(B=4, Hq=8, Hkv=2, L=13, D=16, page=4, seed=8)
    kernel, extra = ((V6.split_kernel, {}) if rung == "triton_split" else
                     (V7.gqa_dot_kernel, {"min_tile": V7.DOT_MIN, "PRECISION": "ieee"}))
    o, lse = V6.split_partials(*args, None, kernel=kernel, SPLITS=2, **extra)
    want_o, want_lse = decode_attention_partial(*args, num_splits=2)
    assert torch.equal(torch.isinf(lse[:2]), torch.isinf(want_lse)) and bool(torch.isinf(lse[2:]).all())
    live = torch.isfinite(want_lse)
    assert torch.allclose(lse[:2].double()[live], want_lse[live], atol=1e-5)
    assert torch.allclose(o[:2].double(), want_o, atol=1e-5)


def test_decode_attention_partial_refuses_bad_splits_and_inputs():
    args = _inputs()
    for bad in (0, -1, 2.0, True):
        with pytest.raises(wb.OpError, match=r"decode_attention: num_splits must be an int >= 1"):
            decode_attention_partial(*args, num_splits=bad)
    with pytest.raises(wb.OpError, match=r"decode_attention: input seq_lens\[B\].*int32"):
        decode_attention_partial(*args[:4], args[4].long())


# --------------------------------------------------------------------------------------------------- lse_merge
def test_lse_merge_skips_an_empty_split_and_gives_zero_when_all_are_empty():
    g = torch.Generator().manual_seed(0)
    o = torch.randn((3, 1, 2, 4), generator=g)
    lse = torch.tensor([[[0.5, -1.0]], [[2.0, float("-inf")]], [[-3.0, float("-inf")]]])
    o[1, 0, 1] = float("nan")  # empty splits hold junk
    o[2, 0, 1] = float("nan")
    got = M.merge_reference(o, lse)
    w = torch.exp(torch.tensor([0.5, 2.0, -3.0]).double())
    want0 = (w[:, None] * o[:, 0, 0].double()).sum(0) / w.sum()
    assert torch.allclose(got[0, 0], want0) and torch.allclose(got[0, 1], o[0, 0, 1].double())
    lse_all_empty = torch.full((3, 1, 2), float("-inf"))
    assert bool((M.merge_reference(o, lse_all_empty) == 0).all())
    for name in ("torch_merge", "triton_merge", "cuda_merge"):
        v = wb.variant("lse_merge", name)
        assert torch.allclose(v(o, lse).double(), got, atol=1e-6), name
        assert bool((v(o, lse_all_empty) == 0).all()), name


def test_lse_merge_inputs_hold_empty_splits_with_junk():
    o, lse = wb.make_inputs("lse_merge", S=3, B=2, H=3, D=8)
    assert bool(torch.isinf(lse[-1, 0]).all()) and bool(torch.isnan(o[-1, 0]).all())
    assert bool(torch.isinf(lse[:, -1, -1]).all())
    assert bool((M.merge_reference(o, lse)[-1, -1] == 0).all())


def test_merge_without_rescale_differs_from_the_merge_only_when_the_max_grows():
    o, lse = wb.make_inputs("lse_merge", S=4, B=3, H=4, D=8, seed=5)
    assert not torch.allclose(R.merge_without_rescale(o, lse), M.merge_reference(o, lse))
    falling = lse.sort(dim=0, descending=True).values  # the first split has the max: nothing to rescale
    finite = torch.isfinite(falling).all(dim=0)
    same = torch.isclose(R.merge_without_rescale(o, falling), M.merge_reference(o, falling), atol=1e-9)
    assert bool(same[finite].all())


# ---------------------------------------------------------------------------------- what the shared reports cover
def test_variant_reports_cover_the_dtypes_and_shapes():
    rep = variant_reports(OP, "triton_split")[0]
    assert {c.dtype for c in rep.cases} == {"float32", "float16", "bfloat16"}
    assert {tuple(c.shape.items()) for c in rep.cases} == {tuple(s.items()) for s in R.CHECK_SHAPES}
    assert any(c.probe == "flag" and c.shape.get("scale") == 0.3 for c in rep.probes)


def test_the_gqa_mapping_bug_shows_only_where_hkv_is_neither_1_nor_hq():
    rep = wrong_report(OP, "wrong_gqa_head_mod")
    for c in rep.cases:
        assert c.ok == (c.shape["Hkv"] in (1, c.shape["Hq"])), c.line()


def test_an_empty_batch_gives_an_empty_output_everywhere():
    args = wb.make_inputs(OP, B=0, Hq=4, Hkv=2, L=5, D=8, page=4)
    assert R.validate(*args)["L"] == 0
    for v in wb.variants(OP):
        assert tuple(v(*args).shape) == (0, 4, 8), v.name
    o, lse = wb.make_inputs("lse_merge", S=2, B=0, H=3, D=4)
    for v in wb.variants("lse_merge"):
        assert tuple(v(o, lse).shape) == (0, 3, 4), v.name


def test_explain_names_a_dropped_tail_and_nothing_for_a_right_answer():
    args = _inputs(B=4, Hq=4, Hkv=2, L=9, D=8, page=4, seed=4)
    ref = R.reference(*args)
    assert R.explain([ref], [ref], args, {}, 1e-6, 1e-6) is None
    short = args[4] - 1
    short[short == 0] = 1
    dropped = R.reference(*args[:4], short)
    assert R.explain([dropped], [ref], args, {}, 1e-6, 1e-6) == "masking"


def _every_entry(clamp: bool):
    """A decode attention that gathers all maxp block-table entries of each sequence and masks the scores past
    seq_lens to -inf: the junk entries index past the pool unless clamped, and then their NaN pages come in."""

    def fn(q, k_cache, v_cache, block_table, seq_lens, scale=None):
        ids = block_table.long().clamp(0, k_cache.shape[0] - 1) if clamp else block_table.long()
        b, hq, d = q.shape
        group = hq // k_cache.shape[2]
        k = k_cache[ids].flatten(1, 2).float().repeat_interleave(group, dim=2)  # [B, maxp*page, Hq, D]
        v = v_cache[ids].flatten(1, 2).float().repeat_interleave(group, dim=2)
        s = torch.einsum("bhd,bthd->bht", q.float(), k) * R.default_scale(d, scale)
        keep = torch.arange(k.shape[1])[None, None, :] < seq_lens[:, None, None]
        p = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
        return torch.einsum("bht,bthd->bhd", p, v).to(q.dtype)

    return fn


def test_a_kernel_that_reads_past_its_pages_is_caught_by_the_poisoned_inputs():
    shapes = R.CHECK_SHAPES[1:3]
    rep = wb.check(_every_entry(clamp=False), OP, shapes=shapes, seeds=(0,), probes=False)
    assert rep.diagnosis == "error" and "IndexError" in rep.summary()  # page id P + 7
    rep = wb.check(_every_entry(clamp=True), OP, shapes=shapes, seeds=(0,), probes=False)
    assert rep.diagnosis == "computed_nan", rep.summary()  # masked scores, yet 0 * NaN
