// Cooperative-groups kernels in the style of llm.c's dev/cuda: warp reductions through cg::reduce over a 32-thread
// tile, block reductions through meta_group_rank() and shared memory, layernorm statistics, Packed128 bf16 loads.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_bf16.h>
#include <math_constants.h>  // CUDART_INF_F (NVRTC has no <math.h> and so no INFINITY)

namespace cg = cooperative_groups;

// One warp per row: max and sum by cg::reduce, then out = exp(x - max) / sum.
extern "C" __global__ void softmax_warp_cg(float* out, const float* inp, int N, int C) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  if (row >= N) return;
  const float* x = inp + row * C;
  float maxval = -CUDART_INF_F;
  for (int i = warp.thread_rank(); i < C; i += warp.size()) maxval = fmaxf(maxval, x[i]);
  maxval = cg::reduce(warp, maxval, cg::greater<float>{});
  float sumval = 0.0f;
  for (int i = warp.thread_rank(); i < C; i += warp.size()) sumval += expf(x[i] - maxval);
  sumval = cg::reduce(warp, sumval, cg::plus<float>{});
  for (int i = warp.thread_rank(); i < C; i += warp.size()) out[row * C + i] = expf(x[i] - maxval) / sumval;
}

// One block per row: each warp reduces its part, lane 0 parks the partial in shared memory at meta_group_rank(),
// warp 0 reduces the partials. out[row] = sum, mins[row] = min (cg::less), maxs[row] = max (cg::greater).
extern "C" __global__ void row_stats_block_cg(const float* inp, float* sums, float* mins, float* maxs, int C) {
  __shared__ float s_sum[32], s_min[32], s_max[32];
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  const float* x = inp + blockIdx.x * C;
  float s = 0.0f, lo = CUDART_INF_F, hi = -CUDART_INF_F;
  for (int i = block.thread_rank(); i < C; i += block.size()) {
    s += x[i];
    lo = fminf(lo, x[i]);
    hi = fmaxf(hi, x[i]);
  }
  s = cg::reduce(warp, s, cg::plus<float>());
  lo = cg::reduce(warp, lo, cg::less<float>());
  hi = cg::reduce(warp, hi, cg::greater<float>());
  if (warp.thread_rank() == 0) {
    s_sum[warp.meta_group_rank()] = s;
    s_min[warp.meta_group_rank()] = lo;
    s_max[warp.meta_group_rank()] = hi;
  }
  block.sync();
  if (warp.meta_group_rank() == 0) {
    bool have = warp.thread_rank() < warp.meta_group_size();
    s = have ? s_sum[warp.thread_rank()] : 0.0f;
    lo = have ? s_min[warp.thread_rank()] : CUDART_INF_F;
    hi = have ? s_max[warp.thread_rank()] : -CUDART_INF_F;
    s = cg::reduce(warp, s, cg::plus<float>());
    lo = cg::reduce(warp, lo, cg::less<float>());
    hi = cg::reduce(warp, hi, cg::greater<float>());
    if (warp.thread_rank() == 0) {
      sums[blockIdx.x] = s;
      mins[blockIdx.x] = lo;
      maxs[blockIdx.x] = hi;
    }
  }
}

// layernorm_forward's statistics, one warp per row: mean, then rstd = 1 / sqrt(var + 1e-5).
extern "C" __global__ void layernorm_stats_cg(float* mean, float* rstd, const float* inp, int N, int C) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  if (row >= N) return;
  const float* x = inp + row * C;
  float sum = 0.0f;
  for (int i = warp.thread_rank(); i < C; i += warp.size()) sum += x[i];
  float m = cg::reduce(warp, sum, cg::plus<float>{}) / C;
  float var = 0.0f;
  for (int i = warp.thread_rank(); i < C; i += warp.size()) {
    float d = x[i] - m;
    var += d * d;
  }
  var = cg::reduce(warp, var, cg::plus<float>{}) / C;
  if (warp.thread_rank() == 0) {
    mean[row] = m;
    rstd[row] = rsqrtf(var + 1e-5f);
  }
}

// llm.c's Packed128: 16 bytes moved as one vector.
struct alignas(16) Packed128 {
  __nv_bfloat16 payload[8];
};

// out = x * scale, 8 bf16 at a time; rowsum[row] = sum of the row (as floats), one warp per row, C % 256 == 0.
extern "C" __global__ void scale_rowsum_bf16_packed(__nv_bfloat16* out, float* rowsum, const __nv_bfloat16* inp,
                                                    float scale, int N, int C) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  if (row >= N) return;
  float acc = 0.0f;
  for (int c = warp.thread_rank() * 8; c < C; c += warp.size() * 8) {
    Packed128 in = *reinterpret_cast<const Packed128*>(inp + row * C + c);
    Packed128 res;
    for (int k = 0; k < 8; ++k) {
      float v = __bfloat162float(in.payload[k]);
      acc += v;
      res.payload[k] = __float2bfloat16(v * scale);
    }
    *reinterpret_cast<Packed128*>(out + row * C + c) = res;
  }
  acc = cg::reduce(warp, acc, cg::plus<float>{});
  if (warp.thread_rank() == 0) rowsum[row] = acc;
}

// Everything a tile of N threads tells its threads, 16 ints per thread (see tests/test_cuda_cg.py).
template <unsigned N>
__global__ void tile_probe(int* out, const int* pred) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<N> tile = cg::tiled_partition<N>(block);
  unsigned r = block.thread_rank();
  int* o = out + 16 * r;
  int v = 100 + (int)r;
  tile.sync();
  o[0] = tile.thread_rank();
  o[1] = tile.meta_group_rank();
  o[2] = tile.meta_group_size();
  o[3] = tile.size();
  o[4] = tile.num_threads();
  o[5] = tile.shfl(v, 0);
  o[6] = tile.shfl_down(v, 1);
  o[7] = tile.shfl_up(v, 1);
  o[8] = tile.shfl_xor(v, N > 1 ? 1 : 0);
  o[9] = tile.any(pred[r]);
  o[10] = tile.all(pred[r]);
  o[11] = (int)tile.ballot(pred[r]);
  o[12] = cg::reduce(tile, v, cg::plus<int>());
  o[13] = cg::reduce(tile, v, cg::greater<int>());
  o[14] = cg::reduce(tile, v, cg::less<int>());
  cg::thread_group g = cg::tiled_partition(block, N);  // the same split, N known at run time
  o[15] = (int)(g.thread_rank() * 1000 + g.size());
}

// The block and grid as groups, in a 3-D launch: 8 ints per thread.
extern "C" __global__ void block_grid_probe(int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::grid_group grid = cg::this_grid();
  unsigned long long t = grid.thread_rank();
  int* o = out + 8 * t;
  o[0] = block.thread_rank();
  o[1] = block.size();
  o[2] = block.num_threads();
  o[3] = block.group_index().x + 10 * block.group_index().y;
  o[4] = block.thread_index().x + 10 * block.thread_index().y + 100 * block.thread_index().z;
  o[5] = block.dim_threads().x + 10 * block.dim_threads().y + 100 * block.dim_threads().z;
  o[6] = (int)grid.block_rank();
  o[7] = (int)grid.size();
  cg::sync(block);
}

// grid.sync() needs a cooperative launch; an ordinary launch (cupy's, the CPU engine's) cannot make one.
extern "C" __global__ void grid_sync_probe(int* out) {
  cg::grid_group grid = cg::this_grid();
  out[grid.thread_rank()] = 1;
  grid.sync();
}
