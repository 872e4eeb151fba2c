//! `memra bench --compare REF.jsonl`: re-measure the cells of a reference file with this build and
//! flag the ones that moved beyond the measured spread.
//!
//! A cell is a (scenario, params) pair of REF measured on this device and backend with this
//! model (`--model` names it; rows of other devices, backends or models are counted as skipped,
//! and so are rows of other scenarios when one is named: `memra bench decode --compare REF`).
//! When REF holds a cell more than once, its latest row is the reference. Every cell is measured
//! again now, with this build, `--reps` timed runs after `--warmup` (the scenario's parameters
//! come from the cell; the configuration flags from this command line: a cell whose params record
//! a setting that differs, such as ttft's `prefill_chunk`, cannot be re-measured and fails).
//!
//! Verdict: with REF's [min, max] and the new run's half-spread w = (new max - new min) / 2, the
//! cell is `same` while the new median lies in [min - w, max + w], otherwise `improved` or
//! `REGRESSED` by the direction that is better for its unit (ms: lower; tok/s and x: higher).
//! Without `--against`, the reference was measured earlier (by the other build), not interleaved
//! with this run: drift of the machine between the two runs counts as change, so compare on a
//! quiet machine and with N >= 5 on both sides (with N = 1 the spread is zero and any noise is
//! flagged). With `--against BIN`, BIN measures each cell now, run by run alternating with this
//! build (`super::against`), and its runs are the reference. The command exits non-zero when a
//! cell regressed or could not be re-measured.

use super::rows::{Row, Stats};
use super::{measure, BenchArgs, Ctx, Scenario};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The fields of a reference row that `--compare` reads (others are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct RefRow {
    pub scenario: String,
    pub params: Value,
    pub model: String,
    pub backend: String,
    pub device: String,
    pub unit: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    #[serde(default)]
    pub time: u64,
    /// The engine settings the row was measured under (`Env::settings`): a cell measured under
    /// other kernel defines or KV dtype is another cell.
    #[serde(default)]
    pub settings: Option<Value>,
}

/// How a cell compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Same,
    Improved,
    Regressed,
}

/// The verdict for a new measurement `new` of a cell whose reference is `r` (see the module
/// documentation).
pub fn verdict(r: &RefRow, new: &Stats) -> Verdict {
    let w = (new.max - new.min) / 2.0;
    let (lo, hi) = (r.min - w, r.max + w);
    let higher_is_better = r.unit != "ms";
    if new.median < lo {
        if higher_is_better {
            Verdict::Regressed
        } else {
            Verdict::Improved
        }
    } else if new.median > hi {
        if higher_is_better {
            Verdict::Improved
        } else {
            Verdict::Regressed
        }
    } else {
        Verdict::Same
    }
}

fn usize_of(p: &Value, k: &str) -> Result<usize> {
    p[k].as_u64()
        .map(|v| v as usize)
        .with_context(|| format!("params has no integer {k:?}: {p}"))
}

fn str_of<'a>(p: &'a Value, k: &str) -> Result<&'a str> {
    p[k].as_str()
        .with_context(|| format!("params has no string {k:?}: {p}"))
}

/// The arguments that measure the cell (`scenario`, `p`) and nothing else.
fn cell_args(base: &BenchArgs, scenario: Scenario, p: &Value) -> Result<BenchArgs> {
    let mut a = base.clone();
    a.compare = None;
    a.scenario = Some(scenario);
    match scenario {
        Scenario::Decode => {
            a.batch = vec![usize_of(p, "batch")?];
            a.depth = vec![usize_of(p, "depth")?];
            a.new_tokens = usize_of(p, "new_tokens")?;
        }
        Scenario::Ttft => a.prompt_len = vec![usize_of(p, "prompt_len")?],
        Scenario::Prefix => {
            a.prompt_len = vec![usize_of(p, "prompt_len")?];
            a.suffix_len = usize_of(p, "suffix_len")?;
        }
        Scenario::Spec => {
            a.spec.class = vec![str_of(p, "class")?.to_string()];
            a.spec.method = vec![str_of(p, "method")?.to_string()];
            a.spec.k = vec![usize_of(p, "k")?];
            a.new_tokens = usize_of(p, "new_tokens")?;
            a.spec.stop_at_eos = match p.get("stop") {
                None | Some(Value::Null) => false,
                Some(s) if s == "eos" => true,
                Some(s) => bail!("unknown spec stop {s}"),
            };
        }
        Scenario::Serve => {
            a.new_tokens = usize_of(p, "new_tokens")?;
            a.load.prompt_text = p["prompt_text"].as_str().map(String::from);
            // A text prompt's rows carry no input_len (older rows may: it was not used).
            if a.load.prompt_text.is_none() {
                a.load.input_len = usize_of(p, "input_len")?;
            }
            match str_of(p, "mode")? {
                "closed" => {
                    a.load.concurrency = Some(vec![usize_of(p, "concurrency")?]);
                    a.load.rate = vec![];
                }
                "open" => {
                    // With a rate and no concurrency, `serve` runs no closed-loop level.
                    a.load.concurrency = None;
                    a.load.rate = vec![p["rate"].as_f64().context("params has no rate")?];
                }
                m => bail!("unknown serve mode {m:?}"),
            }
            match p["duration_s"].as_f64() {
                Some(d) => a.load.duration = Some(d),
                None => {
                    a.load.duration = None;
                    a.load.requests = usize_of(p, "requests")?;
                }
            }
        }
    }
    Ok(a)
}

/// Runs `memra bench --compare REF`.
pub fn run(base: &BenchArgs, ctx: &mut Ctx, reference: &Path, out: Option<&Path>) -> Result<()> {
    let text = std::fs::read_to_string(reference)
        .with_context(|| format!("reading {}", reference.display()))?;
    // Latest row per cell of this device, backend and model.
    let mut cells: BTreeMap<(String, String), RefRow> = BTreeMap::new();
    // The REF line each kept cell came from (1-based), for errors that name it.
    let mut lines: BTreeMap<(String, String), usize> = BTreeMap::new();
    let (mut skipped, mut superseded) = (0, 0);
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let r: RefRow = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not a bench row", reference.display(), i + 1))?;
        let env = &ctx.env;
        if r.device != env.device
            || r.backend != env.backend
            || r.model != env.model
            || r.settings != env.settings
            || base.scenario.is_some_and(|s| s.name() != r.scenario)
        {
            skipped += 1;
            continue;
        }
        let key = (r.scenario.clone(), super::rows::canonical(&r.params));
        superseded += usize::from(cells.contains_key(&key));
        if cells.get(&key).is_none_or(|old| r.time >= old.time) {
            lines.insert(key.clone(), i + 1);
            cells.insert(key, r);
        }
    }
    if cells.is_empty() {
        bail!(
            "{} has no cells measured on {} ({}) with {} under this run's settings ({skipped} \
             rows of other devices, backends, models, settings or scenarios)",
            reference.display(),
            ctx.env.device,
            ctx.env.backend,
            ctx.env.model
        );
    }
    // The runs that measure them, deduplicated (one serve level gives three cells), serve first
    // (before this process holds any weights on the device), decode and ttft last.
    let mut jobs: Vec<(Scenario, BenchArgs, Value)> = Vec::new();
    for (key, r) in &cells {
        let at = || format!("{}:{}", reference.display(), lines[key]);
        let sc = Scenario::from_str(&r.scenario, false)
            .map_err(|_| anyhow::anyhow!("{}: unknown scenario {:?}", at(), r.scenario))?;
        let a = cell_args(base, sc, &r.params).with_context(at)?;
        if !jobs
            .iter()
            .any(|(s, b, _)| *s == sc && format!("{b:?}") == format!("{a:?}"))
        {
            jobs.push((sc, a, r.params.clone()));
        }
    }
    let order = |s: &Scenario| match s {
        Scenario::Serve => 0,
        Scenario::Spec | Scenario::Prefix => 1,
        Scenario::Decode | Scenario::Ttft => 2,
    };
    jobs.sort_by_key(|(s, _, _)| order(s));
    eprintln!(
        "bench --compare {}: {} cells in {} runs on {} ({}); {skipped} rows skipped (other device, backend, model, settings or scenario){}",
        reference.display(),
        cells.len(),
        jobs.len(),
        ctx.env.device,
        ctx.env.backend,
        if superseded > 0 {
            format!("; {superseded} earlier rows of the same cells superseded by their latest row")
        } else {
            String::new()
        }
    );
    let (new_rows, against) = match &base.against {
        Some(bin) => {
            let (rows, refs) = super::against::interleaved(&jobs, bin, base, ctx)?;
            (rows, Some(refs))
        }
        None => {
            // A cell whose run fails (its params refused by this build, say) gets the table's
            // "NOT RE-MEASURED" verdict, and the others still run.
            let mut rows: Vec<Row> = Vec::new();
            for (sc, a, params) in &jobs {
                match measure(*sc, a, ctx) {
                    Ok(r) => rows.extend(r),
                    Err(e) => eprintln!(
                        "bench --compare {}: cell {} {params} cannot be re-measured: {e:#}",
                        reference.display(),
                        sc.name()
                    ),
                }
            }
            (rows, None)
        }
    };
    if let Some(out) = out {
        super::rows::append(out, &new_rows)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    let mut table = vec![[
        "cell".to_string(),
        "unit".into(),
        "ref median [min, max]".into(),
        "new median [min, max]".into(),
        "new/ref".into(),
        "verdict".into(),
    ]];
    let new_keys: Vec<String> = new_rows
        .iter()
        .map(|n| super::rows::canonical(&n.params))
        .collect();
    let (mut regressed, mut missing) = (0, 0);
    for ((scenario, params), r) in &cells {
        let cell = format!("{scenario} {params}");
        // With --against, the reference is BIN's runs of the cell, measured just now.
        let r = match &against {
            None => r,
            Some(m) => match m.get(&(scenario.clone(), params.clone())) {
                Some(other) => other,
                None => {
                    missing += 1;
                    table.push([
                        cell,
                        r.unit.clone(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        "NOT MEASURED BY --against".into(),
                    ]);
                    continue;
                }
            },
        };
        let refs = format!("{:.4} [{:.4}, {:.4}]", r.median, r.min, r.max);
        let found = new_rows
            .iter()
            .zip(&new_keys)
            .find(|(n, k)| n.scenario == scenario && *k == params)
            .map(|(n, _)| n);
        let Some(n) = found else {
            missing += 1;
            let why = not_remeasured_why(
                &r.params,
                new_rows
                    .iter()
                    .filter(|n| n.scenario == scenario)
                    .map(|n| &n.params),
            );
            table.push([
                cell,
                r.unit.clone(),
                refs,
                "-".into(),
                "-".into(),
                format!("NOT RE-MEASURED: {why}"),
            ]);
            continue;
        };
        let v = verdict(r, &n.stats);
        regressed += usize::from(v == Verdict::Regressed);
        table.push([
            cell,
            r.unit.clone(),
            refs,
            format!(
                "{:.4} [{:.4}, {:.4}]",
                n.stats.median, n.stats.min, n.stats.max
            ),
            format!("{:.3}", n.stats.median / r.median),
            match v {
                Verdict::Same => "same",
                Verdict::Improved => "improved",
                Verdict::Regressed => "REGRESSED",
            }
            .into(),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in &table {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(s, w)| format!("{s:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    if regressed + missing > 0 {
        bail!(
            "{regressed} of {} cells regressed beyond the measured spread, {missing} could not be re-measured",
            cells.len()
        );
    }
    println!(
        "{} cells: none regressed beyond the measured spread",
        cells.len()
    );
    Ok(())
}

/// Why a REF cell with params `want` got no row: the params of this run's closest row of the
/// same scenario (fewest differing keys) against REF's, key by key, or that there was none.
fn not_remeasured_why<'a>(want: &Value, got: impl Iterator<Item = &'a Value>) -> String {
    let diff = |g: &Value| -> Vec<String> {
        let (a, b) = (want.as_object(), g.as_object());
        let mut keys: Vec<&String> = a.iter().chain(b.iter()).flat_map(|m| m.keys()).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter(|k| want.get(k.as_str()) != g.get(k.as_str()))
            .map(|k| {
                let show = |v: Option<&Value>| v.map_or("none".to_string(), Value::to_string);
                format!(
                    "{k} {} here, {} in REF",
                    show(g.get(k.as_str())),
                    show(want.get(k.as_str()))
                )
            })
            .collect()
    };
    match got.map(diff).min_by_key(Vec::len) {
        Some(d) => format!("this run's params differ ({})", d.join(", ")),
        None => "this run gave no row of the scenario".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    /// A cell with no row says which params of the closest row differ, or that none came.
    #[test]
    fn not_remeasured_names_the_differing_params() {
        let want = json!({"prompt_len": 1024, "prefill_chunk": 1024});
        let far = json!({"prompt_len": 512, "prefill_chunk": 512});
        let near = json!({"prompt_len": 1024, "prefill_chunk": 512});
        assert_eq!(
            not_remeasured_why(&want, [&far, &near].into_iter()),
            "this run's params differ (prefill_chunk 512 here, 1024 in REF)"
        );
        let extra = json!({"prompt_len": 1024});
        assert_eq!(
            not_remeasured_why(&want, [&extra].into_iter()),
            "this run's params differ (prefill_chunk none here, 1024 in REF)"
        );
        assert_eq!(
            not_remeasured_why(&want, std::iter::empty()),
            "this run gave no row of the scenario"
        );
    }

    /// `cell_args` (this build re-measures a cell) and `against::cell_flags` (another build is
    /// told to) map a row's params the same way: parsing the flags gives the same arguments.
    #[test]
    fn cell_args_and_cell_flags_agree() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let parse = |flags: &[String]| {
            let argv = ["bench".to_string()]
                .into_iter()
                .chain(flags.iter().cloned());
            Cli::try_parse_from(argv.chain(["--model".into(), "m".into()]))
                .unwrap()
                .bench
        };
        let cells = [
            (
                Scenario::Decode,
                json!({"batch": 8, "depth": 128, "new_tokens": 64}),
            ),
            (
                Scenario::Ttft,
                json!({"prompt_len": 512, "prefill_chunk": 512}),
            ),
            (
                Scenario::Prefix,
                json!({"prompt_len": 1024, "suffix_len": 32, "arm": "hit"}),
            ),
            (
                Scenario::Spec,
                json!({"class": "code", "method": "ngram", "k": 4, "new_tokens": 128}),
            ),
            (
                Scenario::Spec,
                json!({"class": "chat", "method": "ngram:5", "k": 8, "new_tokens": 256,
                       "stop": "eos"}),
            ),
            (
                Scenario::Serve,
                json!({"input_len": 32, "new_tokens": 8, "mode": "open", "rate": 2.5,
                       "requests": 12}),
            ),
            (
                Scenario::Serve,
                json!({"input_len": 64, "new_tokens": 16, "mode": "closed", "concurrency": 4,
                       "duration_s": 3.0, "prompt_text": "hello"}),
            ),
        ];
        for (sc, p) in cells {
            let flags = super::super::against::cell_flags(sc, &p).unwrap();
            let base = parse(&[sc.name().to_string()]);
            let want = format!("{:?}", cell_args(&base, sc, &p).unwrap());
            assert_eq!(format!("{:?}", parse(&flags)), want, "{p}");
        }
        let base = parse(&["spec".to_string()]);
        for stop in [json!("length"), json!(1)] {
            let bad = json!({"class": "code", "method": "ngram", "k": 4, "new_tokens": 8,
                             "stop": stop});
            assert!(super::super::against::cell_flags(Scenario::Spec, &bad).is_err());
            assert!(cell_args(&base, Scenario::Spec, &bad).is_err());
        }
    }

    fn r(unit: &str, median: f64, min: f64, max: f64) -> RefRow {
        RefRow {
            scenario: "decode".into(),
            params: Value::Null,
            model: String::new(),
            backend: String::new(),
            device: String::new(),
            unit: unit.into(),
            median,
            min,
            max,
            time: 0,
            settings: None,
        }
    }

    #[test]
    fn verdict_widens_by_the_new_spread_and_knows_direction() {
        let s = |median, min, max| Stats {
            n: 5,
            median,
            min,
            max,
        };
        // Inside the reference range.
        assert_eq!(
            verdict(&r("tok/s", 100.0, 95.0, 105.0), &s(97.0, 96.0, 98.0)),
            Verdict::Same
        );
        // Below it, but within the widening by the new half-spread (4).
        assert_eq!(
            verdict(&r("tok/s", 100.0, 95.0, 105.0), &s(92.0, 88.0, 96.0)),
            Verdict::Same
        );
        assert_eq!(
            verdict(&r("tok/s", 100.0, 95.0, 105.0), &s(80.0, 79.0, 81.0)),
            Verdict::Regressed
        );
        assert_eq!(
            verdict(&r("tok/s", 100.0, 95.0, 105.0), &s(120.0, 119.0, 121.0)),
            Verdict::Improved
        );
        assert_eq!(
            verdict(&r("ms", 10.0, 9.0, 11.0), &s(20.0, 19.0, 21.0)),
            Verdict::Regressed
        );
        assert_eq!(
            verdict(&r("ms", 10.0, 9.0, 11.0), &s(5.0, 4.0, 6.0)),
            Verdict::Improved
        );
        assert_eq!(
            verdict(&r("x", 2.0, 1.9, 2.1), &s(1.0, 1.0, 1.0)),
            Verdict::Regressed
        );
    }
}
