// Shared helpers for memra's kernels. Every .cu file starts with `#include "common.cuh"`; the
// engine splices this file in before handing the source to NVRTC, so NVRTC needs no header
// callback for it. The CUDA headers below come from the include path the engine passes
// (`/usr/local/cuda/include` on the GPU machine, `nvidia/cu13/include` from PyPI in CI).
//
// Exactness (docs/DESIGN.md §3): every reduction here has one fixed shape. Block reductions
// assume a compile-time block size, so a row's sum never depends on how many rows are in flight.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;

// Q8_0 (GGUF): 32 elements per block, f16 scale d then 32 signed bytes; value = q * d.
#define Q8_0_BLOCK_ELEMS 32
#define Q8_0_BLOCK_BYTES 34

// bf16 bits -> f32 (exact).
__device__ __forceinline__ float bf16_bits_to_f32(u16 b) {
    return __uint_as_float(((u32)b) << 16);
}

// f16 bits -> f32 (exact).
__device__ __forceinline__ float f16_bits_to_f32(u16 b) {
    __half_raw r;
    r.x = b;
    return __half2float(__half(r));
}

// Little-endian u16 from a byte pointer with no alignment assumption.
__device__ __forceinline__ u16 load_u16_unaligned(const u8* p) {
    return (u16)p[0] | ((u16)p[1] << 8);
}

// Butterfly sum over a full warp: the same xor tree on every lane, so every lane ends with the
// same bits and the order never depends on the data or the launch shape.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, off);
    }
    return v;
}

// Sum over a block of exactly NT threads (NT a compile-time power of two, NT >= 32): a warp
// butterfly, then warp 0 sums the NT/32 partials in a butterfly of the same fixed shape. `scratch`
// holds NT/32 floats. Every thread returns the total.
template <int NT>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    static_assert(NT >= 32 && (NT & (NT - 1)) == 0, "NT must be a power of two >= 32");
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = (lane < NT / 32) ? scratch[lane] : 0.0f;
    if (warp == 0) {
        t = warp_sum(t);
        if (lane == 0) scratch[0] = t;
    }
    __syncthreads();
    t = scratch[0];
    __syncthreads();
    return t;
}
