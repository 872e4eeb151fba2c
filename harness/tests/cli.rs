//! Command-line behaviour through the built binary: flags refused where they would be ignored,
//! arguments checked before any work, gates of another lane named as skipped.

mod cli_util;
use cli_util::{failed, memra, ok, stderr, stdout};

/// Serve-only flags on another command are refused (they would be ignored), naming each flag;
/// `memra serve` itself takes them.
#[test]
fn serve_flags_on_other_commands_are_refused() {
    let e = failed(memra(&["--port", "5", "pull", "--list"]));
    assert!(
        e.contains("--port is a `memra serve` (and `bench serve`) option"),
        "{e}"
    );
    let e = failed(memra(&[
        "pull",
        "--list",
        "--host",
        "0.0.0.0",
        "--drain-secs",
        "3",
    ]));
    assert!(e.contains("--host, --drain-secs are"), "{e}");
    let out = ok(memra(&["serve", "--print-config", "--port", "9001"]));
    assert!(stdout(&out).contains("port = 9001"), "{}", stdout(&out));
    // ... and the help of a command that refuses them does not list them.
    let help = stdout(&ok(memra(&["run", "--help"])));
    assert!(
        !help.contains("--port") && !help.contains("Serve options"),
        "{help}"
    );
    let help = stdout(&ok(memra(&["serve", "--help"])));
    assert!(
        help.contains("--port") && help.contains("Serve options"),
        "{help}"
    );
}

/// `memra tune` refuses what it cannot sweep before measuring anything.
#[test]
fn tune_refuses_unknown_sweeps_and_missing_gates() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.toml");
    let nowhere = tmp.path().join("nowhere");
    let gates_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../gates");
    // `memra --backend cpu tune ARGS --out OUT`, which must fail: its stderr.
    let tune = |args: &[&str]| {
        let (head, tail): (&[&str], &[&str]) = (
            &["--backend", "cpu", "tune"],
            &["--out", out.to_str().unwrap()],
        );
        let all = [head, args, tail].concat();
        failed(memra(&all))
    };
    for (args, says) in [
        (&["--what", "foo"][..], "--what \"foo\""),
        (
            &["--knobs", "QTC_SK,NOT_A_DEFINE"][..],
            "--knobs \"NOT_A_DEFINE\"",
        ),
        (
            &["--what", "graphs", "--gates", "none"][..],
            "nothing to tune on the CPU",
        ),
        (
            &[
                "--what",
                "prefill",
                "--gates-dir",
                nowhere.to_str().unwrap(),
            ][..],
            "gates directory",
        ),
        // --knobs names kernel defines, which only --what kernels sweeps.
        (
            &["--what", "prefill", "--knobs", "QTC_SK"][..],
            "--knobs names kernel defines",
        ),
        (
            &["--what", "prefill", "--reps", "0"][..],
            "--reps must be at least 1",
        ),
        // The gates run after the sweep: a pattern no gate matches is found before it.
        (
            &[
                "--what",
                "prefill",
                "--gates",
                "no-gate-is-named-this",
                "--gates-dir",
                gates_dir.to_str().unwrap(),
            ][..],
            "no gates of the cpu lane match \"no-gate-is-named-this\"",
        ),
    ] {
        let e = tune(args);
        assert!(e.contains(says), "{args:?}: {e}");
    }
    assert!(!out.exists());
}

/// Values that would be silently replaced are refused by the flag parser: a shard size of 0,
/// a request count beside --duration (one or the other ends a timed run).
#[test]
fn values_that_would_be_ignored_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let e = failed(memra(&[
        "synth",
        "--shape",
        "tiny-llama",
        "--dtype",
        "bf16",
        "--format",
        "safetensors",
        "--max-shard-mib",
        "0",
        "--out",
        tmp.path().join("s").to_str().unwrap(),
    ]));
    assert!(e.contains("--max-shard-mib"), "{e}");
    let e = failed(memra(&[
        "bench",
        "serve",
        "--requests",
        "2",
        "--duration",
        "2",
    ]));
    assert!(e.contains("--requests") && e.contains("--duration"), "{e}");
    assert!(!tmp.path().join("s").exists());
}

/// Gates of another lane are listed as skipped; a pattern that only matches them is an error
/// that says so.
#[test]
fn gates_of_another_lane_are_named_as_skipped() {
    let gates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../gates");
    let e = failed(memra(&[
        "gate",
        "--lane",
        "cpu",
        "--only",
        "cuda-graphs",
        "--gates-dir",
        gates.to_str().unwrap(),
    ]));
    assert!(e.contains("skip cuda-graphs/qwen3: cuda lane only"), "{e}");
    assert!(
        e.contains("no gates of the cpu lane match \"cuda-graphs\""),
        "{e}"
    );
    // A comma-separated --only matches any of its patterns.
    let e = failed(memra(&[
        "gate",
        "--lane",
        "cpu",
        "--only",
        "cuda-graphs, backend-parity/llama-3.1-8b",
        "--gates-dir",
        gates.to_str().unwrap(),
    ]));
    for g in [
        "cuda-graphs/qwen3",
        "cuda-graphs/tiny-gemma3-q4k",
        "backend-parity/llama-3.1-8b-q8",
    ] {
        assert!(e.contains(&format!("skip {g}: cuda lane only")), "{e}");
    }
    assert!(!e.contains("skip backend-parity/tiny"), "{e}");
    let e = failed(memra(&["gate", "--gates-dir", "/nonexistent/gates"]));
    assert!(
        e.contains("run from the repository root or pass --gates-dir"),
        "{e}"
    );
    // An empty pattern (an unset shell variable) is refused, not taken as "every gate".
    let e = failed(memra(&[
        "gate",
        "--only",
        "",
        "--gates-dir",
        gates.to_str().unwrap(),
    ]));
    assert!(e.contains("--only is empty"), "{e}");
}

/// `memra run --k` without `--spec` is refused before any model is resolved.
#[test]
fn run_k_without_spec_is_refused() {
    let e = failed(memra(&[
        "run",
        "no-such-model",
        "--prompt",
        "hi",
        "--k",
        "8",
    ]));
    assert!(e.contains("--k sets the draft length of --spec"), "{e}");
    let e = failed(memra(&[
        "run",
        "no-such-model",
        "--prompt",
        "hi",
        "--system",
        "s",
    ]));
    assert!(
        e.contains("--system is a message of the chat template; give --chat too"),
        "{e}"
    );
    let e = failed(memra(&[
        "run",
        "no-such-model",
        "--prompt",
        "hi",
        "--max-tokens",
        "0",
    ]));
    assert!(e.contains("--max-tokens"), "{e}");
}

/// `memra run` refuses, before generating, a --max-tokens that the model's context or the KV
/// cache cannot hold, saying how many tokens fit (as the server does).
#[test]
fn run_refuses_more_tokens_than_fit() {
    let model = smol_path();
    let run = |extra: &[&str]| {
        let base = [
            "--backend",
            "cpu",
            "run",
            &model,
            "--prompt",
            "Hi",
            "--no-check",
        ];
        failed(memra(&[&base[..], extra].concat()))
    };
    let e = run(&["--max-tokens", "9000"]);
    assert!(
        e.contains(
            "does not fit the model's context of 8192 tokens: at most 8191 can be generated"
        ),
        "{e}"
    );
    let e = run(&["--max-tokens", "900", "--kv-cache-mib", "4"]);
    assert!(
        e.contains("does not fit the KV cache (--kv-cache-mib) of 80 tokens: at most 79"),
        "{e}"
    );
    // Counts past what any context holds are refused by the parser (they once wrapped past the
    // check above and generated without end).
    let e = run(&["--max-tokens", "18446744073709551615"]);
    assert!(e.contains("--max-tokens") && !e.contains("panicked"), "{e}");
    // A KV cache the allocator refuses, or whose size overflows, is an error, not an abort.
    for mib in ["99999999999", "17592186044416"] {
        let e = run(&["--kv-cache-mib", mib, "--max-tokens", "2"]);
        assert!(
            e.contains("kv_cache_mib")
                && !e.contains("panicked")
                && !e.contains("memory allocation"),
            "{mib}: {e}"
        );
    }
}

/// Bench counts past any context or run budget are refused by the parser: no panic, no run
/// that never ends; negative sampling values reach their own range checks.
#[test]
fn huge_and_negative_numbers_are_refused_clearly() {
    for (flag, v) in [
        ("--depth", "18446744073709551615"),
        ("--new-tokens", "18446744073709551000"),
        ("--reps", "18446744073709551615"),
        ("--warmup", "18446744073709551615"),
        ("--prompt-len", "18446744073709551615"),
        ("--reps", "0"),
    ] {
        let e = failed(memra(&["--backend", "cpu", "bench", "decode", flag, v]));
        assert!(
            e.contains(flag) && !e.contains("panicked"),
            "{flag} {v}: {e}"
        );
    }
    let model = smol_path();
    let e = failed(memra(&[
        "--backend",
        "cpu",
        "run",
        &model,
        "--prompt",
        "Hi",
        "--temperature",
        "-1",
    ]));
    assert!(
        e.contains("temperature") && !e.contains("unexpected argument"),
        "{e}"
    );
}

/// `memra run --spec` on the real SmolLM2 (CPU): n-gram, layer-skip and draft-model drafting
/// print their counts, the text equals plain decode's (the command checks and says so), n-gram
/// drafts on a prompt the answer repeats, and the draft model (the same file) drafts.
#[test]
fn run_spec_equals_plain_decode() {
    let model = smol_path();
    let prompt = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return";
    let base = [
        "--backend",
        "cpu",
        "run",
        &model,
        "--prompt",
        prompt,
        "--max-tokens",
        "24",
        "--temperature",
        "0",
        "--ignore-eos",
    ];
    let plain = ok(memra(&[&base[..], &["--no-check"]].concat()));
    // The draft model: the same file (same tokenizer), so every greedy draft is accepted.
    let draft = format!("draft:{model}");
    for (spec, drafts) in [
        ("ngram", Some(true)),
        ("layerskip:15", None),
        (draft.as_str(), Some(true)),
    ] {
        let out = ok(memra(&[&base[..], &["--spec", spec, "--k", "4"]].concat()));
        let err = stderr(&out);
        assert!(err.contains("identical to plain decode"), "{spec}: {err}");
        assert_eq!(stdout(&out), stdout(&plain), "{spec}");
        let drafted: u64 = err
            .split("drafted ")
            .nth(1)
            .and_then(|t| t.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{spec}: no drafted count in {err}"));
        if let Some(d) = drafts {
            assert_eq!(drafted > 0, d, "{spec}: drafted {drafted}");
        }
    }
}

/// The SmolLM2 file `memra pull` caches (the CI script pulls it).
fn smol_path() -> String {
    let name = "smollm2-135m-instruct";
    let cache = std::env::var_os("MEMRA_CACHE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/memra")
        });
    let p = cache.join("models").join(name).join(format!("{name}.gguf"));
    assert!(
        p.exists(),
        "{} is missing: run `memra pull {name}`",
        p.display()
    );
    p.display().to_string()
}

/// `probe --bench-kernels` checks its token counts and formats at parse time, naming the value.
#[test]
fn probe_kernel_bench_arguments_are_checked() {
    let e = failed(memra(&["probe", "--kernel-tokens", "1,0"]));
    assert!(
        e.contains("invalid value '0'") && e.contains("1..=4096"),
        "{e}"
    );
    let e = failed(memra(&["probe", "--kernel-dtypes", "q8_0,f32"]));
    assert!(e.contains("invalid value 'f32'"), "{e}");
    let out = ok(memra(&["probe", "--help"]));
    assert!(stdout(&out).contains("--kernel-tokens"), "{}", stdout(&out));
}

/// `memra quantize` names a missing or malformed input and writes nothing.
#[test]
fn quantize_names_a_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("q8.gguf");
    let missing = tmp.path().join("missing.gguf");
    let e = failed(memra(&[
        "quantize",
        missing.to_str().unwrap(),
        out.to_str().unwrap(),
    ]));
    assert!(e.contains("missing.gguf"), "{e}");
    let junk = tmp.path().join("junk.gguf");
    std::fs::write(&junk, b"not a gguf file at all").unwrap();
    let e = failed(memra(&[
        "quantize",
        junk.to_str().unwrap(),
        out.to_str().unwrap(),
    ]));
    assert!(e.contains("junk.gguf") && e.contains("GGUF"), "{e}");
    assert!(!out.exists());
    let e = failed(memra(&["quantize", "a.gguf", "b.gguf", "--to", "q4_0"]));
    assert!(e.contains("invalid value 'q4_0'"), "{e}");
}

/// `memra tune` end to end on the CPU with the tiny synthetic model: it sweeps the prefill chunk
/// and measures the speculation constants, runs the named gate with the kept values, writes the
/// defaults file with provenance, and `--device-defaults FILE` then supplies its values, naming
/// the file as their source.
#[test]
fn tune_writes_defaults_with_provenance_that_the_engine_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cpu.toml");
    let gates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../gates");
    let run = ok(memra(&[
        "--backend",
        "cpu",
        "--cache-dir",
        tmp.path().to_str().unwrap(),
        "tune",
        "--model",
        "synth:tiny-llama:q4_k",
        "--what",
        "prefill,spec",
        "--gates",
        "speculative/tiny-llama",
        "--gates-dir",
        gates.to_str().unwrap(),
        "--reps",
        "2",
        "--new-tokens",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]));
    let log = format!("{}{}", stdout(&run), stderr(&run));
    assert!(log.contains("1 gates run, 0 failed"), "{log}");
    let t: toml::Value = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(t["device"]["compute_capability"].as_str(), Some("cpu"));
    assert_eq!(t["provenance"]["tool"].as_str(), Some("memra tune"));
    assert!(t["provenance"]["notes"]
        .as_str()
        .unwrap()
        .contains("tiny-llama-q4_k"));
    let chunk = &t["engine"]["prefill_chunk"];
    let kept = chunk["value"].as_integer().unwrap();
    let tried: Vec<i64> = chunk["tried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_integer().unwrap())
        .collect();
    let i = tried
        .iter()
        .position(|&v| v == kept)
        .expect("kept one of the tried");
    assert_eq!(
        chunk["median"].as_float(),
        chunk["tried_medians"][i].as_float()
    );
    assert_eq!(chunk["n"].as_integer(), Some(2));
    // The verify costs of k = 1, 2, 4, 8 drafts (the row cost's tried / tried_medians) fitted by
    // least squares as base + k·row (row ≥ 0, base ≥ 1), and the break-even acceptance: the
    // lowest a at which some k of 1..16 has 1 + a + … + a^k at least base + k·row (each
    // rounded as written).
    let engine = &t["engine"];
    let value = |k: &str| engine[k]["value"].as_float().unwrap();
    let (base, row, a) = (
        value("spec_verify_base"),
        value("spec_row_cost"),
        value("spec_min_acceptance"),
    );
    let rc = &engine["spec_row_cost"];
    let ks: Vec<f64> = rc["tried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_integer().unwrap() as f64)
        .collect();
    let cs: Vec<f64> = rc["tried_medians"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_float().unwrap())
        .collect();
    assert_eq!(ks, [1.0, 2.0, 4.0, 8.0], "{rc}");
    assert!(cs.iter().all(|c| *c > 0.0), "{rc}");
    let (km, cm) = (ks.iter().sum::<f64>() / 4.0, cs.iter().sum::<f64>() / 4.0);
    let sxx: f64 = ks.iter().map(|k| (k - km).powi(2)).sum();
    let sxy: f64 = ks.iter().zip(&cs).map(|(k, c)| (k - km) * (c - cm)).sum();
    let free_row = (sxy / sxx).max(0.0);
    // Where the free line's base falls under 1, the fit holds base = 1 and refits the row.
    let (want_base, want_row) = if cm - free_row * km >= 1.0 {
        (cm - free_row * km, free_row)
    } else {
        let skk: f64 = ks.iter().map(|k| k * k).sum();
        let skc: f64 = ks.iter().zip(&cs).map(|(k, c)| k * (c - 1.0)).sum();
        (1.0, (skc / skk).max(0.0))
    };
    assert!((row - want_row).abs() < 2e-3, "{rc}: row {row}");
    assert!((base - want_base).abs() < 2e-3, "{rc}: base {base}");
    let pays = |a: f64| {
        (1..=16).any(|k| (0..=k).map(|i| a.powi(i)).sum::<f64>() >= base + k as f64 * row - 1e-3)
    };
    let consistent = match a {
        a if a > 0.995 => !pays(0.98),
        a => pays(a + 0.01) && (a < 0.01 || !pays(a - 0.01)),
    };
    assert!(consistent, "acceptance {a} for base {base}, row {row}");
    let line = print_config_line(&out, "prefill_chunk");
    assert!(
        line.starts_with(&format!("prefill_chunk = {kept} "))
            && line.contains(out.to_str().unwrap())
            && line.contains("memra tune"),
        "{line}"
    );
}

/// The `KEY = value  # source` line `memra serve --print-config` prints for `key` with
/// `--device-defaults defaults` on the CPU backend ("" when there is none).
fn print_config_line(defaults: &std::path::Path, key: &str) -> String {
    let cfg = ok(memra(&[
        "--backend",
        "cpu",
        "--device-defaults",
        defaults.to_str().unwrap(),
        "serve",
        "--print-config",
    ]));
    stdout(&cfg)
        .lines()
        .find(|l| l.starts_with(&format!("{key} =")))
        .unwrap_or_default()
        .to_string()
}

/// `memra tune --resume` keeps the values of a cut-short run's `<out>.partial` and sweeps only
/// the rest (here: prefill decided, spec swept), removes the partial when the file is written,
/// and refuses a partial that another build measured.
#[test]
fn tune_resumes_from_a_partial_file_and_refuses_another_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cpu.toml");
    let partial = tmp.path().join("cpu.toml.partial");
    let tune_on = |base: &str, out: &std::path::Path, what: &str, resume: bool| {
        let mut a = vec![
            "--backend",
            "cpu",
            "--device-defaults",
            base,
            "--cache-dir",
            tmp.path().to_str().unwrap(),
            "tune",
            "--model",
            "synth:tiny-llama:q4_k",
            "--what",
            what,
            "--gates",
            "none",
            "--reps",
            "2",
            "--new-tokens",
            "8",
            "--out",
            out.to_str().unwrap(),
        ];
        if resume {
            a.push("--resume");
        }
        memra(&a)
    };
    let tune = |what: &str, resume: bool| tune_on("none", &out, what, resume);
    ok(tune("prefill", false));
    assert!(!partial.exists(), "a finished run leaves no partial");
    // A run cut short after deciding the prefill chunk leaves exactly this behind.
    std::fs::copy(&out, &partial).unwrap();
    let first: toml::Value = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let run = ok(tune("prefill,spec", true));
    let log = stderr(&run);
    assert!(
        log.contains("resuming") && log.contains("1 values decided"),
        "{log}"
    );
    assert!(
        !log.contains("prefill_chunk="),
        "prefill swept again: {log}"
    );
    assert!(
        log.contains("break-even acceptance"),
        "spec not swept: {log}"
    );
    assert!(
        !partial.exists(),
        "the partial is removed once the file is written"
    );
    let t: toml::Value = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        t["engine"]["prefill_chunk"],
        first["engine"]["prefill_chunk"]
    );
    assert!(t["engine"].get("spec_row_cost").is_some(), "{t}");
    // Another build's partial is refused, naming both commits.
    let text = std::fs::read_to_string(&out).unwrap();
    let commit = t["provenance"]["commit"].as_str().unwrap();
    std::fs::write(&partial, text.replace(commit, "0123456789ab")).unwrap();
    let e = failed(tune("prefill,spec", true));
    assert!(
        e.contains("measured by commit 0123456789ab") && e.contains(commit),
        "{e}"
    );
    // On top of a defaults file, what is not swept is kept from it, and the notes say so.
    let base = tmp.path().join("base.toml");
    std::fs::copy(&out, &base).unwrap();
    let out2 = tmp.path().join("cpu2.toml");
    ok(tune_on(base.to_str().unwrap(), &out2, "spec", false));
    let t2: toml::Value = toml::from_str(&std::fs::read_to_string(&out2).unwrap()).unwrap();
    // The kept entry is the base's, measurement and all, plus its source.
    let mut kept = t2["engine"]["prefill_chunk"].clone();
    kept.as_table_mut().unwrap().remove("source");
    assert_eq!(kept, t["engine"]["prefill_chunk"]);
    let notes = t2["provenance"]["notes"].as_str().unwrap();
    assert!(notes.contains("values not swept kept from"), "{notes}");
    // A kept entry names the base file's run as its source; a swept one is the file's own.
    let kept_src = t2["engine"]["prefill_chunk"]["source"]
        .as_str()
        .unwrap_or_default();
    assert!(
        kept_src.contains("memra tune") && kept_src.contains(commit),
        "{kept_src:?}"
    );
    assert!(
        t2["engine"]["spec_row_cost"].get("source").is_none(),
        "{t2}"
    );
    let line = print_config_line(&out2, "prefill_chunk");
    assert!(line.contains(kept_src), "{line}");
}

/// `memra probe` on the CPU backend names the device, counts the cores and measures a memory
/// copy bandwidth (a positive number of GB/s).
#[test]
fn probe_on_the_cpu_reports_cores_and_bandwidth() {
    let out = ok(memra(&["--backend", "cpu", "probe"]));
    let text = stdout(&out);
    let field = |name: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name:?} line in {text}"))
            .trim()
            .to_string()
    };
    assert!(field("device").starts_with("cpu"), "{text}");
    let cores: usize = field("cores").parse().unwrap();
    assert_eq!(
        cores,
        std::thread::available_parallelism().unwrap().get(),
        "{text}"
    );
    // One line with one thread, and (on a machine of more than one core) one with a thread a core.
    let copies: Vec<(f64, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("memory copy"))
        .map(|l| {
            let gbps = l.split_whitespace().next().and_then(|v| v.parse().ok());
            (gbps.unwrap_or_else(|| panic!("{text}")), l.to_string())
        })
        .collect();
    assert_eq!(copies.len(), if cores > 1 { 2 } else { 1 }, "{text}");
    assert!(copies[0].1.contains("one thread"), "{text}");
    for (gbps, _) in &copies {
        assert!(*gbps > 0.1 && *gbps < 10_000.0, "{text}");
    }
    if cores > 1 {
        assert!(copies[1].1.contains(&format!("{cores} threads")), "{text}");
    }
}

/// A config file's bad value is named by its key and the file it came from; an empty
/// MEMRA_CONFIG means unset (as for most tools), not "a value is required".
#[test]
fn config_errors_name_the_key_and_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.toml");
    let path = file.to_str().unwrap();
    for (text, says) in [
        ("backend = \"tpu\"\n", "backend (from config file"),
        ("kv_cache_mib = 0\n", "kv_cache_mib (from config file"),
        (
            "[serve]\nmax_running = 0\n",
            "serve.max_running (from config file",
        ),
        (
            "[serve]\nspeculative_k = 99\n",
            "serve.speculative_k (from config file",
        ),
        ("spec_row_cost = -1.0\n", "spec_row_cost (from config file"),
        (
            "[kernel_defines]\nLIN_TOKNS = \"4\"\n",
            "kernel_defines.LIN_TOKNS (from config file",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let e = failed(memra(&["--config", path, "serve", "--print-config"]));
        assert!(e.contains(says) && e.contains(path), "{text}: {e}");
    }
    // An unknown key gets no hint about kernel_defines' quoting.
    std::fs::write(&file, "threds = 2\n").unwrap();
    let e = failed(memra(&["--config", path, "serve", "--print-config"]));
    assert!(
        e.contains("threds") && !e.contains("quoted integers"),
        "{e}"
    );
    // An integer past TOML's range names the file too.
    std::fs::write(&file, "kv_block_size = 18446744073709551615\n").unwrap();
    let e = failed(memra(&["--config", path, "serve", "--print-config"]));
    assert!(e.contains(path), "{e}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memra"))
        .args(["serve", "--print-config"])
        .env("MEMRA_CONFIG", "")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Output cut short by the reader (`| head -1`) ends the command quietly: no panic.
#[test]
fn a_closed_pipe_ends_output_quietly() {
    let bin = env!("CARGO_BIN_EXE_memra");
    // The reader is gone before the first write, so the write meets a closed pipe: memra ends
    // by SIGPIPE (status 141 in bash), as Unix tools do, not by a panic (101).
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "(sleep 0.5; exec '{bin}' pull --list) | true; echo \"status ${{PIPESTATUS[0]}}\""
        ))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(stdout(&out), "status 141", "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A gate that compares nothing cannot fail (DESIGN.md §3): it fails, in the gate arm and in
/// the canary arm, rather than passing green.
#[test]
fn a_gate_that_compares_nothing_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let gates = tmp.path().join("gates");
    std::fs::create_dir(&gates).unwrap();
    let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../gates/prompts");
    std::os::unix::fs::symlink(std::fs::canonicalize(real).unwrap(), gates.join("prompts"))
        .unwrap();
    std::fs::write(
        gates.join("empty.toml"),
        "[[gate]]\nname = \"chunked-prefill/empty\"\nkind = \"chunked_prefill\"\n\
         model = \"smollm2-135m-instruct\"\nn_prompts = 0\nmax_tokens = 2\n\
         chunk_sizes = [7]\nlevel = \"logit_bits\"\ncanary = \"shape_dependent_split\"\n",
    )
    .unwrap();
    for canary in [false, true] {
        let mut args = vec!["--backend", "cpu", "gate", "--lane", "cpu", "--gates-dir"];
        args.push(gates.to_str().unwrap());
        if canary {
            args.push("--canary");
        }
        let out = memra(&args);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!out.status.success(), "canary {canary}: {text}");
        assert!(
            text.contains("EMPTY") && text.contains("compared nothing"),
            "{text}"
        );
    }
}
