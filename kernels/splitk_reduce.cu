// The split-K forms' reduce (kernels/linear_tc.cu `linear_tcs_*`, kernels/linear_tck.cu
// `linear_tck_*` write one f32 sum per K slice, token and row to `part`, [slices][M][R]): the slices
// added in slice order, the first as is, then the bias, as every other form of those matrices
// adds a row's slice sums, so the same bits; and the same sums with SwiGLU on top (TCS_GLU).
#include "common.cuh"

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
    reduce4_store(part, bias, y, y1, y2, R0, R1, R, mr, (int)(i / R), (int)(i % R), slices);
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
    reduce_swiglu4_store(part, bias, out, I, mi * 2, (int)(i / I), (int)(i % I), slices);
}
