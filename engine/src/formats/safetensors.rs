//! HF checkpoint directories: `config.json`, `model.safetensors` or a sharded
//! `model.safetensors.index.json`, read through the `safetensors` crate over memory maps.
//! Tensor names are translated to GGUF's naming (`model.layers.3.self_attn.q_proj.weight` →
//! `blk.3.attn_q.weight`), the same table llama.cpp's converter uses.

use super::{TensorRef, TensorSource};
use crate::error::{Error, Result};
use crate::quant::{DType, Storage};
use memmap2::Mmap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An opened HF checkpoint directory.
pub struct SafetensorsDir {
    pub dir: PathBuf,
    tensors: HashMap<String, TensorRef>,
}

/// HF name → GGUF name. `gemma3` has four norms per layer where llama-likes have two, so
/// `post_attention_layernorm` means different things per architecture.
pub fn hf_to_gguf_name(model_type: &str, name: &str) -> Option<String> {
    let simple = match name {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        _ => None,
    };
    if let Some(s) = simple {
        return Some(s.to_string());
    }
    let rest = name.strip_prefix("model.layers.")?;
    let (idx, rest) = rest.split_once('.')?;
    let idx: usize = idx.parse().ok()?;
    let (stem, suffix) = rest.rsplit_once('.')?;
    let gemma = model_type.starts_with("gemma");
    let mapped = match stem {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" if gemma => "post_attention_norm",
        "post_attention_layernorm" => "ffn_norm",
        "pre_feedforward_layernorm" => "ffn_norm",
        "post_feedforward_layernorm" => "post_ffw_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    Some(format!("blk.{idx}.{mapped}.{suffix}"))
}

impl SafetensorsDir {
    /// Opens the weights of `dir` for `model_type` (from its config.json). Errors name the file:
    /// missing weights, a bad header, an unsupported dtype (only F32, F16, BF16), an index that
    /// points at a missing shard.
    pub fn open(dir: impl AsRef<Path>, model_type: &str) -> Result<SafetensorsDir> {
        let dir = dir.as_ref();
        let index = dir.join("model.safetensors.index.json");
        let files: Vec<PathBuf> = if index.exists() {
            let text = std::fs::read_to_string(&index).map_err(|e| Error::io(&index, e))?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| Error::format(&index, format!("invalid JSON: {e}")))?;
            let map = v
                .get("weight_map")
                .and_then(|m| m.as_object())
                .ok_or_else(|| Error::format(&index, "missing object weight_map"))?;
            let mut files: Vec<PathBuf> = Vec::new();
            for f in map.values() {
                let f = f
                    .as_str()
                    .ok_or_else(|| Error::format(&index, "weight_map value is not a string"))?;
                let p = dir.join(f);
                if !files.contains(&p) {
                    files.push(p);
                }
            }
            files
        } else {
            let single = dir.join("model.safetensors");
            if !single.exists() {
                return Err(Error::format(
                    dir,
                    "no model.safetensors or model.safetensors.index.json",
                ));
            }
            vec![single]
        };
        let mut tensors = HashMap::new();
        for file in files {
            let f = std::fs::File::open(&file).map_err(|e| Error::io(&file, e))?;
            // SAFETY: read-only map of a file we do not modify.
            let mmap = Arc::new(unsafe { Mmap::map(&f) }.map_err(|e| Error::io(&file, e))?);
            let (header_len, meta) = safetensors::SafeTensors::read_metadata(&mmap[..])
                .map_err(|e| Error::format(&file, format!("invalid safetensors header: {e}")))?;
            let base = 8 + header_len;
            for (name, info) in meta.tensors() {
                let dtype = match info.dtype {
                    safetensors::Dtype::F32 => DType::F32,
                    safetensors::Dtype::F16 => DType::F16,
                    safetensors::Dtype::BF16 => DType::BF16,
                    other => {
                        return Err(Error::format(
                            &file,
                            format!(
                                "tensor {name}: dtype {other:?} is not supported (F32, F16, BF16)"
                            ),
                        ))
                    }
                };
                let Some(canon) = hf_to_gguf_name(model_type, &name) else {
                    tracing::debug!(tensor = %name, "ignoring tensor with no GGUF counterpart");
                    continue;
                };
                let (s, e) = info.data_offsets;
                if base + e > mmap.len() {
                    return Err(Error::format(
                        &file,
                        format!("tensor {name}: data ends beyond the end of the file; the file is truncated"),
                    ));
                }
                tensors.insert(
                    canon.clone(),
                    TensorRef {
                        name: canon,
                        dtype,
                        shape: info.shape.clone(),
                        data: Storage::Mapped(mmap.clone(), base + s..base + e),
                    },
                );
            }
        }
        Ok(SafetensorsDir {
            dir: dir.to_path_buf(),
            tensors,
        })
    }
}

impl TensorSource for SafetensorsDir {
    fn path(&self) -> &Path {
        &self.dir
    }
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.tensors.keys().cloned().collect();
        v.sort();
        v
    }
    fn get(&self, name: &str) -> Option<TensorRef> {
        self.tensors.get(name).cloned()
    }
}
