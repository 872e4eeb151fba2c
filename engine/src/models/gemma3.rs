//! `gemma3` family (Gemma 3 text): embeddings scaled by sqrt(hidden), four RMSNorms per layer
//! (before and after attention and FFN), per-head Q/K norms, GELU-tanh gated FFN, and a 5:1
//! pattern of sliding-window (local RoPE base) to global layers.
//! Reference: HF transformers `modeling_gemma3.py` and llama.cpp's `gemma3` graph.

use super::config::{Activation, Arch, ModelConfig, RawDims};

/// Every sixth layer (indices 5, 11, ...) is global; the rest slide.
pub const SLIDING_PATTERN: usize = 6;
/// RoPE base of the sliding-window layers (HF `rope_local_base_freq`).
pub const DEFAULT_LOCAL_ROPE_BASE: f32 = 10_000.0;

/// Family rules on top of the shared dimensions.
pub(crate) fn config(raw: &RawDims) -> ModelConfig {
    let window = raw.sliding_window.unwrap_or(4096);
    let layer_window = (0..raw.n_layers)
        .map(|i| ((i + 1) % SLIDING_PATTERN != 0).then_some(window))
        .collect();
    let scalar = raw.query_pre_attn_scalar.unwrap_or(raw.head_dim as f32);
    ModelConfig {
        layer_window,
        embed_scale: Some((raw.hidden as f32).sqrt()),
        attn_scale: 1.0 / scalar.sqrt(),
        qk_norm: true,
        sandwich_norms: true,
        activation: Activation::GeluTanh,
        rope_local_theta: Some(raw.rope_local_theta.unwrap_or(DEFAULT_LOCAL_ROPE_BASE)),
        final_logit_softcap: raw.final_logit_softcap,
        ..raw.base(Arch::Gemma3)
    }
}
