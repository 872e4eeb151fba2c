//! Bad model files give an error that names the file and what is wrong, never a panic.

mod common;

use memra_engine::formats::gguf::GgufFile;
use memra_engine::loader;
use std::path::Path;

fn load_err(path: &Path) -> String {
    match loader::load(path) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn truncated_gguf_names_file_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read(common::model_path("smollm2-135m-instruct")).unwrap();
    let p = dir.path().join("cut.gguf");
    std::fs::write(&p, &src[..4 << 20]).unwrap();
    let e = load_err(&p);
    assert!(e.contains("cut.gguf") && e.contains("truncated"), "{e}");
}

#[test]
fn every_prefix_of_a_gguf_is_an_error_not_a_panic() {
    let src = std::fs::read(common::repo().join("gates/oracle/fixtures/quant_types.gguf")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("prefix.gguf");
    let full =
        GgufFile::open(common::repo().join("gates/oracle/fixtures/quant_types.gguf")).unwrap();
    let data_end = full.tensors.iter().map(|t| t.range.end).max().unwrap();
    let mut errors = 0;
    let cuts: Vec<usize> = (0..data_end).step_by(97).collect();
    for &cut in &cuts {
        std::fs::write(&p, &src[..cut]).unwrap();
        let r = std::panic::catch_unwind(|| GgufFile::open(&p).map(|_| ()));
        assert!(r.is_ok(), "panic at cut {cut}");
        if r.unwrap().is_err() {
            errors += 1;
        }
    }
    assert_eq!(
        errors,
        cuts.len(),
        "every prefix that cuts into tensor data is rejected"
    );
}

#[test]
fn corrupt_bytes_never_panic() {
    let src = std::fs::read(common::repo().join("gates/oracle/fixtures/quant_types.gguf")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("flip.gguf");
    // Deterministic byte flips across the header and metadata region.
    for i in 0..400usize {
        let mut b = src.clone();
        let at = (i * 7919) % 4096.min(b.len());
        b[at] ^= 0xA5;
        std::fs::write(&p, &b).unwrap();
        let r = std::panic::catch_unwind(|| {
            let _ = GgufFile::open(&p).map(|g| g.tensors.len());
        });
        assert!(r.is_ok(), "panic with byte {at} flipped");
    }
}

#[test]
fn bad_magic_and_version() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.gguf");
    std::fs::write(&p, b"GGML\x03\0\0\0").unwrap();
    assert!(load_err(&p).contains("not a GGUF file"));
    std::fs::write(&p, b"GGUF\x09\0\0\0").unwrap();
    let e = load_err(&p);
    assert!(e.contains("x.gguf") && e.contains("version 9"), "{e}");
}

#[test]
fn unknown_architecture_and_tensor_type() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("arch.gguf");
    common::write_gguf(&p, &[("general.architecture", "mamba9")], &[], &[]);
    let e = load_err(&p);
    assert!(
        e.contains("arch.gguf") && e.contains("mamba9") && e.contains("not supported"),
        "{e}"
    );
    let p = dir.path().join("type.gguf");
    // ggml type 16 is IQ2_XXS.
    common::write_gguf(
        &p,
        &[("general.architecture", "llama")],
        &[],
        &[("w", 16, vec![256, 1], vec![0; 66])],
    );
    let e = load_err(&p);
    assert!(
        e.contains("type.gguf") && e.contains("IQ2_XXS") && e.contains("tensor w"),
        "{e}"
    );
}

#[test]
fn missing_config_tokenizer_and_tensors_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("noconf.gguf");
    common::write_gguf(&p, &[("general.architecture", "llama")], &[], &[]);
    let e = load_err(&p);
    assert!(
        e.contains("noconf.gguf") && e.contains("llama.embedding_length"),
        "{e}"
    );
    // A complete llama config, but no tokenizer metadata and no tensors.
    let ints = [
        ("llama.embedding_length", 64),
        ("llama.feed_forward_length", 128),
        ("llama.block_count", 1),
        ("llama.attention.head_count", 2),
        ("llama.attention.head_count_kv", 1),
        ("llama.vocab_size", 16),
    ];
    let p = dir.path().join("notok.gguf");
    common::write_gguf(&p, &[("general.architecture", "llama")], &ints, &[]);
    let e = load_err(&p);
    assert!(
        e.contains("notok.gguf") && e.contains("tokenizer.ggml.model"),
        "{e}"
    );
    let p = dir.path().join("notensor.gguf");
    common::write_gguf(
        &p,
        &[
            ("general.architecture", "llama"),
            ("tokenizer.ggml.model", "gpt2"),
            ("tokenizer.ggml.pre", "default"),
        ],
        &ints,
        &[],
    );
    let e = load_err(&p);
    assert!(
        e.contains("notensor.gguf") && e.contains("tokenizer.ggml.tokens"),
        "{e}"
    );
}

#[test]
fn hf_directory_problems_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(load_err(d).contains("no config.json"));
    std::fs::write(d.join("config.json"), "{\"model_type\": \"qwen3\"").unwrap();
    let e = load_err(d);
    assert!(e.contains("config.json") && e.contains("invalid"), "{e}");
    std::fs::write(
        d.join("config.json"),
        r#"{"model_type":"qwen3","hidden_size":64,"intermediate_size":128,"num_hidden_layers":1,
            "num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,"vocab_size":16}"#,
    )
    .unwrap();
    assert!(load_err(d).contains("no model.safetensors"));
    std::fs::write(
        d.join("model.safetensors"),
        b"\x10\0\0\0\0\0\0\0{not json}      ",
    )
    .unwrap();
    let e = load_err(d);
    assert!(
        e.contains("model.safetensors") && e.contains("invalid safetensors header"),
        "{e}"
    );
    assert!(load_err(&d.join("nope.gguf")).contains("no such file"));
}

/// A KV cache past what the allocator gives, or whose size overflows, is an error naming the
/// size and the settings to lower, not an abort (a `kv_cache_mib` typo once killed `memra run`).
#[test]
fn oversized_cpu_kv_cache_is_an_error() {
    use memra_engine::backend::cpu::CpuBackend;
    let m = memra_engine::loader::load(&common::model_path("smollm2-135m-instruct")).unwrap();
    // About 1.7 PB: refused by the allocator.
    let e = CpuBackend::try_new(m.model.clone(), 1 << 30, 1 << 10)
        .err()
        .expect("refused");
    let msg = e.to_string();
    assert!(msg.contains("kv_cache_mib") && msg.contains("MiB"), "{msg}");
    let e = CpuBackend::try_new(m.model.clone(), usize::MAX / 2, 16)
        .err()
        .expect("overflow");
    assert!(e.to_string().contains("overflows"), "{e}");
    // A small one still works.
    assert!(CpuBackend::try_new(m.model.clone(), 8, 16).is_ok());
}
