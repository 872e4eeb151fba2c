//! The scheduler's request and event types: what the server submits and what it hears back.
//! Everything is in token ids; text (detokenization, stop strings, SSE) is the server's job.

use crate::engine::FinishReason;
use crate::sample::SamplingParams;

/// Caller-chosen request id (unique among live requests).
pub type RequestId = u64;

/// One generation request: `n` choices over one prompt.
pub struct Submit {
    pub id: RequestId,
    /// Prompt token ids (non-empty).
    pub prompt: Vec<u32>,
    pub params: SamplingParams,
    /// Most tokens to generate per choice.
    pub max_tokens: usize,
    /// Token ids that end a choice (EOS, end-of-turn); empty to ignore EOS.
    pub stop_ids: Vec<u32>,
    /// Number of choices (≥ 1). Choice `i` draws with sequence index `i`, so it equals a separate
    /// request with the same seed run as choice `i`.
    pub n: u32,
    /// `Some(k)`: report the chosen token's logprob and the top `k` alternatives (k ≤ 20).
    pub logprobs: Option<u32>,
    /// Prefix-cache namespace: blocks are shared only between requests of the same tenant.
    pub tenant: String,
    /// Attach the full logits row behind each token to its event (for gates; costs a copy).
    pub return_logits: bool,
    /// Speculative decoding for this request (`None` = plain decode). Output is identical either
    /// way; the scheduler's policy may still decode plainly at any step.
    pub spec: Option<crate::spec::SpecParams>,
    /// Receives the request's events in order. Returns false once nobody listens (the client
    /// went away): the scheduler then cancels the request and frees its blocks.
    pub events: Box<dyn FnMut(Event) -> bool + Send>,
}

/// Log-probabilities at one generated position (natural log, of the distribution the token was
/// drawn from after penalties and bias, before temperature and filtering — as vLLM reports them).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f32,
    /// Top alternatives, most likely first.
    pub top: Vec<(u32, f32)>,
}

/// What the scheduler tells the submitter, in order: `Started`, then per choice any number of
/// `Token`s followed by one `Finished`, then `Done`; or `Error` at any point, after which
/// nothing follows.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The request was admitted; `cached_tokens` prompt tokens came from the prefix cache.
    Started {
        prompt_tokens: usize,
        cached_tokens: usize,
    },
    /// Choice `choice` generated `token`.
    Token {
        choice: u32,
        token: u32,
        logprob: Option<TokenLogprob>,
        /// The logits row the token was chosen from, when `return_logits` was set.
        logits: Option<std::sync::Arc<Vec<f32>>>,
    },
    /// Choice `choice` ended; `drafted` and `accepted` count speculative draft tokens.
    Finished {
        choice: u32,
        reason: FinishReason,
        drafted: u32,
        accepted: u32,
    },
    /// Every choice has finished.
    Done,
    /// The request failed (e.g. the prompt does not fit in the KV cache at all).
    Error(String),
}

/// Why a submission was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SubmitError {
    /// The waiting queue is full; retry after about this many seconds.
    #[error("server busy: {queued} requests waiting")]
    QueueFull {
        queued: usize,
        retry_after_secs: u64,
    },
    /// The engine thread has stopped.
    #[error("engine stopped")]
    Stopped,
    /// The request can never run (empty prompt, prompt + max_tokens beyond the context, n = 0).
    #[error("{0}")]
    Invalid(String),
}

/// Counters for `/metrics` and `/readyz`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub queued: usize,
    pub running: usize,
    /// Blocks referenced by running or waiting sequences (idle prefix-cache blocks excluded).
    pub kv_blocks_used: usize,
    pub kv_blocks_free: usize,
    /// Blocks indexed by the prefix cache (held even when no sequence uses them).
    pub prefix_cached_blocks: usize,
    /// Prompt tokens served from the prefix cache since start.
    pub prefix_hit_tokens: u64,
    /// Sequences preempted (and later recomputed) since start.
    pub preemptions: u64,
    /// Speculative draft tokens proposed and accepted since start.
    pub spec_drafted: u64,
    pub spec_accepted: u64,
    /// Accepted drafts by position in the draft (index 0 = first draft token).
    pub spec_accepted_at: Vec<u64>,
    /// Verifies whose draft reached each position (index 0 = every verify with a draft), so the
    /// acceptance rate at position j is `spec_accepted_at[j] / spec_drafted_at[j]`.
    pub spec_drafted_at: Vec<u64>,
}

/// Deliberately broken scheduler behaviours. They exist only so the gates can prove they would
/// catch the bug; nothing else sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedCanary {
    /// Draws from one stateful generator shared by every sequence, advanced per draw.
    SharedRng,
    /// Forked choices write into the shared partial block without copying it first.
    NoCopyOnWrite,
    /// A prefix-cache hit's block table is off by one block (the hit blocks rotated by one).
    PrefixOffByOne,
    /// Speculative verify accepts a draft token whose probability is at least 0.1 instead of
    /// requiring it to equal the target's choice.
    AcceptByThreshold,
}
