// Tensor-core linear layers y = x W^T + b (BF16, Q8_0 and Q4_K weights) for every token count M, decode
// included: mma.sync m16n8k16 (bf16 inputs, f32 accumulation; PTX ISA "Matrix fragments for
// mma.m16n8k16"), weights as the A operand (16 rows x 16 k) and tokens as the n dimension, so one
// tile of 8 tokens costs what one token does and a decode row is computed by the same
// instructions as a prefill or verify row.
//
// Exactness (docs/DESIGN.md §3). Per output element (row r, token m) the operations are fixed:
//  - x is split into QTC_XSPLIT bf16 parts, hi = bf16(x), mid = bf16(x - hi), lo = bf16(x - hi -
//    mid) (3 parts: 24 bits, x itself for normal floats); weights are bf16 or int8, exact in bf16,
//    so each product of the MMA is exact in f32;
//  - K is cut into QTC_SPLIT fixed slices of whole 32-element units (from K alone); the warp of
//    slice s walks its units in increasing order; per unit, the MMAs run k-half 0 then 1, and in
//    each the parts hi, mid, lo;
//  - the MMAs of a unit accumulate into a unit sum started at 0; then BF16: acc = acc + unit,
//    Q8_0: acc = fma(d_r, unit, acc) (the scale once per unit, as QLIN_FACTOR = 1 does); Q4_K
//    (QTC_Q4_K = 1 or 2, the codes q in 0..15 as the A operand): acc = fma(d_r sc_r, unit, acc), then
//    acc = fma(-(dmin_r m_r), xsum, acc), where xsum is the unit's sum of x from the same MMAs
//    with an A of ones (so every row and form gets the same xsum), and d_r sc_r, dmin_r m_r are
//    the exact f32 products the lane kernels form;
//  - the slices' sums are added in slice order, then the bias.
// Each element of an MMA's output depends only on its own row of A, column of B and C, so none of
// this looks at M, at the token's place in its tile, or at the other tokens: rows are bit-identical
// for every M. A different rounding from the lane kernels of linear.cu (the host uses one or the
// other for every matrix of a model, never both).
//
// Weight layout (DevMatrix::upload_repacked with QTC = 1): rows in tiles of 16 (the last padded
// with zero rows), K in units of 32; per (tile, unit), lane l = 4g + t holds the A fragments of
// both k-halves h: for h = 0, 1 the pairs (row g, k 2t..2t+1), (row g+8, k 2t..2t+1), (row g,
// k 2t+8..2t+9), (row g+8, k 2t+8..2t+9), k counted from 32u + 16h.
//  - BF16: q = [tiles][units][32 lanes][32 bytes] (those 16 bf16 values).
//  - Q8_0: q = [tiles][units][32 lanes][16 bytes] (the same 16 values as int8); s =
//    [tiles][units][8] u32, word g = f16 scale of row g | f16 scale of row g+8 << 16.
//  - Q4_K: q = [tiles][units][32 lanes][8 bytes], the 16 codes as nibbles (u32 word h = k-half
//    h: slot 8h + 2r at bits 4r, slot 8h + 2r + 1 at bits 16 + 4r, r = 0..3); s = [tiles][units]
//    [8] u32, word g = sc of row g | m of row g << 8 | sc of row g+8 << 16 | m of row g+8 << 24
//    (the unit's 6-bit scale and min), then [tiles][units / 8][8] uint2 (f16 d | f16 dmin << 16
//    of row g, the same of row g+8): 18.5 bytes a row and unit, against the GGUF's 18.
#include "common.cuh"

// QTC_SPLIT and QTC_SPLIT_BIG (the K slices: part of the reduction order): common.cuh.
// Row tiles of 16 per warp (they share the warp's split of x).
#ifndef QTC_WT
#define QTC_WT 2
#endif
// Row tiles a block for the one-token entries at 1-8 tokens of the QTC_SPLIT matrices (`_n1_alt`) where
// the host finds they spread the row tiles more evenly over the SMs than QTC_WT does
// (`one_token_wt`: fewer row tiles on the busiest SM; e.g. an 8B model's Q|K|V, 384 tiles: 192
// blocks of 2 leave 60 of the H200's 132 SMs with two, 128 blocks of 3 give each at most one).
// Which block computes a row changes none of its operations. 0: no such entries.
#ifndef QTC_WT_ALT
#define QTC_WT_ALT 0
#endif
// Units whose weights a warp loads as one group.
#ifndef QTC_UNROLL
#define QTC_UNROLL 4
#endif
// 1: the next group's loads are issued before the current group's MMAs (more registers; slower
// at M = 1 on the H200 for the 16-slice matrices, research/cuda/run21 and run49).
#ifndef QTC_DB
#define QTC_DB 0
#endif
// QTC_DB for the one-token entry of the QTC_SPLIT_BIG matrices alone (`_n1_big`): run 49 on the
// H200, gate+up [28672, 4096] at M = 1 with 4 slices: 65.4 us -> 56.5 us (97% of copy
// bandwidth), while the 16-slice matrices and M = 32 got slower. Loads only: no bits change.
#ifndef QTC_DB_BIG
#define QTC_DB_BIG QTC_DB
#endif
// The Q8_0 entries' own load groups: a Q8_0 unit is 16 bytes a lane where a BF16 unit is 32, so
// at the same QTC_UNROLL a Q8_0 warp has half the bytes in flight (run 52 on the H200: QTC_UNROLL
// = 2 took the Q8_0 q/o [4096, 4096] at M = 1 from 10.7 to 9.7 us and down from 30.1 to 25.8,
// while the 4-slice gate+up with QTC_DB_BIG got slower, 42.9 -> 52.5). QTC_Q8_UNROLL: the
// one-token entry `linear_tc_q8_0_n1`; QTC_Q8_UNROLL_NT: `_n2` and `_n4` (at 16 warps a block, as
// QTC_SPLIT = 16 gives, they have 128 registers a thread and hold 16 or 32 tokens' sums: 4 units
// spill there, so set it with QTC_SPLIT = 16);
// QTC_Q8_UNROLL_BIG and QTC_Q8_DB_BIG: `_n1_big` (as QTC_DB_BIG; the big `_n2`/`_n4` keep
// QTC_UNROLL and QTC_DB). Loads only: no bits change.
#ifndef QTC_Q8_UNROLL
#define QTC_Q8_UNROLL QTC_UNROLL
#endif
#ifndef QTC_Q8_UNROLL_NT
#define QTC_Q8_UNROLL_NT QTC_UNROLL
#endif
#ifndef QTC_Q8_UNROLL_BIG
#define QTC_Q8_UNROLL_BIG QTC_UNROLL
#endif
#ifndef QTC_Q8_DB_BIG
#define QTC_Q8_DB_BIG QTC_DB_BIG
#endif
// QTC_DB for the Q8_0 one-token entry `linear_tc_q8_0_n1` alone: its units are 16 bytes a lane,
// so without double buffering a warp has QTC_Q8_UNROLL x WT (row tiles) x 16 bytes a lane in flight (64
// at the H200 defaults) and walks its slice in round trips (q/o [4096, 4096] at M = 1: 9.7 us,
// 1.7 TB/s, run 52). Loads only: no bits change. Off: run 99 on the H200 found it slower (q/o
// 9.6 -> 10.8 us, qkv 13.2 -> 19.0, Q8_0 decode bs=1 271.1 -> 254.8 tok/s).
#ifndef QTC_Q8_DB
#define QTC_Q8_DB QTC_DB
#endif

// The Q4_K entries' load groups (QTC_Q4_K = 1 or 2): a Q4_K unit is 8 bytes a lane (and the 8 bytes
// of its rows' d words), so at QTC_UNROLL a warp has a quarter of BF16's bytes in flight.
// QTC_Q4_UNROLL: `_n1` (and `_n1_big`, `_n1_alt`); QTC_Q4_UNROLL_NT: `_n2`. Loads only: no bits
// change. Q4_K has no `_n4` entries: its per-token Σx sums (4 registers a tile of 8 tokens) on
// top of the 32-token accumulators and 3 parts of x pass 128 registers at 16 warps a block.
#ifndef QTC_Q4_UNROLL
#define QTC_Q4_UNROLL QTC_UNROLL
#endif
#ifndef QTC_Q4_UNROLL_NT
#define QTC_Q4_UNROLL_NT QTC_UNROLL
#endif

// 2: the Q8_0 one-token launches (M = 1, a decode step) take entries of their own (`_m1`) with
// their own loop (tc_q8_m1_slice): x split once a warp and load group (one element a lane,
// through the warp's part of shared memory) instead of by every lane group, of which only g = 0
// holds the token; the int8 -> bf16 conversion in bf16x2 arithmetic (i8x16_to_bf16_frags); the
// scale FMAs only on the live token column; the addressing and bounds tests out of the groups.
// Run 103b found the one-token entries issue-bound; same split, exact conversion: same bits as
// the general loop. H200, run 111: Q8_0 bs=1 316 -> 331 tok/s against the first form of this
// loop (1, inside the `_n1` entries, since removed), which took 270 -> 311 (run 107).
#ifndef QTC_Q8_M1
#define QTC_Q8_M1 0
#endif

// Grid order: 0 = row tiles fastest (blockIdx.x), so the blocks running together share a token
// group and each row tile's weights come from memory once per token group; 1 = token groups
// fastest, so the blocks running together share a row tile and read its weights from L2 after
// the first (for prefill, where a 1,024-token pass has 32 token groups). Which block computes an
// output never changes its operations.
#ifndef QTC_TOKFAST
#define QTC_TOKFAST 0
#endif

// One-token entries (`_n1`, `_n1_big`): each warp asks L2 for the first QTC_M1_PREFETCH units of
// its row tiles' weights and Q8_0 scales before griddepcontrol.wait, as the lane kernels' PDL_EARLY
// prefetch does (run 57: a Q8_0 step here is 0.15 ms over its kernels' isolated sum). The weights
// are read-only for the whole forward; a prefetch changes no value. 0: off.
#ifndef QTC_M1_PREFETCH
#define QTC_M1_PREFETCH 0
#endif

// One group of G units of the M = 1 loop (QTC_Q8_M1 = 2): each lane's 16 bytes of every (unit,
// row tile), the row tiles' Q8_0 scale words, and x element k = lane of every unit.
template <int G, int WT>
struct TcM1Group {
    uint4 w[G][WT];
    u32 sc[G][WT];
    float xv[G];
};

// Loads a group at the current pointers (unit j of row tile w at wp + wo[w] + 32 j and sp + so[w]
// + 8 j, x at xp + 32 j: block-uniform and immediate offsets from one pointer each), then moves
// the pointers G units on.
template <int G, int WT>
__device__ __forceinline__ void tc_m1_load(TcM1Group<G, WT>& b, const uint4*& wp, const u32*& sp, const float*& xp,
                                           const int (&wo)[WT], const int (&so)[WT]) {
#pragma unroll
    for (int j = 0; j < G; ++j) {
        b.xv[j] = xp[32 * j];
#pragma unroll
        for (int w = 0; w < WT; ++w) {
            b.w[j][w] = wp[wo[w] + 32 * j];
            b.sc[j][w] = sp[so[w] + 8 * j];
        }
    }
    wp += 32 * G;
    sp += 8 * G;
    xp += 32 * G;
}

// A group's MMAs and scale FMAs into acc, with the general loop's operations: the warp splits each unit's x into its staging area (lane k writes element k's parts
// from `xdst`), lane t reads the B fragments back from `xsrc`, and per unit and row tile the sum
// from 0 of the MMAs (k-half 0 then 1, parts in order) is folded in by one fma with the row's
// scale, on the live token column only (c = 0, 2).
template <int G, int WT>
__device__ __forceinline__ void tc_m1_compute(const TcM1Group<G, WT>& b, u16* xdst, const u32* xsrc,
                                              float (&acc)[WT][1][4]) {
    constexpr int XW = 2 * 4 * 2 * QTC_XSPLIT;  // u32 a unit
#pragma unroll
    for (int j = 0; j < G; ++j) {
        float f = b.xv[j];
#pragma unroll
        for (int p = 0; p < QTC_XSPLIT; ++p) {
            const u32 h = pack_bf16x2(f, 0.0f);  // the rounding split_x's pack does
            xdst[2 * (j * XW + 2 * p)] = (u16)h;
            f = __fsub_rn(f, __uint_as_float(h << 16));
        }
    }
    __syncwarp();
    // Every lane group reads lane group 0's B fragments (a broadcast), so every token column of
    // the MMAs holds the token: column n of an MMA's result depends on B's column n alone, and
    // only column 0 (c = 0, 2 of lanes t = 0) is ever stored.
#pragma unroll
    for (int j = 0; j < G; ++j) {
        u32 bx[2][2][QTC_XSPLIT];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const u32* xp = xsrc + j * XW + h * 4 * 2 * QTC_XSPLIT;
            if (QTC_XSPLIT == 2) {
                const uint4 v = *reinterpret_cast<const uint4*>(xp);
                bx[h][0][0] = v.x; bx[h][1][0] = v.y;
                bx[h][0][1 % QTC_XSPLIT] = v.z; bx[h][1][1 % QTC_XSPLIT] = v.w;
            } else {
#pragma unroll
                for (int r = 0; r < 2; ++r)
#pragma unroll
                    for (int p = 0; p < QTC_XSPLIT; ++p) bx[h][r][p] = xp[2 * p + r];
            }
        }
#pragma unroll
        for (int w = 0; w < WT; ++w) {
            const u32 words[4] = {b.w[j][w].x, b.w[j][w].y, b.w[j][w].z, b.w[j][w].w};
            u32 a[2][4];
            i8x16_to_bf16_frags(words, a);
            float us[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int p = 0; p < QTC_XSPLIT; ++p) mma_bf16(us, a[h], bx[h][0][p], bx[h][1][p]);
            acc[w][0][0] = __fmaf_rn(f16_bits_to_f32((u16)(b.sc[j][w] & 0xffffu)), us[0], acc[w][0][0]);
            acc[w][0][2] = __fmaf_rn(f16_bits_to_f32((u16)(b.sc[j][w] >> 16)), us[2], acc[w][0][2]);
        }
    }
    __syncwarp();  // every lane has read the group's x before the next group's lands
}

// The M = 1 loop with QTC_Q8_M1 = 2: the warp's slice u0 .. u1 of its WT row tiles, in groups of
// U units (the next group's loads issued before this group's MMAs with DB = 1), then the slice's
// last (u1 - u0) % U units one at a time. The same units in the same order into the same
// accumulators as the general loop, with the address arithmetic out of the loop: one pointer each
// for the weights, the scales and x, moved on by a constant each group, the other row tiles at
// block-uniform offsets from it and the group's units at immediate ones; no bounds test inside a
// group (full groups only); a row tile past the matrix (the grid's last block) reads the last
// tile again, and its sums are never stored.
template <int DB, int U, int WT>
__device__ __forceinline__ void tc_q8_m1_slice(const float* __restrict__ x, const u8* __restrict__ q,
                                               const u32* __restrict__ s, int nu, int tiles, int tile0, int u0,
                                               int u1, u32* xs, float (&acc)[WT][1][4]) {
    static_assert(U * 16 * QTC_XSPLIT <= WT * 128, "a group's staged x fits the warp's part (tc_m1_fits)");
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    // The staging area `xs`: per unit, 2 k-halves h x 4 lanes t x QTC_XSPLIT parts p x 2
    // registers r, one u32 (bf16x2) each. Element k = lane of a unit: pair r = (k >> 3) & 1,
    // lane t = (k >> 1) & 3, half k >> 4, the low or high bf16 by k & 1.
    const int slot = ((lane >> 4) * 4 + ((lane >> 1) & 3)) * 2 * QTC_XSPLIT + ((lane >> 3) & 1);
    u16* xdst = reinterpret_cast<u16*>(xs) + 2 * slot + (lane & 1);
    const u32* xsrc = xs + t * 2 * QTC_XSPLIT;
    // Row tile w's data sits (tile - tile0) nu units past tile0's: a block-uniform offset.
    const size_t tu0 = (size_t)tile0 * nu + u0;
    const uint4* wp = reinterpret_cast<const uint4*>(q) + tu0 * 32 + lane;
    const u32* sp = s + tu0 * 8 + g;
    int wo[WT], so[WT];  // at most (WT - 1) nu units: small
#pragma unroll
    for (int w = 0; w < WT; ++w) {
        const int d = w == 0 ? 0 : (min(tile0 + w, tiles - 1) - tile0) * nu;
        wo[w] = d * 32;
        so[w] = d * 8;
    }
    const float* xp = x + 32 * u0 + lane;
    // `left`: the slice's units not yet loaded (one counter for both loops).
    int left = u1 - u0;
    TcM1Group<U, WT> cur;
    if (DB && left >= U) {
        tc_m1_load(cur, wp, sp, xp, wo, so);
        left -= U;
    }
    if (DB) {
        // cur holds a group; the next is loaded (if whole) before cur's MMAs.
        for (bool more = u1 - u0 >= U; more;) {
            TcM1Group<U, WT> nxt;
            more = left >= U;
            if (more) {
                tc_m1_load(nxt, wp, sp, xp, wo, so);
                left -= U;
            }
            tc_m1_compute(cur, xdst, xsrc, acc);
            cur = nxt;
        }
    } else {
        for (; left >= U; left -= U) {
            tc_m1_load(cur, wp, sp, xp, wo, so);
            tc_m1_compute(cur, xdst, xsrc, acc);
        }
    }
    for (; left > 0; --left) {
        TcM1Group<1, WT> one;
        tc_m1_load(one, wp, sp, xp, wo, so);
        tc_m1_compute(one, xdst, xsrc, acc);
    }
}

// x: [M, K] f32; q, s: the layout above; bias: [R] f32 or null; y: Outs. K % 32 == 0.
// S: slices of K and warps per block (QTC_SPLIT, or QTC_SPLIT_BIG for the `_big` entries); DB:
// QTC_DB, or QTC_Q8_DB for `linear_tc_q8_0_n1`, QTC_DB_BIG / QTC_Q8_DB_BIG for `_n1_big`; U: units a load group (QTC_UNROLL, or
// for Q8_0 QTC_Q8_UNROLL, QTC_Q8_UNROLL_NT, QTC_Q8_UNROLL_BIG); WT: row tiles a block (QTC_WT, or
// QTC_WT_ALT for the `_alt` entries); M1: 0 the general loop, 2 tc_q8_m1_slice in the `_m1`
// entries (Q8_0, NT = 1 and M = 1 only; BF16 keeps the general loop: memory-bound, and its
// one-unit groups would stage x for every unit).
// `split_canary` != 0 and M > 1: K is cut into S / 2 slices instead (a shape-dependent
// reduction, for the gates' canary arm). Grid: (ceil(ceil(R / 16) / WT), ceil(M / (8 NT))),
// the two swapped with QTC_TOKFAST;
// block: 32 * S; dynamic shared memory: S * WT * NT * 512 bytes.
template <int F, int NT, int S, int DB, int U, int WT, int M1>
__device__ __forceinline__ void linear_tc_impl(const float* __restrict__ x, const u8* __restrict__ q,
                                               const u32* __restrict__ s, const float* __restrict__ bias, Outs y,
                                               int M, int K, int R, int split_canary) {
    extern __shared__ float part[];  // [S][WT][NT][4][32]
    constexpr int WB = F == TC_BF16 ? 2 : 1;  // uint4 per lane per (tile, unit)
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int nu = K / 32;
    const int tiles = (R + 15) / 16;
    const int tile0 = (QTC_TOKFAST ? blockIdx.y : blockIdx.x) * WT;
    const int m0 = (QTC_TOKFAST ? blockIdx.x : blockIdx.y) * 8 * NT;
    const int slices = (split_canary && M > 1 && S > 1) ? S / 2 : S;
    const int per = (nu + slices - 1) / slices;
    const int u0 = warp < slices ? min(nu, warp * per) : nu;
    const int u1 = warp < slices ? min(nu, u0 + per) : nu;
    float acc[WT][NT][4];
#pragma unroll
    for (int w = 0; w < WT; ++w)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[w][n][c] = 0.0f;
    // Weights of units ub .. ub + U of each row tile (zeros past the slice or R).
    auto load = [&](int ub, uint4 (&wv)[U][WT][WB], u32 (&sc)[U][WT]) {
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const int u = ub + j;
#pragma unroll
            for (int w = 0; w < WT; ++w) {
                const int tile = tile0 + w;
                sc[j][w] = 0;
#pragma unroll
                for (int b = 0; b < WB; ++b) wv[j][w][b] = make_uint4(0, 0, 0, 0);
                if (u < u1 && tile < tiles) {
                    const size_t tu = (size_t)tile * nu + u;
                    if (F == TC_Q4_K) {
                        // The lane's codes in x, y; rows g and g+8's d and dmin in z, w.
                        const uint2 qv = reinterpret_cast<const uint2*>(q)[tu * 32 + lane];
                        const uint2 dv = q4k_dwords(s, tiles, nu, tile, u, g);
                        wv[j][w][0] = make_uint4(qv.x, qv.y, dv.x, dv.y);
                    } else {
                        const uint4* p = reinterpret_cast<const uint4*>(q) + (tu * 32 + lane) * WB;
#pragma unroll
                        for (int b = 0; b < WB; ++b) wv[j][w][b] = p[b];
                    }
                    if (F != TC_BF16) sc[j][w] = s[tu * 8 + g];
                }
            }
        }
    };
    // DB = 1: double-buffered, the next group's loads issued before this group's MMAs.
    // M1 = 2 (NT = 1 and M = 1, a decode step, Q8_0): tc_q8_m1_slice's loop, where the whole warp
    // splits each x value once (one a lane) into the warp's own part of `part` (free until the
    // slices' sums) and the scale FMAs skip the dead token column: the same split_x values reach
    // the same MMAs, so the same bits as the general loop.
    constexpr int PER_WARP = WT * NT * 4 * 32;
    if constexpr (M1 == 2) {
        tc_q8_m1_slice<DB, U, WT>(x, q, s, nu, tiles, tile0, u0, u1, reinterpret_cast<u32*>(part + warp * PER_WARP),
                                  acc);
    } else {
        uint4 wv[U][WT][WB];
        u32 sc[U][WT];
        if (DB) load(u0, wv, sc);
        for (int ub = u0; ub < u1; ub += U) {
            uint4 nwv[U][WT][WB];
            u32 nsc[U][WT];
            if (DB) load(ub + U, nwv, nsc);
            else load(ub, wv, sc);
#pragma unroll
            for (int j = 0; j < U; ++j) {
                const int u = ub + j;
                if (u >= u1) break;
                // B fragments of this unit: token m0 + 8n + g, k = 32u + 16h + 2t (+8 for reg 1).
                u32 bx[NT][2][2][QTC_XSPLIT];
#pragma unroll
                for (int n = 0; n < NT; ++n) {
                    const int m = m0 + 8 * n + g;
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int r = 0; r < 2; ++r) {
                            float2 f = make_float2(0.0f, 0.0f);
                            if (m < M) f = *reinterpret_cast<const float2*>(x + (size_t)m * K + 32 * u + 16 * h + 8 * r + 2 * t);
                            split_x(f, bx[n][h][r]);
                        }
                }
                // Q4_K: the unit's sum of x per token, by the same MMAs with an A of ones (every
                // row of the result holds it: c = 0, 2 token 2t, c = 1, 3 token 2t + 1).
                float ux[NT][4];
                if (F == TC_Q4_K) {
                    const u32 ones[4] = {0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u};
#pragma unroll
                    for (int n = 0; n < NT; ++n) {
#pragma unroll
                        for (int c = 0; c < 4; ++c) ux[n][c] = 0.0f;
#pragma unroll
                        for (int h = 0; h < 2; ++h)
#pragma unroll
                            for (int p = 0; p < QTC_XSPLIT; ++p) mma_bf16(ux[n], ones, bx[n][h][0][p], bx[n][h][1][p]);
                    }
                }
#pragma unroll
                for (int w = 0; w < WT; ++w) {
                    if (tile0 + w >= tiles) continue;
                    u32 a[2][4];
                    if (F == TC_Q4_K) {
                        q4x16_to_bf16_frags(wv[j][w][0].x, wv[j][w][0].y, a);
                    } else if (F == TC_BF16) {
                        a[0][0] = wv[j][w][0].x; a[0][1] = wv[j][w][0].y; a[0][2] = wv[j][w][0].z; a[0][3] = wv[j][w][0].w;
                        a[1][0] = wv[j][w][1].x; a[1][1] = wv[j][w][1].y; a[1][2] = wv[j][w][1].z; a[1][3] = wv[j][w][1].w;
                    } else {
                        const u32 words[4] = {wv[j][w][0].x, wv[j][w][0].y, wv[j][w][0].z, wv[j][w][0].w};
#pragma unroll
                        for (int h = 0; h < 2; ++h)
#pragma unroll
                            for (int r = 0; r < 4; ++r) a[h][r] = i8x2_to_bf16x2(words[2 * h + r / 2], 2 * (r & 1));
                    }
                    float dr[2] = {1.0f, 1.0f}, ml[2] = {0.0f, 0.0f};
                    if (F == TC_Q8_0) {
                        dr[0] = f16_bits_to_f32((u16)(sc[j][w] & 0xffffu));
                        dr[1] = f16_bits_to_f32((u16)(sc[j][w] >> 16));
                    } else if (F == TC_Q4_K) {
                        q4k_unit_factors(sc[j][w], wv[j][w][0].z, wv[j][w][0].w, dr, ml);
                    }
#pragma unroll
                    for (int n = 0; n < NT; ++n) {
                        // The unit's sum from 0 (so units are independent MMA chains), then scaled
                        // (Q8_0) or added (BF16) into the running sum.
                        float us[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                        for (int h = 0; h < 2; ++h)
#pragma unroll
                            for (int p = 0; p < QTC_XSPLIT; ++p) mma_bf16(us, a[h], bx[n][h][0][p], bx[n][h][1][p]);
#pragma unroll
                        for (int c = 0; c < 4; ++c) {
                            if (F == TC_Q4_K) {
                                acc[w][n][c] = q4k_fold(acc[w][n][c], us[c], dr[c >> 1], ml[c >> 1], ux[n][c]);
                            } else {
                                acc[w][n][c] = F == TC_Q8_0 ? __fmaf_rn(dr[c >> 1], us[c], acc[w][n][c])
                                                            : __fadd_rn(acc[w][n][c], us[c]);
                            }
                        }
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < U; ++j)
#pragma unroll
                for (int w = 0; w < WT; ++w) {
                    if (!DB) continue;
                    sc[j][w] = nsc[j][w];
#pragma unroll
                    for (int b = 0; b < WB; ++b) wv[j][w][b] = nwv[j][w][b];
                }
        }
    }
    // The slices' sums, added in slice order; element (w, n, c) of lane l is row
    // 16 (tile0 + w) + l / 4 + 8 (c / 2), token m0 + 8n + 2 (l % 4) + c % 2.
#pragma unroll
    for (int w = 0; w < WT; ++w)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int c = 0; c < 4; ++c) part[warp * PER_WARP + ((w * NT + n) * 4 + c) * 32 + lane] = acc[w][n][c];
    __syncthreads();
    for (int i = threadIdx.x; i < PER_WARP; i += blockDim.x) {
        float v = part[i];
        for (int sl = 1; sl < slices; ++sl) v = __fadd_rn(v, part[sl * PER_WARP + i]);
        const int l = i & 31, c = (i >> 5) & 3, n = (i >> 7) % NT, w = (i >> 7) / NT;
        const int row = 16 * (tile0 + w) + (l >> 2) + 8 * (c >> 1);
        const int m = m0 + 8 * n + 2 * (l & 3) + (c & 1);
        if (row < R && m < M) {
            if (bias) v = __fadd_rn(v, bias[row]);
            store_out(y, m, row, v);
        }
    }
}

// QTC_M1_PREFETCH's prefetch: the warp's slice as in linear_tc_impl; a (tile, unit) is 1,024
// (BF16), 512 (Q8_0) or 256 (Q4_K) contiguous bytes of q and 32 of s, so lane l asks for the slice
// start's 128-byte line l of each (Q4_K's d words are not asked for).
template <int F, int NT, int S, int WT>
__device__ __forceinline__ void linear_tc_prefetch(const u8* __restrict__ q, const u32* __restrict__ s, int K, int R) {
    if (QTC_M1_PREFETCH <= 0 || NT != 1) return;
    constexpr int TUB = F == TC_BF16 ? 1024 : F == TC_Q8_0 ? 512 : 256;  // bytes a (tile, unit)
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nu = K / 32, tiles = (R + 15) / 16;
    const int tile0 = (QTC_TOKFAST ? blockIdx.y : blockIdx.x) * WT;
    const int per = (nu + S - 1) / S;
    const int u0 = min(nu, warp * per), u1 = min(nu, u0 + min(per, QTC_M1_PREFETCH));
    if (warp >= S || u0 >= u1) return;
    const int lines = (u1 - u0) * TUB / 128;  // 128-byte lines of one tile's units u0 .. u1
#pragma unroll
    for (int w = 0; w < WT; ++w) {
        const int tile = tile0 + w;
        if (tile >= tiles) break;
        const size_t tu = (size_t)tile * nu + u0;
        for (int l = lane; l < lines; l += 32)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(q + tu * TUB + 128 * (size_t)l));
        if (F != TC_BF16 && 128 * lane < 32 * (u1 - u0)) asm volatile("prefetch.global.L2 [%0];" ::"l"(s + tu * 8 + 32 * lane));
    }
}

// Whether a Q8_0 one-token entry's M = 1 loop fits: a group's staged x (U units of 16
// QTC_XSPLIT words) in the warp's part of `part` (WT NT 128 words); otherwise (e.g. QTC_WT = 1
// with 3 parts and 4 units) the general loop.
template <int F, int NT, int U, int WT>
__host__ __device__ constexpr bool tc_m1_fits() {
    return F == TC_Q8_0 && NT == 1 && U * 16 * QTC_XSPLIT <= WT * NT * 128;
}

// Entries per format and n-tiles per block (NT = 1, 2, 4: up to 8, 16, 32 tokens a block), with
// QTC_SPLIT slices, and with QTC_SPLIT_BIG slices as `..._big` when that is set.
#define LINEAR_TC_WT(name, F, NT, S, DB, U, WT)                                                     \
    extern "C" __global__ void __launch_bounds__(32 * S)                                            \
        name(const float* x, const u8* q, const u32* s, const float* bias, LIN_OUT_PARAMS,         \
             int split_canary) {                                                                   \
        linear_tc_prefetch<F, NT, S, WT>(q, s, K, R);                                              \
        pdl_entry();                                                                               \
        linear_tc_impl<F, NT, S, DB, U, WT, 0>(x, q, s, bias, LIN_OUTS, M, K, R, split_canary);     \
    }
#define LINEAR_TC(name, F, NT, S, DB, U) LINEAR_TC_WT(name, F, NT, S, DB, U, QTC_WT)

LINEAR_TC(linear_tc_bf16_n1, TC_BF16, 1, QTC_SPLIT, QTC_DB, QTC_UNROLL)
LINEAR_TC(linear_tc_bf16_n2, TC_BF16, 2, QTC_SPLIT, QTC_DB, QTC_UNROLL)
LINEAR_TC(linear_tc_bf16_n4, TC_BF16, 4, QTC_SPLIT, QTC_DB, QTC_UNROLL)
LINEAR_TC(linear_tc_q8_0_n1, TC_Q8_0, 1, QTC_SPLIT, QTC_Q8_DB, QTC_Q8_UNROLL)
LINEAR_TC(linear_tc_q8_0_n2, TC_Q8_0, 2, QTC_SPLIT, QTC_DB, QTC_Q8_UNROLL_NT)
LINEAR_TC(linear_tc_q8_0_n4, TC_Q8_0, 4, QTC_SPLIT, QTC_DB, QTC_Q8_UNROLL_NT)
LINEAR_TC(linear_tc_q4_k_n1, TC_Q4_K, 1, QTC_SPLIT, QTC_DB, QTC_Q4_UNROLL)
LINEAR_TC(linear_tc_q4_k_n2, TC_Q4_K, 2, QTC_SPLIT, QTC_DB, QTC_Q4_UNROLL_NT)
#if QTC_WT_ALT > 0
LINEAR_TC_WT(linear_tc_bf16_n1_alt, TC_BF16, 1, QTC_SPLIT, QTC_DB, QTC_UNROLL, QTC_WT_ALT)
LINEAR_TC_WT(linear_tc_q8_0_n1_alt, TC_Q8_0, 1, QTC_SPLIT, QTC_Q8_DB, QTC_Q8_UNROLL, QTC_WT_ALT)
LINEAR_TC_WT(linear_tc_q4_k_n1_alt, TC_Q4_K, 1, QTC_SPLIT, QTC_DB, QTC_Q4_UNROLL, QTC_WT_ALT)
#endif
#if QTC_SPLIT_BIG > 0
LINEAR_TC(linear_tc_bf16_n1_big, TC_BF16, 1, QTC_SPLIT_BIG, QTC_DB_BIG, QTC_UNROLL)
LINEAR_TC(linear_tc_bf16_n2_big, TC_BF16, 2, QTC_SPLIT_BIG, QTC_DB, QTC_UNROLL)
LINEAR_TC(linear_tc_bf16_n4_big, TC_BF16, 4, QTC_SPLIT_BIG, QTC_DB, QTC_UNROLL)
LINEAR_TC(linear_tc_q8_0_n1_big, TC_Q8_0, 1, QTC_SPLIT_BIG, QTC_Q8_DB_BIG, QTC_Q8_UNROLL_BIG)
LINEAR_TC(linear_tc_q8_0_n2_big, TC_Q8_0, 2, QTC_SPLIT_BIG, QTC_DB, QTC_UNROLL)
LINEAR_TC(linear_tc_q8_0_n4_big, TC_Q8_0, 4, QTC_SPLIT_BIG, QTC_DB, QTC_UNROLL)
LINEAR_TC(linear_tc_q4_k_n1_big, TC_Q4_K, 1, QTC_SPLIT_BIG, QTC_DB_BIG, QTC_Q4_UNROLL)
LINEAR_TC(linear_tc_q4_k_n2_big, TC_Q4_K, 2, QTC_SPLIT_BIG, QTC_DB, QTC_Q4_UNROLL_NT)
#endif

// QTC_Q8_M1 = 2: Q8_0 entries for M = 1 alone (the host sends a Q8_0 matrix's one-token launches
// here), running tc_q8_m1_slice's loop, with the `_n1` entries' slices, row tiles and load groups
// (so the same bits); `_m1_big` and `_m1_alt` as `_n1_big` and `_n1_alt`. Without the general loop
// beside it the loop needs 61 registers (NVRTC 13.0, sm_90a, the H200 defines), so two blocks of
// 16 warps fit an SM, as with the `_n1` entries.
#if QTC_Q8_M1 == 2
#define LINEAR_TC_M1(name, S, DB, U, WT)                                                           \
    extern "C" __global__ void __launch_bounds__(32 * S)                                            \
        name(const float* x, const u8* q, const u32* s, const float* bias, LIN_OUT_PARAMS,         \
             int split_canary) {                                                                   \
        linear_tc_prefetch<TC_Q8_0, 1, S, WT>(q, s, K, R);                                         \
        pdl_entry();                                                                               \
        if (M != 1) __trap(); /* the host sends one token only: anything else is its bug */       \
        linear_tc_impl<TC_Q8_0, 1, S, DB, U, WT, tc_m1_fits<TC_Q8_0, 1, U, WT>() ? 2 : 0>(        \
            x, q, s, bias, LIN_OUTS, M, K, R, split_canary);                                       \
    }
LINEAR_TC_M1(linear_tc_q8_0_m1, QTC_SPLIT, QTC_Q8_DB, QTC_Q8_UNROLL, QTC_WT)
#if QTC_WT_ALT > 0
LINEAR_TC_M1(linear_tc_q8_0_m1_alt, QTC_SPLIT, QTC_Q8_DB, QTC_Q8_UNROLL, QTC_WT_ALT)
#endif
#if QTC_SPLIT_BIG > 0
LINEAR_TC_M1(linear_tc_q8_0_m1_big, QTC_SPLIT_BIG, QTC_Q8_DB_BIG, QTC_Q8_UNROLL_BIG, QTC_WT)
#endif
#endif

// The tiled form for many tokens (QTC_GEMM = 1, `linear_tcg_*`): kernels/linear_tct.cu.
