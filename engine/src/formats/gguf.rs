//! GGUF v2/v3 reader over a memory map.
//!
//! Format: <https://github.com/ggml-org/ggml/blob/master/docs/gguf.md>. Header (`GGUF`, version,
//! tensor count, metadata count), metadata key/value pairs, tensor infos (name, dims in ggml order
//! with `ne[0]` innermost, type, offset), then tensor data aligned to `general.alignment`
//! (default 32). Every read is bounds-checked: a truncated or corrupt file is an
//! [`Error::Format`] naming the file and the field, never a panic.

use crate::error::{Error, Result};
use crate::quant::DType;
use memmap2::Mmap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One metadata value, of any of GGUF's 13 value types.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// Integer value of any integer type (and bool), if it fits in u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v as u64),
            MetaValue::U16(v) => Some(v as u64),
            MetaValue::U32(v) => Some(v as u64),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            MetaValue::Bool(v) => Some(v as u64),
            _ => None,
        }
    }
    /// Float value of any numeric type.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v as f64),
            MetaValue::F64(v) => Some(v),
            MetaValue::I8(v) => Some(v as f64),
            MetaValue::I16(v) => Some(v as f64),
            MetaValue::I32(v) => Some(v as f64),
            MetaValue::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }
    /// The string, for `String` values.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }
    /// The elements, for `Array` values.
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }
    /// Bool value (also accepts integer 0/1).
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => self.as_u64().map(|v| v != 0),
        }
    }
}

/// Where one tensor lives in the file.
#[derive(Debug, Clone)]
pub struct GgufTensorInfo {
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the contiguous (innermost) one.
    pub dims: Vec<u64>,
    pub dtype: DType,
    /// Absolute byte range in the file.
    pub range: std::ops::Range<usize>,
}

/// A parsed GGUF file; tensor bytes stay in the memory map.
pub struct GgufFile {
    pub path: PathBuf,
    pub version: u32,
    pub metadata: BTreeMap<String, MetaValue>,
    /// Tensor infos in file order.
    pub tensors: Vec<GgufTensorInfo>,
    pub mmap: Arc<Mmap>,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, what: &str) -> Error {
        Error::format(self.path, format!("{what} (at byte {})", self.pos))
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.err(&format!("truncated while reading {what}")))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("length checked"))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }
    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u64(what)?;
        let n = usize::try_from(n).map_err(|_| self.err(&format!("{what}: length {n}")))?;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.err(&format!("{what} is not UTF-8")))
    }
    fn value(&mut self, ty: u32, key: &str, depth: u32) -> Result<MetaValue> {
        Ok(match ty {
            0 => MetaValue::U8(self.arr::<1>(key)?[0]),
            1 => MetaValue::I8(self.arr::<1>(key)?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.arr(key)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.arr(key)?)),
            4 => MetaValue::U32(self.u32(key)?),
            5 => MetaValue::I32(i32::from_le_bytes(self.arr(key)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.arr(key)?)),
            7 => match self.arr::<1>(key)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(self.err(&format!("metadata {key}: bool byte {b}"))),
            },
            8 => MetaValue::String(self.string(key)?),
            9 => {
                if depth > 8 {
                    return Err(self.err(&format!("metadata {key}: arrays nested too deep")));
                }
                let ety = self.u32(key)?;
                let n = self.u64(key)?;
                // Every element takes at least one byte: a count beyond the file is corrupt.
                if n > (self.buf.len() - self.pos) as u64 {
                    return Err(self.err(&format!("metadata {key}: array length {n} exceeds file")));
                }
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(self.value(ety, key, depth + 1)?);
                }
                MetaValue::Array(v)
            }
            10 => MetaValue::U64(self.u64(key)?),
            11 => MetaValue::I64(i64::from_le_bytes(self.arr(key)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.arr(key)?)),
            t => return Err(self.err(&format!("metadata {key}: unknown value type {t}"))),
        })
    }
}

impl GgufFile {
    /// Opens and parses `path`. Errors: I/O, bad magic, unsupported version (only 2 and 3),
    /// truncation, unknown value or tensor types, tensors outside the file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: the map is read-only; the file is not expected to change while mapped.
        let mmap = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        Self::parse(path, Arc::new(mmap))
    }

    fn parse(path: &Path, mmap: Arc<Mmap>) -> Result<GgufFile> {
        let mut c = Cursor {
            buf: &mmap[..],
            pos: 0,
            path,
        };
        if c.take(4, "magic").ok() != Some(b"GGUF".as_slice()) {
            return Err(Error::format(path, "not a GGUF file (bad magic)"));
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(Error::format(
                path,
                format!("GGUF version {version} (supported: 2, 3)"),
            ));
        }
        let n_tensors = c.u64("tensor count")?;
        let n_kv = c.u64("metadata count")?;
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = c.string("metadata key")?;
            let ty = c.u32(&key)?;
            let v = c.value(ty, &key, 0)?;
            metadata.insert(key, v);
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() => a as usize,
                _ => {
                    return Err(Error::format(
                        path,
                        "general.alignment is not a power of two",
                    ))
                }
            },
        };
        if n_tensors > (c.buf.len() / 8) as u64 {
            return Err(c.err(&format!("tensor count {n_tensors} exceeds file")));
        }
        let mut raw = Vec::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let name = c.string("tensor name")?;
            let nd = c.u32(&name)?;
            if nd == 0 || nd > 4 {
                return Err(c.err(&format!("tensor {name}: {nd} dimensions")));
            }
            let mut dims = Vec::new();
            for _ in 0..nd {
                dims.push(c.u64(&name)?);
            }
            let ty = c.u32(&name)?;
            let off = c.u64(&name)?;
            raw.push((name, dims, ty, off));
        }
        let data_start = c.pos.div_ceil(alignment) * alignment;
        let mut tensors = Vec::with_capacity(raw.len());
        for (name, dims, ty, off) in raw {
            let dtype = DType::from_ggml(ty).ok_or_else(|| {
                Error::format(
                    path,
                    format!(
                        "tensor {name}: type {} is not supported (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K)",
                        DType::ggml_name(ty)
                    ),
                )
            })?;
            let n = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| Error::format(path, format!("tensor {name}: size overflow")))?;
            if dims[0] % dtype.block_elems() as u64 != 0 {
                return Err(Error::format(
                    path,
                    format!(
                        "tensor {name}: row length {} is not a multiple of the {} block size",
                        dims[0],
                        dtype.name()
                    ),
                ));
            }
            let bytes = (n / dtype.block_elems() as u64) * dtype.block_bytes() as u64;
            let start = (data_start as u64).checked_add(off);
            let end = start.and_then(|s| s.checked_add(bytes));
            match (start, end) {
                (Some(s), Some(e)) if e <= mmap.len() as u64 => tensors.push(GgufTensorInfo {
                    name,
                    dims,
                    dtype,
                    range: s as usize..e as usize,
                }),
                _ => {
                    return Err(Error::format(
                        path,
                        format!(
                            "tensor {name}: data at offset {off} (+{bytes} bytes) lies beyond the end of the file ({} bytes); the file is truncated",
                            mmap.len()
                        ),
                    ))
                }
            }
        }
        Ok(GgufFile {
            path: path.to_path_buf(),
            version,
            metadata,
            tensors,
            mmap,
        })
    }

    /// Metadata value by key.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str> {
        self.get("general.architecture")
            .and_then(|v| v.as_str())
            .ok_or_else(|| Error::format(&self.path, "missing metadata general.architecture"))
    }
}
