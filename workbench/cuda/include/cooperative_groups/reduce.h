// CPU-engine <cooperative_groups/reduce.h>: cg::reduce(tile, value, op) over a thread_block_tile, the result
// returned to every thread of the tile (as CUDA's does), with the operators plus, less (the minimum), greater
// (the maximum), bit_and, bit_or and bit_xor.
#pragma once
#include "../cooperative_groups.h"

namespace cooperative_groups {
template <class T>
struct plus {
  __forceinline__ T operator()(const T& a, const T& b) const { return a + b; }
};
template <class T>
struct less {
  __forceinline__ T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};
template <class T>
struct greater {
  __forceinline__ T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
template <class T>
struct bit_and {
  __forceinline__ T operator()(const T& a, const T& b) const { return a & b; }
};
template <class T>
struct bit_or {
  __forceinline__ T operator()(const T& a, const T& b) const { return a | b; }
};
template <class T>
struct bit_xor {
  __forceinline__ T operator()(const T& a, const T& b) const { return a ^ b; }
};

// A butterfly over the tile: after log2(N) exchanges every thread holds op over all N values.
template <unsigned N, class P, class T, class Op>
__forceinline__ T reduce(const thread_block_tile<N, P>& tile, T value, Op op) {
  for (unsigned offset = N / 2; offset > 0; offset /= 2) value = op(value, tile.shfl_xor(value, offset));
  return value;
}
}  // namespace cooperative_groups
