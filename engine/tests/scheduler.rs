//! The continuous-batching scheduler keeps the exactness contract: every request's tokens equal
//! the same request run alone, through concurrency, chunked prefill, prefix-cache hits, forks
//! (n > 1) and preemption by recompute; cancellation and disconnects free blocks.

mod common;

use memra_engine::backend::cpu::CpuBackend;
use memra_engine::engine::{Engine, FinishReason, GenerateRequest};
use memra_engine::loader::{self, LoadedModel};
use memra_engine::sample::SamplingParams;
use memra_engine::sched::{Event, SchedulerConfig, SchedulerHandle, Submit, SubmitError};
use std::sync::mpsc::{channel, Receiver};
use std::sync::OnceLock;
use std::time::Duration;

fn smol() -> &'static LoadedModel {
    static M: OnceLock<LoadedModel> = OnceLock::new();
    M.get_or_init(|| loader::load(&common::model_path("smollm2-135m-instruct")).unwrap())
}

fn sched(blocks: usize, cfg: SchedulerConfig) -> SchedulerHandle {
    let model = smol().model.clone();
    SchedulerHandle::spawn(
        Box::new(move || Ok(Box::new(CpuBackend::new(model, blocks, 16)) as _)),
        cfg,
    )
    .unwrap()
}

fn prompt(i: usize) -> Vec<u32> {
    let texts = [
        "The capital of France is",
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
        "Once upon a time, in a kingdom by the sea, there lived a lighthouse keeper who",
        "1, 2, 3,",
        "A list of fruits: apple, banana, cherry, date, elderberry, fig, grape, honeydew",
        "Q: Why is the sky blue?\nA:",
    ];
    smol()
        .tokenizer
        .encode(texts[i % texts.len()], true)
        .unwrap()
}

fn submit(
    h: &SchedulerHandle,
    id: u64,
    prompt: Vec<u32>,
    params: SamplingParams,
    max: usize,
    n: u32,
    tenant: &str,
) -> Receiver<Event> {
    let (tx, rx) = channel();
    h.submit(Submit {
        id,
        prompt,
        params,
        max_tokens: max,
        stop_ids: vec![],
        n,
        logprobs: None,
        tenant: tenant.into(),
        return_logits: false,
        spec: None,
        events: Box::new(move |e| tx.send(e).is_ok()),
    })
    .unwrap();
    rx
}

/// Collects (cached_tokens, tokens per choice, finish per choice) until Done.
fn collect(rx: &Receiver<Event>, n: usize) -> (usize, Vec<Vec<u32>>, Vec<Option<FinishReason>>) {
    let mut cached = 0;
    let mut toks = vec![Vec::new(); n];
    let mut fin = vec![None; n];
    loop {
        match rx.recv_timeout(Duration::from_secs(120)).expect("event") {
            Event::Started { cached_tokens, .. } => cached = cached_tokens,
            Event::Token { choice, token, .. } => toks[choice as usize].push(token),
            Event::Finished { choice, reason, .. } => fin[choice as usize] = Some(reason),
            Event::Done => return (cached, toks, fin),
            Event::Error(e) => panic!("{e}"),
        }
    }
}

fn solo(prompt: Vec<u32>, params: SamplingParams, max: usize, sequence: u32) -> Vec<u32> {
    let mut e = Engine::new(Box::new(CpuBackend::new(smol().model.clone(), 64, 16)), 512);
    e.run_batch(
        &[GenerateRequest {
            prompt,
            params,
            max_tokens: max,
            stop_ids: vec![],
            sequence,
        }],
        false,
    )
    .unwrap()
    .remove(0)
    .tokens
}

#[test]
fn concurrent_requests_equal_solo_runs() {
    let h = sched(
        256,
        SchedulerConfig {
            max_batch_tokens: 24,
            ..Default::default()
        },
    );
    let seeded = SamplingParams {
        temperature: 0.8,
        top_p: 0.9,
        seed: 5,
        ..Default::default()
    };
    let rxs: Vec<_> = (0..6)
        .map(|i| {
            let p = if i % 2 == 0 {
                SamplingParams::greedy()
            } else {
                seeded.clone()
            };
            submit(&h, i as u64, prompt(i), p, 10, 1, "t")
        })
        .collect();
    for (i, rx) in rxs.iter().enumerate() {
        let (_, toks, fin) = collect(rx, 1);
        let p = if i % 2 == 0 {
            SamplingParams::greedy()
        } else {
            seeded.clone()
        };
        assert_eq!(toks[0], solo(prompt(i), p, 10, 0), "request {i}");
        assert_eq!(fin[0], Some(FinishReason::Length));
    }
    h.shutdown();
}

#[test]
fn prefix_hits_are_exact_and_tenant_scoped() {
    let h = sched(256, SchedulerConfig::default());
    let long: Vec<u32> = (0..4).flat_map(prompt).collect();
    let (c1, a, _) = collect(
        &submit(&h, 1, long.clone(), SamplingParams::greedy(), 8, 1, "x"),
        1,
    );
    let (c2, b, _) = collect(
        &submit(&h, 2, long.clone(), SamplingParams::greedy(), 8, 1, "x"),
        1,
    );
    let (c3, c, _) = collect(
        &submit(&h, 3, long.clone(), SamplingParams::greedy(), 8, 1, "y"),
        1,
    );
    assert_eq!(c1, 0);
    assert_eq!(
        c2,
        (long.len() - 1) / 16 * 16,
        "every full block before the last token hits"
    );
    assert_eq!(c3, 0, "another tenant shares nothing");
    assert_eq!(a, b);
    assert_eq!(a, c);
    assert!(h.stats().prefix_hit_tokens >= c2 as u64);
    h.shutdown();
}

#[test]
fn n_choices_fork_and_equal_separate_sequences() {
    let h = sched(256, SchedulerConfig::default());
    let p = SamplingParams {
        temperature: 1.0,
        seed: 11,
        ..Default::default()
    };
    let (_, toks, _) = collect(&submit(&h, 1, prompt(2), p.clone(), 8, 3, "t"), 3);
    for (c, t) in toks.iter().enumerate() {
        assert_eq!(*t, solo(prompt(2), p.clone(), 8, c as u32), "choice {c}");
    }
    assert_ne!(toks[0], toks[1], "different choices draw differently");
    h.shutdown();
}

#[test]
fn preemption_by_recompute_keeps_outputs() {
    // 10 blocks of 16 positions for four sequences of ~20 + 30 tokens: they cannot all fit.
    let h = sched(
        10,
        SchedulerConfig {
            max_batch_tokens: 64,
            ..Default::default()
        },
    );
    let rxs: Vec<_> = (0..4)
        .map(|i| {
            submit(
                &h,
                i,
                prompt(i as usize + 1),
                SamplingParams::greedy(),
                30,
                1,
                &format!("t{i}"),
            )
        })
        .collect();
    for (i, rx) in rxs.iter().enumerate() {
        let (_, toks, _) = collect(rx, 1);
        assert_eq!(
            toks[0],
            solo(prompt(i + 1), SamplingParams::greedy(), 30, 0),
            "request {i}"
        );
    }
    assert!(
        h.stats().preemptions > 0,
        "the cache was small enough to force preemption"
    );
    h.shutdown();
}

#[test]
fn cancel_and_disconnect_free_blocks_and_full_queue_refuses() {
    let h = sched(
        64,
        SchedulerConfig {
            max_running: 1,
            queue_capacity: 1,
            ..Default::default()
        },
    );
    let rx = submit(&h, 1, prompt(2), SamplingParams::greedy(), 10_000, 1, "t");
    assert!(matches!(
        rx.recv_timeout(Duration::from_secs(30)).unwrap(),
        Event::Started { .. }
    ));
    // One waits in the queue; a third is refused.
    let _rx2 = submit(&h, 2, prompt(3), SamplingParams::greedy(), 4, 1, "t");
    let (tx3, _rx3) = channel();
    let e = h
        .submit(Submit {
            id: 3,
            prompt: prompt(1),
            params: SamplingParams::greedy(),
            max_tokens: 4,
            stop_ids: vec![],
            n: 1,
            logprobs: None,
            tenant: "t".into(),
            return_logits: false,
            spec: None,
            events: Box::new(move |e| tx3.send(e).is_ok()),
        })
        .unwrap_err();
    assert!(
        matches!(
            e,
            SubmitError::QueueFull {
                retry_after_secs: 1,
                ..
            }
        ),
        "{e:?}"
    );
    h.cancel(1);
    drop(rx);
    let (_, toks, _) = collect(&_rx2, 1);
    assert_eq!(toks[0].len(), 4);
    // A client that goes away mid-generation: its sink fails and the scheduler drops it.
    let rx4 = submit(&h, 4, prompt(2), SamplingParams::greedy(), 10_000, 1, "t");
    assert!(matches!(
        rx4.recv_timeout(Duration::from_secs(30)).unwrap(),
        Event::Started { .. }
    ));
    drop(rx4);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = h.stats();
        if s.running == 0 && s.kv_blocks_used == 0 && s.prefix_cached_blocks > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "blocks not freed: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    h.shutdown();
}
