//! `hf:owner/repo[@revision][:file]` model specs, fetched with the `hf-hub` crate into
//! `<cache_dir>/hf` (the Hugging Face cache layout: `models--owner--repo/{blobs,refs,snapshots}`).

use anyhow::{anyhow, bail, Context, Result};
use hf_hub::api::sync::{ApiBuilder, ApiError, ApiRepo};
use hf_hub::{Cache, Repo, RepoType};
use std::path::{Path, PathBuf};

/// A parsed `hf:` spec.
#[derive(Debug, Clone, PartialEq)]
pub struct HfSpec {
    /// `owner/repo`.
    pub repo: String,
    /// Branch, tag or commit; `main` when not given.
    pub revision: String,
    /// One file of the repo; `None` means "the checkpoint" (config, weights, tokenizer).
    pub file: Option<String>,
}

const INDEX: &str = "model.safetensors.index.json";

impl HfSpec {
    /// Parses the part after `hf:`: `owner/repo`, optionally `@revision`, optionally `:file`.
    pub fn parse(rest: &str) -> Result<HfSpec> {
        let usage = "expected hf:owner/repo[@revision][:file]";
        let (repo_rev, file) = match rest.split_once(':') {
            Some((r, f)) => (r, Some(f)),
            None => (rest, None),
        };
        let (repo, revision) = match repo_rev.split_once('@') {
            Some((r, v)) => (r, v),
            None => (repo_rev, "main"),
        };
        let parts: Vec<&str> = repo.split('/').collect();
        if parts.len() != 2
            || parts
                .iter()
                .any(|p| p.is_empty() || *p == "." || *p == "..")
        {
            bail!("hf:{rest}: {usage}");
        }
        if revision.is_empty() {
            bail!("hf:{rest}: empty revision; {usage}");
        }
        if let Some(f) = file {
            check_repo_path(f).with_context(|| format!("hf:{rest}"))?;
        }
        Ok(HfSpec {
            repo: repo.to_string(),
            revision: revision.to_string(),
            file: file.map(str::to_string),
        })
    }

    fn repo(&self) -> Repo {
        Repo::with_revision(self.repo.clone(), RepoType::Model, self.revision.clone())
    }
}

/// A file path inside a repo must stay inside the snapshot directory.
fn check_repo_path(f: &str) -> Result<()> {
    if f.is_empty()
        || f.starts_with('/')
        || f.contains('\\')
        || f.split('/').any(|c| c.is_empty() || c == "." || c == "..")
    {
        bail!("{f:?} is not a relative file path inside the repo");
    }
    Ok(())
}

/// Fetches what an `hf:` spec names (`rest` is the part after `hf:`) and returns the local path:
/// the file for `:file`, else the snapshot directory holding `config.json`, the safetensors
/// weights (a single file, or the index and every shard it lists) and the tokenizer files.
/// Files already in the cache are not fetched again; a complete cached checkpoint needs no
/// network at all.
pub fn resolve(rest: &str, cache_dir: &Path, endpoint: &str) -> Result<PathBuf> {
    let spec = HfSpec::parse(rest)?;
    let cache_root = cache_dir.join("hf");
    let cache = Cache::new(cache_root.clone());
    let endpoint = endpoint.trim_end_matches('/').to_string();
    let fetcher = Fetcher {
        spec: &spec,
        cache: &cache,
        endpoint: &endpoint,
        api: std::cell::OnceCell::new(),
        cache_root,
    };
    match &spec.file {
        Some(f) => fetcher.get(f),
        None => match cached_checkpoint(&cache, &spec)? {
            Some(dir) => {
                eprintln!("hf:{}: already cached at {}", spec.repo, dir.display());
                Ok(dir)
            }
            None => fetcher.checkpoint(),
        },
    }
}

struct Fetcher<'a> {
    spec: &'a HfSpec,
    cache: &'a Cache,
    endpoint: &'a str,
    cache_root: PathBuf,
    api: std::cell::OnceCell<ApiRepo>,
}

impl Fetcher<'_> {
    fn api(&self) -> Result<&ApiRepo> {
        if let Some(a) = self.api.get() {
            return Ok(a);
        }
        let api = ApiBuilder::new()
            .with_endpoint(self.endpoint.to_string())
            .with_cache_dir(self.cache_root.clone())
            .with_progress(true)
            .build()
            .map_err(|e| anyhow!("setting up the Hugging Face client: {e}"))?;
        Ok(self.api.get_or_init(|| api.repo(self.spec.repo())))
    }

    /// The cached copy of `file`, else a download; `Ok(None)` when the repo has no such file.
    fn try_get(&self, file: &str) -> Result<Option<PathBuf>> {
        if let Some(p) = self.cache.repo(self.spec.repo()).get(file) {
            return Ok(Some(p));
        }
        match self.api()?.download(file) {
            Ok(p) => Ok(Some(p)),
            Err(e) if status_of(&e) == Some(404) => Ok(None),
            Err(e) => Err(self.explain(file, e)),
        }
    }

    fn get(&self, file: &str) -> Result<PathBuf> {
        self.try_get(file)?.ok_or_else(|| {
            anyhow!(
                "hf:{}: {file} not found (404) at {}/{}/resolve/{}/{file}",
                self.spec.repo,
                self.endpoint,
                self.spec.repo,
                self.spec.revision
            )
        })
    }

    fn explain(&self, file: &str, e: ApiError) -> anyhow::Error {
        let hint = match status_of(&e) {
            Some(401 | 403) => {
                " (a gated or private repo: accept its terms and put a token in \
                 ~/.cache/huggingface/token)"
            }
            Some(_) => "",
            None if matches!(&e, ApiError::RequestError(_)) => {
                " (is the hub reachable? set --hf-endpoint or HF_ENDPOINT for a mirror)"
            }
            None => "",
        };
        anyhow!(
            "hf:{}: downloading {file} from {}: {e}{hint}",
            self.spec.repo,
            self.endpoint
        )
    }

    /// Downloads a whole checkpoint; optional files first so that a complete set of the required
    /// ones means the earlier pull finished.
    fn checkpoint(&self) -> Result<PathBuf> {
        let config = self.get("config.json")?;
        for optional in ["tokenizer_config.json", "generation_config.json"] {
            self.try_get(optional)?;
        }
        self.get("tokenizer.json")?;
        match self.try_get(INDEX)? {
            Some(index) => {
                for shard in shards(&index)? {
                    self.get(&shard)?;
                }
            }
            None => {
                self.get("model.safetensors").with_context(|| {
                    format!(
                        "hf:{}: neither {INDEX} nor model.safetensors",
                        self.spec.repo
                    )
                })?;
            }
        }
        Ok(config.parent().expect("snapshot file").to_path_buf())
    }
}

fn status_of(e: &ApiError) -> Option<u16> {
    match e {
        ApiError::RequestError(inner) => match inner.as_ref() {
            ureq::Error::Status(code, _) => Some(*code),
            ureq::Error::Transport(_) => None,
        },
        _ => None,
    }
}

/// The snapshot directory when config, tokenizer and all weights are already in the cache.
fn cached_checkpoint(cache: &Cache, spec: &HfSpec) -> Result<Option<PathBuf>> {
    let c = cache.repo(spec.repo());
    let (Some(config), Some(_)) = (c.get("config.json"), c.get("tokenizer.json")) else {
        return Ok(None);
    };
    if let Some(index) = c.get(INDEX) {
        for shard in shards(&index)? {
            if c.get(&shard).is_none() {
                return Ok(None);
            }
        }
    } else if c.get("model.safetensors").is_none() {
        return Ok(None);
    }
    Ok(Some(config.parent().expect("snapshot file").to_path_buf()))
}

/// The distinct shard files named in a safetensors index's `weight_map`, sorted.
fn shards(index: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(index).with_context(|| format!("{}", index.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: invalid JSON", index.display()))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| anyhow!("{}: no weight_map object", index.display()))?;
    let mut files = Vec::new();
    for (tensor, file) in map {
        let f = file
            .as_str()
            .ok_or_else(|| anyhow!("{}: weight_map[{tensor}] is not a string", index.display()))?;
        check_repo_path(f).with_context(|| format!("{}", index.display()))?;
        files.push(f.to_string());
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        bail!("{}: weight_map is empty", index.display());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let s = HfSpec::parse("acme/tiny").unwrap();
        assert_eq!(
            (s.repo.as_str(), s.revision.as_str(), s.file),
            ("acme/tiny", "main", None)
        );
        let s = HfSpec::parse("acme/tiny@v1:sub/w.gguf").unwrap();
        assert_eq!(
            (s.repo.as_str(), s.revision.as_str(), s.file.as_deref()),
            ("acme/tiny", "v1", Some("sub/w.gguf"))
        );
        for bad in [
            "acme",
            "acme/",
            "a/b/c",
            "acme/tiny:",
            "acme/tiny:../x",
            "acme/tiny:/etc/x",
        ] {
            assert!(HfSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
