//! The `.partial` file of `memra tune`: the values decided so far, written after each one, and
//! read back by `--resume`.

use crate::defaults::{DeviceDefaults, Provenance, Tuned};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;

/// Writes the values decided so far to `path` (the `.partial` file `--resume` reads).
pub(super) fn save_partial(
    path: &std::path::Path,
    dev: &crate::defaults::DeviceKey,
    provenance: &Provenance,
    engine: &BTreeMap<String, Tuned>,
    kernels: &BTreeMap<String, Tuned>,
) -> Result<()> {
    let file = DeviceDefaults {
        device: dev.clone(),
        provenance: provenance.clone(),
        engine: engine.clone(),
        kernels: kernels.clone(),
    };
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(path, toml::to_string_pretty(&file)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// The values a cut-short run of this same build, model, N and device decided (`--resume`), or
/// an error naming what differs.
pub(super) fn resume_from(
    path: &std::path::Path,
    dev: &crate::defaults::DeviceKey,
    provenance: &Provenance,
) -> Result<Option<DeviceDefaults>> {
    if !path.is_file() {
        eprintln!(
            "--resume: no {} yet; sweeping from the start",
            path.display()
        );
        return Ok(None);
    }
    let p = DeviceDefaults::read(path)?;
    if p.device != *dev {
        bail!(
            "--resume: {} was measured on {:?}, this is {:?}",
            path.display(),
            p.device.name,
            dev.name
        );
    }
    if p.provenance.commit != provenance.commit {
        bail!(
            "--resume: {} was measured by commit {}, this build is {}; delete it to start over",
            path.display(),
            p.provenance.commit,
            provenance.commit
        );
    }
    if p.provenance.notes != provenance.notes {
        bail!(
            "--resume: {} is from another model or N ({:?}; now {:?})",
            path.display(),
            p.provenance.notes,
            provenance.notes
        );
    }
    eprintln!(
        "resuming {}: {} values decided",
        path.display(),
        p.engine.len() + p.kernels.len()
    );
    Ok(Some(p))
}
