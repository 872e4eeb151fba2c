//! Speculative decoding through `memra serve` (the built binary, real SmolLM2, CPU): the server's
//! default (`serve.speculative`, n-gram with k = 4 unless configured) applies to requests without
//! the `speculative` extension, and with streaming, stop strings, n > 1 and logprobs the bytes
//! equal plain decode (`"speculative": "off"`). /metrics' per-position counters add up.

mod serve_util;

use serde_json::{json, Value};
use serve_util::*;

/// A prompt that repeats itself, so the n-gram drafter finds matches and drafts.
const PROMPT: &str = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n\
                      def add(a, b):\n    return";

fn with(base: &Value, extra: Value) -> Value {
    let mut b = base.clone();
    merge(&mut b, extra);
    b
}

fn stream_text(s: &Server, body: &Value, choices: usize) -> Vec<String> {
    let st = s.stream("/v1/completions", body);
    assert_eq!(st.done_count, 1);
    let mut out = vec![String::new(); choices];
    for c in &st.chunks {
        for ch in c["choices"].as_array().into_iter().flatten() {
            let i = ch["index"].as_u64().unwrap() as usize;
            out[i] += ch["text"].as_str().unwrap_or("");
        }
    }
    out
}

/// Requests without the extension speculate by the server's default and say so in
/// `usage.speculative`; their text, logprobs and finish reasons equal `"off"`, for greedy and
/// seeded sampling, streamed or not, with a stop string, and for n = 2.
#[test]
fn default_speculation_equals_plain_decode() {
    let s = shared();
    let cases = [
        json!({"temperature": 0, "logprobs": 2}),
        json!({"temperature": 0.8, "seed": 11, "top_p": 0.9, "logprobs": 1}),
        json!({"temperature": 0.7, "seed": 5, "n": 2}),
        json!({"temperature": 0, "stop": ["a - b"]}),
    ];
    let mut drafted_total = 0;
    for case in cases {
        let base = with(
            &json!({"model": MODEL, "prompt": PROMPT, "max_tokens": 24, "ignore_eos": true}),
            case.clone(),
        );
        let n = base["n"].as_u64().unwrap_or(1) as usize;
        let (c, plain) = s.post(
            "/v1/completions",
            &with(&base, json!({"speculative": "off"})),
        );
        assert_eq!(c, 200, "{plain}");
        assert!(plain["usage"].get("speculative").is_none(), "{case}");
        let (c, fast) = s.post("/v1/completions", &base);
        assert_eq!(c, 200, "{fast}");
        for i in 0..n {
            for key in ["text", "logprobs", "finish_reason"] {
                assert_eq!(
                    fast["choices"][i][key], plain["choices"][i][key],
                    "{case}: choice {i} {key}"
                );
            }
        }
        let spec = &fast["usage"]["speculative"];
        let (d, a) = (spec["drafted"].as_u64(), spec["accepted"].as_u64());
        assert!(d.is_some() && a <= d, "{case}: {}", fast["usage"]);
        drafted_total += d.unwrap();
        let streamed = stream_text(s, &with(&base, json!({"stream": true})), n);
        for (i, t) in streamed.iter().enumerate() {
            assert_eq!(t, plain["choices"][i]["text"].as_str().unwrap(), "{case}");
        }
    }
    assert!(
        drafted_total > 0,
        "the default drafted nothing on a repetitive prompt"
    );
}

/// The value of every sample of metric `name`, by its `position` label.
fn by_position(text: &str, name: &str) -> Vec<(usize, f64)> {
    let mut v: Vec<(usize, f64)> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| {
            let pos = l
                .split("position=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse()
                .ok()?;
            Some((pos, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v
}

/// After speculating requests, /metrics' per-position counters agree with the totals: drafts
/// summed over positions = drafted tokens, acceptances summed = accepted tokens, and at every
/// position acceptances ≤ drafts, with drafts falling (or flat) as the position grows.
#[test]
fn per_position_acceptance_adds_up() {
    let s = shared();
    let body = json!({"model": MODEL, "prompt": PROMPT, "max_tokens": 32, "temperature": 0,
                      "speculative": {"method": "ngram", "k": 6}});
    let (c, v) = s.post("/v1/completions", &body);
    assert_eq!(c, 200, "{v}");
    assert!(v["usage"]["speculative"]["drafted"].as_u64().unwrap() > 0);
    let (_, m) = s.get("/metrics");
    let drafted = by_position(&m, "memra_spec_drafted_by_position_total");
    let accepted = by_position(&m, "memra_spec_accepted_by_position_total");
    assert!(
        !drafted.is_empty() && drafted.len() == accepted.len(),
        "{m}"
    );
    let total = |name: &str| -> f64 {
        m.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let sum = |v: &[(usize, f64)]| v.iter().map(|x| x.1).sum::<f64>();
    assert_eq!(sum(&drafted), total("memra_spec_drafted_tokens_total"));
    assert_eq!(sum(&accepted), total("memra_spec_accepted_tokens_total"));
    assert!(drafted[0].1 > 0.0);
    for (j, (&(pd, d), &(pa, a))) in drafted.iter().zip(&accepted).enumerate() {
        assert_eq!((pd, pa), (j, j));
        assert!(a <= d, "position {j}: {a} accepted of {d}");
        if j > 0 {
            assert!(
                d <= drafted[j - 1].1,
                "position {j}: {d} drafts after {}",
                drafted[j - 1].1
            );
        }
    }
}
