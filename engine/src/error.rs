//! The engine's error type. Errors are classified where they are produced (a bad file, a bad
//! request, an unsupported feature) so the harness can map them to exit codes or HTTP statuses in
//! one place.

use std::path::PathBuf;

/// Every fallible engine operation returns this.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a file failed at the OS level.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A model or tokenizer file is malformed: names the file and what is wrong with it.
    #[error("{path}: {msg}")]
    Format { path: PathBuf, msg: String },
    /// A well-formed file uses something the engine does not implement (an architecture, a tensor
    /// type).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Tokenizer construction or encoding failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// Chat-template rendering failed, or the model has no template.
    #[error("chat template: {0}")]
    Template(String),
    /// A caller passed an invalid argument (a request parameter, a sequence id).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Device memory ran out (weights, KV cache or activations); the message names the size.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// The KV cache has no free blocks left for the request.
    #[error("KV cache exhausted: need {needed} blocks, {free} free")]
    KvExhausted { needed: usize, free: usize },
}

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A [`Error::Format`] for `path`.
    pub fn format(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            msg: msg.into(),
        }
    }

    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
