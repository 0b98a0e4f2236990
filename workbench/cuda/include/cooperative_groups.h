// CPU-engine cooperative groups: the subset of CUDA's <cooperative_groups.h> that block- and warp-level kernels
// use, built on the engine's barrier and warp collectives (wb_cuda.h). Semantics as in the CUDA Programming
// Guide's "Cooperative Groups" chapter:
//   this_thread_block(): sync, thread_rank, size/num_threads, group_index, thread_index, dim_threads;
//   tiled_partition<N>(parent), N a power of two up to 32 dividing the parent's size (else the launch stops): thread_rank, meta_group_rank/size, size/num_threads,
//     sync, shfl/shfl_down/shfl_up/shfl_xor (ranks within the tile), any/all/ballot (bit i = tile rank i),
//     match_any/match_all;
//   tiled_partition(parent, n): a thread_group of n threads (sync, thread_rank, size, meta_group_rank/size);
//   this_grid(): thread_rank, size, block_rank, num_blocks, dim_blocks, block_index; grid.sync() stops the launch
//     (it needs a cooperative launch, which cupy's kernel call does not make).
// cg::reduce and the operators are in <cooperative_groups/reduce.h>. NVRTC (the front-end gate) compiles the
// same source against the real CUDA headers.
//
// The engine has one warp collective in flight per warp, so a tile smaller than a warp exchanges its values
// through a collective of the whole warp (width N keeps every exchange inside the tile; results are the tile's).
// The tiles of one warp must therefore reach their collectives together, as convergent code does: a shuffle,
// vote or sync that only some tiles of a warp execute is not supported.
#pragma once
#include "wb_cuda.h"

namespace cooperative_groups {
namespace wb_detail {
__forceinline__ unsigned block_rank() {
  return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}
__forceinline__ unsigned block_size() { return blockDim.x * blockDim.y * blockDim.z; }
// The lanes of this thread's warp that exist (a block whose size is not a multiple of 32 has a short last warp).
__forceinline__ unsigned warp_lanes() {
  unsigned left = block_size() - (block_rank() & ~31u);
  return left >= 32 ? 0xffffffffu : (1u << left) - 1u;
}
// This thread's n-thread tile (n a power of two, <= 32): its first lane, and its lanes as bits 0..n-1.
__forceinline__ unsigned tile_base(unsigned n) { return block_rank() & 31u & ~(n - 1u); }
__forceinline__ unsigned tile_bits(unsigned n) { return n >= 32 ? 0xffffffffu : (1u << n) - 1u; }
// A whole-warp ballot, seen by the tile: bit i is the tile's rank i.
__forceinline__ unsigned tile_ballot(unsigned n, int pred) {
  return (__ballot_sync(warp_lanes(), pred) >> tile_base(n)) & tile_bits(n);
}
// The tile's threads that exist, as bits 0..n-1.
__forceinline__ unsigned tile_present(unsigned n) { return (warp_lanes() >> tile_base(n)) & tile_bits(n); }
// CUDA's header: "the parent group size must be evenly divisible by the tilesz" (results undefined otherwise).
inline void check_split(unsigned long long parent, unsigned tile) {
  if (parent % tile == 0) return;
  char msg[256];
  snprintf(msg, sizeof msg,
           "cooperative_groups::tiled_partition: a group of %llu threads cannot be split into tiles of %u (the "
           "parent's size must be a multiple of the tile size; on a GPU the results are undefined)",
           parent, tile);
  wb_trap(msg, __FILE__, __LINE__);
}
}  // namespace wb_detail

// A group whose kind is known at run time: a whole block, or a tile of it (tiled_partition(parent, n)).
class thread_group {
 public:
  void sync() const {
    if (tile_ == 0) {
      __syncthreads();
    } else {
      __syncwarp(wb_detail::warp_lanes());
    }
  }
  unsigned long long thread_rank() const {
    return tile_ == 0 ? wb_detail::block_rank() : wb_detail::block_rank() % tile_;
  }
  unsigned long long num_threads() const { return tile_ == 0 ? wb_detail::block_size() : tile_; }
  unsigned long long size() const { return num_threads(); }
  unsigned meta_group_rank() const { return tile_ == 0 ? 0 : (unsigned)(parent_rank_ / tile_); }
  unsigned meta_group_size() const { return tile_ == 0 ? 1 : (unsigned)((parent_size_ + tile_ - 1) / tile_); }

  // block: tile == 0; a tile of `tile` threads of a parent of `parent_size` threads, this thread at `parent_rank`
  explicit thread_group(unsigned tile = 0, unsigned long long parent_rank = 0, unsigned long long parent_size = 0)
      : tile_(tile), parent_rank_(parent_rank), parent_size_(parent_size) {}

 private:
  unsigned tile_;
  unsigned long long parent_rank_, parent_size_;
};

class thread_block {
 public:
  static void sync() { __syncthreads(); }
  static unsigned thread_rank() { return wb_detail::block_rank(); }
  static unsigned num_threads() { return wb_detail::block_size(); }
  static unsigned size() { return num_threads(); }
  static dim3 group_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  static dim3 thread_index() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  static dim3 dim_threads() { return dim3(blockDim.x, blockDim.y, blockDim.z); }
  static dim3 group_dim() { return dim_threads(); }
  operator thread_group() const { return thread_group(); }
};

__forceinline__ thread_block this_thread_block() { return thread_block(); }

template <unsigned N, class ParentT = void>
class thread_block_tile;

// A tile of N threads (consecutive ranks of its parent; N a power of two, 1..32), all in one warp.
template <unsigned N>
class thread_block_tile<N, void> {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tiled_partition<N>: N must be a power of two, 1 to 32");

 public:
  static constexpr unsigned numThreads = N;
  void sync() const { __syncwarp(wb_detail::warp_lanes()); }
  static unsigned thread_rank() { return wb_detail::block_rank() & (N - 1); }
  static constexpr unsigned num_threads() { return N; }
  static constexpr unsigned size() { return N; }
  unsigned meta_group_rank() const { return meta_rank_; }
  unsigned meta_group_size() const { return meta_size_; }

  template <class T>
  T shfl(T var, int src_rank) const { return __shfl_sync(wb_detail::warp_lanes(), var, src_rank, N); }
  template <class T>
  T shfl_down(T var, unsigned delta) const { return __shfl_down_sync(wb_detail::warp_lanes(), var, delta, N); }
  template <class T>
  T shfl_up(T var, unsigned delta) const { return __shfl_up_sync(wb_detail::warp_lanes(), var, delta, N); }
  template <class T>
  T shfl_xor(T var, unsigned lane_mask) const {
    return __shfl_xor_sync(wb_detail::warp_lanes(), var, (int)lane_mask, N);
  }
  int any(int pred) const { return wb_detail::tile_ballot(N, pred) != 0; }
  int all(int pred) const { return wb_detail::tile_ballot(N, pred) == wb_detail::tile_present(N); }
  unsigned ballot(int pred) const { return wb_detail::tile_ballot(N, pred); }
  template <class T>
  unsigned match_any(T val) const {
    return (__match_any_sync(wb_detail::warp_lanes(), val) >> wb_detail::tile_base(N)) & wb_detail::tile_bits(N);
  }
  template <class T>
  unsigned match_all(T val, int& pred) const {
    unsigned same = match_any(val);
    pred = same == wb_detail::tile_present(N);
    return pred ? same : 0u;
  }

  operator thread_group() const { return thread_group(N, (unsigned long long)meta_rank_ * N + thread_rank(),
                                                      (unsigned long long)meta_size_ * N); }
  thread_block_tile(unsigned meta_rank, unsigned meta_size) : meta_rank_(meta_rank), meta_size_(meta_size) {}

 private:
  unsigned meta_rank_, meta_size_;
};

template <unsigned N, class ParentT>
class thread_block_tile : public thread_block_tile<N, void> {
 public:
  using thread_block_tile<N, void>::thread_block_tile;
};

// tiled_partition<N>(block or tile): this thread's tile of N threads.
template <unsigned N, class ParentT>
thread_block_tile<N, ParentT> tiled_partition(const ParentT& parent) {
  unsigned long long r = parent.thread_rank(), n = parent.num_threads();
  wb_detail::check_split(n, N);
  return thread_block_tile<N, ParentT>((unsigned)(r / N), (unsigned)((n + N - 1) / N));
}

// tiled_partition(parent, n): the same split with n known at run time (n a power of two, at most 32).
inline thread_group tiled_partition(const thread_group& parent, unsigned tilesz) {
  if (tilesz == 0 || tilesz > 32 || (tilesz & (tilesz - 1)) != 0)
    wb_trap("cooperative_groups::tiled_partition(parent, n): n must be a power of two from 1 to 32", __FILE__,
            __LINE__);
  wb_detail::check_split(parent.num_threads(), tilesz);
  return thread_group(tilesz, parent.thread_rank(), parent.num_threads());
}

template <class G>
__forceinline__ void sync(const G& g) { g.sync(); }

// this_grid(): every thread of the launch.
class grid_group {
 public:
  static bool is_valid() { return true; }
  static void sync() {
    wb_trap("cooperative_groups::grid_group::sync() needs a cooperative launch (cudaLaunchCooperativeKernel); "
            "cupy's kernel call and the CPU engine make ordinary launches", __FILE__, __LINE__);
  }
  static unsigned long long num_blocks() { return (unsigned long long)gridDim.x * gridDim.y * gridDim.z; }
  static unsigned long long block_rank() {
    return ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  }
  static unsigned long long num_threads() { return num_blocks() * wb_detail::block_size(); }
  static unsigned long long size() { return num_threads(); }
  static unsigned long long thread_rank() { return block_rank() * wb_detail::block_size() + wb_detail::block_rank(); }
  static dim3 dim_blocks() { return dim3(gridDim.x, gridDim.y, gridDim.z); }
  static dim3 block_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
};

__forceinline__ grid_group this_grid() { return grid_group(); }
}  // namespace cooperative_groups
