//! Building compute backends from the configuration: `--backend cpu|cuda|auto`, the KV cache size
//! (MiB on the CPU; a fraction of GPU memory on CUDA), and the one CUDA device a process shares
//! between its models (weights are uploaded once per model and shared by every backend on it).

use crate::config::Config;
use anyhow::{bail, Result};
use memra_engine::backend::cpu::CpuBackend;
use memra_engine::backend::cuda::backend::{CudaBackend, CudaWeights};
use memra_engine::backend::cuda::compile::KernelOptions;
use memra_engine::backend::cuda::graph::bucket_rows;
use memra_engine::backend::cuda::ops::ATTN_PART_BYTES;
use memra_engine::backend::cuda::{self, CudaDevice};
use memra_engine::backend::Backend;
use memra_engine::models::Model;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// Builds a backend on the thread that calls it (the scheduler's own thread).
pub type BackendFactory = memra_engine::sched::BackendFactory;

/// Kernel compile options from the configuration: CUDA headers from `extra` directories, then
/// `$CUDA_HOME/include` (config `cuda_home`), then `/usr/local/cuda/include`; compiled images
/// cached under `<cache_dir>/kernels`.
pub fn kernel_options(cfg: &Config, extra: &[PathBuf]) -> KernelOptions {
    let mut opts = KernelOptions {
        cache_dir: Some(cfg.cache_dir.join("kernels")),
        defines: cfg.kernel_defines.clone(),
        ..KernelOptions::default()
    };
    // kv_cache_dtype = "f16": the attention kernels' 2-byte cache (kernels/attention.cu KV_F16).
    if cfg.kv_f16() {
        opts.defines.insert("KV_F16".into(), "1".into());
    }
    let mut include = extra.to_vec();
    include.extend(cfg.cuda_home.iter().map(|h| h.join("include")));
    include.retain(|p| p.join("cuda_fp16.h").is_file());
    if !include.is_empty() {
        include.append(&mut opts.include_paths);
        opts.include_paths = include;
    }
    opts
}

/// Whether the configuration selects CUDA: `cuda` (an error without a driver: "no CUDA driver
/// found; use --backend cpu"), `auto` when a driver is present, never for `cpu`.
pub fn use_cuda(cfg: &Config) -> Result<bool> {
    match cfg.backend.as_str() {
        "cpu" => Ok(false),
        "cuda" if !cuda::driver_present() => bail!("{}", cuda::NO_DRIVER),
        "cuda" => Ok(true),
        "auto" => Ok(cuda::driver_present()),
        other => bail!("unknown backend {other:?} (cpu, cuda or auto)"),
    }
}

/// A CUDA device and the model weights uploaded to it so far.
pub struct CudaPool {
    dev: Arc<CudaDevice>,
    weights: Mutex<Vec<(Arc<Model>, Arc<CudaWeights>)>>,
    /// `cuda_graph_max_batch` and `cuda_graph_bucket` of the configuration that opened the
    /// device.
    graph_max_batch: usize,
    graph_bucket: usize,
}

static POOL: OnceLock<Arc<CudaPool>> = OnceLock::new();

impl CudaPool {
    /// The process's CUDA device (`cfg.cuda_device`), opened on first use.
    pub fn get(cfg: &Config) -> Result<Arc<CudaPool>> {
        if let Some(p) = POOL.get() {
            return Ok(p.clone());
        }
        if !cuda::driver_present() {
            bail!("{}", cuda::NO_DRIVER);
        }
        let dev = CudaDevice::open_with(cfg.cuda_device, kernel_options(cfg, &[]))?;
        tracing::info!(
            device = dev.info().name.as_str(),
            arch = dev.info().arch.as_str(),
            "CUDA device opened"
        );
        let pool = Arc::new(CudaPool {
            dev: Arc::new(dev),
            weights: Mutex::new(Vec::new()),
            graph_max_batch: cfg.cuda_graph_max_batch,
            graph_bucket: cfg.cuda_graph_bucket,
        });
        Ok(POOL.get_or_init(|| pool).clone())
    }

    /// The device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }

    /// `model`'s weights on the device, uploaded on first use.
    pub fn weights(&self, model: &Arc<Model>) -> Result<Arc<CudaWeights>> {
        let mut w = self.weights.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, cw)) = w.iter().find(|(m, _)| Arc::ptr_eq(m, model)) {
            return Ok(cw.clone());
        }
        let cw = Arc::new(CudaWeights::upload(&self.dev, model)?);
        // Backends read the weights from streams of their own.
        self.dev.synchronize()?;
        w.push((model.clone(), cw.clone()));
        Ok(cw)
    }

    /// A backend for `model` with `blocks` KV blocks of `block_size` positions on a stream of its
    /// own (so one engine thread's CUDA graph capture never takes in another's launches), decode
    /// steps of up to `cuda_graph_max_batch` rows replayed as CUDA graphs (padded to buckets of
    /// `cuda_graph_bucket`), optionally the
    /// shape-dependent split-K canary.
    pub fn backend(
        &self,
        model: &Arc<Model>,
        blocks: usize,
        block_size: usize,
        split_canary: bool,
    ) -> Result<CudaBackend> {
        let b = CudaBackend::new(
            Arc::new(self.dev.with_own_stream()?),
            model.clone(),
            self.weights(model)?,
            blocks,
            block_size,
        )?
        .with_graphs(self.graph_max_batch)
        .with_graph_bucket(self.graph_bucket);
        Ok(if split_canary {
            b.with_shape_dependent_split()
        } else {
            b
        })
    }
}

/// Device memory one engine step's activations may need: `max_tokens` rows through every
/// buffer of the forward pass plus a logits row per token; the buffers the CUDA graphs keep
/// for the row counts 1 ..= `cfg.cuda_graph_max_batch` padded to `cfg.cuda_graph_bucket`'s
/// buckets (the same per row, plus each row count's attention partials: at the served context,
/// `serve.context_len` or the model's own, or at the most KV splits whose partials stay within
/// the graphed limit, as deep as that row count's steps are graphed); the sampling kernel's
/// scratch; and 256 MiB for kernel images and allocator slack.
fn activation_reserve(model: &Model, max_tokens: usize, cfg: &Config) -> usize {
    let c = &model.config;
    let q = c.n_heads * c.head_dim;
    let kv = c.n_kv_heads * c.head_dim;
    let per_token = 6 * c.hidden_size + 4 * q + 3 * kv + 3 * c.intermediate_size + c.vocab_size;
    let ctx = match cfg.serve.context_len {
        0 => c.max_context,
        n => n,
    };
    let split = cfg
        .kernel_defines
        .get("ATTN_SPLIT")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(256)
        .max(1);
    // Bytes of attention partials a row takes per KV split, and the most splits at `ctx`.
    let split_row = 4 * c.n_heads * (c.head_dim + 2);
    let nz_max = ctx.div_ceil(split).next_power_of_two();
    let mut sizes: Vec<usize> = (1..=cfg.cuda_graph_max_batch)
        .map(|t| bucket_rows(t, cfg.cuda_graph_bucket, cfg.cuda_graph_max_batch))
        .collect();
    sizes.dedup();
    let graphs: usize = sizes
        .into_iter()
        .map(|t| {
            // The largest partials this row count's graphs allocate: at the most splits whose
            // partials stay within the graphed limit (one split takes none).
            let mut nz = nz_max;
            while nz > 1 && t * split_row * nz > ATTN_PART_BYTES {
                nz /= 2;
            }
            let part = if nz > 1 { t * split_row * nz } else { 0 };
            t * per_token * 4 + part
        })
        .sum();
    max_tokens * per_token * 4
        + graphs
        + memra_engine::backend::cuda::sample::SampleScratch::bytes(c.vocab_size)
        + (256 << 20)
}

/// The number of KV blocks for `model` under `cfg` and a constructor for its backend. CPU: the
/// configured `kv_cache_mib`. CUDA: the weights are uploaded now; the KV cache gets what
/// `gpu_memory_utilization` of the device leaves after everything already in use and the
/// activation reserve (out of memory is a clear error).
pub fn backend_factory(model: &Arc<Model>, cfg: &Config) -> Result<(usize, BackendFactory)> {
    let block_size = cfg.kv_block_size;
    if use_cuda(cfg)? {
        let pool = CudaPool::get(cfg)?;
        pool.weights(model)?;
        let max_tokens = cfg.prefill_chunk.max(cfg.serve.max_batch_tokens);
        let blocks = CudaBackend::blocks_for_memory(
            pool.device(),
            &model.config,
            block_size,
            cfg.gpu_memory_utilization,
            activation_reserve(model, max_tokens, cfg),
        )?;
        let model = model.clone();
        let make: BackendFactory = Box::new(move || {
            let b = pool
                .backend(&model, blocks, block_size, false)
                .map_err(|e| memra_engine::Error::Unsupported(format!("{e:#}")))?;
            Ok(Box::new(b) as Box<dyn Backend>)
        });
        return Ok((blocks, make));
    }
    let per_block = CpuBackend::kv_bytes_per_token(&model.config) * block_size;
    // At least one full context's worth is not required; at least a few blocks are.
    let bytes = cfg
        .kv_cache_mib
        .checked_mul(1 << 20)
        .ok_or_else(|| anyhow::anyhow!("kv_cache_mib {} MiB is too large", cfg.kv_cache_mib))?;
    let blocks = (bytes / per_block.max(1)).max(4);
    let model = model.clone();
    let kv_f16 = cfg.kv_f16();
    let make: BackendFactory = Box::new(move || {
        let b = CpuBackend::try_new(model, blocks, block_size)?;
        Ok(Box::new(if kv_f16 { b.with_kv_f16() } else { b }) as Box<dyn Backend>)
    });
    Ok((blocks, make))
}
