//! The seeded draw, defined so that the CPU and the CUDA kernel (`kernels/sample.cu`) choose the
//! same token from the same logits, bit for bit, without sorting the vocabulary.
//!
//! Every valid (non-NaN) token gets a 56-bit sort key — its logit's bits in an order-preserving
//! form, then its id reversed — so "logit descending, lower id first on ties" is "key
//! descending", and a key names its token. Its weight is `floor(e × 2^32)` with
//! `e = exp_det(logit / temperature − max / temperature)` in [0, 1], an integer, so sums of
//! weights are exact and do not depend on the order they are added in. Then:
//!
//! 1. top-k keeps the `k` largest keys;
//! 2. top-p keeps the shortest prefix (in key order) whose weight reaches `ceil(top_p × S)`, with
//!    `S` the kept weight and the product taken in f64;
//! 3. min-p keeps the tokens with `e ≥ min_p` (the top token has `e = 1`);
//! 4. the draw: with `r` the 24-bit Philox output of [`super::rng::draw24`] and `S` the kept
//!    weight, the chosen token is the first in key order whose running weight exceeds
//!    `floor(S × r / 2^24)`.
//!
//! Each step is "the first key at which a running sum in key order exceeds a target", which the
//! CPU finds by quickselect here and the GPU by radix select; both are exact, so they agree.
//! This is vLLM's filter order (top-k, top-p, min-p) with the rounding pinned down.

/// `e^x` for `x ≤ 0` from IEEE f32 multiplies and adds only (no FMA, no library `exp`), so the
/// CPU and the GPU (which uses the same sequence with `__fmul_rn`/`__fadd_rn`) get the same bits.
/// Cody–Waite reduction by ln 2, then a degree-7 Taylor polynomial; within 2 ulp of `exp`.
/// Returns 0 below −87 (where `e × 2^32 < 1` anyway) and for NaN.
pub fn exp_det(x: f32) -> f32 {
    if x.is_nan() || x <= -87.0 {
        return 0.0;
    }
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = (x - n * 0.693_359_4_f32) - n * -2.121_944_4e-4_f32;
    let mut p = 1.0 / 5040.0_f32;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// The 56-bit sort key of token `id` with logit `v`: larger key = earlier in "logit descending,
/// lower id first" order (`f32::total_cmp` order for the logit). Needs `id < 2^24`.
pub fn sort_key(v: f32, id: u32) -> u64 {
    let b = v.to_bits();
    let ord = if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    };
    ((ord as u64) << 24) | (0xFF_FFFF - id) as u64
}

/// The token id a [`sort_key`] was made from.
pub fn key_token(key: u64) -> u32 {
    0xFF_FFFF - (key & 0xFF_FFFF) as u32
}

/// The logit a [`sort_key`] was made from.
pub fn key_logit(key: u64) -> f32 {
    let ord = (key >> 24) as u32;
    f32::from_bits(if ord & 0x8000_0000 != 0 {
        ord & 0x7FFF_FFFF
    } else {
        !ord
    })
}

/// A token's integer weight from its `e` in [0, 1]: `floor(e × 2^32)`.
pub fn weight(e: f32) -> u64 {
    (e * 4_294_967_296.0) as u64
}

#[derive(Clone, Copy)]
struct Cand {
    key: u64,
    e: f32,
}

/// Every valid (non-NaN) token of `l` with its sort key and `e(logit)`.
fn keyed(l: &[f32], e: impl Fn(f32) -> f32) -> Vec<Cand> {
    l.iter()
        .enumerate()
        .filter(|(_, v)| !v.is_nan())
        .map(|(i, &v)| Cand {
            key: sort_key(v, i as u32),
            e: e(v),
        })
        .collect()
}

/// The key of the element at which the running weight, taken in descending key order, first
/// exceeds `target`. `c` is reordered. Needs `target < Σ w`.
fn boundary(mut c: &mut [Cand], mut target: u64, w: impl Fn(&Cand) -> u64) -> u64 {
    loop {
        let pivot = c[c.len() / 2].key;
        let mut hi = 0;
        for i in 0..c.len() {
            if c[i].key > pivot {
                c.swap(i, hi);
                hi += 1;
            }
        }
        let above: u64 = c[..hi].iter().map(&w).sum();
        if target < above {
            c = &mut c[..hi];
            continue;
        }
        target -= above;
        let at = hi
            + c[hi..]
                .iter()
                .position(|x| x.key == pivot)
                .expect("the pivot is in the slice");
        c.swap(hi, at);
        let wp = w(&c[hi]);
        if target < wp {
            return pivot;
        }
        target -= wp;
        c = &mut c[hi + 1..];
    }
}

/// The tokens top-k, top-p and min-p keep from processed logits `l` at `temperature > 0`, as
/// (sort key, e) pairs in no particular order. Empty when every logit is NaN or when
/// `max / temperature` is not finite (an infinite logit, or a temperature so small the quotient
/// overflows): the weights would all be 0 then.
fn candidates(l: &[f32], temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> Vec<Cand> {
    let mut vmax = f32::NEG_INFINITY;
    let mut any = false;
    for &v in l {
        if !v.is_nan() && (!any || v > vmax) {
            vmax = v;
            any = true;
        }
    }
    let m = vmax / temperature;
    if !any || !m.is_finite() {
        return Vec::new();
    }
    let mut c = keyed(l, |v| exp_det(v / temperature - m));
    if top_k > 0 && top_k < c.len() {
        let kk = boundary(&mut c, top_k as u64 - 1, |_| 1);
        c.retain(|x| x.key >= kk);
    }
    if top_p < 1.0 {
        let s: u64 = c.iter().map(|x| weight(x.e)).sum();
        let need = (top_p as f64 * s as f64).ceil() as u64;
        let kp = boundary(&mut c, need.max(1) - 1, |x| weight(x.e));
        c.retain(|x| x.key >= kp);
    }
    if min_p > 0.0 {
        c.retain(|x| x.e >= min_p);
    }
    c
}

/// The seeded draw from processed logits `l` (one row of `vocab` f32) at `temperature > 0`,
/// with the 24-bit random `r24`. When no weight can be formed (every logit NaN, or
/// `max / temperature` not finite) it is the greedy choice, [`super::argmax`].
pub fn draw(l: &[f32], temperature: f32, top_k: usize, top_p: f32, min_p: f32, r24: u32) -> u32 {
    let mut c = candidates(l, temperature, top_k, top_p, min_p);
    if c.is_empty() {
        return super::argmax(l);
    }
    let s: u64 = c.iter().map(|x| weight(x.e)).sum();
    let target = ((s as u128 * (r24 & 0xFF_FFFF) as u128) >> 24) as u64;
    key_token(boundary(&mut c, target, |x| weight(x.e)))
}

/// The token ids the filters keep, most likely first (for tests and tools).
pub fn kept(l: &[f32], temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> Vec<u32> {
    let mut c = candidates(l, temperature, top_k, top_p, min_p);
    c.sort_by_key(|x| std::cmp::Reverse(x.key));
    c.iter().map(|x| key_token(x.key)).collect()
}

/// The `n` most likely valid tokens of `l`, most likely first (lower id first on ties).
pub fn top_n(l: &[f32], n: usize) -> Vec<u32> {
    let mut c = keyed(l, |_| 0.0);
    if n == 0 || c.is_empty() {
        return Vec::new();
    }
    if n < c.len() {
        let kn = boundary(&mut c, n as u64 - 1, |_| 1);
        c.retain(|x| x.key >= kn);
    }
    c.sort_by_key(|x| std::cmp::Reverse(x.key));
    c.iter().map(|x| key_token(x.key)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_det_tracks_exp() {
        // The kernel spells the constants as bit patterns.
        assert_eq!(std::f32::consts::LOG2_E.to_bits(), 0x3fb8_aa3b);
        let mut x = -86.9f32;
        while x <= 0.0 {
            let (a, b) = (exp_det(x), x.exp());
            assert!(
                (a - b).abs() <= 3.0 * f32::EPSILON * b,
                "x = {x}: {a} vs {b}"
            );
            x += 0.0137;
        }
        assert_eq!(exp_det(0.0), 1.0);
        assert_eq!(exp_det(-90.0), 0.0);
        assert_eq!(exp_det(f32::NAN), 0.0);
    }

    #[test]
    fn keys_order_like_total_cmp_and_round_trip() {
        let vals = [
            -3.5f32,
            -0.0,
            0.0,
            1e-30,
            2.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        for &a in &vals {
            for &b in &vals {
                let (ka, kb) = (sort_key(a, 7), sort_key(b, 7));
                assert_eq!(ka.cmp(&kb), a.total_cmp(&b), "{a} vs {b}");
            }
            assert_eq!(key_logit(sort_key(a, 9)).to_bits(), a.to_bits());
            assert_eq!(key_token(sort_key(a, 9)), 9);
        }
        // Equal logits: the lower id sorts first (has the larger key).
        assert!(sort_key(1.0, 3) > sort_key(1.0, 4));
    }

    #[test]
    fn boundary_matches_a_sorted_scan() {
        let mut rng = 0x1234_5678u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for trial in 0..200 {
            let n = 1 + (next() % 300) as usize;
            let c: Vec<Cand> = (0..n)
                .map(|i| Cand {
                    key: sort_key((next() % 50) as f32 - 25.0, i as u32),
                    e: (next() % 1000) as f32 / 1000.0,
                })
                .collect();
            let total: u64 = c.iter().map(|x| weight(x.e)).sum();
            if total == 0 {
                continue;
            }
            let target = next() % total;
            let mut sorted = c.clone();
            sorted.sort_by_key(|x| std::cmp::Reverse(x.key));
            let mut cum = 0;
            let want = sorted
                .iter()
                .find(|x| {
                    cum += weight(x.e);
                    cum > target
                })
                .unwrap()
                .key;
            let mut work = c.clone();
            assert_eq!(
                boundary(&mut work, target, |x| weight(x.e)),
                want,
                "trial {trial}"
            );
        }
    }

    #[test]
    fn draw_follows_the_filters() {
        let l = [4.0f32, 3.0, 2.0, 1.0, 0.0];
        assert_eq!(kept(&l, 1.0, 0, 1.0, 0.0), vec![0, 1, 2, 3, 4]);
        assert_eq!(kept(&l, 1.0, 2, 1.0, 0.0), vec![0, 1]);
        // p(0) = 0.636: top_p 0.5 keeps one token, 0.7 two.
        assert_eq!(kept(&l, 1.0, 0, 0.5, 0.0), vec![0]);
        assert_eq!(kept(&l, 1.0, 0, 0.7, 0.0), vec![0, 1]);
        // min_p 0.3 keeps e >= 0.3: e^-1 = 0.37 stays, e^-2 = 0.14 goes.
        assert_eq!(kept(&l, 1.0, 0, 1.0, 0.3), vec![0, 1]);
        // r = 0 draws the first kept token; the largest r the last one.
        assert_eq!(draw(&l, 1.0, 0, 1.0, 0.0, 0), 0);
        assert_eq!(draw(&l, 1.0, 3, 1.0, 0.0, 0xFF_FFFF), 2);
        // No weights can be formed: the greedy choice (argmax's rule: all NaN -> the last index).
        assert_eq!(draw(&[f32::NAN, f32::NAN], 1.0, 0, 1.0, 0.0, 5), 1);
        assert_eq!(draw(&[1.0, f32::INFINITY, 2.0], 1.0, 0, 0.9, 0.0, 5), 1);
        assert_eq!(draw(&[1.0, 3.0, 2.0], 1e-40, 0, 1.0, 0.0, 0xFF_FFFF), 1);
        assert_eq!(
            kept(&[1.0, 3.0, 2.0], 1e-40, 0, 1.0, 0.0),
            Vec::<u32>::new()
        );
        assert_eq!(top_n(&[1.0, 3.0, f32::NAN, 3.0, 2.0], 3), vec![1, 3, 4]);
    }
}
