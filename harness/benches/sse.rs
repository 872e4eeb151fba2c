//! SSE encoding of one streamed chunk, by the server's own code: the chunk's JSON from
//! harness/src/serve/chunks.rs (`Meta::envelope` around `Meta::text_choice`, with
//! `Meta::logprobs_json` for the logprobs variant; the file is compiled into this bench as a
//! module), serialized compactly into an axum SSE `Event`, as `respond::data` does. Variants: a
//! chat content chunk, a chat chunk with logprobs (top 5), and a completions chunk. Throughput:
//! bytes of the event as sent (`data: ` + the JSON + a blank line).
//!
//! `cargo bench -p memra --bench sse -- --quick`

#[allow(dead_code)]
#[path = "../src/serve/chunks.rs"]
mod chunks;

use axum::response::sse::Event;
use chunks::{Kind, Meta, TokenInfo};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Duration;

/// One text chunk of choice 0, as `respond::StreamState::push_outs` builds it, and its wire size.
fn chunk(meta: &Meta, text: &str, logprobs: &[TokenInfo]) -> (Event, usize) {
    let lp = if meta.logprobs && !logprobs.is_empty() {
        meta.logprobs_json(0, logprobs)
    } else {
        Value::Null
    };
    let v = meta.envelope(true, json!([meta.text_choice(0, text, lp, None)]));
    let line = v.to_string();
    let bytes = "data: ".len() + line.len() + 2;
    (Event::default().data(line), bytes)
}

fn bench(c: &mut Criterion) {
    let text = " village";
    let top: Vec<(Vec<u8>, f64)> = [
        (" village", -0.25),
        (" town", -1.9),
        (" house", -2.7),
        (" \"quoted\"", -4.1),
        (" caf\u{e9}", -5.0),
    ]
    .iter()
    .map(|(t, lp)| (t.as_bytes().to_vec(), *lp))
    .collect();
    let lp = [TokenInfo {
        bytes: text.as_bytes().to_vec(),
        logprob: -0.25,
        top,
        text_offset: 0,
    }];
    let chat = Meta::new(Kind::Chat, "smollm2-135m-instruct");
    let chat_lp = Meta {
        logprobs: true,
        ..chat.clone()
    };
    let completion = Meta::new(Kind::Completion, "smollm2-135m-instruct");
    let mut g = c.benchmark_group("sse_chunk");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (name, meta, lps) in [
        ("chat", &chat, &[][..]),
        ("chat_logprobs5", &chat_lp, &lp[..]),
        ("completion", &completion, &[][..]),
    ] {
        g.throughput(Throughput::Bytes(chunk(meta, text, lps).1 as u64));
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| chunk(black_box(meta), black_box(text), lps).0)
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
