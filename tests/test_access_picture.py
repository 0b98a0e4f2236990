"""Access pictures (wb.profile(...).picture): per-lane traces of one warp or block, and the counts they show.

Every count a picture shows must be the profile's: the traces are checked against hand counts (4, 32 and 16
sectors per request; a 32-way bank conflict and none with a +1 pad) and against the launch's own counters.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import access_picture, profile_counters
from workbench.profile_counters import LaunchRecord, Profile, ProfileError

pytestmark = pytest.mark.skipif(wb.mode() != "cpu", reason="emulator traces (cpu mode)")

SRC = r"""
extern "C" __global__ void copy_strided(const float* x, float* y, int n, int stride) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i * stride];
}

extern "C" __global__ void copy4(const float4* x, float4* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

extern "C" __global__ void diverge(const float* x, float* y) {
    int t = threadIdx.x;
    float v = (t & 1) ? x[t * 8] : x[t];
    if (t < 40) v += x[63 - t];
    y[t] = v;
}

extern "C" __global__ void tile_columns(const float* x, float* y, int pad) {
    __shared__ float tile[32 * 33];
    int tx = threadIdx.x, ty = threadIdx.y, w = 32 + pad;
    tile[ty * w + tx] = x[ty * 32 + tx];
    __syncthreads();
    y[ty * 32 + tx] = tile[tx * w + ty];
}
"""


@pytest.fixture(scope="module")
def kernels():
    mod = wb.cuda.RawModule(SRC)
    return {name: mod.get_function(name) for name in ("copy_strided", "copy4", "diverge", "tile_columns")}


def _copy(kernels, stride, n=64, blocks=2):
    x, y = np.arange(n * stride, dtype=np.float32), np.zeros(n, np.float32)
    return wb.profile(lambda: kernels["copy_strided"]((blocks,), (n // blocks,), (x, y, np.int32(n), np.int32(stride))))


@pytest.mark.parametrize("stride, sectors", [(1, 4), (32, 32)])
def test_scalar_loads_touch_4_sectors_coalesced_and_32_at_a_stride_of_32(kernels, stride, sectors):
    p = _copy(kernels, stride)
    fig = p.picture(buffer="x")
    meta = fig.layout.meta
    assert meta["sectors (drawn)"] == [sectors]
    assert meta["sectors per load request"] == p["sectors per load request"] == sectors
    assert meta["global load efficiency"] == pytest.approx(p["global load efficiency"])
    (req,) = p.trace().on("x")
    assert req.kind == "load" and [a.lane for a in req.accesses] == list(range(32))
    assert [a.offset for a in req.accesses] == [4 * stride * lane for lane in range(32)]
    assert req.line == 4 and "x[i * stride]" in req.code
    assert f"{sectors} sectors per request" in fig.layout.title.text
    assert f"{32 * sectors:,} B moved for 128 B requested" in fig.layout.title.text


def test_float4_loads_touch_16_sectors(kernels):
    x, y = np.arange(256, dtype=np.float32), np.zeros(256, np.float32)
    p = wb.profile(lambda: kernels["copy4"]((1,), (64,), (x, y, np.int32(64))))
    fig = p.picture(buffer=0)  # by parameter index
    assert fig.layout.meta["buffer"] == "x" and fig.layout.meta["sectors (drawn)"] == [16]
    assert fig.layout.meta["sectors per load request"] == p["sectors per load request"] == 16
    req = p.trace().on("x")[0]
    assert {a.size for a in req.accesses} == {16} and req.sectors() == list(range(16))
    lanes = fig.data[1]
    assert lanes.customdata[0][0].startswith("warp 0, lane 0 (thread (0,0,0))") and "x[0]" in lanes.customdata[0][0]


@pytest.mark.parametrize("pad, wavefronts", [(0, 32), (1, 1)])
def test_a_tile_read_by_columns_is_a_32_way_conflict_and_none_padded(kernels, pad, wavefronts):
    x, y = np.arange(1024, dtype=np.float32), np.zeros(1024, np.float32)
    p = wb.profile(lambda: kernels["tile_columns"]((1,), (32, 32), (x, y, np.int32(pad))))
    fig = p.picture("tile_columns", "tile", kind="load")
    meta = fig.layout.meta
    assert meta["wavefronts (drawn)"] == [wavefronts] and meta["bank conflicts (drawn)"] == [wavefronts - 1]
    assert meta["wavefronts per shared load request"] == p["wavefronts per shared load request"] == wavefronts
    assert len(fig.data[0].z) == wavefronts  # a row per wavefront
    text = fig.layout.title.text
    assert ("32-way bank conflict: 32 wavefronts, 31 bank conflicts" if pad == 0 else "conflict-free") in text
    banks = p.trace().on("tile")[1].bank_phases()[0]
    assert list(banks) == ([0] if pad == 0 else list(range(32)))  # tile[tx * 32]: all of them in bank 0


def test_a_whole_block_trace_counts_what_the_profile_counts(kernels):
    x, y = np.arange(1024, dtype=np.float32), np.zeros(1024, np.float32)
    p = wb.profile(lambda: kernels["tile_columns"]((1,), (32, 32), (x, y, np.int32(0))))
    tr = p.trace(warp="all")
    assert tr.warp is None and {r.warp for r in tr.requests} == set(range(32))
    got, counts = tr.metrics(), p.launches[0].counts
    keys = [k for k in counts if k in got]
    assert len(keys) >= 15
    assert {k: got[k] for k in keys} == {k: counts[k] for k in keys}
    fig = p.picture(buffer="x", warp="all")
    assert fig.layout.meta["requests"] == 1 and fig.layout.meta["sectors (drawn)"] == [4] * 32
    assert fig.layout.meta["global load requests"] == p["global load requests"] == 32


def test_divergent_lanes_are_traced_as_they_are_counted(kernels):
    x, y = np.arange(512, dtype=np.float32), np.zeros(64, np.float32)
    p = wb.profile(lambda: kernels["diverge"]((1,), (64,), (x, y)))
    got, counts = p.trace(warp="all").metrics(), p.launches[0].counts
    nonzero = {k: v for k, v in counts.items() if v and k.startswith(("l1tex", "smsp"))}
    assert len(nonzero) >= 8 and {k: got.get(k) for k in nonzero} == nonzero
    lanes = sorted(len(r.accesses) for r in p.trace(warp=1).on("x"))
    assert lanes == [8, 16, 16]  # warp 1: odd and even lanes apart, then lanes 32..39 only


def test_another_block_and_warp(kernels):
    p = _copy(kernels, 1, n=128, blocks=2)
    req = p.trace(block=1, warp=1).on("y")[0]
    assert req.kind == "store" and req.warp == 1
    assert [a.offset for a in req.accesses] == [4 * (64 + 32 + lane) for lane in range(32)]
    assert req.accesses[0].thread == (32, 0, 0)
    assert p.trace(block=(1,), warp=1) is p.trace(block=1, warp=1)  # kept: one re-run per block and warp


def test_tracing_is_off_unless_a_picture_asks(kernels):
    p = _copy(kernels, 1)
    assert p._traces == {} and profile_counters.trace_wanted() is None
    before = dict(p.launches[0].counts)
    p.picture(buffer="y")
    assert p.launches[0].counts == before and len(p._traces) == 1


def test_clear_errors_name_what_exists(kernels):
    p = _copy(kernels, 1)
    with pytest.raises(ProfileError, match=r"no launch of a kernel named 'nope'.*0: 'copy_strided' \(cuda, grid"):
        p.picture("nope", "x")
    with pytest.raises(ProfileError, match=r"made no request to 'z'; it accessed: x \(global, parameter 0: 1 "
                                           r"request\), y \(global, parameter 1: 1 request\)"):
        p.picture(buffer="z")
    with pytest.raises(ProfileError, match="name the buffer to draw: .* accessed x .*, y"):
        p.picture()
    with pytest.raises(ProfileError, match=r"warp=5: a block of \(32,1,1\) threads .* has 1 warp \(0..0\)"):
        p.picture(buffer="x", warp=5)
    with pytest.raises(ProfileError, match=r"block 7 is outside the grid \(2,1,1\)"):
        p.picture(buffer="x", block=7)
    with pytest.raises(ProfileError, match=r"request=3: .* made 1 request to x \(0..0\)"):
        p.picture(buffer="x", request=3)
    with pytest.raises(ProfileError, match=r"kind='store': .* no such request to x; its requests there are loads"):
        p.picture(buffer="x", kind="store")
    with pytest.raises(ProfileError, match=r"launch index 4 is out of range: this profile has 1 launch"):
        p.picture(4, "x")


def test_backends_without_a_trace_say_so():
    triton = Profile([LaunchRecord("add_kernel", "triton", (4,), None, {})], "emulated", "vecadd")
    triton.rerun = lambda: None
    with pytest.raises(ProfileError, match="Triton launches have no per-lane trace: the interpreter"):
        triton.picture()
    ncu = Profile([LaunchRecord("k", "ncu", (4,), (32,), {})], "ncu", "f")
    with pytest.raises(ProfileError, match="Nsight Compute .* cpu mode"):
        ncu.picture()
    with pytest.raises(ProfileError, match="made no emulated kernel launch"):
        Profile([], "emulated", "f").picture()
    two = Profile([LaunchRecord("a", "cuda", (1,), (32,), {}), LaunchRecord("b", "cuda", (1,), (32,), {})],
                  "emulated", "f")
    with pytest.raises(ProfileError, match="launches of 2 kernels; name one .* 0: 'a' .* 1: 'b'"):
        two.picture()


def test_the_figure_is_readable(kernels):
    fig = _copy(kernels, 32).picture(buffer="x")
    assert fig.layout.xaxis.title.text.startswith("byte in the 128-byte line")
    assert list(fig.layout.yaxis.ticktext[:2]) == ["x +0 B", "x +128 B"]  # one row per 128-byte line
    assert fig.data[1].colorbar.title.text == "lane" and fig.data[1].zmax == 31
    assert fig.layout.height <= 1100 and fig.layout.width is None  # the notebook's width
    assert max(len(line) for line in fig.layout.title.text.split("<br>")) <= 110
    assert "Turbo" not in str(fig.layout.meta)  # meta holds counts only: JSON numbers and names
    assert access_picture.MAX_LINES >= 32


numba_cuda = pytest.importorskip("numba.cuda")


@numba_cuda.jit
def _nb_copy(x, y, stride):
    i = numba_cuda.threadIdx.x
    y[i] = x[i * stride]


@numba_cuda.jit
def _nb_columns(x, y):
    t = numba_cuda.shared.array((32, 32), np.float32)
    r, c = numba_cuda.threadIdx.y, numba_cuda.threadIdx.x
    t[r, c] = x[r, c]
    numba_cuda.syncthreads()
    y[r, c] = t[c, r]


def test_numba_traces_match_its_counts():
    x, y = np.arange(32 * 32, dtype=np.float32), np.zeros(32, np.float32)
    for stride, sectors in ((1, 4), (32, 32)):
        p = wb.profile(lambda stride=stride: _nb_copy[1, 32](x, y, stride))
        meta = p.picture(buffer="x").layout.meta
        assert meta["backend"] == "numba" and meta["sectors (drawn)"] == [sectors]
        assert meta["sectors per load request"] == p["sectors per load request"] == sectors
    x2, y2 = np.arange(1024, dtype=np.float32).reshape(32, 32), np.zeros((32, 32), np.float32)
    p = wb.profile(lambda: _nb_columns[1, (32, 32)](x2, y2))
    fig = p.picture(buffer="t", kind="load")
    assert fig.layout.meta["wavefronts (drawn)"] == [32]
    assert fig.layout.meta["wavefronts per shared load request"] == p["wavefronts per shared load request"] == 32
    req = p.trace().on("t")[1]
    assert req.line is not None and "t[c, r]" in req.code
