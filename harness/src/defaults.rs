//! Per-device tuned defaults (DESIGN.md §4): `boards/defaults/<device>.toml`, written by
//! `memra tune`, embedded in the binary at build time. A device is identified by its name, compute
//! capability and SM count (CPU: model name and cores). The values sit between the built-in
//! defaults and the user's configuration: a config file or a flag always wins. Where each value
//! came from is recorded in [`crate::config::Config::sources`] and shown by
//! `memra serve --print-config`.

use crate::config::Config;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

include!(concat!(env!("OUT_DIR"), "/embedded_defaults.rs"));

/// A device as the defaults files name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceKey {
    /// "NVIDIA H200", or the CPU's model name.
    pub name: String,
    /// "9.0" (CUDA), "cpu" otherwise.
    pub compute_capability: String,
    /// SMs (CUDA) or logical cores (CPU).
    pub sm_count: i32,
}

impl DeviceKey {
    /// The file stem: "nvidia-h200" from "NVIDIA H200".
    pub fn slug(&self) -> String {
        slug(&self.name)
    }
}

/// Lower-case alphanumerics joined by single dashes.
pub fn slug(name: &str) -> String {
    let s: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    s.split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Where the values came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub commit: String,
    /// ISO date.
    pub date: String,
    pub tool: String,
    #[serde(default)]
    pub notes: String,
}

/// One tuned value with the measurement that chose it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tuned {
    /// The chosen value (integer or float).
    pub value: toml::Value,
    /// What was measured ("decode tok/s, SmolLM2-135M bs=1").
    pub metric: String,
    pub unit: String,
    /// Timed runs behind `median`/`min`/`max`.
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Every candidate tried, in the order tried, and its median (`tried_medians`); for a value
    /// fitted from measurements rather than chosen (`spec_row_cost`), the points measured (the
    /// draft counts) and their figures.
    #[serde(default)]
    pub tried: Vec<toml::Value>,
    #[serde(default)]
    pub tried_medians: Vec<f64>,
    /// Who measured this value, where that is not the file's `provenance`: tool, date and
    /// commit ("measured by hand, run 44, binary af08a74, 2026-12-01"). `memra tune` stamps the
    /// entries it keeps from its base file with that file's provenance; `--print-config` shows
    /// this in place of the file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A `boards/defaults/<device>.toml` file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceDefaults {
    pub device: DeviceKey,
    pub provenance: Provenance,
    /// Configuration keys (`prefill_chunk`, `spec_max_running`, `spec_min_acceptance`, …).
    #[serde(default)]
    pub engine: BTreeMap<String, Tuned>,
    /// Kernel compile-time defines (`LIN_TOKENS`, `ATTN_SPLIT`, …).
    #[serde(default)]
    pub kernels: BTreeMap<String, Tuned>,
}

impl DeviceDefaults {
    /// Parses one file's text; errors name `origin` and the field.
    pub fn parse(text: &str, origin: &str) -> Result<DeviceDefaults> {
        toml::from_str(text).with_context(|| format!("{origin}: invalid device defaults"))
    }

    /// Reads a file.
    pub fn read(path: &Path) -> Result<DeviceDefaults> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        Self::parse(&text, &path.display().to_string())
    }
}

/// The device the configuration will run on: CUDA device `cuda_device` when the backend is (or
/// auto-selects) CUDA, else the CPU.
pub fn current_device(cfg: &Config) -> Result<DeviceKey> {
    if crate::backends::use_cuda(cfg)? {
        let id = memra_engine::backend::cuda::device_identity(cfg.cuda_device)?;
        return Ok(DeviceKey {
            name: id.name,
            compute_capability: format!("{}.{}", id.compute_capability.0, id.compute_capability.1),
            sm_count: id.sm_count,
        });
    }
    Ok(cpu_device())
}

/// The CPU as a device: its model name from /proc/cpuinfo (or "cpu") and its logical cores.
pub fn cpu_device() -> DeviceKey {
    let name = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "cpu".into());
    DeviceKey {
        name,
        compute_capability: "cpu".into(),
        sm_count: std::thread::available_parallelism().map_or(1, |n| n.get()) as i32,
    }
}

/// The defaults for `dev`: the embedded file named after its slug, if its key matches exactly
/// (same name, compute capability and SM count).
pub fn embedded_for(dev: &DeviceKey) -> Result<Option<(String, DeviceDefaults)>> {
    let slug = dev.slug();
    for (stem, text) in EMBEDDED {
        if *stem == slug {
            let origin = format!("boards/defaults/{stem}.toml");
            let d = DeviceDefaults::parse(text, &origin)?;
            if &d.device == dev {
                return Ok(Some((origin, d)));
            }
            tracing::warn!(
                file = origin.as_str(),
                "tuned defaults are for {:?} ({}, {} SMs), not this device ({}, {} SMs); not used",
                d.device.name,
                d.device.compute_capability,
                d.device.sm_count,
                dev.compute_capability,
                dev.sm_count
            );
        }
    }
    Ok(None)
}

/// Applies the device defaults `cfg.device_defaults` selects ("auto": the embedded file for the
/// current device; "none"; or a path) to every value that neither the config file nor a flag
/// set. Logs once which file was used, or that the portable defaults run.
///
/// The kernel defines' combination rules are checked here on the merged set, so a configuration
/// may lean on a tuned define (ATTN_TILE = 1 on the file's ATTN_ROWS). Tuned defines that would
/// break a combination the configuration sets give way, with a warning (see [`merge_defines`]).
/// Errors: an unreadable file; a configuration whose own defines break a rule.
pub fn apply(cfg: &mut Config) -> Result<()> {
    if let Some((origin, d)) = chosen(cfg)? {
        apply_file(cfg, &origin, &d)?;
    }
    crate::config::check_define_combinations(&cfg.kernel_defines)
}

/// The defaults file `cfg.device_defaults` selects, as (where it came from, its contents):
/// "auto": the embedded file for the current device (logging once when there is none); "none":
/// no file; else the file at that path. Errors: a file that cannot be read or parsed.
pub fn chosen(cfg: &Config) -> Result<Option<(String, DeviceDefaults)>> {
    /// Set once the portable-defaults line is logged (`memra tune` resolves the file twice).
    static PORTABLE_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    Ok(match cfg.device_defaults.as_str() {
        "none" => None,
        "auto" => {
            let dev = current_device(cfg)?;
            let found = embedded_for(&dev)?;
            if found.is_none() && !PORTABLE_SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::info!(
                    device = dev.name.as_str(),
                    "no tuned defaults for this device (boards/defaults/{}.toml); running portable defaults",
                    dev.slug()
                );
            }
            found
        }
        path => Some((path.to_string(), DeviceDefaults::read(Path::new(path))?)),
    })
}

/// Applies one defaults file (see [`apply`]).
fn apply_file(cfg: &mut Config, origin: &str, d: &DeviceDefaults) -> Result<()> {
    let file_src = format!(
        "{origin} ({} {}, commit {})",
        d.provenance.tool, d.provenance.date, d.provenance.commit
    );
    // An entry measured apart from the file's run names its own source.
    let src = |t: &Tuned| match &t.source {
        Some(s) => format!("{origin} ({s})"),
        None => file_src.clone(),
    };
    tracing::info!(file = origin, "using tuned defaults");
    for (key, t) in &d.engine {
        if cfg.source(key) != crate::config::BUILT_IN {
            continue;
        }
        cfg.set_tuned(key, &t.value)
            .with_context(|| format!("{origin}: engine.{key}"))?;
        cfg.sources.insert(key.clone(), src(t));
    }
    let mut tuned = BTreeMap::new();
    for (key, t) in &d.kernels {
        if cfg.kernel_defines.contains_key(key) {
            continue;
        }
        let v = match &t.value {
            toml::Value::Integer(i) => i.to_string(),
            other => bail!("{origin}: kernels.{key} must be an integer (got {other})"),
        };
        tuned.insert(key.clone(), v);
    }
    let clash = {
        let mut m = cfg.kernel_defines.clone();
        m.extend(tuned.clone());
        crate::config::check_define_combinations(&m).err()
    };
    let dropped = merge_defines(&cfg.kernel_defines, &mut tuned);
    let mut merged = cfg.kernel_defines.clone();
    merged.extend(tuned.clone());
    // Where no small set of tuned defines makes way, the configuration's own rule is reported
    // by `apply`'s final check, without a warning for each define left out.
    if let (Some(e), true) = (
        clash,
        crate::config::check_define_combinations(&merged).is_ok(),
    ) {
        for key in &dropped {
            tracing::warn!(
                file = origin,
                define = %key,
                "tuned default skipped: with it the configuration's kernel defines break a combination rule: {e:#}"
            );
        }
    }
    for (key, v) in tuned {
        cfg.sources
            .insert(format!("kernel_defines.{key}"), src(&d.kernels[&key]));
        cfg.kernel_defines.insert(key, v);
    }
    Ok(())
}

/// Drops from `tuned` (kernel defines of a defaults file, none of them set by `set`, the
/// configuration's) the fewest that keep `set` ∪ `tuned` from passing the combination rules, and
/// returns their names. Only defines of a family the configuration sets (the name up to its first
/// `_`: ATTN, TCW, TCK — the families the rules read) are candidates; subsets are tried smallest
/// first, in name order within a size (every size up to 12 candidates, else up to 3 defines).
/// Where none passes, every candidate is dropped, and the configuration's own broken rule is left
/// for [`apply`]'s final check to report. Nothing is dropped where the merged set passes, as when
/// a tuned define is what the configuration leans on (ATTN_TILE = 1 on the file's ATTN_ROWS).
pub fn merge_defines(
    set: &BTreeMap<String, String>,
    tuned: &mut BTreeMap<String, String>,
) -> Vec<String> {
    let passes = |drop: &[&String]| {
        let mut m = set.clone();
        m.extend(
            tuned
                .iter()
                .filter(|(k, _)| !drop.contains(k))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        crate::config::check_define_combinations(&m).is_ok()
    };
    if passes(&[]) {
        return Vec::new();
    }
    let family = |k: &str| k.split('_').next().unwrap_or(k).to_string();
    let set_families: std::collections::BTreeSet<String> = set.keys().map(|k| family(k)).collect();
    let cands: Vec<&String> = tuned
        .keys()
        .filter(|k| set_families.contains(&family(k)))
        .collect();
    let most = if cands.len() <= 12 { cands.len() } else { 3 };
    let mut chosen: Option<Vec<&String>> = None;
    'sizes: for size in 1..=most {
        // The combinations of `size` candidates in name order: idx[0] < idx[1] < ...
        let mut idx: Vec<usize> = (0..size).collect();
        loop {
            let pick: Vec<&String> = idx.iter().map(|&i| cands[i]).collect();
            if passes(&pick) {
                chosen = Some(pick);
                break 'sizes;
            }
            let Some(at) = (0..size).rev().find(|&i| idx[i] < cands.len() - size + i) else {
                break;
            };
            idx[at] += 1;
            for j in at + 1..size {
                idx[j] = idx[j - 1] + 1;
            }
        }
    }
    let dropped: Vec<String> = chosen.unwrap_or(cands).into_iter().cloned().collect();
    for k in &dropped {
        tuned.remove(k);
    }
    dropped
}

/// `toml` text of the configuration with each value's source as a trailing comment.
pub fn annotate(text: &str, cfg: &Config) -> String {
    let mut table = String::new();
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') && t.ends_with(']') {
            table = t.trim_matches(|c| c == '[' || c == ']').to_string();
            out += line;
        } else if let Some((k, _)) = t.split_once(" = ") {
            let key = if table.is_empty() {
                k.trim().to_string()
            } else {
                format!("{table}.{}", k.trim())
            };
            out += &format!("{line}  # {}", cfg.source(&key));
        } else {
            out += line;
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug("NVIDIA H200"), "nvidia-h200");
        assert_eq!(
            slug("  Intel(R) Xeon(R) CPU @ 2.10GHz "),
            "intel-r-xeon-r-cpu-2-10ghz"
        );
    }

    #[test]
    fn embedded_files_parse_and_name_their_device() {
        for (stem, text) in EMBEDDED {
            let d = DeviceDefaults::parse(text, stem).unwrap();
            assert_eq!(
                &d.device.slug(),
                stem,
                "file name must be the device's slug"
            );
            for (k, t) in d.engine.iter().chain(&d.kernels) {
                assert!(
                    t.n >= 1 && t.min <= t.median && t.median <= t.max,
                    "{stem}: {k}"
                );
            }
        }
    }

    #[test]
    fn file_values_apply_below_config_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.toml");
        std::fs::write(
            &p,
            r#"
[device]
name = "Test GPU"
compute_capability = "9.0"
sm_count = 4
[provenance]
commit = "abc"
date = "2026-11-30"
tool = "memra tune"
[engine.prefill_chunk]
value = 128
metric = "ttft"
unit = "ms"
n = 3
median = 1.0
min = 0.9
max = 1.1
[engine.spec_max_running]
value = 3
metric = "spec speedup"
unit = "x"
n = 3
median = 1.2
min = 1.1
max = 1.3
[kernels.LIN_TOKENS]
value = 16
metric = "decode"
unit = "tok/s"
n = 3
median = 10.0
min = 9.0
max = 11.0
"#,
        )
        .unwrap();
        // The flag sets prefill_chunk; the file fills spec_max_running and LIN_TOKENS.
        let args = crate::config::ConfigArgs {
            prefill_chunk: Some(64),
            device_defaults: Some(p.display().to_string()),
            ..Default::default()
        };
        let mut c = args.resolve().unwrap();
        apply(&mut c).unwrap();
        assert_eq!(c.prefill_chunk, 64);
        assert_eq!(c.source("prefill_chunk"), "flag");
        assert_eq!(c.spec_max_running, 3);
        assert!(c.source("spec_max_running").contains("memra tune"));
        assert_eq!(
            c.kernel_defines.get("LIN_TOKENS").map(String::as_str),
            Some("16")
        );
        let text = annotate(&toml::to_string_pretty(&c).unwrap(), &c);
        assert!(text.contains("prefill_chunk = 64  # flag"), "{text}");
        assert!(text.contains("spec_max_running = 3  # "), "{text}");
    }

    /// The configuration, the embedded H200 file and `apply`, for kernel defines `defs`.
    fn with_h200(defs: &str, device_defaults: Option<&str>) -> Result<Config> {
        let dir = tempfile::tempdir().unwrap();
        let h200 = dir.path().join("h200.toml");
        let text = EMBEDDED
            .iter()
            .find(|(stem, _)| *stem == "nvidia-h200")
            .expect("the H200 file")
            .1;
        for k in ["TCW_UPB_Q", "TCW_TMA", "TCW_WS", "TCW_WS_Q", "ATTN_ROWS"] {
            let entry = format!("[kernels.{k}]");
            assert!(
                text.contains(&entry),
                "the tests assume the H200 file sets {k}"
            );
        }
        std::fs::write(&h200, text).unwrap();
        let conf = dir.path().join("c.toml");
        std::fs::write(&conf, format!("[kernel_defines]\n{defs}")).unwrap();
        let args = crate::config::ConfigArgs {
            config: Some(conf),
            device_defaults: Some(
                device_defaults.map_or_else(|| h200.display().to_string(), str::to_string),
            ),
            ..Default::default()
        };
        let mut c = args.resolve()?;
        apply(&mut c)?;
        Ok(c)
    }

    #[test]
    fn a_tuned_define_gives_way_to_a_combination_the_config_sets() {
        // (the configuration's defines, then the H200 file's TCW_UPB_Q, TCW_TMA, TCW_WS_Q as
        // applied). TCW_CLUSTER = 1 needs one unit a group: only TCW_UPB_Q = 2 gives way (the
        // cluster runs on the file's tensor copies). TCW_WS_Q = 1 (every format on the tensor
        // copies) needs TCW_UPB_Q = 1: the same. TCW_BULK = 0 breaks the file's TCW_WS, which
        // TCW_TMA needs: those two give way, the rest of the family stays; with ATTN_TILE = 1
        // as well, the file's ATTN_ROWS (which it needs) stays. ATTN_ROWS applies throughout.
        for (defs, upb_q, tma, ws_q) in [
            ("", Some("2"), Some("1"), Some("0")),
            ("TCW_CLUSTER = \"1\"\n", None, Some("1"), Some("0")),
            ("TCW_WS_Q = \"1\"\n", None, Some("1"), Some("1")),
            ("TCW_BULK = \"0\"\n", Some("2"), None, Some("0")),
            (
                "TCW_BULK = \"0\"\nATTN_TILE = \"1\"\n",
                Some("2"),
                None,
                Some("0"),
            ),
        ] {
            let c = with_h200(defs, None).unwrap();
            let get = |k: &str| c.kernel_defines.get(k).map(String::as_str);
            assert_eq!(
                (get("TCW_UPB_Q"), get("TCW_TMA"), get("TCW_WS_Q")),
                (upb_q, tma, ws_q),
                "{defs}"
            );
            assert_eq!(get("ATTN_ROWS"), Some("64"), "{defs}");
            crate::config::check_define_combinations(&c.kernel_defines).unwrap();
        }
    }

    #[test]
    fn a_config_define_may_lean_on_a_tuned_one() {
        // ATTN_TILE = 1 needs ATTN_ROWS > 0: the H200 file gives it (run 128 found the config
        // refused before the file was merged); without tuned defaults, or with a configuration
        // that sets ATTN_ROWS = 0, the rule holds.
        let c = with_h200("ATTN_TILE = \"1\"\n", None).unwrap();
        assert_eq!(
            c.kernel_defines.get("ATTN_ROWS").map(String::as_str),
            Some("64")
        );
        // "auto" on this machine (no GPU in CI; a device without a file) applies no file: the
        // configuration alone is checked, by `apply`.
        let auto = crate::config::ConfigArgs {
            backend: Some("cpu".into()),
            device_defaults: Some("auto".into()),
            ..Default::default()
        };
        let mut c = auto.resolve().unwrap();
        c.kernel_defines.insert("ATTN_TILE".into(), "1".into());
        let e = format!("{:#}", apply(&mut c).unwrap_err());
        assert!(e.contains("ATTN_TILE = 1 needs ATTN_ROWS > 0"), "auto: {e}");
        for (defs, dd) in [
            ("ATTN_TILE = \"1\"\n", Some("none")),
            ("ATTN_TILE = \"1\"\nATTN_ROWS = \"0\"\n", None),
        ] {
            let e = format!("{:#}", with_h200(defs, dd).unwrap_err());
            assert!(
                e.contains("ATTN_TILE = 1 needs ATTN_ROWS > 0"),
                "{defs} {dd:?}: {e}"
            );
        }
    }

    #[test]
    fn the_fewest_tuned_defines_give_way() {
        // Wide entries of 8 heads do not fit: the file's two defines that compile them give way;
        // its ATTN_ROWS, ATTN_HEADS and ATTN_SPLIT stay.
        let c = with_h200("ATTN_HEADS_WIDE = \"8\"\n", None).unwrap();
        let get = |k: &str| c.kernel_defines.get(k).map(String::as_str);
        assert_eq!(
            (get("ATTN_WIDE_ROWS_F16"), get("ATTN_WIDE_SPLITS")),
            (None, None)
        );
        for k in ["ATTN_ROWS", "ATTN_HEADS", "ATTN_SPLIT"] {
            assert!(get(k).is_some(), "{k}");
        }
        // A clash in each of two families: 8 rows of 4 heads a block with the file's
        // ATTN_ROWS = 64 (two such blocks do not fit an SM), and TCW_UPB_Q = 2 beside the
        // cluster. Each gives way alone.
        let c = with_h200("TCW_CLUSTER = \"1\"\nATTN_ROWS_Q = \"8\"\n", None).unwrap();
        let get = |k: &str| c.kernel_defines.get(k).map(String::as_str);
        assert_eq!(
            (
                get("ATTN_ROWS"),
                get("TCW_UPB_Q"),
                get("TCW_TMA"),
                get("ATTN_SPLIT")
            ),
            (None, None, Some("1"), Some("256"))
        );
    }

    #[test]
    fn the_embedded_files_pass_the_combination_rules() {
        for (stem, text) in EMBEDDED {
            let d = DeviceDefaults::parse(text, stem).unwrap();
            let defs = d
                .kernels
                .iter()
                .map(|(k, t)| (k.clone(), t.value.to_string()))
                .collect();
            crate::config::check_define_combinations(&defs)
                .unwrap_or_else(|e| panic!("{stem}: {e:#}"));
        }
    }
}
