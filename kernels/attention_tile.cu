// The tiled prefill attention entry, attn_tile_f32: the rows path (attention.cu's attn_rows_f32,
// ATTN_ROWS > 0) takes it with ATTN_TILE = 1. It computes what attn_paged_f32 (attention.cu)
// computes, term for term, so the reduction order and cache layout described there hold here; it
// shares attn_merge and the cache's kv_t with it through common.cuh. Compiled whenever ATTN_SPLIT
// is 256 (the module is loaded only when the host takes the entry).
#include "common.cuh"

#ifndef ATTN_SPLIT
#define ATTN_SPLIT 256
#endif
#ifndef ATTN_ROWS_HEADS
#define ATTN_ROWS_HEADS 4
#endif

// ATTN_TILE = 1 (with ATTN_ROWS > 0, ATTN_SPLIT 256, head_dim 128 and not ATTN_KV16W's 8-element
// key chunks; the host takes attn_rows_f32 otherwise): the rows path runs attn_tile_f32, ATTN_TILE_ROWS query rows of
// ATTN_ROWS_HEADS heads a block (NS slots, default 16 x 4), each split's keys and values staged in
// shared memory in chunks and every thread computing a tile of scores (4 positions x NS / 16
// slots) and of weighted V sums (2 float4 columns x NS / 16 slots) from shared memory, instead of
// a lane quad a position loading its key from L2 for 8 slots. Each value's operations are
// attn_split_partial's, in its order: a score's 4 partial chains (float4 columns c = r, r + 4, ...,
// each from 0.0f) added as (p0 + p1) + (p2 + p3) (the 4-lane xor tree), times scale or -inf; the
// split's max; exp; the split's sum by warp_sum over each 32 positions and warp_sum over those 8
// (block_sum's tree); a[d] as 8 position-group chains (group g: positions g, g + 8, ... of the
// row's keys, increasing, from 0.0f; other positions skipped, not zero-weighted) added in
// increasing g from 0.0f; splits merged by attn_merge. So the bits are attn_paged_f32's, which the
// self-check compares (run 129, H100: PASS with 16, 8 and 4 rows a block).
#ifndef ATTN_TILE_ROWS
#define ATTN_TILE_ROWS 16
#endif
// Blocks of attn_tile_f32 an SM (1 or 2; __launch_bounds__' minimum). With 2 the compiler keeps
// to 128 registers a thread: 8 rows of 4 heads (32 slots) fit there without spilling (130 at 1),
// so two blocks' 16 warps share an SM's issue slots where one block's 8 wait on shared memory
// (run 134: 4.92 cycles an issued instruction, short scoreboard first). Same operations, so the
// same bits.
#ifndef ATTN_TILE_MINB
#define ATTN_TILE_MINB 1
#endif
#if ATTN_SPLIT == 256
#define AT_HD 128              // head_dim
#define AT_KC 64               // positions a K chunk
#define AT_ST (AT_HD + 4)      // a q or staged K/V row's stride (floats): 16 rows' float4 loads in 2 wavefronts
#define AT_SS 260              // a slot's score row stride (floats): two slots' rows in other banks
// Dynamic shared memory of attn_tile_f32 (bytes; host: attn_tile_smem_bytes) for NS slots and TR
// rows: q [NS][132], the K/V stage [64][132], scores [NS][260], the split's slots [256], split and
// running (m, l) [NS][2] each, and the rows' first and last key positions [TR][2].
extern "C" __global__ void __launch_bounds__(256, ATTN_TILE_MINB)
attn_tile_f32(const float* q, const kv_t* kc, const kv_t* vc, float* out, const u32* row_pos,
              const u32* row_tab, const u32* tables, int nh, int nkv, int hd, int bs, int window,
              float scale, int rows) {
    pdl_entry();
    constexpr int GT = ATTN_ROWS_HEADS, TR = ATTN_TILE_ROWS, NS = GT * TR, SPT = NS / 16;
    static_assert(NS % 16 == 0 && SPT <= 4, "ATTN_TILE_ROWS x ATTN_ROWS_HEADS must be 16, 32, 48 or 64");
    extern __shared__ __align__(16) unsigned char attn_smem[];
    float* qs = reinterpret_cast<float*>(attn_smem);
    float* st = qs + NS * AT_ST;
    float* sc = st + AT_KC * AT_ST;
    u32* slot = reinterpret_cast<u32*>(sc + NS * AT_SS);
    float* sml = reinterpret_cast<float*>(slot + 256);
    float* run = sml + 2 * NS;
    int* rlp = reinterpret_cast<int*>(run + 2 * NS);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int r0 = (gridDim.x - 1 - blockIdx.x) * TR;  // the last rows (most splits) first
    const int G = nh / nkv, nb = (G + GT - 1) / GT;
    const int kvh = blockIdx.y / nb, b = blockIdx.y % nb;
    const int h0 = kvh * G + b * GT, nact = min(GT, G - b * GT);
    (void)hd;
    int lo_min = 0x7fffffff, pos_max = 0;
    for (int r = 0; r < TR; ++r) {
        const int p = (int)row_pos[min(r0 + r, rows - 1)];
        const int l = window > 0 ? max(0, p + 1 - window) : 0;
        lo_min = min(lo_min, l), pos_max = max(pos_max, p);
        if (tid == 0) rlp[2 * r] = l, rlp[2 * r + 1] = p;
    }
    for (int i = tid; i < NS * AT_HD; i += 256) {
        const int t = i / AT_HD, d = i % AT_HD, r = t / GT, h = t % GT;
        qs[t * AT_ST + d] = h < nact ? q[((size_t)min(r0 + r, rows - 1) * nh + h0 + h) * AT_HD + d] : 0.0f;
    }
    if (tid < 2 * NS) run[tid] = 0.0f;
    const u32* tab = tables + row_tab[r0];
    // Scores: thread (sg, pg) takes slots sg·SPT .. + SPT - 1 and a chunk's positions pg + 16 i.
    const int sg = tid >> 4, pg = tid & 15;
    // V sums: slots sg·SPT + a, float4 columns pg and pg + 16; the running sums across splits.
    float ra[SPT][8];  // columns pg (0-3) and pg + 16 (4-7)
#pragma unroll
    for (int a = 0; a < SPT; ++a)
#pragma unroll
        for (int e = 0; e < 8; ++e) ra[a][e] = 0.0f;
    for (int s = lo_min / 256; s <= pos_max / 256; ++s) {
        __syncthreads();  // the stage, scores and (m, l) of the split before are consumed
        {
            const int p = min(max(s * 256 + tid, lo_min), pos_max);
            slot[tid] = tab[p / bs] * (u32)bs + (u32)(p % bs);
        }
        // The split's positions that are a key of some row (block-uniform): chunks and V rows
        // wholly outside are not loaded; their scores are -inf, as every row's would be.
        const int jlo = max(lo_min - s * 256, 0), jhi = min(pos_max - s * 256, 255);
        for (int jc = 0; jc < 256; jc += AT_KC) {
            if (jc > jhi || jc + AT_KC - 1 < jlo) {
#pragma unroll
                for (int a = 0; a < SPT; ++a)
#pragma unroll
                    for (int i = 0; i < 4; ++i) sc[(sg * SPT + a) * AT_SS + jc + pg + 16 * i] = NEG_INF;
                continue;
            }
            __syncthreads();
#pragma unroll
            for (int k = 0; k < AT_KC * 32 / 256; ++k) {
                const int e = tid + 256 * k, pr = e >> 5, c = e & 31;
                *reinterpret_cast<float4*>(st + pr * AT_ST + 4 * c) =
                    kv_load4(kc + ((size_t)slot[jc + pr] * nkv + kvh) * AT_HD + 4 * c);
            }
            __syncthreads();
            float acc[SPT][4][4];
#pragma unroll
            for (int a = 0; a < SPT; ++a)
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int u = 0; u < 4; ++u) acc[a][i][u] = 0.0f;
#pragma unroll 2
            for (int c0 = 0; c0 < AT_HD / 4; c0 += 4) {
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const int c = c0 + u;
                    float4 k[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i) k[i] = *reinterpret_cast<const float4*>(st + (pg + 16 * i) * AT_ST + 4 * c);
#pragma unroll
                    for (int a = 0; a < SPT; ++a) {
                        const float4 qv = *reinterpret_cast<const float4*>(qs + (sg * SPT + a) * AT_ST + 4 * c);
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            float t = acc[a][i][u];
                            t = __fmaf_rn(qv.x, k[i].x, t);
                            t = __fmaf_rn(qv.y, k[i].y, t);
                            t = __fmaf_rn(qv.z, k[i].z, t);
                            t = __fmaf_rn(qv.w, k[i].w, t);
                            acc[a][i][u] = t;
                        }
                    }
                }
            }
#pragma unroll
            for (int a = 0; a < SPT; ++a) {
                const int t = sg * SPT + a, r = t / GT;
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int j = jc + pg + 16 * i, p = s * 256 + j;
                    const float v = __fadd_rn(__fadd_rn(acc[a][i][0], acc[a][i][1]), __fadd_rn(acc[a][i][2], acc[a][i][3]));
                    sc[t * AT_SS + j] = p >= rlp[2 * r] && p <= rlp[2 * r + 1] ? __fmul_rn(v, scale) : NEG_INF;
                }
            }
        }
        __syncthreads();
        // Each slot's max, exp and sum, a warp a slot: lane l holds positions 32 k + l.
        for (int t = warp; t < NS; t += 8) {
            const int r = t / GT;
            float v[8], m = NEG_INF;
#pragma unroll
            for (int k = 0; k < 8; ++k) v[k] = sc[t * AT_SS + 32 * k + lane], m = fmaxf(m, v[k]);
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
            float sel = 0.0f;
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const int p = s * 256 + 32 * k + lane;
                const float e = p >= rlp[2 * r] && p <= rlp[2 * r + 1] ? expf(__fsub_rn(v[k], m)) : 0.0f;
                sc[t * AT_SS + 32 * k + lane] = e;
                const float w = warp_sum(e);
                if (lane == k) sel = w;
            }
            const float l = warp_sum(sel);
            if (lane == 0) sml[2 * t] = m, sml[2 * t + 1] = l;
        }
        // The weighted V sums, a position group at a time (its 32 rows staged).
        float tot[SPT][8];
#pragma unroll
        for (int a = 0; a < SPT; ++a)
#pragma unroll
            for (int e = 0; e < 8; ++e) tot[a][e] = 0.0f;
        int jr0[SPT], jr1[SPT];
#pragma unroll
        for (int a = 0; a < SPT; ++a) {
            const int r = (sg * SPT + a) / GT;
            jr0[a] = max(rlp[2 * r] - s * 256, 0);
            jr1[a] = min(rlp[2 * r + 1] - s * 256, 255);
        }
        for (int g = 0; g < 8; ++g) {
            // Group g's positions g + 8 i that are a key of some row: i0 ..= i1.
            const int i0 = jlo > g ? (jlo - g + 7) / 8 : 0, i1 = jhi >= g ? (jhi - g) / 8 : -1;
            __syncthreads();
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int e = tid + 256 * k, pr = e >> 5, c = e & 31;
                if (pr >= i0 && pr <= i1)
                    *reinterpret_cast<float4*>(st + pr * AT_ST + 4 * c) =
                        kv_load4(vc + ((size_t)slot[g + 8 * pr] * nkv + kvh) * AT_HD + 4 * c);
            }
            __syncthreads();
            float4 ch[SPT][2];
#pragma unroll
            for (int a = 0; a < SPT; ++a) ch[a][0] = ch[a][1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            // Where a thread's slots are heads of one row (GT % SPT == 0), its keys in the group
            // are i = ia ..= ib, so the loop takes exactly the terms the per-slot test would, with
            // no branch between a weight's shared load and its FMAs; else each slot tests its row.
            constexpr bool one_row = GT % SPT == 0;
            const int ia = one_row ? max(i0, jr0[0] > g ? (jr0[0] - g + 7) / 8 : 0) : i0;
            const int ib = one_row ? min(i1, jr1[0] >= g ? (jr1[0] - g) / 8 : -1) : i1;
#pragma unroll 4
            for (int i = ia; i <= ib; ++i) {
                const int j = g + 8 * i;
                const float4 v0 = *reinterpret_cast<const float4*>(st + i * AT_ST + 4 * pg);
                const float4 v1 = *reinterpret_cast<const float4*>(st + i * AT_ST + 4 * (pg + 16));
#pragma unroll
                for (int a = 0; a < SPT; ++a) {
                    if constexpr (!one_row) {
                        if (j < jr0[a] || j > jr1[a]) continue;
                    }
                    const float w = sc[(sg * SPT + a) * AT_SS + j];
                    ch[a][0].x = __fmaf_rn(w, v0.x, ch[a][0].x);
                    ch[a][0].y = __fmaf_rn(w, v0.y, ch[a][0].y);
                    ch[a][0].z = __fmaf_rn(w, v0.z, ch[a][0].z);
                    ch[a][0].w = __fmaf_rn(w, v0.w, ch[a][0].w);
                    ch[a][1].x = __fmaf_rn(w, v1.x, ch[a][1].x);
                    ch[a][1].y = __fmaf_rn(w, v1.y, ch[a][1].y);
                    ch[a][1].z = __fmaf_rn(w, v1.z, ch[a][1].z);
                    ch[a][1].w = __fmaf_rn(w, v1.w, ch[a][1].w);
                }
            }
#pragma unroll
            for (int a = 0; a < SPT; ++a)
#pragma unroll
                for (int x = 0; x < 2; ++x) {
                    tot[a][4 * x] = __fadd_rn(tot[a][4 * x], ch[a][x].x);
                    tot[a][4 * x + 1] = __fadd_rn(tot[a][4 * x + 1], ch[a][x].y);
                    tot[a][4 * x + 2] = __fadd_rn(tot[a][4 * x + 2], ch[a][x].z);
                    tot[a][4 * x + 3] = __fadd_rn(tot[a][4 * x + 3], ch[a][x].w);
                }
        }
        // Merge into the running sums (every thread forms the same rm, rl for a slot; the
        // column-0 thread stores them once all have read the old ones).
        float rm[SPT], rl[SPT];
#pragma unroll
        for (int a = 0; a < SPT; ++a) {
            const int t = sg * SPT + a, r = t / GT;
            const int f = rlp[2 * r] / 256, l = rlp[2 * r + 1] / 256;
            rm[a] = run[2 * t], rl[a] = run[2 * t + 1];
            if (s < f || s > l) continue;
            const float m = sml[2 * t], ls = sml[2 * t + 1];
            const float om = rm[a], ol = rl[a];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                float mm = om, ll = ol;
                attn_merge(s == f, m, ls, tot[a][e], mm, ll, ra[a][e]);
                rm[a] = mm, rl[a] = ll;
            }
        }
        __syncthreads();
        if (pg == 0) {
#pragma unroll
            for (int a = 0; a < SPT; ++a) run[2 * (sg * SPT + a)] = rm[a], run[2 * (sg * SPT + a) + 1] = rl[a];
        }
    }
    __syncthreads();
#pragma unroll
    for (int a = 0; a < SPT; ++a) {
        const int t = sg * SPT + a, r = t / GT, h = t % GT;
        if (r0 + r >= rows || h >= nact) continue;
        float* o = out + ((size_t)(r0 + r) * nh + h0 + h) * AT_HD;
        const float l = run[2 * t + 1];
        const float* x = ra[a];
        *reinterpret_cast<float4*>(o + 4 * pg) = make_float4(__fdiv_rn(x[0], l), __fdiv_rn(x[1], l), __fdiv_rn(x[2], l), __fdiv_rn(x[3], l));
        *reinterpret_cast<float4*>(o + 4 * (pg + 16)) = make_float4(__fdiv_rn(x[4], l), __fdiv_rn(x[5], l), __fdiv_rn(x[6], l), __fdiv_rn(x[7], l));
    }
}
#endif
