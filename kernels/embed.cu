// Embedding gather: out[t, :] = table[ids[t], :] as f32. Pure copies and one exact multiply per
// element (Q8_0), so results are bit-identical to the CPU dequantization.
#include "common.cuh"

// table: [vocab, n] f32; ids: [tokens]; out: [tokens, n] f32. Grid: (tokens, ceil(n / blockDim)).
extern "C" __global__ void embed_f32(const float* table, const u32* ids, float* out, int n) {
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[(size_t)blockIdx.x * n + i] = table[(size_t)ids[blockIdx.x] * n + i];
}

// table: [vocab, n] f16 bits. Same grid as embed_f32.
extern "C" __global__ void embed_f16(const u16* table, const u32* ids, float* out, int n) {
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[(size_t)blockIdx.x * n + i] = f16_bits_to_f32(table[(size_t)ids[blockIdx.x] * n + i]);
}

// table: [vocab, n] bf16 bits. Same grid as embed_f32.
extern "C" __global__ void embed_bf16(const u16* table, const u32* ids, float* out, int n) {
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[(size_t)blockIdx.x * n + i] = bf16_bits_to_f32(table[(size_t)ids[blockIdx.x] * n + i]);
}

// table: [vocab, n / 32] Q8_0 blocks (34 bytes each, rows packed back to back); n % 32 == 0.
// value = (float)q * d, the CPU's operation order. Same grid as embed_f32.
extern "C" __global__ void embed_q8_0(const u8* table, const u32* ids, float* out, int n) {
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const size_t row_bytes = (size_t)(n / Q8_0_BLOCK_ELEMS) * Q8_0_BLOCK_BYTES;
    const u8* blk = table + (size_t)ids[blockIdx.x] * row_bytes + (size_t)(i / Q8_0_BLOCK_ELEMS) * Q8_0_BLOCK_BYTES;
    const float d = f16_bits_to_f32(load_u16_unaligned(blk));
    const float q = (float)(i8)blk[2 + (i % Q8_0_BLOCK_ELEMS)];
    out[(size_t)blockIdx.x * n + i] = q * d;
}
