// Probe (thirty-fourth session, research only; not part of the engine; not yet run on a GPU):
// the instructions a clustered wgmma GEMM would use to share each unit of x between the two
// blocks of a cluster (research/cuda-notes.md, thirty-fourth session, "Next, for target 4").
// Does one bulk copy with .multicast::cluster write into both blocks' shared memory and complete
// bytes on both blocks' mbarriers? Does a remote mbarrier arrive (mapa + arrive.release.cluster)
// complete the peer's barrier, so that an "empty" barrier of count 2 frees a stage for reuse
// only after both blocks have read it?
// Each cluster of 2 blocks (along y): block rank r copies its half (2 KiB) of a 4 KiB source
// slice to offset r * 2 KiB in both blocks; each block expects all 4 KiB on its own "full"
// barrier, reads the slice, then arrives on both blocks' "empty" barriers and waits on its own.
// Pass: every block of every cluster read the whole slice, and no launch hangs or faults.
// NVRTC 13.0 (sm_90a) compiles the kernel: 10 registers, no spill.
// Build and run on the GPU machine: nvcc -O2 -arch=sm_90a -o /tmp/pmc probe_multicast.cu && /tmp/pmc
#include <cstdio>
#include <vector>
typedef unsigned int u32;

__device__ __forceinline__ void wait_parity(u32 bar, u32 parity) {
    asm volatile("{\n.reg .pred done;\nW:\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra W;\n}\n" ::"r"(bar), "r"(parity)
                 : "memory");
}

// src: [clusters][1024] f32 (one 4 KiB slice a cluster); out: [blocks][1024] f32. Block 1024
// threads, dynamic shared memory 4,096 + 16 bytes.
extern "C" __global__ void __cluster_dims__(1, 2, 1) mc_probe(const float* src, float* out) {
    extern __shared__ __align__(128) unsigned char sm[];
    const u32 full = (u32)__cvta_generic_to_shared(sm + 4096), empty = full + 8;
    u32 rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    const float* slice = src + (size_t)(blockIdx.y / 2) * 1024;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(full) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;\n" ::"r"(empty) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // Both blocks' barriers are initialized before either copies or arrives.
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(full), "r"(4096u) : "memory");
        const unsigned short mask = 3;  // both blocks of the cluster
        const u32 dst = (u32)__cvta_generic_to_shared(sm) + rank * 2048;
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, "
            "[%3], %4;\n" ::"r"(dst),
            "l"(slice + rank * 512), "r"(2048u), "r"(full), "h"(mask)
            : "memory");
    }
    wait_parity(full, 0);
    out[(size_t)blockIdx.y * 1024 + threadIdx.x] = reinterpret_cast<const float*>(sm)[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 r = 0; r < 2; ++r) {
            u32 remote;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(empty), "r"(r));
            asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
        }
    }
    wait_parity(empty, 0);
    // No block leaves while its peer may still arrive on its barriers.
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

int main() {
    const int clusters = 264, blocks = 2 * clusters;
    std::vector<float> h(clusters * 1024);
    for (size_t i = 0; i < h.size(); ++i) h[i] = (float)i * 0.5f + 1.0f;
    float *src, *out;
    cudaMalloc(&src, h.size() * 4);
    cudaMalloc(&out, (size_t)blocks * 1024 * 4);
    cudaMemcpy(src, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    cudaMemset(out, 0, (size_t)blocks * 1024 * 4);
    for (int rep = 0; rep < 100; ++rep) mc_probe<<<dim3(1, blocks), 1024, 4096 + 16>>>(src, out);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("FAIL: %s\n", cudaGetErrorString(e));
        return 1;
    }
    std::vector<float> o((size_t)blocks * 1024);
    cudaMemcpy(o.data(), out, o.size() * 4, cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (int b = 0; b < blocks; ++b)
        for (int i = 0; i < 1024; ++i) bad += o[(size_t)b * 1024 + i] != h[(size_t)(b / 2) * 1024 + i];
    printf("%s: %d blocks in clusters of 2, %zu of %zu values wrong\n", bad ? "FAIL" : "PASS", blocks, bad, o.size());
    return bad ? 1 : 0;
}
