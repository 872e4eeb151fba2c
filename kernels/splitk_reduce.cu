// The split-K forms' reduce (kernels/linear_tc.cu `linear_tcs_*`, kernels/linear_tcw.cu
// `linear_tck_*` write one f32 sum per K slice, token and row to `part`, [slices][M][R]): the slices
// added in slice order, the first as is, then the bias, as every other form of those matrices
// adds a row's slice sums, so the same bits; and the same sums with SwiGLU on top (TCS_GLU).
#include "common.cuh"

// Slices a reduce thread loads before it adds them (loads in flight: run 74's profile had the
// one-load-then-add loop at 1.5-1.9 TB/s, latency-bound). The adds stay in slice order.
#define TCS_RED_BATCH 8

// y = the slice sums of `part` ([slices][M][R] f32) added in slice order (the first as is), then
// the bias (null: none), stored to the outputs. Grid: ceil(M R / 256); block 256.
extern "C" __global__ void linear_tcs_reduce(const float* part, const float* bias, LIN_OUT_PARAMS, int slices) {
    pdl_entry();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, mr = (size_t)M * R;
    if (i >= mr) return;
    const int m = (int)(i / R), row = (int)(i % R);
    float v = 0.0f;
    for (int s0 = 0; s0 < slices; s0 += TCS_RED_BATCH) {
        float p[TCS_RED_BATCH];
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH; ++b)
            if (s0 + b < slices) p[b] = part[(size_t)(s0 + b) * mr + i];
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH; ++b)
            if (s0 + b < slices) v = s0 + b == 0 ? p[b] : __fadd_rn(v, p[b]);
    }
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
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s0 = 0; s0 < slices; s0 += TCS_RED_BATCH) {
        float4 p[TCS_RED_BATCH];
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH; ++b)
            if (s0 + b < slices) p[b] = *reinterpret_cast<const float4*>(part + (size_t)(s0 + b) * mr + i);
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH; ++b)
            if (s0 + b < slices) {
                if (s0 + b == 0) {
                    v = p[b];
                } else {
                    v.x = __fadd_rn(v.x, p[b].x), v.y = __fadd_rn(v.y, p[b].y);
                    v.z = __fadd_rn(v.z, p[b].z), v.w = __fadd_rn(v.w, p[b].w);
                }
            }
    }
    if (bias) {
        const float4 c = *reinterpret_cast<const float4*>(bias + row);
        v.x = __fadd_rn(v.x, c.x), v.y = __fadd_rn(v.y, c.y), v.z = __fadd_rn(v.z, c.z), v.w = __fadd_rn(v.w, c.w);
    }
    float* dst = row < R0        ? y + (size_t)m * R0 + row
                 : row < R0 + R1 ? y1 + (size_t)m * R1 + (row - R0)
                                 : y2 + (size_t)m * (R - R0 - R1) + (row - R0 - R1);
    *reinterpret_cast<float4*>(dst) = v;
}

// linear_tcs_reduce4 of a gate|up matrix (R = 2 I rows: gate rows 0 .. I, up rows I .. 2I)
// followed by SwiGLU (TCS_GLU = 1, host side): a thread sums four gate rows and the four up rows
// I below them exactly as linear_tcs_reduce4 (slices in order, the first as is, then the bias),
// and stores out[m, j] = swiglu1(gate, up) as act.cu's swiglu_f32 would; gate and up themselves
// are not stored. Needs I a multiple of 4. out: [M, I] f32. Grid: ceil(M I / 1024); block 256.
extern "C" __global__ void linear_tcs_reduce_swiglu(const float* part, const float* bias, float* out, int M, int I,
                                                    int slices) {
    pdl_entry();
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4, mi = (size_t)M * I;
    if (i >= mi) return;
    const int R = 2 * I, m = (int)(i / I), j = (int)(i % I);
    const size_t mr = (size_t)M * R, g0 = (size_t)m * R + j, u0 = g0 + I;
    float4 g = make_float4(0.0f, 0.0f, 0.0f, 0.0f), u = g;
    for (int s0 = 0; s0 < slices; s0 += TCS_RED_BATCH / 2) {
        float4 pg[TCS_RED_BATCH / 2], pu[TCS_RED_BATCH / 2];
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH / 2; ++b)
            if (s0 + b < slices) {
                pg[b] = *reinterpret_cast<const float4*>(part + (size_t)(s0 + b) * mr + g0);
                pu[b] = *reinterpret_cast<const float4*>(part + (size_t)(s0 + b) * mr + u0);
            }
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH / 2; ++b)
            if (s0 + b < slices) {
                if (s0 + b == 0) {
                    g = pg[b], u = pu[b];
                } else {
                    g.x = __fadd_rn(g.x, pg[b].x), g.y = __fadd_rn(g.y, pg[b].y);
                    g.z = __fadd_rn(g.z, pg[b].z), g.w = __fadd_rn(g.w, pg[b].w);
                    u.x = __fadd_rn(u.x, pu[b].x), u.y = __fadd_rn(u.y, pu[b].y);
                    u.z = __fadd_rn(u.z, pu[b].z), u.w = __fadd_rn(u.w, pu[b].w);
                }
            }
    }
    if (bias) {
        const float4 bg = *reinterpret_cast<const float4*>(bias + j);
        const float4 bu = *reinterpret_cast<const float4*>(bias + I + j);
        g.x = __fadd_rn(g.x, bg.x), g.y = __fadd_rn(g.y, bg.y), g.z = __fadd_rn(g.z, bg.z), g.w = __fadd_rn(g.w, bg.w);
        u.x = __fadd_rn(u.x, bu.x), u.y = __fadd_rn(u.y, bu.y), u.z = __fadd_rn(u.z, bu.z), u.w = __fadd_rn(u.w, bu.w);
    }
    *reinterpret_cast<float4*>(out + i) =
        make_float4(swiglu1(g.x, u.x), swiglu1(g.y, u.y), swiglu1(g.z, u.z), swiglu1(g.w, u.w));
}
