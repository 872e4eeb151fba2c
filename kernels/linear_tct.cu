// The first tiled form of the tensor-core linear layers (`linear_tcg_*`, QTC_GEMM = 1; split from
// linear_tc.cu, whose weight layout, slices and one-token chain this form reproduces bit for bit:
// read that file's header first). The second tiled form is kernels/linear_tcg.cu (QTC_GEMM = 2),
// the wgmma one kernels/linear_tcw.cu (QTC_GEMM = 3).
#include "common.cuh"

// The tiled form for many tokens (QTC_GEMM = 1 and M >= QTC_GEMM_MIN, host side): a block of 8
// warps computes 128 rows (8 tiles) x 128 tokens, walking K one 32-element unit at a time
// through a TCG_STAGES-deep shared-memory pipeline (weights by cp.async, x loaded to registers
// one unit ahead and split into its bf16 parts on the way in). Every output element goes
// through exactly the chain linear_tc_impl gives it: per unit a sum from 0 of the MMAs (k-half
// 0 then 1, parts hi, mid, lo), folded into the slice's running sum (add, or fma with the Q8_0
// scale); a slice's sum folded into the total at the slice's end (the first taken as is, empty
// slices adding 0), then the bias. The slices are those of linear_tc (S = QTC_SPLIT, or
// QTC_SPLIT_BIG for the `_big` entries, halved by the canary), so a row is bit-identical whichever
// form computes it; only the schedule differs.
#define TCG_MT 8       // row tiles of 16 per block
#define TCG_NT 16      // token tiles of 8 per block
#define TCG_XW 20      // u32 words per token of a staged unit of x: 16 bf16 pairs + 4 of padding
#define TCG_STAGES 4   // pipeline depth (units in shared memory)
#define TCG_XF 40      // floats per token of a staged unit of f32 x: 32 + 8 of padding
// How x reaches shared memory: 0 = through registers one unit ahead, split into its bf16 parts on
// the way in (checked on the H200, run 39); 1 = as f32 by cp.async in the weights' pipeline
// (TCG_STAGES - 1 units ahead), split when the B fragments are read (compile-tested only).
#ifndef QTC_GEMM_XASYNC
#define QTC_GEMM_XASYNC 0
#endif

// Grid: (ceil(M / 128), ceil(ceil(R / 16) / 8)), token blocks fastest (the blocks running
// together share a row block's weights through L2); block 256; dynamic shared memory
// TCG_STAGES * (8 * (1,024 BF16 | 544 Q8_0) + x) bytes, x = QTC_XSPLIT * 128 * TCG_XW * 4
// (128 * TCG_XF * 4 with QTC_GEMM_XASYNC = 1).
template <int F, int S>
__device__ __forceinline__ void linear_tcg_impl(const float* __restrict__ x, const u8* __restrict__ q,
                                                const u32* __restrict__ s, const float* __restrict__ bias, Outs y,
                                                int M, int K, int R, int split_canary) {
    constexpr int WB = F == TC_BF16 ? 1024 : 512;  // bytes of one (tile, unit)'s weights
    constexpr int SB = F == TC_Q8_0 ? 32 : 0;       // and of its scales
    constexpr int W_STAGE = TCG_MT * (WB + SB);
    constexpr int X_STAGE = QTC_GEMM_XASYNC ? TCG_NT * 8 * TCG_XF * 4 : QTC_XSPLIT * TCG_NT * 8 * TCG_XW * 4;
    constexpr int STAGE = W_STAGE + X_STAGE;
    extern __shared__ __align__(16) u8 tcg_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm = warp & 1, wn = warp >> 1;  // warp: row tiles 4wm..4wm+3, token tiles 4wn..4wn+3
    const int nu = K / 32;
    const int tiles = (R + 15) / 16;
    const int tile0 = blockIdx.y * TCG_MT;
    const int m0 = blockIdx.x * TCG_NT * 8;
    const int slices = (split_canary && M > 1 && S > 1) ? S / 2 : S;
    const int per = (nu + slices - 1) / slices;

    // Unit u's weights (and scales) into stage st; past the last unit or tile: zeros.
    auto load_w = [&](int u, int st) {
        u8* dst = tcg_smem + st * STAGE;
        for (int c = threadIdx.x; c < TCG_MT * (WB / 16); c += 256) {
            const int tl = c / (WB / 16), off = c % (WB / 16);
            const bool ok = u < nu && tile0 + tl < tiles;
            const u8* src = ok ? q + ((size_t)(tile0 + tl) * nu + u) * WB + off * 16 : q;
            // BF16 with QTC_GEMM_XASYNC = 1: each lane's two 16-byte halves go to two planes of
            // 32 (chunk 2l -> l, 2l + 1 -> 32 + l), so the A loads below are conflict-free.
            const int slot = (F == TC_BF16 && QTC_GEMM_XASYNC) ? (off & 1) * 32 + (off >> 1) : off;
            tcg_cp16(dst + tl * WB + slot * 16, src, ok);
        }
        if (F == TC_Q8_0 && threadIdx.x < TCG_MT * 2) {
            const int tl = threadIdx.x >> 1, half = threadIdx.x & 1;
            const bool ok = u < nu && tile0 + tl < tiles;
            const u8* src = ok ? reinterpret_cast<const u8*>(s) + ((size_t)(tile0 + tl) * nu + u) * 32 + half * 16
                               : q;
            tcg_cp16(dst + TCG_MT * WB + tl * 32 + half * 16, src, ok);
        }
    };
    // x of unit u for token tk = threadIdx.x / 2, k 16 (threadIdx.x % 2) .. + 16, into registers.
    const int tk = threadIdx.x >> 1, kh = threadIdx.x & 1;
    float4 xr[4];
    auto load_x = [&](int u) {
        const int m = m0 + tk;
#pragma unroll
        for (int i = 0; i < 4; ++i)
            xr[i] = (m < M && u < nu) ? *reinterpret_cast<const float4*>(x + (size_t)m * K + 32 * u + 16 * kh + 4 * i)
                                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    };
    // QTC_GEMM_XASYNC = 1: unit u's x as f32 into stage st by cp.async, four 16-byte chunks a
    // thread (token c / 8, floats 4 (c % 8) .. + 4); zeros past M or the last unit.
    auto load_x_async = [&](int u, int st) {
        float* X = reinterpret_cast<float*>(tcg_smem + st * STAGE + W_STAGE);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int c = threadIdx.x + 256 * i, tok = c >> 3, part = c & 7;
            const bool ok = m0 + tok < M && u < nu;
            const float* src = ok ? x + (size_t)(m0 + tok) * K + 32 * u + 4 * part : x;
            tcg_cp16(X + tok * TCG_XF + 4 * part, src, ok);
        }
    };
    // The registers' x as bf16 parts into stage st: word 8kh + j of token tk, part p.
    auto store_x = [&](int st) {
        u32 w[8][QTC_XSPLIT];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            split_x(make_float2(xr[i].x, xr[i].y), w[2 * i]);
            split_x(make_float2(xr[i].z, xr[i].w), w[2 * i + 1]);
        }
        u32* X = reinterpret_cast<u32*>(tcg_smem + st * STAGE + W_STAGE);
#pragma unroll
        for (int p = 0; p < QTC_XSPLIT; ++p) {
            uint4* d = reinterpret_cast<uint4*>(X + (p * TCG_NT * 8 + tk) * TCG_XW + 8 * kh);
            d[0] = make_uint4(w[0][p], w[1][p], w[2][p], w[3][p]);
            d[1] = make_uint4(w[4][p], w[5][p], w[6][p], w[7][p]);
        }
    };

    float acc[4][4][4], tot[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][j][c] = tot[i][j][c] = 0.0f;

#pragma unroll
    for (int i = 0; i < TCG_STAGES - 1; ++i) {
        load_w(i, i);
        if (QTC_GEMM_XASYNC) load_x_async(i, i);
        asm volatile("cp.async.commit_group;\n" ::);
        if (!QTC_GEMM_XASYNC) {
            load_x(i);
            store_x(i);
        }
    }
    int sl = 0, u_end = min(nu, per);
    for (int u = 0; u < nu; ++u) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(TCG_STAGES - 2));
        __syncthreads();
        // Everyone is past unit u - 1: its stage takes unit u + STAGES - 1.
        const int un = u + TCG_STAGES - 1;
        load_w(un, un % TCG_STAGES);
        if (QTC_GEMM_XASYNC) load_x_async(un, un % TCG_STAGES);
        asm volatile("cp.async.commit_group;\n" ::);
        if (!QTC_GEMM_XASYNC) load_x(un);
        const u8* W = tcg_smem + (u % TCG_STAGES) * STAGE;
        const u32* X = reinterpret_cast<const u32*>(W + W_STAGE);
        u32 a[4][2][4];
        float d[4][2];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int tl = 4 * wm + i;
            tc_staged_a<F, QTC_GEMM_XASYNC == 1>(W + tl * WB, W + TCG_MT * WB + tl * 32, lane, a[i], d[i]);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int tok = 32 * wn + 8 * j + g;
            u32 b[2][2][QTC_XSPLIT];
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    if (QTC_GEMM_XASYNC) {
                        // x[k], x[k+1] at k = 16h + 8r + 2t, split as linear_tc_impl splits them.
                        const float* Xf = reinterpret_cast<const float*>(X);
                        split_x(*reinterpret_cast<const float2*>(Xf + tok * TCG_XF + 16 * h + 8 * r + 2 * t), b[h][r]);
                    } else {
#pragma unroll
                        for (int p = 0; p < QTC_XSPLIT; ++p)
                            b[h][r][p] = X[(p * TCG_NT * 8 + tok) * TCG_XW + 8 * h + 4 * r + t];
                    }
                }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float us[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int p = 0; p < QTC_XSPLIT; ++p) mma_bf16(us, a[i][h], b[h][0][p], b[h][1][p]);
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    acc[i][j][c] = F == TC_Q8_0 ? __fmaf_rn(d[i][c >> 1], us[c], acc[i][j][c])
                                                : __fadd_rn(acc[i][j][c], us[c]);
            }
        }
        if (!QTC_GEMM_XASYNC) store_x(un % TCG_STAGES);
        if (u + 1 == u_end) {
            // The slice's sum into the total (the first as is), in slice order.
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        tot[i][j][c] = sl == 0 ? acc[i][j][c] : __fadd_rn(tot[i][j][c], acc[i][j][c]);
                        acc[i][j][c] = 0.0f;
                    }
            ++sl;
            u_end = min(nu, u_end + per);
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    // Empty slices (past the last unit) add their zero sums, as linear_tc_impl's do.
    for (; sl < slices; ++sl)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) tot[i][j][c] = __fadd_rn(tot[i][j][c], 0.0f);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int row = 16 * (tile0 + 4 * wm + i) + g + 8 * (c >> 1);
                const int m = m0 + 32 * wn + 8 * j + 2 * t + (c & 1);
                if (row < R && m < M) {
                    float v = tot[i][j][c];
                    if (bias) v = __fadd_rn(v, bias[row]);
                    store_out(y, m, row, v);
                }
            }
}

#define LINEAR_TCG(name, F, S)                                                                      \
    extern "C" __global__ void __launch_bounds__(256, 1)                                           \
        name(const float* x, const u8* q, const u32* s, const float* bias, LIN_OUT_PARAMS,         \
             int split_canary) { pdl_entry();                                                      \
        linear_tcg_impl<F, S>(x, q, s, bias, LIN_OUTS, M, K, R, split_canary);                     \
    }

LINEAR_TCG(linear_tcg_bf16, TC_BF16, QTC_SPLIT)
LINEAR_TCG(linear_tcg_q8_0, TC_Q8_0, QTC_SPLIT)
#if QTC_SPLIT_BIG > 0
LINEAR_TCG(linear_tcg_bf16_big, TC_BF16, QTC_SPLIT_BIG)
LINEAR_TCG(linear_tcg_q8_0_big, TC_Q8_0, QTC_SPLIT_BIG)
#endif
