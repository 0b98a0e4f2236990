// LayerNorm backward, deterministic two-stage dw/db: no atomics, every add in an order fixed by the code.
// dx = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)) with xhat = (x - mean) * rstd, g = w * dy (per row);
// dw = sum_i dy * xhat, db = sum_i dy (per column, over all M rows).
//
// Stage 1, ln_bwd_partials: one block of 4 warps per ROWS_PER_CTA = 32 rows.
//   Phase 1, warp per row: each warp reduces 8 of the block's rows (lanes stride along the row, warp_sum), so every
//   row gets its two sums c1 = mean_j(g * xhat) and c2 = mean_j(g) in shared memory.
//   Phase 2, thread per column: each thread walks the block's rows for its columns (coalesced across the block for
//   each row), stores dx and keeps dw, db of its columns in registers, then writes them to row blockIdx.x of the
//   fp32 partials [num_ctas, N]. Each partial element has one writer.
// Stage 2, ln_bwd_colsum: thread per column, the num_ctas partial rows added from row 0 up, rounded once.
// x and dy are read twice (phase 1 and phase 2); the second read of a block's 32 rows mostly hits L2.
#include "../include/kernel_helpers.cuh"  // load/store, warp_sum, WB_EACH_DTYPE

constexpr int ROWS_PER_CTA = 32;  // fixed, never derived from the SM count: row i always lands in block i / 32
constexpr int WARPS = 4;          // stage 1's block: 4 warps (the host launches WARPS * 32 threads)
constexpr int SUM_THREADS = 256;  // stage 2's block

template <typename T>
__device__ void ln_bwd_partials(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                                const float* __restrict__ mean, const float* __restrict__ rstd, T* __restrict__ dx,
                                float* __restrict__ dw_part, float* __restrict__ db_part, int m, int n) {
    __shared__ float c1s[ROWS_PER_CTA], c2s[ROWS_PER_CTA];
    const int row0 = blockIdx.x * ROWS_PER_CTA;
    const int rows = min(ROWS_PER_CTA, m - row0);  // the last block may hold fewer rows
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int r = warp; r < rows; r += WARPS) {  // phase 1: warp per row
        const size_t base = (size_t)(row0 + r) * n;
        const float mu = mean[row0 + r], rs = rstd[row0 + r];
        float s1 = 0.0f, s2 = 0.0f;
        for (int j = lane; j < n; j += 32) {
            float g = load(w + j) * load(dy + base + j);
            s1 += g * (load(x + base + j) - mu) * rs;
            s2 += g;
        }
        s1 = warp_sum(s1);
        s2 = warp_sum(s2);
        if (lane == 0) {
            c1s[r] = s1 / n;
            c2s[r] = s2 / n;
        }
    }
    __syncthreads();
    for (int j = threadIdx.x; j < n; j += blockDim.x) {  // phase 2: thread per column
        const float wj = load(w + j);
        float dw = 0.0f, db = 0.0f;
        for (int r = 0; r < rows; ++r) {
            const size_t i = (size_t)(row0 + r) * n + j;
            const float rs = rstd[row0 + r];
            const float xhat = (load(x + i) - mean[row0 + r]) * rs;
            const float d = load(dy + i);
            store(dx + i, (wj * d - (xhat * c1s[r] + c2s[r])) * rs);
            dw += d * xhat;
            db += d;
        }
        dw_part[(size_t)blockIdx.x * n + j] = dw;
        db_part[(size_t)blockIdx.x * n + j] = db;
    }
}

template <typename T>
__device__ void ln_bwd_colsum(const float* __restrict__ dw_part, const float* __restrict__ db_part,
                              T* __restrict__ dw, T* __restrict__ db, int r, int n) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    float sw = 0.0f, sb = 0.0f;
    for (int k = 0; k < r; ++k) {  // the same order on every run: deterministic
        sw += dw_part[(size_t)k * n + j];
        sb += db_part[(size_t)k * n + j];
    }
    store(dw + j, sw);
    store(db + j, sb);
}

#define LN_BWD(sfx, T, _)                                                                                              \
    extern "C" __global__ void __launch_bounds__(WARPS * 32)                                                           \
        ln_bwd_partials_##sfx(const T* dy, const T* x, const T* w, const float* mean, const float* rstd, T* dx,       \
                              float* dw_part, float* db_part, int m, int n) {                                          \
        ln_bwd_partials(dy, x, w, mean, rstd, dx, dw_part, db_part, m, n);                                            \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(SUM_THREADS)                                                          \
        ln_bwd_colsum_##sfx(const float* dw_part, const float* db_part, T* dw, T* db, int r, int n) {                  \
        ln_bwd_colsum(dw_part, db_part, dw, db, r, n);                                                                 \
    }
WB_EACH_DTYPE(LN_BWD, _)
