// What the int8 GEMM kernels share: one 32-bit word (four K-neighbouring int8 values) of a K-major int8 matrix.
#pragma once

// Word w (bytes k .. k+3) of row r of an int8 [rows, K] matrix, 0 outside it. vec (K % 4 == 0 and 4-byte aligned
// rows, a host flag) makes it one 4-byte load; otherwise the word is packed from guarded byte loads, so a ragged K
// reads nothing past its row and the missing bytes are 0 (adding nothing to a dot product).
__device__ __forceinline__ int load_word(const signed char* x, int r, int rows, int k, int K, int vec) {
  if (r >= rows || k >= K) return 0;
  const signed char* p = x + (size_t)r * K + k;
  if (vec) return *(const int*)p;
  unsigned w = 0;
  for (int j = 0; j < 4; ++j)
    if (k + j < K) w |= (unsigned)(unsigned char)p[j] << (8 * j);  // byte j of the word is k + j (little-endian)
  return (int)w;
}
