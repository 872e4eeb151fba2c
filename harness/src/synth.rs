//! `memra synth`: random-weight checkpoints at real models' shapes, for speed work where the real
//! weights are not at hand and for tests.
//!
//! `memra synth --shape NAME --dtype DTYPE --format gguf|safetensors --seed S --out DIR` writes
//! `DIR/<shape>-<dtype>.gguf`, or an HF checkpoint directory in `DIR` (config.json,
//! generation_config.json, tokenizer.json, tokenizer_config.json, model.safetensors or shards with
//! model.safetensors.index.json), and prints the checkpoint's path. The same arguments give the
//! same bytes. Tensors are generated in parallel chunks (rayon) while a writer thread streams the
//! previous chunk to disk. See `synth/shapes.rs` (shapes), `synth/vocab.rs` (tokenizer) and
//! `synth/weights.rs` (values).

mod shapes;
mod vocab;
mod weights;

use crate::config::Config;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use memra_engine::formats::gguf_write::{GgufBuilder, GgufWriter};
use memra_engine::quant::DType;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[cfg(test)]
pub use shapes::find as find_shape;
pub use shapes::{Shape, SHAPES};

/// Arguments of `memra synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Model shape (`--list` shows them): llama-3.1-8b, qwen3-8b, qwen2.5-7b, gemma-3-1b,
    /// tiny-llama, tiny-qwen2, tiny-qwen3, tiny-gemma3.
    #[arg(long, required_unless_present = "list")]
    pub shape: Option<String>,
    /// Element type of the weight matrices; q8_0, q4_k and q6_k only with --format gguf.
    #[arg(long, value_enum, default_value_t = SynthDType::Bf16)]
    pub dtype: SynthDType,
    /// gguf: one .gguf file; safetensors: an HF checkpoint directory.
    #[arg(long, value_enum, default_value_t = Format::Gguf)]
    pub format: Format,
    /// Seed of the weights (the tokenizer does not depend on it).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output directory (created if missing).
    #[arg(long, required_unless_present = "list")]
    pub out: Option<PathBuf>,
    /// Largest safetensors file in MiB; a bigger checkpoint is sharded with an index.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_shard_mib: u64,
    /// List the known shapes and exit.
    #[arg(long)]
    pub list: bool,
}

/// Element type of a synthetic checkpoint's weight matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SynthDType {
    #[value(name = "bf16")]
    Bf16,
    #[value(name = "f16")]
    F16,
    /// 8-bit blocks of 32 (GGUF only).
    #[value(name = "q8_0")]
    Q8_0,
    /// 4-bit K-quant super-blocks of 256 (GGUF only).
    #[value(name = "q4_k")]
    Q4K,
    /// 6-bit K-quant super-blocks of 256 (GGUF only).
    #[value(name = "q6_k")]
    Q6K,
}

impl SynthDType {
    /// The engine's element type.
    pub fn dtype(self) -> DType {
        match self {
            SynthDType::Bf16 => DType::BF16,
            SynthDType::F16 => DType::F16,
            SynthDType::Q8_0 => DType::Q8_0,
            SynthDType::Q4K => DType::Q4_K,
            SynthDType::Q6K => DType::Q6_K,
        }
    }
    /// Name as on the command line (`q4_k`).
    pub fn name(self) -> &'static str {
        match self {
            SynthDType::Bf16 => "bf16",
            SynthDType::F16 => "f16",
            SynthDType::Q8_0 => "q8_0",
            SynthDType::Q4K => "q4_k",
            SynthDType::Q6K => "q6_k",
        }
    }
    /// A plain float type (not a block quantization).
    pub fn is_float(self) -> bool {
        matches!(self, SynthDType::Bf16 | SynthDType::F16)
    }
    /// llama.cpp's `general.file_type` (`LLAMA_FTYPE_MOSTLY_*`; Q4_K is Q4_K_S: every matrix Q4_K).
    pub fn ggml_ftype(self) -> u32 {
        match self {
            SynthDType::F16 => 1,
            SynthDType::Q8_0 => 7,
            SynthDType::Q4K => 14,
            SynthDType::Q6K => 18,
            SynthDType::Bf16 => 32,
        }
    }
}

/// Checkpoint format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Gguf,
    Safetensors,
}

/// What to write.
#[derive(Debug, Clone)]
pub struct SynthSpec {
    pub shape: &'static Shape,
    pub dtype: SynthDType,
    pub format: Format,
    pub seed: u64,
    /// Largest safetensors shard in bytes.
    pub max_shard_bytes: u64,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Written {
    /// The `.gguf` file or the HF directory.
    pub path: PathBuf,
    /// Bytes of tensor data (headers excluded).
    pub tensor_bytes: u64,
    pub tensors: usize,
    pub secs: f64,
}

/// Parses `SHAPE:DTYPE[:SEED]` (seed 0 by default). Errors name the bad part and list the
/// known shapes or dtypes.
fn parse_spec(rest: &str) -> Result<(&'static Shape, SynthDType, u64)> {
    let parts: Vec<&str> = rest.split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        bail!("a synthetic model is synth:SHAPE:DTYPE[:SEED], e.g. synth:tiny-llama:q4_k (got synth:{rest})");
    }
    let shape = shapes::find(parts[0])?;
    let dtype = <SynthDType as clap::ValueEnum>::from_str(parts[1], true).map_err(|_| {
        anyhow::anyhow!(
            "synth: unknown dtype {:?} (bf16, f16, q8_0, q4_k, q6_k)",
            parts[1]
        )
    })?;
    let seed: u64 = match parts.get(2) {
        Some(s) => s
            .parse()
            .map_err(|_| anyhow::anyhow!("synth: seed {s:?} is not an integer"))?,
        None => 0,
    };
    Ok((shape, dtype, seed))
}

/// The checkpoint of `spec` under `dir`, written on first use: the `.gguf` file, or the
/// directory itself for safetensors.
fn resolve_in(spec: &SynthSpec, dir: &Path, label: &str) -> Result<PathBuf> {
    let done = match spec.format {
        Format::Gguf => std::fs::read_dir(dir).ok().and_then(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.extension().is_some_and(|x| x == "gguf"))
        }),
        Format::Safetensors => dir.join("config.json").is_file().then(|| dir.to_path_buf()),
    };
    if let Some(p) = done {
        return Ok(p);
    }
    eprintln!("{label}: writing {}", dir.display());
    Ok(synthesize(spec, dir, true)?.path)
}

/// Resolves a `synth:SHAPE:DTYPE[:SEED]` model spec to a GGUF checkpoint in
/// `<cache_dir>/generated/synth/`, writing it on first use. Errors: an unknown shape or dtype
/// (listing the known ones), I/O.
pub fn resolve_spec(rest: &str, cache_dir: &Path) -> Result<PathBuf> {
    let (shape, dtype, seed) = parse_spec(rest)?;
    let dir = cache_dir.join("generated").join("synth").join(format!(
        "{}-{}-s{seed}",
        shape.name,
        dtype.name()
    ));
    let spec = SynthSpec {
        shape,
        dtype,
        format: Format::Gguf,
        seed,
        max_shard_bytes: 4096 << 20,
    };
    resolve_in(&spec, &dir, &format!("synth:{rest}"))
}

/// The same model as `synth:SHAPE:DTYPE[:SEED]` as an HF safetensors directory (same seed, same
/// values), for references that read HF checkpoints. Errors: a quantized dtype (HF checkpoints
/// are bf16/f16 here), an unknown shape, I/O.
pub fn resolve_hf(rest: &str, cache_dir: &Path) -> Result<PathBuf> {
    let (shape, dtype, seed) = parse_spec(rest)?;
    if !dtype.is_float() {
        bail!(
            "synth:{rest}: an HF checkpoint of a {} model does not exist; compare against \
             synth:{}:bf16",
            dtype.name(),
            shape.name
        );
    }
    let dir = cache_dir.join("generated").join("synth").join(format!(
        "{}-{}-s{seed}-hf",
        shape.name,
        dtype.name()
    ));
    let spec = SynthSpec {
        shape,
        dtype,
        format: Format::Safetensors,
        seed,
        max_shard_bytes: 4096 << 20,
    };
    resolve_in(&spec, &dir, &format!("synth:{rest} (HF)"))
}

/// Runs `memra synth`.
pub fn run(args: &SynthArgs, _cfg: &Config) -> Result<()> {
    if args.list {
        print_shapes();
        return Ok(());
    }
    let shape = shapes::find(args.shape.as_deref().expect("clap requires --shape"))?;
    let out = args.out.as_deref().expect("clap requires --out");
    let spec = SynthSpec {
        shape,
        dtype: args.dtype,
        format: args.format,
        seed: args.seed,
        max_shard_bytes: args.max_shard_mib.max(1) << 20,
    };
    let w = synthesize(&spec, out, true)?;
    eprintln!(
        "wrote {} tensors, {:.2} GB, in {:.1} s ({:.2} GB/s)",
        w.tensors,
        w.tensor_bytes as f64 / 1e9,
        w.secs,
        w.tensor_bytes as f64 / 1e9 / w.secs.max(1e-9)
    );
    println!("{}", w.path.display());
    Ok(())
}

fn print_shapes() {
    println!(
        "{:<14} {:<7} {:>7} {:>7} {:>6} {:>6} {:>11} {:>6} {:>9}",
        "shape", "arch", "params", "vocab", "hidden", "inter", "heads/kv×hd", "layers", "bf16"
    );
    for s in SHAPES {
        let p = s.params() as f64;
        let (params, bytes) = if p >= 1e9 {
            (
                format!("{:.2}B", p / 1e9),
                format!("{:.2} GB", 2.0 * p / 1e9),
            )
        } else {
            (
                format!("{:.1}M", p / 1e6),
                format!("{:.1} MB", 2.0 * p / 1e6),
            )
        };
        println!(
            "{:<14} {:<7} {:>7} {:>7} {:>6} {:>6} {:>11} {:>6} {:>9}",
            s.name,
            s.gguf_arch(),
            params,
            s.vocab,
            s.hidden,
            s.intermediate,
            format!("{}/{}×{}", s.heads, s.kv_heads, s.head_dim),
            s.layers,
            bytes
        );
        if !s.note.is_empty() {
            println!("{:<14} note: {}", "", s.note);
        }
    }
}

/// Writes the checkpoint `spec` describes into `out_dir` (created if missing) and returns where.
/// With `progress`, a progress bar runs on stderr (hidden when stderr is not a terminal). Errors:
/// a quantized dtype with safetensors, I/O (naming the file). A partly written file is never left
/// under its final name.
pub fn synthesize(spec: &SynthSpec, out_dir: &Path, progress: bool) -> Result<Written> {
    if spec.format == Format::Safetensors && !spec.dtype.is_float() {
        bail!(
            "--dtype {} is a GGUF block quantization; safetensors checkpoints are written in bf16 or \
             f16 (use --format gguf for q8_0, q4_k and q6_k)",
            spec.dtype.name()
        );
    }
    let t0 = Instant::now();
    let shape = spec.shape;
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let plans = weights::plan(shape, spec.format, spec.dtype);
    let fallback: Vec<&str> = plans
        .iter()
        .filter(|p| p.dtype.block_elems() > 1 && p.dtype != spec.dtype.dtype())
        .map(|p| p.dtype.name())
        .collect();
    if let Some(t) = fallback.first() {
        eprintln!(
            "note: {} matrices have rows that are not a multiple of 256 and are stored as {t} \
             (llama.cpp's fallback for {})",
            fallback.len(),
            spec.dtype.name()
        );
    }
    let vocab = vocab::Vocab::build(shape.vocab, shape.pre_tokenizer())?;
    let tensor_bytes: u64 = plans.iter().map(|p| p.bytes()).sum();
    let bar = if progress {
        progress_bar(tensor_bytes)
    } else {
        ProgressBar::hidden()
    };
    let path = match spec.format {
        Format::Gguf => write_gguf(spec, &plans, &vocab, out_dir, &bar)?,
        Format::Safetensors => write_hf_dir(spec, &plans, &vocab, out_dir, &bar)?,
    };
    bar.finish_and_clear();
    Ok(Written {
        path,
        tensor_bytes,
        tensors: plans.len(),
        secs: t0.elapsed().as_secs_f64(),
    })
}

fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(
        "{msg:>9} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
    )
    .expect("valid template")
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message("synth");
    bar
}

/// `path` + `.partial`: where a file is written before it is renamed into place.
fn partial(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

fn create(path: &Path) -> Result<BufWriter<File>> {
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(BufWriter::with_capacity(8 << 20, f))
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to)
        .with_context(|| format!("renaming {} to {}", from.display(), to.display()))
}

fn write_json(path: &Path, v: &serde_json::Value) -> Result<()> {
    let mut text = serde_json::to_string_pretty(v).expect("JSON values serialize");
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn write_gguf(
    spec: &SynthSpec,
    plans: &[weights::TensorPlan],
    vocab: &vocab::Vocab,
    out_dir: &Path,
    bar: &ProgressBar,
) -> Result<PathBuf> {
    let mut b = GgufBuilder::new();
    spec.shape.gguf_metadata(spec.dtype, spec.seed, &mut b)?;
    vocab.gguf_metadata(&mut b)?;
    for p in plans {
        b.tensor(p.gguf_name.clone(), &p.shape, p.dtype)?;
    }
    let path = out_dir.join(format!("{}-{}.gguf", spec.shape.name, spec.dtype.name()));
    let tmp = partial(&path);
    let writer = b.begin(create(&tmp)?, &tmp)?;
    let sink = stream(plans, spec.seed, GgufSink(writer), bar)?;
    let mut file = sink.0.finish()?;
    file.flush()
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(file);
    rename(&tmp, &path)?;
    Ok(path)
}

/// Receives the tensor bytes in file order, in chunks that never cross a tensor's end.
trait Sink: Send {
    fn write(&mut self, bytes: &[u8]) -> Result<()>;
}

struct GgufSink(GgufWriter<BufWriter<File>>);

impl Sink for GgufSink {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        Ok(self.0.write_data(bytes)?)
    }
}

/// Bytes per generated chunk: big enough for long sequential writes and to keep every core busy,
/// small enough that three in flight cost little memory.
const CHUNK_BYTES: usize = 32 << 20;

/// Generates every tensor of `plans` in chunks on the rayon pool while a writer thread hands the
/// previous chunks to `sink`; returns the sink once everything is written.
fn stream<S: Sink>(
    plans: &[weights::TensorPlan],
    seed: u64,
    mut sink: S,
    bar: &ProgressBar,
) -> Result<S> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
    let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::scope(|s| {
        let writer = s.spawn(move || -> Result<S> {
            for buf in rx {
                sink.write(&buf)?;
                bar.inc(buf.len() as u64);
                // The generator may have finished already; then the buffer is just dropped.
                let _ = back_tx.send(buf);
            }
            Ok(sink)
        });
        'tensors: for p in plans {
            let key = weights::tensor_key(seed, &p.gguf_name);
            let (rows, _) = p.rows_cols();
            let per_chunk = (CHUNK_BYTES / p.row_bytes()).max(1);
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + per_chunk).min(rows);
                let mut buf = back_rx.try_recv().unwrap_or_default();
                buf.resize((r1 - r0) * p.row_bytes(), 0);
                weights::fill_rows(p, key, r0..r1, &mut buf);
                if tx.send(buf).is_err() {
                    // The writer stopped on an error, which join reports.
                    break 'tensors;
                }
                r0 = r1;
            }
        }
        drop(tx);
        writer.join().expect("writer thread panicked")
    })
}

/// Names of the safetensors files for `n` shards (HF's `model-00001-of-00004.safetensors`).
fn shard_names(n: usize) -> Vec<String> {
    if n == 1 {
        return vec!["model.safetensors".into()];
    }
    (1..=n)
        .map(|i| format!("model-{i:05}-of-{n:05}.safetensors"))
        .collect()
}

/// One safetensors file: its header (8-byte length + JSON) and the bytes of tensor data after it.
struct Shard {
    path: PathBuf,
    header: Vec<u8>,
    data_bytes: u64,
}

fn safetensors_dtype(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        other => unreachable!("{} is not written to safetensors", other.name()),
    }
}

/// Splits `plans` (in order) into shards of at most `max_bytes` of data each (a bigger tensor gets
/// a shard of its own) and builds each shard's header.
fn plan_shards(
    plans: &[weights::TensorPlan],
    max_bytes: u64,
    dir: &Path,
) -> (Vec<Shard>, serde_json::Value) {
    let mut groups: Vec<Vec<&weights::TensorPlan>> = vec![Vec::new()];
    let mut size = 0u64;
    for p in plans {
        if size > 0 && size + p.bytes() > max_bytes {
            groups.push(Vec::new());
            size = 0;
        }
        groups.last_mut().expect("non-empty").push(p);
        size += p.bytes();
    }
    let names = shard_names(groups.len());
    let mut weight_map = serde_json::Map::new();
    let mut shards = Vec::new();
    for (group, name) in groups.iter().zip(&names) {
        let mut header = serde_json::Map::new();
        header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
        let mut off = 0u64;
        for p in group {
            header.insert(
                p.hf_name.clone(),
                serde_json::json!({
                    "dtype": safetensors_dtype(p.dtype),
                    "shape": p.shape,
                    "data_offsets": [off, off + p.bytes()],
                }),
            );
            off += p.bytes();
            weight_map.insert(p.hf_name.clone(), serde_json::json!(name));
        }
        let mut json = serde_json::to_vec(&header).expect("JSON values serialize");
        // The data starts 8-byte aligned, as the safetensors writer pads the header with spaces.
        while !json.len().is_multiple_of(8) {
            json.push(b' ');
        }
        let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(&json);
        shards.push(Shard {
            path: dir.join(name),
            header: bytes,
            data_bytes: off,
        });
    }
    let total: u64 = plans.iter().map(|p| p.bytes()).sum();
    let index = serde_json::json!({
        "metadata": {"total_size": total},
        "weight_map": weight_map,
    });
    (shards, index)
}

/// Writes the shards in turn, each to `<name>.partial`.
struct SafetensorsSink {
    shards: Vec<Shard>,
    /// Shards opened so far; the one being written is `opened - 1`.
    opened: usize,
    file: Option<BufWriter<File>>,
    /// Data bytes the open shard still expects.
    left: u64,
}

impl SafetensorsSink {
    fn close(&mut self) -> Result<()> {
        if let Some(mut f) = self.file.take() {
            let p = partial(&self.shards[self.opened - 1].path);
            f.flush()
                .with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }
}

impl Sink for SafetensorsSink {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        while self.left == 0 {
            self.close()?;
            let shard = self
                .shards
                .get(self.opened)
                .context("more tensor bytes than the safetensors headers describe")?;
            let p = partial(&shard.path);
            let mut f = create(&p)?;
            f.write_all(&shard.header)
                .with_context(|| format!("writing {}", p.display()))?;
            self.file = Some(f);
            self.left = shard.data_bytes;
            self.opened += 1;
        }
        if bytes.len() as u64 > self.left {
            bail!("internal error: a chunk crosses a safetensors shard boundary");
        }
        let p = partial(&self.shards[self.opened - 1].path);
        self.file
            .as_mut()
            .expect("opened above")
            .write_all(bytes)
            .with_context(|| format!("writing {}", p.display()))?;
        self.left -= bytes.len() as u64;
        Ok(())
    }
}

/// Removes the weight files of an earlier checkpoint in `dir` (an index left behind would shadow a
/// new single-file checkpoint).
fn remove_stale_weights(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let stale = name == "model.safetensors"
            || name == "model.safetensors.index.json"
            || (name.starts_with("model-") && name.ends_with(".safetensors"));
        if stale {
            std::fs::remove_file(e.path())
                .with_context(|| format!("removing {}", e.path().display()))?;
        }
    }
    Ok(())
}

fn write_hf_dir(
    spec: &SynthSpec,
    plans: &[weights::TensorPlan],
    vocab: &vocab::Vocab,
    dir: &Path,
    bar: &ProgressBar,
) -> Result<PathBuf> {
    let shape = spec.shape;
    remove_stale_weights(dir)?;
    write_json(
        &dir.join("config.json"),
        &shape.hf_config(spec.dtype, vocab),
    )?;
    write_json(
        &dir.join("generation_config.json"),
        &vocab.generation_config_json(),
    )?;
    write_json(&dir.join("tokenizer.json"), &vocab.tokenizer_json())?;
    write_json(
        &dir.join("tokenizer_config.json"),
        &vocab.tokenizer_config_json(shape.max_context),
    )?;
    let (shards, index) = plan_shards(plans, spec.max_shard_bytes, dir);
    let n = shards.len();
    let sink = SafetensorsSink {
        shards,
        opened: 0,
        file: None,
        left: 0,
    };
    let mut sink = stream(plans, spec.seed, sink, bar)?;
    sink.close()?;
    if sink.opened != n || sink.left != 0 {
        bail!("internal error: safetensors shards were not all written");
    }
    for s in &sink.shards {
        rename(&partial(&s.path), &s.path)?;
    }
    if n > 1 {
        write_json(&dir.join("model.safetensors.index.json"), &index)?;
    }
    Ok(dir.to_path_buf())
}
