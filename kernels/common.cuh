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

// Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90+). With PDL = 1 the engine
// launches every kernel with programmatic stream serialization (engine/src/backend/cuda/launch.rs),
// so its blocks may be scheduled while the kernel before it is still running. Every entry point
// calls this first: wait until the grid before has completed and its writes are visible, then
// let the next grid begin launching. No memory is written or read into a value before the
// wait (the one-token linears may first ask L2 for their read-only weights: PDL_EARLY,
// QTC_M1_PREFETCH; the wgmma split-K form starts copying them into shared memory), so the results are the same bits with PDL on or off. Without a programmatic
// dependency both return at once.
__device__ __forceinline__ void pdl_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// -inf without <math.h> (NVRTC has no INFINITY macro).
#define NEG_INF __int_as_float(0xff800000)

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

// Max over a block of exactly NT threads (same shape as block_sum; max is exact in any order).
template <int NT>
__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = (lane < NT / 32) ? scratch[lane] : NEG_INF;
    if (warp == 0) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, off));
        if (lane == 0) scratch[0] = t;
    }
    __syncthreads();
    t = scratch[0];
    __syncthreads();
    return t;
}

// ---- Dequantization of 32-element units -------------------------------------------------------
//
// Every weight format is read in units of 32 consecutive elements of a row: unit u covers
// elements 32u .. 32u+31. For the 32-element GGUF blocks a unit is one block; for the 256-element
// K-quant super-blocks it is sub-block u % 8 of super-block u / 8. The arithmetic is the CPU's
// (engine/src/quant/blocks.rs, itself the `gguf` package's order) with explicit round-to-nearest
// intrinsics so the compiler cannot contract it into FMAs: dequantized values are bit-identical
// to the CPU's.
#define FMT_F32 0
#define FMT_F16 1
#define FMT_BF16 2
#define FMT_Q4_0 3
#define FMT_Q4_1 4
#define FMT_Q5_0 5
#define FMT_Q8_0 6
#define FMT_Q4_K 7
#define FMT_Q5_K 8
#define FMT_Q6_K 9

__device__ __forceinline__ float f16_at(const u8* p) { return f16_bits_to_f32(load_u16_unaligned(p)); }

// The 6-bit scale and min of sub-block j from a Q4_K/Q5_K 12-byte table `s`.
__device__ __forceinline__ void k_scale_min(const u8* s, int j, int* sc, int* mn) {
    if (j < 4) {
        *sc = s[j] & 0x3F;
        *mn = s[j + 4] & 0x3F;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
    }
}

// Writes elements 32u .. 32u+31 of `row` (format F) into o[0..32].
template <int F>
__device__ __forceinline__ void dequant32(const u8* row, int u, float* o) {
    if (F == FMT_F32) {
        const float* p = reinterpret_cast<const float*>(row) + 32 * u;
#pragma unroll
        for (int i = 0; i < 32; ++i) o[i] = p[i];
    } else if (F == FMT_F16 || F == FMT_BF16) {
        const u16* p = reinterpret_cast<const u16*>(row) + 32 * u;
#pragma unroll
        for (int i = 0; i < 32; ++i) o[i] = F == FMT_F16 ? f16_bits_to_f32(p[i]) : bf16_bits_to_f32(p[i]);
    } else if (F == FMT_Q4_0) {
        const u8* b = row + 18 * u;
        const float d = f16_at(b);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            o[i] = __fmul_rn(d, (float)((int)(b[2 + i] & 0x0F) - 8));
            o[i + 16] = __fmul_rn(d, (float)((int)(b[2 + i] >> 4) - 8));
        }
    } else if (F == FMT_Q4_1) {
        const u8* b = row + 20 * u;
        const float d = f16_at(b), m = f16_at(b + 2);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            o[i] = __fadd_rn(__fmul_rn(d, (float)(b[4 + i] & 0x0F)), m);
            o[i + 16] = __fadd_rn(__fmul_rn(d, (float)(b[4 + i] >> 4)), m);
        }
    } else if (F == FMT_Q5_0) {
        const u8* b = row + 22 * u;
        const float d = f16_at(b);
        const u32 qh = (u32)b[2] | ((u32)b[3] << 8) | ((u32)b[4] << 16) | ((u32)b[5] << 24);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int lo = (b[6 + i] & 0x0F) | (((qh >> i) & 1) << 4);
            const int hi = (b[6 + i] >> 4) | (((qh >> (i + 16)) & 1) << 4);
            o[i] = __fmul_rn(d, (float)(lo - 16));
            o[i + 16] = __fmul_rn(d, (float)(hi - 16));
        }
    } else if (F == FMT_Q8_0) {
        const u8* b = row + 34 * u;
        const float d = f16_at(b);
#pragma unroll
        for (int i = 0; i < 32; ++i) o[i] = __fmul_rn((float)(i8)b[2 + i], d);
    } else if (F == FMT_Q4_K || F == FMT_Q5_K) {
        const int j = u & 7;
        const u8* b = row + (F == FMT_Q4_K ? 144 : 176) * (u >> 3);
        const float d = f16_at(b), dmin = f16_at(b + 2);
        int sc, mn;
        k_scale_min(b + 4, j, &sc, &mn);
        const float dl = __fmul_rn(d, (float)sc);
        const float ml = __fmul_rn(dmin, (float)mn);
        const u8* qs = b + (F == FMT_Q4_K ? 16 : 48) + 32 * (j >> 1);
        const int shift = 4 * (j & 1);
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            int v = (qs[i] >> shift) & 0x0F;
            if (F == FMT_Q5_K) v |= ((b[16 + i] >> j) & 1) << 4;
            o[i] = __fsub_rn(__fmul_rn(dl, (float)v), ml);
        }
    } else {  // FMT_Q6_K
        const int j = u & 7;
        const u8* b = row + 210 * (u >> 3);
        const int half = j >> 2, l = j & 3;
        const u8* ql = b + 64 * half + 32 * (l & 1);
        const u8* qh = b + 128 + 32 * half;
        const int base = 128 * half + 32 * l;
        const float d = f16_at(b + 208);
        const float d0 = __fmul_rn(d, (float)(i8)b[192 + base / 16]);
        const float d1 = __fmul_rn(d, (float)(i8)b[192 + base / 16 + 1]);
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            const int lo = (ql[i] >> (4 * (l >> 1))) & 0x0F;
            const int hi = (qh[i] >> (2 * l)) & 0x03;
            const int q = (lo | (hi << 4)) - 32;
            o[i] = __fmul_rn(i < 16 ? d0 : d1, (float)q);
        }
    }
}

// ---- Rotary position embedding (RoFormer, Su et al. 2021) -------------------------------------
//
// Pair i of a head vector: angle = p * inv_freq[i] (inv_freq computed on the host as the CPU
// does), NEOX pairs (i, i + half) or, interleaved, adjacent pairs (2i, 2i + 1). Arithmetic spelled
// out so every kernel that inlines it rounds identically.
//
// The indices a, b of pair i.
__device__ __forceinline__ void rope_index(int i, int half, int interleaved, int& a, int& b) {
    a = interleaved ? 2 * i : i;
    b = interleaved ? 2 * i + 1 : i + half;
}
// The rotation of pair i of a row at position p, on values: (x0, x1) = the row's elements a, b.
// rope_pair and the split-K reduce's RoPE epilogue (kv_append.cu) both rotate through it.
__device__ __forceinline__ void rope_rotate(float& x0, float& x1, u32 p, const float* inv_freq, int i) {
    const float angle = __fmul_rn((float)p, inv_freq[i]);
    float s, c;
    sincosf(angle, &s, &c);
    const float r0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    const float r1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
    x0 = r0;
    x1 = r1;
}
// Rotates pair i of head vector v in place; returns the pair's indices in a, b.
__device__ __forceinline__ void rope_pair(float* v, u32 p, const float* inv_freq, int i, int half, int interleaved,
                                          int& a, int& b) {
    rope_index(i, half, interleaved, a, b);
    float x0 = v[a], x1 = v[b];
    rope_rotate(x0, x1, p, inv_freq, i);
    v[a] = x0;
    v[b] = x1;
}

// ---- Linear layers (linear.cu, linear_tc.cu) ----

// Where row r of token t goes. The rows of a fused matrix (Q|K|V, gate|up: the matrices' rows
// concatenated at upload) are split over up to three outputs: rows [0, r0) to y0 ([M, r0]),
// [r0, r0 + r1) to y1 ([M, r1]), the rest to y2 ([M, R - r0 - r1]). An unfused matrix has r0 = R.
// Each row is computed exactly as it would be alone.
struct Outs {
    float* y0;
    float* y1;
    float* y2;
    int r0, r1, R;
};
__device__ __forceinline__ void store_out(const Outs& o, int t, int r, float v) {
    if (r < o.r0) o.y0[(size_t)t * o.r0 + r] = v;
    else if (r < o.r0 + o.r1) o.y1[(size_t)t * o.r1 + (r - o.r0)] = v;
    else o.y2[(size_t)t * (o.R - o.r0 - o.r1) + (r - o.r0 - o.r1)] = v;
}

// Kernel parameters shared by every linear entry: the three outputs and the split of the rows
// over them (see Outs), then the shape.
#define LIN_OUT_PARAMS float *y, float *y1, float *y2, int R0, int R1, int M, int K, int R
#define LIN_OUTS Outs{y, y1, y2, R0, R1, R}

// Integer-to-float conversions by the 2^23 trick (one byte permute or OR, one add: full-rate ALU
// instead of the quarter-rate I2F); exact, so the values are those of a (float) cast.
// Byte `i` of `w` as a signed int8, as f32.
__device__ __forceinline__ float i8_to_f32_exact(u32 w, int i) {
    // 0x4B0000uu with uu = the byte + 128 (flip its sign bit): the float 2^23 + byte + 128.
    const u32 bits = __byte_perm(w ^ 0x80808080u, 0x4B000000u, (u32)i | 0x7440u);
    return __fsub_rn(__uint_as_float(bits), 8388736.0f);
}

// Byte `i` of `w` as an unsigned int, as f32 (one byte permute, one add).
__device__ __forceinline__ float u8_to_f32_exact(u32 w, int i) {
    return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B000000u, (u32)i | 0x7440u)), 8388608.0f);
}

// ---- QLIN_INT = 1: x as exact integer digits (the repacked Q8_0/Q4_K lane kernels) ----
//
// Each 32-element unit of a token's x, with m = max |x| = f·2^E (f in [1, 2)), is written as
// x ≈ s·(x0 + x1/128 + x2/16384), s = 2^(E−5), each digit an integer in [−64, 64] rounded to
// nearest even (so about 20 bits relative to m). Then Σ q·x = s·(S0 + S1/128 + S2/16384) with
// S_k = Σ q·x_k exact in int32 (dp4a or an integer MMA give the same integers), combined by
// digits_combine in one fixed order. A unit with m < 2^−121 is all zero digits (s = 0); a unit
// holding an inf or NaN gets s = NaN, so it poisons its outputs as f32 would.
// The digits depend only on the token's own x, never on M.
#ifndef QLIN_INT
#define QLIN_INT 0
#endif
// Shared memory per token and 1,024-element chunk: digit k of unit uc in the 16-byte slots
// (2k)·32 + uc (elements 0–15) and (2k+1)·32 + uc (16–31), then per unit a float4 meta
// {s, X0, X1, X2} (X_k = Σ x_k as int bits, for Q4_K's min term).
#define XI_DIGIT_F4 192
#define XI_CHUNK_F4 224

// v rounded to the nearest integer (ties to even) for |v| < 2^22, and v minus it (exact).
__device__ __forceinline__ int rint_small(float v, float& rest) {
    const float t = __fadd_rn(v, 12582912.0f);
    rest = __fsub_rn(v, __fsub_rn(t, 12582912.0f));
    return __float_as_int(t) - 0x4B400000;
}

// (float)s for |s| < 2^22 by the 2^23 trick (an integer add and a float subtract, full rate,
// instead of the quarter-rate I2F): 1.5·2^23 + s has ulp 1, so both steps are exact.
__device__ __forceinline__ float i2f_small(int s) {
    return __fsub_rn(__int_as_float(0x4B400000 + s), 12582912.0f);
}

// S0 + (S1 + S2/128)/128, one fixed order of f32 operations (every S_k exact in f32; |S_k| ≤
// 32·128·64 = 2^18 for a unit's digit sums, so i2f_small is exact).
__device__ __forceinline__ float digits_combine(int s0, int s1, int s2) {
    const float t = __fmaf_rn(i2f_small(s2), 0.0078125f, i2f_small(s1));
    return __fmaf_rn(t, 0.0078125f, i2f_small(s0));
}

// Stages x[4·s .. 4·s+4) of a chunk (`v`, float4 slot s of 0..255; the unit's 8 slots are held by
// 8 consecutive lanes, every lane of the warp calling) as digits into the chunk `xc`, in the
// slots above.
__device__ __forceinline__ void stage_digits(float4 v, int s, float4* xc) {
    const float e[4] = {v.x, v.y, v.z, v.w};
    float m = 0.0f;
    int bad = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        m = fmaxf(m, fabsf(e[i]));
        bad |= (int)(((__float_as_uint(e[i]) >> 23) & 0xffu) == 0xffu);  // inf or NaN
    }
#pragma unroll
    for (int off = 1; off < 8; off <<= 1) {
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        bad |= __shfl_xor_sync(0xffffffffu, bad, off);
    }
    const int E = (int)((__float_as_uint(m) >> 23) & 0xffu) - 127;
    const bool zero = E < -121;  // also m == 0
    // x·2^(5−E) (exact unless a small element's product is subnormal, which happens the same way
    // in every kernel), and s = 2^(E−5).
    const float up = zero ? 0.0f : __uint_as_float((u32)(127 + 5 - E) << 23);
    const float sc = bad ? __int_as_float(0x7fffffff) : (zero ? 0.0f : __uint_as_float((u32)(127 + E - 5) << 23));
    u32 word[3] = {0u, 0u, 0u};
    int sum[3] = {0, 0, 0};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float r = bad ? 0.0f : __fmul_rn(e[i], up);
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            const int dgt = rint_small(r, r);
            r = __fmul_rn(r, 128.0f);
            word[k] |= ((u32)dgt & 0xffu) << (8 * i);
            sum[k] += dgt;
        }
    }
#pragma unroll
    for (int off = 1; off < 8; off <<= 1)
#pragma unroll
        for (int k = 0; k < 3; ++k) sum[k] += __shfl_xor_sync(0xffffffffu, sum[k], off);
    const int uc = s >> 3, part = s & 7;
    u32* dig = reinterpret_cast<u32*>(xc);
#pragma unroll
    for (int k = 0; k < 3; ++k) dig[((2 * k + (part >> 2)) * 32 + uc) * 4 + (part & 3)] = word[k];
    if (part == 0)
        xc[XI_DIGIT_F4 + uc] = make_float4(sc, __int_as_float(sum[0]), __int_as_float(sum[1]), __int_as_float(sum[2]));
}

// The unit's fx (Q4_K's Σx term, digits_combine(X0, X1, X2)) from its staged meta.
__device__ __forceinline__ float xi_fx(const float4 meta) {
    return digits_combine(__float_as_int(meta.y), __float_as_int(meta.z), __float_as_int(meta.w));
}

// The 32 quant values of unit u as 8 words of 4 bytes (element e at byte e % 4 of word e / 4:
// Q8_0 int8, Q4_K the nibble as a byte) and the unit's scale d (and, for Q4_K, its min term ml).
template <int F>
__device__ __forceinline__ void qr_words(const uint4 wa, const uint4 wb, const u16 dq, int u, u32 (&words)[8], float& d,
                                         float& ml) {
    ml = 0.0f;
    if (F == FMT_Q8_0) {
        words[0] = wa.x; words[1] = wa.y; words[2] = wa.z; words[3] = wa.w;
        words[4] = wb.x; words[5] = wb.y; words[6] = wb.z; words[7] = wb.w;
        d = f16_bits_to_f32(dq);
    } else {
        const u32 wq[4] = {wa.x, wa.y, wa.z, wa.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            words[w] = wq[w] & 0x0f0f0f0fu;
            words[4 + w] = (wq[w] >> 4) & 0x0f0f0f0fu;
        }
        const float dd = f16_bits_to_f32((u16)(wb.x & 0xffffu));
        const float dmin = f16_bits_to_f32((u16)(wb.x >> 16));
        const int j = u & 7;
        auto s8 = [&](int b) -> int {
            const u32 w = b < 4 ? wb.y : (b < 8 ? wb.z : wb.w);
            return (int)((w >> (8 * (b & 3))) & 0xff);
        };
        int sc, mn;
        if (j < 4) {
            sc = s8(j) & 0x3F;
            mn = s8(j + 4) & 0x3F;
        } else {
            sc = (s8(j + 4) & 0x0F) | ((s8(j - 4) >> 2) & 0x30);
            mn = (s8(j + 4) >> 4) | ((s8(j) >> 2) & 0x30);
        }
        d = __fmul_rn(dd, (float)sc);
        ml = __fmul_rn(dmin, (float)mn);
    }
}

// d += a * b over one unit: m16n8k32, int8 inputs, int32 accumulation (exact).
__device__ __forceinline__ void imma_s8(int (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// ---- Tensor-core helpers (kernels/linear_tc.cu, kernels/linear_tcg.cu) ----

// bf16 parts of x: 3 carries x's 24 bits; 2 and 1 round x (the same way for every M).
#ifndef QTC_XSPLIT
#define QTC_XSPLIT 3
#endif

// The tensor-core linear forms (linear_tc.cu, linear_tct.cu): warps per block, each one K slice of the block's row tiles (a fixed split of K: part of the
// reduction order, the same for every M).
#ifndef QTC_SPLIT
#define QTC_SPLIT 8
#endif
// Slices for matrices of at least QTC_BIG_ROWS rows (host side), when not 0: such a matrix has
// blocks enough to fill the device with fewer warps each (run 39: 4 slices take the 28672-row
// gate+up in 57.9 us against 64.6 with 16, but the 4096-row matrices need 16). The slice count is
// part of a matrix's reduction order, fixed by its shape, never by M; every form of the kernel
// (one-token, tiled) uses the same count for the same matrix.
#ifndef QTC_SPLIT_BIG
#define QTC_SPLIT_BIG 0
#endif

#define TC_BF16 0
#define TC_Q8_0 1
#define TC_Q4_K 2

// The 16 Q4_K codes a lane holds of a (tile, unit) as bf16 A fragments, exact: word h (k-half h)
// holds slot 8h + 2r at bits 4r and slot 8h + 2r + 1 at bits 16 + 4r (kernels/linear_tc.cu's
// layout), so one LOP3 makes the bf16 pair 128 + q (bits 0x43 : q, 8 significant bits hold it)
// and one bf16x2 FMA (x 1, - 128) leaves q, an integer in 0..15.
__device__ __forceinline__ void q4x16_to_bf16_frags(u32 w0, u32 w1, u32 (&a)[2][4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const u32 b = (((h ? w1 : w0) >> (4 * r)) & 0x000F000Fu) | 0x43004300u;
            asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(a[h][r]) : "r"(b), "r"(0x3F803F80u), "r"(0xC300C300u));
        }
}

// A Q4_K unit's row factors (QTC_Q4_K): d sc and dmin m of rows g (index 0) and g + 8 (1), the
// exact f32 products (11 x 6 bits) the lane kernels form, from the unit's scale word `sw` (sc of
// row g | m of row g << 8 | sc of row g+8 << 16 | m of row g+8 << 24) and the super-block's words
// `dg`, `dg8` (f16 d | f16 dmin << 16 of rows g and g + 8). Every tensor-core form calls it.
__device__ __forceinline__ void q4k_unit_factors(u32 sw, u32 dg, u32 dg8, float (&d)[2], float (&ml)[2]) {
    d[0] = __fmul_rn(f16_bits_to_f32((u16)(dg & 0xffffu)), (float)(sw & 0xffu));
    ml[0] = __fmul_rn(f16_bits_to_f32((u16)(dg >> 16)), (float)((sw >> 8) & 0xffu));
    d[1] = __fmul_rn(f16_bits_to_f32((u16)(dg8 & 0xffffu)), (float)((sw >> 16) & 0xffu));
    ml[1] = __fmul_rn(f16_bits_to_f32((u16)(dg8 >> 16)), (float)(sw >> 24));
}
// A Q4_K unit folded into a row's running sum: fma(d sc, Σ q x, acc), then fma(-(dmin m), Σ x, .)
// (kernels/linear_tc.cu's chain; every tensor-core form folds through it).
__device__ __forceinline__ float q4k_fold(float acc, float us, float d, float ml, float xsum) {
    return __fmaf_rn(-ml, xsum, __fmaf_rn(d, us, acc));
}
// The d words of rows g and g + 8 (x, y) of row tile `tile`, unit u's super-block, in the Q4_K
// tensor-core layout (after the [tiles][units][8] scale words of `s`).
__device__ __forceinline__ uint2 q4k_dwords(const u32* s, int tiles, int nu, int tile, int u, int g) {
    return reinterpret_cast<const uint2*>(s + (size_t)tiles * nu * 8)[((size_t)tile * (nu / 8) + u / 8) * 8 + g];
}

// d += a * b: one m16n8k16 bf16 MMA with f32 accumulation.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as bf16x2 (round to nearest even; `lo` in the low half, the lower k index).
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const u32*>(&v);
}

// x[k], x[k+1] of one token as QTC_XSPLIT bf16x2 parts (hi, mid, lo); every subtraction is exact.
__device__ __forceinline__ void split_x(float2 f, u32 (&p)[QTC_XSPLIT]) {
#pragma unroll
    for (int i = 0; i < QTC_XSPLIT; ++i) {
        p[i] = pack_bf16x2(f.x, f.y);
        f.x = __fsub_rn(f.x, __uint_as_float(p[i] << 16));
        f.y = __fsub_rn(f.y, __uint_as_float(p[i] & 0xffff0000u));
    }
}

// Bytes i, i+1 of w (int8) as bf16x2, exact.
__device__ __forceinline__ u32 i8x2_to_bf16x2(u32 w, int i) {
    return pack_bf16x2(i8_to_f32_exact(w, i), i8_to_f32_exact(w, i + 1));
}

// The 16 int8 weights a lane holds of a Q8_0 (tile, unit), words[2h + q] = bytes of A fragment
// registers a[h][2q] (low pair) and a[h][2q + 1] (high pair), as bf16x2, exact. A bf16 holds 8
// significant bits, so no single magic number covers all 256 values (as 2^23 does in
// i8_to_f32_exact): with b = a byte, A = bf16 bits 0x43 : (b & 0x7f) = 128 + (b & 0x7f) and
// C = 0xC3 : (b & 0x80) = -128 or -256 (the sign bit lands in the exponent), so A + C =
// (b & 0x7f) - 128 * sign = b, an integer in [-128, 127] that the bf16x2 FMA A * 1 + C gives
// exactly. Per word two masks, four byte permutes and two HFMA2.BF16 (four instructions a
// pair, against i8x2_to_bf16x2's five and a half through f32). The selectors stay in two
// registers, which the one-token loop has to spare; elsewhere (more live registers) ptxas
// answered them with re-computed addresses, so the other forms keep i8x2_to_bf16x2.
__device__ __forceinline__ void i8x16_to_bf16_frags(const u32 (&words)[4], u32 (&a)[2][4]) {
    // The selectors as registers the compiler cannot fold (threadIdx.x < 1024), so the permutes
    // take the high bytes as immediates without re-materialising a selector each time.
    const u32 z = threadIdx.x >> 16, sel0 = 0x4140u | z, sel1 = 0x4342u | z;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const u32 l = words[i] & 0x7f7f7f7fu, sg = words[i] & 0x80808080u;
        const u32 a0 = __byte_perm(l, 0x43434343u, sel0), c0 = __byte_perm(sg, 0xC3C3C3C3u, sel0);
        const u32 a1 = __byte_perm(l, 0x43434343u, sel1), c1 = __byte_perm(sg, 0xC3C3C3C3u, sel1);
        asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(a[i >> 1][2 * (i & 1)]) : "r"(a0), "r"(0x3F803F80u), "r"(c0));
        asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(a[i >> 1][2 * (i & 1) + 1]) : "r"(a1), "r"(0x3F803F80u), "r"(c1));
    }
}


// 16 bytes global -> shared, asynchronously; zero-filled when !pred (nothing read).
__device__ __forceinline__ void tcg_cp16(void* dst, const void* src, bool pred) {
    const u32 d = (u32)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(pred ? 16 : 0));
}

// The A fragments (both k-halves h: a[h][0..3]) and row scales (d[0]: row g, d[1]: row g + 8; 1
// for BF16) of one staged (tile, unit) in shared memory, as the tiled forms keep it: BF16 at `w`,
// 32 lanes of two 16-byte halves, in two planes of 32 (`planes`: half h of lane l at 16 (32h +
// l)) or interleaved (at 16 (2l + h)); Q8_0 at `w`, 32 lanes of 16 bytes of int8, the tile's
// 8 scale words at `sc` (word g: f16 of row g | f16 of row g + 8 << 16).
template <int F, bool planes>
__device__ __forceinline__ void tc_staged_a(const u8* w, const u8* sc, int lane, u32 (&a)[2][4], float (&d)[2]) {
    if (F == TC_BF16) {
        const uint4* wp = reinterpret_cast<const uint4*>(w);
        const uint4 v0 = planes ? wp[lane] : wp[2 * lane];
        const uint4 v1 = planes ? wp[32 + lane] : wp[2 * lane + 1];
        a[0][0] = v0.x; a[0][1] = v0.y; a[0][2] = v0.z; a[0][3] = v0.w;
        a[1][0] = v1.x; a[1][1] = v1.y; a[1][2] = v1.z; a[1][3] = v1.w;
        d[0] = d[1] = 1.0f;
    } else {
        const uint4 v = reinterpret_cast<const uint4*>(w)[lane];
        const u32 words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int r = 0; r < 4; ++r) a[h][r] = i8x2_to_bf16x2(words[2 * h + r / 2], 2 * (r & 1));
        const u32 s = reinterpret_cast<const u32*>(sc)[lane >> 2];
        d[0] = f16_bits_to_f32((u16)(s & 0xffffu));
        d[1] = f16_bits_to_f32((u16)(s >> 16));
    }
}

// SwiGLU of one element, silu(g) * u with silu(g) = g / (1 + exp(-g)): act.cu's swiglu_f32 and
// the split-K reduce's SwiGLU epilogue (linear_tc.cu) both call this one inline function, and
// every kernel file is compiled with the same flags, so both round alike; the self-check row
// "linear_gated_bf16" compares them bit for bit.
__device__ __forceinline__ float swiglu1(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// ---- Split-K reduces (splitk_reduce.cu, and the RoPE epilogue in attention.cu) ----

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
// their adds. Every split-K reduce sums through it, so all give a row the same bits. CG: the loads
// through L2 only (ld.global.cg), for partials written earlier by the same kernel (TCK_FUSE).
template <typename T, bool CG = false>
__device__ __forceinline__ T slice_sum(const float* part, size_t mr, size_t off, int slices) {
    T v{};
    for (int s0 = 0; s0 < slices; s0 += TCS_RED_BATCH) {
        T p[TCS_RED_BATCH];
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH; ++b)
            if (s0 + b < slices) {
                const T* a = reinterpret_cast<const T*>(part + (size_t)(s0 + b) * mr + off);
                p[b] = CG ? __ldcg(a) : *a;
            }
#pragma unroll
        for (int b = 0; b < TCS_RED_BATCH; ++b)
            if (s0 + b < slices) v = s0 + b == 0 ? p[b] : add_rn(v, p[b]);
    }
    return v;
}

// One element group of each split-K reduce, shared by the reduce kernels (splitk_reduce.cu) and
// the reduce inside the wgmma split-K form (linear_tck.cu, TCK_FUSE), so both give the same bits.
// Rows `row` .. `row` + 3 of token m: the slices' sums (`slice_sum`), then the bias (null: none),
// stored to the output of y / y1 / y2 that holds them (R0 rows, R1 rows, the rest; all multiples
// of 4). `mr` = M R.
template <bool CG = false>
__device__ __forceinline__ void reduce4_store(const float* part, const float* bias, float* y, float* y1, float* y2,
                                              int R0, int R1, int R, size_t mr, int m, int row, int slices) {
    float4 v = slice_sum<float4, CG>(part, mr, (size_t)m * R + row, slices);
    if (bias) v = add_rn(v, *reinterpret_cast<const float4*>(bias + row));
    float* dst = row < R0        ? y + (size_t)m * R0 + row
                 : row < R0 + R1 ? y1 + (size_t)m * R1 + (row - R0)
                                 : y2 + (size_t)m * (R - R0 - R1) + (row - R0 - R1);
    *reinterpret_cast<float4*>(dst) = v;
}
// Of a gate|up matrix (R = 2 I rows, `mr` = M R): gate rows j .. j + 3 and the up rows I below
// them, each as reduce4_store sums them, then out[m, j ..] = SwiGLU(gate, up) (act.cu's
// swiglu_f32). out: [M, I] f32.
template <bool CG = false>
__device__ __forceinline__ void reduce_swiglu4_store(const float* part, const float* bias, float* out, int I,
                                                     size_t mr, int m, int j, int slices) {
    const size_t g0 = (size_t)m * 2 * I + j;
    float4 g = slice_sum<float4, CG>(part, mr, g0, slices), u = slice_sum<float4, CG>(part, mr, g0 + I, slices);
    if (bias) {
        g = add_rn(g, *reinterpret_cast<const float4*>(bias + j));
        u = add_rn(u, *reinterpret_cast<const float4*>(bias + I + j));
    }
    *reinterpret_cast<float4*>(out + (size_t)m * I + j) =
        make_float4(swiglu1(g.x, u.x), swiglu1(g.y, u.y), swiglu1(g.z, u.z), swiglu1(g.w, u.w));
}

// The paged KV cache's value type (kernels/attention.cu, kernels/kv_append.cu): f32, or f16 with
// KV_F16 = 1 (config `kv_cache_dtype = "f16"`), each value rounded to nearest-even once when it
// is appended and converted back exactly when it is read.
#ifndef KV_F16
#define KV_F16 0
#endif
#if KV_F16
typedef __half kv_t;
__device__ __forceinline__ kv_t to_kv(float x) { return __float2half_rn(x); }
// The low (hi = 0) or high half of a word of two f16 values, as f32.
__device__ __forceinline__ float kv_half(u32 w, int hi) {
    return __half2float(__ushort_as_half((unsigned short)(hi ? w >> 16 : w & 0xffffu)));
}
// Elements p[0 .. 4) as f32 (p 8-byte aligned: head_dim is a multiple of 4). Two 4-byte loads:
// one 8-byte load split by hand measured slower (run 31).
__device__ __forceinline__ float4 kv_load4(const kv_t* p) {
    const __half2* p2 = reinterpret_cast<const __half2*>(p);
    const float2 a = __half22float2(p2[0]), b = __half22float2(p2[1]);
    return make_float4(a.x, a.y, b.x, b.y);
}
#else
typedef float kv_t;
__device__ __forceinline__ kv_t to_kv(float x) { return x; }
__device__ __forceinline__ float4 kv_load4(const kv_t* p) { return *reinterpret_cast<const float4*>(p); }
#endif

// Attention (attention.cu, attention_tile.cu): merges a split's partial (m, l, a) into the
// running (rm, rl, ra), the online-softmax rescaling.
__device__ __forceinline__ void attn_merge(bool first, float m, float l, float a, float& rm, float& rl, float& ra) {
    if (first) {
        rm = m;
        rl = l;
        ra = a;
        return;
    }
    const float mn = fmaxf(rm, m);
    const float alpha = expf(__fsub_rn(rm, mn)), beta = expf(__fsub_rn(m, mn));
    rl = __fadd_rn(__fmul_rn(rl, alpha), __fmul_rn(l, beta));
    ra = __fadd_rn(__fmul_rn(ra, alpha), __fmul_rn(a, beta));
    rm = mn;
}
