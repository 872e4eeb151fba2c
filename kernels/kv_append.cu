// Writing the paged KV cache (its layout: kernels/attention.cu; its value type kv_t:
// common.cuh): appending K/V rows, alone, after RoPE, or from the split-K reduce of a Q|K|V
// matrix, and copying blocks for copy-on-write.
#include "common.cuh"

// kc/vc[slots[t] * width + i] = k/v[t * width + i]. k, v: [tokens, width] f32 (width =
// n_kv_heads * head_dim). Grid: (tokens, ceil(width / blockDim)).
extern "C" __global__ void kv_append_f32(const float* k, const float* v, kv_t* kc, kv_t* vc, const u32* slots,
                                         int width) {
    pdl_entry();
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= width) return;
    const size_t dst = (size_t)slots[blockIdx.x] * width + i;
    kc[dst] = to_kv(k[(size_t)blockIdx.x * width + i]);
    vc[dst] = to_kv(v[(size_t)blockIdx.x * width + i]);
}

// rope_f32 on q and k, then kv_append_f32 of the rotated k and of v, in one launch (the same
// operations, so the same bits). q: [tokens, nh, hd], k, v: [tokens, nkv, hd] f32 (q and k rotated
// in place); kc/vc: one layer's cache; pos, slots: [tokens]; inv_freq: [hd / 2]. Grid: (tokens,
// nh + nkv): block y < nh rotates q head y, the others rotate K head y - nh and append it and its
// V head. Block: (hd / 2).
extern "C" __global__ void rope_qk_append_f32(float* q, float* k, const float* v, kv_t* kc, kv_t* vc,
                                              const u32* pos, const u32* slots, const float* inv_freq, int nh,
                                              int nkv, int hd, int interleaved) {
    pdl_entry();
    const int i = threadIdx.x, half = hd / 2;
    if (i >= half) return;
    const size_t t = blockIdx.x;
    const int y = blockIdx.y;
    int a, b;
    if (y < nh) {
        rope_pair(q + (t * nh + y) * hd, pos[t], inv_freq, i, half, interleaved, a, b);
        return;
    }
    const int kvh = y - nh;
    float* kr = k + (t * nkv + kvh) * hd;
    rope_pair(kr, pos[t], inv_freq, i, half, interleaved, a, b);
    const float* vr = v + (t * nkv + kvh) * hd;
    const size_t dst = ((size_t)slots[t] * nkv + kvh) * hd;
    kc[dst + a] = to_kv(kr[a]);
    kc[dst + b] = to_kv(kr[b]);
    vc[dst + a] = to_kv(vr[a]);
    vc[dst + b] = to_kv(vr[b]);
}

// The split-K reduce of a Q|K|V matrix (R = (nh + 2 nkv) hd rows: q rows, then k, then v) with
// rope_qk_append_f32 on top (TCS_ROPE = 1, host side): thread i of block (t, y) sums the rows of
// its rotation pair (and, for a K head, the V rows at the same indices) exactly as
// linear_tcs_reduce (`slice_sum`, then the bias), rotates by `rope_rotate` as rope_pair does,
// and stores q, k and v (rotated q and k, as the unfused path leaves them) and the cache slots.
// So the same bits as the reduce then rope_qk_append_f32, with one launch and the q/k/v
// round trip less. part: [slices][M][R] f32; bias: [R] or null; q: [M, nh, hd], k, v: [M, nkv,
// hd] f32. Grid: (M, nh + nkv); block: (hd / 2).
extern "C" __global__ void linear_tcs_reduce_rope_append(const float* part, const float* bias, float* q, float* k,
                                                         float* v, kv_t* kc, kv_t* vc, const u32* pos,
                                                         const u32* slots, const float* inv_freq, int M, int nh,
                                                         int nkv, int hd, int interleaved, int slices) {
    pdl_entry();
    const int i = threadIdx.x, half = hd / 2;
    if (i >= half) return;
    const size_t t = blockIdx.x;
    const int y = blockIdx.y;
    const int R = (nh + 2 * nkv) * hd;
    const size_t mr = (size_t)M * R, base = t * R;
    int a, b;
    rope_index(i, half, interleaved, a, b);
    // Row r of the matrix for token t: the slice sums, then the bias.
    auto row = [&](int r) {
        float s = slice_sum<float>(part, mr, base + r, slices);
        return bias ? __fadd_rn(s, bias[r]) : s;
    };
    const int r0 = y < nh ? y * hd : (nh + (y - nh)) * hd;
    float x0 = row(r0 + a), x1 = row(r0 + b);
    rope_rotate(x0, x1, pos[t], inv_freq, i);
    if (y < nh) {
        float* qr = q + (t * nh + y) * hd;
        qr[a] = x0;
        qr[b] = x1;
        return;
    }
    const int kvh = y - nh;
    const int rv = (nh + nkv + kvh) * hd;
    const float v0 = row(rv + a), v1 = row(rv + b);
    float* kr = k + (t * nkv + kvh) * hd;
    float* vr = v + (t * nkv + kvh) * hd;
    kr[a] = x0;
    kr[b] = x1;
    vr[a] = v0;
    vr[b] = v1;
    const size_t dst = ((size_t)slots[t] * nkv + kvh) * hd;
    kc[dst + a] = to_kv(x0);
    kc[dst + b] = to_kv(x1);
    vc[dst + a] = to_kv(v0);
    vc[dst + b] = to_kv(v1);
}

// Copies `n` values of block `src` to block `dst` of a cache laid out in blocks of `n` values.
// Grid: (ceil(n / blockDim)).
extern "C" __global__ void kv_copy_block_f32(kv_t* c, int src, int dst, int n) {
    pdl_entry();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[(size_t)dst * n + i] = c[(size_t)src * n + i];
}
