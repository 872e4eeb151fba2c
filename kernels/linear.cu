// Linear layers y = x W^T with the weights dequantized inside the kernel. Correctness first: one
// warp per output feature, a tile of LIN_TOKENS tokens per warp so each weight load serves several
// tokens.
//
// Reduction order of y[t, r] (the exactness contract, docs/DESIGN.md §3): lane l owns a fixed set
// of k (below, per format) and accumulates it in increasing k into one f32; then warp_sum's xor
// tree. Neither step looks at the number of tokens M or at the token's place in its tile, so a
// row's result is bit-identical for every M. No split-K.
#include "common.cuh"

#ifndef LIN_WARPS
#define LIN_WARPS 4
#endif
#ifndef LIN_TOKENS
#define LIN_TOKENS 8
#endif

// x: [M, K] f32; w: [R, K] bf16 bits, row-major; y: [M, R] f32. K % 8 == 0.
// Lane l owns k in chunks of 8: k = 256 c + 8 l + j (c = 0, 1, ...; j = 0..7).
// Grid: (ceil(R / LIN_WARPS), ceil(M / LIN_TOKENS)); block: (32 * LIN_WARPS).
extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)
linear_bf16(const float* x, const u16* w, float* y, int M, int K, int R) {
    const int lane = threadIdx.x & 31;
    const int r = blockIdx.x * LIN_WARPS + (threadIdx.x >> 5);
    if (r >= R) return;
    const int m0 = blockIdx.y * LIN_TOKENS;
    const int mt = min(LIN_TOKENS, M - m0);
    const u16* wr = w + (size_t)r * K;
    float acc[LIN_TOKENS];
#pragma unroll
    for (int t = 0; t < LIN_TOKENS; ++t) acc[t] = 0.0f;
    for (int k = lane * 8; k < K; k += 256) {
        const uint4 raw = *reinterpret_cast<const uint4*>(wr + k);
        float wv[8];
        const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            wv[2 * j] = __uint_as_float(words[j] << 16);
            wv[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
        }
#pragma unroll
        for (int t = 0; t < LIN_TOKENS; ++t) {
            if (t < mt) {
                const float* xr = x + (size_t)(m0 + t) * K + k;
                const float4 a = *reinterpret_cast<const float4*>(xr);
                const float4 b = *reinterpret_cast<const float4*>(xr + 4);
                float s = acc[t];
                s += wv[0] * a.x;
                s += wv[1] * a.y;
                s += wv[2] * a.z;
                s += wv[3] * a.w;
                s += wv[4] * b.x;
                s += wv[5] * b.y;
                s += wv[6] * b.z;
                s += wv[7] * b.w;
                acc[t] = s;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < LIN_TOKENS; ++t) {
        const float v = warp_sum(acc[t]);
        if (t < mt && lane == 0) y[(size_t)(m0 + t) * R + r] = v;
    }
}

// x: [M, K] f32; w: [R, K / 32] Q8_0 blocks (34 bytes, rows packed back to back); y: [M, R] f32.
// K % 32 == 0. Lane l owns whole blocks b = l, l + 32, ...; inside a block, k in increasing order,
// each weight dequantized as (float)q * d like the CPU.
// Grid: (ceil(R / LIN_WARPS), ceil(M / LIN_TOKENS)); block: (32 * LIN_WARPS).
extern "C" __global__ void __launch_bounds__(32 * LIN_WARPS)
linear_q8_0(const float* x, const u8* w, float* y, int M, int K, int R) {
    const int lane = threadIdx.x & 31;
    const int r = blockIdx.x * LIN_WARPS + (threadIdx.x >> 5);
    if (r >= R) return;
    const int m0 = blockIdx.y * LIN_TOKENS;
    const int mt = min(LIN_TOKENS, M - m0);
    const int nb = K / Q8_0_BLOCK_ELEMS;
    const u8* wr = w + (size_t)r * nb * Q8_0_BLOCK_BYTES;
    float acc[LIN_TOKENS];
#pragma unroll
    for (int t = 0; t < LIN_TOKENS; ++t) acc[t] = 0.0f;
    for (int b = lane; b < nb; b += 32) {
        const u8* blk = wr + (size_t)b * Q8_0_BLOCK_BYTES;
        const float d = f16_bits_to_f32(load_u16_unaligned(blk));
        float wv[Q8_0_BLOCK_ELEMS];
#pragma unroll
        for (int j = 0; j < Q8_0_BLOCK_ELEMS; ++j) wv[j] = (float)(i8)blk[2 + j] * d;
#pragma unroll
        for (int t = 0; t < LIN_TOKENS; ++t) {
            if (t < mt) {
                const float4* xr = reinterpret_cast<const float4*>(x + (size_t)(m0 + t) * K + b * Q8_0_BLOCK_ELEMS);
                float s = acc[t];
#pragma unroll
                for (int q = 0; q < Q8_0_BLOCK_ELEMS / 4; ++q) {
                    const float4 a = xr[q];
                    s += wv[4 * q] * a.x;
                    s += wv[4 * q + 1] * a.y;
                    s += wv[4 * q + 2] * a.z;
                    s += wv[4 * q + 3] * a.w;
                }
                acc[t] = s;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < LIN_TOKENS; ++t) {
        const float v = warp_sum(acc[t]);
        if (t < mt && lane == 0) y[(size_t)(m0 + t) * R + r] = v;
    }
}
