// Attention over the paged KV cache for prefill, decode and speculative verify alike (every
// query row is treated the same way); appending K/V rows and copying blocks are in kv_append.cu.
//
// Cache layout, per layer: [num_blocks * block_size slots, n_kv_heads, head_dim] kv_t
// (common.cuh: f32, or f16 with KV_F16 = 1: each value rounded to nearest-even once, when it is
// appended; attention converts it back exactly); position p of a sequence lives in slot
// table[p / block_size] * block_size + p % block_size.
//
// Reduction order (docs/DESIGN.md §3): a query row at position `pos` walks its keys in fixed
// splits of ATTN_SPLIT positions aligned to multiples of ATTN_SPLIT (split s covers positions
// s*ATTN_SPLIT ..), in increasing s. Within a split (attn_split_partial below): scores by four
// lanes' strided float4 dots over head_dim (with the f16 cache and head_dim a multiple of 8,
// strided 8-element chunks) and a two-step xor tree, the split's max (exact in any
// order), exp, the split's sum by block_sum's fixed tree, and the weighted V sum in fixed position
// groups added in a fixed order. Splits are merged in increasing s with the usual
// online-softmax rescaling (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022). Nothing
// depends on how many query rows the pass holds or who else is in it.
#include "common.cuh"

#ifndef ATTN_SPLIT
#define ATTN_SPLIT 256
#endif



// Query heads per attention block (grouped-query attention): a block takes up to ATTN_HEADS heads
// of one KV head's group and reads each key and value once for all of them. Every head's
// arithmetic is the same whatever the count (each head's operations below are the one-head
// kernel's, in its order), so it changes speed, never bits.
#ifndef ATTN_HEADS
#define ATTN_HEADS 1
#endif
// The heads a block of the `_wide` entries (attn_paged_wide_f32, attn_split_wide_f32), which the
// host launches for steps of at least ATTN_WIDE_ROWS query rows (ATTN_WIDE_ROWS = 0, the default:
// never, and unless ATTN_WIDE_SPLITS is set the entries are not compiled: their shared memory, 4·S + 24.125·S·GT bytes for
// S = ATTN_SPLIT, passes the 48 KB a block static arrays may take at GT = 4, S = 512: sm_80 refuses
// to compile it, and the config refuses that pair). A
// wide step has rows x splits enough blocks that sharing each K and V load among more heads
// pays (run 89, 32 rows at depth 128: 20.2 us with 4 heads a block against 26.0 with 2); a
// one-row step does not (12.3 against 9.7). Same bits, as for ATTN_HEADS.
#ifndef ATTN_HEADS_WIDE
#define ATTN_HEADS_WIDE 4
#endif
#ifndef ATTN_WIDE_ROWS
#define ATTN_WIDE_ROWS 0
#endif
// The host also launches the `_wide` entries for a step whose rows reach ATTN_WIDE_SPLITS KV
// splits (the largest row's; under a CUDA graph the graph's split grid, a power of two; 0, the
// default: never): a deep row has splits enough blocks that sharing each K and V load pays (run
// 97, f16 cache, one row: depth 8,192 30.0 us with 2 heads a block, 24.3 with 4; depth 2,048
// 13.6 against 15.1; depth 128 9.9 against 11.6). Same bits.
#ifndef ATTN_WIDE_SPLITS
#define ATTN_WIDE_SPLITS 0
#endif
// ATTN_WIDE_ROWS for the f16 cache (KV_F16 = 1), whose form gains from 4 heads a block at 32
// rows where the f32 form loses (run 100, bs=32 decode: f16 5,017 -> 5,192 tok/s; run 90, f32:
// -1.3%). Unset: ATTN_WIDE_ROWS. The host reads it as it reads ATTN_WIDE_ROWS.
#ifndef ATTN_WIDE_ROWS_F16
#define ATTN_WIDE_ROWS_F16 ATTN_WIDE_ROWS
#endif
#define ATTN_WIDE (ATTN_WIDE_ROWS || ATTN_WIDE_SPLITS || (KV_F16 && ATTN_WIDE_ROWS_F16))

// Score loop order: 0 = positions outer (a position's columns in a row); 1 = key columns outer, a
// lane's R positions inner (each column's q read from shared memory once for R positions). Same
// operations per score either way. Defaults by KV format, measured on the H200 with ATTN_HEADS = 4
// (run 32, research/cuda/run32): f32 cache 0 with ATTN_KUNROLL 8 (depth 8,192, 1 / 8 rows: 30.4 /
// 165 us against 36.5 / 210 with 1); f16 cache 1 with ATTN_KUNROLL 4 (34.5 / 212 us against
// 37.3 / 234 for 0; with ATTN_MINB 4 it took 38.0 / 169 but spills 212 bytes).
#ifndef ATTN_KORDER
#define ATTN_KORDER (KV_F16 ? 1 : 0)
#endif
// Key columns a lane loads ahead in the score loop.
#ifndef ATTN_KUNROLL
#define ATTN_KUNROLL (KV_F16 ? 4 : 8)
#endif
// f16 cache: 1 = 16-byte key loads (8 halves a lane) where head_dim is a multiple of 8; 0 = the
// float4 columns of the f32 layout (4 halves a lane). 0 by default: on the H200 (run 33,
// research/cuda/run33) 1 took 51.0 / 343 us for 1 / 8 rows at depth 8,192 against 35.3 / 214 for 0.
#ifndef ATTN_KV16W
#define ATTN_KV16W 0
#endif
// f16 cache, head_dim a multiple of 8: 1 = the weighted V sum loads 16 bytes (8 halves) a thread,
// half the threads one 8-element chunk each, instead of every thread a float4 column by two
// 4-byte loads: the same position groups and order per element, so the same bits; fewer load
// instructions for the bytes (run 87: the f16 form at 16% of copy bandwidth, bound by latency
// and issue). Run 95: slower (one row at depth 8,192, 50.3 -> 52.7 us); off.
#ifndef ATTN_V16W
#define ATTN_V16W 0
#endif
// Positions a thread's weighted V sum loads before its first FMA: the loop runs in batches of
// ATTN_VBATCH positions, each batch's loads issued together, then the rest one at a time. Each
// element's chain keeps positions in increasing order, so any value gives the same bits. Written
// out because nvcc unrolled the f16 form's `#pragma unroll 8` with an exit test between
// positions, each load waiting for the one before (SASS of run 95's build: one load pair in
// flight a thread; the f32 form got batches of 8): with the f16 cache the V phase was a chain of
// 32 round trips a split (f16 14.6 us against f32 9.9 at depth 128, run 87). Defaults by KV
// format, run 97 (one row, depths 128 / 2,048 / 8,192, us): f32 8 (10.2 / 14.4 / 31.9; 16 took
// 9.8 / 17.9 / 44.1), f16 16 (9.3 / 12.4 / 28.5; 8 took 9.9 / 13.6 / 30.0).
#ifndef ATTN_VBATCH
#define ATTN_VBATCH (KV_F16 ? 16 : 8)
#endif
// Minimum resident blocks a multiprocessor in attn_split_f32's launch bounds: 1 lets ptxas use up
// to 255 registers a thread, 2 caps them at 128, 4 at 64 (attn_paged_f32, which keeps every
// head's running sums across splits, always takes 1: at 64 it spills).
#ifndef ATTN_MINB
#define ATTN_MINB 1
#endif
// 1 = each thread of a split, once its position's cache slot is known, prefetches that
// position's K and V rows into L2 (prefetch.global.L2, one instruction a 128-byte line), so the
// V loads after the softmax and the later K columns wait on L2 instead of DRAM: decode attention
// is latency-bound (run 87: f32 depth 8,192 at 48% of copy bandwidth, f16 at 16%). Moves data
// only: same bits.
#ifndef ATTN_PF
#define ATTN_PF 0
#endif
// 1 = the score loop skips a warp's group of 8 positions when none of them is a key of any of the
// block's rows (past the last row's position, or before the first key of a sliding window): the
// last split of a decode row at depth 128 has 129 keys of 256, a prefill's diagonal split half
// its positions on average. Their scores are -inf whatever the sums hold, so the bits do not
// change. 0, the default: every group computed (not yet measured).
#ifndef ATTN_SKIP
#define ATTN_SKIP 0
#endif

// One split's partial softmax-attention for (row, the block's heads): per head h < GT, m = the
// split's max score, l = sum of exp(score - m), a[d] = sum of exp(score - m) * v[d]. Thread tid
// returns every head's m and l, and threads tid < hd each head's a[tid] (other threads' `a` is 0). Positions lo ..= pos only;
// split s covers positions s*ATTN_SPLIT .. s*ATTN_SPLIT + ATTN_SPLIT - 1. head_dim must be a
// multiple of 4. Order, per head: a position's score is 4 lanes' partial dots — lane r of the 4
// takes the float4 columns c = r, r + 4, r + 8, ... (elements 4c .. 4c+3, increasing) — added by
// a two-step xor tree, times scale; m and l by block_max / block_sum's trees; a[d] as
// G = ATTN_SPLIT / (hd / 4) position groups (group g: positions j = g, g + G, ..., increasing;
// each thread one float4 column of v) added in increasing g. All arithmetic is spelled out
// (__fmaf_rn, __fmul_rn, ...) so the fused and the split-parallel kernels below, which both
// inline this function, round identically. The layout keeps many independent loads in flight
// per thread (decode attention is latency-bound).
template <int GT>
struct AttnShared {
    u32 slot[ATTN_SPLIT];  // cache slot of each position of the split (clamped into lo ..= pos)
    float4 qs[GT][ATTN_SPLIT / 4];
    float es[GT][ATTN_SPLIT];
    float4 part[GT][ATTN_SPLIT];
    float scratch[GT][ATTN_SPLIT / 32];
};

// block_max and block_sum (common.cuh) of GT values a thread at once: the same trees, one set
// of barriers.
template <int GT>
__device__ __forceinline__ void block_max_gt(float (&v)[GT], float (*scratch)[ATTN_SPLIT / 32]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int h = 0; h < GT; ++h) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v[h] = fmaxf(v[h], __shfl_xor_sync(0xffffffffu, v[h], off));
        if (lane == 0) scratch[h][warp] = v[h];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < GT; ++h) {
        float t = (lane < ATTN_SPLIT / 32) ? scratch[h][lane] : NEG_INF;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, off));
        v[h] = t;  // every warp reduces the same values: no second barrier needed
    }
    __syncthreads();
}
template <int GT>
__device__ __forceinline__ void block_sum_gt(float (&v)[GT], float (*scratch)[ATTN_SPLIT / 32]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int h = 0; h < GT; ++h) {
        v[h] = warp_sum(v[h]);
        if (lane == 0) scratch[h][warp] = v[h];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < GT; ++h) v[h] = warp_sum((lane < ATTN_SPLIT / 32) ? scratch[h][lane] : 0.0f);
    __syncthreads();
}

// a[h] += es[h][j] · v (one float4 column of position j's V row), for each of the GT heads.
template <int GT>
__device__ __forceinline__ void attn_v4_fma(const float4 v, const float (*es)[ATTN_SPLIT], int j, float4 (&a)[GT]) {
#pragma unroll
    for (int h = 0; h < GT; ++h) {
        const float w = es[h][j];
        a[h].x = __fmaf_rn(w, v.x, a[h].x);
        a[h].y = __fmaf_rn(w, v.y, a[h].y);
        a[h].z = __fmaf_rn(w, v.z, a[h].z);
        a[h].w = __fmaf_rn(w, v.w, a[h].w);
    }
}
// attn_v4_fma for the QR rows of a rows block (slot q·GT + h), row q only where j is one of its
// positions (jr0[q] ..= jr1[q]): each row's chain gets the one-row loop's terms, in its order,
// and no others (a skipped term, not a zero-weight one, so even the sign of a zero sum is the
// one-row kernel's). QR = 1: attn_v4_fma itself.
template <int GT, int QR>
__device__ __forceinline__ void attn_v4_fma_rows(const float4 v, const float (*es)[ATTN_SPLIT], int j,
                                                 float4 (&a)[GT * QR], const int (&jr0)[QR], const int (&jr1)[QR]) {
    if constexpr (QR == 1) {
        attn_v4_fma<GT>(v, es, j, a);
    } else {
#pragma unroll
        for (int q = 0; q < QR; ++q) {
            if (j < jr0[q] || j > jr1[q]) continue;
#pragma unroll
            for (int h = 0; h < GT; ++h) {
                const int t = q * GT + h;
                const float w = es[t][j];
                a[t].x = __fmaf_rn(w, v.x, a[t].x);
                a[t].y = __fmaf_rn(w, v.y, a[t].y);
                a[t].z = __fmaf_rn(w, v.z, a[t].z);
                a[t].w = __fmaf_rn(w, v.w, a[t].w);
            }
        }
    }
}

#if KV_F16
// The same for 8 halves (two float4 columns, into a and b) from one 16-byte load.
template <int GT>
__device__ __forceinline__ void attn_v8_fma(const uint4 v, const float (*es)[ATTN_SPLIT], int j, float4 (&a)[GT],
                                            float4 (&b)[GT]) {
#pragma unroll
    for (int h = 0; h < GT; ++h) {
        const float w = es[h][j];
        a[h].x = __fmaf_rn(w, kv_half(v.x, 0), a[h].x);
        a[h].y = __fmaf_rn(w, kv_half(v.x, 1), a[h].y);
        a[h].z = __fmaf_rn(w, kv_half(v.y, 0), a[h].z);
        a[h].w = __fmaf_rn(w, kv_half(v.y, 1), a[h].w);
        b[h].x = __fmaf_rn(w, kv_half(v.z, 0), b[h].x);
        b[h].y = __fmaf_rn(w, kv_half(v.z, 1), b[h].y);
        b[h].z = __fmaf_rn(w, kv_half(v.w, 0), b[h].z);
        b[h].w = __fmaf_rn(w, kv_half(v.w, 1), b[h].w);
    }
}
#endif

template <int GT, int QR = 1, int KO = ATTN_KORDER, int KU = ATTN_KUNROLL, int VB = ATTN_VBATCH>
__device__ __forceinline__ void attn_split_partial(const kv_t* kc, const kv_t* vc, const u32* tab, int s,
                                                   const int (&lo)[QR], const int (&pos)[QR], int nkv, int kvh,
                                                   int hd, int bs, float scale, AttnShared<GT * QR>& sh,
                                                   float (&m_out)[GT * QR], float (&l_out)[GT * QR],
                                                   float (&a_out)[GT * QR]) {
    constexpr int HT = GT * QR;  // the block's (row, head) slots: slot q·GT + h is row q's head h
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int lo_min = lo[0], pos_max = pos[0];
#pragma unroll
    for (int q = 1; q < QR; ++q) lo_min = min(lo_min, lo[q]), pos_max = max(pos_max, pos[q]);
    constexpr int NW = ATTN_SPLIT / 32;
    const int sub = lane & 3, pg = lane >> 2;
    const int c4 = hd >> 2;  // float4 columns per row
    // The split's slots, once: the K and V loads below then wait on shared memory, not on a
    // block-table load from L2. Positions outside lo ..= pos take pos's slot (read, never used),
    // so no load below needs a branch.
    {
        const int p0 = s * ATTN_SPLIT + tid;
        const int p = min(max(p0, lo_min), pos_max);
        const u32 slot = tab[p / bs] * (u32)bs + (u32)(p % bs);
        sh.slot[tid] = slot;
#if ATTN_PF
        if (p0 == p) {
            const char* kr = reinterpret_cast<const char*>(kc + ((size_t)slot * nkv + kvh) * hd);
            const char* vr = reinterpret_cast<const char*>(vc + ((size_t)slot * nkv + kvh) * hd);
            for (int o = 0; o < hd * (int)sizeof(kv_t); o += 128) {
                asm volatile("prefetch.global.L2 [%0];" ::"l"(kr + o));
                asm volatile("prefetch.global.L2 [%0];" ::"l"(vr + o));
            }
        }
#endif
    }
    __syncthreads();
    // Lane (pg, sub) of warp w scores positions j = (r·NW + w)·8 + pg, r < R: the 4 lanes of a
    // position split its columns (lane sub takes float4 columns sub, sub + 4, ...). Columns outer,
    // positions inner, so each column's q is read from shared memory once for the R positions and
    // their R loads are in flight together.
    constexpr int R = ATTN_SPLIT / (8 * NW);
    float acc[R][HT];
    bool ok[R][QR];
    const kv_t* kp[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int j = (r * NW + warp) * 8 + pg;
        const int p = s * ATTN_SPLIT + j;
#pragma unroll
        for (int q = 0; q < QR; ++q) ok[r][q] = p >= lo[q] && p <= pos[q];
        kp[r] = kc + ((size_t)sh.slot[j] * nkv + kvh) * hd;
#pragma unroll
        for (int h = 0; h < HT; ++h) acc[r][h] = 0.0f;
    }
#if ATTN_SKIP
    // Whether any of the warp's 8 positions of group r is a key of some row (warp-uniform).
    bool live[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int j8 = (r * NW + warp) * 8;
        live[r] = j8 <= pos_max - s * ATTN_SPLIT && j8 + 7 >= lo_min - s * ATTN_SPLIT;
    }
#endif
#if KV_F16 && ATTN_KV16W
    // f16 cache, head_dim a multiple of 8: lane sub takes 8-element chunks sub, sub + 4, ... (one
    // 16-byte load each), so a warp's load covers 64 contiguous bytes of each of its 8 positions
    // rather than 16 (run 31: the 4-byte loads left the f16 kernel L1-bound at 11% of DRAM
    // bandwidth). A score's order here: a lane's chunks in increasing order, each chunk's 8
    // elements in order, then the 4-lane xor tree (an order of its own, the same on every path).
    if ((hd & 7) == 0) {
        const int c8 = hd >> 3;
#pragma unroll KU
        for (int c = sub; c < c8; c += 4) {
            uint4 w[R];
#pragma unroll
            for (int r = 0; r < R; ++r) w[r] = *reinterpret_cast<const uint4*>(kp[r] + 8 * c);
#pragma unroll
            for (int h = 0; h < HT; ++h) {
                const float4 qa = sh.qs[h][2 * c], qb = sh.qs[h][2 * c + 1];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    float t = acc[r][h];
                    t = __fmaf_rn(qa.x, kv_half(w[r].x, 0), t);
                    t = __fmaf_rn(qa.y, kv_half(w[r].x, 1), t);
                    t = __fmaf_rn(qa.z, kv_half(w[r].y, 0), t);
                    t = __fmaf_rn(qa.w, kv_half(w[r].y, 1), t);
                    t = __fmaf_rn(qb.x, kv_half(w[r].z, 0), t);
                    t = __fmaf_rn(qb.y, kv_half(w[r].z, 1), t);
                    t = __fmaf_rn(qb.z, kv_half(w[r].w, 0), t);
                    t = __fmaf_rn(qb.w, kv_half(w[r].w, 1), t);
                    acc[r][h] = t;
                }
            }
        }
    } else
#endif
    {
    if constexpr (KO == 0) {
    // Positions outer: a position's columns in a row.
#pragma unroll
    for (int r = 0; r < R; ++r) {
#if ATTN_SKIP
        if (!live[r]) continue;
#endif
#pragma unroll KU
        for (int c = sub; c < c4; c += 4) {
            const float4 k = kv_load4(kp[r] + 4 * c);
#pragma unroll
            for (int h = 0; h < HT; ++h) {
                const float4 q = sh.qs[h][c];
                acc[r][h] = __fmaf_rn(q.x, k.x, acc[r][h]);
                acc[r][h] = __fmaf_rn(q.y, k.y, acc[r][h]);
                acc[r][h] = __fmaf_rn(q.z, k.z, acc[r][h]);
                acc[r][h] = __fmaf_rn(q.w, k.w, acc[r][h]);
            }
        }
    }
    } else {
#pragma unroll KU
    for (int c = sub; c < c4; c += 4) {
        float4 k[R];
#pragma unroll
        for (int r = 0; r < R; ++r)
#if ATTN_SKIP
            k[r] = live[r] ? kv_load4(kp[r] + 4 * c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#else
            k[r] = kv_load4(kp[r] + 4 * c);
#endif
#pragma unroll
        for (int h = 0; h < HT; ++h) {
            const float4 q = sh.qs[h][c];
#pragma unroll
            for (int r = 0; r < R; ++r) {
#if ATTN_SKIP
                if (!live[r]) continue;
#endif
                acc[r][h] = __fmaf_rn(q.x, k[r].x, acc[r][h]);
                acc[r][h] = __fmaf_rn(q.y, k[r].y, acc[r][h]);
                acc[r][h] = __fmaf_rn(q.z, k[r].z, acc[r][h]);
                acc[r][h] = __fmaf_rn(q.w, k[r].w, acc[r][h]);
            }
        }
    }
    }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int h = 0; h < HT; ++h) {
            float t = acc[r][h];
            t = __fadd_rn(t, __shfl_xor_sync(0xffffffffu, t, 1, 4));
            t = __fadd_rn(t, __shfl_xor_sync(0xffffffffu, t, 2, 4));
            if (sub == 0) sh.es[h][(r * NW + warp) * 8 + pg] = ok[r][h / GT] ? __fmul_rn(t, scale) : NEG_INF;
        }
    __syncthreads();
    const int p = s * ATTN_SPLIT + tid;
    bool valid[QR];
#pragma unroll
    for (int q = 0; q < QR; ++q) valid[q] = p >= lo[q] && p <= pos[q];
    float m[HT], e[HT];
#pragma unroll
    for (int h = 0; h < HT; ++h) m[h] = sh.es[h][tid];
    block_max_gt(m, sh.scratch);
#pragma unroll
    for (int h = 0; h < HT; ++h) {
        e[h] = valid[h / GT] ? expf(__fsub_rn(sh.es[h][tid], m[h])) : 0.0f;
        sh.es[h][tid] = e[h];
    }
    block_sum_gt(e, sh.scratch);  // its barriers publish es[]
    if constexpr (QR > 1) {
        // A rows block leaves the split's m and l in shared memory (the tree scratch is free until
        // the next split), where attn_rows_f32's merge reads them after the barrier at the end,
        // instead of holding 2·HT registers through the V sum.
        if (tid == 0) {
#pragma unroll
            for (int h = 0; h < HT; ++h) sh.scratch[h][0] = m[h], sh.scratch[h][1] = e[h];
        }
    }
    const int groups = ATTN_SPLIT / c4;
    const int g = tid / c4, c = tid % c4;
    const int j0 = max(lo_min - s * ATTN_SPLIT, 0);
    const int j1 = min(pos_max - s * ATTN_SPLIT, ATTN_SPLIT - 1);
    int jr0[QR], jr1[QR];  // row q's positions in this split
#pragma unroll
    for (int q = 0; q < QR; ++q) {
        jr0[q] = max(lo[q] - s * ATTN_SPLIT, 0);
        jr1[q] = min(pos[q] - s * ATTN_SPLIT, ATTN_SPLIT - 1);
    }
    float4 a[HT];
#pragma unroll
    for (int h = 0; h < HT; ++h) a[h] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if KV_F16 && ATTN_V16W
    if (QR == 1 && (hd & 7) == 0) {  // rows blocks (QR > 1) take the form below: the same bits
        // Thread (g8, cc) of the first groups · hd/8: the same position group g8 and the two
        // float4 columns 2cc, 2cc + 1 from one 16-byte load of 8 halves; each element's sum is
        // the chain of the form below (same groups, positions in the same order).
        const int c8 = c4 >> 1, g8 = tid / c8, cc = tid % c8;
        float4 b[HT];
#pragma unroll
        for (int h = 0; h < HT; ++h) b[h] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (g8 < groups) {
            int j = j0 + ((g8 - j0 % groups) % groups + groups) % groups;
            const int n = j <= j1 ? (j1 - j) / groups + 1 : 0;
            int i = 0;
            for (; i + ATTN_VBATCH <= n; i += ATTN_VBATCH, j += ATTN_VBATCH * groups) {
                uint4 v[ATTN_VBATCH];
#pragma unroll
                for (int u = 0; u < ATTN_VBATCH; ++u)
                    v[u] = *reinterpret_cast<const uint4*>(vc + ((size_t)sh.slot[j + u * groups] * nkv + kvh) * hd + 8 * cc);
#pragma unroll
                for (int u = 0; u < ATTN_VBATCH; ++u) attn_v8_fma<HT>(v[u], sh.es, j + u * groups, a, b);
            }
            for (; i < n; ++i, j += groups) {
                const uint4 v = *reinterpret_cast<const uint4*>(vc + ((size_t)sh.slot[j] * nkv + kvh) * hd + 8 * cc);
                attn_v8_fma<HT>(v, sh.es, j, a, b);
            }
#pragma unroll
            for (int h = 0; h < HT; ++h) {
                sh.part[h][g8 * c4 + 2 * cc] = a[h];
                sh.part[h][g8 * c4 + 2 * cc + 1] = b[h];
            }
        }
    } else
#endif
    if (g < groups) {
        int j = j0 + ((g - j0 % groups) % groups + groups) % groups;
        const int n = j <= j1 ? (j1 - j) / groups + 1 : 0;
        int i = 0;
        for (; i + VB <= n; i += VB, j += VB * groups) {
            float4 v[VB];
#pragma unroll
            for (int u = 0; u < VB; ++u)
                v[u] = kv_load4(vc + ((size_t)sh.slot[j + u * groups] * nkv + kvh) * hd + 4 * c);
#pragma unroll
            for (int u = 0; u < VB; ++u) attn_v4_fma_rows<GT, QR>(v[u], sh.es, j + u * groups, a, jr0, jr1);
        }
        for (; i < n; ++i, j += groups)
            attn_v4_fma_rows<GT, QR>(kv_load4(vc + ((size_t)sh.slot[j] * nkv + kvh) * hd + 4 * c), sh.es, j, a, jr0, jr1);
#pragma unroll
        for (int h = 0; h < HT; ++h) sh.part[h][g * c4 + c] = a[h];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < HT; ++h) {
        float total = 0.0f;
        if (tid < hd) {
            const float* part = reinterpret_cast<const float*>(sh.part[h]);
            for (int gg = 0; gg < groups; ++gg) total = __fadd_rn(total, part[gg * hd + tid]);
        }
        a_out[h] = total;
    }
    __syncthreads();
    if constexpr (QR == 1) {
#pragma unroll
        for (int h = 0; h < HT; ++h) {
            m_out[h] = m[h];
            l_out[h] = e[h];
        }
    }
}

// The block's query heads: blockIdx.y = kvh · nb + b, nb = ceil(G / GT) blocks per KV head
// (G = nh / nkv); heads h0 .. h0 + nact - 1 with h0 = kvh · G + b · GT. Loads their q rows into
// sh.qs (zeros for the unused slots) and returns h0, nact, kvh.
template <int GT>
__device__ __forceinline__ void attn_heads(const float* q, int row, int nh, int nkv, int hd, AttnShared<GT>& sh, int& h0,
                                           int& nact, int& kvh) {
    const int G = nh / nkv, nb = (G + GT - 1) / GT;
    kvh = blockIdx.y / nb;
    const int b = blockIdx.y % nb;
    h0 = kvh * G + b * GT;
    nact = min(GT, G - b * GT);
    for (int i = threadIdx.x; i < GT * hd; i += blockDim.x) {
        const int h = i / hd, d = i % hd;
        reinterpret_cast<float*>(sh.qs[h])[d] = h < nact ? q[((size_t)row * nh + h0 + h) * hd + d] : 0.0f;
    }
    __syncthreads();
}

// out[t, h, :] = softmax(q[t, h, :] . K^T * scale) V over the keys of row t: positions
// lo ..= row_pos[t], lo = max(0, pos + 1 - window) when window > 0 (sliding window), else 0.
// q, out: [rows, nh, hd] f32; kc, vc: one layer's cache; row_tab[t]: offset of row t's block
// table in `tables`. Grouped-query attention: head h reads KV head h / (nh / nkv).
// hd <= ATTN_SPLIT. Walks the splits in increasing s. Grid: (rows, nkv · ceil(G / GT)), GT =
// ATTN_HEADS (attn_paged_f32) or ATTN_HEADS_WIDE (attn_paged_wide_f32); block: (ATTN_SPLIT).
// The second launch bound (1 here, ATTN_MINB on the split entries) lets ptxas use the registers
// the head count needs (without it, it capped these entries at 64 and spilled).
template <int GT>
__device__ __forceinline__ void attn_paged(const float* q, const kv_t* kc, const kv_t* vc, float* out,
                                           const u32* row_pos, const u32* row_tab, const u32* tables, int nh,
                                           int nkv, int hd, int bs, int window, float scale) {
    __shared__ AttnShared<GT> sh;
    const int row = blockIdx.x, tid = threadIdx.x;
    int h0, nact, kvh;
    attn_heads(q, row, nh, nkv, hd, sh, h0, nact, kvh);
    const int pos = (int)row_pos[row];
    const u32* tab = tables + row_tab[row];
    const int lo = window > 0 ? max(0, pos + 1 - window) : 0;
    float rm[GT], rl[GT], ra[GT];
#pragma unroll
    for (int i = 0; i < GT; ++i) rm[i] = NEG_INF, rl[i] = 0.0f, ra[i] = 0.0f;
    for (int s = lo / ATTN_SPLIT; s <= pos / ATTN_SPLIT; ++s) {
        float m[GT], l[GT], a[GT];
        attn_split_partial<GT>(kc, vc, tab, s, {lo}, {pos}, nkv, kvh, hd, bs, scale, sh, m, l, a);
#pragma unroll
        for (int h = 0; h < GT; ++h) attn_merge(s == lo / ATTN_SPLIT, m[h], l[h], a[h], rm[h], rl[h], ra[h]);
    }
#pragma unroll
    for (int h = 0; h < GT; ++h)
        if (h < nact && tid < hd) out[((size_t)row * nh + h0 + h) * hd + tid] = __fdiv_rn(ra[h], rl[h]);
}
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT, 1)
attn_paged_f32(const float* q, const kv_t* kc, const kv_t* vc, float* out, const u32* row_pos,
               const u32* row_tab, const u32* tables, int nh, int nkv, int hd, int bs, int window,
               float scale) {
    pdl_entry();
    attn_paged<ATTN_HEADS>(q, kc, vc, out, row_pos, row_tab, tables, nh, nkv, hd, bs, window, scale);
}
#if ATTN_WIDE
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT, 1)
attn_paged_wide_f32(const float* q, const kv_t* kc, const kv_t* vc, float* out, const u32* row_pos,
                    const u32* row_tab, const u32* tables, int nh, int nkv, int hd, int bs, int window,
                    float scale) {
    pdl_entry();
    attn_paged<ATTN_HEADS_WIDE>(q, kc, vc, out, row_pos, row_tab, tables, nh, nkv, hd, bs, window, scale);
}
#endif

// Query rows a block of attn_rows_f32 (ATTN_ROWS > 0), and its heads a row (GT, up to the group).
// The defaults (2 x 4, one key column ahead, 2 blocks an SM) are the fastest form measured: H100,
// BF16 TTFT of 1,024 tokens, 131.4 ms without the entry; 4 x 4 at 1 block 122.0, at 2 blocks 110.1;
// 2 x 4 at 2 blocks 109.4; 4 x 1 at 3 110.8; 1 x 4 at 3 116.6; 1 x 2 at 4 117.6 (runs 119, 121).
#ifndef ATTN_ROWS
#define ATTN_ROWS 0
#endif
#ifndef ATTN_ROWS_Q
#define ATTN_ROWS_Q 2
#endif
#ifndef ATTN_ROWS_HEADS
#define ATTN_ROWS_HEADS 4
#endif
// attn_rows_f32's score loop order and key columns ahead (ATTN_KORDER and ATTN_KUNROLL for it;
// the same operations per score either way). Columns outer by default: each q column is read from
// shared memory once for a lane's 4 positions, where positions outer reads it once a position for
// each of the block's 16 slots (run 118, H100, BF16 TTFT of 1,024 tokens with the rows entry at
// 4 x 4: 132.4 ms with the f32 cache's 0 / 8, 121.1 with 1 / 4).
#ifndef ATTN_ROWS_KORDER
#define ATTN_ROWS_KORDER 1
#endif
#ifndef ATTN_ROWS_KUNROLL
#define ATTN_ROWS_KUNROLL 1
#endif
// attn_rows_f32's V load batch (ATTN_VBATCH for it; any value gives the same bits).
#ifndef ATTN_ROWS_VBATCH
#define ATTN_ROWS_VBATCH ATTN_VBATCH
#endif
// Minimum resident attn_rows_f32 blocks a multiprocessor (launch bounds: 2 caps registers at 128).
#ifndef ATTN_ROWS_MINB
#define ATTN_ROWS_MINB 2
#endif
#if ATTN_ROWS
// attn_paged_f32 for a step whose rows share one block table (a prefill chunk of one sequence):
// block x takes rows x·QR .. x·QR + QR - 1 (QR = ATTN_ROWS_Q; past the last row it repeats the
// last and stores nothing for the copies) and GT = ATTN_ROWS_HEADS heads of one KV head, and reads
// each split's keys and values once for all QR·GT (row, head) slots, where attn_paged_f32 reads
// them once a row: QR times fewer K/V loads through L2 for the prefill's many rows (run 115: 34%
// of a 1,024-token prefill's kernel time in attn_paged_f32). Each row's arithmetic is
// attn_paged_f32's, term for term (attn_split_partial with QR rows; a split outside a row's keys
// is not merged into it): the same bits, which the self-check holds it to (run 116, and the CUDA
// gate lanes with every prefill on it). Fewer loads bought little: the walking kernel was not bound
// by them (run 118, Nsight Compute, H100: this entry at 4 x 4 issues 1.06 instructions a cycle an
// SM with 2 warps a scheduler, DRAM 0.7%, L2 4%; TTFT 131.5 -> 132.4 ms with positions outer, 121.1
// with columns outer). Walks splits from the rows' lowest to their highest. Grid: (ceil(rows /
// QR), nkv · ceil(G / GT)); block: (ATTN_SPLIT); dynamic shared memory sizeof(AttnShared<QR·GT>)
// + 8·QR·GT (each slot's running max and sum) = 4·S + (24.125·S + 8)·QR·GT bytes (S = ATTN_SPLIT:
// 99,968 at S = 256, QR = GT = 4). Arguments as attn_paged_f32's, `rows` the step's rows.
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT, ATTN_ROWS_MINB)
attn_rows_f32(const float* q, const kv_t* kc, const kv_t* vc, float* out, const u32* row_pos,
              const u32* row_tab, const u32* tables, int nh, int nkv, int hd, int bs, int window,
              float scale, int rows) {
    pdl_entry();
    constexpr int GT = ATTN_ROWS_HEADS, QR = ATTN_ROWS_Q, HT = GT * QR;
    extern __shared__ __align__(16) unsigned char attn_smem[];
    AttnShared<HT>& sh = *reinterpret_cast<AttnShared<HT>*>(attn_smem);
    const int r0 = blockIdx.x * QR, tid = threadIdx.x;
    const int G = nh / nkv, nb = (G + GT - 1) / GT;
    const int kvh = blockIdx.y / nb, b = blockIdx.y % nb;
    const int h0 = kvh * G + b * GT, nact = min(GT, G - b * GT);
    int pos[QR], lo[QR], row[QR];
    int s0 = 0x7fffffff, s1 = 0;
#pragma unroll
    for (int i = 0; i < QR; ++i) {
        row[i] = min(r0 + i, rows - 1);
        pos[i] = (int)row_pos[row[i]];
        lo[i] = window > 0 ? max(0, pos[i] + 1 - window) : 0;
        s0 = min(s0, lo[i] / ATTN_SPLIT);
        s1 = max(s1, pos[i] / ATTN_SPLIT);
    }
    for (int i = tid; i < HT * hd; i += blockDim.x) {
        const int t = i / hd, d = i % hd, r = t / GT, h = t % GT;
        reinterpret_cast<float*>(sh.qs[t])[d] = h < nact ? q[((size_t)row[r] * nh + h0 + h) * hd + d] : 0.0f;
    }
    __syncthreads();
    const u32* tab = tables + row_tab[r0];
    // The running max and sum of each slot, [HT][2] after the struct: uniform across the block, so
    // kept once in shared memory (thread 0 writes them) rather than in every thread's registers.
    float(*run)[2] = reinterpret_cast<float(*)[2]>(attn_smem + sizeof(AttnShared<HT>));
    float ra[HT];
#pragma unroll
    for (int t = 0; t < HT; ++t) ra[t] = 0.0f;
    for (int s = s0; s <= s1; ++s) {
        float ms[HT], ls[HT], a[HT];
        attn_split_partial<GT, QR, ATTN_ROWS_KORDER, ATTN_ROWS_KUNROLL, ATTN_ROWS_VBATCH>(
            kc, vc, tab, s, lo, pos, nkv, kvh, hd, bs, scale, sh, ms, ls, a);
        // attn_merge with the split's m, l and the running ones; every thread forms the same rm,
        // rl, which thread 0 stores once all have read the old ones. The split's m, l: with QR > 1
        // in sh.scratch (published by the partial's last barrier), with QR = 1 in ms, ls (the
        // partial leaves them there, as for the walking entry; run 121: QR = 1 had read the
        // scratch, which it does not write, and failed the self-check's bits).
        float rm[HT], rl[HT];
#pragma unroll
        for (int t = 0; t < HT; ++t) {
            const int r = t / GT;
            rm[t] = run[t][0], rl[t] = run[t][1];
            if (s >= lo[r] / ATTN_SPLIT && s <= pos[r] / ATTN_SPLIT) {
                if constexpr (QR > 1)
                    attn_merge(s == lo[r] / ATTN_SPLIT, sh.scratch[t][0], sh.scratch[t][1], a[t], rm[t], rl[t], ra[t]);
                else
                    attn_merge(s == lo[r] / ATTN_SPLIT, ms[t], ls[t], a[t], rm[t], rl[t], ra[t]);
            }
        }
        __syncthreads();
        if (tid == 0) {
#pragma unroll
            for (int t = 0; t < HT; ++t) run[t][0] = rm[t], run[t][1] = rl[t];
        }
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < HT; ++t) {
        const int r = t / GT, h = t % GT;
        if (r0 + r < rows && h < nact && tid < hd) out[((size_t)(r0 + r) * nh + h0 + h) * hd + tid] = __fdiv_rn(ra[t], run[t][1]);
    }
}
#endif

// The same attention with the splits of a row computed in parallel (flash-decoding, Dao et al.
// 2023): block z of (row, heads) computes split lo / ATTN_SPLIT + z into part[(row, head, z)] =
// (m, l, a[0 .. hd]); attn_combine_f32 then merges them in increasing z exactly as
// attn_paged_f32 does, so both give the same bits. part: [rows, nh, nz, hd + 2] f32.
// Grid: (rows, nkv · ceil(G / GT), nz); block: (ATTN_SPLIT). GT as for attn_paged.
template <int GT>
__device__ __forceinline__ void attn_split(const float* q, const kv_t* kc, const kv_t* vc, float* part,
                                           const u32* row_pos, const u32* row_tab, const u32* tables, int nh,
                                           int nkv, int hd, int bs, int window, float scale, int nz) {
    __shared__ AttnShared<GT> sh;
    const int row = blockIdx.x, z = blockIdx.z, tid = threadIdx.x;
    const int pos = (int)row_pos[row];
    const int lo = window > 0 ? max(0, pos + 1 - window) : 0;
    const int s = lo / ATTN_SPLIT + z;
    if (s > pos / ATTN_SPLIT) return;
    int h0, nact, kvh;
    attn_heads(q, row, nh, nkv, hd, sh, h0, nact, kvh);
    const u32* tab = tables + row_tab[row];
    float m[GT], l[GT], a[GT];
    attn_split_partial<GT>(kc, vc, tab, s, {lo}, {pos}, nkv, kvh, hd, bs, scale, sh, m, l, a);
#pragma unroll
    for (int h = 0; h < GT; ++h) {
        if (h >= nact) break;
        float* o = part + (((size_t)row * nh + h0 + h) * nz + z) * (hd + 2);
        if (tid < hd) o[2 + tid] = a[h];
        if (tid == 0) o[0] = m[h], o[1] = l[h];
    }
}
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT, ATTN_MINB)
attn_split_f32(const float* q, const kv_t* kc, const kv_t* vc, float* part, const u32* row_pos,
               const u32* row_tab, const u32* tables, int nh, int nkv, int hd, int bs, int window,
               float scale, int nz) {
    pdl_entry();
    attn_split<ATTN_HEADS>(q, kc, vc, part, row_pos, row_tab, tables, nh, nkv, hd, bs, window, scale, nz);
}
#if ATTN_WIDE
extern "C" __global__ void __launch_bounds__(ATTN_SPLIT, ATTN_MINB)
attn_split_wide_f32(const float* q, const kv_t* kc, const kv_t* vc, float* part, const u32* row_pos,
                    const u32* row_tab, const u32* tables, int nh, int nkv, int hd, int bs, int window,
                    float scale, int nz) {
    pdl_entry();
    attn_split<ATTN_HEADS_WIDE>(q, kc, vc, part, row_pos, row_tab, tables, nh, nkv, hd, bs, window, scale, nz);
}
#endif

// Merges attn_split_f32's partials in increasing z. Grid: (rows, nh); block: (hd rounded up to 32).
extern "C" __global__ void attn_combine_f32(const float* part, float* out, const u32* row_pos, int nh, int hd,
                                            int window, int nz) {
    pdl_entry();
    const int row = blockIdx.x, head = blockIdx.y, tid = threadIdx.x;
    if (tid >= hd) return;
    const int pos = (int)row_pos[row];
    const int lo = window > 0 ? max(0, pos + 1 - window) : 0;
    const int n = pos / ATTN_SPLIT - lo / ATTN_SPLIT + 1;
    const float* base = part + ((size_t)row * nh + head) * nz * (hd + 2);
    float rm = NEG_INF, rl = 0.0f, ra = 0.0f;
    // Splits in batches of 8 whose loads go out together (a row at depth 8,192 has 33), merged
    // one at a time in increasing z as before.
    int z = 0;
    for (; z + 8 <= n; z += 8) {
        float m[8], l[8], a[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const float* o = base + (size_t)(z + u) * (hd + 2);
            m[u] = o[0], l[u] = o[1], a[u] = o[2 + tid];
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) attn_merge(z + u == 0, m[u], l[u], a[u], rm, rl, ra);
    }
    for (; z < n; ++z) {
        const float* o = base + (size_t)z * (hd + 2);
        attn_merge(z == 0, o[0], o[1], o[2 + tid], rm, rl, ra);
    }
    out[((size_t)row * nh + head) * hd + tid] = __fdiv_rn(ra, rl);
}
