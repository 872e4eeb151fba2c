// Q4_K one-token linear on integer tensor cores (QLIN_MMA1 = 1, with QLIN_INT = 1): the same bits
// as the one-token lanes kernel `linear_q4_k_r_m1` (kernels/linear.cu linear_qr_m1_impl), with
// the integer dot products of 16 rows done by mma.sync m16n8k32 s8 (PTX ISA "Matrix fragments for
// mma.m16n8k32") instead of 24 dp4a a lane a unit.
//
// What the lanes kernel computes, for one row: lane c (the "class" c = u mod 32) walks units
// u = c, c + 32, ... in increasing u; per unit the three digit sums S_k = Σ q·x_k (exact int32),
// then acc = fma(d·s, digits_combine(S0, S1, S2), acc) and acc = fma(−(ml·s), fx, acc) with d, ml
// from the super-block header (qr_words) and s, fx from the staged x (stage_digits); then
// warp_sum's xor tree over the 32 classes, then the bias. Here:
//  - a block holds QLIN_MMA1_WG row tiles of 16 rows, 8 warps each; warp w of a tile owns the
//    classes 4w .. 4w+3, so it walks the units u0 = 32 s + 4 w .. u0 + 3, s = 0, 1, ...;
//  - lane (g, t) loads unit u0 + t (16 bytes) of rows g and g + 8. A step is 8 MMAs, two for each
//    word c = 0..3 of the units: A = word c's low nibbles (elements 4c .. 4c+3) in a0/a1 and high
//    nibbles (16 + 4c ..) in a2/a3, so lane t's k slots hold unit u0 + t. B lane (n, t) holds the
//    same elements' digits when t == n >> 1 (zeros otherwise, read from a zeroed slot): in the
//    first MMA ("X") column n is digit n & 1 of unit u0 + (n >> 1), in the second ("Y") column
//    2i is digit 2 of unit u0 + i (odd columns zero). Summed over c, D's columns 2t, 2t + 1 of
//    X and 2t of Y are S0, S1, S2 of unit u0 + t: exactly the lanes kernel's integers, already
//    in the lane (g, t) that does the float steps of rows g and g + 8 for that unit;
//  - so lane (g, t) carries the class chains (row g, class 4w + t) and (row g + 8, class 4w + t)
//    in increasing s: the lanes kernel's order;
//  - the 32 class sums of a row meet in shared memory and one warp adds them by warp_sum, lane c
//    holding class c: the same tree, then the bias.
// Exactness: the integer sums are exact whatever the k order; every float step is the lanes
// kernel's, in its order. Needs K % 256 == 0 (Q4_K) and 16-byte aligned rows.
// (A first form, runs 109 on an H100, exchanged the S values through shared memory to spread the
// float steps over all 32 lanes: 40% fewer instructions than the lanes kernel but 1.6x its time,
// stalled on the exchange; this one leaves lanes t of columns 6, 7 idle in no step.)
#include "common.cuh"

// Row tiles of 16 a block, 8 warps each (each block stages all of x once, so more rows a block
// stage it fewer times).
#ifndef QLIN_MMA1_WG
#define QLIN_MMA1_WG 2
#endif
#if QLIN_MMA1_WG < 1 || QLIN_MMA1_WG > 2
#error "QLIN_MMA1_WG must be 1 or 2"
#endif
#define MMA1_WARPS (8 * QLIN_MMA1_WG)

// Dynamic shared memory: the staged x (ceil(K / 1024) chunks of XI_CHUNK_F4 float4),
// QLIN_MMA1_WG x 16 x 32 floats of class sums and 16 zero words (the B loads of lanes whose
// column takes no unit). The host sizes it the same way. 4 / QLIN_MMA1_WG blocks an SM (32
// warps, 64 registers a thread).
extern "C" __global__ void __launch_bounds__(32 * MMA1_WARPS, 4 / QLIN_MMA1_WG)
linear_q4_k_r_mma1(const float* x, const u8* q, const u8* h, const float* bias, LIN_OUT_PARAMS, int split_canary) {
    pdl_entry();
    extern __shared__ float4 xs[];
    const int nch = (K + 1023) / 1024;
    float* red = reinterpret_cast<float*>(xs + nch * XI_CHUNK_F4);
    u32* zero = reinterpret_cast<u32*>(red + QLIN_MMA1_WG * 16 * 32);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wq = warp & 7, wg = warp >> 3;
    const int g = lane >> 2, t = lane & 3;
    const int nu = K / 32;
    if (threadIdx.x < 16) zero[threadIdx.x] = 0u;
    // x as digits, as linear_qr_m1_impl stages it (every lane of a warp calls stage_digits), in
    // stage_digits' layout 1: a unit's low- and high-half words side by side.
    for (int idx = threadIdx.x; idx < nch * 256; idx += blockDim.x) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (4 * idx < K) v = __ldg(reinterpret_cast<const float4*>(x) + idx);
        stage_digits<1>(v, idx & 255, xs + (idx >> 8) * XI_CHUNK_F4);
    }
    __syncthreads();
    // B of lane (n = g, t) for unit u0 + t: X digit g & 1 when t == g >> 1, Y digit 2 when also g
    // is even. In layout 1 the float4 (k·32 + uc)·2 + c/2 holds {lo c, hi c, lo c+1, hi c+1} of
    // digit k, unit uc: words c = 0, 1 in the first load, 2, 3 in the second.
    const int uc0 = 4 * wq + t;
    const bool xval = t == (g >> 1), yval = xval && (g & 1) == 0;
    const float4* zero4 = reinterpret_cast<const float4*>(zero);
    const float4* pbx0 = xval ? xs + ((g & 1) * 32 + uc0) * 2 : zero4;
    const float4* pby0 = yval ? xs + (2 * 32 + uc0) * 2 : zero4;
    const int bstepx = xval ? XI_CHUNK_F4 : 0, bstepy = yval ? XI_CHUNK_F4 : 0;
    const int j = 4 * (wq & 1) + t;  // u & 7 of this lane's units
    const int ngroups = (R + 16 * QLIN_MMA1_WG - 1) / (16 * QLIN_MMA1_WG);
    for (int tg = blockIdx.x; tg < ngroups; tg += gridDim.x) {
        const int r0 = 16 * (tg * QLIN_MMA1_WG + wg);
        float acc0 = 0.0f, acc1 = 0.0f;
        // A warp with no quad of units (K < 1,024: 4 wq >= nu) loads nothing and keeps zeros.
        if (r0 < R && 4 * wq < nu) {
            const size_t ra = (size_t)min(r0 + g, R - 1), rb = (size_t)min(r0 + g + 8, R - 1);
            const u8* pa = q + ra * (K / 2) + 16 * uc0;
            const u8* pb = q + rb * (K / 2) + 16 * uc0;
            const u8* pha = h + (ra * (K / 256) + (wq >> 1)) * 16;
            const u8* phb = h + (rb * (K / 256) + (wq >> 1)) * 16;
            const float4* pbx = pbx0;
            const float4* pby = pby0;
            const float4* xm = xs + XI_DIGIT_F4 + uc0;
            // One step ahead: this step's weights and headers are in registers when it starts;
            // the last step reloads its own (the pointers stop moving), so every load is in bounds.
            uint4 wa = *reinterpret_cast<const uint4*>(pa), wb = *reinterpret_cast<const uint4*>(pb);
            uint4 ha = *reinterpret_cast<const uint4*>(pha), hb = *reinterpret_cast<const uint4*>(phb);
            for (int u0 = 4 * wq; u0 < nu; u0 += 32) {
                const int adv = u0 + 32 < nu ? 1 : 0;
                pa += 512 * adv;
                pb += 512 * adv;
                pha += 64 * adv;
                phb += 64 * adv;
                const uint4 wan = *reinterpret_cast<const uint4*>(pa), wbn = *reinterpret_cast<const uint4*>(pb);
                const uint4 han = *reinterpret_cast<const uint4*>(pha), hbn = *reinterpret_cast<const uint4*>(phb);
                const uint4* bxp = reinterpret_cast<const uint4*>(pbx);
                const uint4* byp = reinterpret_cast<const uint4*>(pby);
                const uint4 bx[2] = {bxp[0], bxp[1]}, by[2] = {byp[0], byp[1]};
                int DX[4] = {0, 0, 0, 0}, DY[4] = {0, 0, 0, 0};
                const u32 A[4] = {wa.x, wa.y, wa.z, wa.w}, B[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const u32 a0 = A[c] & 0x0f0f0f0fu, a1 = B[c] & 0x0f0f0f0fu;
                    const u32 a2 = (A[c] >> 4) & 0x0f0f0f0fu, a3 = (B[c] >> 4) & 0x0f0f0f0fu;
                    const uint4 x4 = bx[c >> 1], y4 = by[c >> 1];
                    imma_s8(DX, a0, a1, a2, a3, (c & 1) ? x4.z : x4.x, (c & 1) ? x4.w : x4.y);
                    imma_s8(DY, a0, a1, a2, a3, (c & 1) ? y4.z : y4.x, (c & 1) ? y4.w : y4.y);
                }
                const float4 m = *xm;
                u32 words[8];
                float da, mla, db, mlb;
                qr_words<FMT_Q4_K, true>(make_uint4(0u, 0u, 0u, 0u), ha, 0, j, words, da, mla);
                qr_words<FMT_Q4_K, true>(make_uint4(0u, 0u, 0u, 0u), hb, 0, j, words, db, mlb);
                const float fx = xi_fx(m);
                acc0 = __fmaf_rn(__fmul_rn(da, m.x), digits_combine(DX[0], DX[1], DY[0]), acc0);
                acc0 = __fmaf_rn(-__fmul_rn(mla, m.x), fx, acc0);
                acc1 = __fmaf_rn(__fmul_rn(db, m.x), digits_combine(DX[2], DX[3], DY[2]), acc1);
                acc1 = __fmaf_rn(-__fmul_rn(mlb, m.x), fx, acc1);
                wa = wan;
                wb = wbn;
                ha = han;
                hb = hbn;
                pbx += bstepx;
                pby += bstepy;
                xm += XI_CHUNK_F4;
            }
        }
        // Class sums: rows g and g + 8, class 4 wq + t. Then warp wq adds rows wq and wq + 8 of
        // its tile by warp_sum (lane c: class c), as the lanes kernel does.
        float* rt = red + wg * 16 * 32;
        rt[g * 32 + uc0] = acc0;
        rt[(g + 8) * 32 + uc0] = acc1;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int r = r0 + wq + 8 * i;
            float v = warp_sum(rt[(wq + 8 * i) * 32 + lane]);
            if (bias && r < R) v += bias[r];
            if (r < R && lane == 0) store_out(LIN_OUTS, 0, r, v);
        }
        __syncthreads();
    }
}
