// The int8 tensor-core instruction of cuda_mma, as inline PTX (sm_80+; GPU only: the CPU engine traps inline PTX,
// and tests/test_gemm_w8a8.py swaps this file for a C++ stand-in built from warp shuffles).
#pragma once

// d += A (16x32 int8, row-major) * B (32x8 int8, column-major), int32 accumulators. Lane l = 4g + t holds
// a[0] = A[g][4t .. 4t+3], a[1] = A[g+8][4t .. 4t+3], a[2] = A[g][16+4t ..], a[3] = A[g+8][16+4t ..];
// b0 = B[4t .. 4t+3][g], b1 = B[16+4t ..][g]; d = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1] (PTX ISA,
// "Matrix Fragments for mma.m16n8k32"). Four bytes of one register are four neighbouring k.
__device__ __forceinline__ void mma_s8_16832(int (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
