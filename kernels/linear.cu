// Linear layers y = x W^T + b with the weights dequantized inside the kernel, for every weight
// format (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K). Correctness first: one warp per
// output feature, a tile of LIN_TOKENS tokens per warp so each weight load serves several tokens;
// every kernel also has an `_m1` entry with a tile of one token for M = 1 (decode), which computes
// each output with exactly the same operations in the same order as the tiled one (the tile only
// sets how many accumulators a warp keeps), so decode rows stay bit-identical to prefill rows.
//
// Reduction order of y[t, r] (the exactness contract, docs/DESIGN.md §3): lane l owns the
// 32-element units u = l, l + 32, l + 64, ... of the row (common.cuh `dequant32`) and accumulates
// them in increasing u, each unit in increasing k, into one f32; then warp_sum's xor tree; then the
// bias. None of it looks at the number of tokens M or at the token's place in its tile, so a row's
// result is bit-identical for every M. No split-K — except in the canary below.
#include "common.cuh"

#ifndef LIN_WARPS
#define LIN_WARPS 4
#endif
#ifndef LIN_TOKENS
#define LIN_TOKENS 8
#endif
// Output rows per warp: the tiled kernels (prefill) and the one-token kernels (decode). A warp
// computes each of its rows exactly as a one-row warp would (the rows only share the loads of x),
// so these are speed knobs with no effect on any result.
#ifndef LIN_ROWS
#define LIN_ROWS 1
#endif
#ifndef LIN_ROWS_M1
#define LIN_ROWS_M1 1
#endif

// x: [M, K] f32; w: [R] rows of `row_bytes` bytes in format F; bias: [R] f32 or null;
// y: [M, R] f32. K % 32 == 0. `split_canary` != 0 and M > 1: each dot product is reduced as two
// halves added at the end — a deliberately shape-dependent split-K for the gates' canary arm.
// Grid: (ceil(R / (LIN_WARPS * ROWS)), ceil(M / TOK)); block: (32 * LIN_WARPS).
// The shared body: `load(r, u, wv)` writes the 32 weights of unit u of row r into wv.
template <int TOK, int ROWS, class Load>
__device__ __forceinline__ void linear_units(const float* x, const float* bias, Outs y, int M, int K, int R,
                                             int split_canary, Load load) {
    const int lane = threadIdx.x & 31;
    const int r0 = (blockIdx.x * LIN_WARPS + (threadIdx.x >> 5)) * ROWS;
    if (r0 >= R) return;
    const int nr = min(ROWS, R - r0);
    const int m0 = blockIdx.y * TOK;
    const int mt = min(TOK, M - m0);
    const int nu = K / 32;
    const bool split = split_canary != 0 && M > 1;
    float acc[ROWS][TOK], acc2[ROWS][TOK];
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int t = 0; t < TOK; ++t) acc[i][t] = acc2[i][t] = 0.0f;
#pragma unroll 2
    for (int u = lane; u < nu; u += 32) {
        const bool second = split && u >= nu / 2;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            if (i < nr) {
                float wv[32];
                load(r0 + i, u, wv);
#pragma unroll
                for (int t = 0; t < TOK; ++t) {
                    if (t < mt) {
                        const float4* xr = reinterpret_cast<const float4*>(x + (size_t)(m0 + t) * K + 32 * u);
                        float s = second ? acc2[i][t] : acc[i][t];
#pragma unroll
                        for (int q = 0; q < 8; ++q) {
                            const float4 a = xr[q];
                            s = __fmaf_rn(wv[4 * q], a.x, s);
                            s = __fmaf_rn(wv[4 * q + 1], a.y, s);
                            s = __fmaf_rn(wv[4 * q + 2], a.z, s);
                            s = __fmaf_rn(wv[4 * q + 3], a.w, s);
                        }
                        if (second) acc2[i][t] = s; else acc[i][t] = s;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const int r = r0 + i;
        const float b = (bias && i < nr) ? bias[r] : 0.0f;
#pragma unroll
        for (int t = 0; t < TOK; ++t) {
            float v = warp_sum(acc[i][t]);
            if (split) v += warp_sum(acc2[i][t]);
            if (bias) v += b;
            if (i < nr && t < mt && lane == 0) store_out(y, m0 + t, r, v);
        }
    }
}

template <int TOK, int ROWS, int F>
__device__ __forceinline__ void linear_impl(const float* x, const u8* w, const float* bias, Outs y, int M, int K,
                                            int R, long long row_bytes, int split_canary) {
    linear_units<TOK, ROWS>(x, bias, y, M, K, R, split_canary,
                 [&](int r, int u, float* wv) { dequant32<F>(w + (size_t)r * row_bytes, u, wv); });
}

// 16-bit floats (F16, BF16): lane l owns k = 256 c + 8 l + j (c = 0, 1, ...; j = 0..7), so each
// warp load is 512 contiguous bytes of the row, 16 per lane; accumulated in increasing c and j,
// then warp_sum, then the bias. Needs K % 8 == 0 and 16-byte aligned rows (K even suffices for
// 2-byte elements when K % 8 == 0). Same grid as linear_impl.
template <int TOK, int ROWS, int F>
__device__ __forceinline__ void linear_half_impl(const float* x, const u8* w, const float* bias, Outs y, int M,
                                                 int K, int R, int split_canary) {
    const int lane = threadIdx.x & 31;
    const int r0 = (blockIdx.x * LIN_WARPS + (threadIdx.x >> 5)) * ROWS;
    if (r0 >= R) return;
    const int nr = min(ROWS, R - r0);
    const int m0 = blockIdx.y * TOK;
    const int mt = min(TOK, M - m0);
    const u16* wbase = reinterpret_cast<const u16*>(w);
    const bool split = split_canary != 0 && M > 1;
    float acc[ROWS][TOK], acc2[ROWS][TOK];
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int t = 0; t < TOK; ++t) acc[i][t] = acc2[i][t] = 0.0f;
#pragma unroll 4
    for (int k = lane * 8; k < K; k += 256) {
        uint4 raw[ROWS];
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
            if (i < nr) raw[i] = *reinterpret_cast<const uint4*>(wbase + (size_t)(r0 + i) * K + k);
        const bool second = split && k >= K / 2;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            if (i >= nr) continue;
            const u32 words[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
            float wv[8];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (F == FMT_BF16) {
                    wv[2 * j] = __uint_as_float(words[j] << 16);
                    wv[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
                } else {
                    wv[2 * j] = f16_bits_to_f32((u16)(words[j] & 0xffffu));
                    wv[2 * j + 1] = f16_bits_to_f32((u16)(words[j] >> 16));
                }
            }
#pragma unroll
            for (int t = 0; t < TOK; ++t) {
                if (t < mt) {
                    const float* xr = x + (size_t)(m0 + t) * K + k;
                    const float4 a = *reinterpret_cast<const float4*>(xr);
                    const float4 b = *reinterpret_cast<const float4*>(xr + 4);
                    float s = second ? acc2[i][t] : acc[i][t];
                    s += wv[0] * a.x;
                    s += wv[1] * a.y;
                    s += wv[2] * a.z;
                    s += wv[3] * a.w;
                    s += wv[4] * b.x;
                    s += wv[5] * b.y;
                    s += wv[6] * b.z;
                    s += wv[7] * b.w;
                    if (second) acc2[i][t] = s; else acc[i][t] = s;
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const int r = r0 + i;
        const float b = (bias && i < nr) ? bias[r] : 0.0f;
#pragma unroll
        for (int t = 0; t < TOK; ++t) {
            float v = warp_sum(acc[i][t]);
            if (split) v += warp_sum(acc2[i][t]);
            if (bias) v += b;
            if (i < nr && t < mt && lane == 0) store_out(y, m0 + t, r, v);
        }
    }
}

#define LINEAR_HALF(name, F)                                                                        \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                    \
        name(const float* x, const u8* w, const float* bias, LIN_OUT_PARAMS, long long row_bytes,  \
             int split_canary) { pdl_entry();                                                      \
        linear_half_impl<LIN_TOKENS, LIN_ROWS, F>(x, w, bias, LIN_OUTS, M, K, R, split_canary);    \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                    \
        name##_m1(const float* x, const u8* w, const float* bias, LIN_OUT_PARAMS,                  \
                  long long row_bytes, int split_canary) { pdl_entry();                            \
        linear_half_impl<1, LIN_ROWS_M1, F>(x, w, bias, LIN_OUTS, M, K, R, split_canary);          \
    }

#define LINEAR(name, F)                                                                             \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                    \
        name(const float* x, const u8* w, const float* bias, LIN_OUT_PARAMS, long long row_bytes,  \
             int split_canary) { pdl_entry();                                                      \
        linear_impl<LIN_TOKENS, LIN_ROWS, F>(x, w, bias, LIN_OUTS, M, K, R, row_bytes, split_canary); \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                    \
        name##_m1(const float* x, const u8* w, const float* bias, LIN_OUT_PARAMS,                  \
                  long long row_bytes, int split_canary) { pdl_entry();                            \
        linear_impl<1, LIN_ROWS_M1, F>(x, w, bias, LIN_OUTS, M, K, R, row_bytes, split_canary);    \
    }

LINEAR(linear_f32, FMT_F32)
LINEAR_HALF(linear_f16, FMT_F16)
LINEAR_HALF(linear_bf16, FMT_BF16)
LINEAR(linear_q4_0, FMT_Q4_0)
LINEAR(linear_q4_1, FMT_Q4_1)
LINEAR(linear_q5_0, FMT_Q5_0)
LINEAR(linear_q8_0, FMT_Q8_0)
LINEAR(linear_q4_k, FMT_Q4_K)
LINEAR(linear_q5_k, FMT_Q5_K)
LINEAR(linear_q6_k, FMT_Q6_K)

// ---- Repacked layouts (engine/src/backend/cuda/ops.rs `DevMatrix::upload_repacked`) -----------
//
// The GGUF Q8_0 (34-byte) and Q4_K (144-byte) blocks are not 16-byte aligned, so the weights of
// the decoder layers are split at upload into an aligned array of quants (Q4_K: 16 bytes per
// 32-element sub-block, so a lane's unit is one 16-byte load) and an array of block headers. The
// values and the lane ownership (lane l owns 32-element units u = l, l + 32, ...) are those of
// `linear_impl` above. With QLIN_FACTOR = 0 every arithmetic step is too, so results are
// bit-identical to the raw layout; with QLIN_FACTOR = 1 (the default) the scale is applied once
// per unit (below): a rounding of its own, the same for every M.

// x staged in shared memory. Lane l owns unit u = l + 32c, so it reads the 128 contiguous bytes
// x[32u .. 32u+32) of each token: straight from global memory every float4 load of a warp would
// touch 32 cache lines. The block instead copies each chunk of 1,024 elements (32 units) of its
// tokens into shared memory with coalesced loads, storing float4 slot s at `xs_slot(s)`, which
// puts the 8 lanes of each quarter-warp on 8 different 16-byte bank groups when lane l reads slots
// 8l .. 8l+7: conflict-free. The staging changes no arithmetic; the lanes, units and order are
// linear_units'.
#define XCHUNK 1024
__device__ __forceinline__ int xs_slot(int s) { return (s & ~7) | ((s ^ (s >> 3)) & 7); }

// Σ x of one 32-element unit while staging it: the unit's 8 float4 slots are held by 8
// consecutive lanes (slot s by lane s % 8 of its group); one fixed tree, the result valid in the
// lane with s % 8 == 0. Every repacked kernel stages through this, so Σ x is the same bits in all.
__device__ __forceinline__ float unit_xsum(float4 v) {
    float p = (v.x + v.y) + (v.z + v.w);
    p += __shfl_xor_sync(0xffffffffu, p, 1);
    p += __shfl_xor_sync(0xffffffffu, p, 2);
    p += __shfl_xor_sync(0xffffffffu, p, 4);
    return p;
}

// QLIN_FACTOR = 1 (the default): the scale is applied once per unit, d·Σ q·x (Q8_0) and
// dl·Σ q·x − ml·Σ x (Q4_K, with Σ x per unit and token computed once per block when staging)
// instead of dequantizing every weight. Fewer operations per weight (Q4_K decode +7% on the H200,
// research/cuda-notes.md), a rounding of its own that is still the same for every M (Level A);
// a model's matrices all take the repacked kernels, so no matrix is ever computed both ways.
// 0 keeps the values bit-identical to the raw-layout kernels (and so the CPU's dequantized
// weights).
#ifndef QLIN_FACTOR
#define QLIN_FACTOR 1
#endif

// Weights of unit u of row r into registers (Q8_0: 32 quant bytes in wa, wb and the f16 scale
// in dq; Q4_K: the sub-block's 16 quant bytes in wa, the super-block header in wb).
template <int F>
__device__ __forceinline__ void qr_load(const u8* __restrict__ q, const u8* __restrict__ h, int r, int u, int K,
                                        uint4& wa, uint4& wb, u16& dq) {
    if (F == FMT_Q8_0) {
        const u8* p = q + (size_t)r * K + 32 * u;
        wa = *reinterpret_cast<const uint4*>(p);
        wb = *reinterpret_cast<const uint4*>(p + 16);
        dq = reinterpret_cast<const u16*>(h)[(size_t)r * (K / 32) + u];
    } else {
        wa = *reinterpret_cast<const uint4*>(q + (size_t)r * (K / 2) + 16 * u);
        wb = *reinterpret_cast<const uint4*>(h + ((size_t)r * (K / 256) + (u >> 3)) * 16);
    }
}

// One unit of one row against one token's staged x (`xt`: the unit's chunk, swizzled; `xsum`:
// the unit's Σ x), accumulated into `acc` exactly as linear_qr_impl does.
template <int F>
__device__ __forceinline__ float qr_unit(const uint4 wa, const uint4 wb, const u16 dq, int u, int lane,
                                         const float4* xt, float xsum, float acc) {
    u32 words[8];
    float d, ml;
    qr_words<F>(wa, wb, dq, u, words, d, ml);
    float s = QLIN_FACTOR ? 0.0f : acc;
#pragma unroll
    for (int g = 0; g < 8; ++g) {
        const float4 a = xt[xs_slot(8 * lane + g)];
        const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int b = 0; b < 4; ++b) {
            const int e = 4 * g + b;
            const float qv = F == FMT_Q8_0 ? i8_to_f32_exact(words[e >> 2], e & 3) : u8_to_f32_exact(words[e >> 2], e & 3);
            if (QLIN_FACTOR) {
                s = __fmaf_rn(qv, av[b], s);
            } else {
                const float w = F == FMT_Q8_0 ? __fmul_rn(qv, d) : __fsub_rn(__fmul_rn(d, qv), ml);
                s = __fmaf_rn(w, av[b], s);
            }
        }
    }
    if (QLIN_FACTOR) {
        s = __fmaf_rn(d, s, acc);
        if (F == FMT_Q4_K) s = __fmaf_rn(-ml, xsum, s);
    }
    return s;
}

// QLIN_INT = 1: one unit against x staged as integer digits (common.cuh stage_digits; `xc`: the
// token's chunk, `uc`: the unit's index in it). Σ q·x_d per digit is an exact int32 (dp4a), so
// any kernel that forms the same three sums and combines them as here gets the same bits.
template <int F>
__device__ __forceinline__ float qr_unit_int(const uint4 wa, const uint4 wb, const u16 dq, int u, int uc,
                                             const float4* xc, float acc) {
    u32 words[8];
    float d, ml;
    qr_words<F>(wa, wb, dq, u, words, d, ml);
    const uint4* dig = reinterpret_cast<const uint4*>(xc);
    int S[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        const uint4 lo = dig[(2 * k) * 32 + uc], hi = dig[(2 * k + 1) * 32 + uc];
        const u32 xw[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        int acc_i = 0;
#pragma unroll
        for (int w = 0; w < 8; ++w) acc_i = __dp4a((int)words[w], (int)xw[w], acc_i);
        S[k] = acc_i;
    }
    const float4 meta = xc[XI_DIGIT_F4 + uc];
    acc = __fmaf_rn(__fmul_rn(d, meta.x), digits_combine(S[0], S[1], S[2]), acc);
    if (F == FMT_Q4_K) {
        const float fx = xi_fx(meta);
        acc = __fmaf_rn(-__fmul_rn(ml, meta.x), fx, acc);
    }
    return acc;
}

// The repacked quantized linear for M tokens (prefill, verify, batched decode): FMT_Q8_0 or
// FMT_Q4_K. Each pass of the loop covers one chunk (lane l: unit c0/32 + l); the pass's weights
// are loaded into registers first, so their trip to memory overlaps the staging of x. Dynamic
// shared memory: TOK * (XCHUNK * 4 + 32 * 4) bytes (QLIN_INT = 1: TOK * 3,584, the digits).
// Grid and block as linear_impl; every warp
// stays to the end (the block synchronizes per pass), warps past R only help stage.
template <int TOK, int ROWS, int F>
__device__ __forceinline__ void linear_qr_impl(const float* __restrict__ x, const u8* __restrict__ q,
                                               const u8* __restrict__ h, const float* __restrict__ bias,
                                               Outs y, int M, int K, int R, int split_canary) {
    extern __shared__ float4 xs[];  // [TOK][XCHUNK / 4], swizzled
    float* usum = reinterpret_cast<float*>(xs + TOK * (XCHUNK / 4));  // [TOK][32]: Σ x per unit
    const int lane = threadIdx.x & 31;
    const int r0 = (blockIdx.x * LIN_WARPS + (threadIdx.x >> 5)) * ROWS;
    const int nr = max(0, min(ROWS, R - r0));
    const int m0 = blockIdx.y * TOK;
    const int mt = min(TOK, M - m0);
    const int nu = K / 32;
    const bool split = split_canary != 0 && M > 1;
    float acc[ROWS][TOK], acc2[ROWS][TOK];
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int t = 0; t < TOK; ++t) acc[i][t] = acc2[i][t] = 0.0f;
    for (int c0 = 0; c0 < K; c0 += XCHUNK) {
        const int u = c0 / 32 + lane;
        uint4 wa[ROWS], wb[ROWS];
        u16 dq[ROWS];
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            dq[i] = 0;
            if (i < nr && u < nu) qr_load<F>(q, h, r0 + i, u, K, wa[i], wb[i], dq[i]);
        }
        __syncthreads();
        for (int idx = threadIdx.x; idx < TOK * (XCHUNK / 4); idx += blockDim.x) {
            const int t = idx / (XCHUNK / 4), s = idx % (XCHUNK / 4);
            const int e = c0 + 4 * s;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (t < mt && e < K) v = __ldg(reinterpret_cast<const float4*>(x + (size_t)(m0 + t) * K + e));
            if (QLIN_INT) {
                stage_digits(v, s, xs + t * XI_CHUNK_F4);
            } else {
                xs[t * (XCHUNK / 4) + xs_slot(s)] = v;
                if (QLIN_FACTOR && F == FMT_Q4_K) {
                    const float p = unit_xsum(v);
                    if ((s & 7) == 0) usum[t * 32 + s / 8] = p;
                }
            }
        }
        __syncthreads();
        if (u >= nu) continue;
        const bool second = split && u >= nu / 2;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            if (i >= nr) continue;
#pragma unroll
            for (int t = 0; t < TOK; ++t) {
                if (t >= mt) continue;
                const float xsum = (!QLIN_INT && QLIN_FACTOR && F == FMT_Q4_K) ? usum[t * 32 + lane] : 0.0f;
                const float base = second ? acc2[i][t] : acc[i][t];
                const float v = QLIN_INT ? qr_unit_int<F>(wa[i], wb[i], dq[i], u, lane, xs + t * XI_CHUNK_F4, base)
                                         : qr_unit<F>(wa[i], wb[i], dq[i], u, lane, xs + t * (XCHUNK / 4), xsum, base);
                if (second) acc2[i][t] = v; else acc[i][t] = v;
            }
        }
    }
    if (nr == 0) return;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const int r = r0 + i;
        const float b = (bias && i < nr) ? bias[r] : 0.0f;
#pragma unroll
        for (int t = 0; t < TOK; ++t) {
            float v = warp_sum(acc[i][t]);
            if (split) v += warp_sum(acc2[i][t]);
            if (bias) v += b;
            if (i < nr && t < mt && lane == 0) store_out(y, m0 + t, r, v);
        }
    }
}

// M = 1 (decode): the block stages the whole of x once (ceil(K / 1024) swizzled chunks, and the
// unit sums), then its warps walk row groups g = blockIdx.x, blockIdx.x + gridDim.x, ... with no
// further barrier, so the staging is paid once per block rather than once per row group and the
// weight loads of consecutive units stay in flight. Per row the lanes, units and operations are
// linear_qr_impl's, so decode rows are bit-identical to prefill rows. Dynamic shared memory:
// ceil(K / 1024) * (4096 + 128) bytes (QLIN_INT = 1: ceil(K / 1024) * 3,584). Grid: (any number
// of blocks); block: (32 * QLIN_M1_WARPS):
// 8 warps by default, so a block keeps enough loads in flight when a large K (57 KiB of x at
// K = 14,336) leaves room for only a few blocks per SM.
#ifndef QLIN_M1_WARPS
#define QLIN_M1_WARPS 8
#endif
// Units a lane's loop over K unrolls (weight loads in flight per lane; the accumulation order is
// the loop's, whatever the unroll).
#ifndef QLIN_M1_UNROLL
#define QLIN_M1_UNROLL 4
#endif
// Units per lane of the first row group each block prefetches into L2 before staging x
// (0 = none).
#ifndef QLIN_M1_PREFETCH
#define QLIN_M1_PREFETCH 0
#endif
// Matrices with K >= QLIN_M1_BIGK take the `_m1w` entry: QLIN_M1_WARPS_BIGK warps per block and
// QLIN_M1_PREFETCH_BIGK units of prefetch (a long x to stage favours bigger blocks). Speed only:
// a row's lanes, units and order are the same in both entries.
#ifndef QLIN_M1_WARPS_BIGK
#define QLIN_M1_WARPS_BIGK QLIN_M1_WARPS
#endif
#ifndef QLIN_M1_PREFETCH_BIGK
#define QLIN_M1_PREFETCH_BIGK QLIN_M1_PREFETCH
#endif
// With PDL = 1 and PDL_EARLY = 1 the one-token entries issue this L2 prefetch before
// griddepcontrol.wait: the weights are read-only for the whole forward (no kernel writes them),
// and a prefetch changes no value, so the first row group's weights stream in while the kernel
// before drains (common.cuh, pdl_entry).
#ifndef PDL_EARLY
#define PDL_EARLY 0
#endif
template <int ROWS, int F, int WARPS, int PREFETCH>
__device__ __forceinline__ void qr_m1_prefetch(const u8* __restrict__ q, int K, int R) {
    if (PREFETCH <= 0) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nu = K / 32;
    const int r0 = (blockIdx.x * WARPS + warp) * ROWS;
    for (int i = 0; i < ROWS && r0 + i < R; ++i)
        for (int c = 0, u = lane; c < PREFETCH && u < nu; ++c, u += 32) {
            const u8* p = F == FMT_Q8_0 ? q + (size_t)(r0 + i) * K + 32 * u : q + (size_t)(r0 + i) * (K / 2) + 16 * u;
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
        }
}

template <int ROWS, int F, int WARPS, int PREFETCH>
__device__ __forceinline__ void linear_qr_m1_impl(const float* __restrict__ x, const u8* __restrict__ q,
                                                  const u8* __restrict__ h, const float* __restrict__ bias, Outs y,
                                                  int K, int R) {
    extern __shared__ float4 xs[];
    const int nch = (K + XCHUNK - 1) / XCHUNK;
    float* usum = reinterpret_cast<float*>(xs + nch * (XCHUNK / 4));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nu = K / 32;
    // Start the first row group's weights on their way to L2 before the staging of x (a hint:
    // no registers, no effect on any value). With PDL_EARLY = 1 the entry has done it already,
    // before waiting for the grid before.
    if (!PDL_EARLY) qr_m1_prefetch<ROWS, F, WARPS, PREFETCH>(q, K, R);
    for (int idx = threadIdx.x; idx < nch * (XCHUNK / 4); idx += blockDim.x) {
        const int ch = idx / (XCHUNK / 4), s = idx % (XCHUNK / 4);
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (4 * idx < K) v = __ldg(reinterpret_cast<const float4*>(x) + idx);
        if (QLIN_INT) {
            stage_digits(v, s, xs + ch * XI_CHUNK_F4);
        } else {
            xs[ch * (XCHUNK / 4) + xs_slot(s)] = v;
            if (QLIN_FACTOR && F == FMT_Q4_K) {
                const float p = unit_xsum(v);
                if ((s & 7) == 0) usum[idx / 8] = p;
            }
        }
    }
    __syncthreads();
    const int groups = (R + WARPS * ROWS - 1) / (WARPS * ROWS);
    for (int gi = blockIdx.x; gi < groups; gi += gridDim.x) {
        const int r0 = (gi * WARPS + warp) * ROWS;
        const int nr = min(ROWS, R - r0);
        if (nr <= 0) continue;
        float acc[ROWS];
#pragma unroll
        for (int i = 0; i < ROWS; ++i) acc[i] = 0.0f;
#pragma unroll QLIN_M1_UNROLL
        for (int u = lane; u < nu; u += 32) {
            const float4* xt = xs + (u / 32) * (XCHUNK / 4);
            const float xsum = (!QLIN_INT && QLIN_FACTOR && F == FMT_Q4_K) ? usum[u] : 0.0f;
#pragma unroll
            for (int i = 0; i < ROWS; ++i) {
                if (i >= nr) continue;
                uint4 wa, wb;
                u16 dq = 0;
                qr_load<F>(q, h, r0 + i, u, K, wa, wb, dq);
                acc[i] = QLIN_INT ? qr_unit_int<F>(wa, wb, dq, u, lane, xs + (u / 32) * XI_CHUNK_F4, acc[i])
                                  : qr_unit<F>(wa, wb, dq, u, lane, xt, xsum, acc[i]);
            }
        }
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const int r = r0 + i;
            float v = warp_sum(acc[i]);
            if (bias && i < nr) v += bias[r];
            if (i < nr && lane == 0) store_out(y, 0, r, v);
        }
    }
}

// M > 1 with the one-token kernel's per-lane walk (QLIN_MT = 1; off by default until measured):
// a block takes QLIN_MT_TOKENS tokens and QLIN_M1_WARPS * QLIN_MT_ROWS rows, stages x of all its
// tokens one phase of QLIN_MT_PHASE elements at a time (the chunks swizzled and their unit sums
// made as in the one-token kernel), and each lane runs its units u = l + 32c in increasing c
// across the phases, loading a unit's weights once for every token. Per row and token the lanes,
// units and operations are linear_qr_m1_impl's, so rows are bit-identical to decode rows whatever
// M is. Dynamic shared memory: QLIN_MT_TOKENS * QLIN_MT_PHASE * (4 + 4/32) bytes (QLIN_INT = 1:
// QLIN_MT_TOKENS * 2 * 3,584). Grid:
// (ceil(R / (QLIN_M1_WARPS * QLIN_MT_ROWS)), ceil(M / QLIN_MT_TOKENS)); block: 32 * QLIN_M1_WARPS.
#ifndef QLIN_MT
#define QLIN_MT 0
#endif
#ifndef QLIN_MT_TOKENS
#define QLIN_MT_TOKENS 8
#endif
#ifndef QLIN_MT_ROWS
#define QLIN_MT_ROWS 2
#endif
#define QLIN_MT_PHASE 2048
template <int TOK, int ROWS, int F>
__device__ __forceinline__ void linear_qr_mt_impl(const float* __restrict__ x, const u8* __restrict__ q,
                                                  const u8* __restrict__ h, const float* __restrict__ bias, Outs y,
                                                  int M, int K, int R) {
    constexpr int NCH = QLIN_MT_PHASE / XCHUNK;       // chunks per phase
    constexpr int S4 = QLIN_MT_PHASE / 4;             // float4 slots per token and phase
    extern __shared__ float4 xs[];                    // [TOK][NCH][XCHUNK / 4], swizzled
    float* usum = reinterpret_cast<float*>(xs + TOK * S4);  // [TOK][QLIN_MT_PHASE / 32]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int r0 = (blockIdx.x * QLIN_M1_WARPS + warp) * ROWS;
    const int nr = max(0, min(ROWS, R - r0));
    const int m0 = blockIdx.y * TOK;
    const int mt = min(TOK, M - m0);
    const int nu = K / 32;
    float acc[ROWS][TOK];
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int t = 0; t < TOK; ++t) acc[i][t] = 0.0f;
    for (int p0 = 0; p0 < K; p0 += QLIN_MT_PHASE) {
        __syncthreads();  // the previous phase's reads are done
        for (int idx = threadIdx.x; idx < TOK * S4; idx += blockDim.x) {
            const int t = idx / S4, s = idx % S4;
            const int e = p0 + 4 * s;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (t < mt && e < K) v = __ldg(reinterpret_cast<const float4*>(x + (size_t)(m0 + t) * K + e));
            if (QLIN_INT) {
                stage_digits(v, s % (XCHUNK / 4), xs + (t * NCH + s / (XCHUNK / 4)) * XI_CHUNK_F4);
            } else {
                xs[t * S4 + (s / (XCHUNK / 4)) * (XCHUNK / 4) + xs_slot(s % (XCHUNK / 4))] = v;
                if (QLIN_FACTOR && F == FMT_Q4_K) {
                    const float p = unit_xsum(v);
                    if ((s & 7) == 0) usum[t * (QLIN_MT_PHASE / 32) + s / 8] = p;
                }
            }
        }
        __syncthreads();
        if (nr == 0) continue;
        // This phase's units of the lane: one per chunk; all their weights loaded first.
        uint4 wa[NCH][ROWS], wb[NCH][ROWS];
        u16 dq[NCH][ROWS];
#pragma unroll
        for (int c = 0; c < NCH; ++c) {
            const int u = p0 / 32 + c * 32 + lane;
#pragma unroll
            for (int i = 0; i < ROWS; ++i) {
                dq[c][i] = 0;
                if (i < nr && u < nu) qr_load<F>(q, h, r0 + i, u, K, wa[c][i], wb[c][i], dq[c][i]);
            }
        }
#pragma unroll
        for (int c = 0; c < NCH; ++c) {
            const int u = p0 / 32 + c * 32 + lane;
            if (u >= nu) continue;
#pragma unroll
            for (int i = 0; i < ROWS; ++i) {
                if (i >= nr) continue;
#pragma unroll
                for (int t = 0; t < TOK; ++t) {
                    if (t >= mt) continue;
                    const float xsum =
                        (!QLIN_INT && QLIN_FACTOR && F == FMT_Q4_K) ? usum[t * (QLIN_MT_PHASE / 32) + c * 32 + lane] : 0.0f;
                    acc[i][t] = QLIN_INT ? qr_unit_int<F>(wa[c][i], wb[c][i], dq[c][i], u, lane,
                                                          xs + (t * NCH + c) * XI_CHUNK_F4, acc[i][t])
                                         : qr_unit<F>(wa[c][i], wb[c][i], dq[c][i], u, lane,
                                                      xs + t * S4 + c * (XCHUNK / 4), xsum, acc[i][t]);
                }
            }
        }
    }
    if (nr == 0) return;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const int r = r0 + i;
#pragma unroll
        for (int t = 0; t < TOK; ++t) {
            float v = warp_sum(acc[i][t]);
            if (bias && i < nr) v += bias[r];
            if (i < nr && t < mt && lane == 0) store_out(y, m0 + t, r, v);
        }
    }
}

// Q8_0: q = [R][K] int8 (block b of row r at q + r*K + 32b); h = [R][K/32] f16 scales.
template <int TOK, int ROWS>
__device__ __forceinline__ void linear_q8_0_r_impl(const float* x, const u8* q, const u16* h, const float* bias,
                                                   Outs y, int M, int K, int R, int split_canary) {
    linear_qr_impl<TOK, ROWS, FMT_Q8_0>(x, q, reinterpret_cast<const u8*>(h), bias, y, M, K, R, split_canary);
}

// Q4_K: q = [R][K/32][16] bytes (sub-block u of the row: byte i holds value i in its low nibble,
// value i + 16 in its high one); h = [R][K/256][16] bytes (d, dmin as f16 bits, then the 12-byte
// scale/min table).
template <int TOK, int ROWS>
__device__ __forceinline__ void linear_q4_k_r_impl(const float* x, const u8* q, const u8* h, const float* bias,
                                                   Outs y, int M, int K, int R, int split_canary) {
    linear_qr_impl<TOK, ROWS, FMT_Q4_K>(x, q, h, bias, y, M, K, R, split_canary);
}

// The repacked kernels' token tile: LIN_TOKENS, at most 8 (8 tokens stage 33 KiB of x, under the
// 48 KiB of dynamic shared memory a launch gets without opting in).
#define QLIN_TOKENS (LIN_TOKENS < 8 ? LIN_TOKENS : 8)


// A one-token entry: WARPS warps per block, PREFETCH units of L2 prefetch. (Its 58 registers
// hold 16-warp blocks to two an SM; launch bounds asking for 40-48 resident warps made it 10-60%
// slower on the H200, run 112.)
#define LINEAR_R_M1(fname, T, F, WARPS, PREFETCH)                                                   \
    extern "C" __global__ void __launch_bounds__(32 * (WARPS))                                      \
        fname(const float* x, const u8* q, const T* h, const float* bias, LIN_OUT_PARAMS,          \
              int split_canary) {                                                                  \
        if (PDL_EARLY) qr_m1_prefetch<LIN_ROWS_M1, F, (WARPS), (PREFETCH)>(q, K, R);               \
        pdl_entry();                                                                               \
        linear_qr_m1_impl<LIN_ROWS_M1, F, (WARPS), (PREFETCH)>(x, q, reinterpret_cast<const u8*>(h), \
                                                               bias, LIN_OUTS, K, R);              \
    }

#define LINEAR_R(name, T, F)                                                                        \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                    \
        name(const float* x, const u8* q, const T* h, const float* bias, LIN_OUT_PARAMS,           \
             int split_canary) { pdl_entry();                                                      \
        name##_impl<QLIN_TOKENS, LIN_ROWS>(x, q, h, bias, LIN_OUTS, M, K, R, split_canary);        \
    }                                                                                               \
    LINEAR_R_M1(name##_m1, T, F, QLIN_M1_WARPS, QLIN_M1_PREFETCH)                                  \
    LINEAR_R_M1(name##_m1w, T, F, QLIN_M1_WARPS_BIGK, QLIN_M1_PREFETCH_BIGK)                       \
    extern "C" __global__ void __launch_bounds__(32 * QLIN_M1_WARPS)                                \
        name##_mt(const float* x, const u8* q, const T* h, const float* bias, LIN_OUT_PARAMS,      \
                  int split_canary) { pdl_entry();                                                 \
        linear_qr_mt_impl<QLIN_MT_TOKENS, QLIN_MT_ROWS, F>(x, q, reinterpret_cast<const u8*>(h),   \
                                                           bias, LIN_OUTS, M, K, R);               \
    }

LINEAR_R(linear_q8_0_r, u16, FMT_Q8_0)
LINEAR_R(linear_q4_k_r, u8, FMT_Q4_K)
