//! Shared test helpers: locating the real models and the repository's reference data.
#![allow(dead_code)]

use std::path::PathBuf;

/// The three catalog models the tests run against.
pub const REAL_MODELS: [&str; 3] = [
    "smollm2-135m-instruct",
    "gemma-3-270m",
    "qwen2.5-coder-0.5b-instruct",
];

/// Repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Path of a pulled catalog model, if it is there: `$MEMRA_CACHE_DIR` (as `memra pull` uses),
/// else `~/.cache/memra`. The tests' and the benches' one place for it.
pub fn cached_model(name: &str) -> Option<PathBuf> {
    let cache = std::env::var_os("MEMRA_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/memra")))?;
    let p = cache.join("models").join(name).join(format!("{name}.gguf"));
    p.exists().then_some(p)
}

/// [`cached_model`], panicking with the command to run when it is missing: a test that silently
/// skips cannot fail.
pub fn model_path(name: &str) -> PathBuf {
    cached_model(name).unwrap_or_else(|| {
        panic!("{name} is not in the model cache: run `memra pull {name}` (or set MEMRA_CACHE_DIR)")
    })
}

/// Reads a JSON file under the repository.
pub fn json(rel: &str) -> serde_json::Value {
    let p = repo().join(rel);
    serde_json::from_str(
        &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

/// Reads a JSON-lines file under the repository.
pub fn jsonl(rel: &str) -> Vec<serde_json::Value> {
    let p = repo().join(rel);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A minimal GGUF v3 writer for crafting malformed or unusual files in tests: string and u32
/// metadata, tensors given as (name, ggml type id, dims, bytes).
pub fn write_gguf(
    path: &std::path::Path,
    meta: &[(&str, &str)],
    ints: &[(&str, u32)],
    tensors: &[(&str, u32, Vec<u64>, Vec<u8>)],
) {
    let mut b: Vec<u8> = Vec::new();
    let s = |b: &mut Vec<u8>, x: &str| {
        b.extend((x.len() as u64).to_le_bytes());
        b.extend(x.as_bytes());
    };
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend(((meta.len() + ints.len()) as u64).to_le_bytes());
    for (k, v) in meta {
        s(&mut b, k);
        b.extend(8u32.to_le_bytes());
        s(&mut b, v);
    }
    for (k, v) in ints {
        s(&mut b, k);
        b.extend(4u32.to_le_bytes());
        b.extend(v.to_le_bytes());
    }
    let mut off = 0u64;
    for (name, ty, dims, data) in tensors {
        s(&mut b, name);
        b.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            b.extend(d.to_le_bytes());
        }
        b.extend(ty.to_le_bytes());
        b.extend(off.to_le_bytes());
        off += (data.len() as u64).div_ceil(32) * 32;
    }
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    for (_, _, _, data) in tensors {
        b.extend(data);
        while !b.len().is_multiple_of(32) {
            b.push(0);
        }
    }
    std::fs::write(path, b).unwrap();
}
