//! The measurements of `memra tune`: bs=1 decode tok/s, time to first token, the cost of one
//! forward, and engines for kernel candidates that share one upload of the weights.

use crate::config::Config;
use anyhow::Result;
use memra_engine::backend::cuda::backend::{CudaBackend, CudaWeights};
use memra_engine::backend::cuda::CudaDevice;
use memra_engine::backend::{Backend, LogitsWanted, SeqChunk};
use memra_engine::engine::{Engine, GenerateRequest};
use memra_engine::kv::BlockTable;
use memra_engine::loader::LoadedModel;
use memra_engine::sample::SamplingParams;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

pub(super) fn ids(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// (median, min, max) of `v` (non-empty), the median as `memra bench` takes it (an even N
/// averages the two middle values).
pub(super) fn stats(v: &[f64]) -> (f64, f64, f64) {
    let s = crate::bench::rows::Stats::of(v);
    (s.median, s.min, s.max)
}

/// Aggregate decode tok/s of `batch` sequences (bs = `batch`; 1 for the bs=1 metric) after
/// `depth` prompt tokens each (`new` ≥ 2 tokens, the first from prefill; prefill untimed, see
/// [`crate::bench::time_decode`]), `reps` times after one warm-up. The sequences' prompts differ
/// (seeds 7, 8, ...), so no prefix is shared.
pub(super) fn decode_tok_s(
    e: &mut Engine,
    vocab: usize,
    depth: usize,
    new: usize,
    reps: usize,
    batch: usize,
) -> Result<Vec<f64>> {
    let lens = vec![new; batch.max(1)];
    timed_decode(e, vocab, depth, &lens, reps)
}

/// Aggregate decode tok/s of a batch that shrinks through every row count: `batch` sequences of
/// `depth` prompt tokens, sequence i generating about `new`·(i+1)/`batch` tokens, so the step's
/// row count walks from `batch` down to 1; otherwise as [`decode_tok_s`] (the warm-up run
/// captures the CUDA graphs a bucket width needs).
pub(super) fn ragged_decode_tok_s(
    e: &mut Engine,
    vocab: usize,
    depth: usize,
    new: usize,
    reps: usize,
    batch: usize,
) -> Result<Vec<f64>> {
    let b = batch.max(1);
    let lens: Vec<usize> = (0..b).map(|i| new * (i + 1) / b).collect();
    timed_decode(e, vocab, depth, &lens, reps)
}

/// Sequence i of `depth` prompt tokens (seed 7 + i) generating `lens[i]` tokens (at least 2):
/// tokens after each sequence's first over the time from the last first token to the end,
/// `reps` times after one warm-up run.
fn timed_decode(
    e: &mut Engine,
    vocab: usize,
    depth: usize,
    lens: &[usize],
    reps: usize,
) -> Result<Vec<f64>> {
    let reqs: Vec<GenerateRequest> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| GenerateRequest {
            prompt: ids(depth, vocab, 7 + i as u64),
            params: SamplingParams::greedy(),
            max_tokens: n.max(2),
            stop_ids: vec![],
            sequence: i as u32,
        })
        .collect();
    let tokens: usize = reqs.iter().map(|r| r.max_tokens - 1).sum();
    let mut out = Vec::new();
    for i in 0..=reps {
        let secs = crate::bench::time_decode(e, &reqs)?;
        if i > 0 {
            out.push(tokens as f64 / secs.max(1e-9));
        }
    }
    Ok(out)
}

/// Milliseconds to the first token of a `len`-token prompt.
pub(super) fn ttft_ms(e: &mut Engine, vocab: usize, len: usize, reps: usize) -> Result<Vec<f64>> {
    let req = GenerateRequest {
        prompt: ids(len, vocab, 11),
        params: SamplingParams::greedy(),
        max_tokens: 1,
        stop_ids: vec![],
        sequence: 0,
    };
    let mut out = Vec::new();
    for i in 0..=reps {
        let t = Instant::now();
        e.run_batch(std::slice::from_ref(&req), false)?;
        if i > 0 {
            out.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    Ok(out)
}

/// Median milliseconds of one forward holding `seqs` sequences of `rows` new tokens each, every
/// sequence `depth` tokens deep (its KV written first).
pub(super) fn forward_ms(
    e: &mut Engine,
    vocab: usize,
    seqs: usize,
    rows: usize,
    depth: usize,
    reps: usize,
) -> Result<f64> {
    let mut tables = vec![BlockTable::default(); seqs];
    for t in tables.iter_mut() {
        // Prefill writes positions 0..depth (reserving as it goes); then room for the rows.
        e.prefill(t, &ids(depth, vocab, 3), 512)?;
        e.blocks.reserve(t, depth + rows)?;
    }
    let toks = ids(rows, vocab, 5);
    let mut times = Vec::new();
    for i in 0..=reps {
        let batch: Vec<SeqChunk<'_>> = tables
            .iter()
            .map(|t| SeqChunk {
                tokens: &toks,
                start_pos: depth,
                block_table: &t.blocks,
                logits: if rows == 1 {
                    LogitsWanted::Last
                } else {
                    LogitsWanted::All
                },
            })
            .collect();
        let t0 = Instant::now();
        e.backend.forward(&batch)?;
        if i > 0 {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    for t in tables.iter_mut() {
        e.blocks.free_table(t);
    }
    Ok(stats(&times).0)
}

/// One copy of the weights on the device, uploaded under `defines`, that the engines of the
/// kernel candidates read (run 38: opening a device and repacking and uploading the 8B for each
/// candidate took about 20 of the 28 s each cost).
pub(super) struct Shared {
    dev: Arc<CudaDevice>,
    w: Arc<CudaWeights>,
    defines: BTreeMap<String, String>,
}

/// The defines that choose the weights' layout on the device
/// ([`memra_engine::backend::cuda::linear_tc::tc_enabled`]).
fn layout_defines(d: &BTreeMap<String, String>) -> [Option<&String>; 2] {
    ["QTC", "QTC_Q8_0"].map(|k| d.get(k))
}

/// An engine with kernels compiled under `defines`, on the weights in `shared` (uploaded first,
/// or again when `defines` would lay them out differently), or an error naming the candidate.
pub(super) fn cuda_engine(
    cfg: &Config,
    loaded: &LoadedModel,
    shared: &mut Option<Shared>,
    defines: &BTreeMap<String, String>,
    blocks: usize,
) -> Result<Engine> {
    let mut c = cfg.clone();
    c.kernel_defines = defines.clone();
    let opts = crate::backends::kernel_options(&c, &[]);
    let s = match shared.take() {
        Some(s) if layout_defines(&s.defines) == layout_defines(defines) => s,
        _ => {
            let dev = Arc::new(CudaDevice::open_with(cfg.cuda_device, opts.clone())?);
            let w = Arc::new(CudaWeights::upload(&dev, &loaded.model)?);
            dev.synchronize()?;
            Shared {
                dev,
                w,
                defines: defines.clone(),
            }
        }
    };
    let dev = Arc::new(s.dev.with_options(opts)?);
    let w = s.w.clone();
    *shared = Some(s);
    let b = CudaBackend::new(dev, loaded.model.clone(), w, blocks, cfg.kv_block_size)?
        .with_graphs(c.cuda_graph_max_batch)
        .with_graph_bucket(c.cuda_graph_bucket);
    Ok(Engine::new(
        Box::new(b) as Box<dyn Backend>,
        cfg.prefill_chunk,
    ))
}
