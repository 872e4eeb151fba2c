// Rotary position embedding (RoFormer), in place, one thread per rotated pair. The angle is
// pos * inv_freq[i] with inv_freq computed on the host exactly as the CPU reference does, so the
// only difference from the CPU is sincosf's rounding. Element-wise: no reduction at all.
#include "common.cuh"

// x: [tokens, heads, head_dim] f32, rotated in place; pos: [tokens] positions; inv_freq:
// [head_dim / 2]. interleaved = 0: NEOX pairs (i, i + head_dim/2); 1: adjacent pairs (2i, 2i+1),
// llama.cpp's layout for permuted GGUF Q/K. Grid: (tokens, heads); block: (head_dim / 2).
extern "C" __global__ void rope_f32(float* x, const u32* pos, const float* inv_freq, int heads, int head_dim, int interleaved) {
    pdl_entry();
    const int i = threadIdx.x;
    const int half = head_dim / 2;
    if (i >= half) return;
    float* v = x + ((size_t)blockIdx.x * heads + blockIdx.y) * head_dim;
    int a, b;
    rope_pair(v, pos[blockIdx.x], inv_freq, i, half, interleaved, a, b);
}
