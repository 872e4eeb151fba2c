//! `memra tune`: measures candidates for the tunable constants on this device, keeps the best,
//! runs the gates with the kept set, and writes `boards/defaults/<device>.toml` with provenance
//! (DESIGN.md §4). What it sweeps:
//!
//! - `kernels` (CUDA only): first `QLIN_INT`, kept only if it shortens a reference request (a
//!   512-token prompt's TTFT plus `--new-tokens` of bs=1 decode) beyond the spread; then `LIN_TOKENS`,
//!   `QIMMA_TILES`, `QIMMA_PF`, `QIMMA_BPF`, `LIN_ROWS`, `QLIN_MT` (TTFT of a 512-token prompt), `LIN_WARPS`,
//!   `LIN_ROWS_M1`, `QLIN_M1_WARPS`, `QLIN_M1_UNROLL`, `QLIN_M1_PREFETCH`, `NORM_THREADS`
//!   (decode tok/s, bs=1), `ATTN_SPLIT`, `ATTN_HEADS`, `ATTN_PF` (decode tok/s at a 2,048-token
//!   depth), `ATTN_WIDE_ROWS` (aggregate decode tok/s at bs=32), `ATTN_WIDE_SPLITS` (0 or 32,
//!   decode tok/s at an 8,192-token depth) and,
//!   with `QTC = 1`, the tensor-core load knobs of the model's format (BF16: `QTC_UNROLL`,
//!   `QTC_DB_BIG`; Q8_0 on the tensor cores: `QTC_Q8_UNROLL`, `QTC_Q8_UNROLL_BIG`,
//!   `QTC_Q8_DB_BIG`, `QTC_Q8_M1`; on a Q4_K model with `QTC_Q4_K = 1`, `QTC_Q4_UNROLL` and `QTC_Q4_UNROLL_NT`; the `_BIG` ones with `QTC_SPLIT_BIG` > 0) and `QTC_WT_ALT` (0 or 3, either
//!   tensor-core format) (decode tok/s, bs=1) and the
//!   split-K forms' routing `QTC_SK` (0, 2, and 3 on sm_90a) and, with `QTC_SK = 3`, `TCS_GLU`
//!   and `TCS_ROPE` (SwiGLU in the gate|up reduce, RoPE and the KV append in the Q|K|V reduce,
//!   each 0 or 1) and `TCK_FUSE` (the reduce inside the form, 0 or 1; all by aggregate decode
//!   tok/s at bs=32), and with `QTC_GEMM` on, `QTC_GEMM_MIN` (the
//!   tiled GEMM from 64 tokens, or the split-K and one-token forms up to 255: aggregate decode tok/s at bs=64)
//!   and `QTC_GEMM_MIN_BIG` (0: the same for gate+up and the lm-head; 128: the GEMM from 128 tokens
//!   for those, whose 128-row tiles fill the SMs: bs=128),
//!   one at a time
//!   with the others at their kept values; a knob keeps its current value (the base file's, else
//!   the kernel's own default) unless a candidate beats it beyond the measured spread. Then `cuda_graph_max_batch`, 0 against 32, by bs=1 decode tok/s,
//!   and if graphs stay, 32 against 64 by aggregate decode tok/s at bs=48 (64 kept only beyond
//!   the spread: the graphs of 33–64 rows keep their own step buffers); with graphs on, `cuda_graph_bucket`, 1 (a graph per row count) against 8 (steps padded
//!   to 1, 2, 4, 8, 16, 24, …), by decode tok/s of a batch that shrinks from the graphed maximum
//!   to 1 row: buckets (fewer captures, fewer step buffers kept) stay unless a graph per row
//!   count beats them beyond the spread. `--knobs` limits the define sweeps to the defines it
//!   names (and leaves the graph settings out); `graphs` sweeps the two graph settings alone.
//! - `prefill`: `prefill_chunk`, by time to first token of a long prompt.
//! - `spec`: the speculation policy's constants from measured forward costs: a verify of k drafts
//!   (k+1 rows) costs c(k) decode rows, measured at k = 1, 2, 4 and 8 and fitted by least squares
//!   as `spec_verify_base` + k·`spec_row_cost` (`spec::verify_cost`; the base is above 1 where
//!   steps of more than one row take a slower kernel path). With n-gram drafting (no draft cost)
//!   a verify pays while the expected tokens per verify, (1 − α^(k+1)) / (1 − α) at per-token
//!   acceptance α (Leviathan et al. 2023, eq. 1), exceed c(k). `spec_min_acceptance` is the
//!   lowest α at which some k of 1..16 pays (`spec::break_even_acceptance`; the scheduler pauses
//!   a sequence whose estimated α is below it); `spec_max_running` the largest batch at which a
//!   verify of K still pays at α = 0.6 (the n-gram acceptance measured on code editing,
//!   research/spec/); the draft length per step comes from α and the fitted costs
//!   (`spec::draft_len`).
//!
//! Candidates are measured on top of the device's current defaults (`--device-defaults`, auto by
//! default: the embedded file for this device); the file written keeps that file's values for
//! what this run did not sweep. `--device-defaults none` tunes from the built-in values.
//!
//! After each decided value the values decided so far are written to `<out>.partial`; `--resume` reads it
//! back (same build, model, N and device only) and sweeps only what it lacks, so a sweep longer
//! than one sitting on a lent GPU finishes over several.

use crate::config::Config;
use crate::defaults::{DeviceDefaults, Provenance, Tuned};
use anyhow::{bail, Context, Result};
use clap::Args;
use knobs::{attn_fits, current_define, sweep_applies, SWEEPS};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod fit;
mod knobs;
mod measure;
mod partial;
use fit::{fit_verify_cost, SPEC_FIT_DRAFTS};
use measure::{cuda_engine, decode_tok_s, forward_ms, ragged_decode_tok_s, stats, ttft_ms, Shared};
use partial::{resume_from, save_partial};

/// Arguments of `memra tune`.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Model measured (anything `memra pull` accepts, e.g. synth:llama-3.1-8b:q4_k).
    #[arg(long, default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// What to sweep: kernels (the kernel defines, then the CUDA graph settings unless `--knobs`
    /// names some defines), graphs (the CUDA graph settings), prefill, spec (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "kernels,prefill,spec")]
    pub what: Vec<String>,
    /// With `--what kernels`: sweep only these kernel defines (comma-separated, e.g. QTC_SK);
    /// default every one.
    #[arg(long, value_delimiter = ',')]
    pub knobs: Vec<String>,
    /// Timed runs per candidate (N; the boards ask for at least 5).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Tokens generated per decode measurement.
    #[arg(long, default_value_t = 64)]
    pub new_tokens: usize,
    /// `memra gate --only` patterns run with the kept values before the file is written; "none"
    /// skips the gates. The default covers the BF16 qwen3 gates and the synthetic tiny models'
    /// (Q8_0, Q4_K, Q6_K, BF16), so the quantized kernels' knobs are gated too.
    #[arg(long, default_value = "qwen3,tiny")]
    pub gates: String,
    /// Directory of gate definitions (as `memra gate --gates-dir`).
    #[arg(long, default_value = "gates")]
    pub gates_dir: PathBuf,
    /// Output file [default: boards/defaults/<device>.toml].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue a sweep that was cut short: keep the values in `<out>.partial` (written after
    /// each decided value by a run of the same build, model, N and device) and sweep the rest.
    #[arg(long)]
    pub resume: bool,
}

/// A kept value as a kernel define's text (integers without quotes).
fn define_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn tuned(
    value: toml::Value,
    metric: String,
    unit: &str,
    v: &[f64],
    candidates: Vec<(toml::Value, f64)>,
) -> Tuned {
    let (median, min, max) = stats(v);
    Tuned {
        value,
        metric,
        unit: unit.into(),
        n: v.len(),
        median,
        min,
        max,
        tried: candidates.iter().map(|c| c.0.clone()).collect(),
        tried_medians: candidates.iter().map(|c| c.1).collect(),
        source: None,
    }
}

/// Runs `memra tune`.
pub fn run(args: &TuneArgs, cfg: &Config) -> Result<()> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let reps = args.reps;
    if let Some(w) = args
        .what
        .iter()
        .find(|w| !["kernels", "graphs", "prefill", "spec"].contains(&w.as_str()))
    {
        bail!("--what {w:?}: expected kernels, graphs, prefill or spec (comma-separated)");
    }
    if let Some(k) = args
        .knobs
        .iter()
        .find(|k| !crate::config::KERNEL_DEFINES.contains(&k.as_str()))
    {
        bail!(
            "--knobs {k:?}: not a kernel define (memra tune sweeps the defines of kernel_defines)"
        );
    }
    if !args.knobs.is_empty() && !args.what.iter().any(|w| w == "kernels") {
        bail!("--knobs names kernel defines: it needs --what kernels");
    }
    let dev = crate::defaults::current_device(cfg)?;
    let cuda = crate::backends::use_cuda(cfg)?;
    if args.gates != "none" {
        if !args.gates_dir.is_dir() {
            bail!(
                "gates directory {} not found: run from the repository root, pass --gates-dir, or \
                 --gates none",
                args.gates_dir.display()
            );
        }
        // The gates run after the sweep: a pattern that matches none would waste the sweep.
        let lane = if cuda { "cuda" } else { "cpu" };
        let (gates, _) = crate::gate::select(&args.gates_dir, Some(&args.gates), lane)?;
        if gates.is_empty() {
            let e = crate::gate::no_gates(lane, Some(&args.gates));
            return Err(e.context("--gates (checked before the sweep)"));
        }
    }
    let cuda_only = args.what.iter().any(|w| w == "kernels" || w == "graphs");
    // The CUDA graph settings: with `--what graphs`, or `kernels` sweeping every define.
    let graphs = args.what.iter().any(|w| w == "graphs")
        || (args.what.iter().any(|w| w == "kernels") && args.knobs.is_empty());
    if cuda_only && !cuda {
        eprintln!("kernels, graphs: CUDA only, skipped on the CPU");
        if args.what.iter().all(|w| w == "kernels" || w == "graphs") {
            bail!("nothing to tune on the CPU with --what kernels or graphs (try prefill,spec)");
        }
    }
    // A kernel define is swept when `--what kernels` and `--knobs` (if given) name it.
    let sweeps_knob = |name: &str| {
        args.what.iter().any(|w| w == "kernels")
            && (args.knobs.is_empty() || args.knobs.iter().any(|k| k == name))
    };
    let path = crate::pull::resolve(&args.model, cfg)?;
    let loaded = memra_engine::loader::load(&path)?;
    let c = &loaded.model.config;
    let vocab = c.vocab_size;
    let model_name = path
        .file_name()
        .map_or(args.model.clone(), |f| f.to_string_lossy().into());
    eprintln!(
        "tune on {} ({}), model {model_name}, N = {reps}",
        dev.name,
        if cuda { "cuda" } else { "cpu" }
    );
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("boards/defaults").join(format!("{}.toml", dev.slug())));
    let partial = out.with_extension("toml.partial");
    // The defaults this run starts from (selected by --device-defaults, as every command's).
    let base = crate::defaults::chosen(cfg)?;
    if let Some((origin, b)) = &base {
        if b.device != dev {
            bail!(
                "{origin} is for {:?} ({}, {} SMs), not this device ({:?}, {}, {} SMs): tune on \
                 top of this device's file or with --device-defaults none",
                b.device.name,
                b.device.compute_capability,
                b.device.sm_count,
                dev.name,
                dev.compute_capability,
                dev.sm_count
            );
        }
    }
    let provenance = Provenance {
        commit: env!("MEMRA_BUILD_COMMIT").into(),
        date: crate::dates::today_utc(),
        tool: "memra tune".into(),
        notes: format!(
            "model {model_name}; N = {reps} timed runs per candidate after one warm-up; {} new \
             tokens per decode measurement; measured on top of {}",
            args.new_tokens,
            base.as_ref()
                .map_or("the built-in values".to_string(), |(o, b)| format!(
                    "{o} (commit {})",
                    b.provenance.commit
                ))
        ),
    };
    let (mut engine_vals, mut kernel_vals) = match args.resume {
        true => resume_from(&partial, &dev, &provenance)?
            .map(|p| (p.engine, p.kernels))
            .unwrap_or_default(),
        false => Default::default(),
    };
    // Candidates are measured on top of the device's current defaults (and the config's own
    // defines), with what this run has decided so far over them.
    let mut defines: BTreeMap<String, String> = cfg.kernel_defines.clone();
    defines.extend(
        kernel_vals
            .iter()
            .map(|(k, t)| (k.clone(), define_text(&t.value))),
    );
    // A partial run's values sat beside the defines of another configuration, maybe.
    crate::config::check_define_combinations(&defines)
        .with_context(|| format!("--resume: {} with this configuration", partial.display()))?;
    // The weights every kernel candidate reads (uploaded on the first).
    let mut shared: Option<Shared> = None;
    let save = |e: &BTreeMap<String, Tuned>, k: &BTreeMap<String, Tuned>| {
        save_partial(&partial, &dev, &provenance, e, k)
    };
    if sweeps_knob("QLIN_INT") && cuda && !kernel_vals.contains_key("QLIN_INT") {
        // QLIN_INT (x as integer digits, integer tensor cores for M > 1, and the one-token
        // kernels reading the same digits): it trades prefill against bs=1 decode, so it is kept
        // when a reference request, a 512-token prompt's TTFT plus `--new-tokens` decode steps,
        // is shorter beyond the spread (run 38: 0 decoded 4.6% faster but prefilled 3.5× slower;
        // the old rule, no decode loss at all, kept 0).
        let qlin_int_now = defines
            .get("QLIN_INT")
            .map_or(0, |v| v.trim().parse().unwrap_or(0));
        let mut runs = Vec::new();
        for v in [0u32, 1] {
            let mut d = defines.clone();
            d.insert("QLIN_INT".into(), v.to_string());
            let blocks = (512 + args.new_tokens).div_ceil(cfg.kv_block_size) + 4;
            let mut e = cuda_engine(cfg, &loaded, &mut shared, &d, blocks)?;
            let ttft = ttft_ms(&mut e, vocab, 512, reps)?;
            let tok_s = decode_tok_s(&mut e, vocab, 128, args.new_tokens, reps, 1)?;
            eprintln!(
                "  QLIN_INT={v}: {:.1} ms TTFT, {:.1} tok/s",
                stats(&ttft).0,
                stats(&tok_s).0
            );
            runs.push((v, ttft, tok_s));
        }
        // Per rep: TTFT + new_tokens / tok/s, in ms.
        let request_ms = |r: &(u32, Vec<f64>, Vec<f64>)| -> Vec<f64> {
            r.1.iter()
                .zip(&r.2)
                .map(|(t, d)| t + 1e3 * args.new_tokens as f64 / d.max(1e-9))
                .collect()
        };
        // The current value (the base's, else 0) stays unless the other beats it beyond the
        // spread (its slowest request faster than the current one's fastest).
        let current = usize::from(qlin_int_now == 1);
        let (cur, other) = (&runs[current], &runs[1 - current]);
        let switch = stats(&request_ms(other)).2 < stats(&request_ms(cur)).1;
        let kept = if switch { other } else { cur };
        defines.insert("QLIN_INT".into(), kept.0.to_string());
        kernel_vals.insert(
            "QLIN_INT".into(),
            tuned(
                toml::Value::Integer(kept.0 as i64),
                format!(
                    "time of a reference request: TTFT of a 512-token prompt + {} bs=1 decode \
                     steps at depth 128; the current value ({}) stays unless the other beats it \
                     beyond the spread",
                    args.new_tokens, cur.0
                ),
                "ms",
                &request_ms(kept),
                runs.iter()
                    .map(|r| (toml::Value::Integer(r.0 as i64), stats(&request_ms(r)).0))
                    .collect(),
            ),
        );
        save(&engine_vals, &kernel_vals)?;
    }
    if args.what.iter().any(|w| w == "kernels") && cuda {
        let fmt = loaded.model.layers.first().map(|l| l.w_gate.dtype());
        // QTC_SK = 3 (the wgmma split-K form), the epilogues of its reduce (TCS_GLU = 1,
        // TCS_ROPE = 1) and the reduce inside it (TCK_FUSE = 1) run on sm_90a only.
        let wgmma = memra_engine::backend::cuda::device_identity(cfg.cuda_device)
            .is_ok_and(|id| id.compute_capability == (9, 0));
        for (name, cands, default, depth, batch) in SWEEPS {
            if kernel_vals.contains_key(name)
                || !sweep_applies(name, &defines, fmt)
                || !sweeps_knob(name)
            {
                continue;
            }
            let mut results = Vec::new();
            for &v in cands.iter().filter(|&&v| {
                (name != "ATTN_SPLIT" || v as usize >= c.head_dim)
                    && attn_fits(name, v, &defines)
                    && (name != "QTC_SK" || v != 3 || wgmma)
                    && (!(name.starts_with("TCS_") || name == "TCK_FUSE") || v == 0 || wgmma)
            }) {
                let mut d = defines.clone();
                d.insert(name.into(), v.to_string());
                let positions = depth.unwrap_or(512) + args.new_tokens;
                let blocks = batch * positions.div_ceil(cfg.kv_block_size) + 4;
                let mut e = cuda_engine(cfg, &loaded, &mut shared, &d, blocks)?;
                let s = match depth {
                    Some(depth) => {
                        decode_tok_s(&mut e, vocab, depth, args.new_tokens, reps, batch)?
                    }
                    None => ttft_ms(&mut e, vocab, 512, reps)?,
                };
                eprintln!(
                    "  {name}={v}: {:.1} {}",
                    stats(&s).0,
                    if depth.is_some() { "tok/s" } else { "ms TTFT" }
                );
                results.push((v, s));
            }
            // Higher is better: tok/s, or minus the TTFT.
            let score = |s: &[f64]| {
                let (med, lo, hi) = stats(s);
                if depth.is_some() {
                    (med, lo, hi)
                } else {
                    (-med, -hi, -lo)
                }
            };
            let best = results
                .iter()
                .max_by(|a, b| score(&a.1).0.total_cmp(&score(&b.1).0))
                .context("no candidate")?;
            // The current value (the base's, else the kernel's own default) stays unless the best
            // beats it beyond the measured spread (its worst run above the current one's best).
            let default = current_define(name, &defines, default);
            let kept = match results.iter().find(|r| r.0 == default) {
                Some(def) if score(&best.1).1 <= score(&def.1).2 => def,
                _ => best,
            };
            defines.insert(name.into(), kept.0.to_string());
            let cands = results
                .iter()
                .map(|(v, s)| (toml::Value::Integer(*v as i64), stats(s).0))
                .collect();
            let (metric, unit) = match depth {
                Some(depth) => (
                    format!(
                        "decode tok/s, bs={batch}, depth {depth}, {} new tokens; the current \
                         value ({default}) stays unless beaten beyond the spread",
                        args.new_tokens
                    ),
                    "tok/s",
                ),
                None => (
                    format!(
                        "TTFT of a 512-token prompt; the current value ({default}) stays unless \
                         beaten beyond the spread"
                    ),
                    "ms",
                ),
            };
            kernel_vals.insert(
                name.to_string(),
                tuned(
                    toml::Value::Integer(kept.0 as i64),
                    metric,
                    unit,
                    &kept.1,
                    cands,
                ),
            );
            save(&engine_vals, &kernel_vals)?;
        }
    }
    if graphs && cuda && !engine_vals.contains_key("cuda_graph_max_batch") {
        // CUDA graphs: bs=1 decode with decode steps launched one kernel at a time (0) or
        // replayed as graphs of up to 32 rows; graphs stay unless plain launches beat them
        // beyond the spread.
        // Decode tok/s of `batch` sequences at depth 128 with graphs of up to `g` rows.
        let mut measure = |g: usize, batch: usize| -> Result<(usize, Vec<f64>)> {
            let mut c = cfg.clone();
            c.cuda_graph_max_batch = g;
            let blocks = batch * (128 + args.new_tokens).div_ceil(cfg.kv_block_size) + 4;
            let mut e = cuda_engine(&c, &loaded, &mut shared, &defines, blocks)?;
            let s = decode_tok_s(&mut e, vocab, 128, args.new_tokens, reps, batch)?;
            eprintln!(
                "  cuda_graph_max_batch={g}, bs={batch}: {:.1} tok/s",
                stats(&s).0
            );
            Ok((g, s))
        };
        let results = vec![measure(0, 1)?, measure(32, 1)?];
        let (off, on) = (&results[0], &results[1]);
        let bs1 = format!(
            "decode tok/s, bs=1, depth 128, {} new tokens; graphs (32) stay unless plain launches \
             (0) beat them beyond the spread",
            args.new_tokens
        );
        let (metric, kept, cands) = if stats(&off.1).1 > stats(&on.1).2 {
            (bs1, off.clone(), results)
        } else {
            // Graphs stay: steps of 33-64 rows graphed too (64) against launched (32), by a
            // batch of 48 (H200 run 91: 4,550 -> 4,687 tok/s).
            let wide = vec![measure(32, 48)?, measure(64, 48)?];
            let kept = if stats(&wide[1].1).1 > stats(&wide[0].1).2 {
                wide[1].clone()
            } else {
                wide[0].clone()
            };
            let metric = format!(
                "aggregate decode tok/s, bs=48, depth 128, {} new tokens: graphs up to 32 rows stay \
                 unless up to 64 beats them beyond the spread; first {bs1}: 0 {:.1}, 32 {:.1}",
                args.new_tokens,
                stats(&off.1).0,
                stats(&on.1).0
            );
            (metric, kept, wide)
        };
        let cands = cands
            .iter()
            .map(|(v, s)| (toml::Value::Integer(*v as i64), stats(s).0))
            .collect();
        engine_vals.insert(
            "cuda_graph_max_batch".to_string(),
            tuned(
                toml::Value::Integer(kept.0 as i64),
                metric,
                "tok/s",
                &kept.1,
                cands,
            ),
        );
        save(&engine_vals, &kernel_vals)?;
    }
    let graph_max = engine_vals
        .get("cuda_graph_max_batch")
        .and_then(|t| t.value.as_integer())
        .map_or(cfg.cuda_graph_max_batch, |g| g.max(0) as usize);
    if graphs && cuda && graph_max > 1 && !engine_vals.contains_key("cuda_graph_bucket") {
        // Batch-size buckets: the same ragged batch with a graph per row count (1) and padded
        // to buckets of 8; buckets stay unless a graph per row count beats them beyond the
        // spread (they save captures and step buffers, which this measurement does not count).
        let new = 4 * graph_max;
        let mut results = Vec::new();
        for bucket in [1usize, 8] {
            let mut c = cfg.clone();
            c.cuda_graph_max_batch = graph_max;
            c.cuda_graph_bucket = bucket;
            let blocks = graph_max * (128 + new).div_ceil(cfg.kv_block_size) + 4;
            let mut e = cuda_engine(&c, &loaded, &mut shared, &defines, blocks)?;
            let s = ragged_decode_tok_s(&mut e, vocab, 128, new, reps, graph_max)?;
            eprintln!("  cuda_graph_bucket={bucket}: {:.1} tok/s", stats(&s).0);
            results.push((bucket, s));
        }
        let (exact, padded) = (&results[0], &results[1]);
        let kept = if stats(&exact.1).1 > stats(&padded.1).2 {
            exact
        } else {
            padded
        };
        let cands = results
            .iter()
            .map(|(v, s)| (toml::Value::Integer(*v as i64), stats(s).0))
            .collect();
        engine_vals.insert(
            "cuda_graph_bucket".to_string(),
            tuned(
                toml::Value::Integer(kept.0 as i64),
                format!(
                    "decode tok/s of {graph_max} sequences at depth 128 generating {new}·(i+1)/\
                     {graph_max} tokens each (row counts {graph_max} down to 1); buckets (8) stay \
                     unless a graph per row count (1) beats them beyond the spread"
                ),
                "tok/s",
                &kept.1,
                cands,
            ),
        );
        save(&engine_vals, &kernel_vals)?;
    }
    drop(shared);
    let mut run_cfg = cfg.clone();
    run_cfg.kernel_defines.extend(defines.clone());
    if let Some(g) = engine_vals
        .get("cuda_graph_max_batch")
        .and_then(|t| t.value.as_integer())
    {
        run_cfg.cuda_graph_max_batch = g.max(0) as usize;
    }
    if let Some(g) = engine_vals
        .get("cuda_graph_bucket")
        .and_then(|t| t.value.as_integer())
    {
        run_cfg.cuda_graph_bucket = g.max(1) as usize;
    }
    let mut engine = crate::run::make_engine(&loaded, &run_cfg)?;
    if let Some(t) = engine_vals.get("prefill_chunk") {
        engine.prefill_chunk = t.value.as_integer().unwrap_or(512).max(1) as usize;
    } else if args.what.iter().any(|w| w == "prefill") {
        let len = if cuda { 2048 } else { 256 };
        let mut results = Vec::new();
        for chunk in [128usize, 256, 512, 1024]
            .into_iter()
            .filter(|&ch| ch <= len)
        {
            engine.prefill_chunk = chunk;
            let s = ttft_ms(&mut engine, vocab, len, reps)?;
            eprintln!("  prefill_chunk={chunk}: TTFT {:.1} ms", stats(&s).0);
            results.push((chunk, s));
        }
        let best = results
            .iter()
            .min_by(|a, b| stats(&a.1).0.total_cmp(&stats(&b.1).0))
            .context("no candidate")?;
        engine.prefill_chunk = best.0;
        let cands = results
            .iter()
            .map(|(v, s)| (toml::Value::Integer(*v as i64), stats(s).0))
            .collect();
        engine_vals.insert(
            "prefill_chunk".to_string(),
            tuned(
                toml::Value::Integer(best.0 as i64),
                format!("TTFT of a {len}-token prompt"),
                "ms",
                &best.1,
                cands,
            ),
        );
        save(&engine_vals, &kernel_vals)?;
    }
    if args.what.iter().any(|w| w == "spec") && !engine_vals.contains_key("spec_max_running") {
        let (k, alpha) = (4usize, 0.6f64);
        let depth = 256;
        // Verify costs of k = 1, 2, 4, 8 drafts (k+1 rows) in decode rows, fitted as
        // base + k·row: a step of more than one row may take a slower kernel path (a fixed part),
        // and each further row adds its own (run 40 on the H200: 5 rows = 2.03 decode rows).
        let one = forward_ms(&mut engine, vocab, 1, 1, depth, reps)?;
        let mut costs = Vec::new();
        for d in SPEC_FIT_DRAFTS {
            costs.push(forward_ms(&mut engine, vocab, 1, d + 1, depth, reps)? / one);
        }
        let (base, row_cost) = fit_verify_cost(&SPEC_FIT_DRAFTS, &costs);
        let gain = |a: f64| (1.0 - a.powi(k as i32 + 1)) / (1.0 - a);
        let min_acc = f64::from(memra_engine::spec::break_even_acceptance(
            base as f32,
            row_cost as f32,
            16,
        ));
        let listed = |v: &[f64]| {
            v.iter()
                .map(|c| format!("{c:.3}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        eprintln!(
            "  verify of k = {SPEC_FIT_DRAFTS:?} drafts = {} decode rows: base {base:.2}, row \
             {row_cost:.3}; break-even acceptance {min_acc:.2}",
            listed(&costs)
        );
        let fit = format!(
            "verify of k = {SPEC_FIT_DRAFTS:?} drafts (k+1 rows) at depth {depth}: {} decode rows, \
             fitted by least squares as base + k·row",
            listed(&costs)
        );
        let tried_k: Vec<(toml::Value, f64)> = SPEC_FIT_DRAFTS
            .iter()
            .zip(&costs)
            .map(|(&d, &c)| (toml::Value::Integer(d as i64), c))
            .collect();
        engine_vals.insert(
            "spec_min_acceptance".into(),
            tuned(
                toml::Value::Float((min_acc * 100.0).round() / 100.0),
                format!("{fit}; the lowest per-token acceptance at which some draft length 1..16 pays (spec::break_even_acceptance)"),
                "acceptance",
                &[min_acc],
                vec![],
            ),
        );
        engine_vals.insert(
            "spec_row_cost".into(),
            tuned(
                toml::Value::Float((row_cost * 1000.0).round() / 1000.0),
                format!("{fit}: the cost of one more draft row (tried: k, median: verify cost)"),
                "decode rows",
                &[row_cost],
                tried_k,
            ),
        );
        engine_vals.insert(
            "spec_verify_base".into(),
            tuned(
                toml::Value::Float((base * 1000.0).round() / 1000.0),
                format!("{fit}: the fixed part (at least 1)"),
                "decode rows",
                &[base],
                vec![],
            ),
        );
        let mut best_b = 1usize;
        let mut cands = Vec::new();
        // Batch sizes whose sequences' KV fits: whole blocks of depth + K + 1 positions each.
        let per_seq = (depth + k + 1).div_ceil(engine.blocks.block_size());
        let cap = engine.blocks.num_blocks() / per_seq;
        for b in [1usize, 2, 4, 8, 16, 32, 64]
            .into_iter()
            .filter(|&b| b <= cap)
        {
            let plain = forward_ms(&mut engine, vocab, b, 1, depth, reps)?;
            let spec = forward_ms(&mut engine, vocab, b, k + 1, depth, reps)?;
            let cb = spec / plain;
            eprintln!(
                "  batch {b}: verify costs {cb:.2} decode steps (pays below {:.2})",
                gain(alpha)
            );
            cands.push((toml::Value::Integer(b as i64), cb));
            if cb < gain(alpha) {
                best_b = b;
            }
        }
        let med: Vec<f64> = cands.iter().map(|c| c.1).collect();
        engine_vals.insert(
            "spec_max_running".into(),
            tuned(
                toml::Value::Integer(best_b as i64),
                format!("verify cost (K+1 = {} rows per sequence) in decode steps per batch size; pays while below {:.2} tokens per verify at acceptance {alpha}", k + 1, gain(alpha)),
                "decode steps",
                &med,
                cands,
            ),
        );
        save(&engine_vals, &kernel_vals)?;
    }
    drop(engine);
    // The values this run did not sweep stay as the defaults it started from had them (each
    // with its own metric and figures).
    let mut provenance = provenance;
    let (mut engine_out, mut kernels_out) = (BTreeMap::new(), BTreeMap::new());
    if let Some((origin, b)) = &base {
        let kept = b
            .engine
            .keys()
            .filter(|k| !engine_vals.contains_key(*k))
            .chain(b.kernels.keys().filter(|k| !kernel_vals.contains_key(*k)))
            .count();
        if kept > 0 {
            provenance.notes.push_str(&format!(
                "; {kept} values not swept kept from {origin} ({} {}, commit {})",
                b.provenance.tool, b.provenance.date, b.provenance.commit
            ));
        }
        // Each kept entry keeps its own source, or takes the base file's provenance, so the file
        // written never credits this run with a value it did not measure.
        let base_src = format!(
            "{} {}, commit {}",
            b.provenance.tool, b.provenance.date, b.provenance.commit
        );
        let stamp = |m: &BTreeMap<String, Tuned>| -> BTreeMap<String, Tuned> {
            m.iter()
                .map(|(k, t)| {
                    let mut t = t.clone();
                    t.source.get_or_insert_with(|| base_src.clone());
                    (k.clone(), t)
                })
                .collect()
        };
        engine_out.extend(stamp(&b.engine));
        kernels_out.extend(stamp(&b.kernels));
    }
    engine_out.extend(engine_vals);
    kernels_out.extend(kernel_vals);
    let file = DeviceDefaults {
        device: dev.clone(),
        provenance,
        engine: engine_out,
        kernels: kernels_out,
    };
    if let Some(d) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    let candidate = out.with_extension("toml.candidate");
    std::fs::write(&candidate, toml::to_string_pretty(&file)?)?;
    if args.gates != "none" {
        let lane = if cuda { "cuda" } else { "cpu" };
        eprintln!(
            "gates with the kept values: memra gate --lane {lane} --only {}",
            args.gates
        );
        let st = std::process::Command::new(std::env::current_exe()?)
            .arg("--device-defaults")
            .arg(&candidate)
            .args(["gate", "--lane", lane, "--only", &args.gates, "--gates-dir"])
            .arg(&args.gates_dir)
            .status()
            .context("running memra gate")?;
        if !st.success() {
            bail!(
                "the gates are red with the tuned values; nothing written (candidate left in {})",
                candidate.display()
            );
        }
    }
    std::fs::rename(&candidate, &out)?;
    let _ = std::fs::remove_file(&partial);
    println!("{}", toml::to_string_pretty(&file)?);
    eprintln!("wrote {}", out.display());
    Ok(())
}
