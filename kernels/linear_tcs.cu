// The split-K form of the tensor-core linear layers (split from linear_tc.cu, whose weight
// layout, exactness rules and one-token chain this form reproduces; read that file's header first).
#include "common.cuh"

// The split-K form for 9..32 tokens (QTC_SK = 1, host side; batched decode and verify): one
// block per (K slice, run of row tiles, token group of 8 NT). Run 46/49: at M = 32 the one-token
// family reads the weights at about half the copy bandwidth, because every warp of every block
// re-reads its slice of x from L2 and splits it again (at M = 32, x's traffic for the 28672-row
// gate+up is about twice the weights'). Here a block stages its slice of x once, split into
// its bf16 parts in the B-fragment order, in shared memory, and its warps walk many row tiles
// against it. Each warp computes a tile's slice sum by exactly linear_tc_impl's chain (units in
// increasing order, per unit a sum from 0 of the MMAs, k-half 0 then 1, parts hi, mid, lo, then
// added, or fma'd with the Q8_0 scale); the slice sums go to `part`, and linear_tcs_reduce
// (kernels/splitk_reduce.cu) adds
// them in slice order (the first as is), then the bias: the same bits as the other forms.
// Slices: as linear_tc's (QTC_SPLIT, or QTC_SPLIT_BIG for the big matrices, halved by the
// canary), passed by the host as `slices` = gridDim.x.
#ifndef QTC_SK_WARPS
#define QTC_SK_WARPS 8
#endif
// Row tiles a warp takes at once (they share its x fragments).
#ifndef QTC_SK_WT
#define QTC_SK_WT 1
#endif
// Units whose weights a warp loads as one group (QTC_UNROLL's role; its own define because the
// H200 defaults set QTC_UNROLL = 1 for the one-token form, which starved this one: run 51).
// 16 warps a block leave 128 registers a thread: 1 unit there (the double buffer makes it 2 in
// flight); with fewer warps 4, or 2 with x in three parts (no spills:
// engine/tests/kernels_compile.rs).
#ifndef QTC_SK_UNROLL
#define QTC_SK_UNROLL (QTC_SK_WARPS >= 16 ? 1 : QTC_XSPLIT >= 3 ? 2 : 4)
#endif
#ifndef QTC_SK_DB
#define QTC_SK_DB 1
#endif

// Shared memory: for unit u of the slice, token tile n and chunk c of the lane's 4 P words
// (P = QTC_XSPLIT; word j = (2h + r) P + p: k-half h, register r, part p), the uint4 at
// ((u NT + n) P + c) 32 + lane: one conflict-free 16-byte read per lane and chunk.
// x: [M, K] f32; q, s: linear_tc's layout; part: [slices][M][R] f32. Grid: (slices, row runs,
// ceil(M / (8 NT))); block: 32 QTC_SK_WARPS; dynamic shared memory: units a slice x NT x P x 512.
template <int F, int NT>
__device__ __forceinline__ void linear_tcs_impl(const float* __restrict__ x, const u8* __restrict__ q,
                                                const u32* __restrict__ s, float* __restrict__ part, int M,
                                                int K, int R, int slices) {
    extern __shared__ uint4 xs[];
    constexpr int P = QTC_XSPLIT;
    constexpr int WB = F == TC_BF16 ? 2 : 1;
    constexpr int WT = QTC_SK_WT;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int nu = K / 32, tiles = (R + 15) / 16;
    const int sl = blockIdx.x;
    const int per = (nu + slices - 1) / slices;
    const int u0 = min(nu, sl * per), u1 = min(nu, u0 + per);
    const int m0 = blockIdx.z * 8 * NT;
    const int run = (tiles + gridDim.y - 1) / gridDim.y;
    const int tb0 = blockIdx.y * run, tb1 = min(tiles, tb0 + run);
    // Stage x: item i = ((u - u0) NT + n) 128 + 4 lane + (2h + r), a float2 of token m0 + 8n + g
    // at k = 32u + 16h + 8r + 2t, split into its P parts; 4 loads in flight a thread.
    u32* xw = reinterpret_cast<u32*>(xs);
    const int items = (u1 - u0) * NT * 128;
    for (int i0 = threadIdx.x; i0 < items; i0 += 4 * blockDim.x) {
        float2 f[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = i0 + e * blockDim.x;
            const int hr = i & 3, l = (i >> 2) & 31, un = i >> 7;
            const int m = m0 + 8 * (un % NT) + (l >> 2);
            f[e] = make_float2(0.0f, 0.0f);
            if (i < items && m < M)
                f[e] = *reinterpret_cast<const float2*>(x + (size_t)m * K + 32 * (u0 + un / NT) + 16 * (hr >> 1) +
                                                        8 * (hr & 1) + 2 * (l & 3));
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = i0 + e * blockDim.x;
            if (i >= items) break;
            const int hr = i & 3, l = (i >> 2) & 31, un = i >> 7;
            u32 p[P];
            split_x(f[e], p);
#pragma unroll
            for (int pp = 0; pp < P; ++pp) {
                const int j = hr * P + pp;
                xw[(((size_t)un * P + (j >> 2)) * 32 + l) * 4 + (j & 3)] = p[pp];
            }
        }
    }
    __syncthreads();
    for (int tile0 = tb0 + warp * WT; tile0 < tb1; tile0 += QTC_SK_WARPS * WT) {
        float acc[WT][NT][4];
#pragma unroll
        for (int w = 0; w < WT; ++w)
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[w][n][c] = 0.0f;
        auto load = [&](int ub, uint4 (&wv)[QTC_SK_UNROLL][WT][WB], u32 (&sc)[QTC_SK_UNROLL][WT]) {
#pragma unroll
            for (int j = 0; j < QTC_SK_UNROLL; ++j) {
                const int u = ub + j;
#pragma unroll
                for (int w = 0; w < WT; ++w) {
                    const int tile = tile0 + w;
                    sc[j][w] = 0;
#pragma unroll
                    for (int b = 0; b < WB; ++b) wv[j][w][b] = make_uint4(0, 0, 0, 0);
                    if (u < u1 && tile < tb1) {
                        const size_t tu = (size_t)tile * nu + u;
                        const uint4* p = reinterpret_cast<const uint4*>(q) + (tu * 32 + lane) * WB;
#pragma unroll
                        for (int b = 0; b < WB; ++b) wv[j][w][b] = p[b];
                        if (F == TC_Q8_0) sc[j][w] = s[tu * 8 + g];
                    }
                }
            }
        };
        uint4 wv[QTC_SK_UNROLL][WT][WB];
        u32 sc[QTC_SK_UNROLL][WT];
        if (QTC_SK_DB) load(u0, wv, sc);
        for (int ub = u0; ub < u1; ub += QTC_SK_UNROLL) {
            uint4 nwv[QTC_SK_UNROLL][WT][WB];
            u32 nsc[QTC_SK_UNROLL][WT];
            if (QTC_SK_DB) load(ub + QTC_SK_UNROLL, nwv, nsc);
            else load(ub, wv, sc);
#pragma unroll
            for (int j = 0; j < QTC_SK_UNROLL; ++j) {
                const int u = ub + j;
                if (u >= u1) break;
                u32 bx[NT][4 * P];
#pragma unroll
                for (int n = 0; n < NT; ++n)
#pragma unroll
                    for (int c = 0; c < P; ++c) {
                        const uint4 v = xs[(((size_t)(u - u0) * NT + n) * P + c) * 32 + lane];
                        bx[n][4 * c] = v.x; bx[n][4 * c + 1] = v.y; bx[n][4 * c + 2] = v.z; bx[n][4 * c + 3] = v.w;
                    }
#pragma unroll
                for (int w = 0; w < WT; ++w) {
                    if (tile0 + w >= tb1) continue;
                    u32 a[2][4];
                    if (F == TC_BF16) {
                        a[0][0] = wv[j][w][0].x; a[0][1] = wv[j][w][0].y; a[0][2] = wv[j][w][0].z; a[0][3] = wv[j][w][0].w;
                        a[1][0] = wv[j][w][1].x; a[1][1] = wv[j][w][1].y; a[1][2] = wv[j][w][1].z; a[1][3] = wv[j][w][1].w;
                    } else {
                        const u32 words[4] = {wv[j][w][0].x, wv[j][w][0].y, wv[j][w][0].z, wv[j][w][0].w};
#pragma unroll
                        for (int h = 0; h < 2; ++h)
#pragma unroll
                            for (int r = 0; r < 4; ++r) a[h][r] = i8x2_to_bf16x2(words[2 * h + r / 2], 2 * (r & 1));
                    }
                    const float d0 = F == TC_Q8_0 ? f16_bits_to_f32((u16)(sc[j][w] & 0xffffu)) : 1.0f;
                    const float d1 = F == TC_Q8_0 ? f16_bits_to_f32((u16)(sc[j][w] >> 16)) : 1.0f;
#pragma unroll
                    for (int n = 0; n < NT; ++n) {
                        float us[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                        for (int h = 0; h < 2; ++h)
#pragma unroll
                            for (int p = 0; p < P; ++p) mma_bf16(us, a[h], bx[n][2 * h * P + p], bx[n][(2 * h + 1) * P + p]);
#pragma unroll
                        for (int c = 0; c < 4; ++c) {
                            acc[w][n][c] = F == TC_Q8_0 ? __fmaf_rn(c < 2 ? d0 : d1, us[c], acc[w][n][c])
                                                        : __fadd_rn(acc[w][n][c], us[c]);
                        }
                    }
                }
            }
            if (QTC_SK_DB) {
#pragma unroll
                for (int j = 0; j < QTC_SK_UNROLL; ++j)
#pragma unroll
                    for (int w = 0; w < WT; ++w) {
                        sc[j][w] = nsc[j][w];
#pragma unroll
                        for (int b = 0; b < WB; ++b) wv[j][w][b] = nwv[j][w][b];
                    }
            }
        }
        // Element (w, n, c) of lane l: row 16 (tile0 + w) + l / 4 + 8 (c / 2), token m0 + 8n +
        // 2 (l % 4) + c % 2.
#pragma unroll
        for (int w = 0; w < WT; ++w)
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int row = 16 * (tile0 + w) + g + 8 * (c >> 1);
                    const int m = m0 + 8 * n + 2 * t + (c & 1);
                    if (tile0 + w < tb1 && row < R && m < M) part[((size_t)sl * M + m) * R + row] = acc[w][n][c];
                }
    }
}

#define LINEAR_TCS(name, F, NT)                                                                     \
    extern "C" __global__ void __launch_bounds__(32 * QTC_SK_WARPS)                                 \
        name(const float* x, const u8* q, const u32* s, float* part, int M, int K, int R, int slices) { \
        pdl_entry();                                                                               \
        linear_tcs_impl<F, NT>(x, q, s, part, M, K, R, slices);                                    \
    }

LINEAR_TCS(linear_tcs_bf16_n2, TC_BF16, 2)
LINEAR_TCS(linear_tcs_bf16_n4, TC_BF16, 4)
LINEAR_TCS(linear_tcs_q8_0_n2, TC_Q8_0, 2)
LINEAR_TCS(linear_tcs_q8_0_n4, TC_Q8_0, 4)
