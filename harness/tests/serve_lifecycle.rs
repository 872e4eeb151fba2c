//! `memra serve` under stress and through its life: disconnects, a full queue, many streams,
//! SIGTERM, API keys, the resolved config. Each test starts its own server (the real SmolLM2
//! model on the CPU backend) because it watches the engine's gauges or stops the process.

mod serve_util;

use serde_json::{json, Value};
use serve_util::*;
use std::io::BufRead;
use std::time::{Duration, Instant};

/// A client that disconnects, mid-stream or while waiting for a JSON answer, has its sequence
/// cancelled: the engine's running count and KV blocks return to idle, and the next request is
/// served normally.
#[test]
fn disconnects_cancel_and_free_blocks() {
    let s = Server::start(&[]);
    let long = chat_body(
        "Tell me a long story.",
        json!({"max_tokens": 1000, "ignore_eos": true, "stream": true}),
    );
    let resp = s
        .agent
        .post(&s.url("/v1/chat/completions"))
        .send_json(long.clone())
        .unwrap();
    let mut lines = std::io::BufReader::new(resp.into_reader()).lines();
    let mut seen = 0;
    while seen < 4 {
        if lines.next().unwrap().unwrap().starts_with("data: ") {
            seen += 1;
        }
    }
    assert_eq!(s.gauge("memra_running_sequences"), 1.0);
    drop(lines);
    s.wait_idle(Duration::from_secs(5));

    // Non-streaming: the client gives up after half a second.
    let mut body = long.clone();
    merge(&mut body, json!({"stream": false}));
    let impatient = ureq::AgentBuilder::new()
        .timeout(Duration::from_millis(800))
        .build();
    let r = impatient
        .post(&s.url("/v1/chat/completions"))
        .send_json(body);
    assert!(r.is_err(), "1000 tokens cannot come back in 0.8 s");
    s.wait_idle(Duration::from_secs(5));

    let (c, v) = s.post(
        "/v1/chat/completions",
        &chat_body(
            "What is the capital of France?",
            json!({"temperature": 0, "max_tokens": 20}),
        ),
    );
    assert_eq!(c, 200, "{v}");
    assert!(content(&v, 0).contains("Paris"));
}

/// With one running slot and one queue place, further requests get 429 with Retry-After; a
/// queued stream gets keep-alive comments while it waits.
#[test]
fn full_queue_answers_429_and_waiting_streams_keep_alive() {
    let s = Server::start(&[
        "--max-running",
        "1",
        "--queue-capacity",
        "1",
        "--keepalive-secs",
        "1",
    ]);
    let long = chat_body(
        "Tell me a long story.",
        json!({"max_tokens": 400, "ignore_eos": true, "stream": true}),
    );
    let a = s
        .agent
        .post(&s.url("/v1/chat/completions"))
        .send_json(long.clone())
        .unwrap();
    let mut a = std::io::BufReader::new(a.into_reader()).lines();
    // Wait until A generates, so it is running rather than queued.
    let mut seen = 0;
    while seen < 3 {
        if a.next().unwrap().unwrap().starts_with("data: ") {
            seen += 1;
        }
    }
    let b = s
        .agent
        .post(&s.url("/v1/chat/completions"))
        .send_json(long.clone())
        .unwrap();
    assert_eq!(b.status(), 200);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        match s
            .agent
            .post(&s.url("/v1/chat/completions"))
            .send_json(long.clone())
        {
            Ok(r) => statuses.push((r.status(), None, Value::Null)),
            Err(ureq::Error::Status(c, r)) => {
                let ra = r.header("retry-after").map(str::to_string);
                statuses.push((c, ra, r.into_json().unwrap()))
            }
            Err(e) => panic!("{e}"),
        }
    }
    for (c, ra, v) in &statuses {
        assert_eq!(*c, 429, "{statuses:?}");
        assert!(
            ra.as_deref()
                .and_then(|r| r.parse::<u64>().ok())
                .is_some_and(|r| r >= 1),
            "{statuses:?}"
        );
        assert_eq!(v["error"]["code"], "rate_limit_exceeded");
    }
    // B waits behind A: its role chunk, then keep-alive comments.
    let mut b = std::io::BufReader::new(b.into_reader()).lines();
    let t0 = Instant::now();
    let mut keepalive = false;
    while t0.elapsed() < Duration::from_secs(6) {
        let l = b.next().unwrap().unwrap();
        if l == ": keep-alive" {
            keepalive = true;
            break;
        }
        assert!(
            l.is_empty() || l.contains("\"role\":\"assistant\""),
            "B should still wait: {l}"
        );
    }
    assert!(keepalive, "no keep-alive comment while queued");
    drop(a);
    drop(b);
    s.wait_idle(Duration::from_secs(5));
    let (c, v) = s.post(
        "/v1/chat/completions",
        &chat_body("hi", json!({"max_tokens": 2})),
    );
    assert_eq!(c, 200, "{v}");
}

/// SIGTERM: readiness turns 503, new requests get 503 with Retry-After, the stream in flight
/// finishes, and the process exits 0.
#[test]
fn sigterm_drains_then_exits_zero() {
    let mut s = Server::start(&["--drain-secs", "60"]);
    let body = chat_body(
        "Count to twenty.",
        json!({"max_tokens": 150, "ignore_eos": true, "stream": true}),
    );
    let r = s
        .agent
        .post(&s.url("/v1/chat/completions"))
        .send_json(body)
        .unwrap();
    let mut lines = std::io::BufReader::new(r.into_reader()).lines();
    assert!(lines.next().unwrap().unwrap().starts_with("data: "));
    s.signal("TERM");
    let t0 = Instant::now();
    while s.get("/readyz").0 != 503 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "readyz never went 503"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    match s
        .agent
        .post(&s.url("/v1/chat/completions"))
        .send_json(chat_body("hi", json!({})))
    {
        Err(ureq::Error::Status(503, r)) => assert!(r.header("retry-after").is_some()),
        other => panic!("expected 503, got {other:?}"),
    }
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert_eq!(
        rest.iter()
            .rev()
            .find(|l| !l.is_empty())
            .map(String::as_str),
        Some("data: [DONE]")
    );
    let finish = rest
        .iter()
        .filter(|l| l.contains("\"finish_reason\":\"length\""))
        .count();
    assert_eq!(finish, 1, "the in-flight stream ran to its end");
    let status = s.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn print_config_shows_the_resolved_config_without_keys() {
    let dir = std::env::temp_dir().join(format!("memra-serve-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let toml = dir.join("memra.toml");
    std::fs::write(
        &toml,
        "kv_cache_mib = 32\n[serve]\nport = 9001\nqueue_capacity = 7\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memra"))
        .args([
            "serve",
            "--print-config",
            "--config",
            toml.to_str().unwrap(),
        ])
        .args(["--port", "9002", "--api-key", "sekrit-key"])
        .env_remove("MEMRA_API_KEY")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    assert_eq!(v["kv_cache_mib"].as_integer(), Some(32), "file: {text}");
    let serve = &v["serve"];
    assert_eq!(serve["port"].as_integer(), Some(9002), "flag over file");
    assert_eq!(serve["queue_capacity"].as_integer(), Some(7));
    assert_eq!(serve["max_running"].as_integer(), Some(64), "default");
    assert_eq!(
        serve["models"].as_array().unwrap()[0].as_str(),
        Some("smollm2-135m-instruct")
    );
    assert!(!text.contains("sekrit"), "the key is redacted: {text}");
    assert!(
        text.contains("# unset (none): cuda_home, serve.keyring, serve.draft_model")
            || text.contains("# unset (none): serve.keyring, serve.draft_model"),
        "unset optional keys are named: {text}"
    );
    assert!(text.contains("# backend \"auto\" resolves to "), "{text}");
    let models_line = |t: &str| {
        t.lines()
            .find(|l| l.trim_start().starts_with("models = "))
            .unwrap_or_default()
            .to_string()
    };
    assert!(models_line(&text).ends_with("# built-in default"), "{text}");
    // --model over the file's models: the source says flag.
    std::fs::write(&toml, "[serve]\nmodels = [\"a=gemma-3-270m\"]\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memra"))
        .args([
            "serve",
            "--print-config",
            "--config",
            toml.to_str().unwrap(),
        ])
        .args(["--model", "smol=smollm2-135m-instruct"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = models_line(&text);
    assert!(line.contains("smol=smollm2-135m-instruct"), "{text}");
    assert!(line.ends_with("# flag"), "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With a key configured the API routes need it; health, readiness and metrics do not.
#[test]
fn api_key_guards_the_api_routes() {
    let s = Server::start(&["--api-key", "k3y"]);
    let body = chat_body("hi", json!({"max_tokens": 2}));
    let (c, v) = s.post("/v1/chat/completions", &body);
    assert_eq!(c, 401, "{v}");
    assert_eq!(v["error"]["code"], "invalid_api_key");
    let wrong = s
        .agent
        .get(&s.url("/v1/models"))
        .set("authorization", "Bearer nope")
        .call();
    assert!(matches!(wrong, Err(ureq::Error::Status(401, _))));
    let r = s
        .agent
        .post(&s.url("/v1/chat/completions"))
        .set("authorization", "Bearer k3y")
        .send_json(body)
        .unwrap();
    assert_eq!(r.status(), 200);
    for p in ["/health", "/readyz", "/metrics"] {
        assert_eq!(s.get(p).0, 200, "{p}");
    }
    assert!(
        !s.log_text().contains("k3y"),
        "the key never reaches the log"
    );
}

/// 32 simultaneous streams, every fourth dropped after a few chunks: the others all finish
/// with a finish_reason and [DONE], and the engine returns to idle with no blocks held.
#[test]
fn thirty_two_streams_some_cancelled() {
    let s = Server::start(&[]);
    let s = &s;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..32)
            .map(|i| {
                scope.spawn(move || {
                    let body = chat_body(
                        &format!("Tell me fact number {i} about the sea."),
                        json!({"max_tokens": 16 + i % 8, "ignore_eos": true, "stream": true,
                               "temperature": 0.7, "seed": i}),
                    );
                    let r = s
                        .agent
                        .post(&s.url("/v1/chat/completions"))
                        .send_json(body)
                        .unwrap();
                    let mut lines = std::io::BufReader::new(r.into_reader()).lines();
                    let mut data = Vec::new();
                    for l in lines.by_ref() {
                        let l = l.unwrap();
                        if let Some(d) = l.strip_prefix("data: ") {
                            data.push(d.to_string());
                            if i % 4 == 3 && data.len() == 3 {
                                return None; // hang up mid-stream
                            }
                        }
                    }
                    Some((i, data))
                })
            })
            .collect();
        for h in handles {
            let Some((i, data)) = h.join().unwrap() else {
                continue;
            };
            assert_eq!(
                data.last().map(String::as_str),
                Some("[DONE]"),
                "stream {i}"
            );
            let finished: Vec<Value> = data[..data.len() - 1]
                .iter()
                .map(|d| serde_json::from_str::<Value>(d).unwrap())
                .filter(|c| !c["choices"][0]["finish_reason"].is_null())
                .collect();
            assert_eq!(finished.len(), 1, "stream {i}");
            assert_eq!(
                finished[0]["choices"][0]["finish_reason"], "length",
                "stream {i}"
            );
        }
    });
    s.wait_idle(Duration::from_secs(10));
    assert_eq!(s.get("/health").0, 200);
}

/// A keyring: keys stored as sha256, each mapped to a tenant with a concurrency cap. 401 without
/// a valid key, 403 for a disabled key, 429 (with Retry-After) over the tenant's cap while a
/// stream holds the slot, and the slot comes back when the stream ends.
#[test]
#[allow(clippy::result_large_err)] // ureq::Error is large; this is a test helper closure
fn keyring_tenants_caps_and_disabled_keys() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("keys.toml");
    let h = |k: &str| hex::encode(sha2::Sha256::digest(k.as_bytes()));
    std::fs::write(
        &ring,
        format!(
            "[[key]]\nsha256 = \"{}\"\ntenant = \"acme\"\nmax_concurrent = 1\n\n[[key]]\nsha256 = \"{}\"\ntenant = \"gone\"\ndisabled = true\n",
            h("alpha-key"),
            h("beta-key")
        ),
    )
    .unwrap();
    let s = Server::start(&["--keyring", ring.to_str().unwrap()]);
    let post = |key: &str, body: Value| {
        s.agent
            .post(&s.url("/v1/completions"))
            .set("authorization", &format!("Bearer {key}"))
            .send_json(body)
    };
    let short = json!({"prompt": "Hello", "max_tokens": 2});
    // A refused request's body is never read, so the server closes that connection and says so
    // (a keep-alive client must not send its next request into it).
    match post("nope", short.clone()) {
        Err(ureq::Error::Status(401, r)) => assert_eq!(r.header("connection"), Some("close")),
        other => panic!("expected 401, got {other:?}"),
    }
    match post("beta-key", short.clone()) {
        Err(ureq::Error::Status(403, r)) => {
            assert_eq!(r.header("connection"), Some("close"));
            let v: Value = r.into_json().unwrap();
            assert_eq!(v["error"]["code"], "key_disabled");
        }
        other => panic!("expected 403, got {other:?}"),
    }
    // A long stream holds acme's only slot; a second request is refused until it ends.
    let long = post(
        "alpha-key",
        json!({"prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": true, "stream": true}),
    )
    .unwrap();
    match post("alpha-key", short.clone()) {
        Err(ureq::Error::Status(429, r)) => assert!(r.header("retry-after").is_some()),
        other => panic!("expected 429, got {other:?}"),
    }
    let text = long.into_string().unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"));
    assert_eq!(
        post("alpha-key", short).unwrap().status(),
        200,
        "the slot is free again"
    );
    for p in ["/health", "/readyz", "/metrics"] {
        assert_eq!(s.get(p).0, 200, "{p} needs no key");
    }
    assert!(
        !s.log_text().contains("alpha-key"),
        "keys never reach the log"
    );
}

/// Two models in one process under aliases: both listed, each answers under its own id, an
/// unknown id is a 404 naming the model, and a request naming none is a 400 listing them.
#[test]
fn several_models_under_aliases() {
    let second = format!("second={}", model_path().display());
    let s = Server::start(&["--model", &second]);
    let (c, v) = s.get_json("/v1/models");
    assert_eq!(c, 200);
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&MODEL) && ids.contains(&"second"), "{ids:?}");
    let ask = |model: &str| {
        s.post(
            "/v1/completions",
            &json!({"model": model, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}),
        )
    };
    let (c1, a) = ask(MODEL);
    let (c2, b) = ask("second");
    assert_eq!((c1, c2), (200, 200), "{a} {b}");
    assert_eq!(b["model"], "second");
    assert_eq!(
        a["choices"][0]["text"], b["choices"][0]["text"],
        "same weights, same greedy text"
    );
    let (c, e) = ask("third");
    assert_eq!(c, 404);
    assert_eq!(e["error"]["code"], "model_not_found");
    // With two models a request must say which: no silent choice of the first.
    let (c, e) = s.post(
        "/v1/completions",
        &json!({"prompt": "The capital of France is", "max_tokens": 4}),
    );
    assert_eq!(c, 400, "{e}");
    assert_eq!(e["error"]["param"], "model");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("second"),
        "{e}"
    );
}

/// Requests still running when the drain deadline passes end with a 503 in the OpenAI error
/// shape (a stream: an error event, then [DONE]), not a cut connection; then the server exits 0.
#[test]
#[allow(clippy::result_large_err)] // ureq::Error is large; the closure only carries it back
fn drain_deadline_ends_requests_with_503() {
    let mut s = Server::start(&["--drain-secs", "1"]);
    let long = |stream: bool| {
        chat_body(
            "Count to ten thousand.",
            json!({"max_tokens": 1000, "ignore_eos": true, "stream": stream}),
        )
    };
    let r = s
        .agent
        .post(&s.url("/v1/chat/completions"))
        .send_json(long(true))
        .unwrap();
    let mut lines = std::io::BufReader::new(r.into_reader()).lines();
    assert!(lines.next().unwrap().unwrap().starts_with("data: "));
    std::thread::scope(|sc| {
        let agent = s.agent.clone();
        let url = s.url("/v1/chat/completions");
        let body = long(false);
        let plain = sc.spawn(move || agent.post(&url).send_json(body));
        std::thread::sleep(Duration::from_millis(300));
        s.signal("TERM");
        let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
        assert!(
            rest.iter().any(|l| l.contains("\"error\"")),
            "an error event: {rest:?}"
        );
        assert_eq!(
            rest.iter()
                .rev()
                .find(|l| !l.is_empty())
                .map(String::as_str),
            Some("data: [DONE]")
        );
        match plain.join().unwrap() {
            Err(ureq::Error::Status(503, r)) => {
                let v: Value = r.into_json().unwrap();
                assert_eq!(v["error"]["type"], "service_unavailable", "{v}");
            }
            other => panic!("expected 503, got {other:?}"),
        }
    });
    assert!(s.wait_exit(Duration::from_secs(10)).success());
}

/// `--draft-model` with a model other than the target (sharing its tokenizer): greedy and seeded
/// requests drafting with it give plain decode's text and logprobs, and some drafts are rejected.
#[test]
fn draft_model_speculation_matches_plain_decode_with_a_different_draft() {
    // A genuinely different draft model with the same tokenizer: SmolLM2 re-quantized to Q8_0
    // (the target is its Q4_1 file), so some drafts are wrong and the draft model's KV is
    // rolled back; seeded sampling rejects more.
    let dir = tempfile::tempdir().unwrap();
    let draft = dir.path().join("smol-q8_0.gguf");
    let q = std::process::Command::new(env!("CARGO_BIN_EXE_memra"))
        .arg("quantize")
        .arg(model_path())
        .arg(&draft)
        .output()
        .unwrap();
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let s = Server::start(&["--draft-model", draft.to_str().unwrap()]);
    let mut drafted = 0;
    let mut rejected = 0;
    for sampling in [
        json!({"temperature": 0}),
        json!({"temperature": 0.9, "seed": 4}),
    ] {
        let mut base = json!({"prompt": "The three largest cities in Europe are", "max_tokens": 24,
                              "ignore_eos": true, "logprobs": 1, "speculative": "off"});
        merge(&mut base, sampling.clone());
        let (c, plain) = s.post("/v1/completions", &base);
        assert_eq!(c, 200, "{plain}");
        let mut body = base.clone();
        body["speculative"] = json!({"method": "draft", "k": 4});
        let (c, v) = s.post("/v1/completions", &body);
        assert_eq!(c, 200, "{v}");
        assert_eq!(
            v["choices"][0]["text"], plain["choices"][0]["text"],
            "{sampling}"
        );
        assert_eq!(
            v["choices"][0]["logprobs"], plain["choices"][0]["logprobs"],
            "{sampling}"
        );
        let d = v["usage"]["speculative"]["drafted"].as_u64().unwrap();
        let a = v["usage"]["speculative"]["accepted"].as_u64().unwrap();
        assert!(a <= d, "{sampling}: {}", v["usage"]);
        drafted += d;
        rejected += d - a;
    }
    assert!(
        drafted > 0 && rejected > 0,
        "drafted {drafted}, rejected {rejected}"
    );
}

/// `--draft-model`: requests with `speculative.method = "draft"` speculate with it and produce
/// the same text as plain decode; without a draft model that method is a 400.
#[test]
fn draft_model_speculation_matches_plain_decode() {
    let path = model_path();
    let s = Server::start(&["--draft-model", path.to_str().unwrap()]);
    let base = json!({"prompt": "The capital of France is", "max_tokens": 12, "temperature": 0, "ignore_eos": true});
    let (c, plain) = s.post("/v1/completions", &base);
    assert_eq!(c, 200, "{plain}");
    let mut body = base.clone();
    body["speculative"] = json!({"method": "draft", "k": 3});
    let (c, v) = s.post("/v1/completions", &body);
    assert_eq!(c, 200, "{v}");
    assert_eq!(v["choices"][0]["text"], plain["choices"][0]["text"]);
    let d = v["usage"]["speculative"]["drafted"].as_u64().unwrap();
    assert_eq!(
        v["usage"]["speculative"]["accepted"].as_u64().unwrap(),
        d,
        "a model drafting for itself greedily is always right"
    );
    drop(s);
    let s = Server::start(&[]);
    let (c, v) = s.post("/v1/completions", &body);
    assert_eq!(c, 400, "{v}");
    assert_eq!(v["error"]["param"], "speculative");
}

/// A client that announces a body and stops sending gets 408 in the OpenAI error shape after
/// `serve.body_timeout_secs` of silence (not a connection held open forever); the server keeps
/// answering others.
#[test]
fn stalled_body_gets_408() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("memra.toml");
    std::fs::write(&cfg, "[serve]\nbody_timeout_secs = 1\n").unwrap();
    let s = Server::start(&["--config", cfg.to_str().unwrap()]);
    let addr = s.base.strip_prefix("http://").unwrap().to_string();
    let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        tcp,
        "POST /v1/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: 1000\r\nconnection: close\r\n\r\n{{\"prompt\":"
    )
    .unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 4096];
    let mut answer = Vec::new();
    while !String::from_utf8_lossy(&answer).contains("}}") {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    assert_eq!(s.get("/health").0, 200);
}
