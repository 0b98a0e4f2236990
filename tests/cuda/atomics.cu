// Atomics from many blocks at once: int/float add, max, min, CAS, exchange.
extern "C" __global__ void atomics_mix(const int* xi, const float* xf, int* iout, float* fout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(&iout[0], xi[i]);
  atomicMax(&iout[1], xi[i]);
  atomicMin(&iout[2], xi[i]);
  atomicAdd(&fout[0], xf[i]);
  atomicMax(&fout[1], xf[i]);
  atomicMin(&fout[2], xf[i]);
  // CAS-based counter and an exchange whose final value must be one of the inputs
  int old = iout[3], assumed;
  do {
    assumed = old;
    old = atomicCAS(&iout[3], assumed, assumed + 2);
  } while (old != assumed);
  atomicExch(&iout[4], xi[i]);
}
