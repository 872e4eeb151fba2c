//! [`CudaBackend`]: the [`Backend`] forward on an NVIDIA GPU, layer for layer the CPU reference's
//! computation (engine/src/backend/cpu/mod.rs) with the kernels of `kernels/*.cu`. Weights stay in
//! their stored format on the device and are dequantized inside the linear kernels; activations
//! and the paged KV cache are f32. Every kernel reduces each row in an order independent of the
//! rows beside it (DESIGN.md §3, Level A); CUDA against the CPU backend is Level B (a tolerance).

use super::ops::{DevMatrix, KvIndex};
use super::sample::SampleScratch;
use super::{CudaDevice, NO_DRIVER};
use crate::backend::cpu::ops::Rope;
use crate::backend::{Backend, LogitsWanted, Pick, Picked, SeqChunk};
use crate::error::{Error, Result};
use crate::models::{Model, ModelConfig};
use crate::quant::QuantMatrix;
use cudarc::driver::CudaSlice;
use std::sync::Arc;

/// One decoder layer's weights on the device (shapes as [`crate::models::LayerWeights`]).
struct DevLayer {
    attn_norm: CudaSlice<f32>,
    /// Q, K, V (fused when they share a format).
    qkv: Linears,
    wo: DevMatrix,
    q_norm: Option<CudaSlice<f32>>,
    k_norm: Option<CudaSlice<f32>>,
    post_attn_norm: Option<CudaSlice<f32>>,
    ffn_norm: CudaSlice<f32>,
    /// Gate, up (fused when they share a format).
    gate_up: Linears,
    w_down: DevMatrix,
    post_ffn_norm: Option<CudaSlice<f32>>,
}

/// A model's weights uploaded once; several backends (a gate's arms, a server's draft and target
/// on one device) can share them.
pub struct CudaWeights {
    embed: DevMatrix,
    layers: Vec<DevLayer>,
    out_norm: CudaSlice<f32>,
    /// `None` when tied to the embedding.
    lm_head: Option<DevMatrix>,
    inv_freq_global: CudaSlice<f32>,
    inv_freq_local: Option<CudaSlice<f32>>,
    /// Bytes of device memory the weights take.
    pub bytes: usize,
}

/// Linear layers that read the same input: one matrix with their rows concatenated (one launch,
/// more rows to spread over the GPU; each row computed as it would be alone), or separate
/// matrices when their formats or bias presence differ (GGUF mixes, e.g. Q4_K_M's Q6_K V).
enum Linears {
    Fused(DevMatrix),
    Split(Vec<DevMatrix>),
}

impl Linears {
    /// Uploads `ms` (with their biases) fused when they share a format and all or none have a
    /// bias. Errors: as [`DevMatrix::upload_repacked`].
    fn upload(dev: &CudaDevice, ms: &[(&dyn QuantMatrix, Option<&Vec<f32>>)]) -> Result<Linears> {
        let (first, _) = ms[0];
        let fusable = ms.iter().all(|(m, b)| {
            m.dtype() == first.dtype()
                && m.cols() == first.cols()
                && b.is_some() == ms[0].1.is_some()
        });
        if !fusable {
            return ms
                .iter()
                .map(|&(m, b)| mat(dev, m, b))
                .collect::<Result<_>>()
                .map(Linears::Split);
        }
        let raw: Vec<u8> = ms
            .iter()
            .flat_map(|(m, _)| m.raw().iter().copied())
            .collect();
        let bias: Option<Vec<f32>> = ms[0].1.is_some().then(|| {
            ms.iter()
                .flat_map(|(_, b)| b.expect("all have one").iter().copied())
                .collect()
        });
        let rows = ms.iter().map(|(m, _)| m.rows()).sum();
        DevMatrix::upload_repacked(
            dev,
            &raw,
            first.dtype(),
            rows,
            first.cols(),
            bias.as_deref(),
        )
        .map(Linears::Fused)
    }

    /// `ys[i] = x W_iᵀ + b_i` for each of the matrices, in order ([`CudaDevice::linear_split`]).
    fn forward(
        &self,
        dev: &CudaDevice,
        x: &CudaSlice<f32>,
        ys: &mut [&mut CudaSlice<f32>],
        canary: bool,
    ) -> Result<()> {
        match self {
            Linears::Fused(w) => dev.linear_split(x, w, ys, canary),
            Linears::Split(ws) => {
                for (w, y) in ws.iter().zip(ys.iter_mut()) {
                    dev.linear(x, w, y, canary)?;
                }
                Ok(())
            }
        }
    }
}

/// A linear layer's weights, Q8_0 and Q4_K repacked for aligned loads.
fn mat(dev: &CudaDevice, m: &dyn QuantMatrix, bias: Option<&Vec<f32>>) -> Result<DevMatrix> {
    DevMatrix::upload_repacked(
        dev,
        m.raw(),
        m.dtype(),
        m.rows(),
        m.cols(),
        bias.map(|b| b.as_slice()),
    )
}

fn opt(dev: &CudaDevice, v: &Option<Vec<f32>>) -> Result<Option<CudaSlice<f32>>> {
    v.as_ref().map(|v| dev.upload(v)).transpose()
}

impl CudaWeights {
    /// Uploads every weight of `model`. Errors: a matrix whose rows are not whole 32-element
    /// units (the kernels' granularity), or out of device memory (naming the size).
    pub fn upload(dev: &CudaDevice, model: &Model) -> Result<CudaWeights> {
        let c = &model.config;
        let mut layers = Vec::with_capacity(model.layers.len());
        for l in &model.layers {
            layers.push(DevLayer {
                attn_norm: dev.upload(&l.attn_norm)?,
                qkv: Linears::upload(
                    dev,
                    &[
                        (&*l.wq, l.bq.as_ref()),
                        (&*l.wk, l.bk.as_ref()),
                        (&*l.wv, l.bv.as_ref()),
                    ],
                )?,
                wo: mat(dev, &*l.wo, None)?,
                q_norm: opt(dev, &l.q_norm)?,
                k_norm: opt(dev, &l.k_norm)?,
                post_attn_norm: opt(dev, &l.post_attn_norm)?,
                ffn_norm: dev.upload(&l.ffn_norm)?,
                gate_up: Linears::upload(dev, &[(&*l.w_gate, None), (&*l.w_up, None)])?,
                w_down: mat(dev, &*l.w_down, None)?,
                post_ffn_norm: opt(dev, &l.post_ffn_norm)?,
            });
        }
        let tied = Arc::ptr_eq(&model.lm_head, &model.embed);
        let rope = |base: f32| Rope::new(c.head_dim, base, c.rope_style);
        let bytes = model.weight_bytes();
        let e = &model.embed;
        Ok(CudaWeights {
            // Raw layout: the embedding gather reads it (and the LM head when tied).
            embed: DevMatrix::upload(dev, e.raw(), e.dtype(), e.rows(), e.cols(), None)?,
            layers,
            out_norm: dev.upload(&model.out_norm)?,
            lm_head: if tied {
                None
            } else {
                Some(mat(dev, &*model.lm_head, None)?)
            },
            inv_freq_global: dev.upload(rope(c.rope_theta).inv_freq())?,
            inv_freq_local: c
                .rope_local_theta
                .map(|t| dev.upload(rope(t).inv_freq()))
                .transpose()?,
            bytes,
        })
    }

    fn lm_head(&self) -> &DevMatrix {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }
}

/// Bytes of KV cache per token position (all layers, K and V, f32).
pub fn kv_bytes_per_token(c: &ModelConfig) -> usize {
    2 * c.n_layers * c.n_kv_heads * c.head_dim * 4
}

/// The GPU backend: shared weights, a paged f32 KV cache, one stream.
pub struct CudaBackend {
    dev: Arc<CudaDevice>,
    model: Arc<Model>,
    w: Arc<CudaWeights>,
    block_size: usize,
    num_blocks: usize,
    /// Per layer, `[num_blocks * block_size, n_kv_heads, head_dim]` f32.
    k: Vec<CudaSlice<f32>>,
    v: Vec<CudaSlice<f32>>,
    split_canary: bool,
    /// The sampling kernel's scratch, allocated on the first [`Backend::forward_pick`].
    sample_scratch: Option<SampleScratch>,
}

impl CudaBackend {
    /// A backend over weights already uploaded to `dev`, with `num_blocks` KV blocks of
    /// `block_size` positions. Errors: out of device memory for the KV cache (naming the size).
    pub fn new(
        dev: Arc<CudaDevice>,
        model: Arc<Model>,
        w: Arc<CudaWeights>,
        num_blocks: usize,
        block_size: usize,
    ) -> Result<CudaBackend> {
        let c = &model.config;
        let per_layer = num_blocks * block_size * c.n_kv_heads * c.head_dim;
        let mut k = Vec::with_capacity(c.n_layers);
        let mut v = Vec::with_capacity(c.n_layers);
        for _ in 0..c.n_layers {
            k.push(dev.alloc::<f32>(per_layer)?);
            v.push(dev.alloc::<f32>(per_layer)?);
        }
        Ok(CudaBackend {
            dev,
            model,
            w,
            block_size,
            num_blocks,
            k,
            v,
            split_canary: false,
            sample_scratch: None,
        })
    }

    /// The KV blocks that fit in `fraction` of the device's total memory once everything
    /// already allocated on it (call this after uploading the weights; other processes count too)
    /// and `reserve_bytes` of activations are set aside (vLLM's `gpu_memory_utilization`).
    /// Errors when not even 4 blocks fit: out of memory, naming the sizes.
    pub fn blocks_for_memory(
        dev: &CudaDevice,
        config: &ModelConfig,
        block_size: usize,
        fraction: f64,
        reserve_bytes: usize,
    ) -> Result<usize> {
        let (free, total) = dev.context().mem_get_info().map_err(super::drv)?;
        let in_use = total - free;
        let budget = (total as f64 * fraction) as usize;
        let per_block = kv_bytes_per_token(config) * block_size;
        let left = budget.saturating_sub(in_use + reserve_bytes);
        let blocks = left / per_block.max(1);
        if blocks < 4 {
            let mib = |b: usize| b as f64 / 1048576.0;
            return Err(Error::OutOfMemory(format!(
                "no room for a KV cache: {:.0} MiB of the device in use (weights included) and \
                 {:.0} MiB reserved for activations exceed {:.0}% of {:.0} MiB \
                 (gpu_memory_utilization)",
                mib(in_use),
                mib(reserve_bytes),
                fraction * 100.0,
                mib(total)
            )));
        }
        Ok(blocks)
    }

    /// A deliberately broken backend for gate canaries: when a pass holds more than one row,
    /// every linear layer splits its reduction in two halves (split-K chosen by shape).
    pub fn with_shape_dependent_split(mut self) -> Self {
        self.split_canary = true;
        self
    }

    /// The device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

/// Opens CUDA device `ordinal`, or the clear "no CUDA driver found; use --backend cpu" error.
pub fn open_device(ordinal: usize, opts: super::compile::KernelOptions) -> Result<CudaDevice> {
    if !super::driver_present() {
        return Err(Error::Unsupported(NO_DRIVER.into()));
    }
    CudaDevice::open_with(ordinal, opts)
}

/// Host-side index arrays of one step.
struct StepPlan {
    tokens: Vec<u32>,
    pos: Vec<u32>,
    slots: Vec<u32>,
    row_tab: Vec<u32>,
    tables: Vec<u32>,
    wanted: Vec<u32>,
}

impl CudaBackend {
    fn plan(&self, batch: &[SeqChunk<'_>]) -> Result<StepPlan> {
        let c = &self.model.config;
        let bs = self.block_size;
        let mut p = StepPlan {
            tokens: Vec::new(),
            pos: Vec::new(),
            slots: Vec::new(),
            row_tab: Vec::new(),
            tables: Vec::new(),
            wanted: Vec::new(),
        };
        crate::backend::check_batch(batch, bs, self.num_blocks, c.vocab_size)?;
        for ch in batch {
            let off = p.tables.len() as u32;
            p.tables.extend_from_slice(ch.block_table);
            let first_row = p.tokens.len() as u32;
            for (j, &tok) in ch.tokens.iter().enumerate() {
                let pos = ch.start_pos + j;
                p.tokens.push(tok);
                p.pos.push(pos as u32);
                p.slots
                    .push(ch.block_table[pos / bs] * bs as u32 + (pos % bs) as u32);
                p.row_tab.push(off);
            }
            let n = ch.tokens.len() as u32;
            match ch.logits {
                LogitsWanted::None => {}
                LogitsWanted::Last if n > 0 => p.wanted.push(first_row + n - 1),
                LogitsWanted::Last => {}
                LogitsWanted::All => p.wanted.extend(first_row..first_row + n),
            }
        }
        if p.tables.is_empty() {
            p.tables.push(0);
        }
        Ok(p)
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }
    fn block_size(&self) -> usize {
        self.block_size
    }
    fn num_blocks(&self) -> usize {
        self.num_blocks
    }
    fn vocab_size(&self) -> usize {
        self.model.config.vocab_size
    }
    fn n_layers(&self) -> usize {
        self.model.layers.len()
    }
    fn weight_bytes(&self) -> usize {
        self.model.weight_bytes()
    }

    fn copy_block(&mut self, src: u32, dst: u32) {
        let c = &self.model.config;
        let n = self.block_size * c.n_kv_heads * c.head_dim;
        for layer in self.k.iter_mut().chain(self.v.iter_mut()) {
            // A launch failure here means the context is gone; the next forward reports it.
            if let Err(e) = self.dev.kv_copy_block(layer, src, dst, n) {
                tracing::error!("KV block copy {src} -> {dst} failed: {e}");
            }
        }
    }

    fn forward_layers(&mut self, batch: &[SeqChunk<'_>], n_layers: usize) -> Result<Vec<Vec<f32>>> {
        let Some(logits) = self.run(batch, n_layers)? else {
            return Ok(Vec::new());
        };
        let host = self.dev.download(&logits)?;
        let v = self.model.config.vocab_size;
        Ok(host.chunks(v).map(|r| r.to_vec()).collect())
    }

    fn forward_pick(&mut self, batch: &[SeqChunk<'_>], picks: &[Pick<'_>]) -> Result<Vec<Picked>> {
        let logits = self.run(batch, usize::MAX)?;
        if picks.is_empty() {
            return Ok(Vec::new());
        }
        let Some(logits) = logits else {
            return Err(crate::error::Error::InvalidArgument(
                "picks in a step that produced no logits".into(),
            ));
        };
        let v = self.model.config.vocab_size;
        if self.sample_scratch.is_none() {
            self.sample_scratch = Some(SampleScratch::new(&self.dev, v)?);
        }
        let scratch = self.sample_scratch.as_mut().expect("allocated above");
        self.dev.sample_picks(&logits, v, picks, scratch)
    }
}

impl CudaBackend {
    /// The forward pass of [`Backend::forward_layers`], leaving the wanted logits rows on the
    /// device (`[rows, vocab]` f32); `None` when no row is wanted.
    fn run(&mut self, batch: &[SeqChunk<'_>], n_layers: usize) -> Result<Option<CudaSlice<f32>>> {
        let plan = self.plan(batch)?;
        let t = plan.tokens.len();
        if t == 0 {
            return Ok(None);
        }
        let model = self.model.clone();
        let c = &model.config;
        let (h, hd, nh, nkv, inter) = (
            c.hidden_size,
            c.head_dim,
            c.n_heads,
            c.n_kv_heads,
            c.intermediate_size,
        );
        let dev = self.dev.clone();
        let w = self.w.clone();
        let canary = self.split_canary;
        let ids = dev.upload(&plan.tokens)?;
        let idx = KvIndex {
            pos: dev.upload(&plan.pos)?,
            slots: dev.upload(&plan.slots)?,
            row_tab: dev.upload(&plan.row_tab)?,
            tables: dev.upload(&plan.tables)?,
            host_pos: plan.pos.clone(),
        };
        let mut x = dev.alloc::<f32>(t * h)?;
        dev.embed(&w.embed, &ids, &mut x, c.embed_scale)?;
        let mut xn = dev.alloc::<f32>(t * h)?;
        let mut q = dev.alloc::<f32>(t * nh * hd)?;
        let mut q2 = dev.alloc::<f32>(t * nh * hd)?;
        let mut k = dev.alloc::<f32>(t * nkv * hd)?;
        let mut k2 = dev.alloc::<f32>(t * nkv * hd)?;
        let mut v = dev.alloc::<f32>(t * nkv * hd)?;
        let mut attn = dev.alloc::<f32>(t * nh * hd)?;
        let mut o = dev.alloc::<f32>(t * h)?;
        let mut o2 = dev.alloc::<f32>(t * h)?;
        let mut gate = dev.alloc::<f32>(t * inter)?;
        let mut up = dev.alloc::<f32>(t * inter)?;
        let mut act = dev.alloc::<f32>(t * inter)?;
        let mut d = dev.alloc::<f32>(t * h)?;
        let n_run = n_layers.min(w.layers.len());
        for (li, l) in w.layers.iter().enumerate().take(n_run) {
            // x += d (the previous layer's FFN output); xn = norm(x).
            if li == 0 {
                dev.rms_norm_residual(&x, None, &l.attn_norm, &mut xn, t, c.rms_eps)?;
            } else {
                dev.rms_norm_residual(&d, Some(&mut x), &l.attn_norm, &mut xn, t, c.rms_eps)?;
            }
            l.qkv
                .forward(&dev, &xn, &mut [&mut q, &mut k, &mut v], canary)?;
            if let Some(g) = &l.q_norm {
                dev.rms_norm_residual(&q, None, g, &mut q2, t * nh, c.rms_eps)?;
                std::mem::swap(&mut q, &mut q2);
            }
            if let Some(g) = &l.k_norm {
                dev.rms_norm_residual(&k, None, g, &mut k2, t * nkv, c.rms_eps)?;
                std::mem::swap(&mut k, &mut k2);
            }
            let window = c.layer_window[li];
            let inv_freq = match (window, &w.inv_freq_local) {
                (Some(_), Some(local)) => local,
                _ => &w.inv_freq_global,
            };
            dev.rope(&mut q, &idx.pos, inv_freq, nh, c.rope_style)?;
            dev.rope(&mut k, &idx.pos, inv_freq, nkv, c.rope_style)?;
            dev.kv_append(
                &k,
                &v,
                &mut self.k[li],
                &mut self.v[li],
                &idx.slots,
                nkv * hd,
            )?;
            dev.attention(
                &q,
                &self.k[li],
                &self.v[li],
                &mut attn,
                &idx,
                (nh, nkv, hd),
                self.block_size,
                window,
                c.attn_scale,
                None,
            )?;
            dev.linear(&attn, &l.wo, &mut o, canary)?;
            if let Some(g) = &l.post_attn_norm {
                dev.rms_norm_residual(&o, None, g, &mut o2, t, c.rms_eps)?;
                std::mem::swap(&mut o, &mut o2);
            }
            // x += o; xn = norm(x).
            dev.rms_norm_residual(&o, Some(&mut x), &l.ffn_norm, &mut xn, t, c.rms_eps)?;
            l.gate_up
                .forward(&dev, &xn, &mut [&mut gate, &mut up], canary)?;
            dev.gated_act(&gate, &up, &mut act, c.activation)?;
            dev.linear(&act, &l.w_down, &mut d, canary)?;
            if let Some(g) = &l.post_ffn_norm {
                dev.rms_norm_residual(&d, None, g, &mut o2, t, c.rms_eps)?;
                std::mem::swap(&mut d, &mut o2);
            }
        }
        if n_run > 0 {
            dev.add_assign(&mut x, &d)?;
        }
        if plan.wanted.is_empty() {
            return Ok(None);
        }
        let nw = plan.wanted.len();
        let rows = dev.upload(&plan.wanted)?;
        let mut sel = dev.alloc::<f32>(nw * h)?;
        dev.gather_rows(&x, &rows, &mut sel, h)?;
        let mut seln = dev.alloc::<f32>(nw * h)?;
        dev.rms_norm_residual(&sel, None, &w.out_norm, &mut seln, nw, c.rms_eps)?;
        let mut logits = dev.alloc::<f32>(nw * c.vocab_size)?;
        dev.linear(&seln, w.lm_head(), &mut logits, canary)?;
        if let Some(cap) = c.final_logit_softcap {
            dev.softcap(&mut logits, cap)?;
        }
        Ok(Some(logits))
    }
}
