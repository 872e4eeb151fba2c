//! The CPU reference backend: f32 activations, weights dequantized on the fly, threads over
//! output rows and attention heads (rayon). Every reduction has a fixed order that depends only
//! on the reduction length (see [`crate::quant::QuantMatrix`] and [`ops`]), so outputs are
//! bit-identical for any thread count and any batch composition.

pub mod ops;

use super::{Backend, LogitsWanted, SeqChunk};
use crate::error::{Error, Result};
use crate::models::{Model, ModelConfig};
use crate::quant::QuantMatrix;
use rayon::prelude::*;
use std::sync::Arc;

/// CPU backend over a loaded model with a paged f32 KV cache (its values optionally rounded to
/// f16 as they are appended: [`CpuBackend::with_kv_f16`]).
pub struct CpuBackend {
    model: Arc<Model>,
    block_size: usize,
    num_blocks: usize,
    /// Per layer, `[num_blocks, block_size, n_kv_heads, head_dim]` f32.
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    rope_global: ops::Rope,
    rope_local: Option<ops::Rope>,
    /// Canary: split-K chosen by shape (see [`CpuBackend::with_shape_dependent_split`]).
    split_k_canary: bool,
    /// Round appended K/V values to f16 (see [`CpuBackend::with_kv_f16`]).
    kv_f16: bool,
}

/// One row of the step: which sequence chunk, its position and KV location.
struct Row {
    chunk: usize,
    pos: usize,
}

impl CpuBackend {
    /// Allocates `num_blocks` KV blocks of `block_size` positions for `model`. Panics where
    /// [`CpuBackend::try_new`] errs (tests and tools with small caches).
    pub fn new(model: Arc<Model>, num_blocks: usize, block_size: usize) -> Self {
        Self::try_new(model, num_blocks, block_size).expect("CPU KV cache")
    }

    /// As [`CpuBackend::new`], but a cache whose size overflows or that the allocator refuses
    /// (f32 K and V: 2 · layers · blocks · block_size · kv_heads · head_dim · 4 bytes) is an
    /// [`Error::InvalidArgument`] naming its size, instead of an abort.
    pub fn try_new(model: Arc<Model>, num_blocks: usize, block_size: usize) -> Result<Self> {
        let c = &model.config;
        let per_layer = num_blocks
            .checked_mul(block_size)
            .and_then(|n| n.checked_mul(c.n_kv_heads * c.head_dim))
            .filter(|n| n.checked_mul(8 * c.n_layers).is_some())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "KV cache of {num_blocks} blocks of {block_size} positions overflows"
                ))
            })?;
        let refused = || {
            Error::InvalidArgument(format!(
                "cannot allocate the CPU KV cache: {} MiB ({num_blocks} blocks of {block_size} \
                 positions); lower kv_cache_mib or kv_block_size",
                (per_layer as u128 * 8 * c.n_layers as u128) >> 20
            ))
        };
        // Zeroed pages from the allocator, as `vec![0f32; n]` gets them (lazily on Linux), but a
        // refusal comes back as an error rather than an abort.
        let zeroed = || -> Result<Vec<f32>> {
            if per_layer == 0 {
                return Ok(Vec::new());
            }
            let layout = std::alloc::Layout::array::<f32>(per_layer).map_err(|_| refused())?;
            // SAFETY: the layout has a non-zero size (per_layer > 0); a non-null result is
            // `per_layer` zeroed, suitably aligned f32s owned by the Vec from here on, allocated
            // by the global allocator with the layout Vec<f32> frees with.
            unsafe {
                let p = std::alloc::alloc_zeroed(layout) as *mut f32;
                if p.is_null() {
                    return Err(refused());
                }
                Ok(Vec::from_raw_parts(p, per_layer, per_layer))
            }
        };
        let k = (0..c.n_layers).map(|_| zeroed()).collect::<Result<_>>()?;
        let v = (0..c.n_layers).map(|_| zeroed()).collect::<Result<_>>()?;
        let rope_global = ops::Rope::new(c.head_dim, c.rope_theta, c.rope_style);
        let rope_local = c
            .rope_local_theta
            .map(|t| ops::Rope::new(c.head_dim, t, c.rope_style));
        Ok(CpuBackend {
            k,
            v,
            model,
            block_size,
            num_blocks,
            rope_global,
            rope_local,
            split_k_canary: false,
            kv_f16: false,
        })
    }

    /// The KV cache keeps only what an f16 cache would: every appended K and V value is rounded
    /// to f16 (IEEE 754 binary16, nearest-even) and back, the values the CUDA backend's
    /// `KV_F16 = 1` cache stores (`kv_cache_dtype = "f16"`). Storage stays f32 here.
    pub fn with_kv_f16(mut self) -> Self {
        self.kv_f16 = true;
        self
    }

    /// A deliberately broken backend for gate canaries: when a pass holds more than one row, every
    /// matmul splits its reduction in two halves (split-K chosen by shape), so logits depend on
    /// batch size and chunking.
    pub fn with_shape_dependent_split(mut self) -> Self {
        self.split_k_canary = true;
        self
    }

    fn mm(&self, w: &dyn QuantMatrix, x: &[f32], t: usize) -> Vec<f32> {
        if self.split_k_canary && t > 1 {
            split_k_matmul(w, x, t)
        } else {
            matmul(w, x, t)
        }
    }

    /// Bytes of KV cache per token position (all layers, K and V).
    pub fn kv_bytes_per_token(c: &ModelConfig) -> usize {
        2 * c.n_layers * c.n_kv_heads * c.head_dim * 4
    }

    fn slot(&self, table: &[u32], pos: usize) -> usize {
        let c = &self.model.config;
        let block = table[pos / self.block_size] as usize;
        (block * self.block_size + pos % self.block_size) * c.n_kv_heads * c.head_dim
    }
}

/// `out[t, :] = W x[t, :]` for all T rows, parallel over output rows. Row results do not depend on
/// how the rows are split between threads.
pub fn matmul(w: &dyn QuantMatrix, x: &[f32], t_count: usize) -> Vec<f32> {
    let n = w.rows();
    // A few tasks per thread balance load without drowning small matrices in scheduling.
    let tasks = (rayon::current_num_threads() * 4).max(1);
    let rows_per_task = n.div_ceil(tasks).max(16);
    let parts: Vec<(usize, Vec<f32>)> = (0..n.div_ceil(rows_per_task))
        .into_par_iter()
        .map(|p| {
            let r0 = p * rows_per_task;
            let r1 = (r0 + rows_per_task).min(n);
            let mut out = vec![0f32; t_count * (r1 - r0)];
            w.matmul_rows(x, r0..r1, &mut out);
            (r0, out)
        })
        .collect();
    let mut y = vec![0f32; t_count * n];
    for (r0, part) in parts {
        let len = part.len() / t_count;
        for t in 0..t_count {
            y[t * n + r0..t * n + r0 + len].copy_from_slice(&part[t * len..(t + 1) * len]);
        }
    }
    y
}

/// The canary's matmul: each dot product reduced as two halves added at the end.
fn split_k_matmul(w: &dyn QuantMatrix, x: &[f32], t: usize) -> Vec<f32> {
    let (n, k) = (w.rows(), w.cols());
    let half = k / 2 / 8 * 8;
    let cols: Vec<Vec<f32>> = (0..n)
        .into_par_iter()
        .map_init(
            || vec![0f32; k],
            |row, r| {
                w.row_into(r, row);
                (0..t)
                    .map(|ti| {
                        let xr = &x[ti * k..(ti + 1) * k];
                        crate::quant::dot_f32(&row[..half], &xr[..half])
                            + crate::quant::dot_f32(&row[half..], &xr[half..])
                    })
                    .collect()
            },
        )
        .collect();
    let mut y = vec![0f32; t * n];
    for (r, col) in cols.iter().enumerate() {
        for (ti, v) in col.iter().enumerate() {
            y[ti * n + r] = *v;
        }
    }
    y
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
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
        let (s, d) = (src as usize * n, dst as usize * n);
        for layer in self.k.iter_mut().chain(self.v.iter_mut()) {
            layer.copy_within(s..s + n, d);
        }
    }

    fn forward_layers(&mut self, batch: &[SeqChunk<'_>], n_layers: usize) -> Result<Vec<Vec<f32>>> {
        let model = self.model.clone();
        let c = &model.config;
        let (h, hd, nh, nkv) = (c.hidden_size, c.head_dim, c.n_heads, c.n_kv_heads);
        super::check_batch(batch, self.block_size, self.num_blocks, c.vocab_size)?;
        let mut rows = Vec::new();
        for (i, ch) in batch.iter().enumerate() {
            for j in 0..ch.tokens.len() {
                rows.push(Row {
                    chunk: i,
                    pos: ch.start_pos + j,
                });
            }
        }
        let t = rows.len();
        if t == 0 {
            return Ok(Vec::new());
        }
        // Embeddings.
        let mut x = vec![0f32; t * h];
        let tokens: Vec<u32> = batch
            .iter()
            .flat_map(|ch| ch.tokens.iter().copied())
            .collect();
        x.par_chunks_mut(h).zip(&tokens).for_each(|(row, &tok)| {
            model.embed.row_into(tok as usize, row);
            if let Some(s) = c.embed_scale {
                row.iter_mut().for_each(|v| *v *= s);
            }
        });
        let slots: Vec<usize> = rows
            .iter()
            .map(|r| self.slot(batch[r.chunk].block_table, r.pos))
            .collect();
        for (li, layer) in model.layers.iter().enumerate().take(n_layers) {
            // Attention block.
            let xn = ops::rms_norm_rows(&x, &layer.attn_norm, c.rms_eps);
            let mut q = self.mm(&*layer.wq, &xn, t);
            let mut k = self.mm(&*layer.wk, &xn, t);
            let mut v = self.mm(&*layer.wv, &xn, t);
            if let Some(b) = &layer.bq {
                ops::add_bias(&mut q, b);
            }
            if let Some(b) = &layer.bk {
                ops::add_bias(&mut k, b);
            }
            if let Some(b) = &layer.bv {
                ops::add_bias(&mut v, b);
            }
            if let Some(w) = &layer.q_norm {
                q = ops::rms_norm_rows(&q, w, c.rms_eps);
            }
            if let Some(w) = &layer.k_norm {
                k = ops::rms_norm_rows(&k, w, c.rms_eps);
            }
            let window = c.layer_window[li];
            let rope = match (window, &self.rope_local) {
                (Some(_), Some(local)) => local,
                _ => &self.rope_global,
            };
            q.par_chunks_mut(nh * hd)
                .zip(&rows)
                .for_each(|(qr, r)| qr.chunks_mut(hd).for_each(|hv| rope.apply(hv, r.pos)));
            k.par_chunks_mut(nkv * hd)
                .zip(&rows)
                .for_each(|(kr, r)| kr.chunks_mut(hd).for_each(|hv| rope.apply(hv, r.pos)));
            // KV append.
            let (kc, vc) = (&mut self.k[li], &mut self.v[li]);
            for (ri, &s) in slots.iter().enumerate() {
                kc[s..s + nkv * hd].copy_from_slice(&k[ri * nkv * hd..(ri + 1) * nkv * hd]);
                vc[s..s + nkv * hd].copy_from_slice(&v[ri * nkv * hd..(ri + 1) * nkv * hd]);
                if self.kv_f16 {
                    let round = |x: &mut f32| *x = half::f16::from_f32(*x).to_f32();
                    kc[s..s + nkv * hd].iter_mut().for_each(round);
                    vc[s..s + nkv * hd].iter_mut().for_each(round);
                }
            }
            let (kc, vc) = (&self.k[li], &self.v[li]);
            let mut attn = vec![0f32; t * nh * hd];
            let bs = self.block_size;
            attn.par_chunks_mut(hd).enumerate().for_each(|(idx, out)| {
                let (ri, head) = (idx / nh, idx % nh);
                let r = &rows[ri];
                let table = batch[r.chunk].block_table;
                let kvh = head / (nh / nkv);
                let lo = window.map_or(0, |w| (r.pos + 1).saturating_sub(w));
                let key_at = |p: usize| {
                    let s = (table[p / bs] as usize * bs + p % bs) * nkv * hd + kvh * hd;
                    (&kc[s..s + hd], &vc[s..s + hd])
                };
                let qh = &q[(ri * nh + head) * hd..(ri * nh + head + 1) * hd];
                ops::attend(qh, lo..r.pos + 1, key_at, c.attn_scale, out);
            });
            let mut o = self.mm(&*layer.wo, &attn, t);
            if let Some(w) = &layer.post_attn_norm {
                o = ops::rms_norm_rows(&o, w, c.rms_eps);
            }
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            // Feed-forward block.
            let xn = ops::rms_norm_rows(&x, &layer.ffn_norm, c.rms_eps);
            let gate = self.mm(&*layer.w_gate, &xn, t);
            let up = self.mm(&*layer.w_up, &xn, t);
            let act = ops::gated_activation(&gate, &up, c.activation);
            let mut d = self.mm(&*layer.w_down, &act, t);
            if let Some(w) = &layer.post_ffn_norm {
                d = ops::rms_norm_rows(&d, w, c.rms_eps);
            }
            x.iter_mut().zip(&d).for_each(|(a, b)| *a += b);
        }
        // Logits for the wanted rows only.
        let mut wanted = Vec::new();
        let mut ri = 0;
        for ch in batch {
            let n = ch.tokens.len();
            match ch.logits {
                LogitsWanted::None => {}
                LogitsWanted::Last => wanted.push(ri + n - 1),
                LogitsWanted::All => wanted.extend(ri..ri + n),
            }
            ri += n;
        }
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let mut sel = Vec::with_capacity(wanted.len() * h);
        for &r in &wanted {
            sel.extend_from_slice(&x[r * h..(r + 1) * h]);
        }
        let xn = ops::rms_norm_rows(&sel, &model.out_norm, c.rms_eps);
        let mut logits = self.mm(&*model.lm_head, &xn, wanted.len());
        if let Some(cap) = c.final_logit_softcap {
            logits.iter_mut().for_each(|v| *v = (*v / cap).tanh() * cap);
        }
        Ok(logits.chunks(c.vocab_size).map(|r| r.to_vec()).collect())
    }
}
