//! `memra serve` end to end: the built binary on the real SmolLM2 model (CPU backend), driven
//! over raw HTTP and by the official `openai` Python package. These tests share one server
//! (context 512, 64 MiB of KV); `serve_lifecycle.rs` has those that start their own.

mod serve_util;

use serde_json::{json, Value};
use serve_util::*;

#[test]
fn greedy_chat_answers_paris() {
    let s = shared();
    let (code, v) = s.post(
        "/v1/chat/completions",
        &chat_body(
            "What is the capital of France?",
            json!({"temperature": 0, "max_tokens": 30}),
        ),
    );
    assert_eq!(code, 200, "{v}");
    assert!(content(&v, 0).contains("Paris"), "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["model"], MODEL);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
    let u = &v["usage"];
    let (p, c) = (
        u["prompt_tokens"].as_u64().unwrap(),
        u["completion_tokens"].as_u64().unwrap(),
    );
    assert!(p > 10 && (1..=30).contains(&c), "{u}");
    assert_eq!(u["total_tokens"].as_u64().unwrap(), p + c);
    assert!(
        u["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            <= p
    );
}

/// The prefix cache is scoped by tenant (`user`): a new tenant's first request hits nothing, its
/// second hits the prompt's full blocks, and the answer is the same either way.
#[test]
fn prefix_cache_hits_are_per_tenant() {
    let s = shared();
    let user = format!("tenant-{}", std::process::id());
    let body = chat_body(
        "What is the capital of France?",
        json!({"temperature": 0, "max_tokens": 12, "user": user}),
    );
    let (c, a) = s.post("/v1/chat/completions", &body);
    assert_eq!(c, 200, "{a}");
    assert_eq!(
        a["usage"]["prompt_tokens_details"]["cached_tokens"], 0,
        "{a}"
    );
    let (_, b) = s.post("/v1/chat/completions", &body);
    let cached = b["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    let prompt = b["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(
        cached >= 16 && cached < prompt,
        "cached {cached} of {prompt}"
    );
    assert_eq!(content(&a, 0), content(&b, 0));
}

/// Streamed deltas concatenate to the non-streamed text, byte for byte, greedy and seeded, on
/// both endpoints; the SSE framing follows OpenAI's.
#[test]
fn stream_equals_non_stream() {
    let s = shared();
    for sampling in [
        json!({"temperature": 0}),
        json!({"temperature": 0.8, "seed": 7}),
    ] {
        let mut body = chat_body(
            "Write a short poem about the sea.",
            json!({"max_tokens": 40}),
        );
        merge(&mut body, sampling.clone());
        let (code, whole) = s.post("/v1/chat/completions", &body);
        assert_eq!(code, 200, "{whole}");
        merge(&mut body, json!({"stream": true}));
        let st = s.stream("/v1/chat/completions", &body);
        assert_eq!(st.content_type, "text/event-stream");
        assert_eq!(st.done_count, 1, "one [DONE], last");
        let chunks = &st.chunks;
        assert_eq!(
            chunks[0]["choices"][0]["delta"],
            json!({"role": "assistant", "content": ""})
        );
        assert!(chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk"));
        assert!(chunks.iter().all(|c| c["id"] == chunks[0]["id"]));
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, content(&whole, 0), "sampling {sampling}");
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"][0]["delta"], json!({}));
        assert_eq!(
            last["choices"][0]["finish_reason"],
            whole["choices"][0]["finish_reason"]
        );

        let mut body = json!({"model": MODEL, "prompt": "Once upon a time", "max_tokens": 30});
        merge(&mut body, sampling.clone());
        let (code, whole) = s.post("/v1/completions", &body);
        assert_eq!(code, 200, "{whole}");
        assert_eq!(whole["object"], "text_completion");
        merge(&mut body, json!({"stream": true}));
        let st = s.stream("/v1/completions", &body);
        let text: String = st
            .chunks
            .iter()
            .filter_map(|c| c["choices"][0]["text"].as_str())
            .collect();
        assert_eq!(
            text,
            whole["choices"][0]["text"].as_str().unwrap(),
            "{sampling}"
        );
        assert!(st.chunks.iter().all(|c| c["object"] == "text_completion"));
    }
}

/// Greedy text, then the same request with a stop string that spans a token boundary: the text
/// ends right before the first occurrence, finish_reason "stop", streamed or not.
#[test]
fn stop_strings_truncate() {
    let s = shared();
    let base = json!({"model": MODEL, "prompt": "The capital of France is", "max_tokens": 24,
        "temperature": 0, "ignore_eos": true, "logprobs": 0});
    let (code, v) = s.post("/v1/completions", &base);
    assert_eq!(code, 200, "{v}");
    let full = v["choices"][0]["text"].as_str().unwrap().to_string();
    let tokens: Vec<String> = v["choices"][0]["logprobs"]["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    // A boundary after a few tokens with text on both sides.
    let i = (3..tokens.len() - 1)
        .find(|&i| tokens[i].chars().count() >= 2 && !tokens[i + 1].trim().is_empty())
        .expect("a boundary between two non-empty tokens");
    let left: String = tokens[i]
        .chars()
        .rev()
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let right: String = tokens[i + 1].chars().take(2).collect();
    let stop = format!("{left}{right}");
    let cut = full
        .find(&stop)
        .expect("the stop string occurs in the text");
    let expect = &full[..cut];
    for stops in [json!(stop), json!(["\u{1F600}never", stop])] {
        let mut body = base.clone();
        merge(&mut body, json!({"stop": stops, "logprobs": null}));
        let (code, v) = s.post("/v1/completions", &body);
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["choices"][0]["text"], expect, "stop {stop:?} in {full:?}");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        merge(&mut body, json!({"stream": true}));
        let st = s.stream("/v1/completions", &body);
        let text: String = st
            .chunks
            .iter()
            .filter_map(|c| c["choices"][0]["text"].as_str())
            .collect();
        assert_eq!(text, expect);
        let fin: Vec<&Value> = st
            .chunks
            .iter()
            .filter(|c| !c["choices"][0]["finish_reason"].is_null())
            .collect();
        assert_eq!(fin.len(), 1);
        assert_eq!(fin[0]["choices"][0]["finish_reason"], "stop");
    }
}

/// With n > 1 a stop string ends only the choice that produced it; the others go on, and the
/// request ends once all have.
#[test]
fn stop_strings_end_single_choices() {
    let s = shared();
    let body = json!({"model": MODEL, "prompt": "My favourite animals are", "n": 3, "seed": 9,
        "temperature": 1.0, "max_tokens": 24, "stop": [","], "ignore_eos": true});
    let mut results = Vec::new();
    for stream in [false, true] {
        let mut texts = vec![String::new(); 3];
        let mut reasons = vec![String::new(); 3];
        let mut b = body.clone();
        merge(&mut b, json!({"stream": stream}));
        let chunks = if stream {
            s.stream("/v1/completions", &b).chunks
        } else {
            let (c, v) = s.post("/v1/completions", &b);
            assert_eq!(c, 200, "{v}");
            vec![v]
        };
        for c in chunks {
            for ch in c["choices"].as_array().unwrap() {
                let i = ch["index"].as_u64().unwrap() as usize;
                texts[i] += ch["text"].as_str().unwrap();
                if let Some(r) = ch["finish_reason"].as_str() {
                    reasons[i] = r.to_string();
                }
            }
        }
        for i in 0..3 {
            assert!(!texts[i].contains(','), "choice {i}: {:?}", texts[i]);
            assert!(
                ["stop", "length"].contains(&reasons[i].as_str()),
                "choice {i}"
            );
        }
        assert!(reasons.iter().any(|r| r == "stop"), "{reasons:?} {texts:?}");
        results.push((texts, reasons));
    }
    assert_eq!(results[0], results[1], "streamed and not, the same choices");
}

#[test]
fn max_tokens_finishes_with_length() {
    let s = shared();
    let (code, v) = s.post(
        "/v1/chat/completions",
        &chat_body(
            "Count from one to one hundred.",
            json!({"max_completion_tokens": 5, "ignore_eos": true, "temperature": 0}),
        ),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 5);
}

#[test]
fn n_choices_and_prompt_lists() {
    let s = shared();
    let body = chat_body(
        "Name a colour.",
        json!({"n": 2, "seed": 3, "temperature": 0.9, "max_tokens": 8}),
    );
    let (code, a) = s.post("/v1/chat/completions", &body);
    assert_eq!(code, 200, "{a}");
    let idx: Vec<u64> = a["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, [0, 1]);
    let (_, b) = s.post("/v1/chat/completions", &body);
    assert_eq!(
        (content(&a, 0), content(&a, 1)),
        (content(&b, 0), content(&b, 1)),
        "same seed, same choices"
    );

    // Several prompts: each gets n choices, index = prompt * n + choice; echo puts the prompt
    // first (for token ids, as /detokenize gives them: the special token 1 included).
    let (_, t) = s.post("/detokenize", &json!({"tokens": [1, 504, 3458]}));
    let id_text = t["prompt"].as_str().unwrap().to_string();
    assert!(id_text.starts_with("<|im_start|>"), "{id_text}");
    for (prompt, texts) in [
        (json!(["Hello", "Goodbye"]), ["Hello", "Goodbye"]),
        (
            json!([[1, 504, 3458], [1, 504, 3458]]),
            [id_text.as_str(), id_text.as_str()],
        ),
    ] {
        let body = json!({"model": MODEL, "prompt": prompt, "n": 2, "seed": 5,
            "temperature": 0.9, "max_tokens": 6, "echo": true});
        let (code, v) = s.post("/v1/completions", &body);
        assert_eq!(code, 200, "{v}");
        let ch = v["choices"].as_array().unwrap();
        let idx: Vec<u64> = ch.iter().map(|c| c["index"].as_u64().unwrap()).collect();
        assert_eq!(idx, [0, 1, 2, 3]);
        for (i, c) in ch.iter().enumerate() {
            assert!(
                c["text"].as_str().unwrap().starts_with(texts[i / 2]),
                "echo: {v}"
            );
        }
        assert!(v["usage"]["completion_tokens"].as_u64().unwrap() <= 24);
        // Equal prompts with the same seed: choice i of one equals choice i of the other.
        if texts[0] == texts[1] {
            assert_eq!(ch[0]["text"], ch[2]["text"]);
            assert_eq!(ch[1]["text"], ch[3]["text"]);
        }
    }
}

#[test]
fn logprobs_shape() {
    let s = shared();
    let (code, v) = s.post(
        "/v1/chat/completions",
        &chat_body(
            "Say hello.",
            json!({"temperature": 0, "max_tokens": 6, "logprobs": true, "top_logprobs": 3}),
        ),
    );
    assert_eq!(code, 200, "{v}");
    let content = v["choices"][0]["logprobs"]["content"].as_array().unwrap();
    assert_eq!(
        content.len() as u64,
        v["usage"]["completion_tokens"].as_u64().unwrap()
    );
    for e in content {
        let lp = e["logprob"].as_f64().unwrap();
        assert!(lp <= 0.0 && lp > -9999.0, "{e}");
        assert!(e["token"].is_string() && e["bytes"].is_array(), "{e}");
        let top = e["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3);
        let tl: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
        assert!(tl.windows(2).all(|w| w[0] >= w[1]), "sorted: {tl:?}");
        // Greedy: the chosen token is the most likely one.
        assert_eq!(e["token"], top[0]["token"], "{e}");
        assert!((lp - tl[0]).abs() < 1e-6);
    }
    // The tokens' bytes, joined, are the message's text, also where a token ends inside a
    // character (a Chinese prompt draws multi-byte output).
    for prompt in ["Say hello.", "用中文写一句关于春天的话。"] {
        let extra = json!({"temperature": 0, "max_tokens": 12, "logprobs": true});
        let (code, v) = s.post("/v1/chat/completions", &chat_body(prompt, extra));
        let lp = v["choices"][0]["logprobs"]["content"].as_array().unwrap();
        let byte = |b: &Value| b.as_u64().unwrap() as u8;
        let joined: Vec<u8> = lp
            .iter()
            .flat_map(|e| e["bytes"].as_array().unwrap().iter().map(byte))
            .collect();
        assert_eq!(code, 200, "{v}");
        assert_eq!(String::from_utf8_lossy(&joined), serve_util::content(&v, 0));
    }
    let (code, v) = s.post(
        "/v1/completions",
        &json!({"model": MODEL, "prompt": "1, 2, 3,",
        "max_tokens": 5, "temperature": 0, "logprobs": 2, "ignore_eos": true}),
    );
    assert_eq!(code, 200, "{v}");
    let lp = &v["choices"][0]["logprobs"];
    let n = lp["tokens"].as_array().unwrap().len();
    assert_eq!(n, 5);
    assert_eq!(lp["token_logprobs"].as_array().unwrap().len(), n);
    assert!(lp["token_logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x.as_f64().unwrap() <= 0.0));
    let tops = lp["top_logprobs"].as_array().unwrap();
    assert!(tops
        .iter()
        .all(|t| t.as_object().unwrap().len() <= 2 && !t.as_object().unwrap().is_empty()));
    // Each entry by rank, most likely first, as OpenAI lists them; greedy takes the first.
    for (t, tok) in tops.iter().zip(lp["tokens"].as_array().unwrap()) {
        let t = t.as_object().unwrap();
        let vals: Vec<f64> = t.values().map(|x| x.as_f64().unwrap()).collect();
        assert!(vals.windows(2).all(|w| w[0] >= w[1]), "by rank: {t:?}");
        assert_eq!(
            Some(tok.as_str().unwrap()),
            t.keys().next().map(String::as_str)
        );
    }
    let off: Vec<u64> = lp["text_offset"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(off[0], 0);
    assert!(off.windows(2).all(|w| w[0] <= w[1]), "{off:?}");
    let joined: String = lp["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(joined, v["choices"][0]["text"].as_str().unwrap());
}

fn assert_error(code: u16, v: &Value, want: u16, param: Option<&str>) {
    assert_eq!(code, want, "{v}");
    let e = &v["error"];
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert!(e["type"].is_string(), "{v}");
    if let Some(p) = param {
        assert_eq!(e["param"], p, "{v}");
    }
}

#[test]
fn invalid_requests_are_4xx_naming_the_parameter() {
    let s = shared();
    let chat = |extra: Value| s.post("/v1/chat/completions", &chat_body("hi", extra));
    let (c, v) = chat(json!({"foo": 1}));
    assert_error(c, &v, 400, Some("foo"));
    assert_eq!(v["error"]["type"], "invalid_request_error");
    let (c, v) = chat(json!({"tools": [{"type": "function"}]}));
    assert_error(c, &v, 400, Some("tools"));
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not supported"));
    let (c, v) = chat(json!({"response_format": {"type": "json_object"}}));
    assert_error(c, &v, 400, Some("response_format"));
    let (c, v) = chat(json!({"temperature": "hot"}));
    assert_error(c, &v, 400, Some("temperature"));
    let (c, v) = chat(json!({"temperature": 3}));
    assert_error(c, &v, 400, Some("temperature"));
    let (c, v) = chat(json!({"max_tokens": 0}));
    assert_error(c, &v, 400, Some("max_tokens"));
    let (c, v) = chat(json!({"max_tokens": 100000}));
    assert_error(c, &v, 400, Some("max_tokens"));
    assert!(
        v["error"]["message"].as_str().unwrap().contains("512"),
        "{v}"
    );
    let (c, v) = chat(json!({"n": 17}));
    assert_error(c, &v, 400, Some("n"));
    let (c, v) = chat(json!({"logprobs": true, "top_logprobs": 21}));
    assert_error(c, &v, 400, Some("top_logprobs"));
    let (c, v) = chat(json!({"logit_bias": {"999999": 1}}));
    assert_error(c, &v, 400, Some("logit_bias"));
    let (c, v) = chat(json!({"stop": ["a", "b", "c", "d", "e"]}));
    assert_error(c, &v, 400, Some("stop"));
    let (c, v) = chat(json!({"model": "no-such-model"}));
    assert_error(c, &v, 404, Some("model"));
    assert_eq!(v["error"]["code"], "model_not_found");
    let (c, v) = s.post("/v1/chat/completions", &json!({"messages": []}));
    assert_error(c, &v, 400, Some("messages"));
    let (c, v) = s.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "robot", "content": "x"}]}),
    );
    assert_error(c, &v, 400, Some("messages[0].role"));
    let (c, v) = s.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": null}]}),
    );
    assert_error(c, &v, 400, Some("messages[0].content"));
    // Empty content is a message like any other (OpenAI and vLLM take it): the chat template
    // still gives a prompt.
    for empty in [json!(""), json!([])] {
        let (c, v) = s.post(
            "/v1/chat/completions",
            &json!({"messages": [{"role": "user", "content": empty}], "max_tokens": 2}),
        );
        assert_eq!(c, 200, "{empty}: {v}");
    }
    let (c, v) = s.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]}),
    );
    assert_error(c, &v, 400, Some("messages[0].content[0].type"));
    let (c, v) = s.post_raw("/v1/chat/completions", "{\"messages\": [");
    assert_error(c, &v, 400, None);
    let (c, v) = s.post("/v1/completions", &json!({"prompt": [1, 99999999]}));
    assert_error(c, &v, 400, Some("prompt"));
    let (c, v) = s.post("/v1/completions", &json!({"prompt": "x", "suffix": "y"}));
    assert_error(c, &v, 400, Some("suffix"));
    // The context is 512: a 512-token prompt has no room, a 511-token one generates one token.
    let (c, v) = s.post("/v1/completions", &json!({"prompt": vec![504; 512]}));
    assert_error(c, &v, 400, Some("prompt"));
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("512 tokens") && m.contains("context length is 512"),
        "{m}"
    );
    let (c, v) = s.post(
        "/v1/completions",
        &json!({"prompt": vec![504; 511], "temperature": 0, "ignore_eos": true}),
    );
    assert_eq!(c, 200, "{v}");
    assert_eq!(v["usage"]["completion_tokens"], 1);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    let (c, v) = s.post_oversized("/v1/completions", 5 << 20);
    assert_error(c, &v, 413, None);
    let (c, v) = s.get_json("/v1/nothing-here");
    assert_error(c, &v, 404, None);
    assert_eq!(s.get("/health").0, 200, "healthy after all of that");
}

#[test]
fn models_tokenize_health_ready() {
    let s = shared();
    let (c, v) = s.get_json("/v1/models");
    assert_eq!(c, 200);
    assert_eq!(v["object"], "list");
    let m = &v["data"][0];
    assert_eq!(
        (
            m["id"].as_str(),
            m["object"].as_str(),
            m["owned_by"].as_str()
        ),
        (Some(MODEL), Some("model"), Some("memra"))
    );
    assert_eq!(m["max_model_len"], 512);
    assert!(m["created"].as_u64().unwrap() > 1_600_000_000);
    let params = m["supported_parameters"].as_array().unwrap();
    for p in [
        "temperature",
        "logprobs",
        "stop",
        "n",
        "seed",
        "stream_options",
    ] {
        assert!(params.contains(&json!(p)), "{p}");
    }
    // Per endpoint: `echo` is completions', `max_completion_tokens` chat's.
    let by = &m["supported_parameters_by_endpoint"];
    let has = |e: &str, p: &str| by[e].as_array().unwrap().contains(&json!(p));
    assert!(has("/v1/completions", "echo") && !has("/v1/chat/completions", "echo"));
    assert!(
        has("/v1/chat/completions", "max_completion_tokens")
            && !has("/v1/completions", "max_completion_tokens")
    );
    assert_eq!(s.get_json(&format!("/v1/models/{MODEL}")).1["id"], MODEL);
    assert_eq!(s.get_json("/v1/models/nope").0, 404);

    let text = "Hello world, ça va? 東京";
    let (c, t) = s.post("/tokenize", &json!({"model": MODEL, "prompt": text}));
    assert_eq!(c, 200, "{t}");
    let toks = t["tokens"].as_array().unwrap();
    assert_eq!(t["count"].as_u64().unwrap() as usize, toks.len());
    assert!(toks.len() > 4);
    assert_eq!(t["max_model_len"], 512);
    let (c, d) = s.post("/detokenize", &json!({"tokens": toks}));
    assert_eq!(c, 200, "{d}");
    assert_eq!(d["prompt"], text);
    let (c, t) = s.post(
        "/tokenize",
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(c, 200, "{t}");
    let (_, d) = s.post("/detokenize", &json!({"tokens": t["tokens"]}));
    assert!(
        d["prompt"]
            .as_str()
            .unwrap()
            .contains("<|im_start|>user\nhi"),
        "{d}"
    );
    assert_eq!(s.post("/detokenize", &json!({"tokens": [-1]})).0, 400);
    assert_eq!(s.post("/tokenize", &json!({})).0, 400);

    assert_eq!(s.get("/health").0, 200);
    assert_eq!(s.get("/readyz").0, 200);
}

fn metric(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name_and_labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn metrics_move_after_a_request() {
    let s = shared();
    let before = s.get("/metrics").1;
    let (c, _) = s.post(
        "/v1/chat/completions",
        &chat_body("hi", json!({"max_tokens": 3, "ignore_eos": true})),
    );
    assert_eq!(c, 200);
    let (c, after) = s.get("/metrics");
    assert_eq!(c, 200);
    for name in [
        "memra_requests_total",
        "memra_prompt_tokens_total",
        "memra_completion_tokens_total",
        "memra_time_to_first_token_seconds_bucket",
        "memra_inter_token_latency_seconds_bucket",
        "memra_queue_depth",
        "memra_running_sequences",
        "memra_kv_blocks_used",
        "memra_kv_blocks_free",
        "memra_prefix_cache_hit_tokens_total",
    ] {
        assert!(after.contains(name), "{name} missing:\n{after}");
    }
    let ok = "memra_requests_total{code=\"200\",route=\"/v1/chat/completions\"}";
    assert!(metric(&after, ok) >= metric(&before, ok) + 1.0, "{after}");
    let ct = "memra_completion_tokens_total";
    assert!(metric(&after, ct) >= metric(&before, ct) + 3.0);
    let pt = "memra_prompt_tokens_total";
    assert!(metric(&after, pt) > metric(&before, pt));
    let ttft = "memra_time_to_first_token_seconds_count";
    assert!(metric(&after, ttft) >= metric(&before, ttft) + 1.0);
    assert!(metric(&after, "memra_kv_blocks_free") > 0.0);
}

#[test]
fn include_usage_sends_a_last_chunk_without_choices() {
    let s = shared();
    let body = chat_body(
        "hi",
        json!({"max_tokens": 4, "stream": true, "stream_options": {"include_usage": true}}),
    );
    let st = s.stream("/v1/chat/completions", &body);
    let (last, rest) = st.chunks.split_last().unwrap();
    assert_eq!(last["choices"], json!([]));
    let u = &last["usage"];
    assert_eq!(
        u["total_tokens"].as_u64().unwrap(),
        u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()
    );
    assert!(rest
        .iter()
        .all(|c| c["usage"].is_null() && c.as_object().unwrap().contains_key("usage")));
    // Without include_usage there is no usage key at all.
    let st = s.stream(
        "/v1/chat/completions",
        &chat_body("hi", json!({"max_tokens": 2, "stream": true})),
    );
    assert!(st
        .chunks
        .iter()
        .all(|c| c.get("usage").is_none() && !c["choices"].as_array().unwrap().is_empty()));
}

/// The official `openai` Python package against the server (tests/openai_client.py).
#[test]
fn openai_python_client() {
    let s = shared();
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&py)
        .args(["-c", "import openai"])
        .output()
        .unwrap();
    assert!(
        probe.status.success(),
        "the `openai` Python package is missing: `{py} -m pip install openai` ({})",
        String::from_utf8_lossy(&probe.stderr)
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openai_client.py");
    let out = std::process::Command::new(&py)
        .args([script, "--base-url", &s.url("/v1"), "--model", MODEL])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openai_client.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all openai client checks passed"));
}

/// The `speculative` request extension: same text and logprobs as plain decode, drafted/accepted
/// reported in `usage.speculative`, speculation counters in /metrics, bad values a 400.
#[test]
fn speculative_extension_changes_nothing_but_reports_counts() {
    let s = shared();
    let prompt = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return";
    let base = json!({"prompt": prompt, "max_tokens": 16, "temperature": 0.7, "seed": 3,
                      "logprobs": 2, "ignore_eos": true});
    let (c, plain) = s.post("/v1/completions", &base);
    assert_eq!(c, 200, "{plain}");
    for spec in [
        json!({"method": "ngram", "k": 4}),
        json!({"method": "layerskip:15", "k": 2}),
    ] {
        let mut body = base.clone();
        body["speculative"] = spec.clone();
        let (c, v) = s.post("/v1/completions", &body);
        assert_eq!(c, 200, "{v}");
        assert_eq!(
            v["choices"][0]["text"], plain["choices"][0]["text"],
            "{spec}"
        );
        assert_eq!(
            v["choices"][0]["logprobs"], plain["choices"][0]["logprobs"],
            "{spec}"
        );
        let d = v["usage"]["speculative"]["drafted"].as_u64().unwrap_or(0);
        let a = v["usage"]["speculative"]["accepted"].as_u64().unwrap_or(0);
        assert!(d > 0 && a <= d, "{spec}: {}", v["usage"]);
    }
    // A speculating request that never drafts (one token: nothing to verify) still reports
    // its counts, as zeros.
    let mut one = base.clone();
    one["max_tokens"] = json!(1);
    one["speculative"] = json!({"method": "ngram", "k": 4});
    let (c, v) = s.post("/v1/completions", &one);
    assert_eq!(c, 200, "{v}");
    assert_eq!(
        v["usage"]["speculative"],
        json!({"drafted": 0, "accepted": 0}),
        "{}",
        v["usage"]
    );
    let mut off = base.clone();
    off["speculative"] = json!("off");
    let (c, v) = s.post("/v1/completions", &off);
    assert_eq!(c, 200);
    assert!(v["usage"].get("speculative").is_none());
    for bad in [
        json!({"method": "medusa"}),
        json!({"method": "ngram", "k": 0}),
        json!(7),
        json!({"method": "ngram", "x": 1}),
        json!({"method": "layerskip:99"}),
    ] {
        let mut body = base.clone();
        body["speculative"] = bad.clone();
        let (c, v) = s.post("/v1/completions", &body);
        assert_eq!(c, 400, "{bad}: {v}");
        assert_eq!(v["error"]["param"], "speculative");
    }
    let (_, m) = s.get("/metrics");
    assert!(
        m.contains("memra_spec_drafted_tokens_total")
            && m.contains("memra_spec_accepted_by_position_total")
    );
}

/// Wrong methods get 405 in the OpenAI error shape; a missing required field is named.
#[test]
fn method_not_allowed_and_missing_fields_are_named() {
    let s = shared();
    let (c, body) = s.get("/v1/chat/completions");
    assert_eq!(c, 405);
    let v: Value = serde_json::from_str(&body).expect("a JSON error body");
    assert_eq!(v["error"]["code"], "method_not_allowed");
    let (c, v) = s.post("/v1/chat/completions", &json!({"model": MODEL}));
    assert_eq!(c, 400);
    assert_eq!(v["error"]["param"], "messages", "{v}");
    let (c, v) = s.post("/v1/completions", &json!({"max_tokens": 2}));
    assert_eq!(c, 400);
    assert_eq!(v["error"]["param"], "prompt", "{v}");
    let (c, v) = s.post("/v1/completions", &json!({"prompt": "a", "stop": 5}));
    assert_eq!(c, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("string or a list of strings"),
        "{v}"
    );
    let (c, v) = s.post("/v1/completions", &json!({"prompt": "a", "top_p": -1}));
    assert_eq!(c, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("(0, 1]"),
        "{v}"
    );
}

/// A POST body must be JSON by its headers: another Content-Type, none, or a Content-Encoding
/// is a 415 in the OpenAI error shape; `application/json` with parameters is fine.
#[test]
fn non_json_bodies_are_415() {
    let s = shared();
    let body = r#"{"prompt": "a", "max_tokens": 1}"#;
    let send = |headers: &[(&str, &str)]| {
        let mut r = s.agent.post(&s.url("/v1/completions"));
        for (k, v) in headers {
            r = r.set(k, v);
        }
        let (code, r) = match r.send_string(body) {
            Ok(r) => (r.status(), r),
            Err(ureq::Error::Status(c, r)) => (c, r),
            Err(e) => panic!("POST: {e}"),
        };
        let close = r.header("connection") == Some("close");
        (code, r.into_json::<Value>().unwrap(), close)
    };
    const JSON: (&str, &str) = ("content-type", "application/json");
    for headers in [
        &[("content-type", "text/plain")][..],
        &[("content-type", "application/x-www-form-urlencoded")][..],
        &[][..],
        &[JSON, ("content-encoding", "gzip")][..],
        &[JSON, ("content-encoding", "identity, gzip")][..],
    ] {
        let (c, v, close) = send(headers);
        assert_eq!(c, 415, "{headers:?}: {v}");
        assert_eq!(v["error"]["code"], "unsupported_media_type", "{v}");
        assert!(close, "the body is unread: the connection closes");
    }
    let mixed_case = ("content-type", "Application/JSON; charset=utf-8");
    let (c, v, _) = send(&[mixed_case, ("content-encoding", "identity")]);
    assert_eq!(c, 200, "{v}");
}
