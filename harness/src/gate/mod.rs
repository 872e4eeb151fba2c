//! `memra gate`: runs the exactness gates in `gates/*.toml` (DESIGN.md §3). Each gate compares a
//! fast path with its reference; with `--canary` each gate's deliberately broken arm runs instead
//! and must turn the gate red. One line per gate, a summary table, optional JSONL rows, and a
//! non-zero exit on any red gate (or any green canary).

mod arms;
mod level_b;
mod serving;
mod spec;
mod speculative;

use crate::config::Config;
use anyhow::{bail, Context, Result};
use arms::{compare, sched_config, scheduled, solo, BackendCanary, Diff, Job, Submission, Trace};
use clap::Args;
use memra_engine::loader::{self, LoadedModel};
use memra_engine::sample::SamplingParams;
use memra_engine::sched::SchedCanary;
use spec::{Canary, GateSpec, Kind, Level};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `memra gate`.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Lane: cpu (the reference backend) or cuda.
    #[arg(long, default_value = "cpu")]
    pub lane: String,
    /// Run only gates whose name contains this (a comma-separated list: any of them).
    #[arg(long)]
    pub only: Option<String>,
    /// Run each gate's canary (a deliberately broken arm) instead; fails if any canary stays green.
    #[arg(long)]
    pub canary: bool,
    /// Append one JSON line per gate to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Directory of gate definitions.
    #[arg(long, default_value = "gates")]
    pub gates_dir: PathBuf,
}

/// The result of one gate (or canary) run.
pub struct Outcome {
    pub green: bool,
    /// Positions (or corpus lines) compared.
    pub compared: usize,
    pub diff: Option<Diff>,
    /// One-line explanation.
    pub detail: String,
}

impl Outcome {
    pub(super) fn from_compare(what: &str, (compared, diff): (usize, Option<Diff>)) -> Outcome {
        match &diff {
            None => Outcome {
                green: true,
                compared,
                diff: None,
                detail: format!("{compared} positions, {what}"),
            },
            Some(d) => Outcome {
                green: false,
                compared,
                detail: format!(
                    "first difference at request {} position {}: token {} (reference) vs {} (fast path), reference top-2 margin {:.3e}, max |Δlogit| {:.3e}",
                    d.request, d.position, d.token_ref, d.token_fast, d.margin, d.max_abs_diff
                ),
                diff,
            },
        }
    }
}

/// The gates of `dir` whose names contain one of `only`'s `,`-separated patterns (all when None
/// or empty), split into those of `lane` and those of other lanes only. Errors: an unreadable or
/// malformed gate file. [`no_gates`] is the error for an empty first list (`memra tune` checks
/// its `--gates` with both before it sweeps).
pub fn select(
    dir: &std::path::Path,
    only: Option<&str>,
    lane: &str,
) -> Result<(Vec<GateSpec>, Vec<GateSpec>)> {
    let (gates, other_lane): (Vec<GateSpec>, Vec<GateSpec>) = spec::load_dir(dir)?
        .into_iter()
        .filter(|g| {
            only.is_none_or(|o| {
                let mut pats = o.split(',').map(str::trim).filter(|p| !p.is_empty());
                // An empty pattern (as before lists) matches every gate.
                o.trim().is_empty() || pats.any(|p| g.name.contains(p))
            })
        })
        .partition(|g| g.lanes.iter().any(|l| l == lane));
    Ok((gates, other_lane))
}

/// The error for a selection with no gate of `lane`.
pub fn no_gates(lane: &str, only: Option<&str>) -> anyhow::Error {
    anyhow::anyhow!(
        "no gates of the {lane} lane match{}",
        only.map_or(String::new(), |o| format!(" {o:?}"))
    )
}

/// Runs `memra gate`.
pub fn run(args: &GateArgs, cfg: &Config) -> Result<()> {
    match args.lane.as_str() {
        "cpu" => arms::set_lane(arms::Lane::Cpu {
            kv_f16: cfg.kv_f16(),
        }),
        "cuda" => arms::set_lane(arms::Lane::Cuda(
            crate::backends::CudaPool::get(cfg)
                .map_err(|e| e.context("the CUDA lane needs a GPU (the CPU lane is --lane cpu)"))?,
        )),
        other => bail!("unknown lane {other:?} (cpu or cuda)"),
    }
    if !args.gates_dir.is_dir() {
        bail!(
            "gates directory {} not found: run from the repository root or pass --gates-dir",
            args.gates_dir.display()
        );
    }
    if args.only.as_deref().is_some_and(|o| o.trim().is_empty()) {
        bail!("--only is empty: name a gate (or part of one); without --only the whole lane runs");
    }
    let repo = repo_root(&args.gates_dir)?;
    let (gates, other_lane) = select(&args.gates_dir, args.only.as_deref(), &args.lane)?;
    for g in &other_lane {
        eprintln!("skip {}: {} lane only", g.name, g.lanes.join(", "));
    }
    if gates.is_empty() {
        return Err(no_gates(&args.lane, args.only.as_deref()));
    }
    let mut json = match &args.json {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("{}", p.display()))?,
        ),
        None => None,
    };
    let arm = if args.canary { "canary" } else { "gate" };
    let commit = env!("MEMRA_BUILD_COMMIT");
    let mut rows = Vec::new();
    let mut cache: Vec<(String, std::sync::Arc<LoadedModel>)> = Vec::new();
    for g in &gates {
        let t0 = Instant::now();
        let result = run_one(g, cfg, &repo, args.canary, &mut cache);
        let secs = t0.elapsed().as_secs_f64();
        let errored = result.is_err();
        let mut o = result.unwrap_or_else(|e| Outcome {
            green: false,
            compared: 0,
            diff: None,
            detail: format!("error: {e:#}"),
        });
        // A gate that compared nothing cannot fail (DESIGN.md §3): it fails, in either arm.
        // (`compared` counts positions up to a first difference, so red at 0 is not empty.)
        let empty = !errored && o.green && o.compared == 0;
        if empty {
            o.detail = format!(
                "compared nothing, so it cannot fail: check the gate's prompts (n_prompts) and \
                 variants ({})",
                o.detail
            );
        }
        // A canary must be red; a gate must be green; an error or an empty comparison fails
        // either (a canary that cannot run has not shown that its gate catches anything).
        let pass = !errored && !empty && o.green != args.canary;
        let status = match (errored, empty, o.green) {
            (true, _, _) => "ERROR",
            (_, true, _) => "EMPTY",
            (_, _, true) => "GREEN",
            _ => "RED",
        };
        println!(
            "{} {status:<5} {:<40} {}  ({secs:.1} s)",
            if pass { "ok  " } else { "FAIL" },
            g.name,
            o.detail
        );
        if let Some(f) = json.as_mut() {
            let row = serde_json::json!({
                "time": unix_now(), "commit": commit, "lane": args.lane,
                "host_threads": rayon::current_num_threads(), "arm": arm, "gate": g.name,
                "kind": format!("{:?}", g.kind), "model": g.model, "level": format!("{:?}", g.level),
                "canary": format!("{:?}", g.canary), "status": status, "pass": pass,
                "compared": o.compared, "seconds": secs, "detail": o.detail,
                "first_diff": o.diff.as_ref().map(|d| serde_json::json!({
                    "request": d.request, "position": d.position, "token_ref": d.token_ref,
                    "token_fast": d.token_fast, "margin": finite(d.margin),
                    "max_abs_diff": finite(d.max_abs_diff)})),
            });
            writeln!(f, "{row}")?;
        }
        rows.push((g.name.clone(), status, pass, secs));
    }
    println!(
        "\n{:<40} {:<6} {:<6} {:>8}",
        format!("{arm}"),
        "status",
        "result",
        "seconds"
    );
    for (name, status, pass, secs) in &rows {
        println!(
            "{name:<40} {status:<6} {:<6} {secs:>8.1}",
            if *pass { "pass" } else { "FAIL" }
        );
    }
    let failed = rows.iter().filter(|r| !r.2).count();
    let plural = if args.canary { "canaries" } else { "gates" };
    println!("\n{} {plural} run, {failed} failed", rows.len());
    if failed > 0 {
        if args.canary {
            bail!(
                "{failed} canaries failed (stayed green, compared nothing or could not run): \
                 those gates are not shown to catch their bug"
            );
        }
        bail!("{failed} gates failed (red, compared nothing or could not run)");
    }
    Ok(())
}

fn finite(v: f32) -> Option<f32> {
    v.is_finite().then_some(v)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The repository root: the parent of the gates directory.
fn repo_root(gates_dir: &Path) -> Result<PathBuf> {
    let abs = std::fs::canonicalize(gates_dir)
        .with_context(|| format!("gates directory {}", gates_dir.display()))?;
    Ok(abs.parent().map(Path::to_path_buf).unwrap_or(abs))
}

/// Resolves a gate's model, generating `qwen3-random` on first use.
fn model_path(spec: &str, cfg: &Config, repo: &Path) -> Result<PathBuf> {
    if spec == "qwen3-random" {
        let dir = cfg.cache_dir.join("generated").join("qwen3-random-seed0");
        if !dir.join("model.safetensors.index.json").exists() {
            std::fs::create_dir_all(&dir)?;
            let st = std::process::Command::new(&cfg.python)
                .arg(repo.join("gates/oracle/make_qwen3_random.py"))
                .arg("--out")
                .arg(&dir)
                .stdout(std::process::Stdio::null())
                .status()
                .context("running gates/oracle/make_qwen3_random.py (needs python3 with numpy)")?;
            if !st.success() {
                bail!("gates/oracle/make_qwen3_random.py failed ({st})");
            }
        }
        return Ok(dir);
    }
    crate::pull::resolve(spec, cfg)
}

fn load_cached(
    g: &GateSpec,
    cfg: &Config,
    repo: &Path,
    cache: &mut Vec<(String, std::sync::Arc<LoadedModel>)>,
) -> Result<std::sync::Arc<LoadedModel>> {
    if let Some((_, m)) = cache.iter().find(|(n, _)| *n == g.model) {
        return Ok(m.clone());
    }
    let m = std::sync::Arc::new(loader::load(&model_path(&g.model, cfg, repo)?)?);
    cache.clear(); // keep one model in memory at a time
    cache.push((g.model.clone(), m.clone()));
    Ok(m)
}

/// The first `n` texts of a prompt set (JSON lines with a `text` field).
fn prompt_texts(p: &Path, n: usize) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()).take(n) {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}: invalid JSON line", p.display()))?;
        let t = v["text"]
            .as_str()
            .with_context(|| format!("{}: line without text", p.display()))?;
        out.push(t.to_string());
    }
    if out.len() < n {
        bail!(
            "{} has {} prompts; the gate wants {n}",
            p.display(),
            out.len()
        );
    }
    Ok(out)
}

fn prompts(g: &GateSpec, repo: &Path, m: &LoadedModel) -> Result<Vec<Vec<u32>>> {
    let rel = g
        .prompts
        .as_deref()
        .unwrap_or("gates/prompts/gate_prompts.jsonl");
    prompt_texts(&repo.join(rel), g.n_prompts)?
        .iter()
        .map(|t| Ok(m.tokenizer.encode(t, true)?))
        .collect()
}

pub(super) fn params(g: &GateSpec, i: usize) -> SamplingParams {
    match &g.sampling {
        None => SamplingParams::greedy(),
        Some(s) => SamplingParams {
            temperature: s.temperature,
            top_p: s.top_p,
            top_k: s.top_k,
            min_p: s.min_p,
            repetition_penalty: s.repetition_penalty,
            presence_penalty: s.presence_penalty,
            frequency_penalty: s.frequency_penalty,
            logit_bias: vec![],
            seed: s.seed + i as u64,
        },
    }
}

fn run_one(
    g: &GateSpec,
    cfg: &Config,
    repo: &Path,
    canary: bool,
    cache: &mut Vec<(String, std::sync::Arc<LoadedModel>)>,
) -> Result<Outcome> {
    // Every gate sets the width, so none inherits the gate before's.
    arms::set_graph_bucket(g.graph_bucket.unwrap_or(0));
    let expected = expected_canary(g.kind);
    if !expected.contains(&g.canary) {
        bail!(
            "canary {:?} does not fit a {:?} gate (use one of {expected:?})",
            g.canary,
            g.kind
        );
    }
    if matches!(g.kind, Kind::HfParity | Kind::TokenizerParity) {
        return level_b::run(g, cfg, repo, canary, |p| model_path(p, cfg, repo));
    }
    if g.kind == Kind::BackendParity {
        let path = model_path(&g.model, cfg, repo)?;
        let rel = g
            .prompts
            .as_deref()
            .unwrap_or("gates/prompts/gate_prompts.jsonl");
        let texts = prompt_texts(&repo.join(rel), g.n_prompts)?;
        let perturb = canary && g.canary == Canary::PerturbedRopeBase;
        return level_b::backend_parity(g, &path, &texts, perturb);
    }
    if g.kind == Kind::Serving {
        let path = model_path(&g.model, cfg, repo)?;
        let rel = g
            .prompts
            .as_deref()
            .unwrap_or("gates/prompts/gate_prompts.jsonl");
        let texts = prompt_texts(&repo.join(rel), g.n_prompts)?;
        return serving::run(g, &path, &texts, canary);
    }
    if g.level != Level::LogitBits {
        bail!("Level A gates compare logit_bits");
    }
    let m = load_cached(g, cfg, repo, cache)?;
    let model = &m.model;
    let ps = prompts(g, repo, &m)?;
    let split = canary && g.canary == Canary::ShapeDependentSplit;
    let backend_canary = match (canary, g.canary) {
        (true, Canary::ShapeDependentSplit) => BackendCanary::ShapeDependentSplit,
        (true, Canary::StaleGraphInputs) => BackendCanary::StaleGraphInputs,
        _ => BackendCanary::None,
    };
    let sched_canary = if !canary {
        None
    } else {
        match g.canary {
            Canary::SharedRng => Some(SchedCanary::SharedRng),
            Canary::NoCopyOnWrite => Some(SchedCanary::NoCopyOnWrite),
            Canary::PrefixOffByOne => Some(SchedCanary::PrefixOffByOne),
            Canary::AcceptByThreshold => Some(SchedCanary::AcceptByThreshold),
            _ => None,
        }
    };
    let solo_all = |chunk: usize, seq_for: &dyn Fn(usize) -> u32| -> Result<Vec<Trace>> {
        ps.iter()
            .enumerate()
            .map(|(i, p)| {
                solo(
                    model,
                    p,
                    &params(g, i),
                    g.max_tokens,
                    seq_for(i),
                    chunk,
                    false,
                )
            })
            .collect()
    };
    let jobs = |n: u32| -> Vec<Job> {
        ps.iter()
            .enumerate()
            .map(|(i, p)| Job {
                prompt: p.clone(),
                params: params(g, i),
                n,
                tenant: "gate".into(),
                spec: None,
            })
            .collect()
    };
    Ok(match g.kind {
        Kind::BatchedVsSolo => {
            let reference = solo_all(0, &|_| 0)?;
            let (fast, _) = scheduled(
                model,
                &jobs(1),
                g.max_tokens,
                sched_config(32, sched_canary),
                backend_canary,
                Submission::Staggered,
            )?;
            Outcome::from_compare(
                "logits bit-identical to each request alone",
                compare(&reference, &fast, true),
            )
        }
        Kind::ChunkedPrefill => {
            let reference = solo_all(1, &|_| 0)?;
            let mut total = 0;
            for &c in &g.chunk_sizes {
                let fast: Vec<Trace> = ps
                    .iter()
                    .enumerate()
                    .map(|(i, p)| solo(model, p, &params(g, i), g.max_tokens, 0, c, split))
                    .collect::<Result<_>>()?;
                let (n, d) = compare(&reference, &fast, true);
                total += n;
                if d.is_some() {
                    let mut o = Outcome::from_compare("", (total, d));
                    o.detail = format!("chunk size {c}: {}", o.detail);
                    return Ok(o);
                }
            }
            Outcome::from_compare(
                &format!(
                    "logits bit-identical to token-by-token decode at chunk sizes {:?}",
                    g.chunk_sizes
                ),
                (total, None),
            )
        }
        Kind::PrefixCache => {
            // Per prompt: a warm-up run, a full hit (same prompt) and a partial hit (same first
            // blocks, different tail), against cold runs of the same prompts.
            let mut jobs_v = Vec::new();
            let mut cold_prompts = Vec::new();
            for (i, p) in ps.iter().enumerate() {
                // At least three full blocks shared by the base and its partial-hit variant.
                let mut base = p.clone();
                let mut k = 1;
                while base.len() < 64 {
                    base.extend_from_slice(&ps[(i + k) % ps.len()]);
                    k += 1;
                }
                let mut partial = base[..(base.len() * 2 / 3).max(49)].to_vec();
                partial.extend_from_slice(&ps[(i + 2) % ps.len()]);
                for pr in [&base, &base, &partial] {
                    jobs_v.push(Job {
                        prompt: pr.clone(),
                        params: params(g, i),
                        n: 1,
                        tenant: format!("gate{i}"),
                        spec: None,
                    });
                }
                cold_prompts.push((base, i));
                cold_prompts.push((partial, i));
            }
            let (warm, cached) = scheduled(
                model,
                &jobs_v,
                g.max_tokens,
                sched_config(512, sched_canary),
                backend_canary,
                Submission::Sequential,
            )?;
            let hits: Vec<usize> = cached.chunks(3).flat_map(|c| [c[1], c[2]]).collect();
            if hits.contains(&0) {
                return Ok(Outcome {
                    green: false,
                    compared: 0,
                    diff: None,
                    detail: format!("a warm run got no prefix-cache hit (cached tokens {hits:?})"),
                });
            }
            let fast: Vec<Trace> = warm
                .chunks(3)
                .flat_map(|c| [c[1].clone(), c[2].clone()])
                .collect();
            let reference: Vec<Trace> = cold_prompts
                .iter()
                .map(|(p, i)| solo(model, p, &params(g, *i), g.max_tokens, 0, 0, false))
                .collect::<Result<_>>()?;
            Outcome::from_compare(
                &format!(
                    "full and partial hits ({} cached tokens in all) bit-identical to cold runs",
                    hits.iter().sum::<usize>()
                ),
                compare(&reference, &fast, true),
            )
        }
        Kind::NChoices => {
            let n = g.n.max(2);
            let (fast, _) = scheduled(
                model,
                &jobs(n),
                g.max_tokens,
                sched_config(64, sched_canary),
                backend_canary,
                Submission::AllAtOnce,
            )?;
            let mut reference = Vec::new();
            for (i, p) in ps.iter().enumerate() {
                for c in 0..n {
                    reference.push(solo(model, p, &params(g, i), g.max_tokens, c, 0, false)?);
                }
            }
            Outcome::from_compare(
                &format!("{n} forked choices bit-identical to separate sequences"),
                compare(&reference, &fast, true),
            )
        }
        Kind::SeededBatch => {
            let reference = solo_all(0, &|_| 0)?;
            let (fast, _) = scheduled(
                model,
                &jobs(1),
                g.max_tokens,
                sched_config(48, sched_canary),
                backend_canary,
                Submission::AllAtOnce,
            )?;
            Outcome::from_compare(
                "seeded draws identical inside a batch and alone",
                compare(&reference, &fast, true),
            )
        }
        Kind::Speculative => speculative::run(g, model, &ps, sched_canary, backend_canary)?,
        Kind::HfParity | Kind::TokenizerParity | Kind::BackendParity | Kind::Serving => {
            unreachable!("handled above")
        }
    })
}

/// The canaries that fit each kind of gate.
fn expected_canary(k: Kind) -> &'static [Canary] {
    match k {
        Kind::BatchedVsSolo => &[Canary::ShapeDependentSplit, Canary::StaleGraphInputs],
        Kind::ChunkedPrefill => &[Canary::ShapeDependentSplit],
        Kind::PrefixCache => &[Canary::PrefixOffByOne],
        Kind::NChoices => &[Canary::NoCopyOnWrite, Canary::SharedRng],
        Kind::SeededBatch => &[Canary::SharedRng],
        Kind::HfParity | Kind::BackendParity => &[Canary::PerturbedRopeBase],
        Kind::TokenizerParity => &[Canary::WrongPreTokenizer],
        Kind::Serving => &[Canary::SharedRng],
        Kind::Speculative => &[
            Canary::AcceptByThreshold,
            Canary::SharedRng,
            Canary::ShapeDependentSplit,
        ],
    }
}
