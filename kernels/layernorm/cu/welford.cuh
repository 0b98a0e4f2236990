// Welford's running (count, mean, M2) state and its merge, for the layernorm kernels.
//
// A state summarises some elements: n of them, their mean, and M2 = sum of (x - mean)^2 (so var = M2 / n). One
// element v is the state (1, v, 0). Two states merge exactly (Chan et al.'s parallel formula):
//   n = na + nb,  delta = mean_b - mean_a,  mean = mean_a + delta * nb / n,  M2 = M2a + M2b + delta^2 * na * nb / n.
// Every term is a difference from a mean, never a raw x^2: on rows of mean 1e4 and std 1 the fp32 variance is off
// by about 2e-4, where E[x^2] - E[x]^2 is off by more than the variance itself (kernels/layernorm/precision.py).
#pragma once

struct Welford {
    float n, mean, m2;  // n as a float: it is multiplied into fp32 terms, and counts up to 2^24 are exact
};

__device__ __forceinline__ Welford welford_merge(Welford a, Welford b) {
    float n = a.n + b.n;
    if (n == 0.0f) return a;  // two empty states (lanes past the end of a short row): 0 / 0 would make NaN
    float delta = b.mean - a.mean;
    float fb = b.n / n;
    Welford r;
    r.n = n;
    r.mean = a.mean + delta * fb;
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * fb;
    return r;
}

// Add one element: the merge with (1, v, 0), written out (delta uses the old mean, the M2 term the new one).
__device__ __forceinline__ void welford_push(Welford& s, float v) {
    s.n += 1.0f;
    float delta = v - s.mean;
    s.mean += delta / s.n;
    s.m2 += delta * (v - s.mean);
}

// Butterfly over the warp: five __shfl_xor_sync steps of the three fields; every lane ends with the row's state.
__device__ __forceinline__ Welford warp_welford(Welford s) {
    for (int off = 16; off > 0; off >>= 1) {
        Welford o;
        o.n = __shfl_xor_sync(0xffffffffu, s.n, off);
        o.mean = __shfl_xor_sync(0xffffffffu, s.mean, off);
        o.m2 = __shfl_xor_sync(0xffffffffu, s.m2, off);
        s = welford_merge(s, o);
    }
    return s;
}
