//! `memra probe`: what compute this machine has. With a CUDA device: name, compute capability, SMs,
//! memory, driver, NVRTC target and measured device-to-device copy bandwidth; `--self-check` then
//! compiles every kernel and checks it against the CPU reference. Without one: the CPU's cores and
//! measured memory-copy bandwidth.

use crate::config::Config;
use anyhow::{bail, Context, Result};
use memra_engine::backend::cuda::{self, selfcheck, CudaDevice};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `memra probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Compile every kernel and compare it with the CPU reference (needs a CUDA device).
    #[arg(long)]
    pub self_check: bool,
    /// Directory with the CUDA headers (cuda_fp16.h, cuda_bf16.h) for NVRTC; repeatable
    /// [default: $CUDA_HOME/include, /usr/local/cuda/include].
    #[arg(long = "cuda-include")]
    pub cuda_include: Vec<PathBuf>,
    /// Time the linear kernels at the Llama-3.1-8B shapes (BF16, Q8_0, Q4_K; M = 1 and 8 unless
    /// --kernel-tokens says otherwise) with random weights and print µs and achieved GB/s
    /// against the measured copy bandwidth.
    #[arg(long)]
    pub bench_kernels: bool,
    /// With --bench-kernels: the token counts M to time, `,`-separated (1 to 4096).
    #[arg(long, value_name = "M,...", value_delimiter = ',', default_value = "1,8",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub kernel_tokens: Vec<usize>,
    /// With --bench-kernels: the weight formats to time, `,`-separated (bf16, q8_0, q4_k).
    #[arg(long, value_name = "DTYPE,...", value_delimiter = ',', default_value = "bf16,q8_0,q4_k",
        value_parser = ["bf16", "q8_0", "q4_k"])]
    pub kernel_dtypes: Vec<String>,
    /// With --bench-kernels: which Llama-3.1-8B linear shapes to time, by role, `,`-separated
    /// (q/o, k/v, qkv, gate/up, gate+up, down, and lm-head, the [128256, 4096] output matrix);
    /// all but lm-head by default. One shape keeps a profiler's launch count simple
    /// (`ncu --launch-skip`).
    #[arg(long, value_name = "ROLE,...", value_delimiter = ',',
        value_parser = ["q/o", "k/v", "qkv", "gate/up", "gate+up", "down", "lm-head"])]
    pub kernel_shapes: Vec<String>,
    /// With --bench-kernels: which kernel families to time, `,`-separated: linear (the shapes
    /// above) and attn (decode attention at the 8B head shape over --attn-depths, in the
    /// configured KV cache format).
    #[arg(long, value_name = "OP,...", value_delimiter = ',', default_value = "linear",
        value_parser = ["linear", "attn"])]
    pub kernel_ops: Vec<String>,
    /// With --kernel-ops attn: KV depths in positions, `,`-separated.
    #[arg(long, value_name = "D,...", value_delimiter = ',', default_value = "2048,8192",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=131072))]
    pub attn_depths: Vec<usize>,
    /// With --kernel-ops attn: query rows (sequences, one row each), `,`-separated.
    #[arg(long, value_name = "ROWS,...", value_delimiter = ',', default_value = "1,8",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    pub attn_rows: Vec<usize>,
    /// With --bench-kernels: kernel define sets to compare, `;`-separated, each a
    /// `,`-separated list of NAME=VALUE added to the configured defines (e.g.
    /// "LIN_ROWS_M1=1;LIN_ROWS_M1=4"). Default: the configured defines alone.
    #[arg(long, value_name = "SETS")]
    pub variants: Option<String>,
}

/// Runs the probe. Fails when `--self-check` finds a bad kernel, or is asked for with no device.
pub fn run(args: &ProbeArgs, cfg: &Config) -> Result<()> {
    let want_cuda = cfg.backend != "cpu";
    if want_cuda && cuda::driver_present() {
        return probe_cuda(args, cfg);
    }
    if args.self_check || args.bench_kernels {
        let what = if args.self_check {
            "--self-check"
        } else {
            "--bench-kernels"
        };
        if cfg.backend == "cpu" {
            bail!("{what} runs the CUDA kernels; it needs --backend cuda (or auto) and a GPU");
        }
        bail!("{what}: no CUDA driver found; it runs the CUDA kernels and needs a GPU");
    }
    if cfg.backend == "cuda" {
        bail!("{}", cuda::NO_DRIVER);
    }
    probe_cpu(if cfg.backend == "cpu" {
        "--backend cpu"
    } else {
        "no CUDA driver found"
    });
    Ok(())
}

fn probe_cuda(args: &ProbeArgs, cfg: &Config) -> Result<()> {
    let opts = crate::backends::kernel_options(cfg, &args.cuda_include);
    let dev = CudaDevice::open_with(args.device, opts)?;
    let i = dev.info();
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    println!("device        {} (ordinal {})", i.name, i.ordinal);
    println!(
        "compute       {}.{} -> NVRTC target {}",
        i.compute_capability.0, i.compute_capability.1, i.arch
    );
    println!("SMs           {}", i.sm_count);
    println!(
        "memory        {:.1} GiB total, {:.1} GiB free",
        gib(i.total_mem),
        gib(i.free_mem)
    );
    println!("driver        CUDA {}", i.driver_version_string());
    let nvrtc = cuda::compile::nvrtc_version();
    println!(
        "nvrtc         {}",
        nvrtc.map_or("not found".to_string(), |(a, b)| format!("{a}.{b}"))
    );
    let inc = &dev.kernel_options().include_paths;
    println!(
        "cuda include  {}",
        if inc.is_empty() {
            "none found (pass --cuda-include)".to_string()
        } else {
            inc.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    if let Some(c) = &dev.kernel_options().cache_dir {
        println!("kernel cache  {}", c.display());
    }
    let bw = dev.copy_bandwidth(1 << 30, 10)?;
    println!(
        "d2d copy      {:.0} GB/s (1 GiB buffers, read + write, best of 10)",
        bw
    );
    if args.bench_kernels {
        bench_kernels(args, cfg, bw)?;
    }
    if args.self_check {
        let t = Instant::now();
        let rows = selfcheck::run_all(&dev)?;
        println!(
            "\nkernel self-check vs CPU reference ({:.2} s incl. NVRTC compile), defines {{{}}}",
            t.elapsed().as_secs_f64(),
            defines_of(&dev)
        );
        print!("{}", selfcheck::render(&rows));
        if rows.iter().any(|r| !r.passed()) {
            bail!("kernel self-check failed");
        }
    }
    Ok(())
}

/// The device's kernel defines as `NAME=VALUE, ...` (what a self-check or table was run with).
fn defines_of(dev: &CudaDevice) -> String {
    dev.kernel_options()
        .defines
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--bench-kernels`: one table per define set of `--variants`.
fn bench_kernels(args: &ProbeArgs, cfg: &Config, copy_gbps: f64) -> Result<()> {
    use memra_engine::backend::cuda::kbench;
    use memra_engine::quant::DType;
    let sets: Vec<String> = match &args.variants {
        Some(v) => v.split(';').map(|s| s.trim().to_string()).collect(),
        None => vec![String::new()],
    };
    for set in sets {
        let mut opts = crate::backends::kernel_options(cfg, &args.cuda_include);
        for kv in set.split(',').filter(|s| !s.is_empty()) {
            let Some((k, v)) = kv.split_once('=') else {
                bail!("--variants: {kv:?} is not NAME=VALUE");
            };
            opts.defines
                .insert(k.trim().to_string(), v.trim().to_string());
        }
        crate::config::check_define_combinations(&opts.defines)
            .with_context(|| format!("--variants {set:?}"))?;
        let dev = CudaDevice::open_with(args.device, opts)?;
        let dtypes: Vec<DType> = args
            .kernel_dtypes
            .iter()
            .map(|d| match d.as_str() {
                "bf16" => DType::BF16,
                "q8_0" => DType::Q8_0,
                _ => DType::Q4_K,
            })
            .collect();
        let mut rows = Vec::new();
        if args.kernel_ops.iter().any(|o| o == "linear") {
            let named = |role: &str| args.kernel_shapes.iter().any(|r| r == role);
            let mut shapes: Vec<_> = kbench::LLAMA_8B_LINEARS
                .into_iter()
                .filter(|s| args.kernel_shapes.is_empty() || named(s.2))
                .collect();
            if named(kbench::LLAMA_8B_LM_HEAD.2) {
                shapes.push(kbench::LLAMA_8B_LM_HEAD);
            }
            rows.extend(kbench::bench_linear(
                &dev,
                &dtypes,
                &shapes,
                &args.kernel_tokens,
                7,
            )?);
        }
        if args.kernel_ops.iter().any(|o| o == "attn") {
            rows.extend(kbench::bench_attention(
                &dev,
                &args.attn_rows,
                &args.attn_depths,
                7,
            )?);
        }
        println!("\nkernels, defines {{{}}}", defines_of(&dev));
        print!("{}", kbench::render(&rows, copy_gbps));
    }
    Ok(())
}

/// The CPU's cores and memory copy bandwidth; `why` says why the CPU was probed.
fn probe_cpu(why: &str) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("device        cpu ({why})");
    println!("cores         {cores}");
    let one = cpu_copy_bandwidth(1);
    println!("memory copy   {one:.1} GB/s (256 MiB, one thread, read + write, best of 5)");
    if cores > 1 {
        let all = cpu_copy_bandwidth(cores);
        println!("memory copy   {all:.1} GB/s (256 MiB, {cores} threads, read + write, best of 5)");
    }
}

/// `threads` threads copying one 256 MiB buffer to another, each its own contiguous share,
/// started together; read + write bytes over the time from the first thread's start to the last
/// one's end (spawns and joins included, small against 256 MiB), best of 5, in GB/s.
/// With one thread: a floor for what one decode thread can stream; with the CPU backend's
/// thread count: the copy bandwidth its decode figures are compared with. `threads` 0 counts as
/// 1.
pub fn cpu_copy_bandwidth(threads: usize) -> f64 {
    let n = 256usize << 20;
    let threads = threads.max(1);
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    let share = n.div_ceil(threads);
    let copy = |dst: &mut [u8]| {
        std::thread::scope(|s| {
            for (d, c) in dst.chunks_mut(share).zip(src.chunks(share)) {
                s.spawn(move || d.copy_from_slice(std::hint::black_box(c)));
            }
        });
    };
    copy(&mut dst);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        copy(&mut dst);
        std::hint::black_box(&dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    2.0 * n as f64 / best / 1e9
}
