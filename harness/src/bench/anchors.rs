//! `memra bench decode|ttft --vs ...`: the anchors DESIGN.md §5 names, measured in the same call
//! on the same weights and conditions as memra's cells, and written into each row's `anchor`
//! field.
//!
//! - `hf-eager`: research/anchors/hf_decode.py (HF transformers' generate, eager) on the same model
//!   as an HF checkpoint: the model's own directory, or for `synth:SHAPE:DTYPE` the same seed
//!   written as safetensors (bf16/f16 only).
//! - `gpt-fast`: research/anchors/gpt_fast_decode.py on the same checkpoint: our implementation of
//!   the gpt-fast recipe (a plain PyTorch Llama, a static KV cache, the decode step under
//!   `torch.compile(mode="reduce-overhead", fullgraph=True)`), checked against transformers'
//!   logits and greedy tokens by its `--check`.
//! - `llama.cpp`: `llama-bench` (path from `--llama-bench`) on the same GGUF file, text
//!   generation of the same length after the same depth (`-d`), flash attention on; on a GPU
//!   all layers offloaded, on the CPU none, with memra's thread count (`-t`); batch 1 only
//!   (llama-bench decodes one sequence). For ttft cells, prompt processing of the same length
//!   (`-p N -n 0`), its tok/s turned into ms for the prompt (the HF anchors time decode only).
//!
//! The comparison is interleaved in rounds (`--rounds`, bench/rounds.rs): each round runs the
//! anchors and memra's cells in alternating order with part of the reps (rounded up: each round
//! runs at least one), and memra's engine is dropped at the end of every round, which frees its
//! KV cache (most of the device memory) before an anchor runs. Its uploaded weights stay
//! resident, idle, for the process (the weight pool shares them between engines), so from the
//! second round on an anchor has that much less device memory; nothing of memra runs meanwhile.

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An anchor implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Anchor {
    #[value(name = "hf-eager")]
    HfEager,
    #[value(name = "gpt-fast")]
    GptFast,
    #[value(name = "llama.cpp")]
    LlamaCpp,
}

/// One cell to measure an anchor on: a decode cell (`prompt_len` 0), or a ttft cell
/// (`prompt_len` tokens of prompt, nothing generated).
pub struct Cell {
    pub batch: usize,
    pub depth: usize,
    pub new_tokens: usize,
    pub prompt_len: usize,
    pub reps: usize,
    pub warmup: usize,
}

/// Where the anchors find their inputs.
pub struct Inputs<'a> {
    /// The model spec as given (`synth:...`, a path, a catalog name).
    pub spec: &'a str,
    /// The resolved model path memra ran.
    pub path: &'a Path,
    pub cache_dir: &'a Path,
    pub python: &'a str,
    pub llama_bench: &'a str,
    /// The repository (for research/anchors/).
    pub repo: &'a Path,
    /// CPU runs: memra's worker threads, which llama.cpp then gets too (`-t`, no layers
    /// offloaded); None on a GPU (every layer offloaded).
    pub cpu_threads: Option<usize>,
}

fn hf_dir(inp: &Inputs) -> Result<PathBuf> {
    if inp.path.is_dir() {
        return Ok(inp.path.to_path_buf());
    }
    if let Some(rest) = inp.spec.strip_prefix("synth:") {
        return crate::synth::resolve_hf(rest, inp.cache_dir);
    }
    bail!(
        "the HF anchors need the model as an HF checkpoint directory (or a synth: model, which is \
         written in both formats); {} is a single file",
        inp.path.display()
    )
}

/// Median/min/max of `v` (and `v` itself, so rounds can be merged) as the JSON the rows carry.
fn summary(name: &str, unit: &str, v: &[f64], extra: Value) -> Value {
    let s = super::rows::Stats::of(v);
    json!({"name": name, "unit": unit, "n": s.n, "median": s.median, "min": s.min, "max": s.max,
           "samples": v, "extra": extra})
}

/// Measures `anchor` on `cell`; the JSON goes into the row's `anchor` field (with the ratio
/// memra / anchor added by the caller). A failing anchor is an error naming the command.
pub fn measure(anchor: Anchor, cell: &Cell, inp: &Inputs) -> Result<Value> {
    match anchor {
        Anchor::HfEager | Anchor::GptFast if cell.prompt_len > 0 => {
            bail!("the HF anchors time decode only; ttft cells take --vs llama.cpp")
        }
        Anchor::HfEager | Anchor::GptFast => {
            let dir = hf_dir(inp)?;
            let script = inp.repo.join(if anchor == Anchor::GptFast {
                "research/anchors/gpt_fast_decode.py"
            } else {
                "research/anchors/hf_decode.py"
            });
            let mut cmd = Command::new(inp.python);
            cmd.arg(&script)
                .arg("--model")
                .arg(&dir)
                .args(["--batch", &cell.batch.to_string()])
                .args(["--depth", &cell.depth.to_string()])
                .args(["--new-tokens", &cell.new_tokens.to_string()])
                .args(["--reps", &cell.reps.to_string()])
                .args(["--warmup", &cell.warmup.max(1).to_string()]);
            let out = cmd
                .output()
                .with_context(|| format!("running {}", script.display()))?;
            if !out.status.success() {
                bail!(
                    "{} failed ({}): {}",
                    script.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .last()
                        .unwrap_or("")
                );
            }
            let line = String::from_utf8_lossy(&out.stdout);
            let v: Value = serde_json::from_str(line.trim().lines().last().unwrap_or(""))
                .with_context(|| format!("{}: output {line:?}", script.display()))?;
            Ok(
                json!({"name": v["anchor"], "unit": "tok/s", "n": v["n"], "median": v["median"],
                      "min": v["min"], "max": v["max"], "samples": v["samples"],
                      "extra": {"torch": v["torch"], "transformers": v["transformers"],
                                "device": v["device"]}}),
            )
        }
        Anchor::LlamaCpp => {
            if cell.batch != 1 {
                bail!(
                    "llama-bench decodes one sequence; no llama.cpp anchor at batch {}",
                    cell.batch
                );
            }
            if inp.path.extension().is_none_or(|e| e != "gguf") {
                bail!(
                    "the llama.cpp anchor needs a GGUF file ({} is not)",
                    inp.path.display()
                );
            }
            let (p, n) = if cell.prompt_len > 0 {
                (cell.prompt_len, 0)
            } else {
                (0, cell.new_tokens)
            };
            let mut cmd = Command::new(inp.llama_bench);
            cmd.arg("-m")
                .arg(inp.path)
                .args(["-p", &p.to_string(), "-n", &n.to_string()])
                .args(["-d", &cell.depth.to_string()])
                .args(["-r", &cell.reps.to_string(), "-fa", "1", "-o", "json"]);
            match inp.cpu_threads {
                Some(t) => cmd.args(["-ngl", "0", "-t", &t.to_string()]),
                None => cmd.args(["-ngl", "99"]),
            };
            let out = cmd
                .output()
                .with_context(|| format!("running {} (set --llama-bench)", inp.llama_bench))?;
            if !out.status.success() {
                bail!(
                    "{} failed ({}): {}",
                    inp.llama_bench,
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .last()
                        .unwrap_or("")
                );
            }
            let text = String::from_utf8_lossy(&out.stdout);
            if cell.prompt_len > 0 {
                parse_llama_bench_prompt(&text)
            } else {
                parse_llama_bench(&text)
            }
        }
    }
}

/// The prompt-processing time of llama-bench's JSON output (`-o json`, a test with `n_prompt` > 0
/// and `n_gen` = 0), as ms for the whole prompt: n_prompt / tok/s per repetition
/// (`samples_ts`, else `avg_ts` alone).
pub fn parse_llama_bench_prompt(text: &str) -> Result<Value> {
    let v: Value = serde_json::from_str(text).context("llama-bench output is not JSON")?;
    let test = v
        .as_array()
        .and_then(|a| {
            a.iter().find(|t| {
                t["n_prompt"].as_u64().unwrap_or(0) > 0 && t["n_gen"].as_u64().unwrap_or(0) == 0
            })
        })
        .context("llama-bench output has no prompt-processing test")?;
    let n = test["n_prompt"].as_f64().unwrap_or(0.0);
    let ts: Vec<f64> = match test["samples_ts"].as_array() {
        Some(a) if !a.is_empty() => a.iter().filter_map(Value::as_f64).collect(),
        _ => vec![test["avg_ts"]
            .as_f64()
            .context("llama-bench output without avg_ts")?],
    };
    let ms: Vec<f64> = ts
        .iter()
        .filter(|t| **t > 0.0)
        .map(|t| n / t * 1e3)
        .collect();
    if ms.is_empty() {
        bail!("llama-bench reported no positive prompt tok/s");
    }
    Ok(summary(
        "llama.cpp",
        "ms",
        &ms,
        json!({"build_commit": test["build_commit"], "n_prompt": test["n_prompt"],
               "prompt_tok_s": ts, "flash_attn": test["flash_attn"], "type": test["model_type"]}),
    ))
}

/// The tok/s of llama-bench's JSON output (`-o json`): its per-repetition `samples_ts` when
/// present, else `avg_ts` alone.
pub fn parse_llama_bench(text: &str) -> Result<Value> {
    let v: Value = serde_json::from_str(text).context("llama-bench output is not JSON")?;
    let test = v
        .as_array()
        .and_then(|a| a.iter().find(|t| t["n_gen"].as_u64().unwrap_or(0) > 0))
        .context("llama-bench output has no generation test")?;
    let samples: Vec<f64> = match test["samples_ts"].as_array() {
        Some(a) if !a.is_empty() => a.iter().filter_map(Value::as_f64).collect(),
        _ => vec![test["avg_ts"]
            .as_f64()
            .context("llama-bench output without avg_ts")?],
    };
    Ok(summary(
        "llama.cpp",
        "tok/s",
        &samples,
        json!({"build_commit": test["build_commit"], "n_depth": test["n_depth"],
               "flash_attn": test["flash_attn"], "type": test["model_type"]}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_bench_json_gives_median_min_max() {
        let text = r#"[{"build_commit":"abc","model_type":"llama 8B F16","n_prompt":0,"n_gen":128,
            "n_depth":128,"flash_attn":1,"avg_ts":200.0,"stddev_ts":1.0,
            "samples_ts":[199.0,201.5,200.2]}]"#;
        let v = parse_llama_bench(text).unwrap();
        assert_eq!(v["median"].as_f64(), Some(200.2));
        assert_eq!(v["min"].as_f64(), Some(199.0));
        assert_eq!(v["max"].as_f64(), Some(201.5));
        assert_eq!(v["n"].as_u64(), Some(3));
        let only_avg = r#"[{"n_gen":64,"avg_ts":50.5}]"#;
        assert_eq!(
            parse_llama_bench(only_avg).unwrap()["median"].as_f64(),
            Some(50.5)
        );
        assert!(parse_llama_bench(r#"[{"n_gen":0,"avg_ts":1.0}]"#).is_err());
        assert!(parse_llama_bench("not json").is_err());
    }

    #[test]
    fn llama_bench_prompt_json_gives_ms_for_the_prompt() {
        let text = r#"[{"n_prompt":1024,"n_gen":0,"avg_ts":10000.0,
            "samples_ts":[10240.0,9000.0,12800.0]}]"#;
        let v = parse_llama_bench_prompt(text).unwrap();
        assert_eq!(v["unit"], "ms");
        assert_eq!(v["median"].as_f64(), Some(100.0));
        assert_eq!(v["min"].as_f64(), Some(80.0));
        assert!((v["max"].as_f64().unwrap() - 1024.0 / 9000.0 * 1e3).abs() < 1e-9);
        assert!(parse_llama_bench_prompt(r#"[{"n_prompt":0,"n_gen":64,"avg_ts":5.0}]"#).is_err());
    }
}
