//! `memra quantize IN.gguf OUT.gguf --to q8_0`: re-quantizes a GGUF model's matrices to Q8_0 (what
//! llama.cpp's `llama-quantize ... Q8_0` does). The formats with the fastest batched kernels on
//! the GPU are BF16, Q8_0 and Q4_K (`QTC`, `QLIN_INT`), so a model shipped in another format (e.g.
//! SmolLM2's Q4_1) can be converted to one of them. Every tensor with two or more dimensions whose
//! rows are whole 32-element blocks is dequantized to f32 and re-quantized by
//! [`memra_engine::quant::quantize_row_q8_0`] (ggml's reference rounding); everything else (norm
//! weights, biases) and the metadata are copied, with `general.file_type` set to 7
//! (`LLAMA_FTYPE_MOSTLY_Q8_0`). Re-quantizing an already quantized model adds a Q8_0 rounding
//! (at most half a step of the new block's scale) on top of the source's.

use anyhow::{bail, Context, Result};
use memra_engine::formats::gguf::{GgufFile, MetaValue};
use memra_engine::formats::gguf_write::GgufBuilder;
use memra_engine::quant::{dequantize_row, quantize_row_q8_0, DType};
use std::path::{Path, PathBuf};

/// Arguments of `memra quantize`.
#[derive(Debug, clap::Args)]
pub struct QuantizeArgs {
    /// The GGUF model to read: a path, or anything `memra pull` accepts (a catalog name,
    /// hf:owner/repo[@revision][:file], synth:SHAPE:DTYPE[:SEED]).
    pub input: String,
    /// Where to write the re-quantized GGUF (refused if it exists, unless --force).
    pub output: PathBuf,
    /// Target format of the matrices.
    #[arg(long, default_value = "q8_0", value_parser = ["q8_0"])]
    pub to: String,
    /// Overwrite OUTPUT if it exists.
    #[arg(long)]
    pub force: bool,
}

/// What a conversion did, for the summary line and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Converted {
    /// Tensors re-quantized to Q8_0.
    pub quantized: usize,
    /// Tensors copied unchanged (1-D, already Q8_0, or rows not a whole number of blocks).
    pub copied: usize,
    /// Bytes of the output file.
    pub bytes: u64,
}

/// Runs `memra quantize`. Errors: an unreadable or malformed input (naming the file and the
/// field), an existing output without --force, I/O.
pub fn run(args: &QuantizeArgs, cfg: &crate::config::Config) -> Result<()> {
    if args.output.is_dir() {
        bail!(
            "{} is a directory: OUTPUT names the .gguf file to write",
            args.output.display()
        );
    }
    if args.output.exists() && !args.force {
        bail!(
            "{} exists (pass --force to overwrite it)",
            args.output.display()
        );
    }
    let input = crate::pull::resolve(&args.input, cfg)?;
    if input.is_dir() {
        bail!(
            "{} is a safetensors directory: memra quantize reads GGUF files",
            input.display()
        );
    }
    let c = quantize_file(&input, &args.output)?;
    println!(
        "{}: {} tensors re-quantized to Q8_0, {} copied, {:.1} MiB",
        args.output.display(),
        c.quantized,
        c.copied,
        c.bytes as f64 / (1u64 << 20) as f64
    );
    Ok(())
}

/// Whether a tensor is re-quantized: two or more dimensions, rows of whole 32-element blocks,
/// not Q8_0 already, and a format the CPU can dequantize.
fn converts(dims: &[u64], dtype: DType) -> bool {
    dims.len() >= 2 && dims[0].is_multiple_of(32) && dtype != DType::Q8_0
}

/// Re-quantizes `input` into `output` (written through a temporary file beside it, renamed at
/// the end, so a failed run leaves no partial model behind).
pub fn quantize_file(input: &Path, output: &Path) -> Result<Converted> {
    let src = GgufFile::open(input).with_context(|| format!("reading {}", input.display()))?;
    let mut b = GgufBuilder::new();
    if let Some(a) = src.get("general.alignment").and_then(MetaValue::as_u64) {
        b.alignment(a as usize)
            .with_context(|| format!("{}: general.alignment", input.display()))?;
    }
    for (k, v) in &src.metadata {
        if k == "general.alignment" || k == "general.file_type" {
            continue;
        }
        b.metadata(k.clone(), v.clone())?;
    }
    b.metadata("general.file_type", MetaValue::U32(7))?;
    let mut conv = Converted::default();
    for t in &src.tensors {
        let shape: Vec<usize> = t.dims.iter().rev().map(|&d| d as usize).collect();
        let dtype = if converts(&t.dims, t.dtype) {
            conv.quantized += 1;
            DType::Q8_0
        } else {
            conv.copied += 1;
            t.dtype
        };
        b.tensor(t.name.clone(), &shape, dtype)
            .with_context(|| format!("{}: tensor {}", input.display(), t.name))?;
    }
    conv.bytes = b.file_size();
    let tmp = output.with_extension("gguf.partial");
    let file =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut w = b.begin(std::io::BufWriter::new(file), &tmp)?;
    for t in &src.tensors {
        let data = &src.mmap[t.range.clone()];
        if !converts(&t.dims, t.dtype) {
            w.write_data(data)?;
            continue;
        }
        let cols = t.dims[0] as usize;
        let row_bytes = t
            .dtype
            .bytes_for(cols)
            .filter(|&rb| rb > 0 && data.len().is_multiple_of(rb))
            .with_context(|| format!("{}: tensor {}: size", input.display(), t.name))?;
        let (mut row, mut out) = (vec![0f32; cols], vec![0u8; cols / 32 * 34]);
        for src_row in data.chunks_exact(row_bytes) {
            dequantize_row(t.dtype, src_row, &mut row);
            quantize_row_q8_0(&row, &mut out);
            w.write_data(&out)?;
        }
    }
    use std::io::Write;
    w.finish()?
        .flush()
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, output)
        .with_context(|| format!("renaming {} to {}", tmp.display(), output.display()))?;
    Ok(conv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synthesize, Format, SynthDType, SynthSpec};

    /// A Q4_K model re-quantized: every matrix Q8_0 and within half a Q8_0 step of the source's
    /// values (plus 127 times the f16 rounding of the step), the rest byte-identical, the metadata kept (file type 7), and the engine loads it.
    #[test]
    fn q4_k_model_requantizes_to_q8_0() {
        let dir = tempfile::tempdir().unwrap();
        let spec = SynthSpec {
            shape: crate::synth::find_shape("tiny-llama").unwrap(),
            dtype: SynthDType::Q4K,
            format: Format::Gguf,
            seed: 7,
            max_shard_bytes: u64::MAX,
        };
        let src_path = synthesize(&spec, dir.path(), false).unwrap().path;
        let out_path = dir.path().join("q8.gguf");
        let c = quantize_file(&src_path, &out_path).unwrap();
        let (src, out) = (
            GgufFile::open(&src_path).unwrap(),
            GgufFile::open(&out_path).unwrap(),
        );
        assert_eq!(c.quantized + c.copied, src.tensors.len());
        assert!(c.quantized >= 7, "{c:?}");
        assert_eq!(
            out.get("general.file_type").and_then(MetaValue::as_u64),
            Some(7)
        );
        assert_eq!(
            out.get("general.architecture").and_then(MetaValue::as_str),
            src.get("general.architecture").and_then(MetaValue::as_str)
        );
        for (s, o) in src.tensors.iter().zip(&out.tensors) {
            assert_eq!((&s.name, &s.dims), (&o.name, &o.dims));
            let (sb, ob) = (&src.mmap[s.range.clone()], &out.mmap[o.range.clone()]);
            if !converts(&s.dims, s.dtype) {
                assert_eq!((s.dtype, sb), (o.dtype, ob), "{} copied", s.name);
                continue;
            }
            assert_eq!(o.dtype, DType::Q8_0, "{}", s.name);
            let n = ob.len() / 34 * 32;
            let (mut a, mut q) = (vec![0f32; n], vec![0f32; n]);
            dequantize_row(s.dtype, sb, &mut a);
            dequantize_row(DType::Q8_0, ob, &mut q);
            for (blk, (x, y)) in a.chunks(32).zip(q.chunks(32)).enumerate() {
                let d = half::f16::from_le_bytes([ob[blk * 34], ob[blk * 34 + 1]]).to_f32();
                for (u, v) in x.iter().zip(y) {
                    assert!(
                        (u - v).abs() <= d * (0.5 + 127.0 / 2048.0) + 1e-7,
                        "{}: {u} vs {v}",
                        s.name
                    );
                }
            }
        }
        let loaded = memra_engine::loader::load(&out_path).unwrap();
        assert_eq!(loaded.model.config.vocab_size, {
            let l = memra_engine::loader::load(&src_path).unwrap();
            l.model.config.vocab_size
        });
        // An existing output is refused without --force.
        let e = run(
            &QuantizeArgs {
                input: src_path.to_string_lossy().into(),
                output: out_path.clone(),
                to: "q8_0".into(),
                force: false,
            },
            &crate::config::Config::default(),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("--force"), "{e:#}");
        // A directory as the output is refused before anything is written, --force or not.
        let e = run(
            &QuantizeArgs {
                input: src_path.to_string_lossy().into(),
                output: dir.path().to_path_buf(),
                to: "q8_0".into(),
                force: true,
            },
            &crate::config::Config::default(),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("is a directory"), "{e:#}");
        assert!(!dir.path().with_extension("gguf.partial").exists());
    }
}
