//! Self-check of the split-K reduce's SwiGLU epilogue (`linear_tcs_reduce_swiglu`,
//! kernels/linear_tc.cu, TCS_GLU = 1): a gate|up projection followed by SwiGLU, fused into the
//! reduce and not, must give the same bits at every token count the split-K forms take.

use super::ops::DevMatrix;
use super::selfcheck::{random_weights, CheckRow, Rng};
use super::{drv, CudaDevice};
use crate::error::Result;
use crate::models::Activation;
use crate::quant::DType;

/// A BF16 gate|up matrix of 2 × 8,192 rows by 2,048 (64 MiB: past the H200 defaults'
/// TCK_MIN_MB, and QTC_BIG_ROWS rows, as an 8B model's), with a bias, at M = 9, 16 and 32:
/// [`CudaDevice::linear_gated_as`] fused against unfused, bit for bit. The case says whether the
/// reduce took the epilogue (only where the device's defines route these M to a split-K form).
pub(super) fn check_gated(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (inter, k) = (8192usize, 2048usize);
    let ms = [9usize, 16, 32];
    let mmax = *ms.last().expect("ms");
    let wb = random_weights(rng, DType::BF16, 2 * inter, k);
    let bias = rng.vec(2 * inter, -1.0, 1.0);
    let w = DevMatrix::upload_repacked(dev, &wb, DType::BF16, 2 * inter, k, Some(&bias))?;
    let x = rng.vec(mmax * k, -1.0, 1.0);
    let (mut same, mut taken, mut diff) = (true, Vec::new(), 0f32);
    for &m in &ms {
        let xd = s.clone_htod(&x[..m * k]).map_err(drv)?;
        let mut outs = Vec::new();
        for fuse in [false, true] {
            let mut gate = s.alloc_zeros::<f32>(m * inter).map_err(drv)?;
            let mut up = s.alloc_zeros::<f32>(m * inter).map_err(drv)?;
            let mut out = s.alloc_zeros::<f32>(m * inter).map_err(drv)?;
            let t = dev.linear_gated_as(
                &xd,
                &w,
                &mut gate,
                &mut up,
                &mut out,
                Activation::Silu,
                false,
                fuse,
            )?;
            if fuse {
                taken.push(t);
            }
            outs.push(s.clone_dtoh(&out).map_err(drv)?);
        }
        for (a, b) in outs[0].iter().zip(&outs[1]) {
            same &= a.to_bits() == b.to_bits();
            diff = diff.max((a - b).abs());
        }
    }
    Ok(vec![CheckRow {
        op: "linear_gated_bf16 (split-K reduce + SwiGLU)".into(),
        case: format!("K={k} I={inter} M={ms:?}, bias; reduce took SwiGLU: {taken:?}"),
        max_abs_diff: diff,
        tolerance: "bit-equal to linear + swiglu_f32".into(),
        within: same,
        batch_identical: None,
    }])
}
