//! A single-sequence generation loop over a backend and the block manager: chunked prefill, then
//! one-token decode steps, with stop conditions. The continuous-batching scheduler (serve) drives
//! the same backend interface with many sequences per step.

use crate::backend::{Backend, LogitsWanted, Pick, SeqChunk};
use crate::error::{Error, Result};
use crate::kv::{BlockManager, BlockTable};
use crate::sample::{sample, SamplingParams};
use std::time::Instant;

/// Why a generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-sequence token was produced.
    Stop,
    /// `max_tokens` reached.
    Length,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    pub prompt: Vec<u32>,
    pub params: SamplingParams,
    pub max_tokens: usize,
    /// Token ids that end the generation (not included in the output).
    pub stop_ids: Vec<u32>,
    /// Index of this sequence among a request's choices; keys the random draws.
    pub sequence: u32,
}

/// The result and its timings.
#[derive(Debug, Clone)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub finish: FinishReason,
    /// Logits at the last prompt position (the distribution of the first generated token).
    pub prompt_logits: Vec<f32>,
    /// Seconds spent in prefill, and in decode steps.
    pub prefill_secs: f64,
    pub decode_secs: f64,
}

/// Backend plus KV bookkeeping for running generations.
pub struct Engine {
    pub backend: Box<dyn Backend>,
    pub blocks: BlockManager,
    /// Most prompt tokens per prefill forward.
    pub prefill_chunk: usize,
}

impl Engine {
    /// Wraps `backend`; the block manager mirrors its KV allocation.
    pub fn new(backend: Box<dyn Backend>, prefill_chunk: usize) -> Engine {
        let blocks = BlockManager::new(backend.num_blocks(), backend.block_size());
        Engine {
            backend,
            blocks,
            prefill_chunk: prefill_chunk.max(1),
        }
    }

    /// Feeds `tokens` starting at `table.len` in chunks of at most `chunk`, returning the logits
    /// of the last token.
    pub fn prefill(
        &mut self,
        table: &mut BlockTable,
        tokens: &[u32],
        chunk: usize,
    ) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("empty prompt".into()));
        }
        let mut logits = Vec::new();
        let mut done = 0;
        while done < tokens.len() {
            let n = chunk.min(tokens.len() - done);
            let start = table.len;
            self.blocks.reserve(table, start + n)?;
            let last = done + n == tokens.len();
            let out = self.backend.forward(&[SeqChunk {
                tokens: &tokens[done..done + n],
                start_pos: start,
                block_table: &table.blocks,
                logits: if last {
                    LogitsWanted::Last
                } else {
                    LogitsWanted::None
                },
            }])?;
            if last {
                logits = out.into_iter().next().expect("one row wanted");
            }
            done += n;
        }
        Ok(logits)
    }

    /// Runs `req` to completion, calling `on_token` with each generated token as it is chosen.
    /// The sequence's KV blocks are freed on return, on success or error.
    pub fn generate(
        &mut self,
        req: &GenerateRequest,
        mut on_token: impl FnMut(u32),
    ) -> Result<Generation> {
        req.params.validate()?;
        let mut table = BlockTable::default();
        let result = self.generate_inner(req, &mut table, &mut on_token);
        self.blocks.free_table(&mut table);
        result
    }

    fn generate_inner(
        &mut self,
        req: &GenerateRequest,
        table: &mut BlockTable,
        on_token: &mut dyn FnMut(u32),
    ) -> Result<Generation> {
        let t0 = Instant::now();
        let prompt_logits = self.prefill(table, &req.prompt, self.prefill_chunk)?;
        let prefill_secs = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let mut tokens = Vec::new();
        let mut logits = prompt_logits.clone();
        let mut finish = FinishReason::Length;
        while tokens.len() < req.max_tokens {
            let pos = (req.prompt.len() + tokens.len()) as u64;
            let next = sample(
                &logits,
                &req.params,
                &req.prompt,
                &tokens,
                req.sequence,
                pos,
            );
            if req.stop_ids.contains(&next) {
                finish = FinishReason::Stop;
                break;
            }
            tokens.push(next);
            on_token(next);
            if tokens.len() == req.max_tokens {
                break;
            }
            let start = table.len;
            self.blocks.reserve(table, start + 1)?;
            logits = self
                .backend
                .forward(&[SeqChunk {
                    tokens: &[next],
                    start_pos: start,
                    block_table: &table.blocks,
                    logits: LogitsWanted::Last,
                }])?
                .pop()
                .expect("one row wanted");
        }
        Ok(Generation {
            tokens,
            finish,
            prompt_logits,
            prefill_secs,
            decode_secs: t1.elapsed().as_secs_f64(),
        })
    }

    /// Runs `prompt` token by token in a fresh sequence and returns the last position's logits:
    /// the plain-decode arm that prefill must match bit for bit.
    pub fn prompt_logits_token_by_token(&mut self, prompt: &[u32]) -> Result<Vec<f32>> {
        let mut table = BlockTable::default();
        let r = self.prefill(&mut table, prompt, 1);
        self.blocks.free_table(&mut table);
        r
    }
}

/// Output of [`Engine::run_batch`] for one request.
#[derive(Debug, Clone)]
pub struct BatchOutput {
    pub tokens: Vec<u32>,
    /// Logits row used to choose each generated token (same length as `tokens`), when kept.
    pub step_logits: Vec<Vec<f32>>,
    /// When the forward that ended this sequence's prompt returned its first token (the end of
    /// its prefill). For a batch of equal-length prompts without stop ids, the time from the
    /// latest of these to the return of `run_batch` is `max_tokens - 1` decode forwards: how
    /// `memra bench decode` times decode without timing prefill twice.
    pub first_token_at: Option<std::time::Instant>,
}

impl Engine {
    /// Runs all `reqs` together: one forward holds every prompt (each in chunks of
    /// `self.prefill_chunk`), then every decode step holds one row per unfinished sequence.
    /// Stops each at its `max_tokens` or a stop id. With `keep_logits`, returns the logits row
    /// behind every generated token. Blocks are freed on return.
    pub fn run_batch(
        &mut self,
        reqs: &[GenerateRequest],
        keep_logits: bool,
    ) -> Result<Vec<BatchOutput>> {
        let mut tables = vec![BlockTable::default(); reqs.len()];
        let r = self.run_batch_inner(reqs, keep_logits, &mut tables);
        for t in &mut tables {
            self.blocks.free_table(t);
        }
        r
    }

    fn run_batch_inner(
        &mut self,
        reqs: &[GenerateRequest],
        keep_logits: bool,
        tables: &mut [BlockTable],
    ) -> Result<Vec<BatchOutput>> {
        for r in reqs {
            r.params.validate()?;
            if r.prompt.is_empty() {
                return Err(Error::InvalidArgument("empty prompt".into()));
            }
        }
        let n = reqs.len();
        let mut outs: Vec<BatchOutput> = (0..n)
            .map(|_| BatchOutput {
                tokens: Vec::new(),
                step_logits: Vec::new(),
                first_token_at: None,
            })
            .collect();
        let mut fed = vec![0usize; n];
        // Each sequence's next token, chosen in the step that computed its logits
        // ([`Backend::forward_pick`]: on the device for CUDA, only tokens come back), and that
        // step's logits row when kept.
        let mut next_tok: Vec<Option<u32>> = vec![None; n];
        let mut last: Vec<Option<Vec<f32>>> = vec![None; n];
        let mut done = vec![false; n];
        loop {
            // Build this step: prompt chunks for sequences still in prefill, one token for the
            // others (the token chosen from their previous logits).
            let mut step: Vec<(usize, Vec<u32>)> = Vec::new();
            for i in 0..n {
                if done[i] {
                    continue;
                }
                if fed[i] < reqs[i].prompt.len() {
                    let m = self.prefill_chunk.min(reqs[i].prompt.len() - fed[i]);
                    step.push((i, reqs[i].prompt[fed[i]..fed[i] + m].to_vec()));
                    continue;
                }
                let next = next_tok[i].take().expect("a token picked after prefill");
                let r = &reqs[i];
                if r.stop_ids.contains(&next) {
                    done[i] = true;
                    continue;
                }
                outs[i].tokens.push(next);
                if keep_logits {
                    outs[i]
                        .step_logits
                        .push(last[i].take().expect("logits kept with the pick"));
                }
                if outs[i].tokens.len() >= r.max_tokens {
                    done[i] = true;
                    continue;
                }
                step.push((i, vec![next]));
            }
            if step.is_empty() {
                return Ok(outs);
            }
            for (i, toks) in &step {
                let start = tables[*i].len;
                self.blocks.reserve(&mut tables[*i], start + toks.len())?;
            }
            let chunks: Vec<SeqChunk<'_>> = step
                .iter()
                .map(|(i, toks)| {
                    let start = tables[*i].len - toks.len();
                    let ends_prompt = start + toks.len() >= reqs[*i].prompt.len();
                    SeqChunk {
                        tokens: toks,
                        start_pos: start,
                        block_table: &tables[*i].blocks,
                        logits: if ends_prompt {
                            LogitsWanted::Last
                        } else {
                            LogitsWanted::None
                        },
                    }
                })
                .collect();
            // One pick per wanted row, at the position of the token it chooses.
            let mut picked_for = Vec::new();
            let picks: Vec<Pick<'_>> = chunks
                .iter()
                .zip(&step)
                .filter(|(c, _)| c.logits == LogitsWanted::Last)
                .enumerate()
                .map(|(row, (c, (i, _)))| {
                    picked_for.push(*i);
                    let r = &reqs[*i];
                    Pick {
                        row,
                        params: &r.params,
                        prompt: &r.prompt,
                        output: &outs[*i].tokens,
                        extra: &[],
                        sequence: r.sequence,
                        position: (c.start_pos + c.tokens.len()) as u64,
                        logprobs: None,
                        want_logits: keep_logits,
                    }
                })
                .collect();
            let picked = self.backend.forward_pick(&chunks, &picks)?;
            drop(picks);
            for (i, toks) in &step {
                if fed[*i] < reqs[*i].prompt.len() {
                    fed[*i] += toks.len();
                }
            }
            let now = std::time::Instant::now();
            for (i, p) in picked_for.into_iter().zip(picked) {
                outs[i].first_token_at.get_or_insert(now);
                next_tok[i] = Some(p.token);
                last[i] = p.logits;
            }
        }
    }
}
