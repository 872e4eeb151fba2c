//! Self-check of the split-K forms' reduces on a gate|up projection: `linear_tcs_reduce4` (the
//! outputs, then `swiglu_f32`) and `linear_tcs_reduce_swiglu` (TCS_GLU = 1: SwiGLU in the reduce),
//! each against the one-token form's rows, bit for bit.

use super::ops::DevMatrix;
use super::selfcheck::{random_weights, CheckRow, Rng};
use super::{drv, CudaDevice};
use crate::error::Result;
use crate::models::Activation;
use crate::quant::DType;

/// A BF16 gate|up matrix of 2 × 8,192 rows by 2,048 (64 MiB: past the H200 defaults'
/// TCK_MIN_MB, and QTC_BIG_ROWS rows, as an 8B model's), with a bias. Each token alone (M = 1,
/// the one-token form) is the reference; at M = 9, 16 and 32, [`CudaDevice::linear_gated`]
/// unfused and fused must give each token's row the same bits. Where the defines route these M
/// to the wgmma split-K form (QTC = 1, QTC_SK = 3 on sm_90a, TCK_MIN_MB at most 64), the fused
/// passes must also have taken the epilogue, else the row fails: a check that ran nothing new
/// must not pass as one that did. The case lists which passes took it.
pub(super) fn check_gated(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (inter, k) = (8192usize, 2048usize);
    let ms = [9usize, 16, 32];
    let mmax = *ms.last().expect("ms");
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
    let routed = dev.define("QTC", 0) == 1
        && dev.define("QTC_SK", 0) == 3
        && dev.info().arch == "sm_90a"
        && dev.define("TCK_MIN_MB", 0) <= 64;
    Ok(vec![CheckRow {
        op: "linear_gated_bf16 (split-K reduces)".into(),
        case: format!(
            "K={k} I={inter} M={ms:?} against M=1, bias; reduce took SwiGLU: {taken:?}{}",
            if routed { " (required)" } else { "" }
        ),
        max_abs_diff: diff,
        tolerance: "bit-equal to the one-token rows, unfused and fused".into(),
        within: same && (!routed || taken.iter().all(|&t| t)),
        batch_identical: Some(same),
    }])
}
