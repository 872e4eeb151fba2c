// Token choice on the device: penalties and logit bias, greedy argmax or the seeded draw, and
// logprobs, the same algorithm as the CPU's engine/src/sample/ (mod.rs and select.rs) so both pick
// the same token from the same logits bit for bit:
//  - edits are applied with the same f32 operations (__fdiv_rn/__fmul_rn/__fsub_rn/__fadd_rn);
//  - a token's weight is floor(exp_det(v/t - max/t) * 2^32), exp_det built from IEEE multiplies
//    and adds only, so sums of weights are exact integers and independent of summation order;
//  - top-k, top-p and the draw are each "the first 56-bit sort key whose running weight in key
//    order exceeds a target", found here by radix select (8 bits per pass, survivors compacted),
//    on the CPU by quickselect: both exact, so they agree;
//  - the random bits are Philox4x32-10 keyed on (seed, sequence, position), as the CPU's rng.rs.
// The logprob normalizer is an f64 sum in a fixed order (SAMPLE_THREADS strided partial sums,
// then a fixed tree), so it is deterministic on the device; it may differ from the CPU's
// sequential f64 sum in the last bit of the f64.
//
// One block of SAMPLE_THREADS threads per pick; grid.x = picks in this launch.
#include "common.cuh"

typedef unsigned long long u64;

#define SAMPLE_THREADS 1024
#define SAMPLE_WARPS (SAMPLE_THREADS / 32)
// 16-byte logit loads a thread issues before it uses them (step 1 of sample_picks).
#define SAMPLE_LOADS 4
// u32 words per pick: row, edit_off, edit_len, temperature, top_k, top_p, min_p, seed_lo, seed_hi,
// sequence, pos_lo, pos_hi, n_top, want_logprob, 2 unused.
#define PICK_WORDS 16
// u32 words per edit: id, flags (1 rep, 2 sub, 4 bias), rep, sub, bias.
#define EDIT_WORDS 5
#define MAX_TOP 20
// u32 words per result: token, logprob, then MAX_TOP ids and MAX_TOP logprobs.
#define OUT_WORDS (2 + 2 * MAX_TOP)

// e^x from IEEE f32 multiplies and adds (engine/src/sample/select.rs `exp_det`, same constants
// as bit patterns): Cody-Waite reduction by ln 2, degree-7 Taylor polynomial.
__device__ __forceinline__ float exp_det(float x) {
    if (!(x > -87.0f)) return 0.0f;
    const float n = floorf(__fadd_rn(__fmul_rn(x, __int_as_float(0x3fb8aa3b)), 0.5f));
    float r = __fsub_rn(x, __fmul_rn(n, __int_as_float(0x3f318000)));
    r = __fsub_rn(r, __fmul_rn(n, __int_as_float(0xb95e8083)));
    float p = __int_as_float(0x39500d01);
    p = __fadd_rn(__fmul_rn(p, r), __int_as_float(0x3ab60b61));
    p = __fadd_rn(__fmul_rn(p, r), __int_as_float(0x3c088889));
    p = __fadd_rn(__fmul_rn(p, r), __int_as_float(0x3d2aaaab));
    p = __fadd_rn(__fmul_rn(p, r), __int_as_float(0x3e2aaaab));
    p = __fadd_rn(__fmul_rn(p, r), 0.5f);
    p = __fadd_rn(__fmul_rn(p, r), 1.0f);
    p = __fadd_rn(__fmul_rn(p, r), 1.0f);
    return __fmul_rn(p, __int_as_float(((int)n + 127) << 23));
}

// Order-preserving key: larger = higher logit, then lower id (select.rs `sort_key`).
__device__ __forceinline__ u64 sort_key(float v, u32 id) {
    const u32 b = __float_as_uint(v);
    const u32 ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((u64)ord << 24) | (u64)(0xFFFFFFu - id);
}

__device__ __forceinline__ u32 key_token(u64 k) { return 0xFFFFFFu - (u32)(k & 0xFFFFFFu); }

__device__ __forceinline__ float key_logit(u64 k) {
    const u32 ord = (u32)(k >> 24);
    return __uint_as_float((ord & 0x80000000u) ? (ord & 0x7FFFFFFFu) : ~ord);
}

__device__ __forceinline__ float key_e(u64 k, float t, float m) {
    return exp_det(__fsub_rn(__fdiv_rn(key_logit(k), t), m));
}

__device__ __forceinline__ u64 weight_of(float e) { return (u64)__fmul_rn(e, 4294967296.0f); }

// Philox4x32-10 (rng.rs): counter (pos_lo, pos_hi, sequence, 0), key (seed_lo, seed_hi); the top 24
// bits of the first output word.
__device__ u32 draw24(u32 seed_lo, u32 seed_hi, u32 sequence, u32 pos_lo, u32 pos_hi) {
    u32 c0 = pos_lo, c1 = pos_hi, c2 = sequence, c3 = 0, k0 = seed_lo, k1 = seed_hi;
    for (int i = 0; i < 10; ++i) {
        const u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c0 >> 8;
}

struct SampleShared {
    u64 hist[256];
    u64 red64[SAMPLE_WARPS];
    double redf[SAMPLE_WARPS];
    float redv[SAMPLE_WARPS];
    int redi[SAMPLE_WARPS];
    u64 target;
    u64 found;
    u32 count;
    u32 digit;
    u64 top[MAX_TOP];
    u32 ntop;
};

__device__ __forceinline__ u64 block_sum_u64(u64 v, SampleShared& sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh.red64[warp] = v;
    __syncthreads();
    u64 s = 0;
    for (int w = 0; w < SAMPLE_WARPS; ++w) s += sh.red64[w];
    return s;
}

// Fixed order: lane partials by shuffle-down tree, then warps in index order.
__device__ __forceinline__ double block_sum_f64(double v, SampleShared& sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh.redf[warp] = v;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < SAMPLE_WARPS; ++w) s += sh.redf[w];
    return s;
}

// The CPU's argmax rule (mod.rs `argmax`): the largest non-NaN value, the lowest index on ties;
// when every value is NaN, the last index. `a` beats `b`?
__device__ __forceinline__ bool better(float av, int ai, float bv, int bi) {
    const bool an = av != av, bn = bv != bv;
    if (an != bn) return bn;
    if (an) return ai > bi;
    if (av != bv) return av > bv;
    return ai < bi;
}

__device__ __forceinline__ void block_argmax(float& v, int& i, SampleShared& sh) {
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_down_sync(0xffffffffu, v, o);
        const int oi = __shfl_down_sync(0xffffffffu, i, o);
        if (better(ov, oi, v, i)) v = ov, i = oi;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh.redv[warp] = v, sh.redi[warp] = i;
    __syncthreads();
    v = sh.redv[0];
    i = sh.redi[0];
    for (int w = 1; w < SAMPLE_WARPS; ++w)
        if (better(sh.redv[w], sh.redi[w], v, i)) v = sh.redv[w], i = sh.redi[w];
}

// Does key k of `src` take part: at least `lo`, and (when min_p > 0) e >= min_p.
__device__ __forceinline__ bool admitted(u64 k, u64 lo, float min_p, float t, float m) {
    return k >= lo && (min_p <= 0.0f || key_e(k, t, m) >= min_p);
}

// Sum of weights (or counts when !weighted) over the admitted keys of src[0, n).
__device__ u64 sum_weights(const u64* src, u32 n, u64 lo, float min_p, int weighted, float t, float m,
                           SampleShared& sh) {
    u64 acc = 0;
    for (u32 j = threadIdx.x; j < n; j += SAMPLE_THREADS) {
        const u64 k = src[j];
        if (!admitted(k, lo, min_p, t, m)) continue;
        acc += weighted ? weight_of(key_e(k, t, m)) : 1ull;
    }
    return block_sum_u64(acc, sh);
}

// The admitted key of src[0, n) at which the running weight (count when !weighted), taken in
// descending key order, first exceeds `target` (which must be below the admitted total).
// Survivors of each 8-bit digit are compacted into a and b in turn; src is left as it was.
__device__ u64 select_key(const u64* src, u32 n, u64 lo, float min_p, u64 target, int weighted, float t,
                          float m, u64* a, u64* b, SampleShared& sh) {
    const u64* cur = src;
    u32 cnt = n;
    bool first = true;
    u64 prefix = 0;
    if (threadIdx.x == 0) sh.target = target;
    for (int d = 6; d >= 0; --d) {
        const int shift = 8 * d;
        for (int j = threadIdx.x; j < 256; j += SAMPLE_THREADS) sh.hist[j] = 0;
        __syncthreads();
        u32 last = 0xFFFFFFFFu;
        u64 acc = 0;
        for (u32 j = threadIdx.x; j < cnt; j += SAMPLE_THREADS) {
            const u64 k = cur[j];
            if (first && !admitted(k, lo, min_p, t, m)) continue;
            const u32 dig = (u32)(k >> shift) & 255u;
            const u64 w = weighted ? weight_of(key_e(k, t, m)) : 1ull;
            if (dig != last) {
                if (acc) atomicAdd(&sh.hist[last], acc);
                last = dig;
                acc = 0;
            }
            acc += w;
        }
        if (acc) atomicAdd(&sh.hist[last], acc);
        __syncthreads();
        if (threadIdx.x == 0) {
            u64 tg = sh.target;
            int dsel = 0;
            for (int dg = 255; dg >= 0; --dg) {
                if (tg < sh.hist[dg]) {
                    dsel = dg;
                    break;
                }
                tg -= sh.hist[dg];
            }
            sh.target = tg;
            sh.digit = (u32)dsel;
            sh.count = 0;
        }
        __syncthreads();
        prefix |= (u64)sh.digit << shift;
        if (d == 0) break;
        u64* out = (d % 2 == 0) ? a : b;
        for (u32 j = threadIdx.x; j < cnt; j += SAMPLE_THREADS) {
            const u64 k = cur[j];
            if (first && !admitted(k, lo, min_p, t, m)) continue;
            if (((u32)(k >> shift) & 255u) == sh.digit) out[atomicAdd(&sh.count, 1u)] = k;
        }
        __syncthreads();
        cnt = sh.count;
        cur = out;
        first = false;
        __syncthreads();
    }
    return prefix;
}

// logits: [rows, vocab] f32. picks: [P, PICK_WORDS]; edits: [*, EDIT_WORDS]. proc: [P, vocab] f32
// scratch (the edited row); lists: [P, 3, vocab] u64 scratch (sort keys and two survivor
// buffers). out: [P, OUT_WORDS]. Grid: (P), block SAMPLE_THREADS.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_picks(const float* logits, const u32* picks, const u32* edits, float* proc, u64* lists, u32* out,
                 int vocab) {
    pdl_entry();
    __shared__ SampleShared sh;
    const u32* pk = picks + (size_t)blockIdx.x * PICK_WORDS;
    const float* row = logits + (size_t)pk[0] * vocab;
    float* l = proc + (size_t)blockIdx.x * vocab;
    u64* keys = lists + (size_t)blockIdx.x * 3 * vocab;
    u64* ta = keys + vocab;
    u64* tb = keys + 2 * (size_t)vocab;
    const float temperature = __uint_as_float(pk[3]);
    const u32 top_k = pk[4];
    const float top_p = __uint_as_float(pk[5]);
    const float min_p = __uint_as_float(pk[6]);
    const u32 n_top = min(pk[12], (u32)MAX_TOP);
    const bool want_lp = pk[13] != 0;
    u32* o = out + (size_t)blockIdx.x * OUT_WORDS;

    // 1. The edited row (mod.rs `Edit::apply`); edit ids are unique. The row is copied only when
    // a later step reads the copy; the argmax of the unedited row is taken on the way (`better`
    // is a strict total order, so the visiting order cannot change it). 16-byte loads,
    // SAMPLE_LOADS of them in flight a thread, where vocab is a multiple of 4 (run 74: the
    // one-load-at-a-time loop took 79 us a row of 128,256 logits).
    const bool copy = pk[2] > 0 || temperature != 0.0f || n_top > 0 || want_lp;
    float bv = row[0];
    int bi = 0;
    if ((vocab & 3) == 0) {
        const float4* r4 = reinterpret_cast<const float4*>(row);
        float4* l4 = reinterpret_cast<float4*>(l);
        const int n4 = vocab >> 2;
        for (int j0 = threadIdx.x; j0 < n4; j0 += SAMPLE_THREADS * SAMPLE_LOADS) {
            float4 v[SAMPLE_LOADS];
#pragma unroll
            for (int u = 0; u < SAMPLE_LOADS; ++u)
                if (j0 + u * SAMPLE_THREADS < n4) v[u] = r4[j0 + u * SAMPLE_THREADS];
#pragma unroll
            for (int u = 0; u < SAMPLE_LOADS; ++u) {
                const int j = j0 + u * SAMPLE_THREADS;
                if (j >= n4) break;
                if (copy) l4[j] = v[u];
                const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if (better(e[c], 4 * j + c, bv, bi)) bv = e[c], bi = 4 * j + c;
            }
        }
    } else {
        for (int j = threadIdx.x; j < vocab; j += SAMPLE_THREADS) {
            const float v = row[j];
            if (copy) l[j] = v;
            if (better(v, j, bv, bi)) bv = v, bi = j;
        }
    }
    __syncthreads();
    for (u32 e = threadIdx.x; e < pk[2]; e += SAMPLE_THREADS) {
        const u32* ed = edits + (size_t)(pk[1] + e) * EDIT_WORDS;
        if (ed[0] >= (u32)vocab) continue;
        float v = l[ed[0]];
        if (ed[1] & 1u) {
            const float r = __uint_as_float(ed[2]);
            v = v > 0.0f ? __fdiv_rn(v, r) : __fmul_rn(v, r);
        }
        if (ed[1] & 2u) v = __fsub_rn(v, __uint_as_float(ed[3]));
        if (ed[1] & 4u) v = __fadd_rn(v, __uint_as_float(ed[4]));
        l[ed[0]] = v;
    }
    __syncthreads();

    // 2. Argmax (greedy, and the max for the draw and the normalizer): of the edited row when
    // there are edits, else the one taken in step 1.
    if (pk[2] > 0) {
        bv = l[0], bi = 0;
        for (int j = threadIdx.x; j < vocab; j += SAMPLE_THREADS)
            if (better(l[j], j, bv, bi)) bv = l[j], bi = j;
    }
    block_argmax(bv, bi, sh);
    const bool any_valid = bv == bv;

    // 3. Sort keys of the valid tokens (any order), when the draw or the top list needs them.
    u32 n_valid = 0;
    const bool sampling = temperature > 0.0f && any_valid && isfinite(__fdiv_rn(bv, temperature));
    if (sampling || n_top > 0) {
        if (threadIdx.x == 0) sh.count = 0;
        __syncthreads();
        for (int j = threadIdx.x; j < vocab; j += SAMPLE_THREADS) {
            const float v = l[j];
            if (v == v) keys[atomicAdd(&sh.count, 1u)] = sort_key(v, (u32)j);
        }
        __syncthreads();
        n_valid = sh.count;
        __syncthreads();
    }

    // 4. The token.
    u32 token;
    if (temperature == 0.0f) {
        token = (u32)bi;
    } else if (!any_valid || !isfinite(__fdiv_rn(bv, temperature))) {
        // No weight can be formed (select.rs `draw`): the greedy choice.
        token = (u32)bi;
    } else {
        const float t = temperature;
        const float m = __fdiv_rn(bv, t);
        u64 lo = 0;
        if (top_k > 0 && top_k < n_valid)
            lo = select_key(keys, n_valid, 0, 0.0f, (u64)top_k - 1, 0, t, m, ta, tb, sh);
        if (top_p < 1.0f) {
            const u64 s = sum_weights(keys, n_valid, lo, 0.0f, 1, t, m, sh);
            u64 need = (u64)ceil(__dmul_rn((double)top_p, (double)s));
            if (need == 0) need = 1;
            lo = select_key(keys, n_valid, lo, 0.0f, need - 1, 1, t, m, ta, tb, sh);
        }
        const u64 s = sum_weights(keys, n_valid, lo, min_p, 1, t, m, sh);
        const u32 r = draw24(pk[7], pk[8], pk[9], pk[10], pk[11]);
        // floor(s * r / 2^24): s < 2^50 and r < 2^24, so the product needs 128 bits.
        const u64 plo = s * (u64)r, phi = __umul64hi(s, (u64)r);
        const u64 target = (phi << 40) | (plo >> 24);
        token = key_token(select_key(keys, n_valid, lo, min_p, target, 1, t, m, ta, tb, sh));
    }

    // 5. Logprobs of the edited row (mod.rs `logprobs`): max over non-NaN values, f64 normalizer.
    if (want_lp || n_top > 0) {
        const float mx = any_valid ? bv : NEG_INF;
        double acc = 0.0;
        for (int j = threadIdx.x; j < vocab; j += SAMPLE_THREADS) acc += exp((double)__fsub_rn(l[j], mx));
        const double lse = (double)mx + log(block_sum_f64(acc, sh));
        if (n_top > 0) {
            const u32 take = min(n_top, n_valid);
            const u64 kn = take < n_valid && take > 0
                               ? select_key(keys, n_valid, 0, 0.0f, (u64)take - 1, 0, 1.0f, 0.0f, ta, tb, sh)
                               : 0;
            if (threadIdx.x == 0) sh.ntop = 0;
            __syncthreads();
            for (u32 j = threadIdx.x; j < n_valid && take > 0; j += SAMPLE_THREADS) {
                const u64 k = keys[j];
                if (k >= kn) sh.top[atomicAdd(&sh.ntop, 1u)] = k;
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                const u32 c = sh.ntop;
                for (u32 x = 1; x < c; ++x)
                    for (u32 y = x; y > 0 && sh.top[y] > sh.top[y - 1]; --y) {
                        const u64 tmp = sh.top[y];
                        sh.top[y] = sh.top[y - 1];
                        sh.top[y - 1] = tmp;
                    }
                for (u32 x = 0; x < MAX_TOP; ++x) {
                    const u32 id = x < c ? key_token(sh.top[x]) : 0xFFFFFFFFu;
                    o[2 + x] = id;
                    o[2 + MAX_TOP + x] = x < c ? __float_as_uint((float)((double)l[id] - lse)) : 0u;
                }
            }
        } else if (threadIdx.x == 0) {
            for (u32 x = 0; x < MAX_TOP; ++x) o[2 + x] = 0xFFFFFFFFu;
        }
        if (threadIdx.x == 0) o[1] = __float_as_uint((float)((double)l[token] - lse));
    }
    if (threadIdx.x == 0) o[0] = token;
}
