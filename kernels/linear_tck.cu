// The wgmma split-K linear layers (kernels/linear_tcw.cu's tiled wgmma form has the many-token
// case; the tile-unit layout and the exactness chain are linear_tc.cu's, docs/DESIGN.md §3).
#include "common.cuh"
#include "wgmma.cuh"

// The wgmma split-K form for batched decode and verify (QTC_SK = 3, host side: from QTC_SK_MIN
// tokens up to the tiled form's QTC_GEMM_MIN; sm_90a only). Why (research/cuda-notes.md, runs
// 51-56): at M = 32 the one-token family re-reads x from L2 in every block (for the 4096-row
// matrices about twice the weights' bytes) and the mma.sync split-K form (linear_tcs_*) loads
// only a few units a warp between waits, so both read the weights at 40-60% of the copy
// bandwidth. Here a block is one K slice and a run of 64-row groups: it splits its slice of x
// once into shared memory (the core-matrix order of tcw_split_x), then each of its TCK_WG
// warpgroups walks its row groups in batches of TCK_UB units, one m64nNk16 a unit, k-half and
// part, A from registers, B by descriptor. A warp's weights come by one of three paths: a per-warp
// cp.async ring of TCK_STAGES units (each lane copies and reads back its own A fragments, so a
// warp waits on nothing but its own copies), loads into registers one batch ahead (TCK_LDG), or
// one bulk copy a batch (TCK_BULK). Measured (runs 66-69, H200, 8B shapes): bit-identical and
// green, but slower than the shipped forms at 32 tokens (the ring moves about 6 bytes a cycle
// an SM; the register path beats them at 16 tokens only); off by default. With one bulk copy a
// warp and batch (TCK_BULK, run 70: BF16 bs=32 +11%) it is the H200 defaults' form at 9-255 tokens.
//
// Exactness: the chain of linear_tcs_impl, unchanged (per unit a sum from 0 of the MMAs, k-half
// 0 then 1, parts in order; BF16 acc = acc + unit, Q8_0 acc = fma(d_row, unit, acc), Q4_K
// (QTC_Q4_K = 2) q4k_fold with the unit's Σx of each token, which the block computes once a unit
// by the one-token entries' chain (an A of ones) before its row groups; the slice's sum to `part`,
// and linear_tcs_reduce (kernels/splitk_reduce.cu) adds the slices in order, the first as is, then
// the bias). Run 61: wgmma's m64nNk16 gives mma.sync m16n8k16's bits.
#ifndef TCK_WG
#define TCK_WG 2
#endif
#ifndef TCK_STAGES
#define TCK_STAGES 8
#endif
// Units whose MMAs go in as one batch (one fence, commit and wait). Run 67: 1, 2, 4 or 8 gave
// the ring form the same time (its loads set it, not the batches).
#ifndef TCK_UB
#define TCK_UB 4
#endif
// 1: each lane loads its A fragments for the next batch straight into registers (the one-token
// family's loads, which reach 97% of copy bandwidth at M = 1) instead of the cp.async ring (runs
// 66-67: the ring form moves about 6 bytes a cycle an SM whatever its depth). Loads only: no
// bits change.
#ifndef TCK_LDG
#define TCK_LDG 0
#endif
// 1 (with TCK_LDG = 0): each warp's batch of TCK_UB consecutive units of its tile (contiguous in
// the tile-unit layout) reaches its ring by one bulk copy (cp.async.bulk, the TMA engine) issued
// by the warp's lane 0, completing on the warp's own mbarrier for that slot; the ring holds
// TCK_STAGES / TCK_UB batches. No block barrier (run 63's bulk form was slow because warp 0
// issued every copy and all warps met at a barrier a unit). Copies only: no bits change.
#ifndef TCK_BULK
#define TCK_BULK 0
#endif
// 1: the split-K reduce in the form itself (host: `fuse` 1 or 2). When a warpgroup has stored
// its slice's sums of a row group it counts itself in for that row group (an atomic counter a
// row group and token block, `cnt`); the one that completes the count adds that row group's
// slices exactly as linear_tcs_reduce4 / linear_tcs_reduce_swiglu do (`slice_sum` in slice
// order, the first as is, then the bias; SwiGLU from the gate and up groups, counted together),
// stores the outputs and sets the counter back to 0 for the next call. Which warpgroup adds
// changes no operation, so the bits are the reduce kernel's; the partials are read back from L2
// while other blocks still stream weights, and the reduce's launch and pass are gone.
#ifndef TCK_FUSE
#define TCK_FUSE 0
#endif
// 1: the entries `linear_tck_*_cl` (host: a split of 2..8 K slices, TCK_CLUSTER = 1), the
// split-K reduce through a thread-block cluster of the K slices' blocks (cluster (slices, 1, 1),
// rank = slice). The blocks of a cluster walk the same row groups with the same warpgroup and
// lane layout, so thread tid owns the same (row, token) elements in every slice. When warpgroup w
// has its slice's sums of a row group, one block of the cluster reduces them (the i-th row group
// of the run: block i mod slices): the others put theirs in their own shared memory (a slot of
// 128 x NTOK/2 f32 a warpgroup) and arrive on the reducer's `full` mbarrier; the reducer adds
// slot 0, 1, ... in slice order (its own sums from registers, the others by
// ld.shared::cluster), the first as is, then the bias, exactly as slice_sum and reduce4_store,
// arrives on every block's `empty` mbarrier (a block waits for it before it writes its slot
// again) and stores the outputs (y / y1 / y2 at R0, R1); for a gate|up matrix (fuse 2) the
// gate and up groups of a pair meet through `part` and a counter, and the second stores
// swiglu1(gate, up) as reduce_swiglu4_store. No partials in global memory, no reduce launch; the same
// operations in the same order, so the same bits (DSMEM: PTX ISA 9.7.9.x ld.shared::cluster,
// mapa; mbarrier release/acquire at cluster scope). The rings are TCK_CL_STAGES slots of
// TCK_CL_UB-unit batches, so that the slots fit beside gate+up's x and rings.
#ifndef TCK_CLUSTER
#define TCK_CLUSTER 0
#endif
#ifndef TCK_CL_STAGES
#define TCK_CL_STAGES 6
#endif
#ifndef TCK_CL_UB
#define TCK_CL_UB 3
#endif

#if TCW_HAVE_WGMMA
// A 16-byte load of read-only weights through an asm volatile, so that it is issued where the
// source puts it (before the MMAs of the batch before; the compiler would otherwise sink it past
// their wait into the registers they read, one batch of loads in flight).
__device__ __forceinline__ uint4 tck_ldg(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 tck_ldg2(const uint2* p) {
    uint2 v;
    asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}
// The cluster reduce's helpers (TCK_CLUSTER): this block's rank in its cluster; an mbarrier of
// `count` arrivals; one arrival, release at cluster scope, on the mbarrier at shared offset `bar`
// of block `rank`; a wait for phase `parity` of this block's mbarrier `bar`, acquire at cluster
// scope; the shared::cluster address of shared offset `addr` in block `rank`, and a 16-byte
// load from one.
__device__ __forceinline__ u32 tck_cl_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void tck_cl_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void tck_cl_arrive(u32 bar, u32 rank) {
    u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void tck_cl_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "TCK_CL_WAIT:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra TCK_CL_WAIT;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ u32 tck_cl_map(u32 addr, u32 rank) {
    u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
    return remote;
}
__device__ __forceinline__ float4 tck_cl_ld4(u32 addr) {
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}
#endif

#if TCK_FUSE
// TCK_FUSE's epilogue for warpgroup `wg` (thread `wt` of its 128) after it stored slice sums of
// row group `rg` for tokens m0 .. m0 + ntok: every thread's stores are made visible (fence), the
// warpgroup meets at its named barrier, its first thread counts it in, and if that completed the
// row group's count (slices arrivals; fuse 2: the gate group and its up group, 2 x slices) the
// warpgroup adds the group's slices for those tokens (`slice_sum` through L2, as the reduce
// kernels) and stores them. The counter is set back to 0 by the thread that completed it. Not
// inlined: inside the loop it took 24 bytes of spills at the 168-register cap, as a call 4.
__device__ __noinline__ void tck_fused_reduce(const float* part, const float* bias, float* y, float* y1, float* y2,
                                                 int R0, int R1, u32* cnt, int fuse, int M, int R, int slices,
                                                 int groups, int rg, int m0, int ntok, int wt, int wg) {
    __shared__ int tck_last[4];
    __threadfence();
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
    const int half = groups / 2, key = fuse == 2 ? rg % half : rg;
    if (wt == 0) {
        u32* c = cnt + (size_t)(m0 / ntok) * (fuse == 2 ? half : groups) + key;
        const u32 need = (u32)(fuse == 2 ? 2 * slices : slices);
        const bool last = atomicAdd(c, 1u) == need - 1;
        if (last) *c = 0u;
        tck_last[wg] = last;
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
    if (!tck_last[wg]) return;
    __threadfence();
    const size_t mr = (size_t)M * R;
    const int I = R / 2;
    for (int c = wt; c < 16 * ntok; c += 128) {
        const int m = m0 + (c >> 4), r = 64 * key + 4 * (c & 15);
        if (m >= M || r >= (fuse == 2 ? I : R)) continue;
        if (fuse == 2) reduce_swiglu4_store<true>(part, bias, y, I, mr, m, r, slices);
        else reduce4_store<true>(part, bias, y, y1, y2, R0, R1, R, mr, m, r, slices);
    }
}
#endif

// x: [M, K] f32; q, s: linear_tc.cu's layout; part: [slices][M][R] f32, slice sl's sums.
// Grid: (slices, runs, ceil(M / NTOK)); block 128 TCK_WG; a block takes row groups (64 rows)
// blockIdx.y rg_run .. + rg_run, warpgroup w every TCK_WG-th from the w-th. Dynamic shared
// memory: x, ceil(nu / slices) units of NTOK / 8 token blocks x QTC_XSPLIT x 512 bytes, then a
// ring a warp of TCK_STAGES slots (1,024 bytes BF16; Q8_0 512 of weights + 32 of scales, 576;
// Q4_K 256 + 32, 288), then TCK_STAGES 8-byte mbarriers a warp (TCK_BULK), then (Q4_K) Σx,
// ceil(nu / slices) x NTOK f32 (host: linear_tcg.rs, tck_smem_bytes).
//
// TCK_FUSE (`fuse` != 0): bias ([R] f32 or null), y, y1, y2, R0, R1 as linear_tcs_reduce4's
// outputs (fuse 1: R, R0 and R1 multiples of 4), or for a gate|up matrix (fuse 2: R = 2 I, I a
// multiple of 64) y = out, [M, I] f32, SwiGLU(gate, up); cnt: zeros, at least ceil(M / NTOK) x
// row groups (fuse 2: half of them) u32, left zero. fuse 0: part only.
template <int F, int NTOK, bool CL>
__device__ __forceinline__ void linear_tck_impl(const float* __restrict__ x, const u8* __restrict__ q,
                                                const u32* __restrict__ s, float* __restrict__ part, int M, int K,
                                                int R, int slices, int rg_run, const float* __restrict__ bias,
                                                float* y, float* y1, float* y2, int R0, int R1, u32* cnt, int fuse) {
#if TCW_HAVE_WGMMA
    constexpr int P = QTC_XSPLIT;
    constexpr int NTH = 128 * TCK_WG;
    constexpr int UB = CL ? TCK_CL_UB : TCK_UB;        // units a batch
    constexpr int ST = CL ? TCK_CL_STAGES : TCK_STAGES;  // units a warp's ring holds
    constexpr int NA = NTOK / 2;                      // accumulators a thread: 64 NTOK / 128
    constexpr int SLOT = F == TC_BF16 ? 1024 : F == TC_Q8_0 ? 576 : 288;  // a warp's staged (tile, unit)
    constexpr int WBYTES = F == TC_BF16 ? 1024 : F == TC_Q8_0 ? 512 : 256;  // of it, the weights
    constexpr int X_UNIT = (NTOK / 8) * P * 512;      // [token block][part][k-block][8][8] bf16
    static_assert(ST > UB, "a batch's units are copied while the ring holds more");
    static_assert(!TCK_BULK || ST >= 2 * UB, "the bulk ring holds two batches or more");
    extern __shared__ __align__(128) u8 tck_smem[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wq = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    const int nu = K / 32, tiles = (R + 15) / 16, groups = (tiles + 3) / 4;
    const int sl = blockIdx.x;
    const int per = (nu + slices - 1) / slices;
    const int u0 = min(nu, sl * per), nus = min(nu, u0 + per) - u0;
    const int m0 = blockIdx.z * NTOK;
    const int rg0 = blockIdx.y * rg_run, rg1 = min(groups, rg0 + rg_run);
    u8* ring = tck_smem + per * X_UNIT + warp * (ST * SLOT);

    // This warp's copies, one (row group, unit) a step in walk order: lane l takes its own A
    // fragments (BF16: its two 16-byte halves to planes 0 and 1, as tc_staged_a reads them;
    // Q8_0: its 16 bytes, and lanes 0-1 the tile's 32 bytes of scales; Q4_K: lanes 0-15 the 256
    // bytes of codes in order, lanes 16-17 the scales). Rows past R: zeros.
    // The warpgroup's walk: step k takes row group walk(k), k < mine: every TCK_WG-th row group
    // of the run from the wg-th.
    const int mine = rg1 - rg0 > wg ? (rg1 - rg0 - wg + TCK_WG - 1) / TCK_WG : 0;
    auto walk = [&](int k) { return rg0 + wg + TCK_WG * k; };
    const int steps = mine * nus;
    int c_i = 0, c_k = 0, c_u = 0;
    auto next_copy = [&]() {
        if (c_i < steps) {
            u8* dst = ring + (c_i % ST) * SLOT;
            const int tile = 4 * walk(c_k) + wq;
            const bool ok = tile < tiles;
            const size_t tu = (size_t)tile * nu + u0 + c_u;
            if (F == TC_BF16) {
                const u8* src = ok ? q + tu * 1024 + lane * 32 : q;
                tcg_cp16(dst + lane * 16, src, ok);
                tcg_cp16(dst + 512 + lane * 16, src + (ok ? 16 : 0), ok);
            } else if (F == TC_Q4_K) {
                if (lane < 16) tcg_cp16(dst + lane * 16, ok ? q + tu * 256 + lane * 16 : q, ok);
                else if (lane < 18)
                    tcg_cp16(dst + 256 + (lane - 16) * 16,
                             ok ? reinterpret_cast<const u8*>(s) + tu * 32 + (lane - 16) * 16 : q, ok);
            } else {
                tcg_cp16(dst + lane * 16, ok ? q + tu * 512 + lane * 16 : q, ok);
                if (lane < 2)
                    tcg_cp16(dst + 512 + lane * 16, ok ? reinterpret_cast<const u8*>(s) + tu * 32 + lane * 16 : q, ok);
            }
            if (++c_u == nus) {
                c_u = 0;
                ++c_k;
            }
        }
        ++c_i;
        asm volatile("cp.async.commit_group;\n" ::);
    };
    // The weights are read-only for the whole forward: the first copies go out before the
    // previous kernel's results are waited for.
    // TCK_LDG: the batch a lane computes (wv, sc) and the next one, loading (nwv, nsc); zeros for
    // units past the batch, tiles past R and row groups past the run.
    constexpr int WB = F == TC_BF16 ? 2 : 1;
    uint4 wv[UB][WB], nwv[UB][WB];
    u32 sc[UB], nsc[UB];
    auto load_batch = [&](int kk, int un, int nb) {
        const int rg = kk < mine ? walk(kk) : 0;
#pragma unroll
        for (int j = 0; j < UB; ++j) {
            const int tile = 4 * rg + wq;
            nsc[j] = 0;
#pragma unroll
            for (int b = 0; b < WB; ++b) nwv[j][b] = make_uint4(0, 0, 0, 0);
            if (j < nb && kk < mine && tile < tiles) {
                const size_t tu = (size_t)tile * nu + u0 + un + j;
                if (F == TC_Q4_K) {
                    // The lane's codes in x, y; rows g and g+8's d words in z, w (as linear_tc.cu).
                    const uint2 qv = tck_ldg2(reinterpret_cast<const uint2*>(q) + tu * 32 + lane);
                    const uint2 dw = q4k_dwords(s, tiles, nu, tile, u0 + un + j, g);
                    nwv[j][0] = make_uint4(qv.x, qv.y, dw.x, dw.y);
                } else {
                    const uint4* p = reinterpret_cast<const uint4*>(q) + (tu * 32 + lane) * WB;
#pragma unroll
                    for (int b = 0; b < WB; ++b) nwv[j][b] = tck_ldg(p + b);
                }
                if (F != TC_BF16) nsc[j] = s[tu * 8 + g];
            }
        }
    };
    // TCK_BULK: batch slots of this warp's ring and their mbarriers (after every warp's ring).
    constexpr int NBS = ST / UB;
    constexpr int BSLOT = UB * SLOT;
    const u32 bar0 = (u32)__cvta_generic_to_shared(tck_smem + per * X_UNIT + (NTH / 32) * (ST * SLOT)) +
                     warp * (ST * 8);
    int b_i = 0, b_k = 0, b_un = 0;
    // Lane 0 copies the next batch in walk order (units b_un .. of row group b_rg) into its slot;
    // a tile past R copies nothing (the stale slot only reaches rows that are never stored: an
    // output depends on its own row alone); past the warp's last batch nothing is issued.
    auto bulk_batch = [&]() {
        if (b_k >= mine || nus == 0) return;
        const int nb = min(UB, nus - b_un), tile = 4 * walk(b_k) + wq;
        if (lane == 0) {
            const u32 bar = bar0 + 8 * (b_i % NBS);
            const u32 dst = (u32)__cvta_generic_to_shared(ring + (b_i % NBS) * BSLOT);
            if (tile < tiles) {
                const size_t tu = (size_t)tile * nu + u0 + b_un;
                tcw_bar_expect(bar, nb * WBYTES + (F != TC_BF16 ? nb * 32 : 0));
                tcw_bulk(dst, q + tu * WBYTES, nb * WBYTES, bar);
                if (F != TC_BF16)
                    tcw_bulk(dst + UB * WBYTES, reinterpret_cast<const u8*>(s) + tu * 32, nb * 32, bar);
            } else {
                tcw_bar_expect(bar, 0);
            }
        }
        ++b_i;
        b_un += nb;
        if (b_un >= nus) {
            b_un = 0;
            ++b_k;
        }
    };
    if (TCK_LDG) {
        load_batch(0, 0, min(UB, nus));
    } else if (TCK_BULK) {
        if (lane == 0)
            for (int j = 0; j < NBS; ++j) tcw_bar_init(bar0 + 8 * j);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        __syncwarp();
        for (int j = 0; j < NBS - 1; ++j) bulk_batch();
    } else {
#pragma unroll
        for (int j = 0; j < ST - 1; ++j) next_copy();
    }
    pdl_entry();

    // x of the slice's units for tokens m0 .. m0 + NTOK, split into its parts (zeros past M):
    // float4 c = token c / (8 nus), unit (c / 8) % nus, k 4 (c % 8) .. + 4 of the unit; four
    // loads in flight a thread.
    const int xn = NTOK * nus * 8;
    for (int c0 = tid; c0 < xn; c0 += 4 * NTH) {
        float4 f[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int c = c0 + e * NTH, tok = c / (nus * 8), r = c % (nus * 8);
            f[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (c < xn && m0 + tok < M)
                f[e] = *reinterpret_cast<const float4*>(x + (size_t)(m0 + tok) * K + 32 * (u0 + (r >> 3)) + 4 * (r & 7));
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int c = c0 + e * NTH, tok = c / (nus * 8), r = c % (nus * 8), un = r >> 3, k4 = r & 7;
            if (c >= xn) break;
            u32 w0[P], w1[P];
            split_x(make_float2(f[e].x, f[e].y), w0);
            split_x(make_float2(f[e].z, f[e].w), w1);
            u8* d = tck_smem + un * X_UNIT + (tok >> 3) * (P * 512) + (k4 >> 1) * 128 + (tok & 7) * 16 + (k4 & 1) * 8;
#pragma unroll
            for (int p = 0; p < P; ++p) *reinterpret_cast<uint2*>(d + p * 512) = make_uint2(w0[p], w1[p]);
        }
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();

    // TCK_CLUSTER: the warpgroups' slots (chunk c of thread wt's sums at float4 (wg NA / 4 + c)
    // 128 + wt) after the Q4_K sums, then each warpgroup's `full` (slices - 1 arrivals) and
    // `empty` (1) mbarriers; set up before any block of the cluster can arrive on them (the
    // cluster barrier). The cluster is the run's `slices` blocks, rank = slice.
    float4* clslot = reinterpret_cast<float4*>(tck_smem + per * X_UNIT + (NTH / 32) * (ST * (SLOT + 8)) +
                                               (F == TC_Q4_K ? per * NTOK * 4 : 0));
    const u32 clbar = (u32)__cvta_generic_to_shared(clslot + TCK_WG * (NA / 4) * 128);
    // (SwiGLU: a warpgroup's flag that it completed a pair's count, after the mbarriers.)
    volatile u32* clflag = reinterpret_cast<volatile u32*>(clslot + TCK_WG * (NA / 4) * 128) + 4 * TCK_WG;
    u32 crank = 0, nred = 0;
    if (CL) {
        crank = tck_cl_rank();
        if (tid == 0)
            for (int w = 0; w < TCK_WG; ++w) {
                tck_cl_init(clbar + 8 * w, (u32)slices - 1);
                tck_cl_init(clbar + 8 * (TCK_WG + w), 1);
            }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        tcw_cluster_sync();
    }

    // Q4_K: each unit's Σx of each token (linear_tc_impl's `ux`: the MMAs of an A of ones from 0,
    // k-half 0 then 1, parts in order), warpgroup w taking units w, w + TCK_WG, ...; lanes 0-3 of
    // its first warp store them (element e: token 8 (e / 4) + 2t + e % 2; rows g and g + 8 hold
    // the same sums).
    float* sx = reinterpret_cast<float*>(tck_smem + per * X_UNIT + (NTH / 32) * (ST * SLOT) +
                                         (NTH / 32) * (ST * 8));
    if (F == TC_Q4_K) {
        const u32 ones[4] = {0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u};
        for (int un = wg; un < nus; un += TCK_WG) {
            float ux[NA];
            unsigned long long desc[2][P];
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int p = 0; p < P; ++p) {
                    const unsigned long long v = tcw_desc(tck_smem + un * X_UNIT + p * 512 + h * 256, P * 512);
                    asm volatile("mov.b64 %0, %1;\n" : "=l"(desc[h][p]) : "l"(v));
                }
            int from0, acc_on;
            asm volatile("mov.b32 %0, 0;\n" : "=r"(from0));
            asm volatile("mov.b32 %0, 1;\n" : "=r"(acc_on));
#pragma unroll
            for (int e = 0; e < NA; ++e) ux[e] = 0.0f;
            tcw_pin(ux);
            tcw_fence();
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int p = 0; p < P; ++p) tck_mma(ux, ones, desc[h][p], h + p > 0 ? acc_on : from0);
            tcw_commit();
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            tcw_pin(ux);
            if (wq == 0 && g == 0) {
#pragma unroll
                for (int e = 0; e < NA; ++e)
                    if (((e >> 1) & 1) == 0) sx[un * NTOK + 8 * (e >> 2) + 2 * t + (e & 1)] = ux[e];
            }
        }
        __syncthreads();
    }

    float us[UB][NA], acc[NA];
#pragma unroll
    for (int j = 0; j < UB; ++j)
#pragma unroll
        for (int e = 0; e < NA; ++e) us[j][e] = 0.0f;
    int i = 0, bi = 0;  // units and batches this warp has taken
    for (int k = 0; k < mine; ++k) {
        const int rg = walk(k);
#pragma unroll
        for (int e = 0; e < NA; ++e) acc[e] = 0.0f;
        if (CL) {
            // As TCK_FUSE's below: nothing of the unit sums outlives a row group.
#pragma unroll
            for (int j = 0; j < UB; ++j)
#pragma unroll
                for (int e = 0; e < NA; ++e) us[j][e] = 0.0f;
        }
#if TCK_FUSE
        // The unit sums start from 0 at each unit's first MMA (scale-d 0) whatever they hold:
        // zeroing them here only tells the compiler that nothing of them outlives a row group,
        // so the reduce below (a call) keeps no registers of them.
#pragma unroll
        for (int j = 0; j < UB; ++j)
#pragma unroll
            for (int e = 0; e < NA; ++e) us[j][e] = 0.0f;
#endif
        // A batch of nb <= UB units: their MMAs go in between one fence and one wait (unit j
        // into its own sum us[j]), then the sums are folded in unit order. A batch past the
        // slice's end runs its spare MMAs on zero weights and drops them.
        for (int un = 0; un < nus; un += UB) {
            const int nb = min(UB, nus - un);
            // Q4_K on the ring or bulk path: the batch's d words from global memory, issued
            // before the wait for its codes.
            uint2 dq[UB];
#pragma unroll
            for (int j = 0; j < UB; ++j) {
                dq[j] = make_uint2(0u, 0u);
                if (F == TC_Q4_K && !TCK_LDG && j < nb && 4 * rg + wq < tiles)
                    dq[j] = q4k_dwords(s, tiles, nu, 4 * rg + wq, u0 + un + j, g);
            }
            if (TCK_LDG) {
                // This batch's fragments are the ones loading; the next batch's loads go out.
#pragma unroll
                for (int j = 0; j < UB; ++j) {
                    sc[j] = nsc[j];
#pragma unroll
                    for (int b = 0; b < WB; ++b) wv[j][b] = nwv[j][b];
                }
                const bool last = un + nb >= nus;
                const int nun = last ? 0 : un + nb;
                load_batch(last ? k + 1 : k, nun, min(UB, nus - nun));
            } else if (TCK_BULK) {
                // Every lane is past the batch before (its slot takes batch bi + NBS - 1), then
                // this batch's copies complete: use bi / NBS of its slot.
                __syncwarp();
                bulk_batch();
                tcw_bar_wait(bar0 + 8 * (bi % NBS), (bi / NBS) & 1);
                __syncwarp();  // converged again after the wait's loop, before the .aligned MMAs
            } else {
                // Units i .. i + nb - 1 copied: at most ST - 1 - UB later groups
                // pending.
                asm volatile("cp.async.wait_group %0;\n" ::"n"(ST - 1 - UB));
                __syncwarp();
            }
            u32 a[UB][2][4];
            float d[UB][2], ml[UB][2];
#pragma unroll
            for (int j = 0; j < UB; ++j) {
                ml[j][0] = ml[j][1] = 0.0f;
                if (F == TC_Q4_K && (TCK_LDG || j < nb)) {
                    // The codes and scale word from the path's registers or slot, the d words
                    // (dq, loaded before the wait) of the unit's super-block.
                    uint2 c = make_uint2(0u, 0u);
                    u32 sw = 0u;
                    uint2 dw = make_uint2(0u, 0u);
                    if (TCK_LDG) {
                        c = make_uint2(wv[j][0].x, wv[j][0].y);
                        dw = make_uint2(wv[j][0].z, wv[j][0].w);
                        sw = sc[j];
                    } else if (4 * rg + wq < tiles) {
                        const u8* W = TCK_BULK ? ring + (bi % NBS) * BSLOT + j * WBYTES : ring + ((i + j) % ST) * SLOT;
                        const u8* S = TCK_BULK ? ring + (bi % NBS) * BSLOT + UB * WBYTES + j * 32 : W + 256;
                        c = reinterpret_cast<const uint2*>(W)[lane];
                        sw = reinterpret_cast<const u32*>(S)[g];
                        dw = dq[j];
                    }
                    q4x16_to_bf16_frags(c.x, c.y, a[j]);
                    q4k_unit_factors(sw, dw.x, dw.y, d[j], ml[j]);
                } else if (F == TC_Q4_K) {
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int r = 0; r < 4; ++r) a[j][h][r] = 0;
                    d[j][0] = d[j][1] = 0.0f;
                } else if (TCK_LDG) {
                    if (F == TC_BF16) {
                        a[j][0][0] = wv[j][0].x; a[j][0][1] = wv[j][0].y; a[j][0][2] = wv[j][0].z; a[j][0][3] = wv[j][0].w;
                        a[j][1][0] = wv[j][1].x; a[j][1][1] = wv[j][1].y; a[j][1][2] = wv[j][1].z; a[j][1][3] = wv[j][1].w;
                    } else {
                        const u32 words[4] = {wv[j][0].x, wv[j][0].y, wv[j][0].z, wv[j][0].w};
#pragma unroll
                        for (int h = 0; h < 2; ++h)
#pragma unroll
                            for (int r = 0; r < 4; ++r) a[j][h][r] = i8x2_to_bf16x2(words[2 * h + r / 2], 2 * (r & 1));
                    }
                    d[j][0] = F == TC_Q8_0 ? f16_bits_to_f32((u16)(sc[j] & 0xffffu)) : 1.0f;
                    d[j][1] = F == TC_Q8_0 ? f16_bits_to_f32((u16)(sc[j] >> 16)) : 1.0f;
                } else if (TCK_BULK && j < nb && 4 * rg + wq < tiles) {
                    // (A tile past R copies nothing: it takes the zeros below, as the other
                    // paths' zero-filled copies give.)
                    const u8* W = ring + (bi % NBS) * BSLOT;
                    tc_staged_a<F, false>(W + j * WBYTES, W + UB * WBYTES + j * 32, lane, a[j], d[j]);
                } else if (j < nb) {
                    const u8* W = ring + ((i + j) % ST) * SLOT;
                    tc_staged_a<F, true>(W, W + 512, lane, a[j], d[j]);
                } else {
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int r = 0; r < 4; ++r) a[j][h][r] = 0;
                    d[j][0] = d[j][1] = 0.0f;
                }
            }
            // The slots of the steps before i were read by every lane before this __syncwarp;
            // as many copies go out as units are taken, so a slot is refilled only once read
            // (lanes read what other lanes copied: Q8_0's scales, Q4_K's codes).
            if (!TCK_LDG && !TCK_BULK) __syncwarp();
#pragma unroll
            for (int j = 0; j < UB; ++j)
                if (!TCK_LDG && !TCK_BULK && j < nb) next_copy();
            // Each descriptor by one add to the unit's first (the start address field, the low
            // word's bits 0-13; offsets multiples of 16 under 256 KiB), as linear_tcw's issue; the
            // unit's low word made here and the high word a constant, so nothing stays live
            // across the loop (a block-wide base spilled at three parts and TCK_WG = 3).
            unsigned long long desc[UB][2][P];
#pragma unroll
            for (int j = 0; j < UB; ++j) {
                const u32 xlo = (u32)tcw_desc(tck_smem + (un + (j < nb ? j : 0)) * X_UNIT, P * 512);
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int p = 0; p < P; ++p)
                        asm volatile("mov.b64 %0, {%1, %2};\n"
                                     : "=l"(desc[j][h][p])
                                     : "r"(xlo + (p * 512 + h * 256) / 16), "r"((P * 512) >> 4));
            }
            int from0, acc_on;
            asm volatile("mov.b32 %0, 0;\n" : "=r"(from0));
            asm volatile("mov.b32 %0, 1;\n" : "=r"(acc_on));
#pragma unroll
            for (int j = 0; j < UB; ++j) tcw_pin(us[j]);
            tcw_fence();
#pragma unroll
            for (int j = 0; j < UB; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int p = 0; p < P; ++p) tck_mma(us[j], a[j][h], desc[j][h][p], h + p > 0 ? acc_on : from0);
            tcw_commit();
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
            for (int j = 0; j < UB; ++j) tcw_pin(us[j]);
#pragma unroll
            for (int j = 0; j < UB; ++j)
                if (j < nb) {
                    const float* sxu = sx + (un + j) * NTOK + 2 * t;
#pragma unroll
                    for (int e = 0; e < NA; ++e) {
                        const int r = (e >> 1) & 1;
                        if (F == TC_Q4_K) acc[e] = q4k_fold(acc[e], us[j][e], d[j][r], ml[j][r], sxu[8 * (e >> 2) + (e & 1)]);
                        else acc[e] = F == TC_Q8_0 ? __fmaf_rn(d[j][r], us[j][e], acc[e]) : __fadd_rn(acc[e], us[j][e]);
                    }
                }
            i += nb;
            ++bi;
        }
        // Element e: row 64 rg + 16 wq + g + 8 ((e / 2) % 2), token m0 + 8 (e / 4) + 2t + e % 2. An
        // empty slice (past the last unit) stores its zero sums, as linear_tcs_impl's do.
        const int row0 = 64 * rg + 16 * wq + g;
#pragma unroll
        for (int e = 0; e < NA; ++e) {
            const int row = row0 + 8 * ((e >> 1) & 1), m = m0 + 8 * (e >> 2) + 2 * t + (e & 1);
            if (!CL && row < R && m < M) part[((size_t)sl * M + m) * R + row] = acc[e];
        }
        if (CL) {
            // The cluster reduce of this step (see TCK_CLUSTER): reducer `red` of the run's
            // (k TCK_WG + wg)-th row group; the slot is written only once its last reader is
            // done (phase k - 1 of `empty`).
            const int wt = tid & 127;
            const u32 fullb = clbar + 8 * wg, emptyb = clbar + 8 * (TCK_WG + wg);
            float4* slot = clslot + wg * (NA / 4) * 128 + wt;
            const u32 red = (u32)((k * TCK_WG + wg) % slices);
            // (Each spin loop is left lane by lane: __syncwarp before the .aligned barriers and
            // MMAs that follow.)
            if (k > 0) tck_cl_wait(emptyb, (k - 1) & 1);
            __syncwarp();
            if (red != crank) {
#pragma unroll
                for (int c = 0; c < NA / 4; ++c)
                    slot[c * 128] = make_float4(acc[4 * c], acc[4 * c + 1], acc[4 * c + 2], acc[4 * c + 3]);
                asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
                if (wt == 0) tck_cl_arrive(fullb, red);
            } else {
                tck_cl_wait(fullb, nred & 1);
                __syncwarp();
                ++nred;
                // Slice order, the first as is (slice_sum); this block's own sums from registers.
                float v[NA];
                const u32 sa = (u32)__cvta_generic_to_shared(slot);
                for (int sr = 0; sr < slices; ++sr) {
                    float4 c4[NA / 4];
                    if ((u32)sr == crank) {
#pragma unroll
                        for (int c = 0; c < NA / 4; ++c)
                            c4[c] = make_float4(acc[4 * c], acc[4 * c + 1], acc[4 * c + 2], acc[4 * c + 3]);
                    } else {
                        const u32 ra = tck_cl_map(sa, (u32)sr);
#pragma unroll
                        for (int c = 0; c < NA / 4; ++c) c4[c] = tck_cl_ld4(ra + c * 128 * 16);
                    }
#pragma unroll
                    for (int e = 0; e < NA; ++e) {
                        const float4 q4 = c4[e >> 2];
                        const float xv = (e & 3) == 0 ? q4.x : (e & 3) == 1 ? q4.y : (e & 3) == 2 ? q4.z : q4.w;
                        v[e] = sr == 0 ? xv : __fadd_rn(v[e], xv);
                    }
                }
                asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
                if (wt < slices) tck_cl_arrive(emptyb, (u32)wt);
                const int I = R / 2;
#pragma unroll
                for (int e = 0; e < NA; ++e) {
                    const int row = row0 + 8 * ((e >> 1) & 1), m = m0 + 8 * (e >> 2) + 2 * t + (e & 1);
                    if (bias && row < R) v[e] = __fadd_rn(v[e], bias[row]);
                    if (fuse == 2) {
                        if (m < M) part[(size_t)m * R + row] = v[e];
                    } else if (row < R && m < M) {
                        float* dst = row < R0        ? y + (size_t)m * R0 + row
                                     : row < R0 + R1 ? y1 + (size_t)m * R1 + (row - R0)
                                                     : y2 + (size_t)m * (R - R0 - R1) + (row - R0 - R1);
                        *dst = v[e];
                    }
                }
                if (fuse == 2) {
                    // SwiGLU: the gate group p and its up group p + groups / 2 (any blocks,
                    // any order) leave their sums with bias in `part` ([M][R] f32, through L2)
                    // and count in for the pair and token block (TCK_FUSE's pattern); the second
                    // reads the other's and stores swiglu1(gate, up) (reduce_swiglu4_store's
                    // bits), then sets the counter back to 0.
                    const bool up = rg >= groups / 2;
                    u32* c = cnt + (size_t)(m0 / NTOK) * (groups / 2) + (up ? rg - groups / 2 : rg);
                    __threadfence();
                    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
                    if (wt == 0) {
                        const bool last = atomicAdd(c, 1u) == 1u;
                        if (last) *c = 0u;
                        clflag[wg] = last;
                    }
                    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
                    if (clflag[wg]) {
                        __threadfence();
#pragma unroll
                        for (int e = 0; e < NA; ++e) {
                            const int row = row0 + 8 * ((e >> 1) & 1), m = m0 + 8 * (e >> 2) + 2 * t + (e & 1);
                            if (m >= M) continue;
                            const float o = __ldcg(part + (size_t)m * R + (up ? row - I : row + I));
                            y[(size_t)m * I + (up ? row - I : row)] = up ? swiglu1(o, v[e]) : swiglu1(v[e], o);
                        }
                    }
                }
            }
            __syncwarp();
        }
#if TCK_FUSE
        if (!CL && fuse) tck_fused_reduce(part, bias, y, y1, y2, R0, R1, cnt, fuse, M, R, slices, groups, rg, m0, NTOK,
                                   tid & 127, wg);
#endif
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    // TCK_BULK: every copy issued was waited for (a warp issues only batches it takes).
    // TCK_CLUSTER: no block leaves while another may still read its slots or arrive on its
    // mbarriers.
    if (CL) asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#else
    // Built for an architecture without wgmma: the host never launches this (QTC_SK = 3 needs
    // sm_90a), so reaching it is a bug; trap rather than leave `part` unwritten.
    (void)x; (void)q; (void)s; (void)part; (void)M; (void)K; (void)R; (void)slices; (void)rg_run;
    (void)bias; (void)y; (void)y1; (void)y2; (void)R0; (void)R1; (void)cnt; (void)fuse;
    __trap();
#endif
}

// The entries: CL false, the plain form; true, the cluster entries (TCK_CLUSTER): grid (slices,
// runs, token blocks) in clusters of (slices, 1, 1); fuse 1 (the outputs y / y1 / y2 at R0, R1;
// `part` and `cnt` unused) or 2 (SwiGLU into y, [M, R / 2] f32, R / 2 a multiple of 64; part:
// M R f32 of scratch; cnt: ceil(M / NTOK) R / 128 u32 zeros, left zero).
#define LINEAR_TCK_ENTRY(name, F, NTOK, CL)                                                         \
    extern "C" __global__ void __launch_bounds__(128 * TCK_WG)                                     \
        name(const float* x, const u8* q, const u32* s, float* part, int M, int K, int R, int slices, \
             int rg_run, const float* bias, float* y, float* y1, float* y2, int R0, int R1, u32* cnt,   \
             int fuse) {                                                                           \
        linear_tck_impl<F, NTOK, CL>(x, q, s, part, M, K, R, slices, rg_run, bias, y, y1, y2, R0, R1, \
                                     cnt, fuse);                                                   \
    }
#define LINEAR_TCK(name, F, NTOK) LINEAR_TCK_ENTRY(name, F, NTOK, false)
#define LINEAR_TCK_CL(name, F, NTOK) LINEAR_TCK_ENTRY(name, F, NTOK, true)

LINEAR_TCK(linear_tck_bf16_n16, TC_BF16, 16)
LINEAR_TCK(linear_tck_bf16_n32, TC_BF16, 32)
LINEAR_TCK(linear_tck_q8_0_n16, TC_Q8_0, 16)
LINEAR_TCK(linear_tck_q8_0_n32, TC_Q8_0, 32)
LINEAR_TCK(linear_tck_q4_k_n16, TC_Q4_K, 16)
LINEAR_TCK(linear_tck_q4_k_n32, TC_Q4_K, 32)
#if TCK_CLUSTER
LINEAR_TCK_CL(linear_tck_bf16_n16_cl, TC_BF16, 16)
LINEAR_TCK_CL(linear_tck_bf16_n32_cl, TC_BF16, 32)
LINEAR_TCK_CL(linear_tck_q8_0_n16_cl, TC_Q8_0, 16)
LINEAR_TCK_CL(linear_tck_q8_0_n32_cl, TC_Q8_0, 32)
LINEAR_TCK_CL(linear_tck_q4_k_n16_cl, TC_Q4_K, 16)
LINEAR_TCK_CL(linear_tck_q4_k_n32_cl, TC_Q4_K, 32)
#endif
