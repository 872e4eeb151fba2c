// RMSNorm with a fused residual add: one block of NORM_THREADS threads per row.
//
// Reduction order of a row's sum of squares: when n is a multiple of 4 and at most
// NORM_THREADS * 32, thread t takes the float4 groups g = t, t + NT, t + 2NT, ... (elements
// 4g .. 4g+3, increasing) and keeps them in registers; otherwise thread t takes elements t, t+NT,
// ... in increasing index. Then the block_sum tree of common.cuh. It depends on n and
// NORM_THREADS only, never on the number of rows.
#include "common.cuh"

#ifndef NORM_THREADS
#define NORM_THREADS 256
#endif

// The most float4 groups one thread keeps in registers.
#define NORM_VEC 8

// h = x + residual (when `residual` is non-null; h is written back to `residual`), then
// out = h / sqrt(mean(h^2) + eps) * w. x, residual, out: [rows, n] f32; w: [n] f32; no two alias
// (so the loads of a loop can all be in flight at once). Grid: (rows); block: (NORM_THREADS).
extern "C" __global__ void __launch_bounds__(NORM_THREADS)
rms_norm_residual_f32(const float* __restrict__ x, float* __restrict__ residual, const float* __restrict__ w,
                      float* __restrict__ out, int n, float eps) {
    pdl_entry();
    __shared__ float scratch[NORM_THREADS / 32];
    const size_t row = blockIdx.x;
    const float* __restrict__ xr = x + row * n;
    float* __restrict__ rr = residual ? residual + row * n : nullptr;
    float* __restrict__ orow = out + row * n;
    float ss = 0.0f;
    if ((n & 3) == 0 && n <= NORM_THREADS * 4 * NORM_VEC) {
        const int n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* r4 = reinterpret_cast<float4*>(rr);
        float4 h[NORM_VEC];
#pragma unroll
        for (int k = 0; k < NORM_VEC; ++k) {
            const int g = threadIdx.x + k * NORM_THREADS;
            if (g < n4) {
                float4 v = x4[g];
                if (rr) {
                    const float4 r = r4[g];
                    v.x = __fadd_rn(v.x, r.x);
                    v.y = __fadd_rn(v.y, r.y);
                    v.z = __fadd_rn(v.z, r.z);
                    v.w = __fadd_rn(v.w, r.w);
                    r4[g] = v;
                }
                h[k] = v;
            }
        }
#pragma unroll
        for (int k = 0; k < NORM_VEC; ++k) {
            if (threadIdx.x + k * NORM_THREADS < n4) {
                ss = __fmaf_rn(h[k].x, h[k].x, ss);
                ss = __fmaf_rn(h[k].y, h[k].y, ss);
                ss = __fmaf_rn(h[k].z, h[k].z, ss);
                ss = __fmaf_rn(h[k].w, h[k].w, ss);
            }
        }
        const float total = block_sum<NORM_THREADS>(ss, scratch);
        const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, (float)n), eps)));
        const float4* w4 = reinterpret_cast<const float4*>(w);
        float4* o4 = reinterpret_cast<float4*>(orow);
#pragma unroll
        for (int k = 0; k < NORM_VEC; ++k) {
            const int g = threadIdx.x + k * NORM_THREADS;
            if (g < n4) {
                const float4 wv = w4[g];
                float4 o;
                o.x = __fmul_rn(__fmul_rn(h[k].x, inv), wv.x);
                o.y = __fmul_rn(__fmul_rn(h[k].y, inv), wv.y);
                o.z = __fmul_rn(__fmul_rn(h[k].z, inv), wv.z);
                o.w = __fmul_rn(__fmul_rn(h[k].w, inv), wv.w);
                o4[g] = o;
            }
        }
        return;
    }
#pragma unroll 8
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) {
        float h = xr[i];
        if (rr) {
            h = __fadd_rn(h, rr[i]);
            rr[i] = h;
        }
        ss = __fmaf_rn(h, h, ss);
    }
    const float total = block_sum<NORM_THREADS>(ss, scratch);
    const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, (float)n), eps)));
#pragma unroll 8
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) {
        const float h = rr ? rr[i] : xr[i];
        orow[i] = __fmul_rn(__fmul_rn(h, inv), w[i]);
    }
}

// Residual add in place: x[i] += d[i]. x, d: [len] f32. Grid: (ceil(len / blockDim)).
extern "C" __global__ void add_f32(float* x, const float* d, int len) {
    pdl_entry();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len) x[i] = x[i] + d[i];
}
