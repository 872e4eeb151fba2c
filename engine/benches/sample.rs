//! The sampler (`engine::sample`) on one logits row: greedy, and seeded draws with top-k and
//! top-p, over SmolLM2's 49,152-entry and Qwen2.5's 151,936-entry vocabularies. `sample` is the
//! whole per-token path (copy + penalties/bias + choose); throughput is vocabulary entries.
//!
//! `cargo bench -p memra-engine --bench sample -- --quick`

mod common;

use common::Rng;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use memra_engine::sample::{sample, SamplingParams};
use std::hint::black_box;
use std::time::Duration;

const VOCABS: [(&str, usize); 2] = [("49k", 49_152), ("151k", 151_936)];

/// Logits shaped like a language model's: mostly around 0 with a sparse high tail.
fn logits(n: usize) -> Vec<f32> {
    let mut rng = Rng::new(42);
    (0..n)
        .map(|i| {
            let v = 2.5 * rng.normal();
            if i % 997 == 3 {
                v + 12.0
            } else {
                v
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let cases: [(&str, SamplingParams); 5] = [
        ("greedy", SamplingParams::greedy()),
        (
            "t0.8_topk50",
            SamplingParams {
                temperature: 0.8,
                top_k: 50,
                seed: 1,
                ..Default::default()
            },
        ),
        (
            "t0.8_topp0.95",
            SamplingParams {
                temperature: 0.8,
                top_p: 0.95,
                seed: 1,
                ..Default::default()
            },
        ),
        (
            "t0.7_topk40_topp0.9",
            SamplingParams {
                temperature: 0.7,
                top_k: 40,
                top_p: 0.9,
                seed: 1,
                ..Default::default()
            },
        ),
        (
            "t1.0_reppen1.1_topp0.9",
            SamplingParams {
                temperature: 1.0,
                top_p: 0.9,
                repetition_penalty: 1.1,
                seed: 1,
                ..Default::default()
            },
        ),
    ];
    // A plausible context for the penalty case: 128 prompt and 64 output tokens.
    let mut rng = Rng::new(9);
    for (vname, n) in VOCABS {
        let l = logits(n);
        let prompt: Vec<u32> = (0..128)
            .map(|_| (rng.next_u64() % n as u64) as u32)
            .collect();
        let output: Vec<u32> = (0..64)
            .map(|_| (rng.next_u64() % n as u64) as u32)
            .collect();
        let mut g = c.benchmark_group(format!("sample/{vname}"));
        g.warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3))
            .throughput(Throughput::Elements(n as u64));
        for (name, p) in &cases {
            let mut pos = 0u64;
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter(|| {
                    pos += 1;
                    sample(black_box(&l), p, &prompt, &output, 0, pos)
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
