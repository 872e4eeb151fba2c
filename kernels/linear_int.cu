// Integer tensor-core linear layers for M > 1 with QLIN_INT = 1 (Q8_0 and Q4_K, the repacked
// "lanes" layout of linear.cu): mma.sync m16n8k32 s8 x s8 -> s32 (PTX ISA "Matrix fragments
// for mma.m16n8k32"), weights as A (16 rows x 32 k: one unit), x's integer digits as B (32 k x 8
// tokens), one MMA per digit.
//
// Same bits as the lane kernels (the exactness contract, docs/DESIGN.md §3): x is staged by the
// same stage_digits, every MMA output Σ q·x_k is the exact int32 that the lane kernels' dp4a
// chain forms, and the float steps after it are theirs in their order:
//  - per unit, acc = fma(d·s, digits_combine(S0, S1, S2), acc) (Q4_K then fma(−ml·s, Σx, acc));
//  - the accumulator of class l (units u ≡ l mod 32, the units lane l owns in the lane kernels)
//    takes its units in increasing u;
//  - the 32 class sums are added in warp_sum's xor tree (lane 0's order), then the bias.
// Which k a lane's fragment holds does not matter for an exact integer sum: lane 4g + t takes the
// unit's elements 8t .. 8t+7 (one 8-byte load) for both A and B.
#include "common.cuh"

// float4 slots of one token's 1,024-element chunk of x.
#define XCHUNK_F4 256
// Staged chunk stride per token: XI_CHUNK_F4 plus one float4, so that tokens 8n + g of a B
// fragment load (and the meta loads) fall on different banks (3,584 bytes is a multiple of 128).
#define XI_TOKEN_F4 (XI_CHUNK_F4 + 1)

// Row tiles of 16 per block (they share the block's staged x).
#ifndef QIMMA_TILES
#define QIMMA_TILES 1
#endif

// 1: a chunk's weights are loaded before x is staged (more registers; Q4_K at 16 tokens keeps a
// 128-byte stack frame), 0: after.
#ifndef QIMMA_EARLY
#define QIMMA_EARLY 1
#endif

// d += a * b over one unit: m16n8k32, int8 inputs, int32 accumulation (exact).
__device__ __forceinline__ void imma_s8(int (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Elements 8t .. 8t+7 of unit u of row r as two words of int8 (Q4_K: the nibbles as bytes), and
// the unit's scale d (Q4_K: d·sc) and min term ml (Q4_K: dmin·mn), as qr_words forms them.
template <int F>
__device__ __forceinline__ void imma_row(const u8* __restrict__ q, const u8* __restrict__ h, int r, int u, int K,
                                         int t, uint2& w, float& d, float& ml) {
    ml = 0.0f;
    if (F == FMT_Q8_0) {
        w = *reinterpret_cast<const uint2*>(q + (size_t)r * K + 32 * u + 8 * t);
        d = f16_bits_to_f32(reinterpret_cast<const u16*>(h)[(size_t)r * (K / 32) + u]);
    } else {
        const uint2 b = *reinterpret_cast<const uint2*>(q + (size_t)r * (K / 2) + 16 * u + 8 * (t & 1));
        const int sh = t < 2 ? 0 : 4;
        w = make_uint2((b.x >> sh) & 0x0f0f0f0fu, (b.y >> sh) & 0x0f0f0f0fu);
        const u8* hd = h + ((size_t)r * (K / 256) + (u >> 3)) * 16;
        int sc, mn;
        k_scale_min(hd + 4, u & 7, &sc, &mn);
        d = __fmul_rn(f16_bits_to_f32(load_u16_unaligned(hd)), (float)sc);
        ml = __fmul_rn(f16_bits_to_f32(load_u16_unaligned(hd + 2)), (float)mn);
    }
}

// x: [M, K] f32; q, h: the lanes layout; bias: [R] f32 or null; y: Outs. K % 32 == 0.
// Grid: (ceil(M / (8 NT)), ceil(ceil(R / 16) / QIMMA_TILES)), token groups fastest so the blocks
// of one row tile run together and share its weights in L2; block: 256 (8 warps; warp w owns the
// classes w, w + 8, w + 16, w + 24). Dynamic shared memory: max(8 NT · 3,600, 32 · QIMMA_TILES ·
// NT · 512) bytes.
template <int NT, int F>
__device__ __forceinline__ void linear_imma_impl(const float* __restrict__ x, const u8* __restrict__ q,
                                                 const u8* __restrict__ h, const float* __restrict__ bias, Outs y,
                                                 int M, int K, int R) {
    constexpr int TOK = 8 * NT;
    constexpr int WT = QIMMA_TILES;
    extern __shared__ float4 xs[];  // [TOK][XI_TOKEN_F4] per chunk; then the class partials
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.x * TOK;
    const int mt = min(TOK, M - m0);
    const int tile0 = blockIdx.y * WT;
    const int nu = K / 32;
    float acc[4][WT][NT][4] = {};
    for (int c0 = 0; c0 < nu; c0 += 32) {
        // This chunk's weights of the warp's 4 units (rows past R and units past K stay zero);
        // with QIMMA_EARLY they are loaded before the staging, so their trip to memory overlaps it.
        uint2 wa[4][WT], wb[4][WT];
        float da[4][WT], db[4][WT], ma[4][WT], mb[4][WT];
        auto load_weights = [&]() {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int u = c0 + warp + 8 * j;
#pragma unroll
                for (int w = 0; w < WT; ++w) {
                    const int r = 16 * (tile0 + w) + g;
                    wa[j][w] = wb[j][w] = make_uint2(0, 0);
                    da[j][w] = db[j][w] = ma[j][w] = mb[j][w] = 0.0f;
                    if (u < nu && r < R) imma_row<F>(q, h, r, u, K, t, wa[j][w], da[j][w], ma[j][w]);
                    if (u < nu && r + 8 < R) imma_row<F>(q, h, r + 8, u, K, t, wb[j][w], db[j][w], mb[j][w]);
                }
            }
        };
        if (QIMMA_EARLY) load_weights();
        __syncthreads();
        for (int idx = threadIdx.x; idx < TOK * (XCHUNK_F4); idx += blockDim.x) {
            const int tk = idx / XCHUNK_F4, s = idx % XCHUNK_F4;
            const int e = 32 * c0 + 4 * s;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (tk < mt && e < K) v = __ldg(reinterpret_cast<const float4*>(x + (size_t)(m0 + tk) * K + e));
            stage_digits(v, s, xs + tk * XI_TOKEN_F4);
        }
        __syncthreads();
        if (!QIMMA_EARLY) load_weights();
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int uc = warp + 8 * j, u = c0 + uc;
            if (u >= nu) continue;
#pragma unroll
            for (int w = 0; w < WT; ++w) {
#pragma unroll
                for (int n = 0; n < NT; ++n) {
                    const u8* xt = reinterpret_cast<const u8*>(xs + (8 * n + g) * XI_TOKEN_F4);
                    int S[3][4];
#pragma unroll
                    for (int k = 0; k < 3; ++k) {
                        const uint2 b = *reinterpret_cast<const uint2*>(xt + ((2 * k + (t >> 1)) * 32 + uc) * 16 + 8 * (t & 1));
                        S[k][0] = S[k][1] = S[k][2] = S[k][3] = 0;
                        imma_s8(S[k], wa[j][w].x, wb[j][w].x, wa[j][w].y, wb[j][w].y, b.x, b.y);
                    }
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        const float4 meta = xs[(8 * n + 2 * t + (c & 1)) * XI_TOKEN_F4 + XI_DIGIT_F4 + uc];
                        const float d = c < 2 ? da[j][w] : db[j][w];
                        float a = __fmaf_rn(__fmul_rn(d, meta.x), digits_combine(S[0][c], S[1][c], S[2][c]),
                                            acc[j][w][n][c]);
                        if (F == FMT_Q4_K) {
                            const float ml = c < 2 ? ma[j][w] : mb[j][w];
                            const float fx = digits_combine(__float_as_int(meta.y), __float_as_int(meta.z),
                                                            __float_as_int(meta.w));
                            a = __fmaf_rn(-__fmul_rn(ml, meta.x), fx, a);
                        }
                        acc[j][w][n][c] = a;
                    }
                }
            }
        }
    }
    // Class partials: part[l][w][n][c][lane]; then each output element's 32 class sums in
    // warp_sum's tree, then the bias.
    constexpr int PER_CLASS = WT * NT * 4 * 32;
    __syncthreads();
    float* part = reinterpret_cast<float*>(xs);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int w = 0; w < WT; ++w)
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    part[(warp + 8 * j) * PER_CLASS + ((w * NT + n) * 4 + c) * 32 + lane] = acc[j][w][n][c];
    __syncthreads();
    for (int i = threadIdx.x; i < PER_CLASS; i += blockDim.x) {
        float v[32];
#pragma unroll
        for (int l = 0; l < 32; ++l) v[l] = part[l * PER_CLASS + i];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
            for (int l = 0; l < off; ++l) v[l] = __fadd_rn(v[l], v[l + off]);
        const int l = i & 31, c = (i >> 5) & 3, n = (i >> 7) % NT, w = (i >> 7) / NT;
        const int row = 16 * (tile0 + w) + (l >> 2) + 8 * (c >> 1);
        const int m = m0 + 8 * n + 2 * (l & 3) + (c & 1);
        if (row < R && m < M) {
            float out = v[0];
            if (bias) out += bias[row];
            store_out(y, m, row, out);
        }
    }
}

#define LINEAR_IMMA(name, T, F, NT)                                                                 \
    extern "C" __global__ void __launch_bounds__(256, 1)                                            \
        name(const float* x, const u8* q, const T* h, const float* bias, LIN_OUT_PARAMS,           \
             int split_canary) {                                                                   \
        linear_imma_impl<NT, F>(x, q, reinterpret_cast<const u8*>(h), bias, LIN_OUTS, M, K, R);    \
    }

LINEAR_IMMA(linear_imma_q8_0_n1, u16, FMT_Q8_0, 1)
LINEAR_IMMA(linear_imma_q8_0_n2, u16, FMT_Q8_0, 2)
LINEAR_IMMA(linear_imma_q4_k_n1, u8, FMT_Q4_K, 1)
LINEAR_IMMA(linear_imma_q4_k_n2, u8, FMT_Q4_K, 2)
