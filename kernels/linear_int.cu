// Integer tensor-core linear layers for M > 1 with QLIN_INT = 1 (Q8_0 and Q4_K, the repacked
// "lanes" layout of linear.cu): mma.sync m16n8k32 s8 x s8 -> s32 (PTX ISA "Matrix fragments
// for mma.m16n8k32"), weights as A (16 rows x 32 k: one unit), x's integer digits as B (32 k x 8
// tokens), one MMA per digit.
//
// Same bits as the lane kernels (the exactness contract, docs/DESIGN.md §3): x is staged once per
// linear by stage_x_int, with the lane kernels' stage_digits, into a global buffer every block
// reads (staged per block, as first written, M = 8 took 5x its weight-read time on the H200,
// run 23); every MMA output Σ q·x_k is the exact int32 that the lane kernels' dp4a
// chain forms, and the float steps after it are theirs in their order:
//  - per unit, acc = fma(d·s, digits_combine(S0, S1, S2), acc) (Q4_K then fma(−ml·s, Σx, acc));
//  - the accumulator of class l (units u ≡ l mod 32, the units lane l owns in the lane kernels)
//    takes its units in increasing u;
//  - the 32 class sums are added in warp_sum's xor tree (lane 0's order), then the bias.
// Which k a lane's fragment holds does not matter for an exact integer sum: lane 4g + t takes the
// unit's elements 8t .. 8t+7 (one 8-byte load) for both A and B.
#include "common.cuh"

// Row tiles of 16 per block (they share the block's token tiles in L1), Q8_0 entries of more
// than 8 tokens only: at 8 tokens one tile is faster, and Q4_K is slower with two at every M
// (run 28, H200: Q8_0 gate+up M = 32 319 -> 263 us, M = 8 108 -> 113; Q4_K M = 8 228 -> 290).
#ifndef QIMMA_TILES
#define QIMMA_TILES 1
#endif

// Warps per block: warp w owns the classes w + QIMMA_WARPS·j, j < QIMMA_CPW. (16 warps would
// halve each thread's accumulators, but 512 threads cap a thread at 128 registers: two row tiles
// of 32 tokens spill there too.)
#define QIMMA_WARPS 8
#define QIMMA_CPW (32 / QIMMA_WARPS)

// 1: the next chunk's weights are loaded before this chunk's MMAs (two sets of registers), so
// their trip to memory overlaps the work; 0: loaded when their chunk starts. Q8_0 only: Q4_K's
// scales and mins make the second set cost more than it hides (run 25: M = 8 gate+up 327 us
// with it, 225 without).
#ifndef QIMMA_PF
#define QIMMA_PF 1
#endif

// 1: a unit's B fragments and headers are loaded one step ahead (see linear_imma_impl); 0: when
// their step starts.
#ifndef QIMMA_BPF
#define QIMMA_BPF 0
#endif

// Stages x as integer digits once per linear, for every block of the integer kernels to read:
// x [m_base + tk, K] f32 -> xd [tk][nc][XI_CHUNK_F4] float4 (nc = ceil(K / 1024)), by the same
// stage_digits as the lane kernels' shared-memory staging, so the digits and their meta are the
// same bits. Grid: (nc, tokens of the slab); block: 256 (one float4 slot of the chunk each).
extern "C" __global__ void __launch_bounds__(256) stage_x_int(const float* __restrict__ x, float4* __restrict__ xd,
                                                             int m_base, int K) {
    pdl_entry();
    const int c = blockIdx.x, tk = blockIdx.y, s = threadIdx.x, nc = gridDim.x;
    const int e = 1024 * c + 4 * s;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (e < K) v = __ldg(reinterpret_cast<const float4*>(x + (size_t)(m_base + tk) * K + e));
    stage_digits(v, s, xd + ((size_t)tk * nc + c) * XI_CHUNK_F4);
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

// One chunk's weights of a warp's QIMMA_CPW units (u = 32 ci + warp + QIMMA_WARPS j) and
// WT row tiles:
// A fragments (rows g and g + 8 of each tile), scales and Q4_K min terms; rows past R and units
// past K are zero.
template <int F, int WT>
struct ImmaW {
    uint2 a[QIMMA_CPW][WT], b[QIMMA_CPW][WT];
    float da[QIMMA_CPW][WT], db[QIMMA_CPW][WT], ma[QIMMA_CPW][WT], mb[QIMMA_CPW][WT];
    __device__ __forceinline__ void load(const u8* __restrict__ q, const u8* __restrict__ h, int ci, int warp,
                                         int tile0, int g, int t, int nu, int K, int R) {
#pragma unroll
        for (int j = 0; j < QIMMA_CPW; ++j) {
            const int u = 32 * ci + warp + QIMMA_WARPS * j;
#pragma unroll
            for (int w = 0; w < WT; ++w) {
                const int r = 16 * (tile0 + w) + g;
                a[j][w] = b[j][w] = make_uint2(0, 0);
                da[j][w] = db[j][w] = ma[j][w] = mb[j][w] = 0.0f;
                if (u < nu && r < R) imma_row<F>(q, h, r, u, K, t, a[j][w], da[j][w], ma[j][w]);
                if (u < nu && r + 8 < R) imma_row<F>(q, h, r + 8, u, K, t, b[j][w], db[j][w], mb[j][w]);
            }
        }
    }
};

// One unit's B fragments (x's three digits, 8 tokens: this lane's token 8n + g, elements 8t ..
// 8t+7) and the unit headers of this lane's two D-fragment tokens (Q8_0: only s is read).
template <int F>
struct ImmaB {
    uint2 bx[3];
    float4 meta[2];
    __device__ __forceinline__ void load(const float4* __restrict__ xd, int tb, int tm0, int tm1, size_t tok_f4,
                                         size_t cbase, int uc, int t) {
        const u8* xt = reinterpret_cast<const u8*>(xd + tb * tok_f4 + cbase);
#pragma unroll
        for (int k = 0; k < 3; ++k)
            bx[k] = __ldg(reinterpret_cast<const uint2*>(xt + ((2 * k + (t >> 1)) * 32 + uc) * 16 + 8 * (t & 1)));
        const int tm[2] = {tm0, tm1};
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const float4* mp = xd + tm[c] * tok_f4 + cbase + XI_DIGIT_F4 + uc;
            if (F == FMT_Q4_K) {
                meta[c] = __ldg(mp);
            } else {
                meta[c] = make_float4(__ldg(reinterpret_cast<const float*>(mp)), 0.0f, 0.0f, 0.0f);
            }
        }
    }
};

// xd: the slab's digits from stage_x_int ([mc][nc][XI_CHUNK_F4]); q, h: the lanes layout;
// bias: [R] f32 or null; y: Outs, token m_base + i for slab token i. K % 32 == 0.
// Grid: (ceil(mc / (8 NT)), ceil(ceil(R / 16) / WT)), token groups fastest so the
// blocks of one row tile run together and share its weights in L2; block: 32 · QIMMA_WARPS (warp w
// owns the classes w + QIMMA_WARPS·j). No barrier until the epilogue. Dynamic shared memory:
// QIMMA_WARPS · WT · NT · 512 bytes.
template <int NT, int F, int WT>
__device__ __forceinline__ void linear_imma_impl(const float4* __restrict__ xd, const u8* __restrict__ q,
                                                 const u8* __restrict__ h, const float* __restrict__ bias, Outs y,
                                                 int m_base, int mc, int K, int R) {
    extern __shared__ float part[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.x * 8 * NT;
    const int tile0 = blockIdx.y * WT;
    const int nu = K / 32, nc = (nu + 31) / 32;
    const size_t tok_f4 = (size_t)nc * XI_CHUNK_F4;
    // This lane's B fragment token (8n + g) and meta tokens (8n + 2t, 8n + 2t + 1) of each token
    // tile, clamped into the slab (the clamped tokens' outputs are not stored).
    int tb[NT], tm[NT][2];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
        tb[n] = min(m0 + 8 * n + g, mc - 1);
        tm[n][0] = min(m0 + 8 * n + 2 * t, mc - 1);
        tm[n][1] = min(m0 + 8 * n + 2 * t + 1, mc - 1);
    }
    constexpr int CPW = QIMMA_CPW, NW = QIMMA_WARPS;
    constexpr bool PF = QIMMA_PF && F == FMT_Q8_0;
    float acc[CPW][WT][NT][4] = {};
    ImmaW<F, WT> cur, nxt;
    cur.load(q, h, 0, warp, tile0, g, t, nu, K, R);
    for (int ci = 0; ci < nc; ++ci) {
        if (PF && ci + 1 < nc) nxt.load(q, h, ci + 1, warp, tile0, g, t, nu, K, R);
        const size_t cbase = (size_t)ci * XI_CHUNK_F4;
        // Step s = j·NT + n: unit j's B fragments and unit headers for token tile n. With
        // QIMMA_BPF the next step's are loaded before this step's MMAs (two register sets), so
        // the L2 round trip overlaps the work instead of preceding it. A chunk's record always
        // holds all 32 units (zeros past K), so every load is in bounds.
        ImmaB<F> bb[2];
        if (QIMMA_BPF) bb[0].load(xd, tb[0], tm[0][0], tm[0][1], tok_f4, cbase, warp, t);
#pragma unroll
        for (int st = 0; st < CPW * NT; ++st) {
            const int j = st / NT, n = st % NT;
            const int uc = warp + NW * j;
            ImmaB<F>& b = bb[QIMMA_BPF ? (st & 1) : 0];
            if (QIMMA_BPF && st + 1 < CPW * NT) {
                const int n1 = (st + 1) % NT;
                bb[(st + 1) & 1].load(xd, tb[n1], tm[n1][0], tm[n1][1], tok_f4, cbase, warp + NW * ((st + 1) / NT), t);
            }
            if (32 * ci + uc >= nu) continue;
            if (!QIMMA_BPF) b.load(xd, tb[n], tm[n][0], tm[n][1], tok_f4, cbase, uc, t);
#pragma unroll
            for (int w = 0; w < WT; ++w) {
                int S[3][4];
#pragma unroll
                for (int k = 0; k < 3; ++k) {
                    S[k][0] = S[k][1] = S[k][2] = S[k][3] = 0;
                    imma_s8(S[k], cur.a[j][w].x, cur.b[j][w].x, cur.a[j][w].y, cur.b[j][w].y, b.bx[k].x, b.bx[k].y);
                }
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const float4 mt = b.meta[c & 1];
                    const float d = c < 2 ? cur.da[j][w] : cur.db[j][w];
                    float a = __fmaf_rn(__fmul_rn(d, mt.x), digits_combine(S[0][c], S[1][c], S[2][c]),
                                        acc[j][w][n][c]);
                    if (F == FMT_Q4_K) {
                        const float ml = c < 2 ? cur.ma[j][w] : cur.mb[j][w];
                        const float fx = xi_fx(mt);
                        a = __fmaf_rn(-__fmul_rn(ml, mt.x), fx, a);
                    }
                    acc[j][w][n][c] = a;
                }
            }
        }
        if (ci + 1 < nc) {
            if (PF) cur = nxt;
            else cur.load(q, h, ci + 1, warp, tile0, g, t, nu, K, R);
        }
    }
    // warp_sum's xor tree over the 32 classes, lane 0's order: level `off` adds class l + off to
    // class l (l < off). While off ≥ NW both are this warp's (l = warp + NW·j, l + off = warp +
    // NW·(j + off/NW)), so those levels run in registers; shared memory takes the NW results per
    // output element (part[warp][w][n][c][lane]) for the rest, then the bias.
    constexpr int PER_WARP = WT * NT * 4 * 32;
#pragma unroll
    for (int w = 0; w < WT; ++w)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                float v[CPW];
#pragma unroll
                for (int j = 0; j < CPW; ++j) v[j] = acc[j][w][n][c];
#pragma unroll
                for (int half = CPW / 2; half > 0; half >>= 1)
#pragma unroll
                    for (int j = 0; j < half; ++j) v[j] = __fadd_rn(v[j], v[j + half]);
                part[warp * PER_WARP + ((w * NT + n) * 4 + c) * 32 + lane] = v[0];
            }
    __syncthreads();
    for (int i = threadIdx.x; i < PER_WARP; i += blockDim.x) {
        float v[NW];
#pragma unroll
        for (int l = 0; l < NW; ++l) v[l] = part[l * PER_WARP + i];
#pragma unroll
        for (int off = NW / 2; off > 0; off >>= 1)
#pragma unroll
            for (int l = 0; l < off; ++l) v[l] = __fadd_rn(v[l], v[l + off]);
        const int l = i & 31, c = (i >> 5) & 3, n = (i >> 7) % NT, w = (i >> 7) / NT;
        const int row = 16 * (tile0 + w) + (l >> 2) + 8 * (c >> 1);
        const int m = m0 + 8 * n + 2 * (l & 3) + (c & 1);
        if (row < R && m < mc) {
            float out = v[0];
            if (bias) out += bias[row];
            store_out(y, m_base + m, row, out);
        }
    }
}

#define LINEAR_IMMA(name, T, F, NT, WT)                                                              \
    extern "C" __global__ void __launch_bounds__(32 * QIMMA_WARPS)                                   \
        name(const float4* xd, const u8* q, const T* h, const float* bias, LIN_OUT_PARAMS, int m_base, \
             int mc) { pdl_entry();                                                                  \
        linear_imma_impl<NT, F, WT>(xd, q, reinterpret_cast<const u8*>(h), bias, LIN_OUTS, m_base, mc, K, R); \
    }

// Row tiles per block: QIMMA_TILES for Q8_0 above 8 tokens, else 1 (engine/src/backend/cuda/
// linear_tc.rs picks the same).
LINEAR_IMMA(linear_imma_q8_0_n1, u16, FMT_Q8_0, 1, 1)
LINEAR_IMMA(linear_imma_q8_0_n2, u16, FMT_Q8_0, 2, QIMMA_TILES)
LINEAR_IMMA(linear_imma_q4_k_n1, u8, FMT_Q4_K, 1, 1)
LINEAR_IMMA(linear_imma_q4_k_n2, u8, FMT_Q4_K, 2, 1)
// 32 tokens where a thread's accumulators stay at 64 (QIMMA_CPW · row tiles ≤ 4; more spill).
#if QIMMA_CPW * QIMMA_TILES <= 4
LINEAR_IMMA(linear_imma_q8_0_n4, u16, FMT_Q8_0, 4, QIMMA_TILES)
#endif
LINEAR_IMMA(linear_imma_q4_k_n4, u8, FMT_Q4_K, 4, 1)
