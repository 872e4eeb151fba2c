//! Level A properties of the CPU reference backend (DESIGN.md §3) on a real model: logits are
//! bit-identical across prefill chunk sizes, batch compositions and thread counts, and seeded
//! sampling does not depend on the batch.

mod common;

use memra_engine::backend::cpu::CpuBackend;
use memra_engine::engine::{BatchOutput, Engine, GenerateRequest};
use memra_engine::loader::{self, LoadedModel};
use memra_engine::sample::SamplingParams;
use std::sync::OnceLock;

fn smol() -> &'static LoadedModel {
    static M: OnceLock<LoadedModel> = OnceLock::new();
    M.get_or_init(|| loader::load(&common::model_path("smollm2-135m-instruct")).unwrap())
}

fn engine(chunk: usize) -> Engine {
    Engine::new(
        Box::new(CpuBackend::new(smol().model.clone(), 256, 16)),
        chunk,
    )
}

fn req(prompt: &str, params: SamplingParams, max_tokens: usize, sequence: u32) -> GenerateRequest {
    GenerateRequest {
        prompt: smol().tokenizer.encode(prompt, true).unwrap(),
        params,
        max_tokens,
        stop_ids: vec![],
        sequence,
    }
}

fn bits(rows: &[Vec<f32>]) -> Vec<Vec<u32>> {
    rows.iter()
        .map(|r| r.iter().map(|v| v.to_bits()).collect())
        .collect()
}

const PROMPTS: [&str; 5] = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a kingdom by the sea, there lived a lighthouse keeper who",
    "1, 2, 3,",
    "A list of fruits: apple, banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango, nectarine, orange, papaya",
];

#[test]
fn chunked_prefill_equals_token_by_token() {
    let long = PROMPTS.join(" ").repeat(2);
    let r = req(&long, SamplingParams::greedy(), 6, 0);
    let n = r.prompt.len();
    assert!(
        n > 64,
        "prompt long enough for a 64-token chunk to split it ({n})"
    );
    let reference = engine(1).run_batch(std::slice::from_ref(&r), true).unwrap();
    for chunk in [7, 64, n] {
        let got = engine(chunk)
            .run_batch(std::slice::from_ref(&r), true)
            .unwrap();
        assert_eq!(got[0].tokens, reference[0].tokens, "chunk {chunk}");
        assert_eq!(
            bits(&got[0].step_logits),
            bits(&reference[0].step_logits),
            "chunk {chunk}: logits bits"
        );
    }
}

#[test]
fn batched_equals_solo_with_mixed_prefill_and_decode() {
    let reqs: Vec<GenerateRequest> = PROMPTS
        .iter()
        .enumerate()
        .map(|(i, p)| req(p, SamplingParams::greedy(), 8, i as u32))
        .collect();
    // Chunk 7: long prompts are still in prefill while short ones decode, so steps mix both.
    let batched = engine(7).run_batch(&reqs, true).unwrap();
    for (i, r) in reqs.iter().enumerate() {
        let solo: Vec<BatchOutput> = engine(512)
            .run_batch(std::slice::from_ref(r), true)
            .unwrap();
        assert_eq!(batched[i].tokens, solo[0].tokens, "request {i}");
        assert_eq!(
            bits(&batched[i].step_logits),
            bits(&solo[0].step_logits),
            "request {i}: logits bits"
        );
    }
}

#[test]
fn thread_count_does_not_change_logits() {
    let r = req(PROMPTS[2], SamplingParams::greedy(), 4, 0);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            engine(512)
                .run_batch(std::slice::from_ref(&r), true)
                .unwrap()
        })
    };
    let one = run(1);
    let three = run(3);
    assert_eq!(bits(&one[0].step_logits), bits(&three[0].step_logits));
}

#[test]
fn seeded_sampling_is_independent_of_the_batch() {
    let params = SamplingParams {
        temperature: 0.9,
        top_p: 0.95,
        top_k: 50,
        min_p: 0.02,
        repetition_penalty: 1.1,
        seed: 1234,
        ..Default::default()
    };
    let target = req(PROMPTS[2], params.clone(), 12, 3);
    let solo = engine(512)
        .run_batch(std::slice::from_ref(&target), false)
        .unwrap();
    let mut reqs: Vec<GenerateRequest> = PROMPTS
        .iter()
        .map(|p| {
            req(
                p,
                SamplingParams {
                    seed: 99,
                    ..params.clone()
                },
                12,
                0,
            )
        })
        .collect();
    reqs.insert(1, target.clone());
    let batched = engine(16).run_batch(&reqs, false).unwrap();
    assert_eq!(batched[1].tokens, solo[0].tokens);
    // A different seed draws a different continuation (12 tokens at temperature 0.9).
    let other = engine(512)
        .run_batch(
            &[GenerateRequest {
                params: SamplingParams {
                    seed: 1235,
                    ..params
                },
                ..target
            }],
            false,
        )
        .unwrap();
    assert_ne!(other[0].tokens, solo[0].tokens);
}

#[test]
fn greedy_answers_paris() {
    let tk = &smol().tokenizer;
    let text = tk
        .apply_chat_template(
            &serde_json::json!([{"role": "user", "content": "What is the capital of France?"}]),
            None,
            true,
        )
        .unwrap();
    let r = GenerateRequest {
        prompt: tk.encode(&text, false).unwrap(),
        params: SamplingParams::greedy(),
        max_tokens: 16,
        stop_ids: tk.eos.clone(),
        sequence: 0,
    };
    let out = engine(512).generate(&r, |_| {}).unwrap();
    let answer = tk.decode(&out.tokens, true).unwrap();
    assert!(answer.contains("Paris"), "{answer:?}");
}

/// The f16 KV cache (`kv_cache_dtype = "f16"`; on the CPU each appended value is rounded to
/// f16): Level A still holds (chunked prefill and batching give the logits bits of token-by-token
/// solo decode), and the rounding is really applied: the logits differ from the f32 cache's, by
/// less than 1% of their spread, and greedy keeps its answer.
#[test]
fn f16_kv_cache_keeps_level_a_and_stays_close_to_f32() {
    let f16_engine = |chunk: usize| {
        Engine::new(
            Box::new(CpuBackend::new(smol().model.clone(), 256, 16).with_kv_f16()),
            chunk,
        )
    };
    let long = PROMPTS[1..4].join(" ");
    let r = req(&long, SamplingParams::greedy(), 6, 0);
    let reference = f16_engine(1)
        .run_batch(std::slice::from_ref(&r), true)
        .unwrap();
    let chunked = f16_engine(7)
        .run_batch(std::slice::from_ref(&r), true)
        .unwrap();
    assert_eq!(
        bits(&chunked[0].step_logits),
        bits(&reference[0].step_logits),
        "f16 cache: chunk 7 against token by token"
    );
    let reqs: Vec<GenerateRequest> = [long.as_str(), PROMPTS[0]]
        .iter()
        .enumerate()
        .map(|(i, p)| req(p, SamplingParams::greedy(), 6, i as u32))
        .collect();
    let batched = f16_engine(7).run_batch(&reqs, true).unwrap();
    assert_eq!(
        bits(&batched[0].step_logits),
        bits(&reference[0].step_logits),
        "f16 cache: batched against solo"
    );
    let f32_run = engine(512)
        .run_batch(std::slice::from_ref(&r), true)
        .unwrap();
    assert_eq!(f32_run[0].tokens, reference[0].tokens, "greedy answer");
    let (a, b) = (&f32_run[0].step_logits[0], &reference[0].step_logits[0]);
    let spread =
        a.iter().fold(f32::MIN, |m, &v| m.max(v)) - a.iter().fold(f32::MAX, |m, &v| m.min(v));
    let max_diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(
        max_diff > 0.0,
        "the f16 cache changed nothing: rounding not applied"
    );
    assert!(
        max_diff < 0.01 * spread,
        "f16 cache moved a logit by {max_diff} (spread {spread})"
    );
}

#[test]
fn first_token_at_marks_the_end_of_each_prefill() {
    // Token-by-token prefill: the short prompt ends its prefill forwards before the long one.
    let short = req(PROMPTS[0], SamplingParams::greedy(), 3, 0);
    let long = req(&PROMPTS.join(" "), SamplingParams::greedy(), 3, 1);
    assert!(long.prompt.len() > short.prompt.len() + 8);
    let t0 = std::time::Instant::now();
    let out = engine(1).run_batch(&[short, long], false).unwrap();
    let t1 = std::time::Instant::now();
    let at: Vec<_> = out.iter().map(|o| o.first_token_at.unwrap()).collect();
    assert!(
        t0 < at[0] && at[0] < at[1] && at[1] < t1,
        "{t0:?} {at:?} {t1:?}"
    );
    assert!(out.iter().all(|o| o.tokens.len() == 3));
}
