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
    let mut e = Engine::new(super::arms::lane_backend(&loaded.model, 1024, false)?, 256);
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
    let (mut max_diff, mut compared, mut near_ties) = (0f32, 0usize, Vec::new());
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
            max_diff = max_diff.max(d);
            compared += 1;
            let margin = step["margin"].as_f64().unwrap_or(f64::NAN) as f32;
            let diff = Diff {
                request: pi,
                position: s,
                token_ref: want[s],
                token_fast: out.tokens[s],
                margin,
                max_abs_diff: d,
            };
            if d > bound {
                return Ok(Outcome {
                    green: false,
                    compared,
                    detail: format!("prompt {pi} step {s}: max |Δlogit| {d:.3e} over HF's top-20 exceeds {bound:.1e} (tokens {} HF vs {} memra, HF top-2 margin {margin:.3e})", want[s], out.tokens[s]),
                    diff: Some(diff),
                });
            }
            if out.tokens[s] != want[s] {
                if margin >= bound {
                    return Ok(Outcome {
                        green: false,
                        compared,
                        detail: format!("prompt {pi} step {s}: token {} (HF) vs {} (memra) with HF top-2 margin {margin:.3e}, not a near-tie", want[s], out.tokens[s]),
                        diff: Some(diff),
                    });
                }
                near_ties.push(format!("prompt {pi} step {s} margin {margin:.2e}"));
                break;
            }
        }
    }
    Ok(Outcome {
        green: true,
        compared,
        diff: None,
        detail: format!(
            "{compared} steps, greedy tokens identical, max |Δlogit| {max_diff:.2e} ≤ {bound:.1e}; near-ties: {}",
            if near_ties.is_empty() { "none".to_string() } else { near_ties.join(", ") }
        ),
    })
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
    let outs = Engine::new(super::arms::lane_backend(&fast.model, 1024, false)?, 256)
        .run_batch(&reqs, true)?;
    let (mut max_diff, mut compared, mut near_ties) = (0f32, 0usize, Vec::new());
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
            max_diff = max_diff.max(d);
            compared += 1;
            let margin = rl[top[0]] - rl[top[1]];
            let diff = Diff {
                request: pi,
                position: s,
                token_ref: r.tokens[s],
                token_fast: out.tokens[s],
                margin,
                max_abs_diff: d,
            };
            if d.is_nan() || d > bound {
                return Ok(Outcome {
                    green: false,
                    compared,
                    detail: format!("prompt {pi} step {s}: max |Δlogit| {d:.3e} over the CPU's top-20 exceeds {bound:.1e} (tokens {} cpu vs {} fast, cpu top-2 margin {margin:.3e})", r.tokens[s], out.tokens[s]),
                    diff: Some(diff),
                });
            }
            if out.tokens[s] != r.tokens[s] {
                if margin >= bound {
                    return Ok(Outcome {
                        green: false,
                        compared,
                        detail: format!("prompt {pi} step {s}: token {} (cpu) vs {} (fast) with cpu top-2 margin {margin:.3e}, not a near-tie", r.tokens[s], out.tokens[s]),
                        diff: Some(diff),
                    });
                }
                near_ties.push(format!("prompt {pi} step {s} margin {margin:.2e}"));
                break;
            }
        }
    }
    Ok(Outcome {
        green: true,
        compared,
        diff: None,
        detail: format!(
            "{compared} steps, greedy tokens identical, max |Δlogit| {max_diff:.2e} ≤ {bound:.1e}; near-ties: {}",
            if near_ties.is_empty() { "none".to_string() } else { near_ties.join(", ") }
        ),
    })
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
