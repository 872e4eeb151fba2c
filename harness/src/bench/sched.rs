//! The continuous-batching scheduler in this process, for the scenarios that time requests
//! through it (spec, prefix): the same scheduler `memra serve` runs, without HTTP.

use super::Ctx;
use anyhow::{bail, Context, Result};
use memra_engine::loader::LoadedModel;
use memra_engine::sample::SamplingParams;
use memra_engine::sched::{Event, SchedulerConfig, SchedulerHandle, Submit};
use memra_engine::spec::SpecParams;
use std::time::{Duration, Instant};

/// A scheduler thread, stopped (and its KV cache freed) on drop.
pub struct Sched {
    pub handle: SchedulerHandle,
    /// Prompt plus generated tokens per sequence (the model's context capped by the KV cache).
    pub max_context: usize,
    /// Which limit `max_context` is, for the error of a request past it.
    limit: &'static str,
    next_id: u64,
}

impl Drop for Sched {
    fn drop(&mut self) {
        self.handle.shutdown();
        // Wait for the engine thread so that its KV cache is gone before anything else sizes
        // one from the free memory.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.handle.is_stopped() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One request's timeline, stamped on the engine thread as the events were sent.
#[derive(Debug, Clone)]
pub struct Timed {
    pub tokens: Vec<u32>,
    /// Submission to the first token.
    pub ttft: Duration,
    /// First token to last token.
    pub decode: Duration,
    /// Prompt tokens served from the prefix cache.
    pub cached: usize,
    pub drafted: u32,
    pub accepted: u32,
}

impl Sched {
    /// Starts a scheduler for the context's model with the limits `memra serve` would use
    /// (`max_batch_tokens`, `max_running`, the speculation policy) and `draft` beside it when
    /// given.
    pub fn start(ctx: &Ctx, draft: Option<&LoadedModel>) -> Result<Sched> {
        let cfg = ctx.cfg;
        let (blocks, make) = crate::run::backend_factory(&ctx.loaded.model, cfg)?;
        let make_draft = match draft {
            Some(d) => Some(crate::run::backend_factory(&d.model, cfg)?.1),
            None => None,
        };
        let model_context = ctx.loaded.model.config.max_context;
        let max_context = model_context.min(blocks * cfg.kv_block_size);
        let limit = if max_context < model_context {
            "the KV cache holds (raise --kv-cache-mib or shorten)"
        } else {
            "the model's context"
        };
        let handle = SchedulerHandle::spawn_with_draft(
            make,
            make_draft,
            SchedulerConfig {
                max_batch_tokens: cfg.serve.max_batch_tokens,
                max_running: cfg.serve.max_running,
                max_context,
                spec_max_running: cfg.spec_max_running,
                spec_min_acceptance: cfg.spec_min_acceptance,
                spec_row_cost: cfg.spec_row_cost,
                spec_verify_base: cfg.spec_verify_base,
                ..Default::default()
            },
        )
        .context("starting the scheduler")?;
        Ok(Sched {
            handle,
            max_context,
            limit,
            next_id: 1,
        })
    }

    /// Runs one greedy request alone and returns its timeline: exactly `max_tokens` tokens when
    /// `stop_ids` is empty, else up to a stop token (not included) or `max_tokens`.
    pub fn run_one(
        &mut self,
        prompt: &[u32],
        max_tokens: usize,
        stop_ids: &[u32],
        spec: Option<SpecParams>,
    ) -> Result<Timed> {
        if prompt.len() + max_tokens > self.max_context {
            bail!(
                "{} prompt + {max_tokens} new tokens exceed the {} positions {}",
                prompt.len(),
                self.max_context,
                self.limit
            );
        }
        let (tx, rx) = std::sync::mpsc::channel();
        self.next_id += 1;
        let t0 = Instant::now();
        self.handle
            .submit(Submit {
                id: self.next_id,
                prompt: prompt.to_vec(),
                params: SamplingParams::greedy(),
                max_tokens,
                stop_ids: stop_ids.to_vec(),
                n: 1,
                logprobs: None,
                tenant: String::new(),
                return_logits: false,
                spec,
                events: Box::new(move |e| tx.send((Instant::now(), e)).is_ok()),
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let (mut tokens, mut first, mut last, mut cached) = (Vec::new(), None, t0, 0);
        let (mut drafted, mut accepted) = (0, 0);
        loop {
            let (at, e) = rx
                .recv_timeout(Duration::from_secs(600))
                .context("the scheduler went silent for 600 s")?;
            match e {
                Event::Started { cached_tokens, .. } => cached = cached_tokens,
                Event::Token { token, .. } => {
                    first.get_or_insert(at);
                    last = at;
                    tokens.push(token);
                }
                Event::Finished {
                    drafted: d,
                    accepted: a,
                    ..
                } => (drafted, accepted) = (d, a),
                Event::Done => break,
                Event::Error(e) => bail!("request failed: {e}"),
            }
        }
        // With stop ids the first token may be one: no token, nothing to time.
        let first = match first {
            Some(f) => f,
            None if !stop_ids.is_empty() => last,
            None => bail!("the request produced no token"),
        };
        if tokens.len() != max_tokens && stop_ids.is_empty() {
            bail!(
                "a request stopped after {} of {max_tokens} tokens",
                tokens.len()
            );
        }
        Ok(Timed {
            tokens,
            ttft: first - t0,
            decode: last - first,
            cached,
            drafted,
            accepted,
        })
    }
}
