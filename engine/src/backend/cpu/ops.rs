//! CPU reference ops. Each reduction runs in a fixed order over its own row only, so a row's
//! result never depends on the other rows of the pass.

use crate::models::{Activation, RopeStyle};
use crate::quant::dot_f32;

/// RMSNorm of every `w.len()`-long row of `x`: `x / sqrt(mean(x²) + eps) * w` (Zhang & Sennrich
/// 2019; HF `LlamaRMSNorm`). Also used per head for Q/K norms (rows of `head_dim`).
pub fn rms_norm_rows(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let n = w.len();
    let mut out = vec![0f32; x.len()];
    for (o, r) in out.chunks_mut(n).zip(x.chunks(n)) {
        let ss = dot_f32(r, r);
        let inv = 1.0 / (ss / n as f32 + eps).sqrt();
        for ((o, &v), &g) in o.iter_mut().zip(r).zip(w) {
            *o = v * inv * g;
        }
    }
    out
}

/// Adds `b` to every `b.len()`-long row of `x`.
pub fn add_bias(x: &mut [f32], b: &[f32]) {
    for r in x.chunks_mut(b.len()) {
        r.iter_mut().zip(b).for_each(|(v, &bb)| *v += bb);
    }
}

/// `act(gate) * up`, element-wise: SwiGLU (Shazeer 2020) or GeGLU with tanh-approximated GELU.
pub fn gated_activation(gate: &[f32], up: &[f32], act: Activation) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| {
            let a = match act {
                Activation::Silu => g / (1.0 + (-g).exp()),
                Activation::GeluTanh => {
                    const C: f32 = 0.797_884_6; // sqrt(2/pi)
                    0.5 * g * (1.0 + (C * (g + 0.044715 * g * g * g)).tanh())
                }
            };
            a * u
        })
        .collect()
}

/// Rotary position embedding tables for one head size and base (Su et al. 2021, RoFormer).
pub struct Rope {
    inv_freq: Vec<f32>,
    style: RopeStyle,
}

impl Rope {
    /// `inv_freq[i] = base^(-2i/head_dim)` in f32, as HF computes it.
    pub fn new(head_dim: usize, base: f32, style: RopeStyle) -> Self {
        let inv_freq = (0..head_dim / 2)
            .map(|i| 1.0 / base.powf((2 * i) as f32 / head_dim as f32))
            .collect();
        Rope { inv_freq, style }
    }

    /// The `[head_dim / 2]` inverse frequencies (the CUDA backend uploads these, so both backends
    /// rotate by the same angles).
    pub fn inv_freq(&self) -> &[f32] {
        &self.inv_freq
    }

    /// Rotates one head vector in place for position `pos`.
    pub fn apply(&self, x: &mut [f32], pos: usize) {
        let half = x.len() / 2;
        for (i, &f) in self.inv_freq.iter().enumerate() {
            let angle = pos as f32 * f;
            let (sin, cos) = angle.sin_cos();
            let (a, b) = match self.style {
                RopeStyle::Neox => (i, i + half),
                RopeStyle::Interleaved => (2 * i, 2 * i + 1),
            };
            let (x0, x1) = (x[a], x[b]);
            x[a] = x0 * cos - x1 * sin;
            x[b] = x1 * cos + x0 * sin;
        }
    }
}

/// Scaled dot-product attention of one query head over key positions `keys` (ascending), with
/// `kv(p)` giving the K and V head vectors at position `p`. Softmax with max subtraction; sums run
/// in ascending position order. Writes the `head_dim` output into `out`.
pub fn attend<'a>(
    q: &[f32],
    keys: std::ops::Range<usize>,
    kv: impl Fn(usize) -> (&'a [f32], &'a [f32]),
    scale: f32,
    out: &mut [f32],
) {
    let scores: Vec<f32> = keys.clone().map(|p| dot_f32(q, kv(p).0) * scale).collect();
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    out.iter_mut().for_each(|o| *o = 0.0);
    for (p, &s) in keys.zip(&scores) {
        let e = (s - max).exp();
        sum += e;
        let v = kv(p).1;
        out.iter_mut().zip(v).for_each(|(o, &vv)| *o += e * vv);
    }
    let inv = 1.0 / sum;
    out.iter_mut().for_each(|o| *o *= inv);
}
