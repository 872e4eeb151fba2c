//! `memra bench spec`: speculative decoding against plain decode, per prompt class, through the
//! scheduler (the path `memra serve` runs).
//!
//! For each class (the prompts of `spec_CLASS.jsonl`), drafter and K: warm-up, then N rounds of
//! plain decode over every prompt followed by speculative decode over the same prompts (A, B, A,
//! B, ...), each request alone, greedy, exactly `--new-tokens` tokens (with `--stop-at-eos`: up to
//! the model's end-of-sequence token, at most `--new-tokens`). Decode tok/s of a round is
//! its tokens after the first over the time from first to last token (prefill excluded); the
//! round's speedup is spec tok/s / plain tok/s of the adjacent pair. Acceptance = accepted /
//! drafted draft tokens over the timed rounds. The speculative output must equal plain decode.
//! The scheduler runs the speculation policy `memra serve` runs (`spec_min_acceptance`: a
//! sequence whose acceptance falls below it stops drafting and probes again every 16 steps), so
//! a drafter that rarely hits costs little; `extra` records the threshold.

use super::rows::{Row, Stats};
use super::sched::Sched;
use super::{BenchArgs, Ctx};
use anyhow::{bail, Context, Result};
use memra_engine::spec::{SpecMethod, SpecParams};
use serde_json::json;

/// A prompt class's token-id prompts.
fn class_prompts(args: &BenchArgs, ctx: &Ctx, class: &str) -> Result<Vec<Vec<u32>>> {
    let file = args.spec.prompts_dir.join(format!("spec_{class}.jsonl"));
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let tk = &ctx.loaded.tokenizer;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", file.display(), i + 1))?;
        let t = v["text"]
            .as_str()
            .with_context(|| format!("{}:{}: no \"text\"", file.display(), i + 1))?;
        let chat = v["chat"].as_bool().unwrap_or(false) && tk.has_chat_template();
        let ids = if chat {
            let m = json!([{"role": "user", "content": t}]);
            // A chat template writes its own BOS when the model wants one.
            tk.encode(&tk.apply_chat_template(&m, None, true)?, false)?
        } else {
            tk.encode(t, true)?
        };
        out.push(ids);
    }
    if out.is_empty() {
        bail!("{} has no prompts", file.display());
    }
    Ok(out)
}

/// One round over `prompts`: (decode tok/s, drafted, accepted, outputs).
fn round(
    sched: &mut Sched,
    prompts: &[Vec<u32>],
    new_tokens: usize,
    stop_ids: &[u32],
    sp: Option<SpecParams>,
) -> Result<(f64, u64, u64, Vec<Vec<u32>>)> {
    let (mut toks, mut secs, mut drafted, mut accepted) = (0usize, 0f64, 0u64, 0u64);
    let mut outs = Vec::new();
    for p in prompts {
        let t = sched.run_one(p, new_tokens, stop_ids, sp)?;
        toks += t.tokens.len().saturating_sub(1);
        secs += t.decode.as_secs_f64();
        drafted += u64::from(t.drafted);
        accepted += u64::from(t.accepted);
        outs.push(t.tokens);
    }
    if toks == 0 {
        bail!("every request ended within its first token: no decode to time");
    }
    Ok((toks as f64 / secs.max(1e-9), drafted, accepted, outs))
}

/// The rows: one per class, drafter and K, with the median/min/max speedup and, in `extra`, the
/// acceptance and both arms' decode tok/s.
pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> Result<Vec<Row>> {
    if args.new_tokens < 2 {
        bail!("spec needs --new-tokens of at least 2");
    }
    let mut methods = Vec::new();
    for m in &args.spec.method {
        for &k in &args.spec.k {
            let sp = SpecParams::parse(m, k).map_err(anyhow::Error::msg)?;
            if let SpecMethod::LayerSkip { layers } = sp.method {
                let n = ctx.loaded.model.config.n_layers;
                if layers >= n {
                    bail!("{m}: the model has {n} layers; layerskip needs fewer");
                }
            }
            methods.push((m.clone(), sp));
        }
    }
    let draft = if methods
        .iter()
        .any(|(_, sp)| sp.method == SpecMethod::DraftModel)
    {
        let d = ctx
            .cfg
            .serve
            .draft_model
            .as_deref()
            .context("--method draft needs --draft-model MODEL")?;
        Some(memra_engine::loader::load(&crate::pull::resolve(
            d, ctx.cfg,
        )?)?)
    } else {
        None
    };
    let stop_ids = if args.spec.stop_at_eos {
        let eos = ctx.loaded.tokenizer.eos.clone();
        if eos.is_empty() {
            bail!("--stop-at-eos: the model's tokenizer names no end-of-sequence token");
        }
        eos
    } else {
        Vec::new()
    };
    let mut sched = Sched::start(ctx, draft.as_ref())?;
    let mut rows = Vec::new();
    for class in &args.spec.class {
        let prompts = class_prompts(args, ctx, class)?;
        for (name, sp) in &methods {
            let (mut plain, mut spec, mut ratio) = (vec![], vec![], vec![]);
            let (mut drafted, mut accepted) = (0u64, 0u64);
            for i in 0..args.warmup + args.reps {
                let n = args.new_tokens;
                let (a, _, _, out_a) = round(&mut sched, &prompts, n, &stop_ids, None)?;
                let (b, d, acc, out_b) = round(&mut sched, &prompts, n, &stop_ids, Some(*sp))?;
                if let Some(j) = (0..prompts.len()).find(|&j| out_a[j] != out_b[j]) {
                    bail!("{class} prompt {j}: speculative ({name}, k={}) output differs from plain decode", sp.k);
                }
                if i >= args.warmup {
                    plain.push(a);
                    spec.push(b);
                    ratio.push(b / a);
                    drafted += d;
                    accepted += acc;
                }
            }
            let acceptance = if drafted == 0 {
                0.0
            } else {
                accepted as f64 / drafted as f64
            };
            let mut params = json!({"class": class, "method": name, "k": sp.k,
                                    "new_tokens": args.new_tokens, "prompts": prompts.len()});
            if args.spec.stop_at_eos {
                params["stop"] = json!("eos");
            }
            let mut r = ctx.env.row("spec", params, Stats::of(&ratio), "x", None);
            r.extra = Some(json!({
                "acceptance": acceptance,
                "drafted": drafted,
                "accepted": accepted,
                "plain_tok_s": Stats::of(&plain),
                "spec_tok_s": Stats::of(&spec),
                // As written in the config (0.1, not f32's 0.10000000149).
                "spec_min_acceptance": ctx.cfg.spec_min_acceptance.to_string().parse::<f64>().ok(),
                "spec_row_cost": ctx.cfg.spec_row_cost.to_string().parse::<f64>().ok(),
                "spec_verify_base": ctx.cfg.spec_verify_base.to_string().parse::<f64>().ok(),
            }));
            rows.push(r);
        }
    }
    Ok(rows)
}
