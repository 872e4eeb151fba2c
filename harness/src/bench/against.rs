//! `memra bench --compare REF --against BIN`: REF's cells measured by another build (the `memra`
//! binary BIN) and by this one, interleaved run by run, so drift of the machine during the
//! comparison falls on both sides alike.
//!
//! For each cell, `--reps` rounds of one timed run of BIN and one of this build, each after
//! `--warmup` untimed runs. This build drops its engine (KV cache, step buffers, CUDA graphs)
//! before each BIN run and builds it again for its own; on a GPU its weights stay resident (the
//! process-wide weight pool), so BIN runs beside them and sizes a smaller KV cache (decode of a
//! fixed batch does not depend on the cache's size). BIN runs as `BIN GLOBAL... bench SCENARIO
//! CELL-FLAGS --model MODEL --reps 1 --warmup W --out TMP`, where GLOBAL are the arguments this
//! command was given before `bench` (configuration flags such as `--backend cpu`; put them
//! there), and CELL-FLAGS the cell's
//! parameters as flags. Each side's N timed runs give its median, min and max; the verdict is
//! [`super::compare::verdict`] with BIN's runs as the reference.

use super::compare::RefRow;
use super::rows::{Row, Stats};
use super::{measure, BenchArgs, Ctx, Scenario};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The command-line flags that make `bench SCENARIO` measure exactly the cell `p`.
pub fn cell_flags(scenario: Scenario, p: &Value) -> Result<Vec<String>> {
    let num = |k: &str| -> Result<String> {
        p[k].as_u64()
            .map(|v| v.to_string())
            .with_context(|| format!("params has no integer {k:?}: {p}"))
    };
    let text = |k: &str| -> Result<String> {
        p[k].as_str()
            .map(String::from)
            .with_context(|| format!("params has no string {k:?}: {p}"))
    };
    let mut f: Vec<String> = vec![scenario.name().into()];
    let mut add = |flag: &str, v: String| {
        f.push(flag.into());
        f.push(v);
    };
    match scenario {
        Scenario::Decode => {
            add("--batch", num("batch")?);
            add("--depth", num("depth")?);
            add("--new-tokens", num("new_tokens")?);
        }
        Scenario::Ttft => add("--prompt-len", num("prompt_len")?),
        Scenario::Prefix => {
            add("--prompt-len", num("prompt_len")?);
            add("--suffix-len", num("suffix_len")?);
        }
        Scenario::Spec => {
            add("--class", text("class")?);
            add("--method", text("method")?);
            add("--k", num("k")?);
            add("--new-tokens", num("new_tokens")?);
            match p.get("stop") {
                None | Some(Value::Null) => {}
                Some(s) if s == "eos" => f.push("--stop-at-eos".into()),
                Some(s) => bail!("unknown spec stop {s}"),
            }
        }
        Scenario::Serve => {
            add("--new-tokens", num("new_tokens")?);
            // A text prompt or random tokens of input_len (older text rows carry an unused one).
            match p["prompt_text"].as_str() {
                Some(t) => add("--prompt-text", t.into()),
                None => add("--input-len", num("input_len")?),
            }
            match text("mode")?.as_str() {
                "closed" => add("--concurrency", num("concurrency")?),
                "open" => {
                    let r = p["rate"].as_f64().context("params has no rate")?;
                    add("--rate", r.to_string());
                }
                m => bail!("unknown serve mode {m:?}"),
            }
            match p["duration_s"].as_f64() {
                Some(d) => add("--duration", d.to_string()),
                None => add("--requests", num("requests")?),
            }
        }
    }
    Ok(f)
}

/// The arguments of this process before its `bench` subcommand (the configuration flags BIN gets).
fn global_args() -> Vec<String> {
    std::env::args()
        .skip(1)
        .take_while(|a| a != "bench")
        .collect()
}

/// One run of BIN on a cell: the medians of the rows it wrote, by (scenario, params).
fn run_other(
    bin: &Path,
    flags: &[String],
    base: &BenchArgs,
    warmup: usize,
    tmp: &Path,
) -> Result<Vec<RefRow>> {
    let _ = std::fs::remove_file(tmp);
    // Only spec reads prompt sets (and `bench` refuses another scenario's flags).
    let prompts: Vec<&std::ffi::OsStr> = if flags.first().map(String::as_str) == Some("spec") {
        vec!["--prompts-dir".as_ref(), base.spec.prompts_dir.as_os_str()]
    } else {
        vec![]
    };
    let out = Command::new(bin)
        .args(global_args())
        .arg("bench")
        .args(flags)
        .args(["--model", &base.model, "--reps", "1"])
        .args(["--warmup", &warmup.to_string()])
        .args(prompts)
        .arg("--out")
        .arg(tmp)
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} bench {} failed ({}): {}",
            bin.display(),
            flags.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    let text = std::fs::read_to_string(tmp)
        .with_context(|| format!("{} wrote no rows to {}", bin.display(), tmp.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("a row of {}", bin.display())))
        .collect()
}

/// BIN's reference rows by (scenario, params as JSON text).
pub type RefCells = BTreeMap<(String, String), RefRow>;

/// Measures each job (`scenario`, the arguments of one cell) `reps` times on BIN and on this
/// build, alternating. Returns this build's rows (median/min/max of its runs) and BIN's
/// reference rows, keyed by (scenario, params as JSON text).
pub fn interleaved(
    jobs: &[(Scenario, BenchArgs, Value)],
    bin: &Path,
    base: &BenchArgs,
    ctx: &mut Ctx,
) -> Result<(Vec<Row>, RefCells)> {
    let tmp_dir = tempfile::tempdir().context("a temporary directory for BIN's rows")?;
    let tmp = tmp_dir.path().join("other.jsonl");
    let mut ours: BTreeMap<(String, String), (Row, Vec<f64>)> = BTreeMap::new();
    let mut theirs: BTreeMap<(String, String), (RefRow, Vec<f64>)> = BTreeMap::new();
    for (sc, a, params) in jobs {
        let flags = cell_flags(*sc, params)?;
        eprintln!(
            "against {}: {} x {} interleaved",
            bin.display(),
            flags.join(" "),
            base.reps
        );
        for rep in 0..base.reps {
            // BIN is a new process every run, so every run of it warms up. This build drops its
            // engine before each of BIN's runs (on a GPU, its KV cache reservation would leave
            // BIN no room: run 76), so every run of its own warms up too. The order
            // alternates (BIN first on even runs), so neither side always follows the other.
            let other =
                |theirs: &mut BTreeMap<_, (RefRow, Vec<f64>)>, ctx: &mut Ctx| -> Result<()> {
                    ctx.engine = None;
                    for r in run_other(bin, &flags, base, base.warmup, &tmp)? {
                        let key = (r.scenario.clone(), super::rows::canonical(&r.params));
                        let median = r.median;
                        theirs.entry(key).or_insert((r, Vec::new())).1.push(median);
                    }
                    Ok(())
                };
            if rep % 2 == 0 {
                other(&mut theirs, ctx)?;
            }
            let mut one = a.clone();
            one.reps = 1;
            one.warmup = base.warmup;
            for row in measure(*sc, &one, ctx)? {
                let key = (
                    row.scenario.to_string(),
                    super::rows::canonical(&row.params),
                );
                let median = row.stats.median;
                ours.entry(key).or_insert((row, Vec::new())).1.push(median);
            }
            if rep % 2 == 1 {
                other(&mut theirs, ctx)?;
            }
        }
    }
    let rows = ours
        .into_values()
        .map(|(mut row, v)| {
            // The row's GB/s was its first run's: restat rescales it to the median of all.
            row.restat(v);
            row
        })
        .collect();
    let refs = theirs
        .into_iter()
        .map(|(k, (mut r, v))| {
            let s = Stats::of(&v);
            (r.median, r.min, r.max) = (s.median, s.min, s.max);
            (k, r)
        })
        .collect();
    Ok((rows, refs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_become_the_flags_that_measure_them() {
        let f = cell_flags(
            Scenario::Decode,
            &json!({"batch": 8, "depth": 128, "new_tokens": 64}),
        )
        .unwrap();
        assert_eq!(
            f,
            [
                "decode",
                "--batch",
                "8",
                "--depth",
                "128",
                "--new-tokens",
                "64"
            ]
        );
        let f = cell_flags(
            Scenario::Serve,
            &json!({"input_len": 32, "new_tokens": 8, "mode": "open", "rate": 2.5,
                    "requests": 12}),
        )
        .unwrap();
        assert_eq!(
            f.join(" "),
            "serve --new-tokens 8 --input-len 32 --rate 2.5 --requests 12"
        );
        assert!(cell_flags(Scenario::Ttft, &json!({"prompt": 3})).is_err());
    }
}
