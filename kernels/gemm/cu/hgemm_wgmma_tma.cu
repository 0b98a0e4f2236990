// cuda_wgmma_tma, Hopper: TMA bulk tensor loads + wgmma, one producer and two consumer warpgroups (sm_90a; GPU only).
// Block 384 threads = 3 warpgroups -> a 128x256 tile of c. Warpgroup 0 is the producer: one thread issues TMA
// copies (cp.async.bulk.tensor: the copy engine moves whole 2-D boxes, no registers, no address math per
// element, zeros beyond the matrix edge) into a 4-stage ring and signals "full" through mbarriers. Warpgroups
// 1 and 2 are consumers: each multiplies its 64x256 half with wgmma.m64n256k16 straight from shared memory
// (descriptors, no ldmatrix) into 128 fp32 accumulators per thread, then releases the stage ("empty").
// setmaxnreg moves registers from the producer (40) to the consumers (232).
// Shared memory: 4 stages x (a 128x64 + b 64x256 halves = 48 KiB) = 192 KiB (+1 KiB to align to 1024 B).
// Operands use the 128-byte swizzle that TMA writes and wgmma reads: a is K-major (rows of 64 k = 128 B),
// b is N-major, stored as four 64-column chunks of 64 k-rows x 128 B each (trans-b = 1).
// Needs K and N multiples of 8 (TMA row strides are multiples of 16 B) and 16-byte-aligned pointers.
#include "gemm_common.cuh"

#define BM 128
#define BN 256
#define BK 64
#define STAGES 4
#define NT 384                          // 3 warpgroups
#define A_BYTES (BM * BK * 2)           // 16 KiB
#define B_CHUNK_BYTES (BK * 64 * 2)     // 8 KiB: 64 k-rows x 64 columns
#define B_BYTES (BK * BN * 2)           // 32 KiB
#define STAGE_BYTES (A_BYTES + B_BYTES) // 48 KiB
#define CONSUMER_WARPS 8
#define GROUP_M 8                       // grouped tile order: 8 row tiles share each b column tile in L2

// The 128-byte CUtensorMap made on the host by cuTensorMapEncodeTiled (kept in global memory).
struct __align__(64) TmaDesc { unsigned long long opaque[16]; };

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------------------------------- mbarriers
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {  // arrive + expect `bytes` by TMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {  // until phase `parity` completed
  while (!mbar_try_wait(bar, parity)) {
  }
}

// ---------------------------------------------------------------------------------------- TMA
// Copy the box at element coordinates (c0 = innermost/contiguous, c1 = row) into shared memory at dst;
// completion is counted in bytes on mbarrier `bar`.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaDesc* map, unsigned bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
      "[%2];\n" ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// ---------------------------------------------------------------------------------------- wgmma
// Shared-memory matrix descriptor: start address, leading/stride byte offsets (all >> 4), 128-byte swizzle.
__device__ __forceinline__ unsigned long long sw128_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
// Keep the compiler from moving accumulator reads/writes across the asynchronous wgmma boundary.
__device__ __forceinline__ void fence_acc(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define WGMMA_D_REGS \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WGMMA_D_OPS(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// d[64x256] += a[64x16] (K-major, desc da) * b[16x256] (N-major: trans-b = 1, desc db); scale_d 0 overwrites d.
// One body per input type: the PTX type suffix (bf16 or f16) is part of the instruction's literal text.
template <typename T> __device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long da,
                                                                      unsigned long long db, int scale_d);
#define WGMMA_M64N256K16(T, PTX_TYPE)                                                                          \
  template <> __device__ __forceinline__ void wgmma_m64n256k16<T>(float (&d)[128], unsigned long long da,     \
                                                                  unsigned long long db, int scale_d) {       \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." PTX_TYPE "." PTX_TYPE " {" WGMMA_D_REGS            \
                 "}, %128, %129, p, 1, 1, 0, 1;\n}\n"                                                           \
                 : WGMMA_D_OPS(d)                                                                              \
                 : "l"(da), "l"(db), "r"(scale_d));                                                            \
  }
WGMMA_M64N256K16(__nv_bfloat16, "bf16")
WGMMA_M64N256K16(__half, "f16")

__device__ __forceinline__ void store2(__half* p, float x, float y) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y);
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float x, float y) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
}

template <typename T>
__device__ __forceinline__ void gemm_wgmma(const TmaDesc* maps, T* c, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
  const unsigned base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // swizzle atoms repeat every 1024 B
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

  // Grouped tile order (as in the Triton grouped kernel): consecutive blocks walk down GROUP_M row tiles.
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int width = GROUP_M * tiles_n, group = blockIdx.x / width, first_m = group * GROUP_M;
  const int gsize = min(tiles_m - first_m, GROUP_M);
  const int tm = first_m + (blockIdx.x % width) % gsize, tn = (blockIdx.x % width) / gsize;
  const int ktiles = (K + BK - 1) / BK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full[s]), 1);                // the producer's arrive.expect_tx (+ TMA bytes)
      mbar_init(smem_u32(&empty[s]), CONSUMER_WARPS);  // one arrive per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the TMA unit
  }
  __syncthreads();

  if (wg == 0) {  // ------------------------------------------------ producer warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) {
      // The maps were written by a host copy: order that write before the TMA unit reads them.
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(&maps[0]) : "memory");
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(&maps[1]) : "memory");
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(smem_u32(&empty[s]), ((kt / STAGES) - 1) & 1);  // consumers done with it
        const unsigned bar = smem_u32(&full[s]), a_dst = base + s * STAGE_BYTES, b_dst = a_dst + A_BYTES;
        mbar_expect_tx(bar, STAGE_BYTES);  // boxes past the edge still count their full size (zero-filled)
        tma_load_2d(a_dst, &maps[0], bar, kt * BK, tm * BM);
#pragma unroll
        for (int j = 0; j < BN / 64; ++j) tma_load_2d(b_dst + j * B_CHUNK_BYTES, &maps[1], bar, tn * BN + j * 64, kt * BK);
      }
    }
    return;
  }
  // ---------------------------------------------------------------- consumer warpgroups 1 and 2
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int cw = wg - 1;  // rows cw*64 .. cw*64+63 of the tile
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt % STAGES;
    mbar_wait(smem_u32(&full[s]), (kt / STAGES) & 1);
    __syncwarp();  // wgmma is .aligned: every lane of the warp issues it together after the spin
    const unsigned a_base = base + s * STAGE_BYTES + cw * 64 * 128, b_base = base + s * STAGE_BYTES + A_BYTES;
    fence_acc(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // a: K-major rows of 128 B; 8-row groups 1024 B apart (SBO); the k16 step moves 32 B inside the swizzle.
      // b: N-major; 64-column chunks 8 KiB apart (LBO), 8-k-row groups 1024 B apart (SBO); a k16 step is 2 KiB.
      wgmma_m64n256k16<T>(acc, sw128_desc(a_base + kk * 32, 16, 1024),
                          sw128_desc(b_base + kk * 16 * 128, B_CHUNK_BYTES, 1024), 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    fence_acc(acc);
    __syncwarp();
    if (tid % 32 == 0) mbar_arrive(smem_u32(&empty[s]));  // this warp has read stage s
  }
  // Epilogue. wgmma's accumulator layout: warp w of the warpgroup owns rows 16w..16w+15; per 8-column block i,
  // lane (g = lane/4, t = lane%4) holds d[4i..4i+1] at (row g, cols 8i+2t, +1) and d[4i+2..4i+3] at row g+8.
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int row0 = tm * BM + cw * 64 + warp * 16 + g, col0 = tn * BN + 2 * t;
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
    const int col = col0 + 8 * i;  // even, and N is a multiple of 8: col < N means col + 1 < N too
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 8 * h;
      if (row < M && col < N) store2(c + (size_t)row * N + col, acc[4 * i + 2 * h], acc[4 * i + 2 * h + 1]);
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT, 1)
    hgemm_wgmma_tma_bf16(const TmaDesc* maps, __nv_bfloat16* c, int M, int N, int K) {
  gemm_wgmma<__nv_bfloat16>(maps, c, M, N, K);
}
extern "C" __global__ void __launch_bounds__(NT, 1) hgemm_wgmma_tma_f16(const TmaDesc* maps, __half* c, int M, int N,
                                                                       int K) {
  gemm_wgmma<__half>(maps, c, M, N, K);
}
