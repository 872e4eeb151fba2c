//! Level B gates: parity with independent references (HF transformers logits, HF tokenizers ids)
//! on committed data.

use super::arms::Diff;
use super::spec::{Canary, GateSpec, Kind};
use super::Outcome;
use crate::config::Config;
use anyhow::{bail, Context, Result};
use memra_engine::engine::{Engine, GenerateRequest};
use memra_engine::formats::gguf::GgufFile;
use memra_engine::loader;
use memra_engine::sample::SamplingParams;
use memra_engine::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64())
                .map(|x| x as u32)
                .collect()
        })
        .unwrap_or_default()
}

fn read_json(path: &Path) -> Result<serde_json::Value> {
    serde_json::from_str(
        &std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?,
    )
    .with_context(|| format!("{}: invalid JSON", path.display()))
}

/// Runs a Level B gate (or its canary).
pub fn run(
    g: &GateSpec,
    _cfg: &Config,
    repo: &Path,
    canary: bool,
    resolve: impl Fn(&str) -> Result<PathBuf>,
) -> Result<Outcome> {
    let reference = repo.join(
        g.reference
            .as_deref()
            .context("Level B gates need `reference`")?,
    );
    let path = resolve(&g.model)?;
    match g.kind {
        Kind::HfParity => hf_parity(
            g,
            &path,
            &reference,
            canary && g.canary == Canary::PerturbedRopeBase,
        ),
        Kind::TokenizerParity => tokenizer_parity(
            &path,
            &reference,
            canary && g.canary == Canary::WrongPreTokenizer,
        ),
        _ => bail!("not a Level B gate"),
    }
}

/// What one step of a tolerance comparison decided.
enum Step {
    /// Keep comparing this prompt.
    Next,
    /// A reported near-tie: this prompt's comparison stops here.
    StopPrompt,
    /// The gate is red.
    Red(Outcome),
}

/// The running tally of a Level B tolerance comparison: greedy tokens identical, max |Δlogit|
/// over the reference's top ids within `bound`, a token difference tolerated only as a near-tie
/// (reference top-2 margin below the bound).
struct Tally {
    bound: f32,
    /// Names the two arms in messages ("HF"/"memra", "cpu"/"fast").
    names: (&'static str, &'static str),
    max_diff: f32,
    compared: usize,
    near_ties: Vec<String>,
}

impl Tally {
    fn new(bound: f32, names: (&'static str, &'static str)) -> Tally {
        Tally {
            bound,
            names,
            max_diff: 0.0,
            compared: 0,
            near_ties: Vec::new(),
        }
    }

    /// Judges one step: `d` the max |Δlogit| over the reference's top ids, `margin` the
    /// reference's top-2 margin.
    fn step(&mut self, diff: Diff) -> Step {
        let (bound, (a, b)) = (self.bound, self.names);
        let Diff {
            request: pi,
            position: s,
            token_ref,
            token_fast,
            margin,
            max_abs_diff: d,
        } = diff;
        self.max_diff = if d.is_nan() {
            f32::NAN
        } else {
            self.max_diff.max(d)
        };
        self.compared += 1;
        let red = |detail: String| {
            Step::Red(Outcome {
                green: false,
                compared: self.compared,
                detail,
                diff: Some(diff.clone()),
            })
        };
        if d.is_nan() || d > bound {
            return red(format!("prompt {pi} step {s}: max |Δlogit| {d:.3e} over {a}'s top-20 exceeds {bound:.1e} (tokens {token_ref} {a} vs {token_fast} {b}, {a} top-2 margin {margin:.3e})"));
        }
        if token_fast != token_ref {
            if margin >= bound {
                return red(format!("prompt {pi} step {s}: token {token_ref} ({a}) vs {token_fast} ({b}) with {a} top-2 margin {margin:.3e}, not a near-tie"));
            }
            self.near_ties
                .push(format!("prompt {pi} step {s} margin {margin:.2e}"));
            return Step::StopPrompt;
        }
        Step::Next
    }

    fn green(self) -> Outcome {
        let Tally {
            bound,
            max_diff,
            compared,
            near_ties,
            ..
        } = self;
        Outcome {
            green: true,
            compared,
            diff: None,
            detail: format!(
                "{compared} steps, greedy tokens identical, max |Δlogit| {max_diff:.2e} ≤ {bound:.1e}; near-ties: {}",
                if near_ties.is_empty() { "none".to_string() } else { near_ties.join(", ") }
            ),
        }
    }
}

/// Greedy token identity over the reference's steps and max |Δlogit| over HF's top-20 within the
/// bound; a token difference is tolerated only as a reported near-tie (HF top-2 margin below the
/// bound), after which that prompt's comparison stops.
fn hf_parity(g: &GateSpec, path: &Path, reference: &Path, perturb: bool) -> Result<Outcome> {
    let bound = g.bound.context("hf_parity gates need `bound`")?;
    let r = read_json(reference)?;
    let prompts = r["prompts"]
        .as_array()
        .context("reference without prompts")?;
    let loaded = loader::load_with(path, |c| {
        if perturb {
            c.rope_theta *= 0.5;
            c.rope_local_theta = c.rope_local_theta.map(|t| t * 0.5);
        }
    })?;
    let steps = r["steps"].as_u64().unwrap_or(64) as usize;
    let mut e = Engine::new(
        super::arms::lane_backend(&loaded.model, 1024, super::arms::BackendCanary::None, true)?,
        256,
    );
    let reqs: Vec<GenerateRequest> = prompts
        .iter()
        .take(g.n_prompts.max(1))
        .map(|p| GenerateRequest {
            prompt: ids(&p["prompt_ids"]),
            params: SamplingParams::greedy(),
            max_tokens: steps,
            stop_ids: vec![],
            sequence: 0,
        })
        .collect();
    let outs = e.run_batch(&reqs, true)?;
    let mut tally = Tally::new(bound, ("HF", "memra"));
    for (pi, (p, out)) in prompts.iter().zip(&outs).enumerate() {
        let want = ids(&p["generated_ids"]);
        for (s, step) in p["steps"].as_array().context("steps")?.iter().enumerate() {
            let top = ids(&step["top_ids"]);
            let vals: Vec<f32> = step["top_logits"]
                .as_array()
                .context("top_logits")?
                .iter()
                .filter_map(|v| v.as_f64())
                .map(|v| v as f32)
                .collect();
            let logits = &out.step_logits[s];
            let d = top
                .iter()
                .zip(&vals)
                .map(|(&i, &v)| (logits[i as usize] - v).abs())
                .fold(0f32, f32::max);
            let margin = step["margin"].as_f64().unwrap_or(f64::NAN) as f32;
            match tally.step(Diff {
                request: pi,
                position: s,
                token_ref: want[s],
                token_fast: out.tokens[s],
                margin,
                max_abs_diff: d,
            }) {
                Step::Next => {}
                Step::StopPrompt => break,
                Step::Red(o) => return Ok(o),
            }
        }
    }
    Ok(tally.green())
}

/// The lane's backend against the CPU reference backend on the same weights: greedy tokens
/// identical over `max_tokens` steps per prompt, and max |Δlogit| over the CPU's top-20 within
/// the gate's bound; a token difference is tolerated only as a reported near-tie (CPU top-2
/// margin below the bound), after which that prompt's comparison stops. The canary perturbs the
/// fast arm's RoPE base.
pub fn backend_parity(
    g: &GateSpec,
    path: &Path,
    texts: &[String],
    perturb: bool,
) -> Result<Outcome> {
    let bound = g.bound.context("backend_parity gates need `bound`")?;
    let reference = loader::load(path)?;
    let fast = loader::load_with(path, |c| {
        if perturb {
            c.rope_theta *= 0.5;
            c.rope_local_theta = c.rope_local_theta.map(|t| t * 0.5);
        }
    })?;
    let reqs = texts
        .iter()
        .map(|t| {
            Ok(GenerateRequest {
                prompt: reference.tokenizer.encode(t, true)?,
                params: SamplingParams::greedy(),
                max_tokens: g.max_tokens,
                stop_ids: vec![],
                sequence: 0,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let cpu_backend =
        memra_engine::backend::cpu::CpuBackend::new(reference.model.clone(), 1024, 16);
    let refs = Engine::new(Box::new(cpu_backend), 256).run_batch(&reqs, true)?;
    let outs = Engine::new(
        super::arms::lane_backend(&fast.model, 1024, super::arms::BackendCanary::None, true)?,
        256,
    )
    .run_batch(&reqs, true)?;
    let mut tally = Tally::new(bound, ("cpu", "fast"));
    for (pi, (r, out)) in refs.iter().zip(&outs).enumerate() {
        for s in 0..r.tokens.len().min(out.tokens.len()) {
            let (rl, fl) = (&r.step_logits[s], &out.step_logits[s]);
            let mut top: Vec<usize> = (0..rl.len()).collect();
            top.select_nth_unstable_by(20.min(rl.len() - 1), |&a, &b| rl[b].total_cmp(&rl[a]));
            top.truncate(20);
            top.sort_by(|&a, &b| rl[b].total_cmp(&rl[a]));
            let d = top
                .iter()
                .map(|&i| (rl[i] - fl[i]).abs())
                .fold(0f32, |m, v| if v.is_nan() { f32::NAN } else { m.max(v) });
            match tally.step(Diff {
                request: pi,
                position: s,
                token_ref: r.tokens[s],
                token_fast: out.tokens[s],
                margin: rl[top[0]] - rl[top[1]],
                max_abs_diff: d,
            }) {
                Step::Next => {}
                Step::StopPrompt => break,
                Step::Red(o) => return Ok(o),
            }
        }
    }
    Ok(tally.green())
}

/// Token ids identical on every corpus line (Qwen lines may also match their `ids_no_nfc`).
fn tokenizer_parity(path: &Path, reference: &Path, wrong_pre: bool) -> Result<Outcome> {
    let g = GgufFile::open(path)?;
    let tk = Tokenizer::from_gguf_with_pre(&g, wrong_pre.then_some("default"))?;
    let text =
        std::fs::read_to_string(reference).with_context(|| format!("{}", reference.display()))?;
    let mut compared = 0;
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let t = v["text"].as_str().context("line without text")?;
        let got = tk.encode(t, false)?;
        compared += 1;
        if got != ids(&v["ids"]) {
            return Ok(Outcome {
                green: false,
                compared,
                diff: None,
                detail: format!(
                    "corpus line {i} {:?}: expected {:?}, got {:?}",
                    t.chars().take(40).collect::<String>(),
                    ids(&v["ids"]),
                    got
                ),
            });
        }
    }
    Ok(Outcome {
        green: true,
        compared,
        diff: None,
        detail: format!("{compared} corpus lines, ids identical"),
    })
}
