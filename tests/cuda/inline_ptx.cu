// Inline PTX: GPU-only. The CPU engine refuses to run it (and points to workbench.inspect).
extern "C" __global__ void lane_id_ptx(unsigned* out) {
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  out[threadIdx.x] = lane;
}

extern "C" __global__ void no_ptx(unsigned* out) { out[threadIdx.x] = threadIdx.x & 31; }
