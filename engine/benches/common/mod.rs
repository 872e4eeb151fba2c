//! Shared by the CPU benches: deterministic data. (Model and repository paths come from the
//! tests' helpers, engine/tests/common.)
#![allow(dead_code)]

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
