// Hopper's warpgroup MMA (wgmma), mbarriers and bulk/tensor copies: the helpers shared by the
// wgmma GEMM forms (kernels/linear_tcw.cu, kernels/linear_tck.cu; sm_90a only, TCW_HAVE_WGMMA is
// 0 elsewhere). Include after common.cuh; the engine splices this file in as it does common.cuh
// (engine/src/backend/cuda/compile.rs `full_source`).
#pragma once

// A tensor map (CUDA driver API `CUtensorMap`: 128 opaque bytes, 64-byte aligned) as a kernel
// parameter (`const __grid_constant__`, TCW_TMA = 1); the host encodes it with
// cuTensorMapEncodeTiled.
struct __align__(64) TmaMap {
    unsigned long long v[16];
};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TCW_HAVE_WGMMA 1
// A shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address >> 4,
// leading byte offset (between core matrices along K) 128, stride byte offset (between core
// matrices along N) `sbo`, no swizzle.
__device__ __forceinline__ unsigned long long tcw_desc(const void* p, int sbo) {
    const unsigned long long a = (unsigned long long)__cvta_generic_to_shared(p);
    return ((a & 0x3FFFF) >> 4) | ((unsigned long long)(128 >> 4) << 16) | ((unsigned long long)(sbo >> 4) << 32);
}
__device__ __forceinline__ void tcw_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void tcw_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// mbarrier and bulk-copy helpers (PTX ISA 9.7.13.15, 9.7.9.25; TCW_BULK = 1). `bar`: a shared
// address of an 8-byte mbarrier.
__device__ __forceinline__ void tcw_bar_init(u32 bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void tcw_bar_expect(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tcw_bulk(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void tcw_bar_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "TCW_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra TCW_WAIT;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
// The wgmma GEMM's cluster and tensor-copy helpers (kernels/linear_tcw.cu).
// TCW_CLUSTER: `bytes` from global `src` to shared offset `dst` of every block of the cluster,
// completing on the mbarrier at offset `bar` in each.
__device__ __forceinline__ void tcw_bulk_mc(u32 dst, const void* src, u32 bytes, u32 bar) {
    const unsigned short both = 3;
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], "
        "%4;\n" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar), "h"(both)
        : "memory");
}
// TCW_TMA: the box at coordinates (c0, c1, c2) of the 3-D tensor map `map` (a kernel parameter's
// address) to shared offset `dst`, completing on the mbarrier at offset `bar`; with `mc` (TCW_CLUSTER)
// into both blocks of the cluster.
__device__ __forceinline__ void tcw_tma3(u32 dst, const TmaMap* map, int c0, int c1, int c2, u32 bar, bool mc) {
    const unsigned short both = 3;
    if (mc)
        asm volatile(
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
            "%3, %4}], [%5], %6;\n" ::"r"(dst),
            "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(both)
            : "memory");
    else
        asm volatile(
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
                dst),
            "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
            : "memory");
}
// One arrival on the mbarrier at shared offset `bar` of block `rank` of the cluster, with default
// semantics (release at CTA scope), as CUTLASS's ClusterBarrier::arrive: the stage it frees was
// read only by wgmma and shared loads complete before the block's barrier. Run 124 (H100): the
// release.cluster form (a MEMBAR.GPU an arrival, and acquire.cluster waits with an L1
// invalidate) made the BF16 GEMM 2.4x slower than the shipped one; this one 1.32x.
__device__ __forceinline__ void tcw_arrive_cluster(u32 bar, u32 rank) {
    u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(rank));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void tcw_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Pins d's registers at this point (CUTLASS's warpgroup_fence_operand): the compiler may not
// move their definitions (the zeros before the first MMA) in between a fence and its MMAs.
template <int N>
__device__ __forceinline__ void tcw_pin(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// d = (scale_d ? d : 0) + A B: one m64n64k16 (bf16 in, f32 accumulation), A (this warp's 16 rows
// x 16 k) in registers in the m16n8k16 fragment order, B (64 tokens x 16 k) by descriptor.
__device__ __forceinline__ void tcw_mma(float (&d)[32], const u32 (&a)[4], unsigned long long desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
        "{%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
// Wait until at most N committed groups of this warpgroup are pending; d's registers are written
// by them, so they are named here (nothing reads them before the wait).
template <int N>
__device__ __forceinline__ void tcw_wait(float (&d)[32]) {
    asm volatile("wgmma.wait_group.sync.aligned %32;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "n"(N)
                 : "memory");
}
// d = (scale_d ? d : 0) + A B for NTOK = 32 (m64n32k16, 16 accumulators a thread) and 16
// (m64n16k16, 8): A (this warp's 16 rows x 16 k) in registers, B (NTOK tokens x 16 k) by
// descriptor.
__device__ __forceinline__ void tck_mma(float (&d)[16], const u32 (&a)[4], unsigned long long desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
        "{%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
__device__ __forceinline__ void tck_mma(float (&d)[8], const u32 (&a)[4], unsigned long long desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}
#else
#define TCW_HAVE_WGMMA 0
#endif
