//! memra's engine: model formats, tokenizers, models, backends, the paged KV cache, the sampler.
//! Reading order: [`engine`] (a generation) → [`kv`] (blocks) → [`models`] (weights and config)
//! → [`backend`] (the forward pass) → [`sample`] (the next token).

pub mod backend;
pub mod error;
pub mod formats;
pub mod kv;
pub mod models;
pub mod quant;

pub use error::{Error, Result};
pub mod engine;
pub mod loader;
pub mod sample;
pub mod tokenizer;

/// Sets the CPU backend's worker-thread count (once, before the first forward). Outputs do not
/// depend on it: every reduction's order is fixed per row.
pub fn set_threads(n: usize) -> std::result::Result<(), String> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global()
        .map_err(|e| e.to_string())
}
pub mod sched;
pub mod spec;
