//! `qwen3` family (dense Qwen3): llama plus per-head RMSNorm on Q and K before RoPE, no biases,
//! explicit `head_dim`. Reference: HF transformers `modeling_qwen3.py`.

use super::config::{Arch, ModelConfig, RawDims};

/// Family rules on top of the shared dimensions.
pub(crate) fn config(raw: &RawDims) -> ModelConfig {
    ModelConfig {
        qk_norm: true,
        ..raw.base(Arch::Qwen3)
    }
}
