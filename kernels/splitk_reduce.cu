// The split-K forms' reduce (kernels/linear_tc.cu `linear_tcs_*`, kernels/linear_tcw.cu
// `linear_tck_*` write one f32 sum per K slice, token and row to `part`, [slices][M][R]): the slices
// added in slice order, the first as is, then the bias, as every other form of those matrices
// adds a row's slice sums, so the same bits; and the same sums with SwiGLU on top (TCS_GLU).
#include "common.cuh"

// Slices a reduce thread loads before it adds them (loads in flight: run 74's profile had the
// one-load-then-add loop at 1.5-1.9 TB/s, latency-bound). The adds stay in slice order.
#define TCS_RED_BATCH 8

// a + b rounded once, element by element.
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float4 add_rn(float4 a, float4 b) {
    return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w));
}

// The sum over slices of the element (T = float) or four consecutive elements (T = float4, `off`
// a multiple of 4) at offset `off` of each [M][R] slice of `part` (`mr` = M R floats apart): the
// first slice as is, then the others added in slice order; TCS_RED_BATCH loads are issued before
// their adds. Every reduce below sums through it, so all give a row the same bits.
template <typename T>
__device__ __forceinline__ T slice_sum(const float* part, size_t mr, size_t off, int slices) {
    T v{};
    for (int s0 = 0; s0 < slices; s0 += TCS_RED_BATCH) {
        T p[TCS_RED_BATCH];
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH; ++b)
            if (s0 + b < slices) p[b] = *reinterpret_cast<const T*>(part + (size_t)(s0 + b) * mr + off);
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH; ++b)
            if (s0 + b < slices) v = s0 + b == 0 ? p[b] : add_rn(v, p[b]);
    }
    return v;
}

// y = the slice sums of `part` ([slices][M][R] f32, `slice_sum`), then the bias (null: none),
// stored to the outputs. Grid: ceil(M R / 256); block 256.
extern "C" __global__ void linear_tcs_reduce(const float* part, const float* bias, LIN_OUT_PARAMS, int slices) {
    pdl_entry();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, mr = (size_t)M * R;
    if (i >= mr) return;
    const int m = (int)(i / R), row = (int)(i % R);
    float v = slice_sum<float>(part, mr, i, slices);
    if (bias) v = __fadd_rn(v, bias[row]);
    store_out(LIN_OUTS, m, row, v);
}

// linear_tcs_reduce four consecutive rows of a token a thread (16-byte loads and stores), each
// element by the same adds in the same order. Needs R, R0 and R1 multiples of 4 (the host
// checks), so a thread's four rows share one output and every address is 16-byte aligned.
// Grid: ceil(M R / 1024); block 256.
extern "C" __global__ void linear_tcs_reduce4(const float* part, const float* bias, LIN_OUT_PARAMS, int slices) {
    pdl_entry();
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4, mr = (size_t)M * R;
    if (i >= mr) return;
    const int m = (int)(i / R), row = (int)(i % R);
    float4 v = slice_sum<float4>(part, mr, i, slices);
    if (bias) v = add_rn(v, *reinterpret_cast<const float4*>(bias + row));
    float* dst = row < R0        ? y + (size_t)m * R0 + row
                 : row < R0 + R1 ? y1 + (size_t)m * R1 + (row - R0)
                                 : y2 + (size_t)m * (R - R0 - R1) + (row - R0 - R1);
    *reinterpret_cast<float4*>(dst) = v;
}

// linear_tcs_reduce4 of a gate|up matrix (R = 2 I rows: gate rows 0 .. I, up rows I .. 2I)
// followed by SwiGLU (TCS_GLU = 1, host side): a thread sums four gate rows and the four up rows
// I below them exactly as linear_tcs_reduce4 (`slice_sum`, then the bias), and stores
// out[m, j] = swiglu1(gate, up) as act.cu's swiglu_f32 would; gate and up themselves are not
// stored. Needs I a multiple of 4. out: [M, I] f32. Grid: ceil(M I / 1024); block 256.
extern "C" __global__ void linear_tcs_reduce_swiglu(const float* part, const float* bias, float* out, int M, int I,
                                                    int slices) {
    pdl_entry();
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4, mi = (size_t)M * I;
    if (i >= mi) return;
    const int m = (int)(i / I), j = (int)(i % I);
    const size_t mr = mi * 2, g0 = (size_t)m * 2 * I + j;
    float4 g = slice_sum<float4>(part, mr, g0, slices), u = slice_sum<float4>(part, mr, g0 + I, slices);
    if (bias) {
        g = add_rn(g, *reinterpret_cast<const float4*>(bias + j));
        u = add_rn(u, *reinterpret_cast<const float4*>(bias + I + j));
    }
    *reinterpret_cast<float4*>(out + i) =
        make_float4(swiglu1(g.x, u.x), swiglu1(g.y, u.y), swiglu1(g.z, u.z), swiglu1(g.w, u.w));
}
