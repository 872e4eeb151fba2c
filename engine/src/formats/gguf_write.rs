//! GGUF v3 writer that streams tensor data, so a multi-gigabyte file never sits in memory.
//!
//! Format: <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md> (the same layout
//! [`super::gguf`] reads). Little-endian throughout: magic `GGUF`, version 3, tensor count (u64),
//! metadata count (u64); each metadata pair as a string key (u64 length + UTF-8 bytes), a u32
//! value type and the value (arrays: element type u32, count u64, elements); each tensor info as
//! name, dimension count (u32), dimensions in ggml order (`ne[0]` innermost, u64 each), ggml type
//! (u32) and the offset of its data from the start of the data section (u64, a multiple of the
//! alignment). The data section starts at the first multiple of `general.alignment` (default 32)
//! after the tensor infos; every tensor's data is padded with zeros to the alignment.
//!
//! Use: describe the file with a [`GgufBuilder`] (metadata, then tensors in file order), call
//! [`GgufBuilder::begin`] to write the header, push each tensor's bytes in order with
//! [`GgufWriter::write_data`] (in as many pieces as convenient), then [`GgufWriter::finish`].

use super::gguf::MetaValue;
use crate::error::{Error, Result};
use crate::quant::DType;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The alignment GGUF assumes when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: usize = 32;

/// The ggml type id (GGUF tensor-info `type`) of a [`DType`]; the inverse of
/// [`DType::from_ggml`].
pub fn ggml_type_id(dtype: DType) -> u32 {
    match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::Q4_0 => 2,
        DType::Q4_1 => 3,
        DType::Q5_0 => 6,
        DType::Q8_0 => 8,
        DType::Q4_K => 12,
        DType::Q5_K => 13,
        DType::Q6_K => 14,
        DType::BF16 => 30,
    }
}

/// One planned tensor.
#[derive(Debug, Clone)]
struct Planned {
    name: String,
    /// ggml order: `dims[0]` innermost.
    dims: Vec<u64>,
    dtype: DType,
    bytes: u64,
}

/// Describes a GGUF file before any byte is written: metadata in insertion order, tensors in file
/// order.
#[derive(Debug, Clone)]
pub struct GgufBuilder {
    metadata: Vec<(String, MetaValue)>,
    tensors: Vec<Planned>,
    alignment: usize,
}

impl Default for GgufBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufBuilder {
    /// An empty file with the default alignment (32 bytes).
    pub fn new() -> GgufBuilder {
        GgufBuilder {
            metadata: Vec::new(),
            tensors: Vec::new(),
            alignment: DEFAULT_ALIGNMENT,
        }
    }

    /// Sets the data alignment in bytes (a power of two) and records it as `general.alignment`.
    /// Errors: not a power of two.
    pub fn alignment(&mut self, alignment: usize) -> Result<()> {
        if alignment == 0 || !alignment.is_power_of_two() || alignment > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "GGUF alignment {alignment} is not a power of two"
            )));
        }
        self.alignment = alignment;
        self.metadata.retain(|(k, _)| k != "general.alignment");
        self.metadata
            .push(("general.alignment".into(), MetaValue::U32(alignment as u32)));
        Ok(())
    }

    /// Adds a metadata pair. Errors: a key already present, or an array whose elements are not
    /// all of one value type (GGUF arrays are homogeneous).
    pub fn metadata(&mut self, key: impl Into<String>, value: MetaValue) -> Result<()> {
        let key = key.into();
        if self.metadata.iter().any(|(k, _)| *k == key) {
            return Err(Error::InvalidArgument(format!(
                "GGUF metadata key {key} added twice"
            )));
        }
        check_homogeneous(&key, &value)?;
        self.metadata.push((key, value));
        Ok(())
    }

    /// Adds a tensor of `shape` (row-major, outermost first: a linear weight is
    /// `[out_features, in_features]`; stored reversed, in ggml order) and element type `dtype`.
    /// Errors: a duplicate name, 0 or more than 4 dimensions, a zero dimension, or an innermost
    /// dimension that is not a whole number of `dtype` blocks.
    pub fn tensor(&mut self, name: impl Into<String>, shape: &[usize], dtype: DType) -> Result<()> {
        let name = name.into();
        let bad = |m: String| Err(Error::InvalidArgument(format!("GGUF tensor {name}: {m}")));
        if self.tensors.iter().any(|t| t.name == name) {
            return bad("added twice".into());
        }
        if shape.is_empty() || shape.len() > 4 || shape.contains(&0) {
            return bad(format!("shape {shape:?} (1 to 4 non-zero dimensions)"));
        }
        let inner = *shape.last().expect("non-empty");
        if !inner.is_multiple_of(dtype.block_elems()) {
            return bad(format!(
                "row length {inner} is not a multiple of the {} block size {}",
                dtype.name(),
                dtype.block_elems()
            ));
        }
        let n: usize = shape.iter().product();
        let Some(bytes) = dtype.bytes_for(n) else {
            return bad("size overflow".into());
        };
        self.tensors.push(Planned {
            name,
            dims: shape.iter().rev().map(|&d| d as u64).collect(),
            dtype,
            bytes: bytes as u64,
        });
        Ok(())
    }

    /// Size in bytes of the whole file this builder describes (the last tensor padded too).
    pub fn file_size(&self) -> u64 {
        let (header, _, data) = self.layout();
        header + data
    }

    /// Header length (up to the aligned data start), each tensor's offset within the data, and
    /// the padded length of the data.
    fn layout(&self) -> (u64, Vec<u64>, u64) {
        let a = self.alignment as u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut off = 0u64;
        for t in &self.tensors {
            offsets.push(off);
            off = (off + t.bytes).div_ceil(a) * a;
        }
        (self.header_bytes(&offsets).len() as u64, offsets, off)
    }

    fn header_bytes(&self, offsets: &[u64]) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(b"GGUF");
        h.extend_from_slice(&3u32.to_le_bytes());
        h.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        h.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut h, k);
            h.extend_from_slice(&value_type(v).to_le_bytes());
            put_value(&mut h, v);
        }
        for (t, off) in self.tensors.iter().zip(offsets) {
            put_str(&mut h, &t.name);
            h.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                h.extend_from_slice(&d.to_le_bytes());
            }
            h.extend_from_slice(&ggml_type_id(t.dtype).to_le_bytes());
            h.extend_from_slice(&off.to_le_bytes());
        }
        let padded = h.len().div_ceil(self.alignment) * self.alignment;
        h.resize(padded, 0);
        h
    }

    /// Writes the header (metadata, tensor infos, padding) to `w` and returns the writer that takes
    /// the tensor data. `path` only names the destination in errors.
    pub fn begin<W: Write>(self, mut w: W, path: impl AsRef<Path>) -> Result<GgufWriter<W>> {
        let path = path.as_ref().to_path_buf();
        let (_, offsets, _) = self.layout();
        let header = self.header_bytes(&offsets);
        w.write_all(&header).map_err(|e| Error::io(&path, e))?;
        Ok(GgufWriter {
            w,
            path,
            tensors: self.tensors,
            alignment: self.alignment,
            current: 0,
            written: 0,
        })
    }
}

/// Streams tensor data into a file whose header [`GgufBuilder::begin`] wrote.
pub struct GgufWriter<W: Write> {
    w: W,
    path: PathBuf,
    tensors: Vec<Planned>,
    alignment: usize,
    /// Index of the tensor being written.
    current: usize,
    /// Bytes of it written so far.
    written: u64,
}

impl<W: Write> GgufWriter<W> {
    /// Name of the tensor the next bytes belong to (`None` once every tensor is complete).
    pub fn current_tensor(&self) -> Option<&str> {
        self.tensors.get(self.current).map(|t| t.name.as_str())
    }

    /// Appends `bytes` to the data of the current tensor. A piece may not cross a tensor's end:
    /// when a tensor is complete its padding is written and the next piece starts the next tensor.
    /// Errors: more bytes than the current tensor has left (or no tensor left), or I/O.
    pub fn write_data(&mut self, bytes: &[u8]) -> Result<()> {
        let Some(t) = self.tensors.get(self.current) else {
            return Err(Error::InvalidArgument(format!(
                "{}: {} bytes written after the last tensor",
                self.path.display(),
                bytes.len()
            )));
        };
        let left = t.bytes - self.written;
        if bytes.len() as u64 > left {
            return Err(Error::InvalidArgument(format!(
                "{}: tensor {} has {left} bytes left, got {}",
                self.path.display(),
                t.name,
                bytes.len()
            )));
        }
        self.w
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, e))?;
        self.written += bytes.len() as u64;
        if self.written == t.bytes {
            let a = self.alignment as u64;
            let pad = (t.bytes.div_ceil(a) * a - t.bytes) as usize;
            // Padding after the last tensor is optional in the spec; writing it keeps the file
            // size a multiple of the alignment, as ggml's writer does.
            if pad > 0 {
                self.w
                    .write_all(&vec![0u8; pad])
                    .map_err(|e| Error::io(&self.path, e))?;
            }
            self.current += 1;
            self.written = 0;
        }
        Ok(())
    }

    /// Checks every tensor was written in full, flushes, and returns the inner writer. Errors: a
    /// tensor with missing bytes (named), or I/O.
    pub fn finish(mut self) -> Result<W> {
        if let Some(t) = self.tensors.get(self.current) {
            return Err(Error::InvalidArgument(format!(
                "{}: tensor {} is incomplete ({} of {} bytes written)",
                self.path.display(),
                t.name,
                self.written,
                t.bytes
            )));
        }
        self.w.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(self.w)
    }
}

fn value_type(v: &MetaValue) -> u32 {
    match v {
        MetaValue::U8(_) => 0,
        MetaValue::I8(_) => 1,
        MetaValue::U16(_) => 2,
        MetaValue::I16(_) => 3,
        MetaValue::U32(_) => 4,
        MetaValue::I32(_) => 5,
        MetaValue::F32(_) => 6,
        MetaValue::Bool(_) => 7,
        MetaValue::String(_) => 8,
        MetaValue::Array(_) => 9,
        MetaValue::U64(_) => 10,
        MetaValue::I64(_) => 11,
        MetaValue::F64(_) => 12,
    }
}

fn check_homogeneous(key: &str, v: &MetaValue) -> Result<()> {
    if let MetaValue::Array(items) = v {
        if let Some(first) = items.first() {
            let ty = value_type(first);
            if items.iter().any(|x| value_type(x) != ty) {
                return Err(Error::InvalidArgument(format!(
                    "GGUF metadata {key}: array elements of different types"
                )));
            }
        }
        for x in items {
            check_homogeneous(key, x)?;
        }
    }
    Ok(())
}

fn put_str(h: &mut Vec<u8>, s: &str) {
    h.extend_from_slice(&(s.len() as u64).to_le_bytes());
    h.extend_from_slice(s.as_bytes());
}

fn put_value(h: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => h.push(*x),
        MetaValue::I8(x) => h.push(*x as u8),
        MetaValue::U16(x) => h.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => h.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => h.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => h.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => h.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => h.push(*x as u8),
        MetaValue::String(s) => put_str(h, s),
        MetaValue::Array(items) => {
            // An empty array still needs an element type; any will do, u8 is the smallest.
            let ety = items.first().map(value_type).unwrap_or(0);
            h.extend_from_slice(&ety.to_le_bytes());
            h.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for x in items {
                put_value(h, x);
            }
        }
        MetaValue::U64(x) => h.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => h.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => h.extend_from_slice(&x.to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::gguf::GgufFile;
    use crate::formats::TensorSource;

    fn every_value() -> Vec<(&'static str, MetaValue)> {
        use MetaValue::*;
        vec![
            ("t.u8", U8(200)),
            ("t.i8", I8(-7)),
            ("t.u16", U16(65000)),
            ("t.i16", I16(-30000)),
            ("t.u32", U32(4_000_000_000)),
            ("t.i32", I32(-2_000_000_000)),
            ("t.f32", F32(-1.5e-3)),
            ("t.bool", Bool(true)),
            ("t.string", String("héllo ✓".into())),
            ("t.u64", U64(u64::MAX - 1)),
            ("t.i64", I64(i64::MIN + 3)),
            ("t.f64", F64(std::f64::consts::PI)),
            ("t.empty", Array(vec![])),
            (
                "t.strings",
                Array(vec![String("a b".into()), String("".into())]),
            ),
            (
                "t.nested",
                Array(vec![
                    Array(vec![I32(1), I32(2)]),
                    Array(vec![]),
                    Array(vec![I32(-3)]),
                ]),
            ),
        ]
    }

    fn pattern(n: usize, salt: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31) ^ salt).collect()
    }

    #[test]
    fn roundtrip_through_the_reader() {
        for alignment in [DEFAULT_ALIGNMENT, 64] {
            let mut b = GgufBuilder::new();
            if alignment != DEFAULT_ALIGNMENT {
                b.alignment(alignment).unwrap();
            }
            b.metadata("general.architecture", MetaValue::String("llama".into()))
                .unwrap();
            for (k, v) in every_value() {
                b.metadata(k, v).unwrap();
            }
            // Odd sizes so every tensor needs padding; a Q8_0 block is 34 bytes.
            let tensors = [
                ("a", vec![3usize], DType::F32),
                ("b", vec![5, 3], DType::F16),
                ("c", vec![2, 64], DType::Q8_0),
                ("d", vec![1, 256], DType::Q4_K),
                ("e", vec![7], DType::BF16),
            ];
            for (n, s, d) in &tensors {
                b.tensor(*n, s, *d).unwrap();
            }
            let size = b.file_size();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.gguf");
            let f = std::fs::File::create(&path).unwrap();
            let mut w = b.begin(std::io::BufWriter::new(f), &path).unwrap();
            let mut datas = Vec::new();
            for (i, (n, s, d)) in tensors.iter().enumerate() {
                assert_eq!(w.current_tensor(), Some(*n));
                let len = d.bytes_for(s.iter().product()).unwrap();
                let data = pattern(len, i as u8);
                // In two pieces, to exercise streaming.
                let (x, y) = data.split_at(len / 2);
                w.write_data(x).unwrap();
                w.write_data(y).unwrap();
                datas.push(data);
            }
            assert_eq!(w.current_tensor(), None);
            w.finish().unwrap();
            assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
            assert_eq!(size % alignment as u64, 0);

            let g = GgufFile::open(&path).unwrap();
            assert_eq!(g.version, 3);
            for (k, v) in every_value() {
                assert_eq!(g.get(k), Some(&v), "{k}");
            }
            assert_eq!(g.tensors.len(), tensors.len());
            for ((n, s, d), data) in tensors.iter().zip(&datas) {
                let t = g.get_tensor(n);
                assert_eq!(t.shape, *s, "{n}");
                assert_eq!(t.dtype, *d, "{n}");
                assert_eq!(t.data.bytes(), &data[..], "{n}");
                let info = g.tensors.iter().find(|t| t.name == *n).unwrap();
                assert_eq!(info.range.start % alignment, 0, "{n}");
            }
        }
    }

    impl GgufFile {
        fn get_tensor(&self, name: &str) -> crate::formats::TensorRef {
            TensorSource::get(self, name).expect("tensor present")
        }
    }

    #[test]
    fn type_ids_invert_the_reader() {
        for id in 0..64 {
            if let Some(d) = DType::from_ggml(id) {
                assert_eq!(ggml_type_id(d), id, "{}", d.name());
            }
        }
    }

    #[test]
    fn misuse_is_an_error() {
        let mut b = GgufBuilder::new();
        b.metadata("k", MetaValue::U8(1)).unwrap();
        assert!(b.metadata("k", MetaValue::U8(2)).is_err());
        let mixed = MetaValue::Array(vec![MetaValue::U8(1), MetaValue::I8(1)]);
        assert!(b.metadata("m", mixed).is_err());
        assert!(b.alignment(48).is_err());
        let e = b.tensor("q", &[4, 100], DType::Q4_K).unwrap_err();
        assert!(e.to_string().contains("not a multiple"), "{e}");
        assert!(b.tensor("z", &[0, 4], DType::F32).is_err());
        b.tensor("x", &[4], DType::F32).unwrap();
        assert!(b.tensor("x", &[4], DType::F32).is_err());
        let mut w = b.begin(Vec::new(), "mem").unwrap();
        assert!(w.write_data(&[0; 17]).is_err());
        w.write_data(&[0; 8]).unwrap();
        let e = match w.finish() {
            Ok(_) => panic!("incomplete tensor accepted"),
            Err(e) => e,
        };
        assert!(e.to_string().contains("tensor x is incomplete"), "{e}");
    }
}
