//! Shared by the CPU benches: deterministic data and the path of the cached SmolLM2 file.
#![allow(dead_code)]

use std::path::PathBuf;

/// splitmix64: a tiny deterministic generator, so every run measures the same data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn sym(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    /// Roughly normal (sum of four uniforms), mean 0, sd about 1.
    pub fn normal(&mut self) -> f32 {
        (self.sym() + self.sym() + self.sym() + self.sym()) * 0.866
    }
}

/// The cached GGUF of a catalog model (`$MEMRA_CACHE_DIR` or `~/.cache/memra`), if pulled.
pub fn cached_model(name: &str) -> Option<PathBuf> {
    let cache = std::env::var_os("MEMRA_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/memra")))?;
    let p = cache.join("models").join(name).join(format!("{name}.gguf"));
    p.exists().then_some(p)
}

/// Repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}
