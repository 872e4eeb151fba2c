//! The tokenizer: encode and decode of an English paragraph (and of a longer mixed text) with
//! SmolLM2's tokenizer as the engine builds it from the cached GGUF
//! (`~/.cache/memra/models/smollm2-135m-instruct/`, through `loader::load`). When that file is
//! absent the same benches run on the committed tiny BPE fixture
//! (gates/oracle/fixtures/tiny_bpe_tokenizer.json) with a printed note, and if that is missing
//! too the group is skipped. Throughput: input bytes (encode) and tokens (decode).
//!
//! `cargo bench -p memra-engine --bench tokenizer -- --quick`

#[path = "../tests/common/mod.rs"]
mod test_common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use memra_engine::tokenizer::Tokenizer;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const PARAGRAPH: &str = "The quick brown fox jumps over the lazy dog. Meanwhile, in a small \
village nestled between rolling hills, the baker woke before dawn to knead the dough for the \
day's bread. She hummed an old tune while the oven warmed, and by six o'clock the smell of fresh \
loaves drifted through the narrow streets, drawing neighbours out of their houses one by one. \
\"Good morning!\" called the blacksmith, who had already been at work for an hour; his hammer \
rang out 3 or 4 times a minute, steady as a clock.";

/// A longer, more varied text: the paragraph, code, numbers and a chat-formatted turn.
fn mixed() -> String {
    let mut s = String::new();
    for i in 0..4 {
        s += PARAGRAPH;
        s += &format!(
            "\n\nfn add_{i}(a: u32, b: u32) -> u32 {{\n    a.wrapping_add(b) // {i}\n}}\n\
             <|im_start|>user\nWhat is {i} * 12345.678?<|im_end|>\n"
        );
    }
    s
}

fn load() -> Option<(String, Arc<Tokenizer>, tempfile::TempDir)> {
    let dir = tempfile::tempdir().ok()?;
    if let Some(p) = test_common::cached_model("smollm2-135m-instruct") {
        match memra_engine::loader::load(&p) {
            Ok(m) => return Some(("smollm2".into(), m.tokenizer, dir)),
            Err(e) => eprintln!(
                "note: {} did not load ({e}); using the fixture",
                p.display()
            ),
        }
    } else {
        eprintln!(
            "note: smollm2-135m-instruct is not pulled (`memra pull smollm2-135m-instruct`); \
             benchmarking the tiny fixture tokenizer instead"
        );
    }
    let fixture = test_common::repo().join("gates/oracle/fixtures/tiny_bpe_tokenizer.json");
    std::fs::copy(&fixture, dir.path().join("tokenizer.json")).ok()?;
    match Tokenizer::from_hf_dir(dir.path()) {
        Ok(t) => Some(("tiny-fixture".into(), Arc::new(t), dir)),
        Err(e) => {
            eprintln!("note: fixture tokenizer did not load ({e})");
            None
        }
    }
}

fn bench(c: &mut Criterion) {
    let Some((name, tk, _dir)) = load() else {
        eprintln!("note: no tokenizer available; skipping the tokenizer benches");
        return;
    };
    let mixed = mixed();
    let mut g = c.benchmark_group(format!("tokenizer/{name}"));
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (label, text) in [("paragraph", PARAGRAPH), ("mixed", mixed.as_str())] {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(BenchmarkId::new("encode", label), |b| {
            b.iter(|| tk.encode(black_box(text), false).expect("encode"))
        });
        let ids = tk.encode(text, false).expect("encode");
        g.throughput(Throughput::Elements(ids.len() as u64));
        g.bench_function(BenchmarkId::new("decode", label), |b| {
            b.iter(|| tk.decode(black_box(&ids), false).expect("decode"))
        });
        // Streaming detokenization the way harness/src/serve/text.rs does it per token: the
        // window of unreleased ids (plus one settled token of context) decoded before and after
        // the new id.
        g.bench_function(BenchmarkId::new("decode_streaming", label), |b| {
            b.iter(|| {
                let mut n = 0;
                for i in 0..ids.len() {
                    let w = i.saturating_sub(2);
                    n += tk.decode(&ids[w..i], true).expect("decode").len();
                    n += tk.decode(&ids[w..=i], true).expect("decode").len();
                }
                n
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
