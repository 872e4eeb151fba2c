//! Prometheus metrics (`GET /metrics`, text exposition format). Request counters and latency
//! histograms are updated as requests run; the engine gauges are read from each scheduler's
//! [`Stats`](memra_engine::sched::Stats) at scrape time.

use super::ModelEntry;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::sync::{Arc, Mutex};

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    /// Responses by route and status code.
    pub requests: IntCounterVec,
    /// Prompt tokens of finished generations, by model.
    pub prompt_tokens: IntCounterVec,
    /// Generated tokens, by model.
    pub completion_tokens: IntCounterVec,
    /// Seconds from a request's arrival to its first generated token.
    pub ttft: HistogramVec,
    /// Seconds between consecutive tokens of one choice.
    pub itl: HistogramVec,
    queued: IntGaugeVec,
    running: IntGaugeVec,
    kv_used: IntGaugeVec,
    kv_free: IntGaugeVec,
    kv_cached: IntGaugeVec,
    prefix_hits: IntCounterVec,
    preemptions: IntCounterVec,
    spec_drafted: IntCounterVec,
    spec_accepted: IntCounterVec,
    spec_accepted_at: IntCounterVec,
    spec_drafted_at: IntCounterVec,
    /// Serializes scrapes (cumulative engine counters are advanced by their difference).
    scrape: Mutex<()>,
}

fn counter(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    r.register(Box::new(c.clone())).expect("unique metric");
    c
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), &["model"]).expect("valid metric");
    r.register(Box::new(g.clone())).expect("unique metric");
    g
}

fn histogram(r: &Registry, name: &str, help: &str, buckets: &[f64]) -> HistogramVec {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        &["model"],
    )
    .expect("valid metric");
    r.register(Box::new(h.clone())).expect("unique metric");
    h
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let r = Registry::new();
        Metrics {
            requests: counter(
                &r,
                "memra_requests_total",
                "HTTP responses by route and status code.",
                &["route", "code"],
            ),
            prompt_tokens: counter(
                &r,
                "memra_prompt_tokens_total",
                "Prompt tokens of generation requests.",
                &["model"],
            ),
            completion_tokens: counter(
                &r,
                "memra_completion_tokens_total",
                "Generated tokens.",
                &["model"],
            ),
            ttft: histogram(
                &r,
                "memra_time_to_first_token_seconds",
                "Seconds from request arrival to its first generated token.",
                &[
                    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                ],
            ),
            itl: histogram(
                &r,
                "memra_inter_token_latency_seconds",
                "Seconds between consecutive tokens of one choice.",
                &[
                    0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0, 2.5,
                ],
            ),
            queued: gauge(&r, "memra_queue_depth", "Requests waiting for admission."),
            running: gauge(&r, "memra_running_sequences", "Sequences running."),
            kv_used: gauge(
                &r,
                "memra_kv_blocks_used",
                "KV cache blocks referenced by sequences (idle prefix-cache blocks excluded).",
            ),
            kv_free: gauge(&r, "memra_kv_blocks_free", "Free KV cache blocks."),
            kv_cached: gauge(
                &r,
                "memra_kv_blocks_prefix_cached",
                "KV blocks indexed by the prefix cache (in use or idle and evictable).",
            ),
            prefix_hits: counter(
                &r,
                "memra_prefix_cache_hit_tokens_total",
                "Prompt tokens served from the prefix cache.",
                &["model"],
            ),
            preemptions: counter(
                &r,
                "memra_preemptions_total",
                "Sequences preempted (and recomputed).",
                &["model"],
            ),
            spec_drafted: counter(
                &r,
                "memra_spec_drafted_tokens_total",
                "Speculative draft tokens proposed.",
                &["model"],
            ),
            spec_accepted: counter(
                &r,
                "memra_spec_accepted_tokens_total",
                "Speculative draft tokens accepted.",
                &["model"],
            ),
            spec_accepted_at: counter(
                &r,
                "memra_spec_accepted_by_position_total",
                "Accepted draft tokens by position in the draft (0 = first); acceptance rate at a position = this / memra_spec_drafted_by_position_total at that position.",
                &["model", "position"],
            ),
            spec_drafted_at: counter(
                &r,
                "memra_spec_drafted_by_position_total",
                "Verifies whose draft reached this position (0 = first draft token).",
                &["model", "position"],
            ),
            registry: r,
            scrape: Mutex::new(()),
        }
    }

    /// The text exposition of every metric, with the engine gauges of `models` refreshed.
    pub fn render(&self, models: &[Arc<ModelEntry>]) -> String {
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        for m in models {
            let s = m.handle.stats();
            let l = [m.id.as_str()];
            self.queued.with_label_values(&l).set(s.queued as i64);
            self.running.with_label_values(&l).set(s.running as i64);
            self.kv_used
                .with_label_values(&l)
                .set(s.kv_blocks_used as i64);
            self.kv_free
                .with_label_values(&l)
                .set(s.kv_blocks_free as i64);
            self.kv_cached
                .with_label_values(&l)
                .set(s.prefix_cached_blocks as i64);
            let hits = self.prefix_hits.with_label_values(&l);
            hits.inc_by(s.prefix_hit_tokens.saturating_sub(hits.get()));
            let pre = self.preemptions.with_label_values(&l);
            pre.inc_by(s.preemptions.saturating_sub(pre.get()));
            let d = self.spec_drafted.with_label_values(&l);
            d.inc_by(s.spec_drafted.saturating_sub(d.get()));
            let a = self.spec_accepted.with_label_values(&l);
            a.inc_by(s.spec_accepted.saturating_sub(a.get()));
            for (vec, counts) in [
                (&self.spec_accepted_at, &s.spec_accepted_at),
                (&self.spec_drafted_at, &s.spec_drafted_at),
            ] {
                for (pos, &n) in counts.iter().enumerate() {
                    let c = vec.with_label_values(&[m.id.as_str(), pos.to_string().as_str()]);
                    c.inc_by(n.saturating_sub(c.get()));
                }
            }
        }
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!("encoding metrics: {e}");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
