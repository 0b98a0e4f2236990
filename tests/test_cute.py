"""wb.cute: CuTe's layout algebra run on the host, cross-checked against the pure-Python evaluator; swizzles and
shared-memory requests counted by wb.profile's 32-bank model; layout and TV pictures against hand counts."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

pytest.importorskip("cutlass")

from workbench import cute  # noqa: E402
from workbench.cute import _jit, algebra  # noqa: E402
from workbench.cute.algebra import Layout, LayoutError, Swizzle, SwizzledLayout  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TILE = Layout((64, 64), (64, 1))  # a 64x64 bf16 tile, row-major: 128-byte rows


# ----------------------------------------------------------------------------------------- pure evaluator
def test_pure_layout_by_hand():
    a = Layout((4, 8), (8, 1))
    assert str(a) == "(4,8):(8,1)"
    assert a(1, 2) == 10 and a((1, 2)) == 10 and a(5) == 9  # index 5 = (1, 1) colexicographically
    h = Layout((4, (2, 4)), (8, (1, 2)))
    assert h((1, (1, 2))) == 13 and h(3) == 24 and h.size == 32 and h.cosize == 32
    assert str(algebra.coalesce(Layout((2, (2, 2)), (1, (2, 4))))) == "8:1"
    assert str(algebra.coalesce(Layout((2, (2, 2)), (4, (1, 2))))) == "(2,4):(4,1)"  # (2,2):(1,2) merges
    assert str(algebra.complement(Layout(4, 2), 24)) == "(2,3):(1,8)"
    assert algebra.composition(Layout((4, 8), (8, 1)), Layout(8, 1)).offsets() == [0, 8, 16, 24, 1, 9, 17, 25]
    assert algebra.composition(Layout((4, 8), (8, 1)), Layout(8, 4)).offsets() == list(range(8))  # row 0
    with pytest.raises(LayoutError, match="congruent"):
        Layout((4, 8), 1)


def _random_layout(rng: random.Random) -> Layout:
    """Return a compact layout of 1-3 modes (some nested) with its modes in a random order of strides."""
    shapes = [rng.choice([2, 4, 8]) for _ in range(rng.randint(1, 3))]
    order = list(range(len(shapes)))
    rng.shuffle(order)
    strides, s = [0] * len(shapes), 1
    for i in order:
        strides[i] = s
        s *= shapes[i]
    if len(shapes) == 3 and rng.random() < 0.5:
        return Layout((shapes[0], (shapes[1], shapes[2])), (strides[0], (strides[1], strides[2])))
    return Layout(tuple(shapes), tuple(strides)) if len(shapes) > 1 else Layout(shapes[0], strides[0])


CASES_SEED = 33


def _cases() -> list[tuple[str, Layout, object]]:
    rng = random.Random(CASES_SEED)
    out: list[tuple[str, Layout, object]] = []
    for _ in range(24):
        a = _random_layout(rng)
        out.append(("coalesce", a, None))
        out.append(("complement", a, a.cosize * rng.choice([1, 2, 4])))
        b = Layout(rng.choice([2, 4]), rng.choice([1, 2]))
        if a.size % (b.size * b.stride) == 0:
            out.append(("composition", a, b))
            out.append(("logical_divide", a, b))
        out.append(("logical_product", a, Layout((2, 3), (3, 1))))
    for a in (Layout((8, 16), (16, 1)), Layout((8, 16), (1, 8)), Layout((16, (2, 4)), (8, (1, 128)))):
        out.append(("zipped_divide", a, (2, 4)))
        out.append(("logical_divide", a, (4, 2)))
        out.append(("composition", a, (Layout(4, 2), Layout(2, 1))))
    for a, b in ((Layout((2, 2), (1, 2)), Layout((3, 4), (1, 3))), (Layout((2, 4), (4, 1)), Layout((4, 2), (2, 1)))):
        out.append(("blocked_product", a, b))
        out.append(("raked_product", a, b))
    return out


def _cute_results(cases: list[tuple[str, Layout, object]]) -> list[tuple[Layout, list[int]]]:
    """Run every case's op through CuTe in one trace; return each result's layout and CuTe's offsets of it."""
    def job():
        import cutlass.cute as ct

        res = []
        for op, a, arg in cases:
            x = getattr(ct, op)(cute._mk(a)) if arg is None else getattr(ct, op)(cute._mk(a), cute._mk(arg))
            lay = cute._back(x)
            res.append((lay, [int(x(i)) for i in range(lay.size)]))
        return res
    return _jit.run(job)


def test_cute_agrees_with_the_pure_evaluator_on_many_layouts():
    cases = _cases()
    assert len(cases) > 80
    got = _cute_results(cases)
    for (op, a, arg), (lay, offs) in zip(cases, got, strict=True):
        mine = getattr(algebra, op)(a) if arg is None else getattr(algebra, op)(a, arg)
        where = f"{op}({a}, {arg})"
        assert lay.offsets() == offs, f"{where}: the pure evaluator of CuTe's own result {lay} disagrees with CuTe"
        assert mine.size == lay.size and mine.offsets() == offs, f"{where}: pure {mine} vs CuTe {lay}"
        if op in ("coalesce", "complement"):
            assert str(mine) == str(lay), where


def test_public_wrappers_return_cutes_answers():
    a = Layout((8, 16), (16, 1))
    assert str(cute.make_layout((4, 8))) == "(4,8):(1,4)"  # CuTe's default: column-major
    assert str(cute.make_layout((4, 8), (8, 1))) == "(4,8):(8,1)"
    assert str(cute.coalesce(Layout((2, (2, 2)), (4, (1, 2))))) == "(2,4):(4,1)"
    assert str(cute.complement(Layout(4, 2), 24)) == "(2,3):(1,8)"
    assert str(cute.zipped_divide(a, (2, 4))) == "((2,4),(4,4)):((16,1),(32,4))"
    assert str(cute.logical_divide(Layout(24, 1), Layout(4, 2))) == "(4,(2,3)):(2,(1,8))"
    assert str(cute.blocked_product(Layout((2, 2), (1, 2)), Layout((3, 4), (1, 3)))) == "((2,3),(2,4)):((1,4),(2,12))"
    assert str(cute.raked_product(Layout((2, 2), (1, 2)), Layout((3, 4), (1, 3)))) == "((3,2),(4,2)):((4,1),(12,2))"
    tile, first = cute.local_tile(a, (4, 8), (1, 0))
    assert (str(tile), first) == ("(4,8):(16,1)", 64) and algebra.local_tile(a, (4, 8), (1, 0)) == (tile, first)
    thr = Layout((2, 4), (4, 1))
    for t in (0, 5, 7):
        part, off = cute.local_partition(a, thr, t)
        assert (part, off) == algebra.local_partition(a, thr, t)
    assert cute.local_partition(a, thr, 5) == (Layout((4, 4), (32, 4)), 17)  # thread 5 = (1, 1): row 1, col 1
    assert cute.table(Layout((2, 3), (3, 1))) == [[0, 1, 2], [3, 4, 5]]


def test_bad_input_is_named():
    with pytest.raises(LayoutError, match="congruent"):
        cute.make_layout((4, 8), (1,))
    with pytest.raises(LayoutError, match="index 8 is outside the 8 threads"):
        cute.local_partition(Layout((8, 16), (16, 1)), Layout((2, 4), (4, 1)), 8)
    with pytest.raises(LayoutError, match=r"tile coordinate \(2, 0\) is outside the 2x2 tiles"):
        cute.local_tile(Layout((8, 16), (16, 1)), (4, 8), (2, 0))
    with pytest.raises(LayoutError, match="must be a wb.cute.Layout"):
        cute.coalesce((4, 8))
    with pytest.raises(LayoutError, match="unknown atom"):
        cute.mma_tv("sm70_8x8x4")
    with pytest.raises(LayoutError, match="S >= B"):
        Swizzle(3, 3, 2)


# ----------------------------------------------------------------------------------------- swizzles
def test_swizzle_bits_are_cutes():
    sw = cute.swizzle(3, 3, 3)
    assert sw(0b1_000_000) == 0b1_001_000  # row 1 (bit 6) flips chunk bit 3
    assert sw(0b101_010_111) == 0b101_111_111  # chunk 010 ^ row 101 = 111; the low 3 bits stay
    assert all(sw(sw(x)) == x for x in range(4096))  # an involution: a permutation of the tile
    s = SwizzledLayout(sw, TILE)
    cute_offs = cute.evaluate(s)
    assert cute_offs == s.offsets()
    # element (r, c): chunk c // 8 of row r moves to chunk (c // 8) ^ (r % 8), the element inside the chunk stays
    assert all(s(r, c) == 64 * r + 8 * ((c // 8) ^ (r % 8)) + c % 8 for r in range(64) for c in range(64))
    in_bytes = SwizzledLayout(Swizzle(3, 4, 3), Layout((64, 128), (128, 1)))  # the same tile counted in bytes
    assert all(in_bytes(r, 2 * c) == 2 * s(r, c) for r in range(64) for c in range(64))
    assert cute.evaluate(in_bytes) == in_bytes.offsets()


def test_swizzle_makes_the_column_read_conflict_free():
    plain = cute.bank_count(cute.ldmatrix(TILE))
    # 128-byte rows: a column's 16-byte chunks all sit in banks 0-3
    assert (plain.wavefronts, plain.phases, plain.conflicts, plain.ways) == (32, 4, 28, 8)
    swz = cute.bank_count(cute.ldmatrix(SwizzledLayout(Swizzle(3, 3, 3), TILE)))
    assert (swz.wavefronts, swz.conflicts, swz.ways) == (4, 0, 1)
    half = cute.bank_count(cute.ldmatrix(SwizzledLayout(Swizzle(2, 3, 3), TILE)))  # two row bits: rows r, r+4 collide
    assert (half.wavefronts, half.conflicts, half.ways) == (8, 4, 2)
    units = cute.bank_count(cute.ldmatrix(SwizzledLayout(Swizzle(3, 4, 3), TILE)))  # byte swizzle on elements
    assert units.ways == 2 and units.conflicts == 4
    padded = cute.bank_count(cute.ldmatrix(Layout((64, 64), (72, 1))))  # pad each row by 16 bytes
    assert padded.conflicts == 0
    for lay in (TILE, SwizzledLayout(Swizzle(3, 3, 3), TILE)):  # row-wise 16-byte copies are conflict-free either way
        assert cute.bank_count(cute.cp_async(lay)).conflicts == 0
    w = cute.bank_count(cute.wgmma_read(TILE))
    assert (w.phases, w.ways, w.conflicts) == (16, 8, 112)
    assert cute.bank_count(cute.wgmma_read(SwizzledLayout(Swizzle(3, 3, 3), TILE))).conflicts == 0


def test_bank_model_is_wb_profiles():
    from workbench._numba_sim import shared_wavefronts

    for lay in (TILE, SwizzledLayout(Swizzle(3, 3, 3), TILE), SwizzledLayout(Swizzle(2, 3, 3), TILE)):
        req = cute.ldmatrix(lay)
        wave, phases = shared_wavefronts([(a.lane, a.addr, a.size) for a in req.accesses])
        c = cute.bank_count(req)
        assert (wave, phases) == (c.wavefronts, c.phases)


def test_request_rejects_a_split_vector():
    with pytest.raises(LayoutError, match="not contiguous"):
        # column bit 5 xors into bit 2: the two halves of each 16-byte chunk swap places
        cute.ldmatrix(SwizzledLayout(Swizzle(3, 2, 3), TILE), col=32)
    with pytest.raises(LayoutError, match="outside the 64x64 tile"):
        cute.ldmatrix(TILE, row=60)


# ----------------------------------------------------------------------------------------- TV layouts
def test_sm80_mma_tv_layout_is_the_ptx_fragment():
    m = cute.mma_tv("sm80_16x8x16")
    assert (m.atom, m.tile, m.threads) == ((16, 8, 16), (16, 8, 16), 32)
    offs = cute.evaluate(m.tv_c)
    for lane in range(32):
        for v in range(4):  # PTX: row = lane // 4 (+8 for c2, c3), column = 2 * (lane % 4) + (v & 1)
            idx = offs[lane + 32 * v]
            assert (idx % 16, idx // 16) == (lane // 4 + 8 * (v // 2), 2 * (lane % 4) + v % 2)
    fig = cute.tv_picture(m.tv_c, (16, 8))
    text = fig.data[0].text
    assert text[0][0] == "T0V0" and text[0][2] == "T1V0" and text[1][0] == "T4V0" and text[8][0] == "T0V2"


def test_ldmatrix_request_is_cutes_tiled_copy():
    cp = cute.copy_tv("sm80_ldmatrix_x4_A")
    assert (cp.tile, cp.threads) == ((16, 16), 32)
    src = cute.evaluate(cp.tv_src)
    values = cp.tv_src.size // 32
    req = cute.ldmatrix(Layout((16, 16), (16, 1)))  # a row-major 16x16 tile: offset = 16 * row + column
    for a in req.accesses:  # lane t's row address is where CuTe's TiledCopy starts thread t's values
        first = src[a.lane]  # value 0 of thread a.lane, column-major index m + 16 * k
        assert (first % 16, first // 16) == divmod(a.addr // 2, 16), a.lane
        assert sorted(src[a.lane + 32 * v] // 16 for v in range(values)) == list(range(first // 16, first // 16 + 8))
    dst, mma_a = cute.evaluate(cp.tv_dst), cute.evaluate(cute.mma_tv("sm80_16x8x16").tv_a)
    assert dst == mma_a  # the copy hands each thread exactly the A fragment mma.sync expects
    with pytest.raises(LayoutError, match="unknown copy"):
        cute.copy_tv("sm90_tma")


def test_sm90_wgmma_tv_layouts():
    m = cute.mma_tv("sm90_64x64x16", (2, 1, 1))
    assert (m.atom, m.tile, m.threads) == ((64, 64, 16), (128, 64, 16), 256)
    offs = cute.evaluate(m.tv_c)
    assert len(set(offs)) == 128 * 64  # every accumulator held exactly once
    assert offs[32] % 128 == 16 and offs[128] % 128 == 64  # warp 1 starts at row 16, warpgroup 1 at row 64
    # A is read through a descriptor: every thread of a warpgroup "holds" the whole 64x16 tile (thread stride 0)
    assert set(algebra.flatten(m.tv_a.mode(0).stride)) == {0, 64} and m.tv_a.mode(0).shape == (128, 2)
    assert sorted(cute.evaluate(m.tv_a.mode(1))) == sorted(i % 64 + 128 * (i // 64) for i in range(1024))
    r = cute.mma_tv("sm90_64x64x16", a_from_registers=True)
    ra = cute.evaluate(r.tv_a)
    assert len(set(ra)) == 64 * 16 and ra[0] != ra[1]


# ----------------------------------------------------------------------------------------- pictures
def test_layout_picture_shows_offsets_and_banks():
    fig = cute.layout_picture(Layout((4, 8), (8, 1)))
    assert [list(r) for r in fig.data[0].z] == [[8 * i + j for j in range(8)] for i in range(4)]
    assert fig.data[0].text[1][2] == "10"
    banks = cute.layout_picture(Layout((8, 64), (64, 1)), color="bank")
    assert [banks.data[0].z[i][0] for i in range(8)] == [0] * 8  # column 0 of 128-byte rows: one bank
    sw = cute.layout_picture(SwizzledLayout(Swizzle(3, 3, 3), Layout((8, 64), (64, 1))), color="bank")
    assert sorted(sw.data[0].z[i][0] for i in range(8)) == list(range(0, 32, 4))
    pic = cute.bank_picture(cute.ldmatrix(TILE))
    assert "8-way" in pic.layout.title.text and len(pic.data[0].z) == 32  # a row per wavefront


def test_swizzle_explorer_slider_moves_the_bank_map():
    box = cute.swizzle_explorer()
    assert [box.count(b).ways for b in range(4)] == [8, 4, 2, 1]  # each row bit halves the conflict
    assert "no swizzle" in box.info.value and len(box.figure.data[0].z) == 32
    box.bits_slider.value = 3
    assert "conflict-free" in box.info.value and len(box.figure.data[0].z) == 4
    with pytest.raises(LayoutError, match="bits must be in"):
        cute.swizzle_explorer(bits=4)


def test_a_missing_dsl_is_named(monkeypatch):
    import sys

    monkeypatch.setattr(_jit, "_RUNNER", None)
    monkeypatch.setitem(sys.modules, "cutlass", None)  # as if nvidia-cutlass-dsl were not installed
    with pytest.raises(ImportError, match="pip install nvidia-cutlass-dsl"):
        cute.coalesce(Layout(4, 1))


def test_workbench_import_does_not_import_cutlass():
    import workbench

    assert workbench._LAZY["cute"] == ("workbench.cute", None)
    for path in (ROOT / "workbench" / "cute").glob("*.py"):
        top = ast.parse(path.read_text()).body
        names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
        assert not any(x.split(".")[0] == "cutlass" for x in names), f"{path.name} imports cutlass at import time"


# ----------------------------------------------------------------------------------------- the exercises' references
def test_exercise_references_agree_with_cute():
    from workbench.cute import refs

    shape, stride = (4, (2, 4)), (8, (1, 2))
    flat = cute.evaluate(Layout(shape, stride))
    assert [refs.layout_index((4, 2, 4), (8, 1, 2), i) for i in range(32)] == flat
    part, first = cute.local_partition(Layout((8, 16), (16, 1)), Layout((2, 4), (4, 1)), 5)
    assert refs.partition_offsets(8, 16, 2, 4, 5) == [first + o for o in cute.evaluate(part)]
    tv = cute.mma_tv("sm80_16x8x16").tv_c
    assert tv.mode(0) == refs.MMA_C.mode(0) and tv.mode(1).size == 4
    offs = cute.evaluate(tv)
    assert all(refs.mma_c_coord(t, v) == (offs[t + 32 * v] % 16, offs[t + 32 * v] // 16)
               for t in range(32) for v in range(4))
    for row_bytes in (16, 32, 64, 128):  # the chosen swizzle is conflict-free and keeps chunks in their row
        b, m, s = refs.conflict_free_swizzle(row_bytes)
        tile = SwizzledLayout(Swizzle(b, m, s), Layout((32, row_bytes), (row_bytes, 1)))
        req = cute.request(tile, [(r, 0) for r in range(32)], itemsize=1)
        assert cute.bank_count(req).conflicts == 0, row_bytes
        assert all(tile(r, c) // row_bytes == r for r in range(32) for c in range(row_bytes))


@pytest.mark.parametrize("drill_id", ["cute-ex-layout-index", "cute-ex-swizzle-choice", "cute-ex-local-partition",
                                      "cute-ex-read-tv"])
def test_exercises_pass_the_reference_and_name_each_classic_mistake(drill_id, tmp_path, monkeypatch):
    import workbench as wb
    from workbench.practice import concept_refs

    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    d = wb.drill(drill_id)
    ref = concept_refs.get(d.ref)
    assert d.submit(ref.fn).passed
    assert len(ref.wrong) >= 1
    for name, wrong, _ in ref.wrong:
        verdict = cute.try_answer(drill_id, wrong)  # records nothing, shows no model answer
        assert f"This is {name}:" in verdict and "model answer" not in verdict, (drill_id, name)
        r = wb.drill(drill_id).submit(wrong)
        assert not r.passed and f"This is {name}:" in str(r.feedback), (drill_id, name)
    # a wrong answer that is not one of the classic ones is rejected without a name
    assert "This is" not in cute.try_answer(drill_id, lambda *a: -1) and "Not yet" in cute.try_answer(
        drill_id, lambda *a: -1)
