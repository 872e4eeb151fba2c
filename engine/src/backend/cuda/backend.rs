//! [`CudaBackend`]: the [`Backend`] forward on an NVIDIA GPU, layer for layer the CPU reference's
//! computation (engine/src/backend/cpu/mod.rs) with the kernels of `kernels/*.cu`. Weights stay in
//! their stored format on the device and are dequantized inside the linear kernels; activations
//! and the paged KV cache are f32. Every kernel reduces each row in an order independent of the
//! rows beside it (DESIGN.md §3, Level A); CUDA against the CPU backend is Level B (a tolerance).

use super::graph::{Graphs, OwnedGraph, StepBuffers, StepPlan};
use super::linear_tc::RopeAppend;
use super::ops::{AttnPath, DevMatrix};
use super::sample::SampleScratch;
use super::{CudaDevice, NO_DRIVER};
use crate::backend::cpu::ops::Rope;
use crate::backend::{Backend, LogitsWanted, Pick, Picked, SeqChunk};
use crate::error::{Error, Result};
use crate::models::{Activation, Model, ModelConfig};
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
    /// Bytes of the weights as stored ([`Model::weight_bytes`]; the repacked layouts keep the
    /// size), the figure draft-cost estimates divide.
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

impl Linears {
    /// Gate and up projections then `act = activation(gate) * up`
    /// ([`CudaDevice::linear_gated`] for a fused gate|up matrix).
    #[allow(clippy::too_many_arguments)]
    fn forward_gated(
        &self,
        dev: &CudaDevice,
        x: &CudaSlice<f32>,
        gate: &mut CudaSlice<f32>,
        up: &mut CudaSlice<f32>,
        act: &mut CudaSlice<f32>,
        activation: Activation,
        canary: bool,
    ) -> Result<()> {
        match self {
            Linears::Fused(w) => {
                let fuse = dev.define("TCS_GLU", 0) == 1;
                dev.linear_gated(x, w, gate, up, act, activation, canary, fuse)?;
                Ok(())
            }
            Linears::Split(_) => {
                self.forward(dev, x, &mut [&mut *gate, &mut *up], canary)?;
                dev.gated_act(gate, up, act, activation)
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

/// Bytes of KV cache per token position (all layers, K and V) at `value_bytes` a value (4 for
/// f32, 2 with `KV_F16 = 1`; see [`CudaDevice::kv_value_bytes`]).
pub fn kv_bytes_per_token(c: &ModelConfig, value_bytes: usize) -> usize {
    2 * c.n_layers * c.n_kv_heads * c.head_dim * value_bytes
}

/// The GPU backend: shared weights, a paged KV cache (f32, or f16 with `KV_F16 = 1`), one stream.
pub struct CudaBackend {
    dev: Arc<CudaDevice>,
    model: Arc<Model>,
    w: Arc<CudaWeights>,
    block_size: usize,
    num_blocks: usize,
    /// Per layer, `[num_blocks * block_size, n_kv_heads, head_dim]` f32, or that many f16
    /// values packed two to a float with `KV_F16 = 1` (kernels/common.cuh `kv_t`).
    k: Vec<CudaSlice<f32>>,
    v: Vec<CudaSlice<f32>>,
    split_canary: bool,
    /// The sampling kernel's scratch, allocated on the first [`Backend::forward_pick`].
    sample_scratch: Option<SampleScratch>,
    /// Decode-step CUDA graphs and their buffers ([`super::graph`]).
    graphs: Graphs,
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
        // f32 words per layer (head_dim is even, so f16 values pair up exactly).
        let per_layer =
            num_blocks * block_size * c.n_kv_heads * c.head_dim * dev.kv_value_bytes() / 4;
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
            graphs: Graphs::new(0),
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
        let per_block = kv_bytes_per_token(config, dev.kv_value_bytes()) * block_size;
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

    /// Captures decode steps of up to `max_batch` rows into CUDA graphs and replays them (0 = never;
    /// the default). Logits are bit-identical either way.
    pub fn with_graphs(mut self, max_batch: usize) -> Self {
        let (bucket, stale) = (self.graphs.bucket, self.graphs.stale_canary);
        self.graphs = Graphs::new(max_batch);
        self.graphs.bucket = bucket;
        self.graphs.stale_canary = stale;
        self
    }

    /// Pads graphed steps to batch-size buckets of width `bucket` ([`super::graph::bucket_rows`];
    /// 1, the default, graphs every row count on its own). Logits are bit-identical either way.
    pub fn with_graph_bucket(mut self, bucket: usize) -> Self {
        self.graphs.bucket = bucket.max(1);
        self
    }

    /// A deliberately broken backend for gate canaries: graphed steps replay without refilling
    /// their inputs (the previous step's tokens and positions).
    pub fn with_stale_graph_inputs(mut self) -> Self {
        self.graphs.stale_canary = true;
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
        self.w.bytes
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
        let Some(out) = self.run(batch, n_layers)? else {
            return Ok(Vec::new());
        };
        let host = self.dev.download(out.logits(&self.graphs))?;
        let v = self.model.config.vocab_size;
        Ok(host
            .chunks(v)
            .take(out.rows())
            .map(|r| r.to_vec())
            .collect())
    }

    fn forward_pick(&mut self, batch: &[SeqChunk<'_>], picks: &[Pick<'_>]) -> Result<Vec<Picked>> {
        let logits = self.run(batch, usize::MAX)?;
        if picks.is_empty() {
            return Ok(Vec::new());
        }
        let Some(out) = logits else {
            return Err(crate::error::Error::InvalidArgument(
                "picks in a step that produced no logits".into(),
            ));
        };
        let v = self.model.config.vocab_size;
        if self.sample_scratch.is_none() {
            self.sample_scratch = Some(SampleScratch::new(&self.dev, v)?);
        }
        let scratch = self.sample_scratch.as_mut().expect("allocated above");
        self.dev
            .sample_picks(out.logits(&self.graphs), v, out.rows(), picks, scratch)
    }
}

/// The kernels of one forward step over `b`'s buffers (filled by [`StepBuffers::fill`]):
/// embedding, `n_layers` decoder layers, and for the wanted rows the final norm and LM head into
/// `b`'s logits. `attn_nz`: run attention on `b.part` with a grid of that many KV splits per row
/// (graphed steps), else as [`AttnPath::Auto`] chooses. Queues launches only (no allocation
/// besides `Auto` attention partials, no host sync), so it can be captured into a CUDA graph.
#[allow(clippy::too_many_arguments)]
fn encode(
    dev: &CudaDevice,
    c: &ModelConfig,
    w: &CudaWeights,
    kv: (&mut [CudaSlice<f32>], &mut [CudaSlice<f32>]),
    block_size: usize,
    canary: bool,
    b: &mut StepBuffers,
    n_layers: usize,
    attn_nz: Option<usize>,
) -> Result<()> {
    let (kc, vc) = kv;
    let (t, nh, nkv, hd) = (b.t, c.n_heads, c.n_kv_heads, c.head_dim);
    let StepBuffers {
        ids,
        idx,
        x,
        xn,
        q,
        q2,
        k,
        k2,
        v,
        attn,
        o,
        o2,
        gate,
        up,
        act,
        d,
        head,
        part,
        ..
    } = b;
    let (mut q, mut q2, mut k, mut k2, mut o, mut o2, mut d) = (q, q2, k, k2, o, o2, d);
    dev.embed(&w.embed, ids, x, c.embed_scale)?;
    let n_run = n_layers.min(w.layers.len());
    for (li, l) in w.layers.iter().enumerate().take(n_run) {
        // x += d (the previous layer's FFN output); xn = norm(x).
        if li == 0 {
            dev.rms_norm_residual(x, None, &l.attn_norm, xn, t, c.rms_eps)?;
        } else {
            dev.rms_norm_residual(d, Some(&mut *x), &l.attn_norm, xn, t, c.rms_eps)?;
        }
        let window = c.layer_window[li];
        let inv_freq = match (window, &w.inv_freq_local) {
            (Some(_), Some(local)) => local,
            _ => &w.inv_freq_global,
        };
        let ra = RopeAppend {
            kc: &mut kc[li],
            vc: &mut vc[li],
            idx,
            inv_freq,
            heads: (nh, nkv),
            style: c.rope_style,
        };
        match (&l.qkv, &l.q_norm, &l.k_norm) {
            // No q/k norm between: the projection, RoPE and the append in one call (with
            // TCS_ROPE = 1 a split-K reduce does the last two; same bits either way).
            (Linears::Fused(wqkv), None, None) => {
                let fuse = dev.define("TCS_ROPE", 0) == 1;
                dev.linear_qkv_rope(xn, wqkv, [&mut *q, &mut *k, &mut *v], ra, canary, fuse)?;
            }
            _ => {
                l.qkv.forward(dev, xn, &mut [q, k, v], canary)?;
                if let Some(g) = &l.q_norm {
                    dev.rms_norm_residual(q, None, g, q2, t * nh, c.rms_eps)?;
                    std::mem::swap(&mut q, &mut q2);
                }
                if let Some(g) = &l.k_norm {
                    dev.rms_norm_residual(k, None, g, k2, t * nkv, c.rms_eps)?;
                    std::mem::swap(&mut k, &mut k2);
                }
                dev.rope_qk_append(q, k, v, ra.kc, ra.vc, idx, inv_freq, ra.heads, ra.style)?;
            }
        }
        // A graphed step whose rows all have one KV split walks it in one kernel (a fixed grid
        // either way; same bits); more splits take the workspace on a fixed split grid.
        let path = match (attn_nz, part.as_mut()) {
            (Some(1), _) => AttnPath::Walk,
            (Some(nz), Some(part)) => AttnPath::Workspace { part, nz },
            _ => AttnPath::Auto,
        };
        dev.attention(
            q,
            &kc[li],
            &vc[li],
            attn,
            idx,
            (nh, nkv, hd),
            block_size,
            window,
            c.attn_scale,
            path,
        )?;
        dev.linear(attn, &l.wo, o, canary)?;
        if let Some(g) = &l.post_attn_norm {
            dev.rms_norm_residual(o, None, g, o2, t, c.rms_eps)?;
            std::mem::swap(&mut o, &mut o2);
        }
        // x += o; xn = norm(x).
        dev.rms_norm_residual(o, Some(&mut *x), &l.ffn_norm, xn, t, c.rms_eps)?;
        l.gate_up
            .forward_gated(dev, xn, gate, up, act, c.activation, canary)?;
        dev.linear(act, &l.w_down, d, canary)?;
        if let Some(g) = &l.post_ffn_norm {
            dev.rms_norm_residual(d, None, g, o2, t, c.rms_eps)?;
            std::mem::swap(&mut d, &mut o2);
        }
    }
    if n_run > 0 {
        dev.add_assign(x, d)?;
    }
    if let Some(hb) = head {
        dev.gather_rows(x, &hb.rows, &mut hb.sel, c.hidden_size)?;
        let nw = hb.rows.len();
        dev.rms_norm_residual(&hb.sel, None, &w.out_norm, &mut hb.seln, nw, c.rms_eps)?;
        dev.linear(&hb.seln, w.lm_head(), &mut hb.logits, canary)?;
        if let Some(cap) = c.final_logit_softcap {
            dev.softcap(&mut hb.logits, cap)?;
        }
    }
    Ok(())
}

/// A stream capture in progress: ended by [`CaptureGuard::end`], or on drop (a panic inside the
/// captured code) so the stream never stays in capture mode.
struct CaptureGuard<'a>(&'a Arc<cudarc::driver::CudaStream>);

impl CaptureGuard<'_> {
    /// Ends the capture and instantiates its graph.
    fn end(
        self,
    ) -> std::result::Result<Option<cudarc::driver::CudaGraph>, cudarc::driver::DriverError> {
        let s = self.0;
        std::mem::forget(self);
        s.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
    }
}

impl Drop for CaptureGuard<'_> {
    fn drop(&mut self) {
        // The graph (if any) is discarded; the error, if any, was the capture's own.
        let _ = self
            .0
            .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
    }
}

/// Where a step's logits are: its own buffers (ungraphed) or the graph buffers of `rows` rows,
/// of which the first `real` are the step's (the rest pad it to its bucket).
enum StepOut {
    Owned(Box<StepBuffers>),
    Graphed { rows: usize, real: usize },
}

impl StepOut {
    /// The logits `[nw, vocab]` f32 of a step [`CudaBackend::run`] returned (`graphs`: the
    /// backend's, which hold a graphed step's buffers).
    fn logits<'a>(&'a self, graphs: &'a Graphs) -> &'a CudaSlice<f32> {
        match self {
            StepOut::Owned(b) => b.logits(),
            StepOut::Graphed { rows, .. } => graphs.entries.get(rows).and_then(|e| e.bufs.logits()),
        }
        .expect("a step with wanted rows has logits")
    }

    /// The step's own logits rows (padding rows excluded).
    fn rows(&self) -> usize {
        match self {
            StepOut::Owned(b) => b.nw,
            StepOut::Graphed { real, .. } => *real,
        }
    }
}

impl CudaBackend {
    /// The forward pass of [`Backend::forward_layers`], leaving the wanted logits rows on the
    /// device (`[rows, vocab]` f32, read with [`CudaBackend::logits`]); `None` when no row is
    /// wanted. Steps of at most `cuda_graph_max_batch` rows that want every row's logits (decode,
    /// speculative verify) are captured into a CUDA graph the second time their shape is seen
    /// and replayed from the third ([`super::graph`]).
    fn run(&mut self, batch: &[SeqChunk<'_>], n_layers: usize) -> Result<Option<StepOut>> {
        let mut plan = self.plan(batch)?;
        let t = plan.tokens.len();
        if t == 0 {
            return Ok(None);
        }
        let c = &self.model.config;
        let n_run = n_layers.min(self.w.layers.len());
        let nw = plan.wanted.len();
        if t <= self.graphs.max_batch && nw == t {
            let rows = super::graph::bucket_rows(t, self.graphs.bucket, self.graphs.max_batch);
            plan.pad_to(rows);
            let split = self.dev.define("ATTN_SPLIT", 256) as usize;
            // The global layers' count: sliding-window layers need no more splits.
            let nz = super::attention::kv_splits(&plan.pos, 0, split).next_power_of_two();
            // Rows with one split walk it (no partials); see `encode`.
            let part = if nz > 1 {
                rows * c.n_heads * nz * (c.head_dim + 2)
            } else {
                0
            };
            if part * 4 <= super::ops::ATTN_PART_BYTES {
                if self.run_graphed(&plan, n_run, nz, part)? {
                    return Ok(Some(StepOut::Graphed { rows, real: t }));
                }
                // The driver would not capture or instantiate a graph: this backend runs its
                // steps with plain launches from now on (same logits either way).
                self.graphs = Graphs::new(0);
            }
            plan.truncate(t);
        }
        let c = &self.model.config;
        let mut b = Box::new(StepBuffers::new(&self.dev, c, t, nw, plan.tables.len())?);
        b.fill(&self.dev, &plan)?;
        encode(
            &self.dev,
            c,
            &self.w,
            (&mut self.k, &mut self.v),
            self.block_size,
            self.split_canary,
            &mut b,
            n_run,
            None,
        )?;
        Ok((nw > 0).then_some(StepOut::Owned(b)))
    }

    /// One step through row count `t`'s graph for (`n_run` layers, `nz` splits): the first time
    /// ungraphed (loading every kernel), the second captured and launched, then replayed.
    /// Ok(false): capturing or instantiating the graph failed (nothing ran; the caller runs the
    /// step ungraphed). Errors: the step's own errors (shapes, out of memory, a failed launch).
    fn run_graphed(
        &mut self,
        plan: &StepPlan,
        n_run: usize,
        nz: usize,
        part: usize,
    ) -> Result<bool> {
        let t = plan.tokens.len();
        let dev = &self.dev;
        let stale = self.graphs.stale_canary;
        let e = self
            .graphs
            .entry(dev, &self.model.config, t, plan.tables.len(), part)?;
        let key = (n_run, nz);
        if !(stale && e.graphs.contains_key(&key)) {
            e.bufs.fill(dev, plan)?;
        }
        if let Some(g) = e.graphs.get(&key) {
            g.0.launch().map_err(super::drv)?;
            return Ok(true);
        }
        let capture = e.seen.contains(&key);
        let s = dev.stream();
        let guard = if capture {
            if let Err(err) = s.begin_capture(
                cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
            ) {
                tracing::warn!(
                    "CUDA graph capture unavailable ({err}); plain launches from now on"
                );
                return Ok(false);
            }
            Some(CaptureGuard(s))
        } else {
            None
        };
        let r = encode(
            dev,
            &self.model.config,
            &self.w,
            (&mut self.k, &mut self.v),
            self.block_size,
            self.split_canary,
            &mut e.bufs,
            n_run,
            Some(nz),
        );
        let Some(guard) = guard else {
            r?;
            e.seen.insert(key);
            return Ok(true);
        };
        let g = guard.end();
        r?;
        let g = match g {
            Ok(Some(g)) => g,
            Ok(None) | Err(_) => {
                tracing::warn!(
                    "CUDA graph capture of a {t}-row step failed ({}); plain launches from now on",
                    g.err().map_or("no graph".to_string(), |e| e.to_string())
                );
                return Ok(false);
            }
        };
        g.launch().map_err(super::drv)?;
        e.graphs.insert(key, OwnedGraph(g));
        Ok(true)
    }
}
