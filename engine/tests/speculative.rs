//! Speculative decoding changes nothing but speed: for n-gram and layer-skip drafters and
//! K = 1..8, greedy and seeded sampling with filters and penalties, alone and in a batch, the
//! logits at every position are bit-identical to plain decode and the tokens equal.

mod common;

use memra_engine::backend::cpu::CpuBackend;
use memra_engine::loader::{self, LoadedModel};
use memra_engine::sample::SamplingParams;
use memra_engine::sched::{Event, SchedulerConfig, SchedulerHandle, Submit};
use memra_engine::spec::SpecParams;
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn smol() -> &'static LoadedModel {
    static M: OnceLock<LoadedModel> = OnceLock::new();
    M.get_or_init(|| loader::load(&common::model_path("smollm2-135m-instruct")).unwrap())
}

/// Code-editing style prompt: the answer repeats much of the prompt, so n-gram drafts hit.
const CODE: &str = "Rename the variable `total` to `sum` in this function:\n\ndef add_all(values):\n    total = 0\n    for v in values:\n        total = total + v\n    return total\n\nHere is the function with `total` renamed to `sum`:\n\ndef add_all(values):\n";

type Out = (Vec<u32>, Vec<Arc<Vec<f32>>>, u32, u32);

fn run(reqs: &[(String, SamplingParams, Option<SpecParams>)], max_tokens: usize) -> Vec<Out> {
    run_with(reqs, max_tokens, 0.0)
}

/// [`run`] with the scheduler's adaptive draft length on (`spec_row_cost`; 0 drafts k).
fn run_with(
    reqs: &[(String, SamplingParams, Option<SpecParams>)],
    max_tokens: usize,
    spec_row_cost: f32,
) -> Vec<Out> {
    let cfg = SchedulerConfig {
        max_batch_tokens: 64,
        spec_row_cost,
        ..Default::default()
    };
    run_cfg(reqs, &vec![max_tokens; reqs.len()], cfg)
}

/// Runs `reqs` together (request i generating `max_tokens[i]` tokens) under `cfg`.
fn run_cfg(
    reqs: &[(String, SamplingParams, Option<SpecParams>)],
    max_tokens: &[usize],
    cfg: SchedulerConfig,
) -> Vec<Out> {
    let model = smol().model.clone();
    // The draft model shares the tokenizer; SmolLM2 drafts for itself (the test is about
    // exactness and bookkeeping, not speed). Its pool is small so drafts also hit "no blocks".
    let draft = smol().model.clone();
    let h = SchedulerHandle::spawn_with_draft(
        Box::new(move || Ok(Box::new(CpuBackend::new(model, 256, 16)) as _)),
        Some(Box::new(move || {
            Ok(Box::new(CpuBackend::new(draft, 12, 16)) as _)
        })),
        cfg,
    )
    .unwrap();
    let rxs: Vec<Receiver<Event>> = reqs
        .iter()
        .enumerate()
        .map(|(i, (text, params, spec))| {
            let (tx, rx) = channel();
            h.submit(Submit {
                id: i as u64,
                prompt: smol().tokenizer.encode(text, true).unwrap(),
                params: params.clone(),
                max_tokens: max_tokens[i],
                stop_ids: vec![],
                n: 1,
                logprobs: None,
                tenant: format!("t{i}"),
                return_logits: true,
                spec: *spec,
                events: Box::new(move |e| tx.send(e).is_ok()),
            })
            .unwrap();
            rx
        })
        .collect();
    let outs = rxs
        .iter()
        .map(|rx| {
            let mut out: Out = (vec![], vec![], 0, 0);
            loop {
                match rx.recv_timeout(Duration::from_secs(120)).unwrap() {
                    Event::Token { token, logits, .. } => {
                        out.0.push(token);
                        out.1.push(logits.unwrap());
                    }
                    Event::Finished {
                        drafted, accepted, ..
                    } => {
                        out.2 = drafted;
                        out.3 = accepted;
                    }
                    Event::Done => return out,
                    Event::Error(e) => panic!("{e}"),
                    Event::Started { .. } => {}
                }
            }
        })
        .collect();
    h.shutdown();
    outs
}

fn bits(v: &[Arc<Vec<f32>>]) -> Vec<Vec<u32>> {
    v.iter()
        .map(|r| r.iter().map(|x| x.to_bits()).collect())
        .collect()
}

fn seeded() -> SamplingParams {
    SamplingParams {
        temperature: 0.7,
        top_p: 0.9,
        top_k: 40,
        min_p: 0.05,
        repetition_penalty: 1.05,
        presence_penalty: 0.1,
        frequency_penalty: 0.1,
        seed: 21,
        ..Default::default()
    }
}

/// The policy turns speculation off partway through a request without changing a bit: below
/// `spec_min_acceptance` a sequence pauses drafting (a 1-layer self-draft is rarely right), and
/// above `spec_max_running` running sequences none drafts (the longer request drafts only once
/// the shorter one has finished).
#[test]
fn policy_turns_speculation_off_mid_request() {
    let n = 24;
    let params = seeded();
    let plain = run(&[(CODE.to_string(), params.clone(), None)], n);
    let skip = SpecParams::parse("layerskip:1", 4).unwrap();
    let mut drafted = Vec::new();
    for min_acceptance in [0.0, 0.99] {
        let cfg = SchedulerConfig {
            max_batch_tokens: 64,
            spec_min_acceptance: min_acceptance,
            ..Default::default()
        };
        let got = run_cfg(&[(CODE.to_string(), params.clone(), Some(skip))], &[n], cfg);
        assert_eq!(
            got[0].0, plain[0].0,
            "min acceptance {min_acceptance}: tokens"
        );
        assert_eq!(
            bits(&got[0].1),
            bits(&plain[0].1),
            "{min_acceptance}: logits bits"
        );
        drafted.push(got[0].2);
    }
    assert!(
        drafted[1] > 0 && drafted[1] < drafted[0],
        "drafted without / with the acceptance floor: {drafted:?}"
    );

    // Greedy, where n-gram drafts on this prompt hit (ngram_k1_to_8_equals_plain_decode).
    let greedy = SamplingParams::greedy();
    let plain = run(&[(CODE.to_string(), greedy.clone(), None)], n);
    let ngram = SpecParams::parse("ngram", 4).unwrap();
    let reqs = [
        (CODE.to_string(), greedy.clone(), Some(ngram)),
        (CODE.to_string(), greedy.clone(), Some(ngram)),
    ];
    let mut long_drafted = Vec::new();
    for max_running in [8, 1] {
        let cfg = SchedulerConfig {
            max_batch_tokens: 64,
            spec_max_running: max_running,
            ..Default::default()
        };
        let got = run_cfg(&reqs, &[6, n], cfg);
        assert_eq!(
            got[1].0, plain[0].0,
            "spec_max_running {max_running}: tokens"
        );
        assert_eq!(
            bits(&got[1].1),
            bits(&plain[0].1),
            "{max_running}: logits bits"
        );
        assert_eq!(
            got[0].0,
            plain[0].0[..6],
            "{max_running}: the short request's tokens"
        );
        if max_running == 1 {
            assert_eq!(
                got[0].2, 0,
                "the short request ran beside the long one: no drafts"
            );
        }
        long_drafted.push(got[1].2);
    }
    assert!(
        long_drafted[1] > 0 && long_drafted[1] < long_drafted[0],
        "the long request's drafts with 8 / 1 running allowed: {long_drafted:?}"
    );
}

/// Speculation the server's default chose pauses at its drafter's own break-even, counted
/// with the verify rows; a request's explicit choice is not overridden. With a verify row
/// costing 0.1 decode steps, SmolLM2 drafting for itself (a draft token costs a whole target
/// step) can never pay: chosen by the policy it drafts nothing, asked for explicitly it drafts;
/// a 1-layer self-draft (1/30 of a step a token) pays at low acceptance and still drafts under
/// the policy. Output is plain decode's in every case.
#[test]
fn policy_choice_counts_the_drafters_cost_and_explicit_requests_win() {
    let n = 12;
    let greedy = SamplingParams::greedy();
    let plain = run(&[(CODE.to_string(), greedy.clone(), None)], n);
    let cfg = || SchedulerConfig {
        max_batch_tokens: 64,
        spec_row_cost: 0.1,
        spec_min_acceptance: 0.0,
        ..Default::default()
    };
    let draft = SpecParams::parse("draft", 4).unwrap();
    let skip = SpecParams::parse("layerskip:1", 4).unwrap();
    let mut drafted = Vec::new();
    for spec in [draft, draft.by_policy(), skip.by_policy()] {
        let got = run_cfg(
            &[(CODE.to_string(), greedy.clone(), Some(spec))],
            &[n],
            cfg(),
        );
        assert_eq!(got[0].0, plain[0].0, "{spec:?}: tokens");
        assert_eq!(bits(&got[0].1), bits(&plain[0].1), "{spec:?}: logits bits");
        drafted.push(got[0].2);
    }
    assert!(
        drafted[0] > 0,
        "an explicit draft-model request drafts: {drafted:?}"
    );
    assert_eq!(
        drafted[1], 0,
        "the policy's draft model cannot pay: {drafted:?}"
    );
    assert!(
        drafted[2] > 0,
        "the policy's 1-layer self-draft pays: {drafted:?}"
    );
}

#[test]
fn ngram_k1_to_8_equals_plain_decode() {
    let n = 24;
    for params in [SamplingParams::greedy(), seeded()] {
        let plain = run(&[(CODE.to_string(), params.clone(), None)], n);
        let mut accepted = 0;
        for k in 1..=8 {
            let spec = SpecParams::parse("ngram", k).unwrap();
            let got = run(&[(CODE.to_string(), params.clone(), Some(spec))], n);
            assert_eq!(got[0].0, plain[0].0, "k={k} tokens");
            assert_eq!(bits(&got[0].1), bits(&plain[0].1), "k={k} logits bits");
            assert!(got[0].2 >= got[0].3);
            accepted += got[0].3;
        }
        if params.temperature == 0.0 {
            assert!(
                accepted > 0,
                "greedy n-gram drafts were accepted on the code-editing prompt"
            );
        }
    }
}

/// A chat-templated request to add type hints to a file (gates/prompts/spec_code.jsonl), whose
/// greedy answer copies most of the prompt: n-gram drafts are long and mostly accepted.
fn copy_prompt() -> String {
    let text = "Add type hints to this Python code and output the full file:\n\n```python\n\
                def load_users(path):\n    users = []\n    with open(path) as f:\n        \
                for line in f:\n            name, age = line.strip().split(\",\")\n            \
                users.append({\"name\": name, \"age\": int(age)})\n    return users\n```";
    let m = serde_json::json!([{"role": "user", "content": text}]);
    smol()
        .tokenizer
        .apply_chat_template(&m, None, true)
        .unwrap()
}

/// The adaptive draft length (a per-step k from the acceptance estimate and the row cost) moves
/// speed only: tokens and logits bits equal plain decode, and dear rows draft less.
#[test]
fn adaptive_draft_length_equals_plain_decode() {
    let n = 24;
    let prompt = copy_prompt();
    for params in [SamplingParams::greedy(), seeded()] {
        let plain = run(&[(prompt.clone(), params.clone(), None)], n);
        // n-gram drafts cost nothing to make; layer-skip's cost their share of the layers.
        for method in ["ngram", "layerskip:15"] {
            let spec = SpecParams::parse(method, 8).unwrap();
            let mut drafted = Vec::new();
            for cost in [0.0, 0.1, 1.0] {
                let got = run_with(&[(prompt.clone(), params.clone(), Some(spec))], n, cost);
                assert_eq!(got[0].0, plain[0].0, "{method} row cost {cost}: tokens");
                assert_eq!(
                    bits(&got[0].1),
                    bits(&plain[0].1),
                    "{method} row cost {cost}: logits bits"
                );
                drafted.push(got[0].2);
            }
            // At a row cost of 1 a draft never pays more than its row: one token per verify.
            // (Seeded sampling strays from the prompt, so its drafts are too few to compare.)
            assert!(
                params.temperature > 0.0 || drafted[2] < drafted[0],
                "{method}: drafted with k fixed {} vs row cost 1: {}",
                drafted[0],
                drafted[2]
            );
        }
    }
}

#[test]
fn layer_skip_and_batched_speculation_equal_plain_decode() {
    let n = 12;
    let others = ["The capital of France is", "Once upon a time", "1, 2, 3,"];
    for params in [SamplingParams::greedy(), seeded()] {
        let mut reqs: Vec<(String, SamplingParams, Option<SpecParams>)> = others
            .iter()
            .map(|t| (t.to_string(), params.clone(), None))
            .collect();
        reqs.push((CODE.to_string(), params.clone(), None));
        let plain = run(&reqs, n);
        for spec in ["layerskip:15", "ngram:2", "draft"] {
            for k in [1, 3, 8] {
                let sp = SpecParams::parse(spec, k).unwrap();
                // Speculating requests share the batch with plain ones.
                let mut reqs2 = reqs.clone();
                reqs2[1].2 = Some(sp);
                reqs2[3].2 = Some(sp);
                let got = run(&reqs2, n);
                for (r, (a, b)) in plain.iter().zip(&got).enumerate() {
                    assert_eq!(a.0, b.0, "{spec} k={k} request {r} tokens");
                    assert_eq!(
                        bits(&a.1),
                        bits(&b.1),
                        "{spec} k={k} request {r} logits bits"
                    );
                }
                assert!(got[3].2 > 0, "{spec} k={k}: drafts were proposed");
                if spec == "draft" && params.temperature == 0.0 {
                    // A model drafting for itself greedily is always right.
                    assert_eq!(got[3].2, got[3].3, "draft k={k}: every self-draft accepted");
                }
            }
        }
    }
}

/// n > 1 with a drafter that always drafts, on a one-token prompt: the step that ends the prompt
/// must still start the other choices (it decodes plainly), and every choice must finish with
/// the same tokens as a plain request with that choice's seed stream.
#[test]
fn forked_choices_start_when_the_prompt_could_speculate() {
    let model = smol().model.clone();
    let h = SchedulerHandle::spawn_with_draft(
        Box::new(move || Ok(Box::new(CpuBackend::new(model, 64, 16)) as _)),
        None,
        SchedulerConfig::default(),
    )
    .unwrap();
    let prompt = smol().tokenizer.encode("Hi", false).unwrap();
    assert_eq!(prompt.len(), 1, "a one-token prompt");
    let submit = |id: u64, n: u32, spec: Option<SpecParams>| {
        let (tx, rx) = channel();
        h.submit(Submit {
            id,
            prompt: prompt.clone(),
            params: seeded(),
            max_tokens: 6,
            stop_ids: vec![],
            n,
            logprobs: None,
            tenant: "t".into(),
            return_logits: false,
            spec,
            events: Box::new(move |e| tx.send(e).is_ok()),
        })
        .unwrap();
        rx
    };
    let collect = |rx: Receiver<Event>, n: usize| {
        let mut by_choice = vec![Vec::new(); n];
        loop {
            match rx.recv_timeout(Duration::from_secs(120)).expect("no hang") {
                Event::Token { choice, token, .. } => by_choice[choice as usize].push(token),
                Event::Done => return by_choice,
                Event::Error(e) => panic!("{e}"),
                _ => {}
            }
        }
    };
    let spec = SpecParams::parse("layerskip:2", 3).unwrap();
    let forked = collect(submit(1, 2, Some(spec)), 2);
    let plain = collect(submit(2, 2, None), 2);
    assert_eq!(forked, plain);
    assert!(forked.iter().all(|c| c.len() == 6), "{forked:?}");
}

/// A layer-skip draft must use fewer layers than the model has: more is refused at submit with
/// a message naming both counts (a 400 in the server), not run as a full-model "draft".
#[test]
fn layer_skip_with_too_many_layers_is_refused() {
    let model = smol().model.clone();
    let n_layers = model.layers.len();
    let h = SchedulerHandle::spawn_with_draft(
        Box::new(move || Ok(Box::new(CpuBackend::new(model, 16, 16)) as _)),
        None,
        SchedulerConfig::default(),
    )
    .unwrap();
    let submit = |layers: usize| {
        h.submit(Submit {
            id: layers as u64,
            prompt: vec![1, 2, 3],
            params: SamplingParams::greedy(),
            max_tokens: 1,
            stop_ids: vec![],
            n: 1,
            logprobs: None,
            tenant: "t".into(),
            return_logits: false,
            spec: Some(SpecParams::parse(&format!("layerskip:{layers}"), 2).unwrap()),
            events: Box::new(|_| true),
        })
    };
    let e = submit(n_layers).unwrap_err().to_string();
    assert!(
        e.contains(&format!("layerskip:{n_layers}")) && e.contains(&n_layers.to_string()),
        "{e}"
    );
    assert!(submit(n_layers - 1).is_ok());
    h.shutdown();
}

/// The draft model's KV after rejections, checked directly: a draft model kept across verifies
/// (each rejecting part of its drafts and rolling back as the scheduler does) proposes at every
/// step exactly what a fresh draft model, which recomputes the whole sequence, proposes. A
/// stale position (a rejected draft's KV kept, a catch-up fed at the wrong place) would move
/// its logits and so, over these steps, its greedy drafts.
#[test]
fn draft_model_kv_after_rejections_matches_a_fresh_draft_model() {
    use memra_engine::spec::{DraftJob, DraftModelDrafter, DraftState, Drafter};
    let model = || Box::new(CpuBackend::new(smol().model.clone(), 64, 16));
    let mut target = model();
    let mut kept = DraftModelDrafter::new(model());
    let mut state = DraftState::default();
    let mut tokens = smol().tokenizer.encode(CODE, true).unwrap();
    let vocab = smol().model.config.vocab_size as u32;
    let mut draft = |d: &mut DraftModelDrafter, st: &mut DraftState, t: &[u32], k: usize| {
        let mut jobs = [DraftJob {
            tokens: t,
            k,
            target_table: &[],
            state: st,
            draft: Vec::new(),
        }];
        d.draft(target.as_mut(), &mut jobs).unwrap();
        std::mem::take(&mut jobs[0].draft)
    };
    let (mut compared, mut rejected) = (0, 0);
    for step in 0..10 {
        let k = 1 + step % 4;
        let got = draft(&mut kept, &mut state, &tokens, k);
        let mut fresh = DraftModelDrafter::new(model());
        let want = draft(&mut fresh, &mut DraftState::default(), &tokens, k);
        assert_eq!(
            got, want,
            "step {step}: drafts of the kept and a fresh draft model"
        );
        assert_eq!(got.len(), k);
        compared += k;
        // The verify accepts `a` drafts and picks a token other than the next draft (a
        // rejection whenever a < k); the sequence's verified KV ends before that token.
        let a = step % (k + 1);
        tokens.extend_from_slice(&got[..a]);
        let bonus = got.get(a).map_or(got[0], |&d| (d + 7) % vocab);
        rejected += usize::from(a < k);
        tokens.push(bonus);
        kept.rollback(&mut state, tokens.len() - 1);
        assert!(
            state.computed < tokens.len(),
            "the kept KV ends before the new token"
        );
    }
    assert!(
        compared >= 20 && rejected >= 5,
        "{compared} drafts, {rejected} rejections"
    );
}
