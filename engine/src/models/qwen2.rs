//! `qwen2` family (Qwen2, Qwen2.5, Qwen2.5-Coder): llama plus biases on the Q, K and V projections.
//! Reference: HF transformers `modeling_qwen2.py`.

use super::config::{Arch, ModelConfig, RawDims};

/// Family rules on top of the shared dimensions.
pub(crate) fn config(raw: &RawDims) -> ModelConfig {
    ModelConfig {
        qkv_bias: true,
        ..raw.base(Arch::Qwen2)
    }
}
