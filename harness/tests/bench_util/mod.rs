//! The `memra bench` integration tests' harness: the built binary on the CPU backend with the
//! tiny synthetic model (`synth:tiny-llama:q4_k`, written in milliseconds into each test's own
//! cache), in a temporary directory, writing its rows with --out.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const MODEL: &str = "synth:tiny-llama:q4_k";

pub struct Bench {
    pub dir: tempfile::TempDir,
}

impl Bench {
    pub fn new() -> Bench {
        Bench {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `memra --backend cpu ... bench ARGS --model MODEL` in the temporary directory.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_memra"))
            .args(["--backend", "cpu", "--kv-cache-mib", "16", "--cache-dir"])
            .arg(self.path("cache"))
            .arg("bench")
            .args(args)
            .args(["--model", MODEL])
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .env_remove("MEMRA_CONFIG")
            .env_remove("MEMRA_API_KEY")
            .output()
            .expect("run memra")
    }

    /// Runs a scenario that must succeed, writing to OUT, and returns the rows it wrote.
    pub fn rows(&self, out: &str, args: &[&str]) -> Vec<Value> {
        let mut all = args.to_vec();
        let o = self.path(out);
        all.extend(["--out", o.to_str().unwrap()]);
        let r = self.run(&all);
        assert!(
            r.status.success(),
            "memra bench {all:?} failed:\n{}",
            String::from_utf8_lossy(&r.stderr)
        );
        read_rows(&o)
    }
}

pub fn read_rows(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("no number {k:?} in {v}"))
}

/// The fields every row has, with median/min/max consistent and positive.
pub fn check_common(r: &Value, scenario: &str, n: u64) {
    assert_eq!(r["scenario"], scenario, "{r}");
    assert_eq!(r["backend"], "cpu");
    assert_eq!(r["model"], "tiny-llama-q4_k.gguf");
    assert_eq!(r["dtype"], "Q4_K");
    // The CPU's model name and the backend's threads: "AMD EPYC (2 threads)".
    let threads = format!(" ({} threads)", r["host_threads"]);
    assert!(r["device"].as_str().unwrap().ends_with(&threads), "{r}");
    assert!(f(r, "copy_gbps") > 0.0 && f(r, "weight_bytes") > 0.0 && f(r, "time") > 0.0);
    assert!(!r["commit"].as_str().unwrap().is_empty());
    assert_eq!(r["n"].as_u64(), Some(n), "{r}");
    let (md, lo, hi) = (f(r, "median"), f(r, "min"), f(r, "max"));
    assert!(lo > 0.0 && lo <= md && md <= hi, "{r}");
}
