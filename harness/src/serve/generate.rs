//! One API request's generation: submits its prompts to the scheduler, turns the engine's token
//! events into per-choice text pieces through the text layer, and cancels whatever still runs
//! when it is dropped (the client went away). Streaming and non-streaming responses both consume
//! [`Generation::next`], so their text is the same by construction.

use super::errors::ApiError;
use super::schemas::Options;
use super::text::ChoiceText;
use super::{AppState, ModelEntry};
use memra_engine::engine::FinishReason;
use memra_engine::sched::{Event, RequestId, Submit, TokenLogprob};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// Logprobs are natural logs; -inf (a token the filters ruled out) is reported as this, because
/// JSON has no infinity.
pub const MIN_LOGPROB: f64 = -9999.0;

/// A logprob that JSON can carry.
pub fn finite(lp: f32) -> f64 {
    if lp.is_finite() {
        (lp as f64).max(MIN_LOGPROB)
    } else {
        MIN_LOGPROB
    }
}

pub use super::chunks::TokenInfo;

/// What a step of the generation produced.
#[derive(Debug, Clone)]
pub enum Out {
    /// Text for choice `index` (possibly empty when only logprobs are due), and the logprobs
    /// of the tokens that produced it.
    Text {
        index: usize,
        text: String,
        logprobs: Vec<TokenInfo>,
    },
    /// Choice `index` ended: "stop" (end of sequence or a stop string) or "length".
    Finish { index: usize, reason: &'static str },
}

/// Token counts of a request.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub cached_tokens: usize,
    /// Speculative draft tokens proposed and accepted (memra extension; reported, zeros
    /// included, whenever the request speculates or anything was drafted).
    pub spec_drafted: u64,
    pub spec_accepted: u64,
    /// The request asked for speculation (a method, not "off").
    pub speculative: bool,
}

impl Usage {
    /// The OpenAI `usage` object.
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        });
        if self.speculative || self.spec_drafted > 0 {
            v["speculative"] =
                serde_json::json!({"drafted": self.spec_drafted, "accepted": self.spec_accepted});
        }
        v
    }
}

/// One prompt to generate from.
#[derive(Debug, Clone)]
pub struct PromptJob {
    pub ids: Vec<u32>,
    pub max_tokens: usize,
}

struct Choice {
    text: ChoiceText,
    done: bool,
    pending: Vec<TokenInfo>,
    last_token: Option<Instant>,
}

/// Counts a generation as in flight (the drain waits for these) until dropped.
struct InFlight(Arc<AppState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running request: `prompts × n` choices, choice index = prompt index × n + choice.
pub struct Generation {
    model: Arc<ModelEntry>,
    rx: mpsc::UnboundedReceiver<(usize, Event)>,
    ids: Vec<RequestId>,
    n: usize,
    choices: Vec<Choice>,
    prompt_done: Vec<bool>,
    usage: Usage,
    arrived: Instant,
    first_token_seen: bool,
    logprobs: bool,
    _inflight: InFlight,
}

impl Generation {
    /// Submits every prompt. Errors: the queue is full (429), the engine stopped (503), the
    /// scheduler refused the request (400); prompts already submitted are cancelled.
    pub fn start(
        state: &Arc<AppState>,
        model: Arc<ModelEntry>,
        jobs: Vec<PromptJob>,
        opts: &Options,
        logprobs: Option<u32>,
        arrived: Instant,
    ) -> Result<Generation, ApiError> {
        state.inflight.fetch_add(1, Ordering::SeqCst);
        let inflight = InFlight(state.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let mut ids = Vec::with_capacity(jobs.len());
        let stop_ids = if opts.ignore_eos {
            vec![]
        } else {
            model.tokenizer.eos.clone()
        };
        for (p, job) in jobs.into_iter().enumerate() {
            let id = state.next_id.fetch_add(1, Ordering::Relaxed);
            let tx = tx.clone();
            let submit = Submit {
                id,
                prompt: job.ids,
                params: opts.params.clone(),
                max_tokens: job.max_tokens,
                stop_ids: stop_ids.clone(),
                n: opts.n,
                logprobs,
                tenant: opts.tenant.clone(),
                return_logits: false,
                spec: opts.spec,
                events: Box::new(move |ev| tx.send((p, ev)).is_ok()),
            };
            if let Err(e) = model.handle.submit(submit) {
                for &id in &ids {
                    model.handle.cancel(id);
                }
                return Err(e.into());
            }
            ids.push(id);
        }
        let total = ids.len() * opts.n as usize;
        let choices = (0..total)
            .map(|_| Choice {
                text: ChoiceText::new(opts.stops.clone()),
                done: false,
                pending: Vec::new(),
                last_token: None,
            })
            .collect();
        Ok(Generation {
            prompt_done: vec![false; ids.len()],
            model,
            rx,
            ids,
            n: opts.n as usize,
            choices,
            usage: Usage {
                speculative: opts.spec.is_some(),
                ..Usage::default()
            },
            arrived,
            first_token_seen: false,
            logprobs: logprobs.is_some(),
            _inflight: inflight,
        })
    }

    /// Number of choices.
    pub fn num_choices(&self) -> usize {
        self.choices.len()
    }

    /// Token counts so far (final once [`Generation::next`] has returned `None`).
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The next pieces of output; `None` once every choice has finished.
    pub async fn next(&mut self) -> Option<Result<Vec<Out>, ApiError>> {
        loop {
            if self.prompt_done.iter().all(|&d| d) {
                return None;
            }
            let Some((p, ev)) = self.rx.recv().await else {
                return Some(Err(ApiError::Unavailable {
                    message: "the engine stopped".into(),
                    retry_after_secs: 5,
                }));
            };
            if self.prompt_done[p] {
                continue;
            }
            let out = match ev {
                Event::Started {
                    prompt_tokens,
                    cached_tokens,
                } => {
                    self.usage.prompt_tokens += prompt_tokens;
                    self.usage.cached_tokens += cached_tokens;
                    Vec::new()
                }
                Event::Token {
                    choice,
                    token,
                    logprob,
                    ..
                } => self.on_token(p, choice as usize, token, logprob),
                Event::Finished {
                    choice,
                    reason,
                    drafted,
                    accepted,
                } => {
                    self.usage.spec_drafted += drafted as u64;
                    self.usage.spec_accepted += accepted as u64;
                    self.on_finished(p, choice as usize, reason)
                }
                Event::Done => {
                    self.prompt_done[p] = true;
                    Vec::new()
                }
                Event::Error(m) => {
                    self.prompt_done[p] = true;
                    // Shutting down, or device memory ran out in this step: try again later.
                    return Some(Err(
                        if m.contains("shutting down") || m.contains("out of memory") {
                            ApiError::Unavailable {
                                message: m,
                                retry_after_secs: 5,
                            }
                        } else {
                            ApiError::Internal(m)
                        },
                    ));
                }
            };
            if !out.is_empty() {
                return Some(Ok(out));
            }
        }
    }

    fn on_token(
        &mut self,
        p: usize,
        choice: usize,
        token: u32,
        logprob: Option<TokenLogprob>,
    ) -> Vec<Out> {
        let index = p * self.n + choice;
        let now = Instant::now();
        let label = [self.model.id.as_str()];
        let tk = self.model.tokenizer.clone();
        let Some(c) = self.choices.get_mut(index).filter(|c| !c.done) else {
            return Vec::new();
        };
        if !self.first_token_seen {
            self.first_token_seen = true;
            self.model
                .metrics
                .ttft
                .with_label_values(&label)
                .observe(now.duration_since(self.arrived).as_secs_f64());
        }
        if let Some(t) = c.last_token.replace(now) {
            self.model
                .metrics
                .itl
                .with_label_values(&label)
                .observe(now.duration_since(t).as_secs_f64());
        }
        self.usage.completion_tokens += 1;
        if let Some(lp) = logprob.filter(|_| self.logprobs) {
            let bytes = |id: u32| tk.token_bytes(id).unwrap_or_default();
            c.pending.push(TokenInfo {
                bytes: bytes(token),
                logprob: finite(lp.logprob),
                top: lp
                    .top
                    .iter()
                    .map(|&(id, l)| (bytes(id), finite(l)))
                    .collect(),
                text_offset: c.text.decoded_chars(),
            });
        }
        let r = c.text.push(tk.as_ref(), token);
        let mut out = Vec::new();
        if !r.text.is_empty() || (r.stopped && !c.pending.is_empty()) {
            out.push(Out::Text {
                index,
                text: r.text,
                logprobs: std::mem::take(&mut c.pending),
            });
        }
        if r.stopped {
            c.done = true;
            out.push(Out::Finish {
                index,
                reason: "stop",
            });
            // The engine cancels whole requests: once every choice of this prompt has ended
            // locally, stop it; until then a stopped choice's further tokens are ignored.
            let range = p * self.n..(p + 1) * self.n;
            if self.choices[range].iter().all(|c| c.done) {
                self.prompt_done[p] = true;
                self.model.handle.cancel(self.ids[p]);
            }
        }
        out
    }

    fn on_finished(&mut self, p: usize, choice: usize, reason: FinishReason) -> Vec<Out> {
        let index = p * self.n + choice;
        let tk = self.model.tokenizer.clone();
        let Some(c) = self.choices.get_mut(index).filter(|c| !c.done) else {
            return Vec::new();
        };
        c.done = true;
        let r = c.text.finish(tk.as_ref());
        let mut out = Vec::new();
        if !r.text.is_empty() || !c.pending.is_empty() {
            out.push(Out::Text {
                index,
                text: r.text,
                logprobs: std::mem::take(&mut c.pending),
            });
        }
        let reason = match reason {
            _ if r.stopped => "stop",
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        };
        out.push(Out::Finish { index, reason });
        out
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        // Tokens count once the request is over, however it ended.
        let l = [self.model.id.as_str()];
        let m = &self.model.metrics;
        m.prompt_tokens
            .with_label_values(&l)
            .inc_by(self.usage.prompt_tokens as u64);
        m.completion_tokens
            .with_label_values(&l)
            .inc_by(self.usage.completion_tokens as u64);
        for (p, &id) in self.ids.iter().enumerate() {
            if !self.prompt_done[p] {
                tracing::debug!(id, "cancelling an abandoned request");
                self.model.handle.cancel(id);
            }
        }
    }
}
