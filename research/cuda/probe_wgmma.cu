// Probe (sixteenth session, research only; not part of the engine): is Hopper's warpgroup MMA
// (wgmma.mma_async m64n8k16, bf16 inputs, f32 accumulation, A from registers, B from shared
// memory) bit-identical to mma.sync m16n8k16 on the same inputs? The engine's tensor-core rows
// (docs/DESIGN.md §3, Level A) are built from m16n8k16 sums; a wgmma prefill form could only
// ship if every one of its 16-product sums plus accumulator rounds the same way.
//
// Cases: groups of 4 x 16 rows of A (16 k) sharing one B (16 k x 8 n) and their own C. Each
// element D = sum_k A[r][k] B[k][n] + C[r][n] is computed by mma.sync (one warp a 16-row case) and
// by wgmma (one warpgroup a group of 4 cases), and by the CPU in long double (rounded once to
// f32, for a sanity check of the layouts: tensor cores need not round like that).
// Build and run on the GPU machine: nvcc -O2 -arch=sm_90a -o /tmp/probe probe_wgmma.cu && /tmp/probe
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

__device__ __forceinline__ u32 pk(const u16* p) { return (u32)p[0] | ((u32)p[1] << 16); }

// A: [cases][16 rows][16 k] bf16 bits; B: [cases / 4][8 n][16 k]; C, D: [cases][16][8] f32.
extern "C" __global__ void k_mma(const u16* A, const u16* B, const float* C, float* D, int cases) {
    const int cs = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (cs >= cases) return;
    const int g = lane >> 2, t = lane & 3;
    const u16* a = A + (size_t)cs * 256;
    const u16* b = B + (size_t)(cs >> 2) * 128;
    const u32 a0 = pk(a + g * 16 + 2 * t), a1 = pk(a + (g + 8) * 16 + 2 * t);
    const u32 a2 = pk(a + g * 16 + 2 * t + 8), a3 = pk(a + (g + 8) * 16 + 2 * t + 8);
    const u32 b0 = pk(b + g * 16 + 2 * t), b1 = pk(b + g * 16 + 2 * t + 8);
    const float* c = C + (size_t)cs * 128;
    float d0 = c[g * 8 + 2 * t], d1 = c[g * 8 + 2 * t + 1], d2 = c[(g + 8) * 8 + 2 * t], d3 = c[(g + 8) * 8 + 2 * t + 1];
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    float* o = D + (size_t)cs * 128;
    o[g * 8 + 2 * t] = d0; o[g * 8 + 2 * t + 1] = d1; o[(g + 8) * 8 + 2 * t] = d2; o[(g + 8) * 8 + 2 * t + 1] = d3;
}

// One warpgroup (128 threads) a group: warp w takes case 4 * group + w as rows 16w .. 16w + 15.
extern "C" __global__ void __launch_bounds__(128) k_wgmma(const u16* A, const u16* B, const float* C, float* D, int cases) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(128) u16 bs[128];
    const int grp = blockIdx.x, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int cs = 4 * grp + w;
    // B as two no-swizzle core matrices (8 n rows x 8 k, 16 bytes a row): k-block c at 64 c.
    if (threadIdx.x < 128) {
        const int n = threadIdx.x >> 4, k = threadIdx.x & 15;
        bs[(k >> 3) * 64 + n * 8 + (k & 7)] = B[(size_t)grp * 128 + n * 16 + k];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const u16* a = A + (size_t)cs * 256;
    const u32 a0 = pk(a + g * 16 + 2 * t), a1 = pk(a + (g + 8) * 16 + 2 * t);
    const u32 a2 = pk(a + g * 16 + 2 * t + 8), a3 = pk(a + (g + 8) * 16 + 2 * t + 8);
    const float* c = C + (size_t)cs * 128;
    float d0 = c[g * 8 + 2 * t], d1 = c[g * 8 + 2 * t + 1], d2 = c[(g + 8) * 8 + 2 * t], d3 = c[(g + 8) * 8 + 2 * t + 1];
    const u64 addr = (u64)__cvta_generic_to_shared(bs);
    // Start address >> 4; leading and stride byte offsets both 128 (only one core matrix along
    // n, so either reading of the two puts k-block 1 at +128); no swizzle.
    const u64 desc = ((addr & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(128 >> 4) << 32);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)::"memory");
    if (cs < cases) {
        float* o = D + (size_t)cs * 128;
        o[g * 8 + 2 * t] = d0; o[g * 8 + 2 * t + 1] = d1; o[(g + 8) * 8 + 2 * t] = d2; o[(g + 8) * 8 + 2 * t + 1] = d3;
    }
#endif
}


// The same group by wgmma with A from shared memory too (the SS form): A's 64 x 16 as 8 x 2 core
// matrices, core (m-block i, k-block j) at (2 i + j) * 128 bytes: LBO (along k) 128, SBO
// (along m) 256.
extern "C" __global__ void __launch_bounds__(128) k_wgmma_ss(const u16* A, const u16* B, const float* C, float* D, int cases) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(128) u16 as[64 * 16];
    __shared__ __align__(128) u16 bs[128];
    const int grp = blockIdx.x, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int cs = 4 * grp + w;
    {
        const int n = threadIdx.x >> 4, k = threadIdx.x & 15;
        bs[(k >> 3) * 64 + n * 8 + (k & 7)] = B[(size_t)grp * 128 + n * 16 + k];
    }
    for (int i = threadIdx.x; i < 64 * 16; i += 128) {
        const int m = i >> 4, k = i & 15;
        as[((m >> 3) * 2 + (k >> 3)) * 64 + (m & 7) * 8 + (k & 7)] = A[(size_t)grp * 1024 + i];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const float* c = C + (size_t)cs * 128;
    float d0 = c[g * 8 + 2 * t], d1 = c[g * 8 + 2 * t + 1], d2 = c[(g + 8) * 8 + 2 * t], d3 = c[(g + 8) * 8 + 2 * t + 1];
    const u64 aa = (u64)__cvta_generic_to_shared(as), ba = (u64)__cvta_generic_to_shared(bs);
    const u64 da = ((aa & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(256 >> 4) << 32);
    const u64 db = ((ba & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(128 >> 4) << 32);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(da), "l"(db), "r"(1));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)::"memory");
    if (cs < cases) {
        float* o = D + (size_t)cs * 128;
        o[g * 8 + 2 * t] = d0; o[g * 8 + 2 * t + 1] = d1; o[(g + 8) * 8 + 2 * t] = d2; o[(g + 8) * 8 + 2 * t + 1] = d3;
    }
#endif
}

// A wide n (m64n32k16, RS): B's 8 columns repeated 4 times (core matrices along n at SBO 256),
// C's column n % 8; every column n must equal column n % 8 of the n = 8 result.
extern "C" __global__ void __launch_bounds__(128) k_wgmma_n32(const u16* A, const u16* B, const float* C, float* D, int cases) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(128) u16 bs[4 * 128];
    const int grp = blockIdx.x, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int cs = 4 * grp + w;
    for (int i = threadIdx.x; i < 512; i += 128) {
        const int nb = i >> 7, n = (i >> 4) & 7, k = i & 15;
        bs[nb * 128 + (k >> 3) * 64 + n * 8 + (k & 7)] = B[(size_t)grp * 128 + n * 16 + k];
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const u16* a = A + (size_t)cs * 256;
    const u32 a0 = pk(a + g * 16 + 2 * t), a1 = pk(a + (g + 8) * 16 + 2 * t);
    const u32 a2 = pk(a + g * 16 + 2 * t + 8), a3 = pk(a + (g + 8) * 16 + 2 * t + 8);
    const float* c = C + (size_t)cs * 128;
    float d[16];
    for (int j = 0; j < 4; ++j) {
        d[4 * j + 0] = c[g * 8 + 2 * t]; d[4 * j + 1] = c[g * 8 + 2 * t + 1];
        d[4 * j + 2] = c[(g + 8) * 8 + 2 * t]; d[4 * j + 3] = c[(g + 8) * 8 + 2 * t + 1];
    }
    const u64 addr = (u64)__cvta_generic_to_shared(bs);
    const u64 desc = ((addr & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(256 >> 4) << 32);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])::"memory");
    // D fragment of m64nN: n-block j's four values at d[4 j ..]; written as [cases][16][32].
    if (cs < cases) {
        float* o = D + (size_t)cs * 512;
        for (int j = 0; j < 4; ++j) {
            o[g * 32 + 8 * j + 2 * t] = d[4 * j]; o[g * 32 + 8 * j + 2 * t + 1] = d[4 * j + 1];
            o[(g + 8) * 32 + 8 * j + 2 * t] = d[4 * j + 2]; o[(g + 8) * 32 + 8 * j + 2 * t + 1] = d[4 * j + 3];
        }
    }
#endif
}

#ifndef __CUDACC_RTC__
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static u64 rs = 0x9E3779B97F4A7C15ull;
static u32 rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (u32)(rs >> 11); }
// A bf16 of random sign, mantissa and an exponent in [lo, hi]; 1 in 16 zero.
static u16 rbf(int lo, int hi) {
    if (rnd() % 16 == 0) return 0;
    const int e = lo + (int)(rnd() % (u32)(hi - lo + 1));
    return (u16)(((rnd() & 1) << 15) | ((u32)(e + 127) << 7) | (rnd() & 0x7f));
}
static float bf(u16 b) { u32 x = (u32)b << 16; float f; memcpy(&f, &x, 4); return f; }
static u32 bits(float f) { u32 x; memcpy(&x, &f, 4); return x; }

int main() {
    const int groups = 1 << 14, cases = 4 * groups;
    std::vector<u16> A((size_t)cases * 256), B((size_t)groups * 128);
    std::vector<float> C((size_t)cases * 128);
    for (int cs = 0; cs < cases; ++cs) {
        // Modes: narrow exponents, wide exponents, near-cancelling pairs, C dominant, C zero.
        const int mode = cs % 5;
        const int lo = mode == 1 ? -30 : -4, hi = mode == 1 ? 30 : 4;
        for (int i = 0; i < 256; ++i) A[(size_t)cs * 256 + i] = rbf(lo, hi);
        if (mode == 2)
            for (int r = 0; r < 16; ++r)
                for (int k = 8; k < 16; ++k) A[(size_t)cs * 256 + r * 16 + k] = A[(size_t)cs * 256 + r * 16 + k - 8] ^ 0x8000;
        for (int i = 0; i < 128; ++i) {
            const float v = bf(rbf(mode == 3 ? 6 : -8, mode == 3 ? 14 : 8)) * (1.0f + (float)(rnd() % 1000) / 997.0f);
            C[(size_t)cs * 128 + i] = mode == 4 ? 0.0f : v;
        }
    }
    for (int gi = 0; gi < groups; ++gi)
        for (int i = 0; i < 128; ++i) B[(size_t)gi * 128 + i] = rbf(gi % 5 == 1 ? -30 : -4, gi % 5 == 1 ? 30 : 4);
    // Cancelling mode: B's k + 8 equals B's k, so A's negated pairs cancel.
    for (int gi = 0; gi < groups; ++gi)
        for (int n = 0; n < 8; ++n)
            for (int k = 8; k < 16; ++k) B[(size_t)gi * 128 + n * 16 + k] = (gi % 5 == 2) ? B[(size_t)gi * 128 + n * 16 + k - 8] : B[(size_t)gi * 128 + n * 16 + k];
    u16 *dA, *dB; float *dC, *dD1, *dD2;
    cudaMalloc(&dA, A.size() * 2); cudaMalloc(&dB, B.size() * 2);
    cudaMalloc(&dC, C.size() * 4); cudaMalloc(&dD1, C.size() * 4); cudaMalloc(&dD2, C.size() * 4);
    cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dC, C.data(), C.size() * 4, cudaMemcpyHostToDevice);
    float *dD3, *dD4;
    cudaMalloc(&dD3, C.size() * 4); cudaMalloc(&dD4, C.size() * 16);
    cudaMemset(dD2, 0xff, C.size() * 4); cudaMemset(dD3, 0xff, C.size() * 4); cudaMemset(dD4, 0xff, C.size() * 16);
    k_mma<<<cases / 8, 256>>>(dA, dB, dC, dD1, cases);
    k_wgmma<<<groups, 128>>>(dA, dB, dC, dD2, cases);
    k_wgmma_ss<<<groups, 128>>>(dA, dB, dC, dD3, cases);
    k_wgmma_n32<<<groups, 128>>>(dA, dB, dC, dD4, cases);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(e)); return 1; }
    std::vector<float> D1(C.size()), D2(C.size());
    cudaMemcpy(D1.data(), dD1, C.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(D2.data(), dD2, C.size() * 4, cudaMemcpyDeviceToHost);
    std::vector<float> D3(C.size()), D4(C.size() * 4);
    cudaMemcpy(D3.data(), dD3, C.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(D4.data(), dD4, C.size() * 16, cudaMemcpyDeviceToHost);
    long same_ss = 0, same_n32 = 0;
    for (size_t i = 0; i < C.size(); ++i) {
        same_ss += bits(D1[i]) == bits(D3[i]);
        const size_t cs = i / 128, r = (i / 8) % 16, n = i % 8;
        bool all = true;
        for (int j = 0; j < 4; ++j) all = all && bits(D4[cs * 512 + r * 32 + 8 * j + n]) == bits(D1[i]);
        same_n32 += all;
    }
    long same = 0, ref1 = 0, ref2 = 0, shown = 0, per_mode[5] = {0}, diff_mode[5] = {0};
    for (int cs = 0; cs < cases; ++cs)
        for (int r = 0; r < 16; ++r)
            for (int n = 0; n < 8; ++n) {
                long double s = C[(size_t)cs * 128 + r * 8 + n];
                for (int k = 0; k < 16; ++k)
                    s += (long double)bf(A[(size_t)cs * 256 + r * 16 + k]) * bf(B[(size_t)(cs >> 2) * 128 + n * 16 + k]);
                const float rf = (float)s;
                const size_t i = (size_t)cs * 128 + r * 8 + n;
                per_mode[cs % 5]++;
                if (bits(D1[i]) == bits(D2[i])) ++same;
                else {
                    diff_mode[cs % 5]++;
                    if (shown++ < 8) printf("differ: case %d row %d n %d mode %d: mma %.9g (%08x) wgmma %.9g (%08x) ref %.9g\n", cs, r, n, cs % 5, D1[i], bits(D1[i]), D2[i], bits(D2[i]), rf);
                }
                ref1 += bits(D1[i]) == bits(rf);
                ref2 += bits(D2[i]) == bits(rf);
            }
    const long total = (long)C.size();
    printf("elements %ld: mma.sync == wgmma bit for bit: %ld (%.6f%%)\n", total, same, 100.0 * same / total);
    printf("SS form (A from shared memory) == mma.sync: %ld (%.6f%%)\n", same_ss, 100.0 * same_ss / total);
    printf("m64n32k16 RS, all 4 column copies == mma.sync: %ld (%.6f%%)\n", same_n32, 100.0 * same_n32 / total);
    printf("equal to the once-rounded exact sum: mma.sync %.4f%%, wgmma %.4f%%\n", 100.0 * ref1 / total, 100.0 * ref2 / total);
    for (int m = 0; m < 5; ++m) printf("mode %d: %ld elements, %ld differ\n", m, per_mode[m], diff_mode[m]);
    return 0;
}
#endif
