//! One model configuration for every family, filled from GGUF metadata or an HF `config.json`.
//! Family files (`llama.rs`, `qwen2.rs`, `qwen3.rs`, `gemma3.rs`) decide the architecture-specific
//! fields; this module holds the shared struct and the readers.

use crate::error::{Error, Result};
use crate::formats::gguf::GgufFile;
use serde::Deserialize;
use std::path::Path;

/// Supported architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
}

impl Arch {
    /// From GGUF `general.architecture` or HF `model_type`.
    pub fn parse(s: &str) -> Option<Arch> {
        Some(match s {
            "llama" | "mistral" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" | "gemma3_text" => Arch::Gemma3,
            _ => return None,
        })
    }
}

/// How RoPE pairs dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)`: llama.cpp's layout for `llama` GGUF files, whose Q/K rows are
    /// permuted from HF's.
    Interleaved,
    /// Halves `(i, i + d/2)`: HF's `rotate_half`, and GGUF `qwen2`/`qwen3`/`gemma3`.
    Neox,
}

/// Feed-forward activation (gated: `act(gate) * up`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SiLU (SwiGLU).
    Silu,
    /// GELU with the tanh approximation (GeGLU, Gemma).
    GeluTanh,
}

/// Everything the forward pass needs to know about a model's shape.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub arch: Arch,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub rms_eps: f32,
    /// Global-attention RoPE base.
    pub rope_theta: f32,
    /// RoPE base of sliding-window layers (Gemma 3), when different.
    pub rope_local_theta: Option<f32>,
    pub rope_style: RopeStyle,
    pub max_context: usize,
    /// Per layer: `Some(window)` for sliding-window layers (a query at position p sees keys
    /// p-window+1 ..= p), `None` for global attention.
    pub layer_window: Vec<Option<usize>>,
    /// Multiply embeddings by this (Gemma: sqrt(hidden_size)).
    pub embed_scale: Option<f32>,
    /// Score scale: 1/sqrt(head_dim), or Gemma's `query_pre_attn_scalar^-1/2`.
    pub attn_scale: f32,
    pub qkv_bias: bool,
    pub qk_norm: bool,
    /// Gemma's extra norms after attention and after the FFN.
    pub sandwich_norms: bool,
    pub activation: Activation,
    /// Added to every RMSNorm weight at load (HF Gemma stores `w`, computes `1 + w`; GGUF stores
    /// `1 + w`).
    pub norm_offset: f32,
    pub final_logit_softcap: Option<f32>,
}

fn meta_u(g: &GgufFile, key: &str) -> Result<usize> {
    g.get(key)
        .and_then(|v| v.as_u64())
        .map(|v| v as usize)
        .ok_or_else(|| Error::format(&g.path, format!("missing or non-integer metadata {key}")))
}
fn meta_f(g: &GgufFile, key: &str) -> Option<f32> {
    g.get(key).and_then(|v| v.as_f64()).map(|v| v as f32)
}

impl ModelConfig {
    /// From GGUF metadata (`{arch}.embedding_length` etc.).
    pub fn from_gguf(g: &GgufFile) -> Result<ModelConfig> {
        let name = g.architecture()?;
        let arch = Arch::parse(name).ok_or_else(|| {
            Error::format(
                &g.path,
                format!("architecture {name:?} is not supported (llama, qwen2, qwen3, gemma3)"),
            )
        })?;
        let k = |s: &str| format!("{name}.{s}");
        let hidden = meta_u(g, &k("embedding_length"))?;
        let n_heads = meta_u(g, &k("attention.head_count"))?;
        let n_kv = meta_u(g, &k("attention.head_count_kv")).unwrap_or(n_heads);
        let head_dim = meta_u(g, &k("attention.key_length")).unwrap_or(hidden / n_heads.max(1));
        let n_layers = meta_u(g, &k("block_count"))?;
        let vocab = match meta_u(g, &k("vocab_size")) {
            Ok(v) => v,
            Err(_) => g
                .get("tokenizer.ggml.tokens")
                .and_then(|v| v.as_array())
                .map(|a| a.len())
                .ok_or_else(|| Error::format(&g.path, "missing tokenizer.ggml.tokens"))?,
        };
        let raw = RawDims {
            hidden,
            intermediate: meta_u(g, &k("feed_forward_length"))?,
            n_layers,
            n_heads,
            n_kv,
            head_dim,
            vocab,
            rms_eps: meta_f(g, &k("attention.layer_norm_rms_epsilon")).unwrap_or(1e-6),
            rope_theta: meta_f(g, &k("rope.freq_base")).unwrap_or(10000.0),
            max_context: meta_u(g, &k("context_length")).unwrap_or(4096),
            sliding_window: meta_u(g, &k("attention.sliding_window")).ok(),
            query_pre_attn_scalar: None,
            final_logit_softcap: meta_f(g, &k("final_logit_softcapping")),
            rope_local_theta: None,
        };
        let mut cfg = family_config(arch, &raw);
        if arch == Arch::Llama {
            cfg.rope_style = RopeStyle::Interleaved;
        }
        cfg.validate(&g.path)?;
        Ok(cfg)
    }

    /// From an HF `config.json`.
    pub fn from_hf_config(path: &Path) -> Result<ModelConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let c: HfConfig = serde_json::from_str(&text)
            .map_err(|e| Error::format(path, format!("invalid config.json: {e}")))?;
        let arch = Arch::parse(&c.model_type).ok_or_else(|| {
            Error::format(
                path,
                format!(
                    "model_type {:?} is not supported (llama, qwen2, qwen3, gemma3)",
                    c.model_type
                ),
            )
        })?;
        let n_kv = c.num_key_value_heads.unwrap_or(c.num_attention_heads);
        let raw = RawDims {
            hidden: c.hidden_size,
            intermediate: c.intermediate_size,
            n_layers: c.num_hidden_layers,
            n_heads: c.num_attention_heads,
            n_kv,
            head_dim: c
                .head_dim
                .unwrap_or(c.hidden_size / c.num_attention_heads.max(1)),
            vocab: c.vocab_size,
            rms_eps: c.rms_norm_eps.unwrap_or(1e-6),
            rope_theta: c.rope_theta.unwrap_or(10000.0),
            max_context: c.max_position_embeddings.unwrap_or(4096),
            sliding_window: c.sliding_window,
            query_pre_attn_scalar: c.query_pre_attn_scalar,
            final_logit_softcap: c.final_logit_softcapping,
            rope_local_theta: c.rope_local_base_freq,
        };
        let mut cfg = family_config(arch, &raw);
        if arch == Arch::Gemma3 {
            cfg.norm_offset = 1.0;
        }
        cfg.validate(path)?;
        Ok(cfg)
    }

    fn validate(&self, path: &Path) -> Result<()> {
        let bad = |m: String| Err(Error::format(path, m));
        if self.hidden_size == 0 || self.n_layers == 0 || self.n_heads == 0 || self.vocab_size == 0
        {
            return bad("zero-sized dimension in model config".into());
        }
        if self.n_kv_heads == 0 || !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return bad(format!(
                "head count {} is not a multiple of KV head count {}",
                self.n_heads, self.n_kv_heads
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return bad(format!("head_dim {} is odd", self.head_dim));
        }
        Ok(())
    }
}

/// Dimensions as read from either source, before family rules apply.
pub(crate) struct RawDims {
    pub hidden: usize,
    pub intermediate: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub rms_eps: f32,
    pub rope_theta: f32,
    pub max_context: usize,
    pub sliding_window: Option<usize>,
    pub query_pre_attn_scalar: Option<f32>,
    pub final_logit_softcap: Option<f32>,
    pub rope_local_theta: Option<f32>,
}

impl RawDims {
    /// The llama-like baseline every family starts from.
    pub(crate) fn base(&self, arch: Arch) -> ModelConfig {
        ModelConfig {
            arch,
            vocab_size: self.vocab,
            hidden_size: self.hidden,
            intermediate_size: self.intermediate,
            n_layers: self.n_layers,
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv,
            head_dim: self.head_dim,
            rms_eps: self.rms_eps,
            rope_theta: self.rope_theta,
            rope_local_theta: None,
            rope_style: RopeStyle::Neox,
            max_context: self.max_context,
            layer_window: vec![None; self.n_layers],
            embed_scale: None,
            attn_scale: 1.0 / (self.head_dim as f32).sqrt(),
            qkv_bias: false,
            qk_norm: false,
            sandwich_norms: false,
            activation: Activation::Silu,
            norm_offset: 0.0,
            final_logit_softcap: None,
        }
    }
}

fn family_config(arch: Arch, raw: &RawDims) -> ModelConfig {
    match arch {
        Arch::Llama => super::llama::config(raw),
        Arch::Qwen2 => super::qwen2::config(raw),
        Arch::Qwen3 => super::qwen3::config(raw),
        Arch::Gemma3 => super::gemma3::config(raw),
    }
}

#[derive(Deserialize)]
struct HfConfig {
    model_type: String,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    vocab_size: usize,
    rms_norm_eps: Option<f32>,
    rope_theta: Option<f32>,
    max_position_embeddings: Option<usize>,
    sliding_window: Option<usize>,
    query_pre_attn_scalar: Option<f32>,
    final_logit_softcapping: Option<f32>,
    rope_local_base_freq: Option<f32>,
}
