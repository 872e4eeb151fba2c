// Gated activations of the MLP: out = act(gate) * up, element-wise (no reduction).
#include "common.cuh"

// SwiGLU: silu(g) * u with silu(g) = g / (1 + exp(-g)). gate, up, out: [len] f32 (out may alias
// gate). Grid: (ceil(len / blockDim)).
extern "C" __global__ void swiglu_f32(const float* gate, const float* up, float* out, int len) {
    pdl_entry();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= len) return;
    out[i] = swiglu1(gate[i], up[i]);
}

// GeGLU with tanh-approximated GELU (Gemma): 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u.
// Same shapes and grid as swiglu_f32.
extern "C" __global__ void gelu_tanh_gated_f32(const float* gate, const float* up, float* out, int len) {
    pdl_entry();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= len) return;
    const float g = gate[i];
    const float c = 0.7978846f;
    out[i] = 0.5f * g * (1.0f + tanhf(c * (g + 0.044715f * g * g * g))) * up[i];
}

// Final-logit soft-capping (Gemma 2): x = tanh(x / cap) * cap, in place. x: [len] f32.
// Grid: (ceil(len / blockDim)).
extern "C" __global__ void softcap_f32(float* x, int len, float cap) {
    pdl_entry();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len) x[i] = tanhf(x[i] / cap) * cap;
}
