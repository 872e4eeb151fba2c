//! Model file formats behind one tensor-source interface: a model never knows which file its
//! tensors came from. Tensor names are canonicalized to GGUF's (`blk.N.attn_q.weight`); the
//! safetensors source translates HF names on open.

pub mod gguf;
pub mod gguf_write;
pub mod safetensors;

use crate::error::Result;
use crate::quant::{DType, Storage};
use std::path::Path;

/// One tensor: element type, shape in row-major order (outermost first; a linear weight is
/// `[out_features, in_features]`), and its bytes.
#[derive(Debug, Clone)]
pub struct TensorRef {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Storage,
}

impl TensorRef {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Anything that serves named tensors: a GGUF file, an HF safetensors checkpoint directory.
pub trait TensorSource: Send + Sync {
    /// The file or directory, for error messages.
    fn path(&self) -> &Path;
    /// All tensor names (canonical GGUF naming).
    fn names(&self) -> Vec<String>;
    /// The tensor, or `None` if the source has no tensor of that name.
    fn get(&self, name: &str) -> Option<TensorRef>;
}

/// A tensor that must exist: [`crate::Error::Format`] naming the source and tensor otherwise.
pub fn require(src: &dyn TensorSource, name: &str) -> Result<TensorRef> {
    src.get(name)
        .ok_or_else(|| crate::Error::format(src.path(), format!("missing tensor {name}")))
}

impl TensorSource for gguf::GgufFile {
    fn path(&self) -> &Path {
        &self.path
    }
    fn names(&self) -> Vec<String> {
        self.tensors.iter().map(|t| t.name.clone()).collect()
    }
    fn get(&self, name: &str) -> Option<TensorRef> {
        let t = self.tensors.iter().find(|t| t.name == name)?;
        Some(TensorRef {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.dims.iter().rev().map(|&d| d as usize).collect(),
            data: Storage::Mapped(self.mmap.clone(), t.range.clone()),
        })
    }
}
