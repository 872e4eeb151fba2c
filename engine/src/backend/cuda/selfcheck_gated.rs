//! Self-check of the split-K forms' reduces and their epilogues, each against the one-token
//! form's rows, bit for bit: on a gate|up projection `linear_tcs_reduce4` (the outputs, then
//! `swiglu_f32`) and `linear_tcs_reduce_swiglu` (TCS_GLU = 1: SwiGLU in the reduce); on a Q|K|V
//! projection the reduce then `rope_qk_append_f32`, and `linear_tcs_reduce_rope_append`
//! (TCS_ROPE = 1: RoPE and the KV append in the reduce).

use super::attention::KvIndex;
use super::linear_tc::{RopeAppend, SK_SCRATCH_FLOATS};
use super::ops::DevMatrix;
use super::selfcheck::{random_weights, CheckRow, Rng};
use super::{drv, CudaDevice};
use crate::error::Result;
use crate::models::{Activation, RopeStyle};
use crate::quant::DType;

/// The token counts both checks run: the split-K form's widths up to 32, and past them (33: two
/// token groups; 130: five, below the tiled GEMM where it starts later, as on the H200).
const MS: [usize; 5] = [9, 16, 32, 33, 130];

/// Whether the defines route `m` tokens of a BF16 matrix of `r` rows and `mib` MiB to the wgmma
/// split-K form (QTC = 1, QTC_SK = 3 on sm_90a, TCK_MIN_MB at most `mib`, m from QTC_SK_MIN and
/// below where the tiled GEMM starts, its partials within the scratch): a fused pass must then
/// take its epilogue.
fn routed(dev: &CudaDevice, mib: u32, r: usize, m: usize) -> bool {
    dev.define("QTC", 0) == 1
        && dev.define("QTC_SK", 0) == 3
        && dev.info().arch == "sm_90a"
        && dev.define("TCK_MIN_MB", 0) <= mib
        && m >= dev.define("QTC_SK_MIN", 9).max(2) as usize
        && (dev.define("QTC_GEMM", 0) == 0 || m < dev.gemm_min(r))
        && dev.tc_slices(r, m, false) as usize * m * r <= SK_SCRATCH_FLOATS
}

/// A BF16 gate|up matrix of 2 × 8,192 rows by 2,048 (64 MiB: past the H200 defaults'
/// TCK_MIN_MB, and QTC_BIG_ROWS rows, as an 8B model's), with a bias. Each token alone (M = 1,
/// the one-token form) is the reference; at each M of [`MS`], [`CudaDevice::linear_gated`]
/// unfused and fused must give each token's row the same bits. Where the defines route an M to
/// the wgmma split-K form ([`routed`]), its fused pass must also have taken the epilogue, else
/// the row fails: a check that ran nothing new must not pass as one that did. The case lists
/// which passes took it and which had to.
pub(super) fn check_gated(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (inter, k) = (8192usize, 2048usize);
    let (ms, mmax) = (MS, MS[MS.len() - 1]);
    let wb = random_weights(rng, DType::BF16, 2 * inter, k);
    let bias = rng.vec(2 * inter, -1.0, 1.0);
    let w = DevMatrix::upload_repacked(dev, &wb, DType::BF16, 2 * inter, k, Some(&bias))?;
    let x = rng.vec(mmax * k, -1.0, 1.0);
    // One pass: `out` for the first m tokens, and whether the reduce computed it.
    let pass = |xs: &[f32], m: usize, fuse: bool| -> Result<(Vec<f32>, bool)> {
        let xd = s.clone_htod(xs).map_err(drv)?;
        let mut gate = s.alloc_zeros::<f32>(m * inter).map_err(drv)?;
        let mut up = s.alloc_zeros::<f32>(m * inter).map_err(drv)?;
        let mut out = s.alloc_zeros::<f32>(m * inter).map_err(drv)?;
        let t = dev.linear_gated(
            &xd,
            &w,
            &mut gate,
            &mut up,
            &mut out,
            Activation::Silu,
            false,
            fuse,
        )?;
        Ok((s.clone_dtoh(&out).map_err(drv)?, t))
    };
    let mut solo = Vec::with_capacity(mmax * inter);
    for t in 0..mmax {
        solo.extend(pass(&x[t * k..(t + 1) * k], 1, false)?.0);
    }
    let (mut same, mut taken, mut diff) = (true, Vec::new(), 0f32);
    for &m in &ms {
        for fuse in [false, true] {
            let (out, t) = pass(&x[..m * k], m, fuse)?;
            if fuse {
                taken.push(t);
            }
            for (a, b) in out.iter().zip(&solo) {
                same &= a.to_bits() == b.to_bits();
                diff = diff.max((a - b).abs());
            }
        }
    }
    let need: Vec<bool> = ms.iter().map(|&m| routed(dev, 64, 2 * inter, m)).collect();
    Ok(vec![CheckRow {
        op: "linear_gated_bf16 (split-K reduces)".into(),
        case: format!(
            "K={k} I={inter} M={ms:?} against M=1, bias; reduce took SwiGLU: {taken:?}, \
             required: {need:?}"
        ),
        max_abs_diff: diff,
        tolerance: "bit-equal to the one-token rows, unfused and fused".into(),
        within: same && taken.iter().zip(&need).all(|(&t, &n)| t || !n),
        batch_identical: Some(same),
    }])
}

/// A BF16 Q|K|V matrix of Llama-3.1-8B's attention shape (32 query and 8 KV heads of 128, K =
/// 4,096: 6,144 rows, 48 MiB, past the H200 defaults' TCK_MIN_MB) with a bias and without,
/// both RoPE styles, an f32 or f16 KV cache (as configured). Each token alone (M = 1, the one-token form, then `rope_qk_append_f32`) is the
/// reference for q, k, v and its cache slot; at each M of [`MS`], [`CudaDevice::linear_qkv_rope`]
/// unfused and fused must give every token the same bits there. Where the defines route an M to
/// the wgmma split-K form ([`routed`]), its fused passes must have taken the epilogue, else the
/// row fails.
pub(super) fn check_qkv_rope(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (nh, nkv, hd, k) = (32usize, 8usize, 128usize, 4096usize);
    let (qw, kw) = (nh * hd, nkv * hd);
    let r = qw + 2 * kw;
    let (ms, mmax) = (MS, MS[MS.len() - 1]);
    let wb = random_weights(rng, DType::BF16, r, k);
    let bias = rng.vec(r, -1.0, 1.0);
    // With a bias (Qwen2) and without (Llama): the kernel's two branches.
    let ws = [
        DevMatrix::upload_repacked(dev, &wb, DType::BF16, r, k, Some(&bias))?,
        DevMatrix::upload_repacked(dev, &wb, DType::BF16, r, k, None)?,
    ];
    let x = rng.vec(mmax * k, -1.0, 1.0);
    let pos: Vec<u32> = (0..mmax).map(|_| (rng.next_u64() % 8192) as u32).collect();
    // Distinct slots, not in token order (5 is prime to 256); a cache of 256 slots.
    let slots: Vec<u32> = (0..mmax as u32).map(|t| (t * 5 + 3) % 256).collect();
    // A slot's words in a cache viewed as f32: kw values of kv_value_bytes each (f16 packs two
    // to a word).
    let slot_words = kw * dev.kv_value_bytes() / 4;
    let cache = 256 * slot_words;
    let inv: Vec<f32> = (0..hd / 2)
        .map(|i| 1.0 / 500000f32.powf((2 * i) as f32 / hd as f32))
        .collect();
    let fd = s.clone_htod(&inv).map_err(drv)?;
    // q, k, v and the two caches as a pass leaves them (caches start at zero, or as given).
    type Out = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>);
    let pass = |w: &DevMatrix,
                t0: usize,
                m: usize,
                fuse: bool,
                style: RopeStyle,
                caches: Option<(&[f32], &[f32])>|
     -> Result<(Out, bool)> {
        let xd = s.clone_htod(&x[t0 * k..(t0 + m) * k]).map_err(drv)?;
        let idx = KvIndex {
            pos: s.clone_htod(&pos[t0..t0 + m]).map_err(drv)?,
            slots: s.clone_htod(&slots[t0..t0 + m]).map_err(drv)?,
            row_tab: s.clone_htod(&vec![0u32; m]).map_err(drv)?,
            tables: s.clone_htod(&[0u32]).map_err(drv)?,
            host_pos: pos[t0..t0 + m].to_vec(),
            host_tab: vec![0; m],
        };
        let (mut kc, mut vc) = match caches {
            Some((kh, vh)) => (
                s.clone_htod(kh).map_err(drv)?,
                s.clone_htod(vh).map_err(drv)?,
            ),
            None => (
                s.alloc_zeros::<f32>(cache).map_err(drv)?,
                s.alloc_zeros::<f32>(cache).map_err(drv)?,
            ),
        };
        let mut q = s.alloc_zeros::<f32>(m * qw).map_err(drv)?;
        let mut kk = s.alloc_zeros::<f32>(m * kw).map_err(drv)?;
        let mut v = s.alloc_zeros::<f32>(m * kw).map_err(drv)?;
        let ra = RopeAppend {
            kc: &mut kc,
            vc: &mut vc,
            idx: &idx,
            inv_freq: &fd,
            heads: (nh, nkv),
            style,
        };
        let took = dev.linear_qkv_rope(&xd, w, [&mut q, &mut kk, &mut v], ra, false, fuse)?;
        let h = |d: &cudarc::driver::CudaSlice<f32>| s.clone_dtoh(d).map_err(drv);
        Ok(((h(&q)?, h(&kk)?, h(&v)?, h(&kc)?, h(&vc)?), took))
    };
    let (mut same, mut taken, mut diff) = (true, Vec::new(), 0f32);
    for (w, style) in ws
        .iter()
        .flat_map(|w| [(w, RopeStyle::Neox), (w, RopeStyle::Interleaved)])
    {
        // The reference: each token alone, its cache slot written into one shared cache.
        let (mut sq, mut sk, mut sv) = (Vec::new(), Vec::new(), Vec::new());
        let (mut skc, mut svc) = (vec![0f32; cache], vec![0f32; cache]);
        for t in 0..mmax {
            let ((q, kk, v, kc, vc), _) = pass(w, t, 1, false, style, Some((&skc, &svc)))?;
            sq.extend(q);
            sk.extend(kk);
            sv.extend(v);
            (skc, svc) = (kc, vc);
        }
        for &m in &ms {
            for fuse in [false, true] {
                let ((q, kk, v, kc, vc), t) = pass(w, 0, m, fuse, style, None)?;
                if fuse {
                    taken.push(t);
                }
                // The cache: the slots of the first m tokens, the rest untouched (zero).
                let mut want_kc = vec![0f32; cache];
                let mut want_vc = vec![0f32; cache];
                for &sl in &slots[..m] {
                    let o = sl as usize * slot_words..(sl as usize + 1) * slot_words;
                    want_kc[o.clone()].copy_from_slice(&skc[o.clone()]);
                    want_vc[o.clone()].copy_from_slice(&svc[o]);
                }
                let pairs = [
                    (&q, &sq[..m * qw]),
                    (&kk, &sk[..m * kw]),
                    (&v, &sv[..m * kw]),
                    (&kc, &want_kc[..]),
                    (&vc, &want_vc[..]),
                ];
                for (got, want) in pairs {
                    same &= got.len() == want.len();
                    for (a, b) in got.iter().zip(want) {
                        same &= a.to_bits() == b.to_bits();
                        diff = diff.max((a - b).abs());
                    }
                }
            }
        }
    }
    // `taken` holds each M's fused pass once per (weights, style) case, in MS order.
    let need: Vec<bool> = ms.iter().map(|&m| routed(dev, 48, r, m)).collect();
    Ok(vec![CheckRow {
        op: "linear_qkv_rope_bf16 (split-K reduce + RoPE + KV append)".into(),
        case: format!(
            "K={k} heads={nh}/{nkv}x{hd} M={ms:?} against M=1, with and without a bias, Neox and \
             interleaved; reduce took RoPE: {taken:?}, required: {need:?}"
        ),
        max_abs_diff: diff,
        tolerance: "q, k, v and the cache slots bit-equal to the one-token rows, unfused and fused"
            .into(),
        within: same
            && taken
                .iter()
                .zip(need.iter().cycle())
                .all(|(&t, &n)| t || !n),
        batch_identical: Some(same),
    }])
}
