// The paged KV cache: appending K/V rows, copying blocks, and attention over it for prefill,
// decode and speculative verify alike (every query row is treated the same way).
//
// Cache layout, per layer: [num_blocks * block_size slots, n_kv_heads, head_dim] f32; position p
// of a sequence lives in slot table[p / block_size] * block_size + p % block_size.
//
// Reduction order (docs/DESIGN.md §3): a query row at position `pos` walks its keys in fixed
// splits of ATTN_SPLIT positions aligned to multiples of ATTN_SPLIT (split s covers positions
// s*ATTN_SPLIT ..), in increasing s. Within a split: scores by a sequential dot over head_dim,
// the split's max (exact in any order), exp, the split's sum by block_sum's fixed tree, and the
// weighted V sum sequential in position. Splits are merged in increasing s with the usual
// online-softmax rescaling (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022). Nothing
// depends on how many query rows the pass holds or who else is in it.
#include "common.cuh"

#ifndef ATTN_SPLIT
#define ATTN_SPLIT 256
#endif

// kc/vc[slots[t] * width + i] = k/v[t * width + i]. k, v: [tokens, width] f32 (width =
// n_kv_heads * head_dim). Grid: (tokens, ceil(width / blockDim)).
extern "C" __global__ void kv_append_f32(const float* k, const float* v, float* kc, float* vc, const u32* slots,
                                         int width) {
    const int i = blockIdx.y * blockDim.x + threadIdx.x;
    if (i >= width) return;
    const size_t dst = (size_t)slots[blockIdx.x] * width + i;
    kc[dst] = k[(size_t)blockIdx.x * width + i];
    vc[dst] = v[(size_t)blockIdx.x * width + i];
}

// Copies `n` floats of block `src` to block `dst` of a cache laid out in blocks of `n` floats.
// Grid: (ceil(n / blockDim)).
extern "C" __global__ void kv_copy_block_f32(float* c, int src, int dst, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[(size_t)dst * n + i] = c[(size_t)src * n + i];
}

// out[t, h, :] = softmax(q[t, h, :] . K^T * scale) V over the keys of row t: positions
// lo ..= row_pos[t], lo = max(0, pos + 1 - window) when window > 0 (sliding window), else 0.
// q, out: [rows, nh, hd] f32; kc, vc: one layer's cache; row_tab[t]: offset of row t's block
// table in `tables`. Grouped-query attention: head h reads KV head h / (nh / nkv).
// hd <= ATTN_SPLIT. Grid: (rows, nh); block: (ATTN_SPLIT).
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT)
attn_paged_f32(const float* q, const float* kc, const float* vc, float* out, const u32* row_pos,
               const u32* row_tab, const u32* tables, int nh, int nkv, int hd, int bs, int window,
               float scale) {
    __shared__ float qs[ATTN_SPLIT];
    __shared__ float es[ATTN_SPLIT];
    __shared__ float scratch[ATTN_SPLIT / 32];
    const int row = blockIdx.x, head = blockIdx.y, tid = threadIdx.x;
    const int kvh = head / (nh / nkv);
    const int pos = (int)row_pos[row];
    const u32* tab = tables + row_tab[row];
    const int lo = window > 0 ? max(0, pos + 1 - window) : 0;
    const float* qrow = q + ((size_t)row * nh + head) * hd;
    if (tid < hd) qs[tid] = qrow[tid];
    __syncthreads();
    float run_m = NEG_INF, run_l = 0.0f, run_a = 0.0f;
    bool first = true;
    for (int s = lo / ATTN_SPLIT; s <= pos / ATTN_SPLIT; ++s) {
        const int p = s * ATTN_SPLIT + tid;
        const bool valid = p >= lo && p <= pos;
        float score = NEG_INF;
        if (valid) {
            const size_t slot = (size_t)tab[p / bs] * bs + p % bs;
            const float* kp = kc + (slot * nkv + kvh) * hd;
            float acc = 0.0f;
            for (int d = 0; d < hd; ++d) acc += qs[d] * kp[d];
            score = acc * scale;
        }
        const float m = block_max<ATTN_SPLIT>(score, scratch);
        const float e = valid ? expf(score - m) : 0.0f;
        es[tid] = e;
        const float l = block_sum<ATTN_SPLIT>(e, scratch);  // its barriers publish es[]
        if (tid < hd) {
            const int j0 = max(lo - s * ATTN_SPLIT, 0);
            const int j1 = min(pos - s * ATTN_SPLIT, ATTN_SPLIT - 1);
            float a = 0.0f;
            for (int j = j0; j <= j1; ++j) {
                const int pp = s * ATTN_SPLIT + j;
                const size_t slot = (size_t)tab[pp / bs] * bs + pp % bs;
                a += es[j] * vc[(slot * nkv + kvh) * hd + tid];
            }
            if (first) {
                run_m = m;
                run_l = l;
                run_a = a;
            } else {
                const float mn = fmaxf(run_m, m);
                const float alpha = expf(run_m - mn), beta = expf(m - mn);
                run_l = run_l * alpha + l * beta;
                run_a = run_a * alpha + a * beta;
                run_m = mn;
            }
        }
        first = false;
        __syncthreads();
    }
    if (tid < hd) out[((size_t)row * nh + head) * hd + tid] = run_a / run_l;
}
