//! The one typed configuration: built-in defaults, then an optional TOML file (`--config`), then
//! command-line flags, in that order. Every environment variable memra honours is read here (as a
//! clap `env` fallback), nowhere else.

use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod defines;
mod serve;
pub use defines::{attn_shared_fits, KERNEL_DEFINES};
pub use serve::ServeConfig;

/// The source of a value nobody set.
pub const BUILT_IN: &str = "built-in default";
/// The environment variables that stand in for flags of [`ConfigArgs`] (clap's `env`).
pub const ENV_VARS: [&str; 5] = [
    "MEMRA_CONFIG",
    "MEMRA_CACHE_DIR",
    "HF_ENDPOINT",
    "MEMRA_PYTHON",
    "MEMRA_API_KEY",
];
/// Removes those of [`ENV_VARS`] set to "" (`MEMRA_CONFIG= memra ...`): empty means unset, as for
/// most tools, rather than clap's "a value is required". Call before parsing the command line,
/// while single-threaded.
pub fn unset_empty_env_vars() {
    for var in ENV_VARS {
        if std::env::var_os(var).is_some_and(|v| v.is_empty()) {
            std::env::remove_var(var);
        }
    }
}

/// Help heading of the serve-only flags (hidden from the help of commands that refuse them).
pub const SERVE_HEADING: &str = "Serve options (memra serve)";

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
    /// KV cache values: "f32", or "f16" (each K/V value rounded to IEEE binary16 when it is
    /// appended; on CUDA stored in 2 bytes, halving the cache's bytes and its reads at depth).
    pub kv_cache_dtype: String,
    /// Most prompt tokens per prefill forward.
    pub prefill_chunk: usize,
    /// CUDA toolkit directory whose `include/` holds the headers NVRTC needs (besides
    /// `/usr/local/cuda`); from `$CUDA_HOME` or `$CUDA_PATH` when unset in the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_home: Option<PathBuf>,
    /// CUDA device ordinal.
    pub cuda_device: usize,
    /// Fraction of the GPU's memory memra may use for weights, activations and the KV cache
    /// (vLLM's `gpu_memory_utilization`); the KV cache gets what the rest leaves.
    pub gpu_memory_utilization: f64,
    /// Tuned per-device defaults: "auto" (the file in boards/defaults/ for this device, embedded
    /// in the binary), "none", or a path to such a file.
    pub device_defaults: String,
    /// CUDA kernel compile-time constants (`[kernel_defines]`, any of [`KERNEL_DEFINES`]) as
    /// `-D` defines; unset ones come from the device defaults or the kernels.
    pub kernel_defines: BTreeMap<String, String>,
    /// Speculative decoding pauses while more than this many sequences run (the concurrency where
    /// verify rows stop paying for themselves).
    pub spec_max_running: usize,
    /// A sequence stops speculating (probing again every 16 steps) while its estimated per-token
    /// acceptance (a draft token accepted given the ones before it were) is below this: the
    /// break-even acceptance of the measured verify costs, below which no draft length pays.
    pub spec_min_acceptance: f32,
    /// Cost of one more speculative verify row, in decode steps of one sequence: with each
    /// sequence's acceptance estimate it sets the draft length per step, up to the request's k
    /// (0: always k). `memra tune` measures it per device.
    pub spec_row_cost: f32,
    /// The fixed part of a speculative verify's cost in decode steps (≥ 1): a verify of k drafts
    /// costs about this + k × `spec_row_cost`. Above 1 where a step of more than one row takes a
    /// slower kernel path. `memra tune` measures it per device.
    pub spec_verify_base: f32,
    /// CUDA: steps of up to this many rows whose every row's logits are wanted (decode,
    /// speculative verify, a prompt's last one-token chunk) are captured into CUDA graphs and
    /// replayed; 0 turns graphs off. Logits are bit-identical either way (the CUDA lane's gates
    /// check it).
    pub cuda_graph_max_batch: usize,
    /// CUDA: batch-size bucket width for graphed steps. A step of t rows runs in the graph of
    /// the next power of two up to this, then the next multiple of it (8: 1, 2, 4, 8, 16, 24,
    /// 32, as vLLM captures), padded by repeating its last row; 1 captures every row count on
    /// its own. Fewer graphs to capture and fewer step buffers kept; logits are bit-identical
    /// either way (the CUDA lane's gates check it).
    pub cuda_graph_bucket: usize,
    /// `memra serve` settings (the `[serve]` table).
    pub serve: ServeConfig,
    /// Where each value came from (key → "built-in default", "config file …", "flag", or a
    /// defaults file); keys as in the TOML file (`serve.port`, `kernel_defines.LIN_TOKENS`).
    #[serde(skip)]
    pub sources: BTreeMap<String, String>,
}

impl Config {
    /// Whether the KV cache holds f16 values (`kv_cache_dtype = "f16"`, checked at resolve).
    pub fn kv_f16(&self) -> bool {
        self.kv_cache_dtype == "f16"
    }

    /// Where `key`'s value came from.
    pub fn source(&self, key: &str) -> &str {
        self.sources.get(key).map_or(BUILT_IN, String::as_str)
    }

    /// Sets a tunable key from a device defaults file. Errors: a key that is not tunable, or a
    /// value of the wrong type or out of range.
    pub fn set_tuned(&mut self, key: &str, v: &toml::Value) -> Result<()> {
        let int = || {
            v.as_integer()
                .filter(|&i| i > 0)
                .map(|i| i as usize)
                .with_context(|| format!("{key} must be a positive integer (got {v})"))
        };
        match key {
            "prefill_chunk" => self.prefill_chunk = int()?,
            "cuda_graph_max_batch" => {
                self.cuda_graph_max_batch = v
                    .as_integer()
                    .filter(|i| (0..=256).contains(i))
                    .map(|i| i as usize)
                    .with_context(|| format!("{key} must be an integer in [0, 256] (got {v})"))?
            }
            "cuda_graph_bucket" => {
                self.cuda_graph_bucket = v
                    .as_integer()
                    .filter(|i| (1..=256).contains(i))
                    .map(|i| i as usize)
                    .with_context(|| format!("{key} must be an integer in [1, 256] (got {v})"))?
            }
            "spec_max_running" => self.spec_max_running = int()?,
            "serve.max_batch_tokens" => self.serve.max_batch_tokens = int()?,
            "spec_row_cost" => {
                let f = v
                    .as_float()
                    .filter(|f| (0.0..=16.0).contains(f))
                    .with_context(|| format!("{key} must be a number in [0, 16] (got {v})"))?;
                self.spec_row_cost = f as f32;
            }
            "spec_verify_base" => {
                let f = v
                    .as_float()
                    .filter(|f| (1.0..=16.0).contains(f))
                    .with_context(|| format!("{key} must be a number in [1, 16] (got {v})"))?;
                self.spec_verify_base = f as f32;
            }
            "spec_min_acceptance" => {
                let f = v
                    .as_float()
                    .filter(|f| (0.0..=1.0).contains(f))
                    .with_context(|| format!("{key} must be a number in [0, 1] (got {v})"))?;
                self.spec_min_acceptance = f as f32;
            }
            other => anyhow::bail!(
                "{other} is not a tunable key (prefill_chunk, cuda_graph_max_batch, cuda_graph_bucket, \
                 spec_max_running, spec_min_acceptance, spec_row_cost, spec_verify_base, \
                 serve.max_batch_tokens)"
            ),
        }
        Ok(())
    }
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
            kv_cache_dtype: "f32".into(),
            prefill_chunk: 512,
            cuda_home: std::env::var_os("CUDA_HOME")
                .or_else(|| std::env::var_os("CUDA_PATH"))
                .map(PathBuf::from),
            cuda_device: 0,
            gpu_memory_utilization: 0.9,
            device_defaults: "auto".into(),
            kernel_defines: BTreeMap::new(),
            spec_max_running: 8,
            spec_min_acceptance: 0.1,
            spec_row_cost: 0.12,
            spec_verify_base: 1.0,
            cuda_graph_max_batch: 32,
            cuda_graph_bucket: 1,
            serve: ServeConfig::default(),
            sources: BTreeMap::new(),
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
    /// kv_block_size, kv_cache_mib, kv_cache_dtype, prefill_chunk, cuda_home, cuda_device,
    /// gpu_memory_utilization, device_defaults, cuda_graph_max_batch, cuda_graph_bucket,
    /// spec_max_running, spec_min_acceptance, spec_row_cost, spec_verify_base, a
    /// [kernel_defines] table, and a [serve] table: models, host, port,
    /// max_batch_tokens, max_running, queue_capacity, context_len, api_key, keyring, draft_model,
    /// speculative, speculative_k, max_body_bytes, body_timeout_secs, keepalive_secs,
    /// drain_secs).
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
    /// Tuned per-device defaults: auto, none, or a boards/defaults/*.toml path [default: auto].
    #[arg(long, global = true)]
    pub device_defaults: Option<String>,
    /// CUDA device ordinal [default: 0].
    #[arg(long, global = true)]
    pub cuda_device: Option<usize>,
    /// Fraction of GPU memory for weights + activations + KV cache [default: 0.9].
    #[arg(long, global = true)]
    pub gpu_memory_utilization: Option<f64>,
    /// CUDA graphs for decode steps of up to this many rows (at most 256), 0 = off [default: 32].
    #[arg(long, global = true)]
    pub cuda_graph_max_batch: Option<usize>,
    /// Batch-size bucket width of graphed steps: pad t rows to the next power of two up to it,
    /// then to its next multiple (8: 1, 2, 4, 8, 16, 24, 32); 1 = a graph per row count
    /// [default: 1].
    #[arg(long, global = true)]
    pub cuda_graph_bucket: Option<usize>,
    /// KV cache size in MiB on the CPU backend (CUDA sizes it from GPU memory) [default: 512].
    #[arg(long, global = true)]
    pub kv_cache_mib: Option<usize>,
    /// KV cache values: f32, or f16 (rounded on append; 2 bytes a value on CUDA, stored as f32 on
    /// the CPU) [default: f32].
    #[arg(long, global = true)]
    pub kv_cache_dtype: Option<String>,
    /// Most prompt tokens per prefill forward [default: 512].
    #[arg(long, global = true)]
    pub prefill_chunk: Option<usize>,
    /// serve: address to bind [default: 127.0.0.1].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub host: Option<String>,
    /// serve: port to bind, 0 = any free port [default: 8000].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub port: Option<u16>,
    /// serve: most tokens per engine step [default: 512].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub max_batch_tokens: Option<usize>,
    /// serve: most sequences running at once [default: 64].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub max_running: Option<usize>,
    /// serve: most requests waiting before 429 [default: 256].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub queue_capacity: Option<usize>,
    /// serve: context length, 0 = the model's own capped by the KV cache [default: 0].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub context_len: Option<usize>,
    /// serve: bearer key required on the API routes [default: none].
    #[arg(
        long,
        global = true,
        help_heading = SERVE_HEADING,
        env = "MEMRA_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
    /// serve: keyring file (sha256 of each key, its tenant and concurrency cap) [default: none].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub keyring: Option<PathBuf>,
    /// serve: draft model for speculative decoding with method "draft" [default: none].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub draft_model: Option<String>,
    /// serve: speculation for requests without the `speculative` extension: off, ngram[:N],
    /// layerskip:L or draft; the policy still decides each step [default: ngram].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub speculative: Option<String>,
    /// serve: most draft tokens per verify for --speculative (1..=16) [default: 4].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub speculative_k: Option<usize>,
    /// serve: seconds between SSE keep-alive comments [default: 10].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub keepalive_secs: Option<u64>,
    /// serve: seconds in-flight requests get to finish after SIGTERM [default: 30].
    #[arg(long, global = true, help_heading = SERVE_HEADING)]
    pub drain_secs: Option<u64>,
}

impl ConfigArgs {
    /// The serve-only flags given (`--port`, ...), for commands that would ignore them.
    /// `--api-key` is left out: it is usually set through `MEMRA_API_KEY` for every command.
    pub fn serve_flags(&self) -> Vec<&'static str> {
        [
            ("--host", self.host.is_some()),
            ("--port", self.port.is_some()),
            ("--max-batch-tokens", self.max_batch_tokens.is_some()),
            ("--max-running", self.max_running.is_some()),
            ("--queue-capacity", self.queue_capacity.is_some()),
            ("--context-len", self.context_len.is_some()),
            ("--keyring", self.keyring.is_some()),
            ("--draft-model", self.draft_model.is_some()),
            ("--speculative", self.speculative.is_some()),
            ("--speculative-k", self.speculative_k.is_some()),
            ("--keepalive-secs", self.keepalive_secs.is_some()),
            ("--drain-secs", self.drain_secs.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, set)| set.then_some(f))
        .collect()
    }

    /// Defaults, then the TOML file, then flags.
    pub fn resolve(&self) -> Result<Config> {
        let mut c = match &self.config {
            Some(p) => {
                let (c, keys) = load_toml(p)?;
                let mut c = c;
                let src = format!("config file {}", p.display());
                for k in keys {
                    c.sources.insert(k, src.clone());
                }
                c
            }
            None => Config::default(),
        };
        let flags: Vec<&str> = [
            ("cache_dir", self.cache_dir.is_some()),
            ("hf_endpoint", self.hf_endpoint.is_some()),
            ("python", self.python.is_some()),
            ("backend", self.backend.is_some()),
            ("threads", self.threads.is_some()),
            ("device_defaults", self.device_defaults.is_some()),
            ("cuda_device", self.cuda_device.is_some()),
            (
                "gpu_memory_utilization",
                self.gpu_memory_utilization.is_some(),
            ),
            ("kv_cache_mib", self.kv_cache_mib.is_some()),
            ("kv_cache_dtype", self.kv_cache_dtype.is_some()),
            ("cuda_graph_max_batch", self.cuda_graph_max_batch.is_some()),
            ("cuda_graph_bucket", self.cuda_graph_bucket.is_some()),
            ("prefill_chunk", self.prefill_chunk.is_some()),
            ("serve.host", self.host.is_some()),
            ("serve.port", self.port.is_some()),
            ("serve.max_batch_tokens", self.max_batch_tokens.is_some()),
            ("serve.max_running", self.max_running.is_some()),
            ("serve.queue_capacity", self.queue_capacity.is_some()),
            ("serve.context_len", self.context_len.is_some()),
            ("serve.api_key", self.api_key.is_some()),
            ("serve.keyring", self.keyring.is_some()),
            ("serve.draft_model", self.draft_model.is_some()),
            ("serve.speculative", self.speculative.is_some()),
            ("serve.speculative_k", self.speculative_k.is_some()),
            ("serve.keepalive_secs", self.keepalive_secs.is_some()),
            ("serve.drain_secs", self.drain_secs.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        // A value clap took from the environment (the `env` fallbacks above) says so.
        let from_env = |var: &str, v: Option<String>| v.is_some() && std::env::var(var).ok() == v;
        let env_keys = [
            (
                "cache_dir",
                "MEMRA_CACHE_DIR",
                self.cache_dir
                    .as_ref()
                    .map(|p| p.to_string_lossy().into_owned()),
            ),
            ("hf_endpoint", "HF_ENDPOINT", self.hf_endpoint.clone()),
            ("python", "MEMRA_PYTHON", self.python.clone()),
            ("serve.api_key", "MEMRA_API_KEY", self.api_key.clone()),
        ];
        for k in flags {
            let src = env_keys
                .iter()
                .find(|(key, var, v)| *key == k && from_env(var, v.clone()))
                .map_or("flag".to_string(), |(_, var, _)| {
                    format!("environment {var}")
                });
            c.sources.insert(k.to_string(), src);
        }
        if let Some(v) = &self.device_defaults {
            c.device_defaults = v.clone();
        }
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
        if let Some(v) = self.cuda_device {
            c.cuda_device = v;
        }
        if let Some(v) = self.gpu_memory_utilization {
            c.gpu_memory_utilization = v;
        }
        if let Some(v) = self.kv_cache_mib {
            c.kv_cache_mib = v;
        }
        if let Some(v) = &self.kv_cache_dtype {
            c.kv_cache_dtype = v.clone();
        }
        if let Some(v) = self.cuda_graph_max_batch {
            c.cuda_graph_max_batch = v;
        }
        if let Some(v) = self.cuda_graph_bucket {
            c.cuda_graph_bucket = v;
        }
        if let Some(v) = self.prefill_chunk {
            c.prefill_chunk = v;
        }
        let s = &mut c.serve;
        if let Some(v) = &self.host {
            s.host = v.clone();
        }
        if let Some(v) = self.port {
            s.port = v;
        }
        if let Some(v) = self.max_batch_tokens {
            s.max_batch_tokens = v;
        }
        if let Some(v) = self.max_running {
            s.max_running = v;
        }
        if let Some(v) = self.queue_capacity {
            s.queue_capacity = v;
        }
        if let Some(v) = self.context_len {
            s.context_len = v;
        }
        if let Some(v) = &self.api_key {
            s.api_key = Some(v.clone());
        }
        if let Some(v) = &self.keyring {
            s.keyring = Some(v.clone());
        }
        if let Some(v) = &self.draft_model {
            s.draft_model = Some(v.clone());
        }
        if let Some(v) = &self.speculative {
            s.speculative = v.clone();
        }
        if let Some(v) = self.speculative_k {
            s.speculative_k = v;
        }
        if let Some(v) = self.keepalive_secs {
            s.keepalive_secs = v;
        }
        if let Some(v) = self.drain_secs {
            s.drain_secs = v;
        }
        // Each value error names its key and where the value came from (a file, a flag, ...).
        let from = |key: &str| format!("{key} (from {})", c.source(key));
        for (key, v) in [
            ("serve.max_batch_tokens", c.serve.max_batch_tokens),
            ("serve.max_running", c.serve.max_running),
            ("serve.queue_capacity", c.serve.queue_capacity),
            ("serve.keepalive_secs", c.serve.keepalive_secs as usize),
            (
                "serve.body_timeout_secs",
                c.serve.body_timeout_secs as usize,
            ),
        ] {
            if v == 0 {
                anyhow::bail!("{} must be positive (got 0)", from(key));
            }
        }
        let spec = c.serve.default_spec().map_err(|e| {
            anyhow::anyhow!(
                "{} / {}: {e}",
                from("serve.speculative"),
                from("serve.speculative_k")
            )
        })?;
        if spec.is_some_and(|p| p.method == memra_engine::spec::SpecMethod::DraftModel)
            && c.serve.draft_model.is_none()
        {
            anyhow::bail!("serve.speculative = \"draft\" needs serve.draft_model (--draft-model)");
        }
        if !matches!(c.backend.as_str(), "cpu" | "cuda" | "auto") {
            anyhow::bail!(
                "{} must be cpu, cuda or auto (got {:?})",
                from("backend"),
                c.backend
            );
        }
        for (key, v) in [
            ("kv_block_size", c.kv_block_size),
            ("kv_cache_mib", c.kv_cache_mib),
            ("prefill_chunk", c.prefill_chunk),
        ] {
            if v == 0 {
                anyhow::bail!("{} must be positive (got 0)", from(key));
            }
        }
        if !matches!(c.kv_cache_dtype.as_str(), "f32" | "f16") {
            anyhow::bail!(
                "kv_cache_dtype must be f32 or f16 (got {:?}, from {})",
                c.kv_cache_dtype,
                c.source("kv_cache_dtype")
            );
        }
        for (k, v) in &c.kernel_defines {
            if !KERNEL_DEFINES.contains(&k.as_str()) {
                anyhow::bail!(
                    "{}: unknown define; known defines are {KERNEL_DEFINES:?}",
                    from(&format!("kernel_defines.{k}"))
                );
            }
            // QLIN_FACTOR, QLIN_INT, QLIN_IMMA, QIMMA_PF, QIMMA_BPF, QLIN_MT, QTC, QTC_DB,
            // QTC_DB_BIG, QTC_SK_DB, QTC_Q8_DB_BIG, QTC_Q8_DB, QTC_TOKFAST, QTC_Q8_0, QTC_GEMM_XASYNC,
            // TCW_BULK, TCW_CLUSTER, TCW_WS, TCW_TMA, TCW_WS_Q, TCW_PP, TCK_LDG, TCK_BULK, TCK_Q8_0, TCK_FUSE, TCK_CLUSTER, TCS_GLU, TCS_ROPE, ATTN_KORDER, ATTN_ROWS_KORDER, ATTN_TILE, ATTN_SKIP, ATTN_KV16W, ATTN_V16W, ATTN_PF,
            // PDL and PDL_EARLY are switches (0 or 1); QTC_Q8_M1 is 0 or 2; QTC_Q4_K 0 to 2; QTC_XSPLIT is 1 to 3
            // bf16 parts, QTC_SK 0 to 3, QTC_GEMM 0 to 3, TCG2_STAGES and TCW_STAGES 2 to 8,
            // TCK_STAGES and TCK_CL_STAGES 2 to 16 (more than TCK_UB, TCK_CL_UB), TCK_UB and TCK_CL_UB 1 to 8, TCW_UPB and TCW_UPB_Q 1 to 4, TCW_WG and TCK_WG 1 to 3, ATTN_VBATCH and ATTN_ROWS_VBATCH 1 to 16; QLIN_M1_PREFETCH, QTC_M1_PREFETCH QTC_SPLIT_BIG, QTC_WT_ALT (0: off), TCK_MIN_MB,
            // QTC_GEMM_MIN_BIG (0: as QTC_GEMM_MIN), ATTN_WIDE_ROWS, ATTN_WIDE_ROWS_F16, ATTN_WIDE_SPLITS and ATTN_ROWS (0: never) may be 0;
            // ATTN_ROWS_Q and ATTN_ROWS_HEADS 1 to 8, ATTN_ROWS_MINB 1 to 4, ATTN_TILE_ROWS 1 to 16, ATTN_TILE_MINB 1 to 2; the rest are sizes.
            let switch = matches!(
                k.as_str(),
                "QLIN_FACTOR"
                    | "QLIN_INT"
                    | "QLIN_IMMA"
                    | "QIMMA_PF"
                    | "QIMMA_BPF"
                    | "QLIN_MT"
                    | "QTC"
                    | "QTC_DB"
                    | "QTC_DB_BIG"
                    | "QTC_Q8_DB_BIG"
                    | "QTC_Q8_DB"
                    | "QTC_SK_DB"
                    | "QTC_TOKFAST"
                    | "QTC_Q8_0"
                    | "QTC_GEMM_XASYNC"
                    | "TCW_BULK"
                    | "TCW_CLUSTER"
                    | "TCW_WS"
                    | "TCW_TMA"
                    | "TCW_WS_Q"
                    | "TCW_PP"
                    | "TCK_LDG"
                    | "TCK_BULK"
                    | "TCK_Q8_0"
                    | "TCK_FUSE"
                    | "TCK_CLUSTER"
                    | "TCS_GLU"
                    | "TCS_ROPE"
                    | "ATTN_KORDER"
                    | "ATTN_KV16W"
                    | "ATTN_V16W"
                    | "ATTN_PF"
                    | "ATTN_ROWS_KORDER"
                    | "ATTN_TILE"
                    | "ATTN_SKIP"
                    | "PDL"
                    | "PDL_EARLY"
            );
            match v.parse::<u32>() {
                Ok(n) if switch && n <= 1 => {}
                Ok(n) if k == "QTC_XSPLIT" && (1..=3).contains(&n) => {}
                Ok(n) if k == "QTC_Q8_M1" && (n == 0 || n == 2) => {}
                _ if k == "QTC_Q8_M1" => anyhow::bail!(
                    "kernel_defines.QTC_Q8_M1 must be \"0\" (the general loop) or \"2\" (the Q8_0 one-token loop at M = 1, same bits; its first form, 1, was removed after run 111) (got {v:?})"
                ),
                Ok(n) if k == "QTC_Q4_K" && n <= 2 => {}
                _ if k == "QTC_Q4_K" => anyhow::bail!(
                    "kernel_defines.QTC_Q4_K must be \"0\" (exact integers), \"1\" (tensor cores, the one-token entries for every M) or \"2\" (also the wgmma split-K and GEMM forms, sm_90a) (got {v:?})"
                ),
                Ok(n) if k == "QTC_SK" && n <= 3 => {}
                Ok(n) if k == "QTC_GEMM" && n <= 3 => {}
                _ if k == "QTC_GEMM" => anyhow::bail!(
                    "kernel_defines.QTC_GEMM must be \"0\", \"1\" (the tiled form), \"2\" (its second form, kernels/linear_tcg.cu) or \"3\" (wgmma, sm_90a, kernels/linear_tcw.cu) (got {v:?})"
                ),
                Ok(n) if matches!(k.as_str(), "TCW_WG" | "TCK_WG") && (1..=3).contains(&n) => {}
                _ if matches!(k.as_str(), "TCW_WG" | "TCK_WG") => {
                    anyhow::bail!("kernel_defines.{k} must be 1 to 3 warpgroups (got {v:?})")
                }
                Ok(n) if matches!(k.as_str(), "ATTN_VBATCH" | "ATTN_ROWS_VBATCH") && (1..=16).contains(&n) => {}
                _ if matches!(k.as_str(), "ATTN_VBATCH" | "ATTN_ROWS_VBATCH") => {
                    anyhow::bail!("kernel_defines.{k} must be 1 to 16 positions (got {v:?})")
                }
                Ok(n) if matches!(k.as_str(), "ATTN_HEADS_WIDE" | "ATTN_ROWS_HEADS" | "ATTN_ROWS_Q") && (1..=8).contains(&n) => {}
                _ if matches!(k.as_str(), "ATTN_HEADS_WIDE" | "ATTN_ROWS_HEADS" | "ATTN_ROWS_Q") => {
                    anyhow::bail!("kernel_defines.{k} must be 1 to 8 (query heads a block, or rows) (got {v:?})")
                }
                Ok(n) if k == "ATTN_ROWS_MINB" && (1..=4).contains(&n) => {}
                Ok(n) if k == "ATTN_TILE_ROWS" && (1..=16).contains(&n) => {}
                Ok(n) if k == "ATTN_TILE_MINB" && (1..=2).contains(&n) => {}
                _ if k == "ATTN_TILE_MINB" => anyhow::bail!("kernel_defines.ATTN_TILE_MINB must be 1 or 2 blocks (got {v:?})"),
                _ if k == "ATTN_TILE_ROWS" => anyhow::bail!("kernel_defines.ATTN_TILE_ROWS must be 1 to 16 rows (got {v:?})"),
                _ if k == "ATTN_ROWS_MINB" => anyhow::bail!("kernel_defines.ATTN_ROWS_MINB must be 1 to 4 blocks (got {v:?})"),
                Ok(n) if matches!(k.as_str(), "TCW_UPB" | "TCW_UPB_Q") && (1..=4).contains(&n) => {}
                _ if matches!(k.as_str(), "TCW_UPB" | "TCW_UPB_Q") => anyhow::bail!(
                    "kernel_defines.{k} must be 1 to 4 units between the wgmma GEMM's barriers (got {v:?})"
                ),
                Ok(n) if k == "TCK_CL_MAX" && (2..=16).contains(&n) => {}
                _ if k == "TCK_CL_MAX" => {
                    anyhow::bail!("kernel_defines.TCK_CL_MAX must be 2 to 16 blocks a cluster (got {v:?})")
                }
                Ok(n) if matches!(k.as_str(), "TCK_UB" | "TCK_CL_UB") && (1..=8).contains(&n) => {}
                _ if matches!(k.as_str(), "TCK_UB" | "TCK_CL_UB") => {
                    anyhow::bail!("kernel_defines.{k} must be 1 to 8 units (got {v:?})")
                }
                Ok(n) if matches!(k.as_str(), "TCK_STAGES" | "TCK_CL_STAGES") && (2..=16).contains(&n) => {}
                _ if matches!(k.as_str(), "TCK_STAGES" | "TCK_CL_STAGES") => {
                    anyhow::bail!("kernel_defines.{k} must be 2 to 16 (got {v:?})")
                }
                Ok(n) if matches!(k.as_str(), "TCG2_STAGES" | "TCW_STAGES") && (2..=8).contains(&n) => {}
                _ if matches!(k.as_str(), "TCG2_STAGES" | "TCW_STAGES") => {
                    anyhow::bail!("kernel_defines.{k} must be 2 to 8 (got {v:?})")
                }
                _ if k == "QTC_SK" => anyhow::bail!(
                    "kernel_defines.QTC_SK must be \"0\", \"1\" (every matrix), \"2\" (the BF16 QTC_SPLIT_BIG matrices only) or \"3\" (wgmma, every matrix, sm_90a) (got {v:?})"
                ),
                Ok(n) if (k.starts_with("QLIN_M1_PREFETCH") || k == "QTC_M1_PREFETCH" || k == "QTC_SPLIT_BIG" || k == "QTC_WT_ALT" || k == "TCK_MIN_MB" || k == "QTC_GEMM_MIN_BIG" || k == "ATTN_WIDE_ROWS" || k == "ATTN_WIDE_ROWS_F16" || k == "ATTN_WIDE_SPLITS" || k == "ATTN_ROWS") && n <= 65536 => {}
                _ if k == "QTC_XSPLIT" => {
                    anyhow::bail!("kernel_defines.QTC_XSPLIT must be \"1\", \"2\" or \"3\" (got {v:?})")
                }
                Ok(n) if !switch && (1..=65536).contains(&n) => {}
                _ if switch => anyhow::bail!("kernel_defines.{k} must be \"0\" or \"1\" (got {v:?})"),
                _ => anyhow::bail!(
                    "kernel_defines.{k} must be a positive integer of at most 65536, quoted (got {v:?})"
                ),
            }
        }
        // With tuned defaults to come, the combinations are checked on the merged set
        // (`defaults::apply`): ATTN_TILE = 1 may lean on the device file's ATTN_ROWS.
        if c.device_defaults == "none" {
            check_define_combinations(&c.kernel_defines)?;
        }
        if !(0.0..=1.0).contains(&c.spec_min_acceptance) {
            anyhow::bail!(
                "{} must be in [0, 1] (got {})",
                from("spec_min_acceptance"),
                c.spec_min_acceptance
            );
        }
        if c.spec_max_running == 0 {
            anyhow::bail!("{} must be positive (got 0)", from("spec_max_running"));
        }
        if c.cuda_graph_max_batch > 256 {
            anyhow::bail!(
                "cuda_graph_max_batch must be at most 256 (got {}, from {})",
                c.cuda_graph_max_batch,
                c.source("cuda_graph_max_batch")
            );
        }
        if !(1..=256).contains(&c.cuda_graph_bucket) {
            anyhow::bail!(
                "cuda_graph_bucket must be 1 to 256 rows (got {}, from {})",
                c.cuda_graph_bucket,
                c.source("cuda_graph_bucket")
            );
        }
        if !(0.0..=16.0).contains(&c.spec_row_cost) {
            anyhow::bail!(
                "{} must be in [0, 16] (got {})",
                from("spec_row_cost"),
                c.spec_row_cost
            );
        }
        if !(1.0..=16.0).contains(&c.spec_verify_base) {
            anyhow::bail!(
                "{} must be in [1, 16] (got {})",
                from("spec_verify_base"),
                c.spec_verify_base
            );
        }
        if !(c.gpu_memory_utilization > 0.0 && c.gpu_memory_utilization <= 1.0) {
            anyhow::bail!(
                "{} must be in (0, 1] (got {})",
                from("gpu_memory_utilization"),
                c.gpu_memory_utilization
            );
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if c.threads > 4 * cores {
            anyhow::bail!(
                "{} = {} is more than 4x this machine's {cores} cores; use 0 for one per core",
                from("threads"),
                c.threads
            );
        }
        Ok(c)
    }
}

/// The file's configuration and the keys it set (`serve.port`, `kernel_defines.LIN_TOKENS`).
fn load_toml(path: &Path) -> Result<(Config, Vec<String>)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let c: Config = toml::from_str(&text).map_err(|e| {
        // (An unknown key's message lists every known one, kernel_defines among them.)
        let msg = e.to_string();
        let hint = if msg.contains("kernel_defines") && !msg.contains("unknown field") {
            " (kernel_defines values are quoted integers, e.g. LIN_TOKENS = \"4\")"
        } else {
            ""
        };
        anyhow::Error::new(e).context(format!("{}: invalid config{hint}", path.display()))
    })?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{}: invalid config", path.display()))?;
    let mut keys = Vec::new();
    for (k, v) in &table {
        match v {
            toml::Value::Table(t) => keys.extend(t.keys().map(|k2| format!("{k}.{k2}"))),
            _ => keys.push(k.clone()),
        }
    }
    Ok((c, keys))
}

/// The kernel defines' combination rules (the wgmma forms' and the attention blocks' shared
/// memory), on a whole set: the configuration's as it resolves when no tuned defaults apply
/// (`device_defaults = "none"`), else the configuration's merged with the tuned ones
/// ([`crate::defaults::apply`]). Errors: the first rule the set breaks, by name.
pub fn check_define_combinations(defs: &BTreeMap<String, String>) -> Result<()> {
    let tck = |k: &str, d: u32| defs.get(k).and_then(|v| v.parse::<u32>().ok()).unwrap_or(d);
    defines::check_gemm_combinations(tck)?;
    if let Err(e) = attn_shared_fits(tck) {
        anyhow::bail!("kernel_defines: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
