//! SSE encoding of one streamed chunk. The server builds each chunk in
//! harness/src/serve/respond.rs (`Meta::envelope` + `Meta::text_choice`: a `serde_json::Value`
//! from `json!`, then `Value::to_string` into an axum `Event`); that code lives in the `memra`
//! binary crate and cannot be linked from engine benches, so this reproduces it: the same
//! `json!` object, compact serialization, and the `data: …\n\n` framing axum writes. Variants: a
//! chat content chunk, a chat chunk with logprobs (top 5), and a completions chunk.
//! Throughput: bytes of the encoded event.
//!
//! `cargo bench -p memra-engine --bench sse -- --quick`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};
use std::hint::black_box;
use std::time::Duration;

const ID: &str = "chatcmpl-3f9a5c0e12d4b6a8";
const MODEL: &str = "smollm2-135m-instruct";
const CREATED: u64 = 1_796_000_000;

fn envelope(object: &str, choice: Value) -> Value {
    json!({
        "id": ID,
        "object": object,
        "created": CREATED,
        "model": MODEL,
        "choices": [choice],
    })
}

fn event(v: &Value) -> String {
    // `Event::data(v.to_string())`, then axum writes `data: ` + the line + a blank line.
    let line = v.to_string();
    format!("data: {line}\n\n")
}

fn chat_chunk(text: &str) -> String {
    let choice = json!({"index": 0, "delta": {"content": text}, "logprobs": Value::Null, "finish_reason": Value::Null});
    event(&envelope("chat.completion.chunk", choice))
}

fn chat_logprobs_chunk(text: &str, top: &[(&str, f64)]) -> String {
    let entry = |t: &str, lp: f64| json!({"token": t, "logprob": lp, "bytes": t.as_bytes()});
    let mut e = entry(text, -0.25);
    e["top_logprobs"] = Value::Array(top.iter().map(|(t, lp)| entry(t, *lp)).collect());
    let lp = json!({"content": [e]});
    let choice = json!({"index": 0, "delta": {"content": text}, "logprobs": lp, "finish_reason": Value::Null});
    event(&envelope("chat.completion.chunk", choice))
}

fn completion_chunk(text: &str) -> String {
    let choice =
        json!({"index": 0, "text": text, "logprobs": Value::Null, "finish_reason": Value::Null});
    event(&envelope("text_completion", choice))
}

fn bench(c: &mut Criterion) {
    let text = " village";
    let top = [
        (" village", -0.25),
        (" town", -1.9),
        (" house", -2.7),
        (" \"quoted\"", -4.1),
        (" caf\u{e9}", -5.0),
    ];
    let mut g = c.benchmark_group("sse_chunk");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes(chat_chunk(text).len() as u64));
    g.bench_function(BenchmarkId::from_parameter("chat"), |b| {
        b.iter(|| chat_chunk(black_box(text)))
    });
    g.throughput(Throughput::Bytes(
        chat_logprobs_chunk(text, &top).len() as u64
    ));
    g.bench_function(BenchmarkId::from_parameter("chat_logprobs5"), |b| {
        b.iter(|| chat_logprobs_chunk(black_box(text), &top))
    });
    g.throughput(Throughput::Bytes(completion_chunk(text).len() as u64));
    g.bench_function(BenchmarkId::from_parameter("completion"), |b| {
        b.iter(|| completion_chunk(black_box(text)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
