// The tiled tensor-core linear layers on Hopper's warpgroup MMA (QTC_GEMM = 3, from QTC_GEMM_MIN
// tokens; sm_90a only): y = x W^T + b for BF16, Q8_0 and (QTC_Q4_K = 2) Q4_K weights in
// linear_tc.cu's tile-unit layout, bit-identical to every other tensor-core form (docs/DESIGN.md
// §3).
//
// Why (research/cuda-notes.md, runs 59-60): with mma.sync every m16n8k16 is its own instruction
// fed by shared loads, and the 7-9 instructions around each one bound the tiled GEMM at about a
// third of the tensor pipe. wgmma.mma_async (PTX ISA 9.7.15) computes m64nNk16 as one
// asynchronous instruction with B read from shared memory by descriptor. Run 61
// (research/cuda/probe_wgmma.cu): m64n8k16 and m64n32k16, A from registers or from shared memory,
// give mma.sync m16n8k16's bits on 8.4 M elements (each element: the same 16 products plus the
// accumulator), so one wgmma m64n64k16 stands for 32 m16n8k16 with the same sums.
//
// Exactness: per output element (row, token) the chain is linear_tc_impl's, unchanged: K cut into
// `slices` fixed slices of whole 32-element units (the host passes the count, from the matrix's
// shape, halved for the gates' canary); units in increasing order; per unit a sum started at 0
// (the first MMA with scale-d = 0) of the MMAs k-half 0 then 1, in each the parts hi, mid, lo;
// then BF16 acc = acc + unit, Q8_0 acc = fma(d_row, unit, acc), Q4_K q4k_fold with the unit's
// sum of x from `tcw_xsum` (the one-token entries' ones-MMA chain); a slice's sum folded into
// the total at the slice's end (the first as is, empty slices adding 0), then the bias.
//
// Shape of a block: TCW_WG warpgroups, each 64 rows (warp w of the group: row tile w, its A
// fragments from the staged tile-unit layout into registers, the RS form of wgmma) by 128 tokens
// in two halves of 64 (one m64n64k16 a half, k-half and part). Per unit both halves' MMAs go in
// as two commit groups; half 0's sum is folded into its running sum while half 1's MMAs run.
// Weights and x reach shared memory through one cp.async pipeline of TCW_STAGES units; x is split
// into its bf16 parts once per call by `tcw_split_x`, in the core-matrix order wgmma's descriptor
// reads.
#include "common.cuh"
#include "wgmma.cuh"

// Warpgroups (of 64 rows) a block.
#ifndef TCW_WG
#define TCW_WG 2
#endif
// Units of 32 elements in flight in the shared-memory pipeline.
#ifndef TCW_STAGES
#define TCW_STAGES 4
#endif
// 1: the units reach shared memory by bulk copies (cp.async.bulk, the TMA engine, one per
// contiguous (token block, unit) of x and (row tile, unit) of weights, issued by the lanes of
// warp 0) completing on an mbarrier a stage, instead of every thread's 16-byte cp.async (6 a
// thread and unit at TCW_WG = 2). Copies only: no bits change.
#ifndef TCW_BULK
#define TCW_BULK 0
#endif
// Units a block computes between two of its barriers (1 to 4): with more than 1, each barrier
// waits for TCW_UPB staged units and frees the TCW_UPB before them, and each unit's MMAs go in
// while the one before it is folded, so a warpgroup's tensor pipe waits out a barrier, A fragment
// read and last fold once every TCW_UPB units instead of every unit (the warpgroups meet at each
// barrier). ptxas serializes wgmma when A registers are defined while one is in flight, so the
// fragments of a group's units are read before its first MMA. Units are staged TCW_STAGES -
// TCW_UPB ahead of a group. The same MMAs and folds in the same order: no bits change.
#ifndef TCW_UPB
#define TCW_UPB 1
#endif
// The same for the Q8_0 and Q4_K entries, whose A fragments and folds take more instructions a
// unit (run 123, H100, M = 1,024: Q8_0 -10 to -12% at 2-3 units, BF16 +0 to +11% slower: the BF16
// form is bound by its 24 KiB a unit and block from L2, not by the waits).
#ifndef TCW_UPB_Q
#define TCW_UPB_Q TCW_UPB
#endif
// 1: clusters of 2 blocks along the rows (the host launches with cluster dimension (1, 2, 1) and
// an even grid y) share each unit of x: block rank r of a cluster copies token blocks 8r .. 8r + 7
// of the unit by bulk copies multicast into both blocks' shared memory, completing bytes on each
// block's "full" mbarrier of the stage; each block still copies its own weights by cp.async. A
// stage is refilled only after both blocks have read it: each block's thread 0 arrives on both
// blocks' count-2 "empty" mbarrier of a stage once past its barrier after the unit, and the
// copying thread waits on its own. L2 to shared memory traffic a unit and block: BF16 24 -> 16
// KiB, Q8_0 20.3 -> 12.3 (run 123: the form is bound by it). Needs TCW_BULK = 0 (or TCW_WS = 1: then
// the producer warps copy, see TCW_WS), TCW_UPB and
// TCW_UPB_Q 1, TCW_STAGES 3 or more (units are staged TCW_STAGES - 2 ahead: a stage is refilled
// one unit after both blocks freed it). Copies only: no bits change. Run 124 (H100, M = 1,024):
// green, but the BF16 GEMM 1.32x slower than without (q/o 198 -> 262 us, gate+up 1,282 -> 1,672)
// at 4-6 stages; off.
#ifndef TCW_CLUSTER
#define TCW_CLUSTER 0
#endif
// 1 (with TCW_BULK = 1): warp specialization, as CUTLASS's sm90 warp-specialized mainloops. One
// more warp a block (the producer, 32 threads past the 128 TCW_WG that compute) issues every
// unit's bulk copies into stage v % TCW_STAGES once the stage's "empty" mbarrier (count: the
// computing warps) says every computing warp is past unit v - TCW_STAGES; the computing
// warpgroups wait only on each stage's "full" mbarrier and arrive on its "empty" one after their
// MMAs of the unit have completed. No block barrier a unit, and no copy in the computing warps'
// path: run 63's TCW_BULK = 1 was 1.8x slower because warp 0 issued the copies and every warp
// met it at a barrier a unit (stalls: barrier 4.2, gmma 2.9 a instruction). The producer can run
// TCW_STAGES units ahead. With TCW_CLUSTER = 1 as well, the producer of block rank r multicasts
// token blocks 8r .. 8r + 7 of x into both blocks of the cluster and copies its own weights; each
// stage's empty barrier then counts one arrival a computing warp of both blocks (4 TCW_WG x 2),
// since both producers write every stage of both blocks. Copies only: no bits change.
#ifndef TCW_WS
#define TCW_WS 0
#endif
// 1 (with TCW_WS = 1): the producer warp's copies are tensor copies (cp.async.bulk.tensor.3d, the
// TMA's tiled mode) through tensor maps the host encodes per launch (kernel parameters, 128 bytes
// each; engine/src/backend/cuda/tma.rs): one copy a unit for x (16 token blocks; TCW_CLUSTER: this
// block's 8, multicast), one for the weights of the block's 4 TCW_WG row tiles, one for their
// scales (Q8_0, Q4_K) and one for Q4_K's Σx, instead of 24 1-D bulk copies of 1 KiB or less.
// Run 125 (H100): the 1-D copies make TCW_WS 1.84x slower than the cp.async ring at any stage
// count (a rate, not a latency). Boxes partly past the matrix or the slab are zero-filled and count
// their full bytes on the barrier; none lies wholly outside. Copies only: no bits change.
#ifndef TCW_TMA
#define TCW_TMA 0
#endif
// 0 (with TCW_WS = 1): the Q8_0 and Q4_K entries keep the cp.async ring (as TCW_BULK = TCW_WS =
// TCW_TMA = 0) while the BF16 entries take the producer warp. Run 127 (H200, M = 1,024, TCW_TMA):
// BF16 gate+up -11%, down -12%, but Q8_0 and Q4_K +2 to +22% on every shape. Copies only: no
// bits change. 1 (the default with TCW_WS = 1): every format as TCW_WS says.
#ifndef TCW_WS_Q
#define TCW_WS_Q TCW_WS
#endif
// 1 (with TCW_WS = 1, TCW_WG = 2 and one unit a group): the two warpgroups take turns at the tensor
// pipe. Warpgroup 1 issues a unit's MMAs only after warpgroup 0 has issued that unit's, and
// warpgroup 0 the next unit's only after warpgroup 1 has issued this one's (named barriers 1 and
// 2), so one warpgroup's fold, empty-barrier arrival, full-barrier wait and A fragment reads run
// while the other's MMAs do (CUTLASS's ping-pong consumers, per unit rather than per tile).
// Without it both warpgroups issue, wait and fold together (run 128d, H100, qkv at M = 1,024: the
// tensor pipe active 38.5%). Same MMAs and folds in the same order in each warpgroup: no bits
// change. Measured (H100): 39.7% active, TTFT -1.9% (runs 133-134); after the descriptors became
// one add each, 0.4 ms slower than without it (run 135b): off.
#ifndef TCW_PP
#define TCW_PP 0
#endif
// Whether format F's entries keep the cp.async ring under TCW_WS_Q = 0, and their producer warp.
#define TCW_Q_RING(F) ((F) != TC_BF16 && TCW_WS && !TCW_WS_Q)
#define TCW_WS_OF(F) (TCW_Q_RING(F) ? 0 : TCW_WS)
#define TCW_N 128  // tokens a block

// x as bf16 parts in wgmma's K-major core-matrix order. x: [m_base + mc, K] f32 (tokens m_base ..
// m_base + mc used); xs: [ceil(mc / 8) token blocks][K / 32 units][QTC_XSPLIT parts][4 k-blocks]
// [8 tokens][8 k] bf16: 512 bytes a (token block, unit, part), one 128-byte core matrix a k-block
// (row = token, 16 bytes = 8 consecutive k); tokens past mc are zeros. The parts are split_x's.
// Grid: (K / 32, ceil(ceil(mc / 8) / 8)); block 256 (warp: a token block; lane 4 tok + kb).
extern "C" __global__ void __launch_bounds__(256) tcw_split_x(const float* x, uint4* xs, int m_base, int mc, int K) {
    pdl_entry();
    constexpr int P = QTC_XSPLIT;
    const int nu = K / 32, u = blockIdx.x;
    const int tb = blockIdx.y * 8 + (threadIdx.x >> 5);
    const int tok = (threadIdx.x >> 2) & 7, kb = threadIdx.x & 3;
    if (tb * 8 >= mc) return;
    const int m = tb * 8 + tok;
    float4 f0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), f1 = f0;
    if (m < mc) {
        const float4* src = reinterpret_cast<const float4*>(x + (size_t)(m_base + m) * K + 32 * u + 8 * kb);
        f0 = src[0];
        f1 = src[1];
    }
    u32 w[4][P];
    split_x(make_float2(f0.x, f0.y), w[0]);
    split_x(make_float2(f0.z, f0.w), w[1]);
    split_x(make_float2(f1.x, f1.y), w[2]);
    split_x(make_float2(f1.z, f1.w), w[3]);
    uint4* dst = xs + ((size_t)tb * nu + u) * P * 32 + kb * 8 + tok;
#pragma unroll
    for (int p = 0; p < P; ++p) dst[p * 32] = make_uint4(w[0][p], w[1][p], w[2][p], w[3][p]);
}

// Σx of each 32-element unit of each token, for the Q4_K form's min term: xsum [K / 32][ld] f32,
// element (u, m) the unit's sum of x of token m_base + m, computed as linear_tc_impl's `ux`: the
// split_x parts of x through mma.sync m16n8k16 with an A of ones, from 0, k-half 0 then 1, parts
// in order (wgmma gives mma.sync's bits, run 61), so every form adds the same Σx. Tokens mc .. ld:
// zeros. Grid: (K / 32, ld / 64); block 256 (warp w: tokens 8w .. 8w + 7 of the block's 64).
extern "C" __global__ void __launch_bounds__(256) tcw_xsum(const float* x, float* xsum, int m_base, int mc, int K,
                                                          int ld) {
    pdl_entry();
    const int u = blockIdx.x, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.y * 64 + (threadIdx.x >> 5) * 8, m = m0 + g;
    if (m0 >= ld) return;
    u32 bx[2][2][QTC_XSPLIT];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float2 f = make_float2(0.0f, 0.0f);
            if (m < mc) f = *reinterpret_cast<const float2*>(x + (size_t)(m_base + m) * K + 32 * u + 16 * h + 8 * r + 2 * t);
            split_x(f, bx[h][r]);
        }
    const u32 ones[4] = {0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u};
    float ux[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int p = 0; p < QTC_XSPLIT; ++p) mma_bf16(ux, ones, bx[h][0][p], bx[h][1][p]);
    // Every row of the result holds the sums: c = 0 token 2t, c = 1 token 2t + 1.
    if (g == 0) *reinterpret_cast<float2*>(xsum + (size_t)u * ld + m0 + 2 * t) = make_float2(ux[0], ux[1]);
}

// xs: tcw_split_x's output for tokens m_base .. m_base + mc; q, s: linear_tc.cu's layout; bias:
// [R] f32 or null; y: Outs, token m_base + m for the slab's token m; xsum, ld (Q4_K only, else
// unused): tcw_xsum's output for the same tokens, ld a multiple of 128 covering them. Grid:
// (ceil(mc / 128), ceil(ceil(R / 16) / (4 TCW_WG))), token blocks fastest (the blocks running
// together share a row block's weights through L2); block 128 TCW_WG (+ 32 where TCW_WS_OF(F): the
// producer warp); dynamic shared memory:
// TCW_STAGES units of (x: QTC_XSPLIT x 8 KiB, weights: 4 TCW_WG tiles of 1,024 bytes BF16, 544
// Q8_0 or 288 Q4_K, then Q4_K's Σx of the block's 128 tokens, 512 bytes), then the slice totals,
// 64 x 128 TCW_WG f32 (host: linear_tcg.rs, tcw_smem_bytes).
template <int F>
__device__ __forceinline__ void linear_tcw_impl(const uint4* __restrict__ xs, const u8* __restrict__ q,
                                                const u32* __restrict__ s, const float* __restrict__ bias, Outs y,
                                                int m_base, int mc, int K, int R, int slices,
                                                const float* __restrict__ xsum, int ld, const TmaMap* mx,
                                                const TmaMap* mw, const TmaMap* ms, const TmaMap* mxs) {
#if TCW_HAVE_WGMMA
    static_assert(TCW_STAGES >= 2, "a unit is staged while the one before it runs");
    constexpr int P = QTC_XSPLIT;
    constexpr int MT = 4 * TCW_WG;                 // row tiles a block
    constexpr int NTH = 128 * TCW_WG;              // computing threads a block
    constexpr int WB = F == TC_BF16 ? 1024 : F == TC_Q8_0 ? 512 : 256;  // bytes of one (tile, unit)'s weights
    constexpr int SB = F == TC_BF16 ? 0 : 32;      // and of its scales
    constexpr int XSB = F == TC_Q4_K ? 4 * TCW_N : 0;  // Q4_K: Σx of the block's tokens
    constexpr int X_UNIT = P * (TCW_N / 8) * 512;  // [token block][part][k-block][8][8] bf16
    constexpr int STAGE = X_UNIT + MT * (WB + SB) + XSB;
    // This format's copy form: TCW_BULK, TCW_WS and TCW_TMA, or the cp.async ring (TCW_WS_Q = 0).
    constexpr bool QR = TCW_Q_RING(F);
    constexpr int BULK = QR ? 0 : TCW_BULK, WSP = QR ? 0 : TCW_WS, TMA = QR ? 0 : TCW_TMA;
    static_assert(!TCW_PP || (TCW_WS && TCW_WG == 2 && TCW_UPB == 1),
                  "TCW_PP needs TCW_WS 1, TCW_WG 2 and TCW_UPB 1");
    extern __shared__ __align__(128) u8 tcw_smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int nu = K / 32;
    const int tiles = (R + 15) / 16;
    const int tile0 = blockIdx.y * MT;
    const int tb0 = blockIdx.x * (TCW_N / 8);
    const int ntb = (mc + 7) / 8;
    const int per = (nu + slices - 1) / slices;

    // Unit u (x parts, weights, scales) into buffer `buf`; past the last unit, tile or token
    // block: zeros. A thread's chunks are fixed for the whole K walk, so their sources (at unit
    // 0), shared-memory offsets and validity are computed once; a unit adds its stride. The
    // loops have compile-time trip counts (a branch-free, unrolled copy: run 62's first version
    // spent several hundred instructions a thread and unit here).
    constexpr int XC = P * (TCW_N / 8) * 32;  // 16-byte chunks of x a unit
    constexpr int WC = MT * (WB / 16);        // of weights
    constexpr int SC = F == TC_BF16 ? 0 : MT * 2;  // of scales
    constexpr int XSC = XSB / 16;                  // of Σx (Q4_K)
    constexpr int XI = (XC + NTH - 1) / NTH, WI = (WC + NTH - 1) / NTH, SI = (SC + NTH - 1) / NTH;
    static_assert(XSC <= NTH, "one Σx chunk a thread");
    const uint4* xsrc[XI];
    u32 xdst[XI];
    bool xok[XI];
#pragma unroll
    for (int i = 0; i < XI; ++i) {
        const int c = tid + i * NTH;
        const int p = c / ((TCW_N / 8) * 32), rest = c % ((TCW_N / 8) * 32), tb = rest >> 5;
        xok[i] = c < XC && tb0 + tb < ntb;
        xsrc[i] = xok[i] ? xs + ((size_t)(tb0 + tb) * nu * P + p) * 32 + (rest & 31) : xs;
        xdst[i] = tb * (P * 512) + p * 512 + (rest & 31) * 16;
    }
    const u8* wsrc[WI];
    u32 wdst[WI];
    bool wok[WI];
#pragma unroll
    for (int i = 0; i < WI; ++i) {
        const int c = tid + i * NTH;
        const int tl = c / (WB / 16), off = c % (WB / 16);
        wok[i] = c < WC && tile0 + tl < tiles;
        wsrc[i] = wok[i] ? q + (size_t)(tile0 + tl) * nu * WB + off * 16 : q;
        // BF16: each lane's two 16-byte halves to two planes of 32 (conflict-free loads); the
        // bulk copies keep the global order.
        wdst[i] = X_UNIT + tl * WB + (F == TC_BF16 && !BULK ? (off & 1) * 32 + (off >> 1) : off) * 16;
    }
    const u8* ssrc[SI > 0 ? SI : 1];
    u32 sdst[SI > 0 ? SI : 1];
    bool sok[SI > 0 ? SI : 1];
#pragma unroll
    for (int i = 0; i < SI; ++i) {
        const int c = tid + i * NTH;
        const int tl = c >> 1, half = c & 1;
        sok[i] = c < SC && tile0 + tl < tiles;
        ssrc[i] = sok[i] ? reinterpret_cast<const u8*>(s) + (size_t)(tile0 + tl) * nu * 32 + half * 16 : q;
        sdst[i] = X_UNIT + MT * WB + tl * 32 + half * 16;
    }
    // Q4_K: Σx of unit u, tokens 8 tb0 .. + 128 (ld covers them: no guard), chunk tid.
    const float* xssrc = F == TC_Q4_K ? xsum + 8 * tb0 + 4 * tid : xsum;
    constexpr u32 XS_OFF = X_UNIT + MT * (WB + SB);
    // A source past the last unit is never read (the copy's source size is then 0).
    auto load = [&](int u, int buf) {
        u8* base = tcw_smem + buf * STAGE;
        const bool in = u < nu;
#pragma unroll
        for (int i = 0; i < XI; ++i)
            if (!TCW_CLUSTER && tid + i * NTH < XC) tcg_cp16(base + xdst[i], xsrc[i] + u * (P * 32), xok[i] && in);
#pragma unroll
        for (int i = 0; i < WI; ++i)
            if (tid + i * NTH < WC) tcg_cp16(base + wdst[i], wsrc[i] + u * WB, wok[i] && in);
#pragma unroll
        for (int i = 0; i < SI; ++i)
            if (tid + i * NTH < SC) tcg_cp16(base + sdst[i], ssrc[i] + u * 32, sok[i] && in);
        if (F == TC_Q4_K && tid < XSC) tcg_cp16(base + XS_OFF + 16 * tid, xssrc + (size_t)u * ld, in);
    };
    // TCW_BULK: unit u into buffer `buf` by warp 0, lane i taking copy i (x of token block i,
    // then weights and scales of row tile i); blocks and tiles past the matrix are not copied
    // (their stale shared memory only reaches outputs that are never stored: an element depends
    // on its own row and token alone). Completes on the buffer's mbarrier.
    u32* bars = reinterpret_cast<u32*>(tcw_smem + TCW_STAGES * STAGE + 64 * NTH * 4);
    const u32 bar0 = (u32)__cvta_generic_to_shared(bars);
    // (TCW_CLUSTER: the grid's y is rounded up to even, so a block may have no row tile.)
    const int nxb = min(TCW_N / 8, ntb - tb0), nwt = TCW_CLUSTER ? max(0, min(MT, tiles - tile0)) : min(MT, tiles - tile0);
    // TCW_CLUSTER without TCW_WS (by thread 0): x of unit v into stage b of both blocks, this block's half of its
    // token blocks, once both blocks have read the stage's unit before (v - TCW_STAGES: the
    // "empty" barrier's phase v / TCW_STAGES - 1); this block's "full" barrier expects the whole
    // unit, from both blocks' copies. Token blocks past the slab are not copied (as TCW_BULK).
    // "full" barriers at bar0 + 8 b, "empty" ones at bar0 + 8 (TCW_STAGES + b).
    u32 rank = 0;
    if (TCW_CLUSTER) asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    const u32 empty0 = bar0 + 8 * TCW_STAGES;
    auto x_multicast = [&](int v, int b) {
        if (v >= TCW_STAGES) tcw_bar_wait(empty0 + 8 * b, (v / TCW_STAGES - 1) & 1);
        tcw_bar_expect(bar0 + 8 * b, nxb * (P * 512));
        const u32 base = (u32)__cvta_generic_to_shared(tcw_smem + b * STAGE);
        for (int i = 8 * (int)rank; i < min(8 * (int)rank + 8, nxb); ++i)
            tcw_bulk_mc(base + i * (P * 512), xs + ((size_t)(tb0 + i) * nu + v) * P * 32, P * 512, bar0 + 8 * b);
    };
    auto bulk_load = [&](int u, int buf) {
        const u32 base = (u32)__cvta_generic_to_shared(tcw_smem + buf * STAGE);
        const u32 bar = bar0 + 8 * buf;
        if (TMA) {
            // One tensor copy an operand, by lanes 0-3; a box partly past the matrix or the slab
            // is zero-filled and counts its full bytes. x: this block's token blocks
            // (TCW_CLUSTER: its half of them, into both blocks, whose full barriers expect both
            // halves). No box lies wholly outside its tensor: rank 1's half of x is not copied
            // (nor expected) when the slab has no token block past tb0 + 7, a block past the
            // last row tile copies no weights (their stale shared memory, as TCW_BULK's, only
            // reaches outputs that are never stored).
            const bool xh = !TCW_CLUSTER || nxb > 8;
            if (lane == 0) tcw_bar_expect(bar, (xh ? X_UNIT : X_UNIT / 2) + (nwt > 0 ? MT * (WB + SB) : 0) + XSB);
            __syncwarp();
            const int xr = TCW_CLUSTER ? 8 * (int)rank : 0;
            if (lane == 0) {
                if (rank == 0 || xh) tcw_tma3(base + xr * (P * 512), mx, 0, u, tb0 + xr, bar, TCW_CLUSTER);
            } else if (lane == 1 && nwt > 0) {
                tcw_tma3(base + X_UNIT, mw, 0, u, tile0, bar, false);
            } else if (lane == 2 && SB > 0 && nwt > 0) {
                tcw_tma3(base + X_UNIT + MT * WB, ms, 0, u, tile0, bar, false);
            } else if (lane == 3 && XSB > 0) {
                tcw_tma3(base + XS_OFF, mxs, 4 * tb0, u, 0, bar, false);
            }
            return;
        }
        if (lane == 0)
            tcw_bar_expect(bar, nxb * (P * 512) + nwt * (WB + SB) + XSB);
        __syncwarp();
        const int ncopy = nxb + nwt * (F == TC_BF16 ? 1 : 2) + (F == TC_Q4_K ? 1 : 0);
        for (int i = lane; i < ncopy; i += 32) {
            if (F == TC_Q4_K && i == ncopy - 1) {
                tcw_bulk(base + XS_OFF, xsum + (size_t)u * ld + 8 * tb0, XSB, bar);
            } else if (i < nxb) {
                // TCW_CLUSTER (with TCW_WS): this block's half of the token blocks, into both blocks.
                if (!TCW_CLUSTER)
                    tcw_bulk(base + i * (P * 512), xs + ((size_t)(tb0 + i) * nu + u) * P * 32, P * 512, bar);
                else if ((i >> 3) == (int)rank)
                    tcw_bulk_mc(base + i * (P * 512), xs + ((size_t)(tb0 + i) * nu + u) * P * 32, P * 512, bar);
            } else if (i < nxb + nwt) {
                const int tl = i - nxb;
                tcw_bulk(base + X_UNIT + tl * WB, q + ((size_t)(tile0 + tl) * nu + u) * WB, WB, bar);
            } else {
                const int tl = i - nxb - nwt;
                tcw_bulk(base + X_UNIT + MT * WB + tl * 32,
                         reinterpret_cast<const u8*>(s) + ((size_t)(tile0 + tl) * nu + u) * 32, 32, bar);
            }
        }
    };
    // This warp's A fragments and row factors of unit u (in buffer u % TCW_STAGES): BF16 and
    // Q8_0 by tc_staged_a; Q4_K its lane's 8 bytes of codes, the tile's scale word g and the
    // super-block's d words (dv, loaded from global memory a super-block ahead: dvn).
    const int tl = warp;  // row tile within the block: warpgroup warp / 4, warp warp % 4 in it
    const bool tile_in = tile0 + tl < tiles;
    uint2 dv = make_uint2(0u, 0u), dvn = make_uint2(0u, 0u);
    if (F == TC_Q4_K && tile_in) {
        dv = q4k_dwords(s, tiles, nu, tile0 + tl, 0, g);
        if (nu > 8) dvn = q4k_dwords(s, tiles, nu, tile0 + tl, 8, g);
    }
    auto read_a = [&](int u, u32 (&a)[2][4], float (&d)[2], float (&ml)[2]) {
        const u8* W = tcw_smem + (u % TCW_STAGES) * STAGE + X_UNIT;
        if (F == TC_Q4_K) {
            if (u > 0 && u % 8 == 0) {
                dv = dvn;
                if (tile_in && u + 8 < nu) dvn = q4k_dwords(s, tiles, nu, tile0 + tl, u + 8, g);
            }
            const uint2 c = reinterpret_cast<const uint2*>(W + tl * WB)[lane];
            q4x16_to_bf16_frags(c.x, c.y, a);
            q4k_unit_factors(reinterpret_cast<const u32*>(W + MT * WB + tl * 32)[g], dv.x, dv.y, d, ml);
        } else {
            tc_staged_a<F, !BULK>(W + tl * WB, W + MT * WB + tl * 32, lane, a, d);
        }
    };
    // Issue half `hn`'s MMAs of unit u (k-half 0 then 1, parts in order; the first from 0).
    // The descriptors are made before the fence: ptxas serializes wgmma when a register one
    // reads is defined between the fence and the commit.
    // The descriptors differ from the block's first one (dlo, dhi) only in the start address
    // field, the low word's bits 0-13: an operand at byte offset o of the block's shared memory
    // (o a multiple of 16, the whole under 256 KiB, so no carry leaves the field) has low word
    // dlo + o / 16. One add a descriptor instead of the address arithmetic (tcw_desc's fields):
    // run 135b (H100, M = 1,024) BF16 4.6-7% faster a matrix, TTFT of 1,024 tokens 103.0 -> 98.7 ms.
    const unsigned long long d0 = tcw_desc(tcw_smem, P * 512);
    const u32 dlo = (u32)d0, dhi = (u32)(d0 >> 32);
    auto issue = [&](int u, int hn, const u32 (&a)[2][4], float (&us)[32]) {
        const u32 xlo = dlo + (u32)(((u % TCW_STAGES) * STAGE + hn * (TCW_N / 16) * (P * 512)) >> 4);
        unsigned long long desc[2][P];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int p = 0; p < P; ++p) {
                // Through an asm volatile, so the compiler cannot sink it past the fence.
                asm volatile("mov.b64 %0, {%1, %2};\n" : "=l"(desc[h][p]) : "r"(xlo + (p * 512 + h * 256) / 16), "r"(dhi));
            }
        int from0, acc_on;  // scale-d of the first MMA and of the rest, pinned the same way
        asm volatile("mov.b32 %0, 0;\n" : "=r"(from0));
        asm volatile("mov.b32 %0, 1;\n" : "=r"(acc_on));
        tcw_pin(us);
        tcw_fence();
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int p = 0; p < P; ++p) tcw_mma(us, a[h], desc[h][p], h + p > 0 ? acc_on : from0);
        tcw_commit();
    };
    // Fold unit u's finished sum into half hn's running sum (element i: row g + 8 ((i / 2) % 2),
    // token 64 hn + 8 (i / 4) + 2t + i % 2 of the block; Q4_K's Σx from the unit's buffer).
    auto fold = [&](int u, int hn, float (&acc)[32], const float (&us)[32], const float (&d)[2],
                    const float (&ml)[2]) {
        const float* xsu = reinterpret_cast<const float*>(tcw_smem + (u % TCW_STAGES) * STAGE + XS_OFF) + 64 * hn + 2 * t;
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int r = (i >> 1) & 1;
            if (F == TC_Q4_K) acc[i] = q4k_fold(acc[i], us[i], d[r], ml[r], xsu[8 * (i >> 2) + (i & 1)]);
            else acc[i] = F == TC_Q8_0 ? __fmaf_rn(d[r], us[i], acc[i]) : __fadd_rn(acc[i], us[i]);
        }
    };
    float* tot_s = reinterpret_cast<float*>(tcw_smem + TCW_STAGES * STAGE);

    float us0[32], us1[32], acc0[32], acc1[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) us0[i] = us1[i] = acc0[i] = acc1[i] = 0.0f;

    // Units staged ahead of the group being computed (groups of TCW_UPB units between barriers).
    constexpr int UPB = F == TC_BF16 ? TCW_UPB : TCW_UPB_Q, AHEAD = TCW_STAGES - UPB - TCW_CLUSTER;
    static_assert(UPB >= 1 && UPB <= 4, "TCW_UPB and TCW_UPB_Q are 1 to 4");
    static_assert(AHEAD >= UPB, "TCW_STAGES must be at least twice TCW_UPB and TCW_UPB_Q");
    static_assert(!TCW_CLUSTER || ((!BULK || WSP) && UPB == 1), "TCW_CLUSTER needs TCW_BULK 0 or TCW_WS 1, and one unit a group");
    static_assert(!WSP || BULK, "TCW_WS needs TCW_BULK 1");
    // TCW_PP where this format takes the producer warp (BF16 under TCW_WS_Q = 0).
    constexpr bool PP = TCW_PP && WSP && UPB == 1;
    // Tensor copies write to 128-byte aligned shared addresses.
    static_assert(!TMA || (WSP && STAGE % 128 == 0 && X_UNIT % 128 == 0 && (MT * WB) % 128 == 0 && XS_OFF % 128 == 0),
                  "TCW_TMA needs TCW_WS 1 and 128-byte aligned operands");
    if (WSP) {
        // "full" barriers at bar0 + 8 b (count 1: the producer's expect), "empty" ones at
        // empty0 + 8 b (count: every computing warp once a unit; TCW_CLUSTER: of both blocks).
        if (tid == 0) {
            for (int i = 0; i < TCW_STAGES; ++i) {
                tcw_bar_init(bar0 + 8 * i);
                asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(empty0 + 8 * i),
                             "r"((TCW_CLUSTER ? 2 : 1) * (NTH / 32))
                             : "memory");
            }
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        }
        // TCW_CLUSTER: both blocks' barriers are made before either copies into or arrives on them.
        if (TCW_CLUSTER) tcw_cluster_sync();
        else __syncthreads();
        if (tid >= NTH) {
            // The producer warp: unit v into stage v % TCW_STAGES once every computing warp is
            // past unit v - TCW_STAGES (the empty barrier's phase v / TCW_STAGES - 1; TCW_CLUSTER:
            // of both blocks). It leaves after the last unit's copies are issued; they complete on
            // the full barriers (TCW_CLUSTER: after the cluster barrier that ends both blocks).
            for (int v = 0; v < nu; ++v) {
                const int b = v % TCW_STAGES;
                if (v >= TCW_STAGES) tcw_bar_wait(empty0 + 8 * b, (v / TCW_STAGES - 1) & 1);
                bulk_load(v, b);
            }
            if (TCW_CLUSTER) tcw_cluster_sync();
            return;
        }
    } else if (TCW_CLUSTER) {
        if (tid == 0) {
            for (int i = 0; i < TCW_STAGES; ++i) {
                tcw_bar_init(bar0 + 8 * i);
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;\n" ::"r"(empty0 + 8 * i) : "memory");
            }
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        }
        // Both blocks' barriers are made before either copies into or arrives on them.
        tcw_cluster_sync();
#pragma unroll
        for (int i = 0; i < AHEAD; ++i) {
            load(i, i);
            if (tid == 0 && i < nu) x_multicast(i, i);
            asm volatile("cp.async.commit_group;\n" ::);
        }
    } else if (BULK) {
        if (tid == 0)
            for (int i = 0; i < TCW_STAGES; ++i) tcw_bar_init(bar0 + 8 * i);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        __syncthreads();
        if (warp == 0)
            for (int i = 0; i < AHEAD && i < nu; ++i) bulk_load(i, i);
    } else {
#pragma unroll
        for (int i = 0; i < AHEAD; ++i) {
            load(i, i);
            asm volatile("cp.async.commit_group;\n" ::);
        }
    }
    int sl = 0, u_end = min(nu, per);
    // After unit u's folds: at a slice's end its sum into the total (the first as is), in slice
    // order.
    auto slice_end = [&](int u) {
        if (u + 1 == u_end) {
#pragma unroll
            for (int i = 0; i < 32; ++i) {
                float* t0 = tot_s + i * NTH + tid;
                float* t1 = tot_s + (32 + i) * NTH + tid;
                *t0 = sl == 0 ? acc0[i] : __fadd_rn(*t0, acc0[i]);
                *t1 = sl == 0 ? acc1[i] : __fadd_rn(*t1, acc1[i]);
                acc0[i] = acc1[i] = 0.0f;
            }
            ++sl;
            u_end = min(nu, u_end + per);
        }
    };
    // Per group of units u .. u + UPB - 1: both halves' MMAs of a unit go in, half 0's sum is
    // folded while half 1's run, the next unit's half 0 goes in, then half 1's sum is folded and the
    // next unit's half 1 goes in. No register a pending MMA reads or writes is touched, and no A
    // register defined, between a fence and the next wait (else ptxas serializes the MMAs); the
    // overlap across groups comes from the block's other warpgroups.
    for (int u = 0; u < nu; u += UPB) {
        // Units u .. u + UPB - 1 staged and visible to the async proxy; every warpgroup past the
        // group before, whose buffers take units u + AHEAD .. (only real units; an empty group
        // keeps the count of committed groups one a unit).
#pragma unroll
        for (int j = 0; j < UPB; ++j) {
            const int v = u + AHEAD + j;
            if (WSP) {
                // The producer warp stages every unit.
            } else if (BULK) {
                if (j == 0) __syncthreads();
                if (warp == 0 && v < nu) bulk_load(v, v % TCW_STAGES);
            } else {
                if (j == 0) {
                    asm volatile("cp.async.wait_group %0;\n" ::"n"(AHEAD - UPB));
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    __syncthreads();
                    // TCW_CLUSTER: this block is past unit u - 1; both blocks may refill its stage.
                    if (TCW_CLUSTER && tid == 0 && u > 0) {
                        tcw_arrive_cluster(empty0 + 8 * ((u - 1) % TCW_STAGES), 0);
                        tcw_arrive_cluster(empty0 + 8 * ((u - 1) % TCW_STAGES), 1);
                    }
                }
                if (v < nu) {
                    load(v, v % TCW_STAGES);
                    if (TCW_CLUSTER && tid == 0) x_multicast(v, v % TCW_STAGES);
                }
                asm volatile("cp.async.commit_group;\n" ::);
            }
        }
        // Bulk copies: unit u + j's copies complete, its buffer's mbarrier in phase
        // ((u + j) / TCW_STAGES) % 2 (TCW_CLUSTER: the x copies of both blocks).
        if (BULK || TCW_CLUSTER)
#pragma unroll
            for (int j = 0; j < UPB; ++j)
                if (u + j < nu) tcw_bar_wait(bar0 + 8 * ((u + j) % TCW_STAGES), ((u + j) / TCW_STAGES) & 1);
        // A group past the last unit (unit counts not a multiple of TCW_UPB) computes its phantom
        // units' MMAs on whatever their buffers hold and folds nothing of them: the MMA sequence
        // stays the same on every path (ptxas serializes wgmma whose pending groups it cannot
        // count).
        u32 a[UPB][2][4];
        float d[UPB][2], ml[UPB][2];
#pragma unroll
        for (int j = 0; j < UPB; ++j) {
            ml[j][0] = ml[j][1] = 0.0f;
            read_a(u + j, a[j], d[j], ml[j]);
        }
        // TCW_PP: warpgroup 1 after warpgroup 0's unit u; warpgroup 0 after warpgroup 1's u - 1.
        if (PP) {
            if (warp < 4) {
                if (u > 0) asm volatile("bar.sync 2, %0;\n" ::"n"(NTH) : "memory");
            } else {
                asm volatile("bar.sync 1, %0;\n" ::"n"(NTH) : "memory");
            }
        }
        issue(u, 0, a[0], us0);
        issue(u, 1, a[0], us1);
        if (PP) {
            if (warp < 4) asm volatile("bar.arrive 1, %0;\n" ::"n"(NTH) : "memory");
            else asm volatile("bar.arrive 2, %0;\n" ::"n"(NTH) : "memory");
        }
#pragma unroll
        for (int j = 0; j < UPB; ++j) {
            const bool real = u + j < nu;
            tcw_wait<1>(us0);
            if (real) fold(u + j, 0, acc0, us0, d[j], ml[j]);
            if (j + 1 < UPB) {
                issue(u + j + 1, 0, a[j + 1 < UPB ? j + 1 : j], us0);
                tcw_wait<1>(us1);
            } else {
                tcw_wait<0>(us1);
            }
            if (real) fold(u + j, 1, acc1, us1, d[j], ml[j]);
            if (j + 1 < UPB) issue(u + j + 1, 1, a[j + 1 < UPB ? j + 1 : j], us1);
            if (real) slice_end(u + j);
        }
        // TCW_WS: this warp's MMAs and fragment reads of units u .. u + UPB - 1 are complete
        // (every lane past its wait: __syncwarp orders their reads before lane 0's arrival);
        // their stages may be refilled once every computing warp has said so (TCW_CLUSTER: of
        // both blocks, on both blocks' barriers). One arrival a warp, not a thread: 8 a unit at
        // TCW_WG = 2 on the barrier's shared word instead of 256.
        if (WSP) {
            __syncwarp();
            if (lane == 0)
#pragma unroll
                for (int j = 0; j < UPB; ++j) {
                    if (u + j >= nu) continue;
                    const u32 e = empty0 + 8 * ((u + j) % TCW_STAGES);
                    if (TCW_CLUSTER) {
                        tcw_arrive_cluster(e, 0);
                        tcw_arrive_cluster(e, 1);
                    } else {
                        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(e) : "memory");
                    }
                }
        }
    }
    // TCW_PP: warpgroup 0 takes warpgroup 1's last arrival (each named barrier completes as
    // often as it is arrived at).
    if (PP && warp < 4 && nu > 0) asm volatile("bar.sync 2, %0;\n" ::"n"(NTH) : "memory");
    if (!BULK) asm volatile("cp.async.wait_group 0;\n" ::);
    // Element i of half hn: row 16 (tile0 + warp) + g + 8 ((i / 2) % 2), token 8 tb0 + 64 hn +
    // 8 (i / 4) + 2t + i % 2.
    const int row0 = 16 * (tile0 + tl) + g;
#pragma unroll
    for (int e = 0; e < 64; ++e) {
        const int hn = e >> 5, i = e & 31;
        float v = tot_s[e * NTH + tid];
        // Empty slices (past the last unit) add their zero sums, as linear_tc_impl's do.
        for (int z = sl; z < slices; ++z) v = __fadd_rn(v, 0.0f);
        const int row = row0 + 8 * ((i >> 1) & 1);
        const int m = 8 * tb0 + 64 * hn + 8 * (i >> 2) + 2 * t + (i & 1);
        if (row < R && m < mc) {
            if (bias) v = __fadd_rn(v, bias[row]);
            store_out(y, m_base + m, row, v);
        }
    }
    // TCW_CLUSTER: no block leaves while the other may still arrive on its barriers.
    if (TCW_CLUSTER) tcw_cluster_sync();
#else
    // Built for an architecture without wgmma: the host never launches this (QTC_GEMM = 3 needs
    // sm_90a), so reaching it is a bug; trap rather than leave y unwritten.
    (void)xs; (void)q; (void)s; (void)bias; (void)y; (void)m_base; (void)mc; (void)K; (void)R; (void)slices;
    (void)xsum; (void)ld; (void)mx; (void)mw; (void)ms; (void)mxs;
    __trap();
#endif
}

// TCW_TMA: every entry's last parameters are the tensor maps of x, the weights, the scales and
// Q4_K's Σx (unused ones zeros), in that order (engine/src/backend/cuda/tma.rs, `tcw_map_shapes`).
#if TCW_TMA
#define TCW_MAP_PARAMS                                                                                \
    , const __grid_constant__ TmaMap mx, const __grid_constant__ TmaMap mw, const __grid_constant__ TmaMap ms, \
        const __grid_constant__ TmaMap mxs
#define TCW_MAP_ARGS &mx, &mw, &ms, &mxs
#else
#define TCW_MAP_PARAMS
#define TCW_MAP_ARGS nullptr, nullptr, nullptr, nullptr
#endif

#define LINEAR_TCW(name, F)                                                                         \
    extern "C" __global__ void __launch_bounds__(128 * TCW_WG + 32 * TCW_WS_OF(F), 1)                \
        name(const uint4* xs, const u8* q, const u32* s, const float* bias, LIN_OUT_PARAMS,        \
             int m_base, int mc, int slices TCW_MAP_PARAMS) { pdl_entry();                         \
        linear_tcw_impl<F>(xs, q, s, bias, LIN_OUTS, m_base, mc, K, R, slices, nullptr, 0, TCW_MAP_ARGS); \
    }

LINEAR_TCW(linear_tcw_bf16, TC_BF16)
LINEAR_TCW(linear_tcw_q8_0, TC_Q8_0)

// Q4_K (QTC_Q4_K = 2): LINEAR_TCW's arguments, then tcw_xsum's output and its ld (then TCW_TMA's maps).
extern "C" __global__ void __launch_bounds__(128 * TCW_WG + 32 * TCW_WS_OF(TC_Q4_K), 1)
    linear_tcw_q4_k(const uint4* xs, const u8* q, const u32* s, const float* bias, LIN_OUT_PARAMS, int m_base,
                    int mc, int slices, const float* xsum, int ld TCW_MAP_PARAMS) {
    pdl_entry();
    linear_tcw_impl<TC_Q4_K>(xs, q, s, bias, LIN_OUTS, m_base, mc, K, R, slices, xsum, ld, TCW_MAP_ARGS);
}
