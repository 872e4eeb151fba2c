//! Opens a model from a path: a `.gguf` file, or an HF checkpoint directory (config.json +
//! safetensors + tokenizer.json).

use crate::error::{Error, Result};
use crate::formats::gguf::GgufFile;
use crate::formats::safetensors::SafetensorsDir;
use crate::models::{Model, ModelConfig};
use crate::tokenizer::Tokenizer;
use std::path::Path;
use std::sync::Arc;

/// A model with its tokenizer.
pub struct LoadedModel {
    pub model: Arc<Model>,
    pub tokenizer: Arc<Tokenizer>,
}

/// Loads weights and tokenizer from `path`. Errors name the file and what is wrong: missing path,
/// not GGUF, unsupported architecture or tensor type, missing tensors or tokenizer.
pub fn load(path: &Path) -> Result<LoadedModel> {
    load_with(path, |_| {})
}

/// [`load`] with a hook that may change the configuration before the weights are loaded (gates
/// use it to build a deliberately perturbed model for a Level B canary).
pub fn load_with(path: &Path, tweak: impl FnOnce(&mut ModelConfig)) -> Result<LoadedModel> {
    if !path.exists() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory"),
        ));
    }
    if path.is_dir() {
        let cfg_path = path.join("config.json");
        if !cfg_path.exists() {
            return Err(Error::format(
                path,
                "directory has no config.json (not an HF checkpoint)",
            ));
        }
        let mut config = ModelConfig::from_hf_config(&cfg_path)?;
        tweak(&mut config);
        let model_type = serde_json::from_str::<serde_json::Value>(
            &std::fs::read_to_string(&cfg_path).map_err(|e| Error::io(&cfg_path, e))?,
        )
        .ok()
        .and_then(|v| v.get("model_type")?.as_str().map(str::to_string))
        .unwrap_or_default();
        let src = SafetensorsDir::open(path, &model_type)?;
        let tokenizer = Tokenizer::from_hf_dir(path)?;
        let model = Model::load(config, &src)?;
        return Ok(LoadedModel {
            model: Arc::new(model),
            tokenizer: Arc::new(tokenizer),
        });
    }
    let g = GgufFile::open(path)?;
    let mut config = ModelConfig::from_gguf(&g)?;
    tweak(&mut config);
    let tokenizer = Tokenizer::from_gguf(&g)?;
    let model = Model::load(config, &g)?;
    Ok(LoadedModel {
        model: Arc::new(model),
        tokenizer: Arc::new(tokenizer),
    })
}
