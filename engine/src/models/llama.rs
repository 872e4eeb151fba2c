//! `llama` family (Llama 2/3, SmolLM2, Mistral): RMSNorm, RoPE, GQA, SwiGLU, no biases.
//! Reference: HF transformers `modeling_llama.py`. In `llama` GGUF files llama.cpp permutes the
//! Q/K rows for adjacent-pair RoPE, which `ModelConfig::from_gguf` answers with
//! [`super::config::RopeStyle::Interleaved`].

use super::config::{Arch, ModelConfig, RawDims};

/// Family rules on top of the shared dimensions.
pub(crate) fn config(raw: &RawDims) -> ModelConfig {
    raw.base(Arch::Llama)
}
