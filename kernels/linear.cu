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
__device__ __forceinline__ void linear_units(const float* x, const float* bias, float* y, int M, int K, int R,
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
                            s += wv[4 * q] * a.x;
                            s += wv[4 * q + 1] * a.y;
                            s += wv[4 * q + 2] * a.z;
                            s += wv[4 * q + 3] * a.w;
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
            if (i < nr && t < mt && lane == 0) y[(size_t)(m0 + t) * R + r] = v;
        }
    }
}

template <int TOK, int ROWS, int F>
__device__ __forceinline__ void linear_impl(const float* x, const u8* w, const float* bias, float* y, int M, int K,
                                            int R, long long row_bytes, int split_canary) {
    linear_units<TOK, ROWS>(x, bias, y, M, K, R, split_canary,
                 [&](int r, int u, float* wv) { dequant32<F>(w + (size_t)r * row_bytes, u, wv); });
}

// 16-bit floats (F16, BF16): lane l owns k = 256 c + 8 l + j (c = 0, 1, ...; j = 0..7), so each
// warp load is 512 contiguous bytes of the row, 16 per lane; accumulated in increasing c and j,
// then warp_sum, then the bias. Needs K % 8 == 0 and 16-byte aligned rows (K even suffices for
// 2-byte elements when K % 8 == 0). Same grid as linear_impl.
template <int TOK, int ROWS, int F>
__device__ __forceinline__ void linear_half_impl(const float* x, const u8* w, const float* bias, float* y, int M,
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
            if (i < nr && t < mt && lane == 0) y[(size_t)(m0 + t) * R + r] = v;
        }
    }
}

#define LINEAR_HALF(name, F)                                                                         \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                     \
        name(const float* x, const u8* w, const float* bias, float* y, int M, int K, int R,          \
             long long row_bytes, int split_canary) {                                               \
        linear_half_impl<LIN_TOKENS, LIN_ROWS, F>(x, w, bias, y, M, K, R, split_canary);                       \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                     \
        name##_m1(const float* x, const u8* w, const float* bias, float* y, int M, int K, int R,     \
                  long long row_bytes, int split_canary) {                                          \
        linear_half_impl<1, LIN_ROWS_M1, F>(x, w, bias, y, M, K, R, split_canary);                                \
    }

#define LINEAR(name, F)                                                                              \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                     \
        name(const float* x, const u8* w, const float* bias, float* y, int M, int K, int R,          \
             long long row_bytes, int split_canary) {                                               \
        linear_impl<LIN_TOKENS, LIN_ROWS, F>(x, w, bias, y, M, K, R, row_bytes, split_canary);                 \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                     \
        name##_m1(const float* x, const u8* w, const float* bias, float* y, int M, int K, int R,     \
                  long long row_bytes, int split_canary) {                                          \
        linear_impl<1, LIN_ROWS_M1, F>(x, w, bias, y, M, K, R, row_bytes, split_canary);                          \
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
// the decoder layers are split at upload into an aligned array of quants and an array of block
// headers. The values, the lane ownership (lane l owns 32-element units u = l, l + 32, ...) and
// every arithmetic step are those of `linear_impl` above, so results are bit-identical to the raw
// layout; only the loads differ (16-byte vector loads).

// Integer-to-float conversions by the 2^23 trick (one byte permute or OR, one add: full-rate ALU
// instead of the quarter-rate I2F); exact, so the values are those of a (float) cast.
// Byte `i` of `w` as a signed int8, as f32.
__device__ __forceinline__ float i8_to_f32_exact(u32 w, int i) {
    // 0x4B0000uu with uu = the byte + 128 (flip its sign bit): the float 2^23 + byte + 128.
    const u32 bits = __byte_perm(w ^ 0x80808080u, 0x4B000000u, (u32)i | 0x7440u);
    return __fsub_rn(__uint_as_float(bits), 8388736.0f);
}

// `v` < 2^23 as f32.
__device__ __forceinline__ float u_to_f32_exact(u32 v) {
    return __fsub_rn(__uint_as_float(0x4B000000u | v), 8388608.0f);
}

// Q8_0: q = [R][K] int8 (block b of row r at q + r*K + 32b); d = [R][K/32] f16 bits.
template <int TOK, int ROWS>
__device__ __forceinline__ void linear_q8_0_r_impl(const float* x, const u8* q, const u16* dsc, const float* bias,
                                                   float* y, int M, int K, int R, int split_canary) {
    linear_units<TOK, ROWS>(x, bias, y, M, K, R, split_canary, [&](int r, int u, float* wv) {
        const u8* p = q + (size_t)r * K + 32 * u;
        const uint4 a0 = *reinterpret_cast<const uint4*>(p);
        const uint4 a1 = *reinterpret_cast<const uint4*>(p + 16);
        const float d = f16_bits_to_f32(dsc[(size_t)r * (K / 32) + u]);
        const u32 words[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
        for (int i = 0; i < 32; ++i) wv[i] = __fmul_rn(i8_to_f32_exact(words[i >> 2], i & 3), d);
    });
}

// Q4_K: q = [R][K/256][128] bytes (each super-block's qs); h = [R][K/256][16] bytes (d, dmin as
// f16 bits, then the 12-byte scale/min table).
template <int TOK, int ROWS>
__device__ __forceinline__ void linear_q4_k_r_impl(const float* x, const u8* q, const u8* h, const float* bias,
                                                   float* y, int M, int K, int R, int split_canary) {
    const int nsb = K / 256;
    linear_units<TOK, ROWS>(x, bias, y, M, K, R, split_canary, [&](int r, int u, float* wv) {
        const int sb = u >> 3, j = u & 7;
        const uint4 hv = *reinterpret_cast<const uint4*>(h + ((size_t)r * nsb + sb) * 16);
        const float d = f16_bits_to_f32((u16)(hv.x & 0xffffu));
        const float dmin = f16_bits_to_f32((u16)(hv.x >> 16));
        // Byte i of the 12-byte scale/min table (header bytes 4..16), from registers.
        auto s8 = [&](int i) -> int {
            const u32 w = i < 4 ? hv.y : (i < 8 ? hv.z : hv.w);
            return (int)((w >> (8 * (i & 3))) & 0xff);
        };
        int sc, mn;
        if (j < 4) {
            sc = s8(j) & 0x3F;
            mn = s8(j + 4) & 0x3F;
        } else {
            sc = (s8(j + 4) & 0x0F) | ((s8(j - 4) >> 2) & 0x30);
            mn = (s8(j + 4) >> 4) | ((s8(j) >> 2) & 0x30);
        }
        const float dl = __fmul_rn(d, (float)sc);
        const float ml = __fmul_rn(dmin, (float)mn);
        const u8* qs = q + ((size_t)r * nsb + sb) * 128 + 32 * (j >> 1);
        const uint4 a0 = *reinterpret_cast<const uint4*>(qs);
        const uint4 a1 = *reinterpret_cast<const uint4*>(qs + 16);
        const u32 words[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const int shift = 4 * (j & 1);
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const u32 v = (words[i >> 2] >> (8 * (i & 3) + shift)) & 0x0fu;
            wv[i] = __fsub_rn(__fmul_rn(dl, u_to_f32_exact(v)), ml);
        }
    });
}

#define LINEAR_R(name, T)                                                                            \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                     \
        name(const float* x, const u8* q, const T* h, const float* bias, float* y, int M, int K, int R, \
             int split_canary) {                                                                    \
        name##_impl<LIN_TOKENS, LIN_ROWS>(x, q, h, bias, y, M, K, R, split_canary);                            \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)                                     \
        name##_m1(const float* x, const u8* q, const T* h, const float* bias, float* y, int M, int K,  \
                  int R, int split_canary) {                                                        \
        name##_impl<1, LIN_ROWS_M1>(x, q, h, bias, y, M, K, R, split_canary);                                     \
    }

LINEAR_R(linear_q8_0_r, u16)
LINEAR_R(linear_q4_k_r, u8)
