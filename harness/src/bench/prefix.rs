//! `memra bench prefix`: time to first token when the prompt's prefix is in the prefix cache
//! against the same-length prompt cold, through the scheduler.
//!
//! Each run draws a fresh random prefix P (`prompt_len - suffix_len` tokens) and two random
//! suffixes S1, S2. The cold request P+S1 runs first (nothing of it is cached; the scheduler
//! must report 0 cached tokens), then the hit request P+S2, whose prefix P the cold request has
//! just left in the cache (the scheduler must report cached tokens). So cold and hit alternate,
//! and each ratio cold/hit is of two adjacent runs.

use super::rows::{Row, Stats};
use super::sched::Sched;
use super::{prompt_ids, BenchArgs, Ctx};
use anyhow::{bail, Result};
use serde_json::json;

/// The rows: per prompt length, cold TTFT (ms), hit TTFT (ms) and the paired ratio cold/hit.
pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> Result<Vec<Row>> {
    let vocab = ctx.loaded.model.config.vocab_size;
    let mut sched = Sched::start(ctx, None)?;
    let mut rows = Vec::new();
    let model_context = ctx.loaded.model.config.max_context;
    for &len in &args.prompt_len {
        if model_context > 0 && len + 1 > model_context {
            eprintln!(
                "prefix: skipping the {len}-token prompt: with its first token it takes {} \
                 positions, beyond the model's context of {model_context} tokens",
                len + 1
            );
            continue;
        }
        if args.suffix_len == 0 || args.suffix_len >= len {
            bail!("--suffix-len must be in 1..{len} (the prompt length)");
        }
        let prefix_len = len - args.suffix_len;
        let (mut cold, mut hit, mut ratio, mut cached) = (vec![], vec![], vec![], vec![]);
        for i in 0..args.warmup + args.reps {
            let seed = ctx.fresh_seed();
            let p = prompt_ids(prefix_len, vocab, seed);
            let with = |salt: u64| {
                let mut v = p.clone();
                v.extend(prompt_ids(args.suffix_len, vocab, seed ^ salt));
                v
            };
            let c = sched.run_one(&with(0x5EED_0001 << 32), 1, &[], None)?;
            let h = sched.run_one(&with(0x5EED_0002 << 32), 1, &[], None)?;
            if c.cached != 0 {
                bail!(
                    "the cold request found {} tokens in the prefix cache",
                    c.cached
                );
            }
            if h.cached == 0 {
                bail!(
                    "the prefix cache served none of the {prefix_len}-token prefix (is it shorter \
                     than a KV block of {}?)",
                    ctx.cfg.kv_block_size
                );
            }
            if i >= args.warmup {
                let (cm, hm) = (c.ttft.as_secs_f64() * 1e3, h.ttft.as_secs_f64() * 1e3);
                cold.push(cm);
                hit.push(hm);
                ratio.push(cm / hm.max(1e-9));
                cached.push(h.cached as f64);
            }
        }
        let params = |arm: &str| {
            json!({"prompt_len": len, "suffix_len": args.suffix_len, "arm": arm,
                   "max_batch_tokens": ctx.cfg.serve.max_batch_tokens})
        };
        let cached_tokens = Stats::of(&cached).median.round() as u64;
        let mut r = ctx
            .env
            .row("prefix", params("cold"), Stats::of(&cold), "ms", None);
        r.extra = Some(json!({"cached_tokens": 0}));
        rows.push(r);
        let mut r = ctx
            .env
            .row("prefix", params("hit"), Stats::of(&hit), "ms", None);
        r.extra = Some(json!({"cached_tokens": cached_tokens}));
        rows.push(r);
        let mut r = ctx
            .env
            .row("prefix", params("ratio"), Stats::of(&ratio), "x", None);
        r.extra = Some(json!({
            "cold_ms": Stats::of(&cold).median,
            "hit_ms": Stats::of(&hit).median,
            "cached_tokens": cached_tokens,
        }));
        rows.push(r);
    }
    Ok(rows)
}
