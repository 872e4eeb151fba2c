//! `memra bench --compare REF`: re-measuring a reference's cells with this build flags an altered
//! row, and `--against BIN` interleaves another build's runs as the reference (the built binary
//! on the CPU backend with the tiny synthetic model, in a temporary directory).

mod bench_util;

use bench_util::{f, Bench};
use serde_json::Value;

/// A REF file of one decode row, with its median/min/max scaled by `scale`.
fn altered(rows: &[Value], scale: f64) -> String {
    let mut r = rows[0].clone();
    for k in ["median", "min", "max"] {
        r[k] = (f(&r, k) * scale).into();
    }
    format!("{r}\n")
}

#[test]
fn compare_flags_an_altered_reference() {
    let b = Bench::new();
    let args = [
        "decode",
        "--depth",
        "8",
        "--new-tokens",
        "32",
        "--reps",
        "2",
    ];
    let rows = b.rows("ref.jsonl", &args);
    let cmp = |name: &str, text: &str| {
        let p = b.path(name);
        std::fs::write(&p, text).unwrap();
        b.run(&["--compare", p.to_str().unwrap(), "--reps", "2"])
    };
    // 1000 x the measured tok/s: this build is far slower than that.
    let o = cmp("slow.jsonl", &altered(&rows, 1000.0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("REGRESSED") && out.contains("decode {\"batch\":1"),
        "{out}"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 of 1 cells regressed"));
    // 1/1000 of it: improved, exit 0.
    let o = cmp("fast.jsonl", &altered(&rows, 0.001));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("improved") && !out.contains("REGRESSED"),
        "{out}"
    );
    // A spread that covers anything: same.
    let mut wide = rows[0].clone();
    wide["min"] = 1e-9.into();
    wide["max"] = 1e12.into();
    let o = cmp("wide.jsonl", &format!("{wide}\n"));
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("same"));
    // Compare never writes rows without --out.
    assert!(!b.path("research").exists());
    // A cell whose params record a setting this run does not have cannot be re-measured.
    let mut other = rows[0].clone();
    other["params"]["bogus"] = 1.into();
    let o = cmp("other.jsonl", &format!("{other}\n"));
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("NOT RE-MEASURED: this run's params differ (bogus none here, 1 in REF)"),
        "{out}"
    );
    // Rows of another model are skipped, and a file of nothing else is an error.
    let mut m = rows[0].clone();
    m["model"] = "llama-3.1-8b-bf16.gguf".into();
    let o = cmp("model.jsonl", &format!("{m}\n"));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no cells measured"));
    // So are rows measured under other engine settings (kernel defines, KV dtype).
    let mut s = rows[0].clone();
    s["settings"] = serde_json::json!({"kernel_defines": {"QTC": "1"}});
    let o = cmp("settings.jsonl", &format!("{s}\n"));
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("settings"));
    // A cell this build refuses to run (1 new token) is that cell's NOT RE-MEASURED verdict, and
    // the other cells still run; a malformed cell names the file and its line.
    let mut bad = rows[0].clone();
    bad["params"]["new_tokens"] = 1.into();
    let o = cmp("bad.jsonl", &format!("{wide}\n{bad}\n"));
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(!o.status.success());
    assert!(
        err.contains("cannot be re-measured") && err.contains("new-tokens"),
        "{err}"
    );
    assert!(
        out.contains("NOT RE-MEASURED") && out.contains("same"),
        "{out}"
    );
    let mut nobatch = rows[0].clone();
    nobatch["params"].as_object_mut().unwrap().remove("batch");
    let p = b.path("nobatch.jsonl");
    std::fs::write(&p, format!("\n{nobatch}\n")).unwrap();
    let o = b.run(&["--compare", p.to_str().unwrap(), "--reps", "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(&format!("{}:2", p.display())) && err.contains("\"batch\""),
        "{err}"
    );
}

/// `--compare REF --against BIN`: BIN measures REF's cells now, one run per round interleaved
/// with this build's runs, and is the reference. BIN here is a stand-in "other build": a script
/// that logs its arguments, runs this memra, and scales the tok/s it wrote by FACTOR, so the
/// verdicts are known: 1000 x faster makes this build REGRESSED (exit non-zero), 1/1000 improved.
#[test]
fn compare_against_another_build_interleaves_and_uses_its_runs() {
    let b = Bench::new();
    let args = [
        "decode",
        "--depth",
        "8",
        "--new-tokens",
        "16",
        "--reps",
        "1",
    ];
    b.rows("ref.jsonl", &args);
    let refp = b.path("ref.jsonl");
    let log = b.path("other.log");
    let script = |factor: f64| {
        let p = b.path(&format!("other-{factor}"));
        let body = format!(
            "#!/bin/sh\necho \"$@\" >> {log}\n{memra} \"$@\" || exit $?\nout=''\nprev=''\n\
             for a in \"$@\"; do [ \"$prev\" = --out ] && out=$a; prev=$a; done\n\
             python3 - \"$out\" <<'PY'\nimport json, sys\np = sys.argv[1]\n\
             rows = [json.loads(l) for l in open(p) if l.strip()]\n\
             for r in rows:\n    for k in ('median', 'min', 'max'):\n        r[k] *= {factor}\n\
             open(p, 'w').write(''.join(json.dumps(r) + '\\n' for r in rows))\nPY\n",
            log = log.display(),
            memra = env!("CARGO_BIN_EXE_memra"),
        );
        std::fs::write(&p, body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    for (factor, regressed) in [(1000.0, true), (0.001, false)] {
        let _ = std::fs::remove_file(&log);
        let bin = script(factor);
        let o = b.run(&[
            "--compare",
            refp.to_str().unwrap(),
            "--against",
            bin.to_str().unwrap(),
            "--reps",
            "3",
            "--warmup",
            "0",
        ]);
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert_eq!(!o.status.success(), regressed, "{out}{err}");
        let want = if regressed { "REGRESSED" } else { "improved" };
        assert!(
            out.contains(want) && out.contains("decode {\"batch\":1"),
            "{out}"
        );
        assert!(err.contains("interleaved"), "{err}");
        // One BIN run per round, each with the global flags and the cell's flags.
        let calls: Vec<String> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(calls.len(), 3, "{calls:?}");
        for c in &calls {
            assert!(
                c.starts_with("--backend cpu --kv-cache-mib 16 --cache-dir ")
                    && c.contains(" bench decode --batch 1 --depth 8 --new-tokens 16 ")
                    && c.contains("--reps 1"),
                "{c}"
            );
        }
    }
}
