"""wb.profile on CUDA C (the CPU engine's profile mode): exact counts against numbers worked out by hand.

Every kernel lives in one module, so the profile build is compiled once for the whole file.
"""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

import workbench as wb
from workbench import cuda, profile_ncu
from workbench import profile_counters as P

pytestmark = pytest.mark.skipif(wb.mode() != "cpu", reason="emulator counts (cpu mode)")

SRC = r"""
extern "C" __global__ void copy(const float* x, float* y, int n, int stride) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[(long long)i * stride];
}
extern "C" __global__ void copy4(const float4* x, float4* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
// A 32x32 tile written by rows and read by columns; ld = 32 (conflicts) or 33 (padded).
extern "C" __global__ void tile_columns(const float* x, float* y, int ld) {
  __shared__ float t[32 * 33];
  int r = threadIdx.y, c = threadIdx.x;
  t[r * ld + c] = x[r * 32 + c];
  __syncthreads();
  y[r * 32 + c] = t[c * ld + r];
}
extern "C" __global__ void broadcast(const float* x, float* y) {
  __shared__ float t[32];
  t[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = t[0];
}
// 8-byte shared accesses: lane l reads t[l * step] of a double array.
extern "C" __global__ void doubles(const double* x, double* y, int step) {
  __shared__ double t[32 * 32];
  for (int i = threadIdx.x; i < 32 * 32; i += 32) t[i] = x[i];
  __syncthreads();
  y[threadIdx.x] = t[threadIdx.x * step];
}
// 16-byte shared accesses: lane l reads t[l * step] of a float4 array.
extern "C" __global__ void quads(const float4* x, float4* y, int step) {
  __shared__ float4 t[8 * 32];
  for (int i = threadIdx.x; i < 8 * 32; i += 32) t[i] = x[i];
  __syncthreads();
  y[threadIdx.x] = t[threadIdx.x * step];
}
// Lane l runs l iterations: the j-th request of the load has lanes j+1..31 (divergent logs).
extern "C" __global__ void triangle(const float* x, float* y) {
  int l = threadIdx.x;
  float s = 0.0f;
  for (int j = 0; j < l; ++j) s += x[j * 32 + l];
  y[l] = s;
}
extern "C" __global__ void atomics_and_shuffles(const float* x, float* out, int* count) {
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  atomicAdd(out, v);  // one per thread
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  if ((threadIdx.x & 31) == 0) atomicAdd(count, 1);  // one per warp
}
"""


@pytest.fixture(scope="module")
def mod():
    return cuda.RawModule(code=SRC)


def _f32(n):
    return np.arange(n, dtype=np.float32)


def test_coalesced_copy_is_n_over_32_requests_and_4_sectors_each(mod):
    n = 4096
    x, y = _f32(n), np.zeros(n, np.float32)
    k = mod.get_function("copy")
    p = wb.profile(lambda: k((n // 128,), (128,), (x, y, np.int32(n), np.int32(1))))
    m = p.metrics
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == n // 32
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == n * 4 // 32
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"] == n // 32
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] == n * 4 // 32
    assert p["sectors per load request"] == 4
    assert p["global load efficiency"] == 1.0
    assert p["global bytes"] == 2 * n * 4
    assert p["active lanes per memory instruction"] == 32
    assert (y == x).all()  # the profiled launch computes as usual
    assert len(p.launches) == 1 and p.launches[0].kernel == "copy" and p.launches[0].backend == "cuda"
    assert p.launches[0].grid == (n // 128, 1, 1) and p.launches[0].block == (128, 1, 1)


def test_stride_32_touches_a_sector_per_lane(mod):
    n = 1024
    x, y = _f32(n * 32), np.zeros(n, np.float32)
    k = mod.get_function("copy")
    p = wb.profile(lambda: k((n // 128,), (128,), (x, y, np.int32(n), np.int32(32))))
    assert p["global load requests"] == n // 32
    assert p["sectors per load request"] == 32
    assert p["global load efficiency"] == pytest.approx(4 / 32)
    assert p["sectors per store request"] == 4  # the store stays coalesced
    assert p.get("wb__global_ideal_sectors_op_ld.sum") == n * 4 // 32  # what coalescing would need
    assert "4" in P.METRICS["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"].good_text(
        p.metrics)


def test_float4_copy_is_16_sectors_per_request(mod):
    n = 1024  # float4 elements
    x, y = _f32(4 * n).reshape(n, 4), np.zeros((n, 4), np.float32)
    k = mod.get_function("copy4")
    p = wb.profile(lambda: k((n // 128,), (128,), (x, y, np.int32(n))))
    assert p["global load requests"] == n // 32  # one 16-byte access per lane, not four 4-byte ones
    assert p["sectors per load request"] == 16
    assert p["global store requests"] == n // 32
    assert p["sectors per store request"] == 16
    assert p["global load efficiency"] == 1.0


@pytest.mark.parametrize("ld, wavefronts", [(32, 32), (33, 1)])
def test_tile_read_by_columns(mod, ld, wavefronts):
    x, y = _f32(1024), np.zeros(1024, np.float32)
    k = mod.get_function("tile_columns")
    p = wb.profile(lambda: k((1,), (32, 32), (x, y, np.int32(ld))))
    assert (y.reshape(32, 32) == x.reshape(32, 32).T).all()
    assert p["shared load requests"] == 32  # one per warp
    assert p["shared load wavefronts"] == 32 * wavefronts
    assert p["wavefronts per shared load request"] == wavefronts
    assert p["shared load bank conflicts"] == 32 * (wavefronts - 1)
    assert p["shared store wavefronts"] == 32  # rows: conflict-free either way
    assert p["shared bank conflicts"] == 32 * (wavefronts - 1)
    assert p["barriers"] == 32  # one __syncthreads passed by 32 warps


def test_broadcast_is_one_wavefront(mod):
    x, y = _f32(32), np.zeros(32, np.float32)
    k = mod.get_function("broadcast")
    p = wb.profile(lambda: k((1,), (32,), (x, y)))
    assert (y == 0).all()
    assert p["shared load requests"] == 1
    assert p["shared load wavefronts"] == 1
    assert p["shared bank conflicts"] == 0


@pytest.mark.parametrize("step, wavefronts", [(1, 2), (2, 4), (32, 32)])
def test_8_byte_shared_accesses_go_per_half_warp(mod, step, wavefronts):
    # step 1: each half-warp reads 16 consecutive doubles = 32 words in 32 banks: 1 wavefront each, 2 in all.
    # step 2: a half-warp's doubles are 16 bytes apart: 2 words per bank: 2 wavefronts each.
    # step 32: a column of a 32x32 double tile: all 16 lanes in banks 0-1, 16 words each: 16 wavefronts each.
    x, y = np.arange(1024, dtype=np.float64), np.zeros(32, np.float64)
    k = mod.get_function("doubles")
    p = wb.profile(lambda: k((1,), (32,), (x, y, np.int32(step))))
    assert (y == x[np.arange(32) * step]).all()
    assert p["wavefronts per shared load request"] == wavefronts
    assert p["shared load bank conflicts"] == wavefronts - 2  # beyond one per half-warp
    assert p["shared store wavefronts"] == 32 * 2  # 32 stores of consecutive doubles, 2 half-warps each


@pytest.mark.parametrize("step, wavefronts", [(1, 4), (2, 8), (8, 32)])
def test_16_byte_shared_accesses_go_per_quarter_warp(mod, step, wavefronts):
    # step 1: each quarter-warp reads 8 consecutive float4 = 32 words in 32 banks: 1 wavefront each, 4 in all.
    # step 2: a quarter-warp's float4s are 32 bytes apart: lanes 0-3 and 4-7 share banks: 2 wavefronts each.
    # step 8: float4s 128 bytes apart: the 8 lanes of a quarter-warp all in banks 0-3: 8 wavefronts each.
    x, y = np.arange(8 * 32 * 4, dtype=np.float32).reshape(-1, 4), np.zeros((32, 4), np.float32)
    k = mod.get_function("quads")
    p = wb.profile(lambda: k((1,), (32,), (x, y, np.int32(step))))
    assert (y == x[np.arange(32) * step]).all()
    assert p["shared load requests"] == 1
    assert p["wavefronts per shared load request"] == wavefronts
    assert p["shared load bank conflicts"] == wavefronts - 4  # beyond one per quarter-warp
    assert p["shared store wavefronts"] == 8 * 4  # 8 stores of consecutive float4s, 4 quarter-warps each


def test_masked_tail_lanes_are_not_counted(mod):
    n, threads = 1000, 9 * 128  # 1152 threads: warp 31 has 8 active lanes, warps 32-35 none
    x, y = _f32(n), np.zeros(n, np.float32)
    k = mod.get_function("copy")
    p = wb.profile(lambda: k((9,), (128,), (x, y, np.int32(n), np.int32(1))))
    assert p["global load requests"] == 32  # 31 full warps + 1 partial; fully masked warps make none
    assert p.get("smsp__sass_thread_inst_executed_op_global_ld_pred_on.sum") == n
    assert p["global load sectors"] == n * 4 // 32
    assert p.get("smsp__sass_data_bytes_mem_global_op_ld.sum") == n * 4
    assert p["active lanes per memory instruction"] == pytest.approx(n / 32)
    assert p["threads launched"] == threads


def _triangle_counts():
    # Load j (j = 0..30) has lanes j+1..31 of row j: bytes 4(j+1)..127, sectors (j+1)//8 .. 3.
    reqs = 31
    lanes = sum(range(32))
    sectors = sum(4 - (j + 1) // 8 for j in range(31))
    return reqs, lanes, sectors


@pytest.mark.parametrize("threads", ["1", "2"])
def test_divergent_lanes_group_by_nth_execution(mod, threads, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CPU_THREADS", threads)
    x, y = _f32(32 * 32), np.zeros(32, np.float32)
    k = mod.get_function("triangle")
    p = wb.profile(lambda: k((4,), (32,), (x, y)))  # 4 blocks: the same counts on any number of workers
    reqs, lanes, sectors = _triangle_counts()
    assert p["global load requests"] == 4 * reqs
    assert p.get("smsp__sass_thread_inst_executed_op_global_ld_pred_on.sum") == 4 * lanes
    assert p["global load sectors"] == 4 * sectors
    assert p["global store requests"] == 4  # every lane stores once: one request per warp


def test_atomics_barriers_and_warp_collectives(mod):
    x, out, count = np.ones(256, np.float32), np.zeros(1, np.float32), np.zeros(1, np.int32)
    k = mod.get_function("atomics_and_shuffles")
    p = wb.profile(lambda: k((2,), (128,), (x, out, count)))
    assert out[0] == 256 and count[0] == 8
    assert p["global atomics"] == 256 + 8  # float atomicAdd counts once, not per compare-and-swap
    assert p["global atomic requests"] == 8 + 8  # one per warp at each atomicAdd
    assert p["warp collectives"] == 8 * 5
    assert p.get("uncounted accesses") == 0  # a shuffle's exchange of values is not memory traffic
    assert p["global load requests"] == 8  # atomics are not loads or stores
    assert p.get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum") == 0


def test_sectors_count_from_the_allocation_start(mod):
    # A view starting 4 bytes into its array: 32 floats at bytes 4..131 of the allocation touch 5 sectors.
    base = _f32(64)
    x, y = base[1:33], np.zeros(32, np.float32)
    k = mod.get_function("copy")
    p = wb.profile(lambda: k((1,), (32,), (x, y, np.int32(32), np.int32(1))))
    assert p["global load sectors"] == 5
    assert p["global store sectors"] == 4


def test_lambda_with_two_launches_is_summed_and_broken_down(mod):
    n = 1024
    x, y, z = _f32(n * 32), np.zeros(n, np.float32), np.zeros(n, np.float32)
    k = mod.get_function("copy")

    def two():
        k((n // 128,), (128,), (x, y, np.int32(n), np.int32(1)))
        k((n // 128,), (128,), (x, z, np.int32(n), np.int32(32)))

    p = wb.profile(two)
    assert [r.kernel for r in p.launches] == ["copy", "copy"]
    first, second = (r.metrics for r in p.launches)
    assert first["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"] == 4
    assert second["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"] == 32
    assert p["global load requests"] == 2 * n // 32
    assert p["global load sectors"] == n * 4 // 32 + n
    assert p["sectors per load request"] == (4 + 32) / 2
    text = str(p.report())
    assert "per launch" in text and "sectors per load request" in text and "not modelled" in text.lower()
    html = p.report()._repr_html_()
    assert "<table" in html and "bank conflicts" not in html  # no shared memory: its rows are left out
    assert p.complete and not p.notes


def test_profile_variant_from_sizes():
    p = wb.profile("vecadd/cuda_grid", N=1000, dtype="float32")
    assert p.target == "vecadd/cuda_grid" and len(p.launches) == 1
    assert p["global load sectors"] == 2 * 1000 * 4 // 32  # a and b read once, coalesced
    assert p["global store sectors"] == 1000 * 4 // 32
    assert p["global bytes"] == 3 * 1000 * 4
    with pytest.raises(P.ProfileError, match="N=..."):
        wb.profile("vecadd/cuda_grid")
    with pytest.raises(P.ProfileError, match="unknown keyword"):
        wb.profile("vecadd/cuda_grid", N=8, M=3)


def test_nothing_launched_and_bad_targets():
    p = wb.profile(lambda: 42)
    assert p.output == 42 and p.launches == [] and "No emulated kernel launch" in str(p.report())
    with pytest.raises(KeyError, match="was not counted"):
        p["global load requests"]
    with pytest.raises(KeyError, match="no profile metric"):
        p["coalescing quality"]
    with pytest.raises(P.ProfileError, match="op/variant"):
        wb.profile("vecadd")
    with pytest.raises(P.ProfileError, match="expected a registered variant"):
        wb.profile(3)


def test_gpu_mode_without_ncu_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("WORKBENCH_NCU", raising=False)
    with pytest.raises(P.NcuNotFoundError, match="Nsight Compute") as e:
        profile_ncu.run_under_ncu({"kind": "variant", "op": "vecadd", "name": "cuda_grid", "inputs": (),
                                   "kwargs": {}}, "vecadd/cuda_grid")
    assert "ncu" in str(e.value) and "WORKBENCH_MODE=cpu" in str(e.value)


_FAKE_NCU = """#!/bin/sh
# Stand-in for ncu: write the CSV an `ncu --csv --page raw --log-file F` run prints, and never run the program.
while [ $# -gt 0 ]; do
  if [ "$1" = "--log-file" ]; then out="$2"; fi
  shift
done
cat > "$out" <<'EOF'
==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC",\
"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",\
"smsp__sass_data_bytes_mem_global_op_ld.sum","l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",\
"l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum","l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"
"","","","","","","","","","","","request","sector","byte","byte","request","request"
"0","1","python","h","vecadd_kernel","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0","32","1,024","4096","32768","2","3"
EOF
"""


def test_ncu_values_come_back_under_the_same_keys(monkeypatch, tmp_path):
    exe = tmp_path / "ncu"
    exe.write_text(_FAKE_NCU.replace("\\\n", ""))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    p = profile_ncu.run_under_ncu({"kind": "variant", "op": "vecadd", "name": "cuda_grid", "inputs": (),
                                   "kwargs": {}}, "vecadd/cuda_grid")
    assert p.source == "ncu" and [r.kernel for r in p.launches] == ["vecadd_kernel"]
    assert p.launches[0].grid == (8, 1, 1) and p.launches[0].block == (128, 1, 1)
    assert p["global load requests"] == 32 and p["global load sectors"] == 1024
    assert p["sectors per load request"] == 32
    assert p["global load efficiency"] == pytest.approx(4096 / 32768)
    assert p["global load bytes"] == 32768  # from l1tex__t_bytes_..._op_ld.sum
    assert p["global atomic requests"] == 5  # atom + red
    assert "Nsight Compute" in str(p.report())


def test_gpu_mode_refuses_a_lambda_it_cannot_rebuild(monkeypatch, tmp_path):
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(P.ProfileError, match="lambda"):
        profile_ncu.run_under_ncu({"kind": "import", "module": __name__, "qualname": "<lambda>", "inputs": (),
                                   "kwargs": {}}, "<lambda>")


STRUCT_SRC = r"""
struct View { const float* data; int n; };
extern "C" __global__ void sum_view(View v, float* out) {
  int i = threadIdx.x;
  if (i < v.n) atomicAdd(out, v.data[i]);
}
"""


def test_pointers_inside_structs_are_counted_when_passed_as_buffers():
    x, out = _f32(64), np.zeros(1, np.float32)
    view = np.zeros(1, dtype=[("data", np.uint64), ("n", np.int32), ("pad", np.int32)])
    view["data"], view["n"] = x.ctypes.data, 64
    k = cuda.RawKernel(STRUCT_SRC, "sum_view")
    p = wb.profile(lambda: k((1,), (64,), (view[0], out)))
    assert p["uncounted accesses"] == 64 and p.get("global load requests") == 0
    assert "not counted" in str(p.report()) and "struct" in p.notes[0]
    p = wb.profile(lambda: k((1,), (64,), (view[0], out), buffers=[x]))
    assert p["global load requests"] == 2 and p["global load sectors"] == 8
    assert p.get("uncounted accesses") == 0 and not p.notes
    assert p["global atomics"] == 64
