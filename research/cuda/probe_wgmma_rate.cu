// Probe (thirty-ninth session, research only; not part of the engine): what bounds the wgmma
// GEMM (kernels/linear_tcw.cu) at M = 1,024? Runs 134-135b (H100): the tensor pipe is active
// about 40% of the time, about 1,230 cycles a unit (k 32) a block where its two warpgroups'
// MMAs are 512 cycles at the pipe's peak, and taking turns (TCW_PP) did not help.
// Each block (one an SM: 120 KiB of shared memory) runs `units` units of the GEMM's MMAs with no
// copies: per unit and warpgroup 8 HGMMA m64n64k16 (A, 4 registers, fixed; B by descriptor from
// a 4-stage ring of 16 KiB, the GEMM's x layout), the same 524,288 MACs in every mode:
//   0 drain:   both halves' MMAs (from 0), wait for all, no fold;
//   1 fold:    the GEMM's order: wait for half 0, fold it (32 FADD), wait for half 1, fold it;
//   2 stream:  accumulate across units (no per-unit sums), keep one unit's group in flight
//              (CUTLASS's mainloop): the pipe's rate with this shape;
//   3 n128:    4 HGMMA m64n128k16 a unit into one 64-register sum, wait, fold 64 FADD;
//   4 n128s:   m64n128k16, accumulate across units, one group in flight.
// Warpgroups a block: 1, 2 or 3. Prints cycles a unit (clock64, warpgroup 0 of block 0) and
// MACs a clock an SM; mode 2's figure at 2 warpgroups is the roof for this MMA shape.
// Reading: 1 against 0 prices the folds; 0 against 2 the per-unit drain; 3 against 1 the N = 64
// split; 1 against the GEMM's ~1,230 cycles a unit the copies, barriers and fragment reads.
// Build and run on the GPU machine: nvcc -O2 -arch=sm_90a -o /tmp/pr probe_wgmma_rate.cu && /tmp/pr
#ifndef __CUDACC_RTC__
#include <cstdio>
#endif
typedef unsigned int u32;
typedef unsigned long long u64;
constexpr int STAGES = 4, STAGE = 16384;
#ifndef __CUDACC_RTC__
constexpr int SMEM = 120 * 1024;  // one block an SM
#endif

__device__ __forceinline__ u64 desc_of(u32 addr) {
    // Start address >> 4, leading byte offset 128, stride byte offset 1,024 (two parts of x), no swizzle.
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(1024 >> 4) << 32);
}
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_all_but() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int R>
__device__ __forceinline__ void pin(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void mma64(float (&d)[32], const u32 (&a)[4], u64 desc, int scale_d) {
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
__device__ __forceinline__ void mma128(float (&d)[64], const u32 (&a)[4], u64 desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "{%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

template <int MODE, int NWG>
__global__ void __launch_bounds__(128 * NWG, 1) rate(int units, u64* cycles, float* sink) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int tid = threadIdx.x;
    for (int i = tid; i < STAGES * STAGE / 4; i += 128 * NWG) reinterpret_cast<u32*>(sm)[i] = 0x3F803F80u;
    __syncthreads();
    const u32 base = (u32)__cvta_generic_to_shared(sm);
    u32 a[2][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i / 4][i % 4] = 0x3F803F80u ^ (u32)(tid & 1);
    int from0, acc_on;
    asm volatile("mov.b32 %0, 0;\n" : "=r"(from0));
    asm volatile("mov.b32 %0, 1;\n" : "=r"(acc_on));
    float acc[64], us0[32], us1[32], u128[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = u128[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) us0[i] = us1[i] = 0.0f;
    const u64 t0 = clock64();
    for (int u = 0; u < units; ++u) {
        const u32 x = base + (u % STAGES) * STAGE;
        if (MODE <= 2) {
            const int s0 = MODE == 2 ? acc_on : from0;
            u64 dsc[2][2][2];  // [half][k-half][part]
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const u64 v = desc_of(x + (i >> 2) * 8192 + (i & 1) * 512 + ((i >> 1) & 1) * 256);
                asm volatile("mov.b64 %0, %1;\n" : "=l"(dsc[i >> 2][(i >> 1) & 1][i & 1]) : "l"(v));
            }
            if (MODE != 2) {  // (in flight across units in mode 2: not touched)
                pin(us0);
                pin(us1);
            }
            fence();
#pragma unroll
            for (int i = 0; i < 4; ++i) mma64(us0, a[i >> 1], dsc[0][i >> 1][i & 1], i == 0 ? s0 : acc_on);
            commit();
#pragma unroll
            for (int i = 0; i < 4; ++i) mma64(us1, a[i >> 1], dsc[1][i >> 1][i & 1], i == 0 ? s0 : acc_on);
            commit();
            if (MODE == 0) {
                wait_all_but<0>();
                pin(us0);
                pin(us1);
            } else if (MODE == 1) {
                wait_all_but<1>();
                pin(us0);
#pragma unroll
                for (int i = 0; i < 32; ++i) acc[i] = __fadd_rn(acc[i], us0[i]);
                wait_all_but<0>();
                pin(us1);
#pragma unroll
                for (int i = 0; i < 32; ++i) acc[32 + i] = __fadd_rn(acc[32 + i], us1[i]);
            } else {
                wait_all_but<2>();  // this unit's two groups may still run
            }
        } else {
            const int s0 = MODE == 4 ? acc_on : from0;
            u64 dsc[2][2];  // [k-half][part]; 128 tokens: stride 1,024 over 16 token blocks
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const u64 v = desc_of(x + (i & 1) * 512 + (i >> 1) * 256);
                asm volatile("mov.b64 %0, %1;\n" : "=l"(dsc[i >> 1][i & 1]) : "l"(v));
            }
            if (MODE == 3) pin(u128);
            fence();
#pragma unroll
            for (int i = 0; i < 4; ++i) mma128(u128, a[i >> 1], dsc[i >> 1][i & 1], i == 0 ? s0 : acc_on);
            commit();
            if (MODE == 3) {
                wait_all_but<0>();
                pin(u128);
#pragma unroll
                for (int i = 0; i < 64; ++i) acc[i] = __fadd_rn(acc[i], u128[i]);
            } else {
                wait_all_but<1>();
            }
        }
    }
    wait_all_but<0>();
    pin(us0);
    pin(us1);
    pin(u128);
    const u64 t1 = clock64();
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) s += acc[i] + u128[i];
#pragma unroll
    for (int i = 0; i < 32; ++i) s += us0[i] + us1[i];
    sink[blockIdx.x * blockDim.x + tid] = s;
    if (blockIdx.x == 0 && (tid & 127) == 0) cycles[tid >> 7] = t1 - t0;
}

#ifdef __CUDACC_RTC__
// NVRTC (a syntax and register check without nvcc): every instance.
#define RATE3(M) template __global__ void rate<M, 1>(int, u64*, float*); \
    template __global__ void rate<M, 2>(int, u64*, float*); template __global__ void rate<M, 3>(int, u64*, float*);
RATE3(0) RATE3(1) RATE3(2) RATE3(3) RATE3(4)
#else
template <int MODE, int NWG>
static void one(int sms, int units, u64* cyc, float* sink) {
    cudaFuncSetAttribute(rate<MODE, NWG>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    for (int rep = 0; rep < 2; ++rep) rate<MODE, NWG><<<sms, 128 * NWG, SMEM>>>(units, cyc, sink);  // first warms
    cudaError_t e = cudaDeviceSynchronize();
    u64 h[3] = {0, 0, 0};
    cudaMemcpy(h, cyc, sizeof(h), cudaMemcpyDeviceToHost);
    const char* names[5] = {"drain", "fold", "stream", "n128", "n128s"};
    const double per = (double)h[0] / units, macs = 524288.0 * NWG / per;
    printf("%-7s wg %d  cycles/unit %8.1f  MACs/clk/SM %7.1f  %s\n", names[MODE], NWG, per, macs,
           e == cudaSuccess ? "" : cudaGetErrorString(e));
}

template <int MODE>
static void modes(int sms, int units, u64* cyc, float* sink) {
    one<MODE, 1>(sms, units, cyc, sink);
    one<MODE, 2>(sms, units, cyc, sink);
    one<MODE, 3>(sms, units, cyc, sink);
}

int main() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    u64* cyc;
    float* sink;
    cudaMalloc(&cyc, 3 * sizeof(u64));
    cudaMalloc(&sink, (size_t)sms * 384 * sizeof(float));
    const int units = 4096;
    printf("SMs %d, %d units a block, 524,288 MACs a unit a warpgroup\n", sms, units);
    modes<0>(sms, units, cyc, sink);
    modes<1>(sms, units, cyc, sink);
    modes<2>(sms, units, cyc, sink);
    modes<3>(sms, units, cyc, sink);
    modes<4>(sms, units, cyc, sink);
    return 0;
}
#endif
