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
//  - one step (4 units x 16 rows) is 4 MMAs: for h = 0, 1 the units u0 + 2h and u0 + 2h + 1, B's
//    columns 3 us + k = digit k of unit u0 + 2h + us (us = 0, 1; columns 6, 7 zero). Lane (g, t)
//    loads 8 bytes of unit u0 + 2h + (t >> 1), words 2 (t & 1) and 2 (t & 1) + 1, of rows g and
//    g + 8; MMA m takes word 2 (t & 1) + m (low nibbles: elements 4W .. 4W+3 in a0/a1, high
//    nibbles: 16 + 4W .. in a2/a3), and B lane (n, t) holds the same elements' digits of column n
//    when t >> 1 == n / 3, else zeros (read from a zeroed slot). So column 3 us + k of D sums
//    exactly unit u0 + 2h + us's 32 products with digit k: the lanes kernel's S_k;
//  - the S values go through the warp's shared memory so that lane l does the float steps of row
//    l & 15 for units u0 + 2 (l >> 4) and + 1 (classes 4w + 2 (l >> 4) + 0, 1), in increasing s:
//    each class chain in the lanes kernel's order;
//  - the 32 class sums of a row meet in shared memory and one warp adds them by warp_sum, lane c
//    holding class c: the same tree, then the bias.
// Exactness: the integer sums are exact whatever the k order; every float step is the lanes
// kernel's, in its order. Needs K % 256 == 0 (Q4_K) and 16-byte aligned rows.
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
// Exchange ints a warp: 2 steps (alternating) x 16 rows x 4 units x 4 (S0, S1, S2, unused).
#define MMA1_EX 512

// Dynamic shared memory: the staged x (ceil(K / 1024) chunks of XI_CHUNK_F4 float4), then
// MMA1_WARPS x MMA1_EX ints of exchange, QLIN_MMA1_WG x 16 x 32 floats of class sums and 16 zero
// words (the B loads of lanes whose column takes no unit). The host sizes it the same way.
// 4 / QLIN_MMA1_WG blocks an SM (32 warps, 64 registers a thread; the few spills are outside the
// loop over units).
extern "C" __global__ void __launch_bounds__(32 * MMA1_WARPS, 4 / QLIN_MMA1_WG)
linear_q4_k_r_mma1(const float* x, const u8* q, const u8* h, const float* bias, LIN_OUT_PARAMS, int split_canary) {
    pdl_entry();
    extern __shared__ float4 xs[];
    const int nch = (K + 1023) / 1024;
    int* ex = reinterpret_cast<int*>(xs + nch * XI_CHUNK_F4);
    float* red = reinterpret_cast<float*>(ex + MMA1_WARPS * MMA1_EX);
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
    // B: column n = g is digit k = n % 3 of unit u0 + 2h + n / 3 when t >> 1 == n / 3: words
    // W = 2 (t & 1), + 1 of both halves, one 16-byte load {lo W, hi W, lo W+1, hi W+1}; h adds two
    // units (16 words). Lanes with no unit read the zero words, which do not move.
    const bool bval = g < 6 && g / 3 == (t >> 1);
    const int bstep = bval ? XI_CHUNK_F4 : 0, bh = bval ? 4 : 0;
    const float4* pbl0 = bval ? xs + (g % 3) * 64 + 8 * wq + 2 * (t >> 1) + (t & 1) : reinterpret_cast<const float4*>(zero);
    // Exchange slots of this lane's D columns 2t, 2t + 1 (unit c / 3, digit c % 3) in a row's 16
    // ints; lanes t = 3 (columns 6, 7: zeros) write the unused fourth int of units 0, 1.
    const int xo0 = t < 3 ? ((2 * t) / 3) * 4 + (2 * t) % 3 : 3;
    const int xo1 = t < 3 ? ((2 * t + 1) / 3) * 4 + (2 * t + 1) % 3 : 7;
    // The float steps: row l & 15, units u0 + 2 (l >> 4) + 0, 1, whose j = u & 7 is fixed.
    const int er = lane & 15, ee = lane >> 4;
    const int ja = 4 * (wq & 1) + 2 * ee;
    const int ngroups = (R + 16 * QLIN_MMA1_WG - 1) / (16 * QLIN_MMA1_WG);
    for (int tg = blockIdx.x; tg < ngroups; tg += gridDim.x) {
        const int r0 = 16 * (tg * QLIN_MMA1_WG + wg);
        float acc0 = 0.0f, acc1 = 0.0f;
        // A warp with no quad of units (K < 1,024: 4 wq >= nu) loads nothing and keeps zeros.
        if (r0 < R && 4 * wq < nu) {
            const size_t ra = (size_t)min(r0 + g, R - 1), rb = (size_t)min(r0 + g + 8, R - 1);
            const size_t unit_off = 16 * (4 * wq + (t >> 1)) + 8 * (t & 1);
            const u8* pa = q + ra * (K / 2) + unit_off;
            const u8* pb = q + rb * (K / 2) + unit_off;
            const u8* ph = h + ((size_t)min(r0 + er, R - 1) * (K / 256) + (wq >> 1)) * 16;
            const float4* pbl = pbl0;
            int* e0 = ex + warp * MMA1_EX + g * 16 + xo0;
            int* e1 = ex + warp * MMA1_EX + g * 16 + xo1;
            const int* er0 = ex + warp * MMA1_EX + er * 16 + 8 * ee;
            const float4* xm = xs + XI_DIGIT_F4 + 4 * wq + 2 * ee;
            // One step ahead: this step's weights and header are in registers when it starts; the
            // last step reloads its own (the pointers stop moving), so every load is in bounds.
            uint2 A[2][2];
            uint4 hd;
            A[0][0] = *reinterpret_cast<const uint2*>(pa);
            A[1][0] = *reinterpret_cast<const uint2*>(pa + 32);
            A[0][1] = *reinterpret_cast<const uint2*>(pb);
            A[1][1] = *reinterpret_cast<const uint2*>(pb + 32);
            hd = *reinterpret_cast<const uint4*>(ph);
            int par = 0;
#pragma unroll 2
            for (int u0 = 4 * wq; u0 < nu; u0 += 32) {
                const int adv = u0 + 32 < nu ? 1 : 0;
                pa += 512 * adv;
                pb += 512 * adv;
                ph += 64 * adv;
                uint2 An[2][2];
                An[0][0] = *reinterpret_cast<const uint2*>(pa);
                An[1][0] = *reinterpret_cast<const uint2*>(pa + 32);
                An[0][1] = *reinterpret_cast<const uint2*>(pb);
                An[1][1] = *reinterpret_cast<const uint2*>(pb + 32);
                const uint4 hn = *reinterpret_cast<const uint4*>(ph);
                int D[2][4];
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const uint4 xb = reinterpret_cast<const uint4*>(pbl)[bh * hh];
                    D[hh][0] = D[hh][1] = D[hh][2] = D[hh][3] = 0;
#pragma unroll
                    for (int m = 0; m < 2; ++m) {
                        const u32 wa = m ? A[hh][0].y : A[hh][0].x, wb = m ? A[hh][1].y : A[hh][1].x;
                        imma_s8(D[hh], wa & 0x0f0f0f0fu, wb & 0x0f0f0f0fu, (wa >> 4) & 0x0f0f0f0fu,
                                (wb >> 4) & 0x0f0f0f0fu, m ? xb.z : xb.x, m ? xb.w : xb.y);
                    }
                }
                const int po = par * 256;
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    e0[po + 8 * hh] = D[hh][0];
                    e1[po + 8 * hh] = D[hh][1];
                    e0[po + 128 + 8 * hh] = D[hh][2];
                    e1[po + 128 + 8 * hh] = D[hh][3];
                }
                __syncwarp();
                const int4 sa = *reinterpret_cast<const int4*>(er0 + po);
                const int4 sb = *reinterpret_cast<const int4*>(er0 + po + 4);
                const float4 ma = xm[0], mb = xm[1];
                u32 words[8];
                float da, mla, db, mlb;
                qr_words<FMT_Q4_K, true>(make_uint4(0u, 0u, 0u, 0u), hd, 0, ja, words, da, mla);
                qr_words<FMT_Q4_K, true>(make_uint4(0u, 0u, 0u, 0u), hd, 0, ja + 1, words, db, mlb);
                acc0 = __fmaf_rn(__fmul_rn(da, ma.x), digits_combine(sa.x, sa.y, sa.z), acc0);
                acc0 = __fmaf_rn(-__fmul_rn(mla, ma.x), xi_fx(ma), acc0);
                acc1 = __fmaf_rn(__fmul_rn(db, mb.x), digits_combine(sb.x, sb.y, sb.z), acc1);
                acc1 = __fmaf_rn(-__fmul_rn(mlb, mb.x), xi_fx(mb), acc1);
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    A[hh][0] = An[hh][0];
                    A[hh][1] = An[hh][1];
                }
                hd = hn;
                pbl += bstep;
                xm += XI_CHUNK_F4;
                par ^= 1;
            }
        }
        // Class sums of row er: classes 4 wq + 2 ee + 0, 1. Then warp wq adds rows wq and wq + 8 of
        // its tile by warp_sum (lane c: class c), as the lanes kernel does.
        float* rt = red + wg * 16 * 32;
        rt[er * 32 + 4 * wq + 2 * ee] = acc0;
        rt[er * 32 + 4 * wq + 2 * ee + 1] = acc1;
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
