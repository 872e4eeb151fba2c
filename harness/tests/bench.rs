//! `memra bench` end to end through the built binary on the CPU backend with the tiny synthetic
//! model: every scenario runs with tiny parameters and writes rows with sane values, and cells
//! that cannot run as asked are refused. Every command runs in a temporary directory and writes
//! its rows with --out, so nothing lands in the repository. `--compare`: tests/bench_compare.rs.

mod bench_util;

use bench_util::{check_common, f, read_rows, Bench, MODEL};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn decode_and_ttft_rows() {
    let b = Bench::new();
    let rows = b.rows(
        "d.jsonl",
        &[
            "decode",
            "--batch",
            "1,2",
            "--depth",
            "16",
            "--new-tokens",
            "8",
            "--reps",
            "2",
        ],
    );
    assert_eq!(rows.len(), 2);
    for (r, batch) in rows.iter().zip([1, 2]) {
        check_common(r, "decode", 2);
        assert_eq!(r["unit"], "tok/s");
        assert_eq!(r["params"]["batch"], batch);
        assert!(f(r, "gbps") > 0.0 && f(r, "bw_fraction") > 0.0);
        assert!(r.get("extra").is_none(), "decode rows carry no extra: {r}");
    }
    let rows = b.rows("t.jsonl", &["ttft", "--prompt-len", "16,64", "--reps", "2"]);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        check_common(r, "ttft", 2);
        assert_eq!(r["unit"], "ms");
    }
    // Params are written with sorted keys, as the committed rows are (their text is a cell's
    // key for --compare and the boards).
    let text = std::fs::read_to_string(b.path("t.jsonl")).unwrap();
    assert!(
        text.contains(r#""params":{"prefill_chunk":512,"prompt_len":16}"#),
        "{text}"
    );
}

/// Checks the three rows (throughput, TTFT, inter-token latency) of one serve level.
fn check_serve_level(rows: &[Value], requests: u64, new_tokens: u64, reps: u64) {
    assert_eq!(rows.len(), 3);
    let metrics: Vec<&str> = rows
        .iter()
        .map(|r| r["params"]["metric"].as_str().unwrap())
        .collect();
    assert_eq!(metrics, ["throughput", "ttft", "itl"]);
    for r in rows {
        let e = &r["extra"];
        assert_eq!(e["errors"], 0, "{r}");
        assert_eq!(e["requests"].as_u64(), Some(requests * reps), "{r}");
        // The server's default speculation, recorded on every row.
        assert_eq!(e["speculative"], "ngram k=4", "{r}");
    }
    let (tput, ttft, itl) = (&rows[0], &rows[1], &rows[2]);
    check_common(tput, "serve", reps);
    assert_eq!(tput["unit"], "tok/s");
    assert_eq!(
        tput["extra"]["output_tokens"].as_u64(),
        Some(requests * reps * new_tokens)
    );
    check_common(ttft, "serve", requests * reps);
    assert_eq!(ttft["unit"], "ms");
    for r in [ttft, itl] {
        let e = &r["extra"];
        let (p50, p90, p99) = (f(e, "p50"), f(e, "p90"), f(e, "p99"));
        assert!(p50 > 0.0 && p50 <= p90 && p90 <= p99, "{r}");
        assert!(p99 <= f(r, "max") && f(r, "min") <= p50, "{r}");
        assert!(
            (p50 - f(r, "median")).abs() < 1e-9,
            "p50 is the median: {r}"
        );
    }
    assert_eq!(itl["unit"], "ms");
    let e = &itl["extra"];
    assert_eq!(
        e["tokens"].as_u64(),
        Some(requests * reps * new_tokens),
        "{itl}"
    );
    // A chunk per token at most; every request sends at least one.
    let chunks = e["chunks"].as_u64().unwrap();
    assert!(chunks <= requests * reps * new_tokens && chunks >= requests * reps);
    assert!(f(e, "tpot_p50") > 0.0);
}

#[test]
fn serve_closed_and_open_loop() {
    let b = Bench::new();
    let rows = b.rows(
        "s.jsonl",
        &[
            "serve",
            "--concurrency",
            "1,3",
            "--rate",
            "40",
            "--requests",
            "6",
            "--input-len",
            "24",
            "--new-tokens",
            "8",
            "--reps",
            "2",
        ],
    );
    assert_eq!(rows.len(), 9, "three levels, three rows each");
    for (level, chunk) in rows.chunks(3).enumerate() {
        check_serve_level(chunk, 6, 8, 2);
        let p = &chunk[0]["params"];
        assert_eq!(p["input_len"], 24);
        assert_eq!(p["prompt"], "random");
        match level {
            0 | 1 => {
                assert_eq!(p["mode"], "closed");
                assert_eq!(p["concurrency"], [1, 3][level]);
            }
            _ => {
                assert_eq!(p["mode"], "open");
                assert_eq!(p["rate"], 40.0);
            }
        }
    }
}

#[test]
fn serve_text_prompt_for_a_duration() {
    let b = Bench::new();
    let rows = b.rows(
        "s.jsonl",
        &[
            "serve",
            "--concurrency",
            "2",
            "--duration",
            "0.4",
            "--prompt-text",
            "The quick brown fox jumps over the lazy dog.",
            "--new-tokens",
            "6",
            "--reps",
            "1",
            "--warmup",
            "0",
        ],
    );
    assert_eq!(rows.len(), 3);
    let p = &rows[0]["params"];
    assert_eq!(
        (p["prompt"].as_str(), p["duration_s"].as_f64()),
        (Some("text"), Some(0.4))
    );
    assert!(p.get("requests").is_none());
    assert!(
        p.get("input_len").is_none(),
        "a text prompt has no input_len: {p}"
    );
    let requests = rows[0]["extra"]["requests"].as_u64().unwrap();
    assert!(requests >= 2, "two streams each sent at least one request");
    check_serve_level(&rows, requests, 6, 1);
}

/// The `memra serve` child's configuration file is deleted as soon as the child is up, so a
/// `bench serve` killed mid-run (SIGTERM, no destructors) leaves nothing in the temporary
/// directory: once bench says the server is ready, no file is left while it measures, nor after
/// the kill. (Without the early delete the file lives until the server is dropped.)
#[cfg(unix)]
#[test]
fn serve_config_file_is_gone_while_measuring() {
    use std::io::BufRead;
    let b = Bench::new();
    let tmp = b.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memra"))
        .args(["--backend", "cpu", "--kv-cache-mib", "16", "--cache-dir"])
        .arg(b.path("cache"))
        .args(["bench", "serve", "--model", MODEL, "--concurrency", "1"])
        .args(["--duration", "60", "--new-tokens", "4", "--reps", "1"])
        .args(["--warmup", "0", "--out"])
        .arg(b.path("s.jsonl"))
        .current_dir(b.dir.path())
        .env("TMPDIR", &tmp)
        .env_remove("MEMRA_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run memra");
    let configs = || {
        std::fs::read_dir(&tmp)
            .unwrap()
            .filter(|e| {
                let n = e.as_ref().unwrap().file_name();
                let n = n.to_string_lossy();
                n.starts_with("memra-bench-serve") && n.ends_with(".toml")
            })
            .count()
    };
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let mut ready = false;
    while stderr.read_line(&mut line).unwrap() > 0 {
        if line.contains("bench serve: memra serve ready at") {
            ready = true;
            break;
        }
        line.clear();
    }
    let left = configs();
    let running = child.try_wait().unwrap().is_none();
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    assert!(ready, "bench serve never said the server was ready");
    assert!(running, "bench serve ended before it was killed");
    assert_eq!(
        left, 0,
        "the configuration file was still there while measuring"
    );
    assert_eq!(configs(), 0, "SIGTERM left a configuration file");
}

#[test]
fn spec_acceptance_and_speedup() {
    let b = Bench::new();
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gates/prompts");
    let rows = b.rows(
        "sp.jsonl",
        &[
            "spec",
            "--class",
            "chat,code",
            "--method",
            "ngram,layerskip:1",
            "--k",
            "3",
            "--new-tokens",
            "24",
            "--reps",
            "2",
            "--prompts-dir",
            prompts.to_str().unwrap(),
        ],
    );
    assert_eq!(rows.len(), 4);
    for r in &rows {
        check_common(r, "spec", 2);
        assert_eq!(r["unit"], "x");
        let p = &r["params"];
        assert_eq!(
            (p["k"].as_u64(), p["new_tokens"].as_u64()),
            (Some(3), Some(24))
        );
        let e = &r["extra"];
        let a = f(e, "acceptance");
        assert!((0.0..=1.0).contains(&a), "{r}");
        let (d, acc) = (
            e["drafted"].as_u64().unwrap(),
            e["accepted"].as_u64().unwrap(),
        );
        assert!(d > 0 && acc <= d, "{r}");
        assert!((a - acc as f64 / d as f64).abs() < 1e-12);
        let (plain, spec) = (
            f(&e["plain_tok_s"], "median"),
            f(&e["spec_tok_s"], "median"),
        );
        assert!(plain > 0.0 && spec > 0.0, "{r}");
        // The speedup is per pair of adjacent runs, so its median is near the ratio of medians.
        let ratio = spec / plain;
        assert!(
            f(r, "median") > 0.5 * ratio && f(r, "median") < 2.0 * ratio,
            "{r}"
        );
    }
    let classes: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["params"]["class"].as_str().unwrap(),
                r["params"]["method"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        classes,
        [
            ("chat", "ngram"),
            ("chat", "layerskip:1"),
            ("code", "ngram"),
            ("code", "layerskip:1")
        ]
    );
    assert!(rows.iter().all(|r| r["params"].get("stop").is_none()));

    // --stop-at-eos: a cell of its own (params.stop), the same checks.
    let rows = b.rows(
        "sp-eos.jsonl",
        &[
            "spec",
            "--class",
            "code",
            "--k",
            "3",
            "--new-tokens",
            "24",
            "--reps",
            "1",
            "--stop-at-eos",
            "--prompts-dir",
            prompts.to_str().unwrap(),
        ],
    );
    assert_eq!(rows.len(), 1);
    check_common(&rows[0], "spec", 1);
    assert_eq!(rows[0]["params"]["stop"], "eos", "{}", rows[0]);
    assert!(f(&rows[0]["extra"]["plain_tok_s"], "median") > 0.0);
}

#[test]
fn prefix_hit_vs_cold() {
    let b = Bench::new();
    let rows = b.rows(
        "p.jsonl",
        &[
            "prefix",
            "--prompt-len",
            "48,272",
            "--suffix-len",
            "16",
            "--reps",
            "3",
        ],
    );
    assert_eq!(rows.len(), 6);
    for (chunk, len) in rows.chunks(3).zip([48u64, 272]) {
        let arms: Vec<&str> = chunk
            .iter()
            .map(|r| r["params"]["arm"].as_str().unwrap())
            .collect();
        assert_eq!(arms, ["cold", "hit", "ratio"]);
        for r in chunk {
            check_common(r, "prefix", 3);
            assert_eq!(r["params"]["prompt_len"].as_u64(), Some(len));
        }
        assert_eq!(chunk[0]["extra"]["cached_tokens"], 0);
        // The prefix (len - 16) is a whole number of 16-position blocks: all of it is cached.
        assert_eq!(chunk[1]["extra"]["cached_tokens"].as_u64(), Some(len - 16));
        assert_eq!(
            (chunk[0]["unit"].as_str(), chunk[2]["unit"].as_str()),
            (Some("ms"), Some("x"))
        );
    }
    // 256 cached of 272: the hit prefills 16 tokens, the cold run 272.
    let ratio = &rows[5];
    assert!(f(ratio, "median") > 1.5, "a prefix hit is faster: {ratio}");
}

/// `--vs` measures each anchor on each decode cell and records it in the row; an anchor that
/// cannot run (here: no llama-bench binary; the HF anchors need an HF checkpoint, and this GGUF
/// model's HF sibling is only written for bf16/f16 synthetic models) is recorded with its error,
/// the row keeps memra's own figure, and the command says so and exits non-zero.
#[test]
fn vs_anchors_are_recorded_per_cell() {
    let b = Bench::new();
    let out = b.path("vs.jsonl");
    let o = b.run(&[
        "decode",
        "--batch",
        "1",
        "--depth",
        "8",
        "--new-tokens",
        "6",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--vs",
        "llama.cpp,hf-eager",
        "--llama-bench",
        "/nonexistent/llama-bench",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("anchor llama.cpp on "), "{err}");
    assert!(err.contains("failed: "), "{err}");
    assert!(err.contains("2 anchor measurement(s) failed"), "{err}");
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 1);
    let a = &rows[0]["anchor"];
    let l = a["llama.cpp"]["error"].as_str().unwrap();
    assert!(l.contains("/nonexistent/llama-bench"), "{l}");
    let h = a["hf-eager"]["error"].as_str().unwrap();
    assert!(h.contains("q4_k") && h.contains("bf16"), "{h}");
    assert!(rows[0]["median"].as_f64().unwrap() > 0.0);
}

/// `bench ttft --vs llama.cpp` runs llama-bench's prompt processing (`-p N -n 0`) for each
/// prompt length and records it as ms for the prompt, with memra's ratio to it; the HF anchors
/// time decode only and say so. A stand-in llama-bench (a shell script) reports prompt tok/s of
/// N and 2N per repetition, so the prompt takes 1,000 and 500 ms.
#[test]
fn ttft_vs_llama_cpp_records_prompt_ms() {
    let b = Bench::new();
    let fake = b.path("llama-bench");
    std::fs::write(
        &fake,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in -p) p=$2;; -n) n=$2;; esac; shift; done\n\
         echo \"[{\\\"n_prompt\\\":$p,\\\"n_gen\\\":$n,\\\"samples_ts\\\":[$p,$((p * 2))]}]\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = b.path("vs-ttft.jsonl");
    let o = b.run(&[
        "ttft",
        "--prompt-len",
        "16,64",
        "--reps",
        "4",
        "--warmup",
        "0",
        "--vs",
        "llama.cpp",
        "--llama-bench",
        fake.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Two rounds (the default), in alternating order: anchors then memra, memra then anchors.
    let order: Vec<&str> = err
        .lines()
        .filter_map(|l| {
            if l.starts_with("anchor llama.cpp") {
                Some("A")
            } else if l.starts_with("round ") && l.ends_with(": memra") {
                Some("M")
            } else {
                None
            }
        })
        .collect();
    assert_eq!(order, ["A", "A", "M", "M", "A", "A"], "{err}");
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 2);
    for r in &rows {
        // memra: 2 runs a round; the figure is over all 4, each round's median kept.
        assert_eq!(r["n"].as_u64(), Some(4), "{r}");
        let med = r["extra"]["rounds"].as_array().unwrap();
        assert_eq!(med.len(), 2, "{r}");
        let a = &r["anchor"]["llama.cpp"];
        assert_eq!(a["unit"], "ms", "{a}");
        assert_eq!((f(a, "min"), f(a, "max")), (500.0, 1000.0), "{a}");
        // The stand-in reports two repetitions a call: 4 runs over the two rounds.
        assert_eq!(a["n"].as_u64(), Some(4), "{a}");
        assert_eq!(a["rounds"], serde_json::json!([750.0, 750.0]), "{a}");
        let n = r["params"]["prompt_len"].as_u64().unwrap();
        assert_eq!(a["extra"]["n_prompt"].as_u64(), Some(n));
        assert!((f(a, "ratio") - f(r, "median") / f(a, "median")).abs() < 1e-12);
    }
    // The HF anchors time decode only: asking for one on ttft cells is refused before anything
    // runs.
    let o = b.run(&["ttft", "--prompt-len", "16", "--vs", "hf-eager"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("decode only"), "{err}");
}

/// Cells that cannot be measured as asked are refused before anything runs, naming the flag.
#[test]
fn impossible_cells_are_refused() {
    let b = Bench::new();
    for (args, says) in [
        (
            &["decode", "--batch", "0"][..],
            "invalid value '0' for '--batch",
        ),
        (
            &["decode", "--depth", "0"][..],
            "--depth must be at least 1",
        ),
        (&["decode", "--new-tokens", "1"][..], "at least 2"),
        (
            &["decode", "--depth", "9000", "--new-tokens", "16"][..],
            "beyond the model's context",
        ),
        (
            &["ttft", "--prompt-len", "0"][..],
            "--prompt-len must be at least 1",
        ),
        (
            &["ttft", "--prompt-len", "9000"][..],
            "no --prompt-len fits",
        ),
        (
            &["prefix", "--prompt-len", "9000"][..],
            "no --prompt-len fits",
        ),
        // 64 sequences of 2,016 positions do not fit 16 MiB of KV cache: refused before the
        // first cell is timed.
        (
            &[
                "decode",
                "--batch",
                "1,64",
                "--depth",
                "2000",
                "--new-tokens",
                "16",
            ][..],
            "raise --kv-cache-mib",
        ),
        (
            &["serve", "--input-len", "9000", "--concurrency", "1"][..],
            "beyond the context of 4096 tokens",
        ),
        (
            &["serve", "--input-len", "8", "--prompt-text", "hi"][..],
            "--input-len",
        ),
        // Rows that could not be written would be lost: --out is checked first.
        (&["decode", "--out", "."][..], "is a directory"),
        // Another scenario's flags would be ignored: refused, naming who uses them.
        (
            &["decode", "--k", "4"][..],
            "`--k` is not used by `bench decode` (it applies to: spec)",
        ),
        (
            &["spec", "--batch", "2"][..],
            "`--batch` is not used by `bench spec` (it applies to: decode)",
        ),
        (
            &["ttft", "--concurrency", "4"][..],
            "`--concurrency` is not used by `bench ttft` (it applies to: serve)",
        ),
        (
            &["serve", "--prompt-len", "64"][..],
            "(it applies to: ttft, prefix)",
        ),
        (
            &["decode", "--seed", "7"][..],
            "(it applies to: serve, prefix)",
        ),
        // serve's own flags where the scenario would ignore them.
        (
            &["decode", "--max-running", "8"][..],
            "--max-running is not used by `bench decode` (it does not run `memra serve`)",
        ),
        (
            &["serve", "--port", "9000"][..],
            "--port is not used by `bench serve` (the child server binds 127.0.0.1",
        ),
    ] {
        let o = b.run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
