// Probe (thirty-sixth session, research only; not part of the engine): why are the wgmma GEMM's
// bulk-copy forms slow? Run 125 (H100): TCW_WS, every unit's copies issued by a producer warp as
// cp.async.bulk of 2 KiB each (16 token blocks of x + 8 row tiles), is 1.84x slower than the
// cp.async ring; run 63's TCW_BULK 1.8x; TCW_CLUSTER on TCW_WS (x halved) 1.49x. Question: does
// the copy path alone (L2 -> shared memory, no MMA) reach the bytes a cycle the GEMM needs, and
// does the rate depend on the size of each bulk copy?
// Each block streams `units` units of U bytes through a ring of 4 stages (the GEMM's shape: 24
// KiB a unit, 256 threads, one block an SM), every thread reading the whole stage from shared
// memory before it is refilled (as the MMAs do). The source is 3 MiB read by every block (x and
// weights in L2, as in the GEMM). Chunk i of unit v lies at ((i * 64 + v % 64) * C) (the GEMM's
// layout: token blocks and row tiles nu units apart) or, with `contig`, at v % 64 * U + i * C.
// Modes: cp.async (16 bytes a thread, a commit group a unit, as the shipped ring); bulk copies of
// C bytes issued by lane i % 32 of warp 0 (TCW_WS's issue), or all by lane 0; one 3-D tensor copy
// a unit (a tensor map over the same scattered layout: box 256 x 8 bytes, 1 unit, all chunks).
// Prints the rate a block (bytes a clock, from clock64 in block 0) and the grid's GB/s.
// Build and run on the GPU machine: nvcc -O2 -arch=sm_90a -o /tmp/pb probe_bulk.cu -lcuda && /tmp/pb
#include <cuda.h>
#include <cstdio>
typedef unsigned int u32;
typedef unsigned long long u64;
constexpr int NTH = 256, STAGES = 4, NU = 64;

__device__ __forceinline__ void bar_wait(u32 bar, u32 parity) {
    asm volatile("{\n.reg .pred done;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra W;\n}\n" ::"r"(bar), "r"(parity)
                 : "memory");
}

// mode 0: cp.async; 1: bulk, copies spread over warp 0's lanes; 2: bulk, all by lane 0; 3: one
// tensor copy a unit by lane 0 (C = 2,048).
extern "C" __global__ void __launch_bounds__(NTH) probe(const unsigned char* src, int mode, int C, int U, int contig,
                                                        int units, float* sink, u64* cycles,
                                                        const __grid_constant__ CUtensorMap tmap) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nch = U / C;
    const u32 base = (u32)__cvta_generic_to_shared(sm), bar0 = base + STAGES * U;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar0 + 8 * s) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    auto chunk = [&](int v, int i) -> const unsigned char* {
        return src + (contig ? (size_t)(v % NU) * U + (size_t)i * C : ((size_t)i * NU + v % NU) * C);
    };
    auto issue = [&](int v, int s) {
        const u32 dst = base + s * U, bar = bar0 + 8 * s;
        if (mode == 0) {
            for (int o = tid * 16; o < U; o += NTH * 16)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + o), "l"(chunk(v, o / C) + o % C) : "memory");
            asm volatile("cp.async.commit_group;\n" ::: "memory");
        } else if (warp == 0) {
            if (lane == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(U) : "memory");
            __syncwarp();
            if (mode == 3) {
                if (lane == 0)
                    asm volatile(
                        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
                        "[%5];\n" ::"r"(dst),
                        "l"(&tmap), "r"(0), "r"(v % NU), "r"(0), "r"(bar)
                        : "memory");
                return;
            }
            for (int i = mode == 1 ? lane : (lane == 0 ? 0 : nch); i < nch; i += mode == 1 ? 32 : 1)
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                                 dst + i * C),
                             "l"(chunk(v, i)), "r"(C), "r"(bar)
                             : "memory");
        }
    };
    u64 t0 = clock64();
    for (int v = 0; v < STAGES; ++v) issue(v, v);
    float acc = 0.f;
    for (int v = 0; v < units; ++v) {
        const int s = v % STAGES;
        if (mode == 0) {
            asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 1) : "memory");
            __syncthreads();
        } else {
            bar_wait(bar0 + 8 * s, (v / STAGES) & 1);
        }
        for (int o = tid * 16; o < U; o += NTH * 16) {
            const float4 f = *reinterpret_cast<const float4*>(sm + s * U + o);
            acc += f.x + f.w;
        }
        __syncthreads();
        if (v + STAGES < units) issue(v + STAGES, s);
        else if (mode == 0) asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    if (blockIdx.x == 0 && tid == 0) *cycles = clock64() - t0;
    sink[blockIdx.x * NTH + tid] = acc;
}

int main() {
    const size_t SRC = 3u << 20;
    unsigned char* src;
    float* sink;
    u64* cyc;
    cudaMalloc(&src, SRC);
    cudaMemset(src, 0, SRC);
    cudaMalloc(&sink, 1024 * NTH * 4);
    cudaMalloc(&cyc, 8);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
    struct Case {
        const char* name;
        int mode, C, U, contig, bpsm;
    } cases[] = {
        {"cp.async 16 B, 24 KiB unit", 0, 2048, 24576, 0, 1},
        {"bulk 1 KiB x 24, lanes", 1, 1024, 24576, 0, 1},
        {"bulk 2 KiB x 12, lanes (TCW_WS)", 1, 2048, 24576, 0, 1},
        {"bulk 2 KiB x 12, lane 0", 2, 2048, 24576, 0, 1},
        {"bulk 4 KiB x 6, lanes", 1, 4096, 24576, 0, 1},
        {"bulk 8 KiB x 3, lanes", 1, 8192, 24576, 0, 1},
        {"bulk 24 KiB x 1, contiguous", 1, 24576, 24576, 1, 1},
        {"tensor 3-D, 24 KiB a copy (2 KiB x 12)", 3, 2048, 24576, 0, 1},
        {"cp.async, 2 blocks an SM", 0, 2048, 24576, 0, 2},
        {"bulk 2 KiB x 12, 2 blocks an SM", 1, 2048, 24576, 0, 2},
        {"bulk 24 KiB x 1, 2 blocks an SM", 1, 24576, 24576, 1, 2},
        {"tensor 3-D, 2 blocks an SM", 3, 2048, 24576, 0, 2},
    };
    // The tensor map of mode 3: dims (256 x u64, NU units, 12 chunks), strides 2,048 and NU x
    // 2,048 bytes, so element (e, v, i) is byte (i NU + v) 2,048 + 8 e: the scattered layout.
    CUtensorMap tmap;
    {
        cuuint64_t dims[3] = {256, NU, 12}, strides[2] = {2048, (cuuint64_t)NU * 2048};
        cuuint32_t box[3] = {256, 1, 12}, es[3] = {1, 1, 1};
        const CUresult r = cuTensorMapEncodeTiled(&tmap, CU_TENSOR_MAP_DATA_TYPE_UINT64, 3, src, dims, strides, box, es,
                                                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS) {
            printf("cuTensorMapEncodeTiled: error %d\n", (int)r);
            return 1;
        }
    }
    const int units = 1024;
    printf("%-36s %10s %12s %10s\n", "case", "us", "B/clk/block", "GB/s");
    for (auto& c : cases) {
        const int blocks = sms * c.bpsm, smem = STAGES * c.U + 8 * STAGES;
        float best = 1e30f;
        u64 cy = 0;
        for (int rep = 0; rep < 5; ++rep) {
            cudaEvent_t a, b;
            cudaEventCreate(&a);
            cudaEventCreate(&b);
            cudaEventRecord(a);
            probe<<<blocks, NTH, smem>>>(src, c.mode, c.C, c.U, c.contig, units, sink, cyc, tmap);
            cudaEventRecord(b);
            cudaEventSynchronize(b);
            float ms = 0;
            cudaEventElapsedTime(&ms, a, b);
            u64 h = 0;
            cudaMemcpy(&h, cyc, 8, cudaMemcpyDeviceToHost);
            if (ms < best) best = ms, cy = h;
        }
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            printf("%-36s error %s\n", c.name, cudaGetErrorString(e));
            return 1;
        }
        const double bytes = (double)units * c.U;
        printf("%-36s %10.1f %12.1f %10.0f\n", c.name, best * 1e3, bytes / (double)cy, bytes * blocks / (best * 1e-3) / 1e9);
    }
    return 0;
}
