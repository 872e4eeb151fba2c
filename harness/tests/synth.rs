//! `memra synth` end to end through the built binary: every tiny shape in GGUF (bf16, q4_k, and
//! the other dtypes on one shape) and safetensors loads in the engine and generates; the GGUF and
//! safetensors checkpoints of one seed are the same model; the bytes depend on the seed and on
//! nothing else (not the thread count); sharded safetensors load; errors are clear.

use memra_engine::backend::cpu::CpuBackend;
use memra_engine::engine::{Engine, GenerateRequest};
use memra_engine::loader::{load, LoadedModel};
use memra_engine::sample::SamplingParams;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SHAPES: [&str; 4] = ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3"];

/// Text the tokenizers must round-trip and agree on: ASCII, digits, whitespace runs, accents,
/// CJK, emoji, and special tokens written in the text.
const TEXTS: [&str; 5] = [
    "The capital of France is Paris, and 2 + 2 = 4.",
    "  leading spaces,\ttabs\n\nand   runs of them  ",
    "café naïve 日本語 🤖 don't WE'LL",
    "<|im_start|>user\nhello<|im_end|>\n",
    "x=1;y=22;z=333;",
];

fn memra(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memra"))
        .args(args)
        .stdin(Stdio::null())
        .env_remove("MEMRA_CONFIG")
        .output()
        .expect("run memra")
}

/// Runs `memra synth ARGS --out OUT` and returns the checkpoint path it prints.
fn synth(args: &[&str], out: &Path) -> PathBuf {
    let mut all = vec!["synth"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = memra(&all);
    assert!(
        o.status.success(),
        "memra {all:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let path = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim());
    assert!(path.exists(), "{} does not exist", path.display());
    path
}

/// sha256 of a file, or of a directory's files (name and content, in name order).
fn digest(path: &Path) -> String {
    let mut h = Sha256::new();
    let mut files = vec![path.to_path_buf()];
    if path.is_dir() {
        files = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
    }
    for f in files {
        h.update(f.file_name().unwrap().to_string_lossy().as_bytes());
        h.update(std::fs::read(&f).unwrap());
    }
    hex::encode(h.finalize())
}

/// Loads `path`, checks the tokenizer round-trips, and runs a short greedy generation; returns
/// the tokenizer's ids of [`TEXTS`] and the logits at the prompt's last position.
fn exercise(path: &Path) -> (Vec<Vec<u32>>, Vec<f32>) {
    let loaded: LoadedModel = load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tk = &loaded.tokenizer;
    let ids: Vec<Vec<u32>> = TEXTS.iter().map(|t| tk.encode(t, false).unwrap()).collect();
    for (t, i) in TEXTS.iter().zip(&ids) {
        assert_eq!(tk.decode(i, false).unwrap(), *t, "{}", path.display());
    }
    assert!(tk.has_chat_template());
    let chat = tk
        .apply_chat_template(
            &serde_json::json!([{"role": "user", "content": "hi"}]),
            None,
            true,
        )
        .unwrap();
    assert_eq!(
        chat,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let cfg = &loaded.model.config;
    assert_eq!(tk.vocab_size(), cfg.vocab_size, "{}", path.display());
    let mut engine = Engine::new(Box::new(CpuBackend::new(loaded.model.clone(), 16, 16)), 64);
    // Longer than tiny-gemma3's 32-position window, so the sliding layers slide.
    let prompt = tk
        .encode(
            &"The quick brown fox jumps over the lazy dog. ".repeat(4),
            false,
        )
        .unwrap();
    assert!(prompt.len() > 32);
    let g = engine
        .generate(
            &GenerateRequest {
                prompt,
                params: SamplingParams::greedy(),
                max_tokens: 4,
                stop_ids: vec![],
                sequence: 0,
            },
            |_| {},
        )
        .unwrap();
    let l = &g.prompt_logits;
    assert_eq!(l.len(), cfg.vocab_size);
    assert!(l.iter().all(|x| x.is_finite()), "{}", path.display());
    assert!(
        l.iter().any(|&x| x != l[0]),
        "{}: all equal",
        path.display()
    );
    assert_eq!(g.tokens.len(), 4);
    (ids, g.prompt_logits)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn tiny_checkpoints_load_generate_and_agree_across_formats() {
    let dir = tempfile::tempdir().unwrap();
    for shape in SHAPES {
        let gguf = synth(&["--shape", shape, "--dtype", "bf16"], dir.path());
        assert_eq!(gguf, dir.path().join(format!("{shape}-bf16.gguf")));
        let hf_dir = dir.path().join(format!("{shape}-hf"));
        let hf = synth(
            &[
                "--shape",
                shape,
                "--format",
                "safetensors",
                "--dtype",
                "bf16",
            ],
            &hf_dir,
        );
        for f in [
            "config.json",
            "generation_config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "model.safetensors",
        ] {
            assert!(hf.join(f).exists(), "{shape}: no {f}");
        }
        let (ids_g, logits_g) = exercise(&gguf);
        let (ids_h, logits_h) = exercise(&hf);
        // The tokenizer built from GGUF metadata and the one read from tokenizer.json agree.
        assert_eq!(ids_g, ids_h, "{shape}");
        // Same seed, same model: llama's Q/K rows are permuted for GGUF and Gemma's norms stored
        // as 1 + w, so only the order of float operations differs.
        let d = max_abs_diff(&logits_g, &logits_h);
        assert!(
            d < 1e-5,
            "{shape}: GGUF and safetensors logits differ by {d}"
        );
        let q4 = synth(&["--shape", shape, "--dtype", "q4_k"], dir.path());
        let (ids_q, _) = exercise(&q4);
        assert_eq!(ids_q, ids_g, "{shape}");
    }
    for dtype in ["f16", "q8_0", "q6_k"] {
        let p = synth(&["--shape", "tiny-qwen3", "--dtype", dtype], dir.path());
        exercise(&p);
    }
}

#[test]
fn bytes_depend_on_the_seed_only() {
    let dir = tempfile::tempdir().unwrap();
    let run = |threads: &str, seed: &str, format: &str, dtype: &str, sub: &str| {
        let out = dir.path().join(sub);
        let mut args = vec!["--threads", threads, "synth", "--shape", "tiny-llama"];
        args.extend_from_slice(&["--seed", seed, "--format", format, "--dtype", dtype]);
        args.extend_from_slice(&["--out", out.to_str().unwrap()]);
        let o = memra(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        digest(Path::new(String::from_utf8(o.stdout).unwrap().trim()))
    };
    for (format, dtype) in [("gguf", "q4_k"), ("gguf", "bf16"), ("safetensors", "bf16")] {
        let a = run("1", "7", format, dtype, "a");
        let b = run("2", "7", format, dtype, "b");
        let c = run("2", "8", format, dtype, "c");
        assert_eq!(a, b, "{format} {dtype}: same seed, different bytes");
        assert_ne!(a, c, "{format} {dtype}: different seeds, same bytes");
    }
}

#[test]
fn sharded_safetensors_load_like_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let one = synth(
        &["--shape", "tiny-qwen3", "--format", "safetensors"],
        &dir.path().join("one"),
    );
    let many = synth(
        &[
            "--shape",
            "tiny-qwen3",
            "--format",
            "safetensors",
            "--max-shard-mib",
            "2",
        ],
        &dir.path().join("many"),
    );
    let index: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(many.join("model.safetensors.index.json")).unwrap(),
    )
    .unwrap();
    let shards: std::collections::BTreeSet<&str> = index["weight_map"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(shards.len() > 2, "{shards:?}");
    assert!(!many.join("model.safetensors").exists());
    assert_eq!(exercise(&one).1, exercise(&many).1);
    // Writing a single file over the sharded checkpoint removes the stale index and shards.
    let again = synth(
        &["--shape", "tiny-qwen3", "--format", "safetensors"],
        &dir.path().join("many"),
    );
    assert!(!again.join("model.safetensors.index.json").exists());
    assert_eq!(digest(&again), digest(&one));
}

#[test]
fn errors_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = memra(&["synth", "--shape", "llama-9b", "--out", out]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("unknown shape") && e.contains("llama-3.1-8b"),
        "{e}"
    );
    let o = memra(&[
        "synth",
        "--shape",
        "tiny-llama",
        "--dtype",
        "q4_k",
        "--format",
        "safetensors",
        "--out",
        out,
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("use --format gguf"), "{e}");
    let o = memra(&["synth", "--list"]);
    assert!(o.status.success());
    let listing = String::from_utf8_lossy(&o.stdout);
    for shape in ["llama-3.1-8b", "qwen3-8b", "qwen2.5-7b", "gemma-3-1b"] {
        assert!(listing.contains(shape), "{listing}");
    }
}
