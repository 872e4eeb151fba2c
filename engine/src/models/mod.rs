//! Models: a configuration plus weights, loaded from any [`TensorSource`]. The forward pass lives
//! in the backends; the families differ only in configuration (see each family file) and in which
//! tensors exist.

pub mod config;
pub mod gemma3;
pub mod llama;
pub mod qwen2;
pub mod qwen3;

use crate::error::{Error, Result};
use crate::formats::{require, TensorRef, TensorSource};
use crate::quant::{dequantize_row, quant_matrix, QuantMatrix};
pub use config::{Activation, Arch, ModelConfig, RopeStyle};
use std::sync::Arc;

/// Weights of one decoder layer. Matrices are `[out_features, in_features]`.
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    /// `[n_heads * head_dim, hidden]`.
    pub wq: Arc<dyn QuantMatrix>,
    /// `[n_kv_heads * head_dim, hidden]`.
    pub wk: Arc<dyn QuantMatrix>,
    pub wv: Arc<dyn QuantMatrix>,
    /// `[hidden, n_heads * head_dim]`.
    pub wo: Arc<dyn QuantMatrix>,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    /// `[head_dim]` each.
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    /// `[intermediate, hidden]`.
    pub w_gate: Arc<dyn QuantMatrix>,
    pub w_up: Arc<dyn QuantMatrix>,
    /// `[hidden, intermediate]`.
    pub w_down: Arc<dyn QuantMatrix>,
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// A loaded model: configuration and weights (still memory-mapped where the format allows).
pub struct Model {
    pub config: ModelConfig,
    /// `[vocab, hidden]`.
    pub embed: Arc<dyn QuantMatrix>,
    pub layers: Vec<LayerWeights>,
    pub out_norm: Vec<f32>,
    /// `[vocab, hidden]`; the embedding matrix when tied.
    pub lm_head: Arc<dyn QuantMatrix>,
}

fn vector(src: &dyn TensorSource, t: &TensorRef, len: usize, offset: f32) -> Result<Vec<f32>> {
    if t.numel() != len || t.dtype.bytes_for(len) != Some(t.data.bytes().len()) {
        return Err(Error::format(
            src.path(),
            format!(
                "tensor {}: expected {len} elements, found shape {:?}",
                t.name, t.shape
            ),
        ));
    }
    let mut v = vec![0f32; len];
    dequantize_row(t.dtype, t.data.bytes(), &mut v);
    if offset != 0.0 {
        v.iter_mut().for_each(|x| *x += offset);
    }
    Ok(v)
}

struct Loader<'a> {
    src: &'a dyn TensorSource,
    cfg: &'a ModelConfig,
}

impl Loader<'_> {
    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Arc<dyn QuantMatrix>> {
        let t = require(self.src, name)?;
        if t.shape != [rows, cols] {
            return Err(Error::format(
                self.src.path(),
                format!(
                    "tensor {name}: expected shape [{rows}, {cols}], found {:?}",
                    t.shape
                ),
            ));
        }
        quant_matrix(t.dtype, rows, cols, t.data)
            .map_err(|m| Error::format(self.src.path(), format!("tensor {name}: {m}")))
    }
    fn norm(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        vector(
            self.src,
            &require(self.src, name)?,
            len,
            self.cfg.norm_offset,
        )
    }
    fn opt_norm(&self, name: &str, len: usize, want: bool) -> Result<Option<Vec<f32>>> {
        if want {
            self.norm(name, len).map(Some)
        } else {
            Ok(None)
        }
    }
    fn bias(&self, name: &str, len: usize) -> Result<Option<Vec<f32>>> {
        if !self.cfg.qkv_bias {
            return Ok(None);
        }
        vector(self.src, &require(self.src, name)?, len, 0.0).map(Some)
    }
}

impl Model {
    /// Bytes of the weights in their stored format (matrices as stored, vectors as f32): what
    /// one decode step reads, and what a backend holds.
    pub fn weight_bytes(&self) -> usize {
        let model = self;
        let m = |q: &Arc<dyn QuantMatrix>| q.raw().len();
        let v = |x: &Option<Vec<f32>>| x.as_ref().map_or(0, |x| 4 * x.len());
        let mut n = m(&model.embed) + 4 * model.out_norm.len();
        if !Arc::ptr_eq(&model.lm_head, &model.embed) {
            n += m(&model.lm_head);
        }
        for l in &model.layers {
            n += [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
                .iter()
                .map(|q| m(q))
                .sum::<usize>();
            n += 4 * (l.attn_norm.len() + l.ffn_norm.len());
            n += [
                &l.bq,
                &l.bk,
                &l.bv,
                &l.q_norm,
                &l.k_norm,
                &l.post_attn_norm,
                &l.post_ffn_norm,
            ]
            .iter()
            .map(|x| v(x))
            .sum::<usize>();
        }
        n
    }

    /// Loads every weight the configuration calls for. Errors name the source and the tensor:
    /// missing, wrong shape, or a row length that is not a whole number of quant blocks.
    pub fn load(mut config: ModelConfig, src: &dyn TensorSource) -> Result<Model> {
        // The embedding's row count is the vocabulary the logits cover (it may exceed the
        // tokenizer's count when a checkpoint pads it).
        let embd = require(src, "token_embd.weight")?;
        if embd.shape.len() == 2 {
            config.vocab_size = embd.shape[0];
        }
        let c = &config;
        let l = Loader { src, cfg: c };
        let (h, hd) = (c.hidden_size, c.head_dim);
        let embed = l.matrix("token_embd.weight", c.vocab_size, h)?;
        let lm_head = if src.get("output.weight").is_some() {
            l.matrix("output.weight", c.vocab_size, h)?
        } else {
            embed.clone()
        };
        let mut layers = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}");
            layers.push(LayerWeights {
                attn_norm: l.norm(&n("attn_norm.weight"), h)?,
                wq: l.matrix(&n("attn_q.weight"), c.n_heads * hd, h)?,
                wk: l.matrix(&n("attn_k.weight"), c.n_kv_heads * hd, h)?,
                wv: l.matrix(&n("attn_v.weight"), c.n_kv_heads * hd, h)?,
                wo: l.matrix(&n("attn_output.weight"), h, c.n_heads * hd)?,
                bq: l.bias(&n("attn_q.bias"), c.n_heads * hd)?,
                bk: l.bias(&n("attn_k.bias"), c.n_kv_heads * hd)?,
                bv: l.bias(&n("attn_v.bias"), c.n_kv_heads * hd)?,
                q_norm: l.opt_norm(&n("attn_q_norm.weight"), hd, c.qk_norm)?,
                k_norm: l.opt_norm(&n("attn_k_norm.weight"), hd, c.qk_norm)?,
                post_attn_norm: l.opt_norm(
                    &n("post_attention_norm.weight"),
                    h,
                    c.sandwich_norms,
                )?,
                ffn_norm: l.norm(&n("ffn_norm.weight"), h)?,
                w_gate: l.matrix(&n("ffn_gate.weight"), c.intermediate_size, h)?,
                w_up: l.matrix(&n("ffn_up.weight"), c.intermediate_size, h)?,
                w_down: l.matrix(&n("ffn_down.weight"), h, c.intermediate_size)?,
                post_ffn_norm: l.opt_norm(&n("post_ffw_norm.weight"), h, c.sandwich_norms)?,
            });
        }
        let out_norm = l.norm("output_norm.weight", h)?;
        Ok(Model {
            config,
            embed,
            layers,
            out_norm,
            lm_head,
        })
    }
}
