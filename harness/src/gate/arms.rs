//! The two arms of each Level A gate, and the comparison of their traces.

use anyhow::{anyhow, bail, Result};
use memra_engine::backend::cpu::CpuBackend;
use memra_engine::backend::Backend;
use memra_engine::engine::{Engine, GenerateRequest};
use memra_engine::models::Model;
use memra_engine::sample::SamplingParams;
use memra_engine::sched::{Event, SchedCanary, SchedulerConfig, SchedulerHandle, Submit};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// KV blocks of 16 positions each arm allocates.
const BLOCKS: usize = 512;
const BLOCK_SIZE: usize = 16;

/// What one request produced: the chosen tokens and the logits row behind each, and how many
/// draft tokens speculation proposed for it (0 without).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub tokens: Vec<u32>,
    pub logits: Vec<Arc<Vec<f32>>>,
    pub drafted: u32,
}

/// The first place two traces disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    pub request: usize,
    pub position: usize,
    /// Tokens chosen by the reference arm and by the fast arm.
    pub token_ref: u32,
    pub token_fast: u32,
    /// Top-2 logit margin of the reference arm at that position.
    pub margin: f32,
    /// Max |Δlogit| over the row.
    pub max_abs_diff: f32,
}

/// Compares traces position by position: logits bit for bit when `bits`, else token ids.
/// Returns the number of positions compared and the first difference.
pub fn compare(reference: &[Trace], fast: &[Trace], bits: bool) -> (usize, Option<Diff>) {
    let mut compared = 0;
    for (r, (a, b)) in reference.iter().zip(fast).enumerate() {
        let n = a.tokens.len().max(b.tokens.len());
        for p in 0..n {
            let (ta, tb) = (a.tokens.get(p), b.tokens.get(p));
            let same_logits = match (a.logits.get(p), b.logits.get(p)) {
                (Some(x), Some(y)) => {
                    !bits
                        || x.iter()
                            .zip(y.iter())
                            .all(|(u, v)| u.to_bits() == v.to_bits())
                }
                _ => !bits,
            };
            if ta != tb || !same_logits {
                let (margin, diff) = match (a.logits.get(p), b.logits.get(p)) {
                    (Some(x), Some(y)) => (
                        top2_margin(x),
                        x.iter()
                            .zip(y.iter())
                            .map(|(u, v)| (u - v).abs())
                            .fold(0f32, f32::max),
                    ),
                    (Some(x), None) => (top2_margin(x), f32::NAN),
                    _ => (f32::NAN, f32::NAN),
                };
                return (
                    compared,
                    Some(Diff {
                        request: r,
                        position: p,
                        token_ref: ta.copied().unwrap_or(u32::MAX),
                        token_fast: tb.copied().unwrap_or(u32::MAX),
                        margin,
                        max_abs_diff: diff,
                    }),
                );
            }
            compared += 1;
        }
    }
    (compared, None)
}

fn top2_margin(l: &[f32]) -> f32 {
    let (mut a, mut b) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &v in l {
        if v > a {
            b = a;
            a = v;
        } else if v > b {
            b = v;
        }
    }
    a - b
}

/// Which backend the gates run on: the CPU reference (`kv_f16`: its KV values rounded to f16,
/// `kv_cache_dtype = "f16"`), or the process's CUDA device (whose kernel options carry the
/// configuration's KV dtype).
pub enum Lane {
    Cpu { kv_f16: bool },
    Cuda(Arc<crate::backends::CudaPool>),
}

static LANE: OnceLock<Lane> = OnceLock::new();

/// The running gate's batch-size bucket width for graphed CUDA arms (0 = as configured). Gates
/// run one at a time; [`set_graph_bucket`] sets it before each.
static GRAPH_BUCKET: AtomicUsize = AtomicUsize::new(0);

/// Sets the batch-size bucket width of the graphed CUDA arms of the gate about to run (a gate's
/// `graph_bucket`; 0 = the configuration's `cuda_graph_bucket`).
pub fn set_graph_bucket(width: usize) {
    GRAPH_BUCKET.store(width, Ordering::Relaxed);
}

/// Sets the lane for every arm of this process (first call wins).
pub fn set_lane(lane: Lane) {
    let _ = LANE.set(lane);
}

/// The lane's backend name, as `--backend` takes it.
pub fn lane_name() -> &'static str {
    match LANE.get() {
        Some(Lane::Cuda(_)) => "cuda",
        _ => "cpu",
    }
}

/// How an arm's backend is broken, if at all (gate canaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendCanary {
    None,
    /// Linear reductions split in two when a pass holds more than one row.
    ShapeDependentSplit,
    /// CUDA graphs replayed without refilling their inputs (CUDA lane only).
    StaleGraphInputs,
}

/// A backend of the gate's lane with `blocks` KV blocks. `graphed`: decode steps go through CUDA
/// graphs as configured (`cuda_graph_max_batch`, `cuda_graph_bucket` unless the gate sets its
/// own width: [`set_graph_bucket`]); reference arms pass false, so every CUDA-lane gate compares
/// graph replay with plain launches.
pub fn lane_backend(
    model: &Arc<Model>,
    blocks: usize,
    canary: BackendCanary,
    graphed: bool,
) -> memra_engine::Result<Box<dyn Backend>> {
    let split_canary = canary == BackendCanary::ShapeDependentSplit;
    match LANE.get().unwrap_or(&Lane::Cpu { kv_f16: false }) {
        &Lane::Cpu { kv_f16 } => {
            let b = CpuBackend::new(model.clone(), blocks, BLOCK_SIZE);
            let b = if kv_f16 { b.with_kv_f16() } else { b };
            Ok(Box::new(if split_canary {
                b.with_shape_dependent_split()
            } else {
                b
            }))
        }
        Lane::Cuda(pool) => pool
            .backend(model, blocks, BLOCK_SIZE, split_canary)
            .map(|b| {
                let width = GRAPH_BUCKET.load(Ordering::Relaxed);
                let b = match (graphed, width) {
                    (false, _) => b.with_graphs(0),
                    (true, 0) => b,
                    (true, w) => b.with_graph_bucket(w),
                };
                let b = if canary == BackendCanary::StaleGraphInputs {
                    b.with_stale_graph_inputs()
                } else {
                    b
                };
                Box::new(b) as Box<dyn Backend>
            })
            .map_err(|e| memra_engine::Error::Unsupported(format!("{e:#}"))),
    }
}

/// Reference arm: each request alone through the plain engine loop, prompt prefilled in chunks of
/// `chunk` (0 = whole prompt), one token per decode step.
pub fn solo(
    model: &Arc<Model>,
    prompt: &[u32],
    params: &SamplingParams,
    max_tokens: usize,
    sequence: u32,
    chunk: usize,
    split_canary: bool,
) -> Result<Trace> {
    let chunk = if chunk == 0 { prompt.len() } else { chunk };
    let canary = if split_canary {
        BackendCanary::ShapeDependentSplit
    } else {
        BackendCanary::None
    };
    let mut e = Engine::new(lane_backend(model, BLOCKS, canary, false)?, chunk);
    let req = GenerateRequest {
        prompt: prompt.to_vec(),
        params: params.clone(),
        max_tokens,
        stop_ids: vec![],
        sequence,
    };
    let mut out = e.run_batch(&[req], true)?;
    let o = out.remove(0);
    Ok(Trace {
        tokens: o.tokens,
        logits: o.step_logits.into_iter().map(Arc::new).collect(),
        drafted: 0,
    })
}

/// One request for [`scheduled`].
#[derive(Clone)]
pub struct Job {
    pub prompt: Vec<u32>,
    pub params: SamplingParams,
    pub n: u32,
    pub tenant: String,
    pub spec: Option<memra_engine::spec::SpecParams>,
}

/// Fast arm: the jobs through the continuous-batching scheduler. With `staggered`, job i is
/// submitted once job i-1 has produced its first token, so requests join at different depths;
/// otherwise each job is submitted after the previous one finished (`sequential`) or all at once.
/// Returns one trace per choice (job-major) and each job's cached prompt tokens.
pub fn scheduled(
    model: &Arc<Model>,
    jobs: &[Job],
    max_tokens: usize,
    cfg: SchedulerConfig,
    canary: BackendCanary,
    mode: Submission,
) -> Result<(Vec<Trace>, Vec<usize>)> {
    let m = model.clone();
    // Requests that draft with a draft model get the target itself as the draft model (it shares
    // the tokenizer; the gate is about exactness, not speed).
    let wants_draft = jobs.iter().any(|j| {
        j.spec
            .is_some_and(|s| s.method == memra_engine::spec::SpecMethod::DraftModel)
    });
    let d = model.clone();
    let draft: Option<memra_engine::sched::BackendFactory> =
        wants_draft.then(|| Box::new(move || lane_backend(&d, 64, BackendCanary::None, true)) as _);
    let h = SchedulerHandle::spawn_with_draft(
        Box::new(move || lane_backend(&m, BLOCKS, canary, true)),
        draft,
        cfg,
    )?;
    let mut rxs: Vec<Receiver<Event>> = Vec::new();
    let mut results = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let (tx, rx) = channel();
        h.submit(Submit {
            id: i as u64,
            prompt: j.prompt.clone(),
            params: j.params.clone(),
            max_tokens,
            stop_ids: vec![],
            n: j.n,
            logprobs: None,
            tenant: j.tenant.clone(),
            return_logits: true,
            spec: j.spec,
            events: Box::new(move |e| tx.send(e).is_ok()),
        })
        .map_err(|e| anyhow!("submit: {e}"))?;
        match mode {
            Submission::AllAtOnce => rxs.push(rx),
            Submission::Sequential => results.push(collect(&rx, j.n as usize, None)?),
            Submission::Staggered => {
                // Wait for this job's first token; the batch keeps running meanwhile.
                let mut pre = Vec::new();
                loop {
                    let e = rx.recv_timeout(Duration::from_secs(300))?;
                    let first = matches!(e, Event::Token { .. } | Event::Done);
                    pre.push(e);
                    if first {
                        break;
                    }
                }
                rxs.push(replay(pre, rx));
            }
        }
    }
    for (rx, j) in rxs.iter().zip(jobs) {
        results.push(collect(rx, j.n as usize, None)?);
    }
    h.shutdown();
    let cached = results.iter().map(|r| r.1).collect();
    Ok((results.into_iter().flat_map(|r| r.0).collect(), cached))
}

/// How [`scheduled`] submits its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submission {
    AllAtOnce,
    Staggered,
    Sequential,
}

/// A receiver that yields `pre` first, then whatever `rx` yields.
fn replay(pre: Vec<Event>, rx: Receiver<Event>) -> Receiver<Event> {
    let (tx, out) = channel();
    for e in pre {
        let _ = tx.send(e);
    }
    std::thread::spawn(move || {
        while let Ok(e) = rx.recv() {
            if tx.send(e).is_err() {
                break;
            }
        }
    });
    out
}

fn collect(rx: &Receiver<Event>, n: usize, _: Option<()>) -> Result<(Vec<Trace>, usize)> {
    let mut traces = vec![Trace::default(); n];
    let mut cached = 0;
    loop {
        match rx.recv_timeout(Duration::from_secs(300))? {
            Event::Started { cached_tokens, .. } => cached = cached_tokens,
            Event::Token {
                choice,
                token,
                logits,
                ..
            } => {
                let t = &mut traces[choice as usize];
                t.tokens.push(token);
                t.logits
                    .push(logits.ok_or_else(|| anyhow!("no logits in event"))?);
            }
            Event::Finished {
                choice, drafted, ..
            } => traces[choice as usize].drafted = drafted,
            Event::Done => return Ok((traces, cached)),
            Event::Error(e) => bail!("request failed: {e}"),
        }
    }
}

/// Scheduler config for a gate arm, with its canary if any.
pub fn sched_config(max_batch_tokens: usize, canary: Option<SchedCanary>) -> SchedulerConfig {
    SchedulerConfig {
        max_batch_tokens,
        canary,
        ..Default::default()
    }
}
