// MoE "align block size": a counting sort of the routed slots by expert, each expert's group padded to a whole
// number of GEMM row blocks. Two kernels; one launch when the whole problem fits one block (decode-sized batches).
//
// moe_align_count<<<G, 256>>>: every block
//   1. fills its grid-stride share of sorted_ids with the sentinel n = T*top_k (the scatter overwrites the real
//      slots later, so the pad rows and the tail past n_padded end up holding the sentinel without anyone
//      computing where they are);
//   2. builds a histogram of its share of topk_ids in shared memory (shared-memory atomics stay inside the SM and
//      only the block's 256 threads contend), then adds its non-zero bins to the global counts[E] with one global
//      atomicAdd per (block, expert) instead of one per slot;
//   3. takes a ticket (atomicAdd on a global counter, after __threadfence so its counts are visible first); the
//      block that draws the last ticket knows every block's counts are in and carries on alone:
//   4. exclusive prefix sum of padded[e] = ceil(count[e]/block)*block over E <= 1024 experts in one block (each of
//      the 256 threads sums a run of ceil(E/256) <= 4 experts, a shuffle scan across the warp, a scan of the
//      8 warp totals), giving start[e] and n_padded = start[E];
//   5. expert_ids[b] for every row block b: a binary search of b*block in start[] (log2(1024) = 10 steps, the
//      table in shared memory; blocks past n_padded get -1). Empty experts have start[e] = start[e+1] and are
//      skipped by the search;
//   6. writes the per-expert write cursors cursor[e] = start[e] for the scatter.
// moe_align_scatter<<<G, 256>>>: each slot s claims a position with atomicAdd(&cursor[expert], 1) and writes
//   sorted_ids[pos] = s. Warp-aggregated: __match_any_sync groups the lanes of a warp that hold the same expert,
//   the group's first lane does one atomicAdd of the group size and the others take consecutive positions after
//   it (rank = popcount of the group's lanes below this one). A hot expert (every token's first choice) then costs
//   one global atomic per warp instead of 32 serialized ones on one address.
//
// With G = 1 (n <= 4096 slots: T*top_k for decode batches) the single block skips the global counts and the ticket
// and, instead of step 6, scatters itself with shared-memory cursors: one launch, no workspace, no memset. Within an
// expert's group the order of the slots depends on who wins each atomic (the contract leaves it free).
// Napkin numbers (T = 16K, top_k = 8, E = 256, block = 64): 512 KiB of ids read twice, ~0.6 MiB of sorted_ids and
// 9 KiB of expert_ids written: ~0.35 us of H200 bandwidth, so the launches (~3 us each) and the atomics on the
// cursors are the cost; that is why the small case fuses everything into one launch.
// ptxas (sm_90, no spills): moe_align_count 32 registers, 8232 B static shared (8 blocks of 256 threads per SM);
// moe_align_scatter 20 registers.
#define THREADS 256  // threads per block: 8 warps
#define MAX_E 1024   // experts: counts + start tables are 8 KiB of shared memory
#define FULL 0xffffffffu

__device__ __forceinline__ int round_up(int c, int block) { return (c + block - 1) / block * block; }

// topk_ids [n] (T x top_k flattened); sorted_ids [P]; expert_ids [P / block]; n_padded [1].
// Workspace (G > 1 only): counts [E] and ticket [1] zeroed by the caller, cursor [E].
extern "C" __global__ void __launch_bounds__(THREADS)
    moe_align_count(const int* __restrict__ topk_ids, int n, int E, int block, int P, int* __restrict__ sorted_ids,
                    int* __restrict__ expert_ids, int* __restrict__ n_padded, int* __restrict__ counts,
                    int* __restrict__ ticket, int* __restrict__ cursor) {
  __shared__ int hist[MAX_E];       // this block's counts; in the last block the global counts, then the cursors
  __shared__ int start[MAX_E + 1];  // exclusive prefix sum of the padded counts; start[E] = n_padded
  __shared__ int warp_sum[THREADS / 32];
  __shared__ int is_last;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gtid = blockIdx.x * THREADS + tid, gstride = gridDim.x * THREADS;

  // 1. Sentinel fill (grid-stride: every block writes P / G entries).
  for (int i = gtid; i < P; i += gstride) sorted_ids[i] = n;

  // 2. Per-block histogram in shared memory, then into the global counts.
  for (int e = tid; e < E; e += THREADS) hist[e] = 0;
  __syncthreads();
  for (int s = gtid; s < n; s += gstride) atomicAdd(&hist[topk_ids[s]], 1);
  __syncthreads();

  if (gridDim.x > 1) {
    for (int e = tid; e < E; e += THREADS)
      if (hist[e]) atomicAdd(&counts[e], hist[e]);
    __threadfence();  // this thread's count updates are visible device-wide before the block takes its ticket
    __syncthreads();
    // 3. The last block to arrive does the rest: all G blocks' counts are in by then.
    if (tid == 0) {
      is_last = atomicAdd(ticket, 1) == (int)gridDim.x - 1;
      __threadfence();  // acquire side: the counts are read after the ticket
    }
    __syncthreads();
    if (!is_last) return;  // block-uniform: the other G-1 blocks are done
    for (int e = tid; e < E; e += THREADS) hist[e] = __ldcg(&counts[e]);  // from L2: no stale L1 line
    __syncthreads();
  }

  // 4. Exclusive prefix sum of the padded counts. Thread tid owns experts [e0, e1), a run of `per` <= 4.
  const int per = (E + THREADS - 1) / THREADS;
  const int e0 = min(E, tid * per), e1 = min(E, e0 + per);
  int mine = 0;
  for (int e = e0; e < e1; ++e) mine += round_up(hist[e], block);
  int incl = mine;  // inclusive scan across the warp (Hillis-Steele: 5 shuffles)
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int v = __shfl_up_sync(FULL, incl, off);
    if (lane >= off) incl += v;
  }
  if (lane == 31) warp_sum[warp] = incl;
  __syncthreads();
  if (warp == 0) {  // scan of the 8 warp totals, turned exclusive
    const int w = lane < THREADS / 32 ? warp_sum[lane] : 0;
    int wi = w;
#pragma unroll
    for (int off = 1; off < THREADS / 32; off <<= 1) {
      const int v = __shfl_up_sync(FULL, wi, off);
      if (lane >= off) wi += v;
    }
    if (lane < THREADS / 32) warp_sum[lane] = wi - w;
  }
  __syncthreads();
  int run = warp_sum[warp] + incl - mine;  // where this thread's first expert starts
  for (int e = e0; e < e1; ++e) {
    start[e] = run;
    run += round_up(hist[e], block);
  }
  if (tid == THREADS - 1) {  // the last thread's running total is the grand total
    start[E] = run;
    *n_padded = run;
  }
  __syncthreads();

  // 5. expert_ids: the expert whose group holds row b*block, by binary search; -1 past n_padded.
  const int total = start[E], nb = P / block;
  for (int b = tid; b < nb; b += THREADS) {
    const int row = b * block;
    int eid = -1;
    if (row < total) {
      int lo = 0, hi = E;  // invariant: start[lo] <= row < start[hi]
      while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (start[mid] <= row) lo = mid; else hi = mid;
      }
      eid = lo;
    }
    expert_ids[b] = eid;
  }

  // 6. Cursors for the scatter.
  if (gridDim.x > 1) {
    for (int e = tid; e < E; e += THREADS) cursor[e] = start[e];
    return;
  }
  // G = 1: scatter here, with the cursors in shared memory (the sentinel fill above is ordered before it by the
  // __syncthreads calls in between: same block).
  for (int e = tid; e < E; e += THREADS) hist[e] = start[e];
  __syncthreads();
  for (int s = tid; s < n; s += THREADS) sorted_ids[atomicAdd(&hist[topk_ids[s]], 1)] = s;
}

// Scatter (G > 1): runs after moe_align_count, so the cursors are final and the sentinel fill is done.
extern "C" __global__ void __launch_bounds__(THREADS)
    moe_align_scatter(const int* __restrict__ topk_ids, int n, int* __restrict__ cursor,
                      int* __restrict__ sorted_ids) {
  const int lane = threadIdx.x & 31;
  const int gstride = gridDim.x * THREADS;
  // Warp-uniform loop: all 32 lanes iterate together (lanes past n hold expert -1), so the warp-wide
  // __match_any_sync and __shfl_sync below always see the full warp.
  for (int base = blockIdx.x * THREADS + (threadIdx.x & ~31); base < n; base += gstride) {
    const int s = base + lane;
    const bool ok = s < n;
    const int e = ok ? topk_ids[s] : -1;
    const unsigned peers = __match_any_sync(FULL, e);  // lanes with the same expert as this one
    const int leader = __ffs(peers) - 1;
    const int rank = __popc(peers & ((1u << lane) - 1));  // peers below this lane
    int first = 0;
    if (ok && lane == leader) first = atomicAdd(&cursor[e], __popc(peers));
    first = __shfl_sync(FULL, first, leader);
    if (ok) sorted_ids[first + rank] = s;
  }
}
