// The tiled tensor-core linear layers, second form (QTC_GEMM = 2, from QTC_GEMM_MIN tokens):
// y = x W^T + b for BF16 and Q8_0 weights in linear_tc.cu's tile-unit layout, bit-identical to
// linear_tc.cu's one-token and tiled forms (docs/DESIGN.md §3).
//
// Why a second form (research/cuda-notes.md, run 57): under Nsight Compute `linear_tcg_bf16_big`
// (blocks of 8 warps of 64 rows x 32 tokens, 252 registers a thread) runs one block an SM, 2
// warps a scheduler, 0.59 eligible a cycle, the tensor pipe 34.5% busy: latency-bound, with x
// split into its bf16 parts inside the main loop. Here:
//  - `tcg_split_x` splits x once per call into its QTC_XSPLIT bf16 parts, written in the order
//    the MMA's B fragments are read (a per-stream scratch buffer, engine/src/backend/cuda/
//    linear_tc.rs), so the main loop copies x into shared memory as it copies the weights
//    (cp.async, TCG2_STAGES - 1 stages ahead) and reads a fragment with one 16-byte load a part;
//  - blocks of 16 warps of 32 rows x 32 tokens (128 rows x 128 tokens a block, as before), at
//    most 128 registers a thread: 4 warps a scheduler; the slice totals in shared memory;
//  - TCG2_KU units of 32 elements a pipeline stage (one barrier a stage).
// Measured (runs 59-60): bit-identical and green, but 8-17% slower than linear_tc.cu's tiled form
// on the H200 (twice the warps: 28% more instructions, the fragments feeding the MMAs straight
// from shared loads, 16 warps at every barrier), so off. Its x pre-split is what a wgmma form
// would keep.
//
// Exactness: per output element (row, token) the chain is linear_tc_impl's, unchanged: K cut into
// `slices` fixed slices of whole units (from K and the matrix's shape alone; the host passes the
// count, halved for the gates' canary); units in increasing order; per unit a sum from 0 of the
// MMAs, k-half 0 then 1, in each the parts hi, mid, lo; then BF16 acc = acc + unit, Q8_0 acc =
// fma(d_row, unit, acc); a slice's sum folded into the total at the slice's end (the first as is,
// empty slices adding 0), then the bias. The parts are split_x's, the same for every M.
#include "common.cuh"

// Units of 32 elements per pipeline stage, and stages in flight (shared memory: TCG2_STAGES *
// TCG2_KU * (8 * (1,024 BF16 | 544 Q8_0) + 16 * QTC_XSPLIT * 512) bytes, then 64 KiB of slice
// totals; 160 KiB at 4 x 1 for BF16 with 2 parts).
#ifndef TCG2_KU
#define TCG2_KU 1
#endif
#ifndef TCG2_STAGES
#define TCG2_STAGES 4
#endif
#define TCG2_MT 8   // row tiles of 16 per block
#define TCG2_NT 16  // token tiles of 8 per block

// x as bf16 parts in B-fragment order. x: [m_base + mc, K] f32 (tokens m_base .. m_base + mc
// used); xs: [ceil(mc / 8) token tiles][K / 32 units][QTC_XSPLIT planes][32 lanes] 16-byte
// chunks. Lane l = 4g + t of (token tile tt, unit u) holds, for token 8 tt + g, the pairs
// (x[k], x[k+1]) at k = 32u + 16h + 8r + 2t as word (2h + r) * QTC_XSPLIT + p of its 4 *
// QTC_XSPLIT words (part p of split_x), word w in plane w / 4; tokens past mc are zeros.
// Grid: (K / 32, ceil(ceil(mc / 8) / 8)); block 256 (8 token tiles).
extern "C" __global__ void __launch_bounds__(256) tcg_split_x(const float* x, uint4* xs, int m_base, int mc, int K) {
    pdl_entry();
    constexpr int P = QTC_XSPLIT;
    const int nu = K / 32, u = blockIdx.x;
    const int tt = blockIdx.y * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (tt * 8 >= mc) return;
    const int m = tt * 8 + g;
    u32 w[4 * P];
#pragma unroll
    for (int hr = 0; hr < 4; ++hr) {
        const int k = 32 * u + 16 * (hr >> 1) + 8 * (hr & 1) + 2 * t;
        const float2 f = m < mc ? *reinterpret_cast<const float2*>(x + (size_t)(m_base + m) * K + k)
                                : make_float2(0.0f, 0.0f);
        u32 p[P];
        split_x(f, p);
#pragma unroll
        for (int i = 0; i < P; ++i) w[hr * P + i] = p[i];
    }
    uint4* dst = xs + ((size_t)tt * nu + u) * P * 32;
#pragma unroll
    for (int c = 0; c < P; ++c) dst[c * 32 + lane] = make_uint4(w[4 * c], w[4 * c + 1], w[4 * c + 2], w[4 * c + 3]);
}

// xs: tcg_split_x's output for tokens m_base .. m_base + mc; q, s: linear_tc.cu's layout; bias:
// [R] f32 or null; y: Outs, token m_base + m for the slab's token m. Grid: (ceil(mc / 128),
// ceil(ceil(R / 16) / 8)), token blocks fastest (the blocks running together share a row block's
// weights through L2); block 512; dynamic shared memory as above.
template <int F>
__device__ __forceinline__ void linear_tcg2_impl(const uint4* __restrict__ xs, const u8* __restrict__ q,
                                                 const u32* __restrict__ s, const float* __restrict__ bias, Outs y,
                                                 int m_base, int mc, int K, int R, int slices) {
    constexpr int P = QTC_XSPLIT;
    constexpr int WB = F == TC_BF16 ? 1024 : 512;  // bytes of one (tile, unit)'s weights
    constexpr int SB = F == TC_Q8_0 ? 32 : 0;       // and of its scales
    constexpr int W_UNIT = TCG2_MT * (WB + SB);
    constexpr int X_UNIT = TCG2_NT * P * 512;
    constexpr int UNIT = W_UNIT + X_UNIT;
    constexpr int STAGE = TCG2_KU * UNIT;
    extern __shared__ __align__(16) u8 tcg2_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm = warp & 3, wn = warp >> 2;  // warp: row tiles 2wm, 2wm + 1; token tiles 4wn .. 4wn + 3
    const int nu = K / 32;
    const int tiles = (R + 15) / 16;
    const int tile0 = blockIdx.y * TCG2_MT;
    const int tt0 = blockIdx.x * TCG2_NT;
    const int ntt = (mc + 7) / 8;
    const int per = (nu + slices - 1) / slices;
    const int stages = (nu + TCG2_KU - 1) / TCG2_KU;

    // Stage `st`'s units (weights, scales, x) into buffer `buf`; past the last unit, tile or
    // token tile: zeros.
    auto load = [&](int st, int buf) {
#pragma unroll
        for (int ku = 0; ku < TCG2_KU; ++ku) {
            const int u = st * TCG2_KU + ku;
            u8* W = tcg2_smem + buf * STAGE + ku * UNIT;
            for (int c = threadIdx.x; c < TCG2_MT * (WB / 16); c += 512) {
                const int tl = c / (WB / 16), off = c % (WB / 16);
                const bool ok = u < nu && tile0 + tl < tiles;
                const u8* src = ok ? q + ((size_t)(tile0 + tl) * nu + u) * WB + off * 16 : q;
                // BF16: each lane's two 16-byte halves to two planes of 32 (conflict-free loads).
                const int slot = F == TC_BF16 ? (off & 1) * 32 + (off >> 1) : off;
                tcg_cp16(W + tl * WB + slot * 16, src, ok);
            }
            if (F == TC_Q8_0 && threadIdx.x < TCG2_MT * 2) {
                const int tl = threadIdx.x >> 1, half = threadIdx.x & 1;
                const bool ok = u < nu && tile0 + tl < tiles;
                const u8* src =
                    ok ? reinterpret_cast<const u8*>(s) + ((size_t)(tile0 + tl) * nu + u) * 32 + half * 16 : q;
                tcg_cp16(W + TCG2_MT * WB + tl * 32 + half * 16, src, ok);
            }
            uint4* X = reinterpret_cast<uint4*>(W + W_UNIT);
            for (int c = threadIdx.x; c < TCG2_NT * P * 32; c += 512) {
                const int jt = c / (P * 32), rest = c % (P * 32);
                const bool ok = u < nu && tt0 + jt < ntt;
                const uint4* src = ok ? xs + ((size_t)(tt0 + jt) * nu + u) * P * 32 + rest : xs;
                tcg_cp16(X + c, src, ok);
            }
        }
    };

    // The slice sums' total lives in shared memory (element e of the thread at tot_s[e * 512 +
    // threadIdx.x]; touched once a slice), which leaves the registers to the unit loop.
    float* tot_s = reinterpret_cast<float*>(tcg2_smem + TCG2_STAGES * STAGE);
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

#pragma unroll
    for (int i = 0; i < TCG2_STAGES - 1; ++i) {
        load(i, i);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    int sl = 0, u_end = min(nu, per);
    for (int st = 0; st < stages; ++st) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(TCG2_STAGES - 2));
        __syncthreads();
        // Everyone is past stage st - 1: its buffer takes stage st + TCG2_STAGES - 1.
        load(st + TCG2_STAGES - 1, (st + TCG2_STAGES - 1) % TCG2_STAGES);
        asm volatile("cp.async.commit_group;\n" ::);
#pragma unroll 1
        for (int ku = 0; ku < TCG2_KU; ++ku) {
            const int u = st * TCG2_KU + ku;
            if (u >= nu) break;
            const u8* W = tcg2_smem + (st % TCG2_STAGES) * STAGE + ku * UNIT;
            const uint4* X = reinterpret_cast<const uint4*>(W + W_UNIT);
            u32 a[2][2][4];
            float d[2][2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int tl = 2 * wm + i;
                tc_staged_a<F, true>(W + tl * WB, W + TCG2_MT * WB + tl * 32, lane, a[i], d[i]);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                u32 b[4 * P];
#pragma unroll
                for (int c = 0; c < P; ++c) {
                    const uint4 v = X[((4 * wn + j) * P + c) * 32 + lane];
                    b[4 * c] = v.x; b[4 * c + 1] = v.y; b[4 * c + 2] = v.z; b[4 * c + 3] = v.w;
                }
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    float us[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int p = 0; p < P; ++p) mma_bf16(us, a[i][h], b[(2 * h) * P + p], b[(2 * h + 1) * P + p]);
#pragma unroll
                    for (int c = 0; c < 4; ++c)
                        acc[i][j][c] = F == TC_Q8_0 ? __fmaf_rn(d[i][c >> 1], us[c], acc[i][j][c])
                                                    : __fadd_rn(acc[i][j][c], us[c]);
                }
            }
            if (u + 1 == u_end) {
                // The slice's sum into the total (the first as is), in slice order.
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j)
#pragma unroll
                        for (int c = 0; c < 4; ++c) {
                            float* tp = tot_s + ((i * 4 + j) * 4 + c) * 512 + threadIdx.x;
                            *tp = sl == 0 ? acc[i][j][c] : __fadd_rn(*tp, acc[i][j][c]);
                            acc[i][j][c] = 0.0f;
                        }
                ++sl;
                u_end = min(nu, u_end + per);
            }
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                float v = tot_s[((i * 4 + j) * 4 + c) * 512 + threadIdx.x];
                // Empty slices (past the last unit) add their zero sums, as linear_tc_impl's do.
                for (int e = sl; e < slices; ++e) v = __fadd_rn(v, 0.0f);
                const int row = 16 * (tile0 + 2 * wm + i) + g + 8 * (c >> 1);
                const int m = 8 * (tt0 + 4 * wn + j) + 2 * t + (c & 1);
                if (row < R && m < mc) {
                    if (bias) v = __fadd_rn(v, bias[row]);
                    store_out(y, m_base + m, row, v);
                }
            }
}

#define LINEAR_TCG2(name, F)                                                                        \
    extern "C" __global__ void __launch_bounds__(512, 1)                                           \
        name(const uint4* xs, const u8* q, const u32* s, const float* bias, LIN_OUT_PARAMS,        \
             int m_base, int mc, int slices) { pdl_entry();                                        \
        linear_tcg2_impl<F>(xs, q, s, bias, LIN_OUTS, m_base, mc, K, R, slices);                    \
    }

LINEAR_TCG2(linear_tcg2_bf16, TC_BF16)
LINEAR_TCG2(linear_tcg2_q8_0, TC_Q8_0)
