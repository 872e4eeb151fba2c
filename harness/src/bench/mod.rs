//! `memra bench`: measured figures, one JSONL row each (DESIGN.md §5), in
//! `research/tune-data/<device>.jsonl` unless `--out` says otherwise.
//!
//! Scenarios so far: `decode` (tok/s at batch sizes and context depths, with achieved GB/s against
//! the copy bandwidth measured in the same run) and `ttft` (time to first token at prompt
//! lengths). Each figure: warm-up runs, then N timed runs; median, min and max.

mod rows;

use crate::config::Config;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use memra_engine::engine::{Engine, GenerateRequest};
use memra_engine::loader::LoadedModel;
use memra_engine::sample::SamplingParams;
use rows::{Row, Stats};
use std::path::PathBuf;
use std::time::Instant;

/// What `memra bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Decode tok/s (aggregate over the batch) after a prompt of `--depth` tokens.
    Decode,
    /// Time to first token (prefill of the whole prompt plus the first token's logits).
    Ttft,
}

/// Arguments of `memra bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The scenario.
    pub scenario: Scenario,
    /// Model: a catalog name, hf:owner/repo[:file], a .gguf file or an HF checkpoint directory.
    #[arg(long, default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// decode: batch sizes (sequences decoding together), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub batch: Vec<usize>,
    /// decode: context depths (prompt tokens before decoding starts), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128")]
    pub depth: Vec<usize>,
    /// decode: tokens generated per sequence.
    #[arg(long, default_value_t = 256)]
    pub new_tokens: usize,
    /// ttft: prompt lengths in tokens, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "512,1024,4096")]
    pub prompt_len: Vec<usize>,
    /// Timed runs per figure (N).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Untimed warm-up runs per figure.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// JSONL file the rows are appended to [default: research/tune-data/<device>.jsonl].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Random prompt ids in `[0, vocab)` from a fixed seed (splitmix64), so every run and every
/// backend sees the same tokens.
fn prompt_ids(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % vocab as u64) as u32
        })
        .collect()
}

fn requests(
    batch: usize,
    prompt_len: usize,
    new_tokens: usize,
    vocab: usize,
) -> Vec<GenerateRequest> {
    (0..batch)
        .map(|i| GenerateRequest {
            prompt: prompt_ids(prompt_len, vocab, 1 + i as u64),
            params: SamplingParams::greedy(),
            max_tokens: new_tokens,
            // No stop tokens: every sequence decodes exactly `new_tokens`.
            stop_ids: vec![],
            sequence: i as u32,
        })
        .collect()
}

/// Seconds of one `run_batch` over `reqs`.
fn time_batch(engine: &mut Engine, reqs: &[GenerateRequest]) -> Result<f64> {
    let t = Instant::now();
    let out = engine.run_batch(reqs, false)?;
    let secs = t.elapsed().as_secs_f64();
    for (o, r) in out.iter().zip(reqs) {
        if o.tokens.len() != r.max_tokens {
            bail!(
                "a sequence stopped after {} of {} tokens",
                o.tokens.len(),
                r.max_tokens
            );
        }
    }
    Ok(secs)
}

/// Runs `memra bench`.
pub fn run(args: &BenchArgs, cfg: &Config) -> Result<()> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let path = crate::pull::resolve(&args.model, cfg)?;
    let loaded = memra_engine::loader::load(&path)?;
    let mut engine = crate::run::make_engine(&loaded, cfg)?;
    let env = rows::Env::measure(cfg, &engine, &loaded, &path)?;
    let out = match &args.out {
        Some(p) => p.clone(),
        None => PathBuf::from("research/tune-data").join(format!("{}.jsonl", env.device_slug())),
    };
    eprintln!(
        "bench {:?} on {} ({}), copy bandwidth {:.0} GB/s; rows -> {}",
        args.scenario,
        env.device,
        env.backend,
        env.copy_gbps,
        out.display()
    );
    let rows = match args.scenario {
        Scenario::Decode => decode(args, &mut engine, &loaded, &env)?,
        Scenario::Ttft => ttft(args, &mut engine, &loaded, &env)?,
    };
    rows::append(&out, &rows).with_context(|| format!("writing {}", out.display()))?;
    print!("{}", rows::table(&rows));
    Ok(())
}

fn decode(
    args: &BenchArgs,
    engine: &mut Engine,
    loaded: &LoadedModel,
    env: &rows::Env,
) -> Result<Vec<Row>> {
    let c = &loaded.model.config;
    let mut rows = Vec::new();
    for &depth in &args.depth {
        for &batch in &args.batch {
            let full = requests(batch, depth.max(1), args.new_tokens, c.vocab_size);
            let first = requests(batch, depth.max(1), 1, c.vocab_size);
            // Decode time = the whole run minus the same run stopped after its first token
            // (prefill + one logits row), interleaved so drift hits both alike.
            let mut samples = Vec::with_capacity(args.reps);
            for i in 0..args.warmup + args.reps {
                let t_full = time_batch(engine, &full)?;
                let t_first = time_batch(engine, &first)?;
                if i >= args.warmup {
                    let steps = (args.new_tokens - 1).max(1) as f64;
                    let decode_secs = (t_full - t_first).max(1e-9);
                    samples.push(steps * batch as f64 / decode_secs);
                }
            }
            let stats = Stats::of(&samples);
            // Bytes one decode step reads: every weight once, plus each sequence's KV so far
            // (at the median depth of the run).
            let kv = env.kv_bytes_per_token * batch * (depth + args.new_tokens / 2);
            let step_bytes = (env.weight_bytes + kv) as f64;
            let steps_per_s = stats.median / batch as f64;
            let gbps = step_bytes * steps_per_s / 1e9;
            rows.push(env.row(
                "decode",
                serde_json::json!({"batch": batch, "depth": depth, "new_tokens": args.new_tokens}),
                stats,
                "tok/s",
                Some(gbps),
            ));
        }
    }
    Ok(rows)
}

fn ttft(
    args: &BenchArgs,
    engine: &mut Engine,
    loaded: &LoadedModel,
    env: &rows::Env,
) -> Result<Vec<Row>> {
    let c = &loaded.model.config;
    let mut rows = Vec::new();
    for &len in &args.prompt_len {
        if len + 1 > engine.blocks.num_blocks() * engine.blocks.block_size() {
            bail!("a {len}-token prompt does not fit the KV cache; raise --kv-cache-mib");
        }
        let reqs = requests(1, len.max(1), 1, c.vocab_size);
        let mut samples = Vec::with_capacity(args.reps);
        for i in 0..args.warmup + args.reps {
            let secs = time_batch(engine, &reqs)?;
            if i >= args.warmup {
                samples.push(secs * 1e3);
            }
        }
        rows.push(env.row(
            "ttft",
            serde_json::json!({"prompt_len": len, "prefill_chunk": engine.prefill_chunk}),
            Stats::of(&samples),
            "ms",
            None,
        ));
    }
    Ok(rows)
}
