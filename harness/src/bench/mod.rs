//! `memra bench`: measured figures, one JSONL row each (DESIGN.md §5), in
//! `research/tune-data/<device>.jsonl` unless `--out` says otherwise.
//!
//! Scenarios: `decode` (tok/s at batch sizes and context depths, with achieved GB/s against the
//! copy bandwidth measured in the same run), `ttft` (time to first token at prompt lengths),
//! `serve` (a `memra serve` child process under a built-in load generator: closed loop at each
//! concurrency and open loop with Poisson arrivals; TTFT and inter-token latency percentiles,
//! aggregate tok/s, errors), `spec` (speculative decoding against plain decode per prompt class:
//! speedup and acceptance, interleaved A/B) and `prefix` (TTFT with the prompt's prefix in the
//! prefix cache against cold, interleaved). Each figure: warm-up runs, then N timed runs; median,
//! min and max. `--compare REF.jsonl` re-measures REF's cells and flags changes beyond the spread
//! ([`compare`]).

mod against;
mod anchors;
mod compare;
mod flags;
mod prefix;
mod rounds;
pub(crate) mod rows;
mod sched;
mod serve;
mod spec;

use crate::config::Config;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
pub use flags::{check_scenario_flags, check_serve_flags};
use memra_engine::engine::{Engine, GenerateRequest};
use memra_engine::loader::LoadedModel;
use memra_engine::models::ModelConfig;
use memra_engine::sample::SamplingParams;
use rows::{Env, Row, Stats};
use std::path::PathBuf;
use std::time::Instant;

/// Largest token count a flag takes (prompt lengths, depths, new tokens, `run --max-tokens`):
/// 16 Mi tokens, past any model's context, so sums of such counts cannot overflow and a typo is
/// refused by the parser instead of wrapping past the context checks.
pub const MAX_TOKENS: u64 = 1 << 24;
/// Largest batch a bench flag takes.
pub const MAX_ROWS: u64 = 1 << 16;
/// Largest count of timed or warm-up runs a bench flag takes.
pub const MAX_REPS: u64 = 1 << 20;

/// What `memra bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Decode tok/s (aggregate over the batch) after a prompt of `--depth` tokens.
    Decode,
    /// Time to first token (prefill of the whole prompt plus the first token's logits).
    Ttft,
    /// `memra serve` as a child process under a load generator streaming /v1/completions:
    /// closed loop at each `--concurrency`, open loop (Poisson arrivals) at each `--rate`. Per
    /// level three rows: aggregate output tok/s, TTFT and inter-token latency (p50/p90/p99 and
    /// error counts in `extra`). The server gets this command's config flags (backend, KV cache,
    /// serve limits, ...) but binds 127.0.0.1 on a free port without API keys.
    Serve,
    /// Speculative decoding vs plain decode through the scheduler, per prompt class
    /// (gates/prompts/spec_CLASS.jsonl), each `--method` and `--k`: decode speedup (paired,
    /// interleaved plain/spec runs) and acceptance; outputs must be identical.
    Spec,
    /// TTFT of a prompt whose first `prompt_len - suffix_len` tokens are in the prefix cache vs
    /// the same-length prompt cold, interleaved, through the scheduler; rows for both and the
    /// cold/hit ratio.
    Prefix,
}

impl Scenario {
    /// The name rows carry.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Decode => "decode",
            Scenario::Ttft => "ttft",
            Scenario::Serve => "serve",
            Scenario::Spec => "spec",
            Scenario::Prefix => "prefix",
        }
    }
}

/// Arguments of `memra bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// The scenario (with --compare: only REF's cells of this scenario; omit it for all).
    #[arg(required_unless_present = "compare")]
    pub scenario: Option<Scenario>,
    /// Model: a catalog name, hf:owner/repo[@revision][:file], synth:SHAPE:DTYPE, a .gguf file or an HF
    /// checkpoint directory.
    #[arg(long, default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// decode: batch sizes (sequences decoding together), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_ROWS))]
    pub batch: Vec<usize>,
    /// decode: context depths (prompt tokens before decoding starts), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_TOKENS))]
    pub depth: Vec<usize>,
    /// decode, serve, spec: tokens generated per sequence (end-of-sequence ignored).
    #[arg(long, default_value_t = 256, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_TOKENS))]
    pub new_tokens: usize,
    /// ttft, prefix: prompt lengths in tokens, comma-separated (ttft skips, with a note, lengths
    /// beyond the model's context).
    #[arg(long, value_delimiter = ',', default_value = "512,1024,4096,16384",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_TOKENS))]
    pub prompt_len: Vec<usize>,
    /// prefix: tokens after the cached prefix. The prefix cache shares whole KV blocks, so a hit
    /// prefills these plus the prefix's last partial block (row field `cached_tokens`).
    #[arg(long, default_value_t = 32, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_TOKENS))]
    pub suffix_len: usize,
    #[command(flatten)]
    pub load: Box<LoadArgs>,
    #[command(flatten)]
    pub spec: Box<SpecArgs>,
    /// Timed runs per figure (N).
    #[arg(long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_REPS))]
    pub reps: usize,
    /// Untimed warm-up runs per figure.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_REPS))]
    pub warmup: usize,
    /// serve, prefix: seed of the random prompts and of the Poisson arrivals (decode, ttft and spec
    /// use fixed prompts).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Re-measure every cell (scenario, params) of this JSONL file that was measured on this
    /// device, backend, model and engine settings (and of SCENARIO, when one is named; a cell
    /// held by several rows takes the latest), and flag each whose new
    /// median falls outside the file's [min, max] widened by the new run's half-spread; exits
    /// non-zero when any cell got worse beyond it or could not be re-measured. Writes rows only
    /// with --out. The cells are REF's: --batch, --depth, --new-tokens and --vs are not used.
    /// A serve TTFT or ITL row's [min, max] spans single requests, so its verdict is loose; its
    /// throughput row is the tight one.
    #[arg(long, value_name = "REF.jsonl")]
    pub compare: Option<PathBuf>,
    /// With --compare: another build's `memra` binary that measures REF's cells now, run by run
    /// interleaved with this build, as the reference (it gets the flags given before `bench`).
    /// This build drops its engine (KV cache) before each of BIN's runs, so every run of either
    /// side builds an engine and warms up; BIN loads the model every run (for an 8B model on a
    /// GPU, tens of seconds a run: size --reps accordingly).
    #[arg(long, value_name = "BIN", requires = "compare")]
    pub against: Option<PathBuf>,
    /// JSONL file the rows are appended to [default: research/tune-data/<device>.jsonl].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// decode and ttft: anchors measured in the same call on the same weights and cells (decode:
    /// hf-eager, gpt-fast, llama.cpp; ttft: llama.cpp), written into each row's `anchor` with
    /// the ratio memra / anchor.
    #[arg(long, value_delimiter = ',')]
    pub vs: Vec<anchors::Anchor>,
    /// The llama-bench binary for `--vs llama.cpp`.
    #[arg(long, default_value = "llama-bench")]
    pub llama_bench: String,
    /// With --vs (ignored otherwise): rounds the comparison is interleaved in (each runs every
    /// anchor and memra's cells, in alternating order, with --reps split between them, rounded
    /// up); figures are over all the rounds' runs, each round's median kept in the row.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
}

/// The load generator of `memra bench serve` (boxed in [`BenchArgs`] to keep it small).
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// serve: closed-loop concurrency levels, comma-separated [default: 1,2,4,8,16,32,64 when
    /// --rate is not given either].
    #[arg(long, value_delimiter = ',')]
    pub concurrency: Option<Vec<usize>>,
    /// serve: open-loop arrival rates in requests/s (Poisson), comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub rate: Vec<f64>,
    /// serve: requests per timed run [default (or 0): 4 x concurrency, at least 8; open loop:
    /// 10 x rate, at least 16].
    #[arg(
        long,
        default_value_t = 0,
        hide_default_value = true,
        conflicts_with = "duration"
    )]
    pub requests: usize,
    /// serve: instead of a request count, issue requests for this many seconds per timed run
    /// (those in flight then finish and count).
    #[arg(long)]
    pub duration: Option<f64>,
    /// serve: prompt tokens per request (random token ids, distinct per request so the prefix
    /// cache never serves them).
    #[arg(long, default_value_t = 128)]
    pub input_len: usize,
    /// serve: a fixed text prompt instead of random tokens (each request's copy is prefixed with
    /// its number, so the prefix cache does not serve it); its rows carry no input_len.
    #[arg(long, conflicts_with = "input_len")]
    pub prompt_text: Option<String>,
}

/// The drafters and prompts of `memra bench spec`.
#[derive(Debug, Clone, Args)]
pub struct SpecArgs {
    /// spec: prompt classes, read from PROMPTS_DIR/spec_CLASS.jsonl, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "chat,code,agentic")]
    pub class: Vec<String>,
    /// spec: directory of the prompt sets.
    #[arg(long, default_value = "gates/prompts")]
    pub prompts_dir: PathBuf,
    /// spec: drafters, comma-separated: ngram[:N] (prompt lookup), layerskip:L (the first L
    /// layers draft), draft (the --draft-model).
    #[arg(long, value_delimiter = ',', default_value = "ngram")]
    pub method: Vec<String>,
    /// spec: draft tokens per verify (1..=16), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4")]
    pub k: Vec<usize>,
    /// spec: end each request at the model's end-of-sequence token (at most --new-tokens), as a
    /// served request ends, instead of generating exactly --new-tokens; the rows say
    /// `"stop": "eos"`. Without it, text past the answer's end (which small models fill with
    /// invented turns) is measured as part of the class.
    #[arg(long)]
    pub stop_at_eos: bool,
}

/// What every scenario of one run shares: the model, the measured environment, and the engine
/// that decode and ttft time (built on first use and dropped before a scenario that builds its
/// own scheduler or server, so two KV caches never share a GPU).
pub struct Ctx<'a> {
    pub cfg: &'a Config,
    pub path: PathBuf,
    pub loaded: LoadedModel,
    pub env: Env,
    engine: Option<Engine>,
    /// Next seed for a random prompt that must not repeat within the run.
    next_seed: u64,
}

impl Ctx<'_> {
    /// A seed not used before in this run.
    pub fn fresh_seed(&mut self) -> u64 {
        self.next_seed += 1;
        self.next_seed
    }
}

/// The next value of a splitmix64 sequence whose state is `s`.
pub fn splitmix64(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Random prompt ids in `[0, vocab)` from a fixed seed (splitmix64), so every run and every
/// backend sees the same tokens.
pub fn prompt_ids(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| (splitmix64(&mut s) % vocab as u64) as u32)
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
    run_full(engine, reqs)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Seconds of the decode part of one `run_batch` over `reqs`: from the return of the forward
/// that picked the last sequence's first token (the end of prefill) to the return of the run,
/// which is `max_tokens - 1` decode forwards. Errors if a sequence stopped early.
pub(crate) fn time_decode(engine: &mut Engine, reqs: &[GenerateRequest]) -> Result<f64> {
    let out = run_full(engine, reqs)?;
    let end = Instant::now();
    let start = out
        .iter()
        .filter_map(|o| o.first_token_at)
        .max()
        .context("no sequence produced a token")?;
    Ok((end - start).as_secs_f64())
}

fn run_full(
    engine: &mut Engine,
    reqs: &[GenerateRequest],
) -> Result<Vec<memra_engine::engine::BatchOutput>> {
    let out = engine.run_batch(reqs, false)?;
    for (o, r) in out.iter().zip(reqs) {
        if o.tokens.len() != r.max_tokens {
            bail!(
                "a sequence stopped after {} of {} tokens",
                o.tokens.len(),
                r.max_tokens
            );
        }
    }
    Ok(out)
}

/// Timed runs a board figure asks for (DESIGN.md §5): `bench` warns below it, `boards` marks
/// figures with fewer.
pub const BOARD_MIN_RUNS: usize = 5;

/// Runs `memra bench`.
pub fn run(args: &BenchArgs, cfg: &Config) -> Result<()> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    if args.reps < BOARD_MIN_RUNS {
        tracing::warn!(
            reps = args.reps,
            min = BOARD_MIN_RUNS,
            "fewer timed runs than a board figure asks for (DESIGN.md §5)"
        );
    }
    if !args.vs.is_empty()
        && args.compare.is_none()
        && !matches!(args.scenario, Some(Scenario::Decode | Scenario::Ttft))
    {
        bail!("--vs anchors are measured for decode and ttft cells only");
    }
    if args.compare.is_none() && args.scenario == Some(Scenario::Ttft) {
        if let Some(a) = args.vs.iter().find(|a| **a != anchors::Anchor::LlamaCpp) {
            let name = a
                .to_possible_value()
                .map_or("?".into(), |v| v.get_name().to_string());
            bail!("--vs {name}: the HF anchors time decode only; ttft cells take --vs llama.cpp");
        }
    }
    let path = crate::pull::resolve(&args.model, cfg)?;
    let loaded = memra_engine::loader::load(&path)?;
    let env = Env::measure(cfg, &loaded, &path)?;
    let mut ctx = Ctx {
        cfg,
        path,
        loaded,
        env,
        engine: None,
        next_seed: args.seed.wrapping_mul(1 << 32),
    };
    let out = match &args.out {
        Some(p) => Some(p.clone()),
        None if args.compare.is_some() => None,
        None => Some(
            PathBuf::from("research/tune-data").join(format!("{}.jsonl", ctx.env.device_slug())),
        ),
    };
    // Before anything is measured: a path rows cannot be appended to would lose them all.
    let appendable = |p: &std::path::Path| {
        rows::check_appendable(p).with_context(|| format!("--out {}", p.display()))
    };
    if let Some(reference) = &args.compare {
        if let Some(p) = &out {
            appendable(p)?;
        }
        return compare::run(args, &mut ctx, reference, out.as_deref());
    }
    let scenario = args.scenario.context("name a scenario")?;
    check_cells(scenario, args, &ctx.loaded.model.config)?;
    let out = out.expect("set without --compare");
    appendable(&out)?;
    eprintln!(
        "bench {} on {} ({}), copy bandwidth {:.0} GB/s; rows -> {}",
        scenario.name(),
        ctx.env.device,
        ctx.env.backend,
        ctx.env.copy_gbps,
        out.display()
    );
    // With anchors, rounds alternate their order (anchors then memra, memra then anchors, ...)
    // and split the reps between them (rounded up), so drift during the call hits both sides
    // alike. memra's engine is dropped at the end of each round: its KV cache takes most of the
    // device memory (gpu_memory_utilization), which an anchor's process needs (anchors.rs).
    let rounds = if args.vs.is_empty() {
        1
    } else {
        args.rounds.max(1)
    };
    let round_args = BenchArgs {
        reps: args.reps.div_ceil(rounds),
        ..args.clone()
    };
    let (mut row_rounds, mut anchor_rounds) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let memra_first = r % 2 == 1;
        if !memra_first {
            anchor_rounds.push(measure_anchors(&round_args, &ctx));
        }
        if rounds > 1 {
            eprintln!("round {} of {rounds}: memra", r + 1);
        }
        row_rounds.push(measure(scenario, &round_args, &mut ctx)?);
        if !args.vs.is_empty() {
            ctx.engine = None;
        }
        if memra_first {
            anchor_rounds.push(measure_anchors(&round_args, &ctx));
        }
    }
    let mut rows = rounds::merge_rows(row_rounds);
    let anchored = rounds::merge_anchors(anchor_rounds);
    for row in rows.iter_mut() {
        // An anchor cell's params are the row's, or (ttft: without prefill_chunk) a part of them.
        let Some((_, all)) = anchored.iter().find(|(params, _)| {
            params
                .as_object()
                .is_some_and(|p| p.iter().all(|(k, v)| row.params.get(k) == Some(v)))
        }) else {
            continue;
        };
        let mut all = all.clone();
        if let Some(map) = all.as_object_mut() {
            for v in map.values_mut() {
                if let Some(m) = v["median"].as_f64().filter(|m| *m > 0.0) {
                    v["ratio"] = serde_json::json!(row.stats.median / m);
                }
            }
        }
        row.anchor = Some(all);
    }
    // Written before the table is printed: a reader that stops early (`| head`) cannot lose them.
    rows::append(&out, &rows).with_context(|| format!("writing {}", out.display()))?;
    print!("{}", rows::table(&rows));
    let failed = rows
        .iter()
        .filter_map(|r| r.anchor.as_ref()?.as_object())
        .flat_map(|m| m.values())
        .filter(|v| v.get("error").is_some())
        .count();
    if failed > 0 {
        bail!(
            "{failed} anchor measurement(s) failed (errors above; the rows were written with each \
             anchor's `error`)"
        );
    }
    Ok(())
}

/// Rejects decode and ttft cells that cannot be measured as asked, before anything runs:
/// `--batch 0`, `--depth 0`, `--new-tokens` below 2, a depth plus new tokens past the model's
/// context (`max_context` positions; 0 = unknown, unchecked), `--prompt-len 0`, or no prompt
/// length that fits (a prompt and its first token take `prompt_len + 1` positions; longer ones
/// are skipped with a note).
fn check_cells(scenario: Scenario, args: &BenchArgs, c: &ModelConfig) -> Result<()> {
    let ctx = c.max_context;
    match scenario {
        Scenario::Decode => {
            if args.batch.contains(&0) {
                bail!("--batch must be at least 1");
            }
            if args.depth.contains(&0) {
                bail!("--depth must be at least 1 (a decode needs a prompt)");
            }
            if args.new_tokens < 2 {
                bail!("decode needs --new-tokens of at least 2 (the first comes from prefill)");
            }
            if let Some(d) = args
                .depth
                .iter()
                .find(|&&d| ctx > 0 && d + args.new_tokens > ctx)
            {
                bail!(
                    "--depth {d} plus --new-tokens {} is {} positions, beyond the model's \
                     context of {ctx} tokens",
                    args.new_tokens,
                    d + args.new_tokens
                );
            }
        }
        Scenario::Prefix if ctx > 0 && args.prompt_len.iter().all(|&l| l + 1 > ctx) => {
            bail!(
                "no --prompt-len fits the model's context of {ctx} tokens (a prompt and its \
                 first token take prompt_len + 1 positions)"
            );
        }
        Scenario::Ttft => {
            if args.prompt_len.contains(&0) {
                bail!("--prompt-len must be at least 1");
            }
            if ctx > 0 && args.prompt_len.iter().all(|&l| l + 1 > ctx) {
                bail!(
                    "no --prompt-len fits the model's context of {ctx} tokens (a prompt and its \
                     first token take prompt_len + 1 positions)"
                );
            }
        }
        _ => {}
    }
    Ok(())
}

/// Measures every `--vs` anchor on every decode cell of `args` (depth × batch, as `decode` walks
/// them) or ttft cell (each prompt length within the model's context), keyed by the cell's row
/// params (ttft: the prompt length); memra's rows get them attached (`anchor`: the anchors
/// by name, each with median/min/max and `ratio` = memra median / anchor median). An anchor that
/// cannot run is recorded with its error, never silently dropped.
fn measure_anchors(args: &BenchArgs, ctx: &Ctx) -> Vec<(serde_json::Value, serde_json::Value)> {
    let repo = std::env::current_dir().unwrap_or_default();
    let inp = anchors::Inputs {
        spec: &args.model,
        path: &ctx.path,
        cache_dir: &ctx.cfg.cache_dir,
        python: &ctx.cfg.python,
        llama_bench: &args.llama_bench,
        repo: &repo,
        cpu_threads: (ctx.env.backend == "cpu").then_some(ctx.env.threads),
    };
    let mut out = Vec::new();
    if args.vs.is_empty() {
        return out;
    }
    let mut cells = Vec::new();
    if args.scenario == Some(Scenario::Ttft) {
        let ctx_len = ctx.loaded.model.config.max_context;
        for &len in &args.prompt_len {
            if ctx_len == 0 || len < ctx_len {
                let params = serde_json::json!({"prompt_len": len});
                cells.push((params, (1, 0, 0, len)));
            }
        }
    } else {
        for &depth in &args.depth {
            for &batch in &args.batch {
                let params = serde_json::json!({"batch": batch, "depth": depth,
                                                "new_tokens": args.new_tokens});
                cells.push((params, (batch, depth, args.new_tokens, 0)));
            }
        }
    }
    for (params, (batch, depth, new_tokens, prompt_len)) in cells {
        let cell = anchors::Cell {
            batch,
            depth,
            new_tokens,
            prompt_len,
            reps: args.reps,
            warmup: args.warmup,
        };
        let mut all = serde_json::Map::new();
        for &a in &args.vs {
            let name = a
                .to_possible_value()
                .map_or("?".into(), |v| v.get_name().to_string());
            eprintln!("anchor {name} on {params}");
            let v = anchors::measure(a, &cell, &inp).unwrap_or_else(|e| {
                eprintln!("anchor {name} on {params} failed: {e:#}");
                serde_json::json!({"name": name, "error": format!("{e:#}")})
            });
            all.insert(name, v);
        }
        out.push((params, serde_json::Value::Object(all)));
    }
    out
}

/// The rows of one scenario under `args`.
fn measure(scenario: Scenario, args: &BenchArgs, ctx: &mut Ctx) -> Result<Vec<Row>> {
    if matches!(scenario, Scenario::Decode | Scenario::Ttft) {
        if ctx.engine.is_none() {
            ctx.engine = Some(crate::run::make_engine(&ctx.loaded, ctx.cfg)?);
        }
        let engine = ctx.engine.as_mut().expect("built above");
        return match scenario {
            Scenario::Decode => decode(args, engine, &ctx.loaded, &ctx.env),
            _ => ttft(args, engine, &ctx.loaded, &ctx.env),
        };
    }
    ctx.engine = None;
    match scenario {
        Scenario::Serve => serve::run(args, ctx),
        Scenario::Spec => spec::run(args, ctx),
        _ => prefix::run(args, ctx),
    }
}

fn decode(
    args: &BenchArgs,
    engine: &mut Engine,
    loaded: &LoadedModel,
    env: &rows::Env,
) -> Result<Vec<Row>> {
    let c = &loaded.model.config;
    // Every cell's sequences must fit the KV cache at once (checked before the first is timed).
    for &depth in &args.depth {
        for &batch in &args.batch {
            // The last token is sampled, never forwarded: depth + new_tokens - 1 positions.
            let need = batch * engine.blocks.blocks_for(depth + args.new_tokens - 1);
            if need > engine.blocks.num_blocks() {
                bail!(
                    "--batch {batch} at --depth {depth} with --new-tokens {} needs {need} KV \
                     blocks of {} tokens; the KV cache has {}: raise --kv-cache-mib (CUDA: \
                     --gpu-memory-utilization) or lower the batch or depth",
                    args.new_tokens,
                    engine.blocks.block_size(),
                    engine.blocks.num_blocks()
                );
            }
        }
    }
    let mut rows = Vec::new();
    for &depth in &args.depth {
        for &batch in &args.batch {
            if args.new_tokens < 2 {
                bail!("decode needs --new-tokens of at least 2 (the first comes from prefill)");
            }
            let full = requests(batch, depth.max(1), args.new_tokens, c.vocab_size);
            // Decode time = from the end of prefill (the forward that picked every sequence's
            // first token) to the last token: new_tokens - 1 decode steps, prefill untimed.
            let mut samples = Vec::with_capacity(args.reps);
            for i in 0..args.warmup + args.reps {
                let decode_secs = time_decode(engine, &full)?;
                if i >= args.warmup {
                    let steps = (args.new_tokens - 1) as f64;
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
            let mut row = env.row(
                "decode",
                serde_json::json!({"batch": batch, "depth": depth, "new_tokens": args.new_tokens}),
                stats,
                "tok/s",
                Some(gbps),
            );
            row.samples = samples;
            rows.push(row);
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
        if c.max_context > 0 && len + 1 > c.max_context {
            eprintln!(
                "ttft: skipping the {len}-token prompt: with its first token it takes {} \
                 positions, beyond the model's context of {} tokens",
                len + 1,
                c.max_context
            );
            continue;
        }
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
        let mut row = env.row(
            "ttft",
            serde_json::json!({"prompt_len": len, "prefill_chunk": engine.prefill_chunk}),
            Stats::of(&samples),
            "ms",
            None,
        );
        row.samples = samples;
        rows.push(row);
    }
    Ok(rows)
}
