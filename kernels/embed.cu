// Embedding gather: out[t, :] = table[ids[t], :] * scale, dequantized with common.cuh's
// `dequant32` (bit-identical to the CPU's dequantization), and row gathers of activations.
// No reductions.
#include "common.cuh"

// table: [vocab] rows of `row_bytes` bytes in format F; ids: [tokens]; out: [tokens, n] f32;
// n % 32 == 0. When `apply_scale` != 0 every value is multiplied by `scale` (Gemma's
// sqrt(hidden)), as the CPU does after dequantizing. One thread per 32-element unit.
// Grid: (tokens, ceil(n / 32 / blockDim)).
template <int F>
__device__ __forceinline__ void embed_impl(const u8* table, const u32* ids, float* out, int n, long long row_bytes,
                                           float scale, int apply_scale) {
    const int u = blockIdx.y * blockDim.x + threadIdx.x;
    if (u >= n / 32) return;
    float v[32];
    dequant32<F>(table + (size_t)ids[blockIdx.x] * row_bytes, u, v);
    float* o = out + (size_t)blockIdx.x * n + 32 * u;
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] = apply_scale ? __fmul_rn(v[i], scale) : v[i];
}

#define EMBED(name, F)                                                                                \
    extern "C" __global__ void name(const u8* table, const u32* ids, float* out, int n, long long row_bytes, \
                                    float scale, int apply_scale) { pdl_entry();                      \
        embed_impl<F>(table, ids, out, n, row_bytes, scale, apply_scale);                             \
    }

EMBED(embed_f32, FMT_F32)
EMBED(embed_f16, FMT_F16)
EMBED(embed_bf16, FMT_BF16)
EMBED(embed_q4_0, FMT_Q4_0)
EMBED(embed_q4_1, FMT_Q4_1)
EMBED(embed_q5_0, FMT_Q5_0)
EMBED(embed_q8_0, FMT_Q8_0)
EMBED(embed_q4_k, FMT_Q4_K)
EMBED(embed_q5_k, FMT_Q5_K)
EMBED(embed_q6_k, FMT_Q6_K)

// out[i, :] = x[rows[i], :]. x: [*, n] f32; rows: [count]; out: [count, n].
// Grid: (count, ceil(n / blockDim)).
extern "C" __global__ void gather_rows_f32(const float* x, const u32* rows, float* out, int n) {
    pdl_entry();
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[(size_t)blockIdx.x * n + i] = x[(size_t)rows[blockIdx.x] * n + i];
}
