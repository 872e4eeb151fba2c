// RMSNorm with a fused residual add: one block of NORM_THREADS threads per row.
//
// Reduction order of a row's sum of squares: thread t accumulates elements t, t+NT, t+2NT, ... in
// increasing index, then the block_sum tree of common.cuh. It depends on n and NORM_THREADS only,
// never on the number of rows.
#include "common.cuh"

#ifndef NORM_THREADS
#define NORM_THREADS 1024
#endif

// h = x + residual (when `residual` is non-null; h is written back to `residual`), then
// out = h / sqrt(mean(h^2) + eps) * w. x, residual, out: [rows, n] f32; w: [n] f32; no two alias
// (so the loads of a loop can all be in flight at once). Grid: (rows); block: (NORM_THREADS).
extern "C" __global__ void __launch_bounds__(NORM_THREADS)
rms_norm_residual_f32(const float* __restrict__ x, float* __restrict__ residual, const float* __restrict__ w,
                      float* __restrict__ out, int n, float eps) {
    __shared__ float scratch[NORM_THREADS / 32];
    const size_t row = blockIdx.x;
    const float* __restrict__ xr = x + row * n;
    float* __restrict__ rr = residual ? residual + row * n : nullptr;
    float* __restrict__ orow = out + row * n;
    float ss = 0.0f;
#pragma unroll 8
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) {
        float h = xr[i];
        if (rr) {
            h += rr[i];
            rr[i] = h;
        }
        ss += h * h;
    }
    const float total = block_sum<NORM_THREADS>(ss, scratch);
    const float inv = 1.0f / sqrtf(total / (float)n + eps);
#pragma unroll 8
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) {
        const float h = rr ? rr[i] : xr[i];
        orow[i] = h * inv * w[i];
    }
}

// Residual add in place: x[i] += d[i]. x, d: [len] f32. Grid: (ceil(len / blockDim)).
extern "C" __global__ void add_f32(float* x, const float* d, int len) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len) x[i] = x[i] + d[i];
}
