//! The rows `memra bench` writes (DESIGN.md §5): one JSON object per figure with its conditions,
//! and the run's environment measured once (device, commit, copy bandwidth).

use crate::config::Config;
use anyhow::Result;
use memra_engine::backend::cpu::CpuBackend;
use memra_engine::loader::LoadedModel;
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Median, min and max of N samples.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    /// Of `v` (non-empty); the median of an even count is the mean of the middle two.
    pub fn of(v: &[f64]) -> Stats {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Stats {
            n,
            median,
            min: s[0],
            max: s[n - 1],
        }
    }
}

/// The `p`-th percentile (0..=100) of `v` (non-empty), linearly interpolated between the two
/// nearest ranks (numpy's default), so p50 is the median and p100 the maximum.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let x = (p / 100.0).clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (x - lo as f64)
}

/// p50, p90, p99 and mean of `v` (non-empty) as a JSON object, for a row's `extra`.
pub fn percentiles(v: &[f64]) -> serde_json::Value {
    serde_json::json!({
        "p50": percentile(v, 50.0),
        "p90": percentile(v, 90.0),
        "p99": percentile(v, 99.0),
        "mean": v.iter().sum::<f64>() / v.len() as f64,
    })
}

/// The conditions every row of a run shares.
#[derive(Debug, Clone)]
pub struct Env {
    pub device: String,
    pub backend: &'static str,
    pub commit: String,
    /// Device-to-device copy (GPU) or a memcpy split over the CPU backend's threads (CPU; one
    /// thread in rows written before 2026-12-02), read + write, GB/s.
    pub copy_gbps: f64,
    pub model: String,
    pub dtype: String,
    pub weight_bytes: usize,
    pub kv_bytes_per_token: usize,
    pub threads: usize,
    /// The engine settings a figure depends on. CUDA: `cuda_graph_max_batch`,
    /// `cuda_graph_bucket` when above 1 (rows from before it existed ran 1), the kernel
    /// defines set in the configuration, `kv_cache_dtype`; CPU: `kv_cache_dtype` when it is
    /// "f16", else `None`.
    pub settings: Option<serde_json::Value>,
}

/// `v` with its objects' keys sorted at every level (serde_json keeps insertion order with its
/// `preserve_order` feature, which the server's ranked maps need).
pub fn sorted(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut kv: Vec<_> = m.iter().collect();
            kv.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                kv.into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        v => v.clone(),
    }
}

/// A cell's params as compact JSON with sorted keys: the key rows of one cell share, whatever
/// order their params were built or read in (`--compare`, `--against`, the boards).
pub fn canonical(params: &serde_json::Value) -> String {
    sorted(params).to_string()
}

fn serialize_sorted<S: serde::Serializer>(v: &serde_json::Value, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&sorted(v), s)
}

/// One figure.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub time: u64,
    pub commit: String,
    pub device: String,
    pub backend: &'static str,
    pub model: String,
    pub dtype: String,
    pub scenario: &'static str,
    /// Written with sorted keys, as rows always were (the committed data's cell keys).
    #[serde(serialize_with = "serialize_sorted")]
    pub params: serde_json::Value,
    #[serde(flatten)]
    pub stats: Stats,
    pub unit: &'static str,
    /// Achieved bandwidth (bytes the figure had to read / time), GB/s.
    pub gbps: Option<f64>,
    pub copy_gbps: f64,
    /// `gbps / copy_gbps`.
    pub bw_fraction: Option<f64>,
    pub weight_bytes: usize,
    pub host_threads: usize,
    /// Engine settings of the run (see [`Env::settings`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<serde_json::Value>,
    /// An anchor measured in the same run (none yet for this scenario).
    pub anchor: Option<serde_json::Value>,
    /// Scenario-specific figures beside the median/min/max (percentiles, request and error
    /// counts, acceptance); absent when a scenario has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<serde_json::Value>,
    /// The timed runs behind `stats` (decode, ttft), kept in memory so the rounds of an
    /// interleaved comparison can be merged; not written.
    #[serde(skip)]
    pub samples: Vec<f64>,
}

impl Row {
    /// Replaces the figure by the stats of `samples` (all the runs of a cell measured in parts),
    /// keeping them; the achieved GB/s, linear in the median, is rescaled to the new median.
    pub fn restat(&mut self, samples: Vec<f64>) {
        let old = self.stats.median;
        self.stats = Stats::of(&samples);
        if old > 0.0 {
            self.gbps = self.gbps.map(|g| g * self.stats.median / old);
            self.bw_fraction = self.gbps.map(|g| g / self.copy_gbps);
        }
        self.samples = samples;
    }
}

/// A CPU figure's device: the CPU's model name and the backend's worker threads,
/// "AMD EPYC (2 threads)".
pub fn cpu_device_name(model: &str, threads: usize) -> String {
    format!("{model} ({threads} threads)")
}

impl Env {
    /// Measures the copy bandwidth of the device the configuration selects and reads the rest
    /// (no engine is built: the scenarios that run a scheduler or a server build their own).
    pub fn measure(cfg: &Config, loaded: &LoadedModel, path: &Path) -> Result<Env> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cuda = crate::backends::use_cuda(cfg)?;
        // The CPU backend's worker threads (`threads`, 0 = one per core) are a condition of
        // every CPU figure; a CUDA run records the host's cores.
        let threads = if !cuda && cfg.threads > 0 {
            cfg.threads
        } else {
            cores
        };
        let (device, copy_gbps) = if cuda {
            let pool = crate::backends::CudaPool::get(cfg)?;
            let d = pool.device();
            (d.info().name.clone(), d.copy_bandwidth(1 << 30, 5)?)
        } else {
            (
                cpu_device_name(&crate::defaults::cpu_device().name, threads),
                crate::probe::cpu_copy_bandwidth(threads),
            )
        };
        let m = &loaded.model;
        Ok(Env {
            device,
            backend: if cuda { "cuda" } else { "cpu" },
            commit: env!("MEMRA_BUILD_COMMIT").to_string(),
            copy_gbps,
            model: path.file_name().map_or_else(
                || path.display().to_string(),
                |f| f.to_string_lossy().into(),
            ),
            dtype: m
                .layers
                .first()
                .map_or("?", |l| l.w_gate.dtype().name())
                .into(),
            weight_bytes: m.weight_bytes(),
            // The f16 cache is 2 bytes a value on CUDA; the CPU keeps f32 storage.
            kv_bytes_per_token: CpuBackend::kv_bytes_per_token(&m.config)
                / if cuda && cfg.kv_f16() { 2 } else { 1 },
            threads,
            settings: cuda
                .then(|| {
                    let mut s = serde_json::json!({
                        "cuda_graph_max_batch": cfg.cuda_graph_max_batch,
                        "kernel_defines": cfg.kernel_defines,
                        "kv_cache_dtype": cfg.kv_cache_dtype,
                    });
                    // Only when set, so rows stay comparable (`--compare`) with earlier ones.
                    if cfg.cuda_graph_bucket > 1 {
                        s["cuda_graph_bucket"] = cfg.cuda_graph_bucket.into();
                    }
                    s
                })
                // A CPU row says so only when its KV values were rounded to f16 (its own cell).
                .or_else(|| {
                    cfg.kv_f16()
                        .then(|| serde_json::json!({ "kv_cache_dtype": "f16" }))
                }),
        })
    }

    /// The tune-data file name: `nvidia-h200` from "NVIDIA H200"; on the CPU the model name's
    /// without the thread count, after `cpu-`: `cpu-amd-epyc` from "AMD EPYC (2 threads)" (one
    /// file a CPU model; the threads stay in each row's device).
    pub fn device_slug(&self) -> String {
        if self.backend != "cpu" {
            return crate::defaults::slug(&self.device);
        }
        let model = self
            .device
            .rsplit_once(" (")
            .map_or(self.device.as_str(), |(m, _)| m);
        match crate::defaults::slug(model) {
            s if s.starts_with("cpu") => s,
            s => format!("cpu-{s}"),
        }
    }

    /// A row of this run.
    pub fn row(
        &self,
        scenario: &'static str,
        params: serde_json::Value,
        stats: Stats,
        unit: &'static str,
        gbps: Option<f64>,
    ) -> Row {
        Row {
            time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            commit: self.commit.clone(),
            device: self.device.clone(),
            backend: self.backend,
            model: self.model.clone(),
            dtype: self.dtype.clone(),
            scenario,
            params,
            stats,
            unit,
            gbps,
            copy_gbps: self.copy_gbps,
            bw_fraction: gbps.map(|g| g / self.copy_gbps),
            weight_bytes: self.weight_bytes,
            host_threads: self.threads,
            settings: self.settings.clone(),
            anchor: None,
            extra: None,
            samples: Vec::new(),
        }
    }
}

/// Checks that rows can be appended to `path` (creating it, and its directory, if missing), so a
/// bench finds out before it measures. Errors: a directory, or a file that cannot be opened for
/// appending.
pub fn check_appendable(path: &Path) -> Result<()> {
    if path.is_dir() {
        anyhow::bail!(
            "{} is a directory; --out names a JSONL file",
            path.display()
        );
    }
    append(path, &[])
}

/// Appends `rows` to `path` as JSON lines (creating the directory).
pub fn append(path: &Path, rows: &[Row]) -> Result<()> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    for r in rows {
        writeln!(f, "{}", serde_json::to_string(r)?)?;
    }
    Ok(())
}

/// The rows as a short table (the `extra` figures compactly at the end of each line).
pub fn table(rows: &[Row]) -> String {
    let pw = rows
        .iter()
        .map(|r| canonical(&r.params).len())
        .max()
        .unwrap_or(0)
        .max(6);
    let mut s = format!(
        "{:<8} {:<pw$} {:>10} {:>10} {:>10} {:>6} {:>8} {:>6}  {}\n",
        "scenario", "params", "median", "min", "max", "unit", "GB/s", "of bw", "extra"
    );
    for r in rows {
        s += &format!(
            "{:<8} {:<pw$} {:>10.3} {:>10.3} {:>10.3} {:>6} {:>8} {:>6}  {}\n",
            r.scenario,
            canonical(&r.params),
            r.stats.median,
            r.stats.min,
            r.stats.max,
            r.unit,
            r.gbps.map_or("-".into(), |g| format!("{g:.0}")),
            r.bw_fraction
                .map_or("-".into(), |f| format!("{:.0}%", f * 100.0)),
            r.extra.as_ref().map_or(String::new(), compact),
        );
    }
    s
}

/// `k=v` pairs of an `extra` object: numbers to 4 significant digits, nested objects by their
/// `p50`/`p99` or `median` when they have one.
fn compact(v: &serde_json::Value) -> String {
    let num = |x: f64| {
        if x == x.trunc() && x.abs() < 1e9 {
            format!("{x}")
        } else {
            format!("{x:.4}")
        }
    };
    let Some(o) = v.as_object() else {
        return v.to_string();
    };
    o.iter()
        .map(|(k, v)| match v {
            serde_json::Value::Number(n) => format!("{k}={}", num(n.as_f64().unwrap_or(0.0))),
            serde_json::Value::Object(m) => {
                let pick = ["p50", "p99", "median"]
                    .iter()
                    .filter_map(|f| m.get(*f).and_then(|x| x.as_f64()).map(|x| (f, x)))
                    .map(|(f, x)| format!("{f}={}", num(x)))
                    .collect::<Vec<_>>();
                format!("{k}[{}]", pick.join(","))
            }
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_median_min_max() {
        let s = Stats::of(&[3.0, 1.0, 2.0]);
        assert_eq!((s.n, s.median, s.min, s.max), (3, 2.0, 1.0, 3.0));
        let s = Stats::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
    }

    /// CPU rows name the CPU and the threads; the file is one a CPU model.
    #[test]
    fn cpu_device_and_file_names() {
        let env = |device: String, backend| Env {
            device,
            backend,
            commit: String::new(),
            copy_gbps: 1.0,
            model: String::new(),
            dtype: String::new(),
            weight_bytes: 0,
            kv_bytes_per_token: 0,
            threads: 2,
            settings: None,
        };
        let d = cpu_device_name("AMD EPYC", 2);
        assert_eq!(d, "AMD EPYC (2 threads)");
        assert_eq!(env(d, "cpu").device_slug(), "cpu-amd-epyc");
        let d = cpu_device_name("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 8);
        assert_eq!(
            env(d, "cpu").device_slug(),
            "cpu-intel-r-xeon-r-gold-6338-cpu-2-00ghz"
        );
        assert_eq!(env(cpu_device_name("cpu", 4), "cpu").device_slug(), "cpu");
        assert_eq!(
            env("NVIDIA H200".into(), "cuda").device_slug(),
            "nvidia-h200"
        );
    }

    #[test]
    fn percentiles_interpolate() {
        let v: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 51.0);
        assert_eq!(percentile(&v, 99.0), 100.0);
        assert_eq!(percentile(&[1.0, 2.0], 50.0), 1.5);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        let p = percentiles(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!(
            (p["p50"].as_f64(), p["mean"].as_f64()),
            (Some(2.5), Some(2.5))
        );
    }
}
