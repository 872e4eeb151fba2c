//! `[serve]`: settings of `memra serve` (part of the one typed configuration, `super`).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Settings of `memra serve` (TOML table `[serve]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Models to serve, each `ALIAS=MODEL` or `MODEL` (empty = smollm2-135m-instruct).
    pub models: Vec<String>,
    /// Address to bind.
    pub host: String,
    /// Port to bind (0 = any free port; the chosen address is printed).
    pub port: u16,
    /// Most tokens (decode rows plus prefill chunk tokens) in one engine step.
    pub max_batch_tokens: usize,
    /// Most sequences running at once.
    pub max_running: usize,
    /// Most requests waiting for admission; more are refused with 429.
    pub queue_capacity: usize,
    /// Context length served (0 = the model's own, capped by the KV cache).
    pub context_len: usize,
    /// Bearer key required on the API routes (none = open). Never printed or logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Draft model for `speculative.method = "draft"` (anything `memra pull` accepts; it must
    /// share the served models' tokenizer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<String>,
    /// Keyring file: TOML `[[key]]` tables with `sha256` (hex of the key), `tenant`,
    /// `max_concurrent` (0 = no cap) and `disabled`. Keys are never stored in clear.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyring: Option<PathBuf>,
    /// Largest request body in bytes (larger ones get 413).
    pub max_body_bytes: usize,
    /// Seconds a request body may go without sending data before the request gets 408 (a
    /// client that announces a body and stalls cannot hold a connection open).
    pub body_timeout_secs: u64,
    /// Seconds between SSE keep-alive comments while a stream waits.
    pub keepalive_secs: u64,
    /// Seconds in-flight requests get to finish after SIGTERM before the server exits.
    pub drain_secs: u64,
    /// Speculation for requests that do not carry the `speculative` extension: "off",
    /// "ngram[:N]", "layerskip:L" or "draft" (needs `draft_model`). The scheduler's policy
    /// (`spec_row_cost`, `spec_min_acceptance`, `spec_max_running`) still picks each step's draft
    /// length, 0 included, and pauses a sequence below the break-even acceptance that counts
    /// the drafter's own cost; output is the same either way (docs/DESIGN.md §3).
    pub speculative: String,
    /// Most draft tokens per verify for `speculative` (1..=16).
    pub speculative_k: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            models: Vec::new(),
            host: "127.0.0.1".into(),
            port: 8000,
            max_batch_tokens: 512,
            max_running: 64,
            queue_capacity: 256,
            context_len: 0,
            api_key: None,
            keyring: None,
            draft_model: None,
            max_body_bytes: 4 << 20,
            body_timeout_secs: 30,
            keepalive_secs: 10,
            drain_secs: 30,
            speculative: "ngram".into(),
            speculative_k: 4,
        }
    }
}

impl ServeConfig {
    /// The speculation requests get by default: None for "off". Errors: a method or k that
    /// [`SpecParams::parse`](memra_engine::spec::SpecParams::parse) refuses.
    pub fn default_spec(&self) -> Result<Option<memra_engine::spec::SpecParams>, String> {
        if self.speculative == "off" {
            return Ok(None);
        }
        memra_engine::spec::SpecParams::parse(&self.speculative, self.speculative_k)
            .map(|s| Some(s.by_policy()))
    }
}
