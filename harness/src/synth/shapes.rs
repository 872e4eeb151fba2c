//! The model shapes `memra synth` knows: real models' dimensions (from their Hugging Face
//! `config.json`) and small test shapes, with the config files each format needs.

use super::vocab::{PreTokenizer, Vocab};
use super::SynthDType;
use anyhow::Result;
use memra_engine::formats::gguf::MetaValue;
use memra_engine::formats::gguf_write::GgufBuilder;
use memra_engine::models::Arch;
use serde_json::{json, Value};

/// A model shape: everything about a checkpoint except its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Name on the command line (`--shape`).
    pub name: &'static str,
    pub arch: Arch,
    /// Vocabulary size: tokenizer entries and embedding rows.
    pub vocab: usize,
    pub hidden: usize,
    /// Feed-forward inner width.
    pub intermediate: usize,
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub rms_eps: f64,
    /// RoPE base (global layers for Gemma 3).
    pub rope_theta: f64,
    /// `max_position_embeddings` / `context_length`.
    pub max_context: usize,
    /// Whether the LM head is the embedding matrix (no `lm_head.weight` / `output.weight`).
    pub tied: bool,
    /// Gemma 3: the sliding-window size of the local layers (every sixth layer is global).
    pub sliding_window: Option<usize>,
    /// Gemma 3: the RoPE base of the sliding-window layers.
    pub rope_local_theta: Option<f64>,
    /// Gemma 3: attention scores are scaled by `query_pre_attn_scalar^-1/2`.
    pub query_pre_attn_scalar: Option<usize>,
    /// Where the shape departs from the real model, if anywhere.
    pub note: &'static str,
}

const BASE: Shape = Shape {
    name: "",
    arch: Arch::Llama,
    vocab: 0,
    hidden: 0,
    intermediate: 0,
    layers: 0,
    heads: 0,
    kv_heads: 0,
    head_dim: 0,
    rms_eps: 1e-6,
    rope_theta: 10_000.0,
    max_context: 4096,
    tied: false,
    sliding_window: None,
    rope_local_theta: None,
    query_pre_attn_scalar: None,
    note: "",
};

/// Every known shape. Real ones follow the model's HF `config.json`; `tiny-*` shapes are a few MB,
/// with hidden and intermediate sizes multiples of 256 so K-quants apply to every matrix.
pub const SHAPES: &[Shape] = &[
    Shape {
        name: "llama-3.1-8b",
        arch: Arch::Llama,
        vocab: 128_256,
        hidden: 4096,
        intermediate: 14_336,
        layers: 32,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        rms_eps: 1e-5,
        rope_theta: 500_000.0,
        max_context: 131_072,
        note: "no llama3 rope_scaling (factor 8 from 8192 positions): neither memra nor the \
               written config.json applies it, so positions past 8192 differ from the real model",
        ..BASE
    },
    Shape {
        name: "qwen3-8b",
        arch: Arch::Qwen3,
        vocab: 151_936,
        hidden: 4096,
        intermediate: 12_288,
        layers: 36,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        rope_theta: 1_000_000.0,
        max_context: 40_960,
        ..BASE
    },
    Shape {
        name: "qwen2.5-7b",
        arch: Arch::Qwen2,
        vocab: 152_064,
        hidden: 3584,
        intermediate: 18_944,
        layers: 28,
        heads: 28,
        kv_heads: 4,
        head_dim: 128,
        rope_theta: 1_000_000.0,
        max_context: 32_768,
        ..BASE
    },
    Shape {
        name: "gemma-3-1b",
        arch: Arch::Gemma3,
        vocab: 262_144,
        hidden: 1152,
        intermediate: 6912,
        layers: 26,
        heads: 4,
        kv_heads: 1,
        head_dim: 256,
        rope_theta: 1_000_000.0,
        max_context: 32_768,
        tied: true,
        sliding_window: Some(512),
        rope_local_theta: Some(10_000.0),
        query_pre_attn_scalar: Some(256),
        note: "hidden 1152 is not a multiple of 256: with q4_k/q6_k the matrices whose rows are \
               1152 long fall back to q5_0/q8_0, as llama.cpp's quantizer does",
        ..BASE
    },
    Shape {
        name: "tiny-llama",
        arch: Arch::Llama,
        vocab: 2048,
        hidden: 256,
        intermediate: 768,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        head_dim: 64,
        rms_eps: 1e-5,
        rope_theta: 500_000.0,
        ..BASE
    },
    Shape {
        name: "tiny-qwen2",
        arch: Arch::Qwen2,
        vocab: 2048,
        hidden: 256,
        intermediate: 768,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        head_dim: 64,
        rope_theta: 1_000_000.0,
        ..BASE
    },
    Shape {
        name: "tiny-qwen3",
        arch: Arch::Qwen3,
        vocab: 4096,
        hidden: 256,
        intermediate: 768,
        layers: 3,
        heads: 4,
        kv_heads: 2,
        // Qwen3 sets head_dim explicitly; heads * head_dim != hidden exercises that.
        head_dim: 128,
        rope_theta: 1_000_000.0,
        ..BASE
    },
    Shape {
        name: "tiny-gemma3",
        arch: Arch::Gemma3,
        vocab: 2048,
        hidden: 256,
        intermediate: 512,
        // Six layers: five sliding-window layers and one global one.
        layers: 6,
        heads: 2,
        kv_heads: 1,
        // Gemma 3's head_dim, so query_pre_attn_scalar = head_dim as in the real 1B (readers that
        // take the scalar's default, like HF's GGUF loader, then agree).
        head_dim: 256,
        rope_theta: 1_000_000.0,
        max_context: 8192,
        tied: true,
        sliding_window: Some(32),
        rope_local_theta: Some(10_000.0),
        query_pre_attn_scalar: Some(256),
        ..BASE
    },
];

/// The shape called `name`. Errors: an unknown name, listing the known ones.
pub fn find(name: &str) -> Result<&'static Shape> {
    SHAPES.iter().find(|s| s.name == name).ok_or_else(|| {
        let known: Vec<&str> = SHAPES.iter().map(|s| s.name).collect();
        anyhow::anyhow!(
            "unknown shape {name:?}; known shapes: {} (`memra synth --list` shows their dimensions)",
            known.join(", ")
        )
    })
}

impl Shape {
    /// Parameter count (embedding, layers, norms, LM head unless tied).
    pub fn params(&self) -> u64 {
        let (h, hd) = (self.hidden as u64, self.head_dim as u64);
        let (q, kv) = (self.heads as u64 * hd, self.kv_heads as u64 * hd);
        let mut layer = h * q * 2 + h * kv * 2 + 3 * h * self.intermediate as u64 + 2 * h;
        match self.arch {
            Arch::Qwen2 => layer += q + 2 * kv,
            Arch::Qwen3 => layer += 2 * hd,
            Arch::Gemma3 => layer += 2 * hd + 2 * h,
            Arch::Llama => {}
        }
        let embed = self.vocab as u64 * h;
        embed * if self.tied { 1 } else { 2 } + self.layers as u64 * layer + h
    }

    /// GGUF `general.architecture` and the prefix of its keys.
    pub fn gguf_arch(&self) -> &'static str {
        match self.arch {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// The pre-tokenizer of the family's real tokenizer (Gemma's is SentencePiece, which a
    /// byte-level BPE cannot mimic; it gets GPT-2's).
    pub fn pre_tokenizer(&self) -> PreTokenizer {
        match self.arch {
            Arch::Llama => PreTokenizer::Llama3,
            Arch::Qwen2 | Arch::Qwen3 => PreTokenizer::Qwen2,
            Arch::Gemma3 => PreTokenizer::Gpt2,
        }
    }

    /// HF `model_type`.
    fn model_type(&self) -> &'static str {
        match self.arch {
            Arch::Gemma3 => "gemma3_text",
            _ => self.gguf_arch(),
        }
    }

    /// HF `config.json` for this shape stored in `dtype` (bf16 or f16), with the tokenizer's
    /// special ids.
    pub fn hf_config(&self, dtype: SynthDType, vocab: &Vocab) -> Value {
        let torch_dtype = match dtype {
            SynthDType::F16 => "float16",
            _ => "bfloat16",
        };
        let arch_class = match self.arch {
            Arch::Llama => "LlamaForCausalLM",
            Arch::Qwen2 => "Qwen2ForCausalLM",
            Arch::Qwen3 => "Qwen3ForCausalLM",
            Arch::Gemma3 => "Gemma3ForCausalLM",
        };
        let mut c = json!({
            "architectures": [arch_class],
            "model_type": self.model_type(),
            "vocab_size": self.vocab,
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "rms_norm_eps": self.rms_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": null,
            "max_position_embeddings": self.max_context,
            "tie_word_embeddings": self.tied,
            "attention_dropout": 0.0,
            "initializer_range": 0.02,
            "use_cache": true,
            "bos_token_id": vocab.bos,
            "eos_token_id": vocab.eos,
            "pad_token_id": vocab.pad,
            "torch_dtype": torch_dtype,
        });
        let m = c.as_object_mut().expect("object");
        let mut set = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        match self.arch {
            Arch::Llama => {
                set("hidden_act", json!("silu"));
                set("attention_bias", json!(false));
                set("mlp_bias", json!(false));
                set("pretraining_tp", json!(1));
            }
            Arch::Qwen2 | Arch::Qwen3 => {
                set("hidden_act", json!("silu"));
                set("attention_bias", json!(self.arch == Arch::Qwen2));
                set("use_sliding_window", json!(false));
                set("sliding_window", Value::Null);
                set("max_window_layers", json!(self.layers));
            }
            Arch::Gemma3 => {
                set("hidden_activation", json!("gelu_pytorch_tanh"));
                set("attention_bias", json!(false));
                set("query_pre_attn_scalar", json!(self.query_pre_attn_scalar));
                set("rope_local_base_freq", json!(self.rope_local_theta));
                set("sliding_window", json!(self.sliding_window));
                set(
                    "sliding_window_pattern",
                    json!(memra_engine::models::gemma3::SLIDING_PATTERN),
                );
                set("final_logit_softcapping", Value::Null);
                set("attn_logit_softcapping", Value::Null);
                set("cache_implementation", json!("hybrid"));
            }
        }
        c
    }

    /// The `{arch}.*` and `general.*` GGUF metadata of this shape (the tokenizer's keys come from
    /// [`Vocab::gguf_metadata`]).
    pub fn gguf_metadata(&self, dtype: SynthDType, seed: u64, b: &mut GgufBuilder) -> Result<()> {
        let a = self.gguf_arch();
        let u = |v: usize| MetaValue::U32(v as u32);
        let mut put = |k: String, v: MetaValue| b.metadata(k, v);
        put("general.architecture".into(), MetaValue::String(a.into()))?;
        put(
            "general.name".into(),
            MetaValue::String(format!("{} (random weights)", self.name)),
        )?;
        put(
            "general.description".into(),
            MetaValue::String(format!(
                "memra synth --shape {} --dtype {} --seed {seed}: random weights at the real shape",
                self.name,
                dtype.name()
            )),
        )?;
        put(
            "general.file_type".into(),
            MetaValue::U32(dtype.ggml_ftype()),
        )?;
        if !dtype.is_float() {
            put("general.quantization_version".into(), MetaValue::U32(2))?;
        }
        let k = |s: &str| format!("{a}.{s}");
        put(k("vocab_size"), u(self.vocab))?;
        put(k("context_length"), u(self.max_context))?;
        put(k("embedding_length"), u(self.hidden))?;
        put(k("feed_forward_length"), u(self.intermediate))?;
        put(k("block_count"), u(self.layers))?;
        put(k("attention.head_count"), u(self.heads))?;
        put(k("attention.head_count_kv"), u(self.kv_heads))?;
        put(k("attention.key_length"), u(self.head_dim))?;
        put(k("attention.value_length"), u(self.head_dim))?;
        put(k("rope.dimension_count"), u(self.head_dim))?;
        put(k("rope.freq_base"), MetaValue::F32(self.rope_theta as f32))?;
        put(
            k("attention.layer_norm_rms_epsilon"),
            MetaValue::F32(self.rms_eps as f32),
        )?;
        if let Some(w) = self.sliding_window {
            put(k("attention.sliding_window"), u(w))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_shapes_have_their_published_parameter_counts() {
        // Parameter counts as published (to the reported precision).
        for (name, billions) in [
            ("llama-3.1-8b", 8.03),
            ("qwen3-8b", 8.19),
            ("qwen2.5-7b", 7.62),
            ("gemma-3-1b", 1.00),
        ] {
            let p = find(name).unwrap().params() as f64 / 1e9;
            assert!((p - billions).abs() < 0.01, "{name}: {p:.3}B");
        }
    }

    #[test]
    fn unknown_shape_lists_the_known_ones() {
        let e = find("llama-9").unwrap_err().to_string();
        assert!(
            e.contains("llama-3.1-8b") && e.contains("tiny-gemma3"),
            "{e}"
        );
    }

    #[test]
    fn tiny_shapes_suit_k_quants() {
        for s in SHAPES.iter().filter(|s| s.name.starts_with("tiny-")) {
            for d in [s.hidden, s.intermediate, s.heads * s.head_dim] {
                assert_eq!(d % 256, 0, "{}", s.name);
            }
        }
    }
}
