//! `memra boards`: the performance boards regenerated from the rows `memra bench` writes
//! (research/tune-data/*.jsonl, DESIGN.md §5): the tables between the `<!-- boards:NAME:begin -->`
//! / `<!-- boards:NAME:end -->` markers of docs/PERFORMANCE.md, the README's speed table, and PNG
//! charts under boards/. The latest row of each cell (device, backend, model, dtype, scenario,
//! params) is shown, with its conditions (device, commit, date, N). Same rows, same markdown.
//!
//! It needs polars and plotters, which the default binary (the one carried to the GPU machine)
//! leaves out: they come with the `boards` feature. Without it the command exits with a message
//! saying how to build it.

use clap::Args;
use std::path::PathBuf;

/// The command that builds and runs `memra boards`.
pub const BUILD_HINT: &str = "cargo run --release -p memra --features boards -- boards";

#[derive(Debug, Args)]
pub struct BoardsArgs {
    /// Directory of the rows: every *.jsonl in it is read.
    #[arg(long, default_value = "research/tune-data")]
    pub data: PathBuf,
    /// The performance page whose marked blocks are regenerated (created when absent).
    #[arg(long, default_value = "docs/PERFORMANCE.md")]
    pub docs: PathBuf,
    /// The README whose speed table is regenerated (its markers are added under a "## Speed"
    /// heading when absent; skipped when the file does not exist).
    #[arg(long, default_value = "README.md")]
    pub readme: PathBuf,
    /// Directory the PNG charts are written to.
    #[arg(long, default_value = "boards")]
    pub out: PathBuf,
}

/// What a build without the `boards` feature says.
#[cfg_attr(feature = "boards", allow(dead_code))] // used by the tests there
pub fn missing_feature_message() -> String {
    format!(
        "memra boards is not in this build: it needs the `boards` cargo feature (polars and \
         plotters, left out of the default binary to keep it lean). Build and run it with:\n  \
         {BUILD_HINT}"
    )
}

#[cfg(not(feature = "boards"))]
pub fn run(_args: &BoardsArgs) -> anyhow::Result<()> {
    anyhow::bail!("{}", missing_feature_message())
}

#[cfg(feature = "boards")]
mod charts;
#[cfg(feature = "boards")]
mod load;
#[cfg(feature = "boards")]
mod tables;

#[cfg(feature = "boards")]
pub use imp::run;

#[cfg(feature = "boards")]
mod imp {
    use super::{charts, load, tables, BoardsArgs, BUILD_HINT};
    use anyhow::{Context, Result};
    use std::path::{Component, Path, PathBuf};

    /// What one regeneration did.
    #[derive(Debug, Default)]
    pub struct Report {
        pub files: usize,
        pub read: usize,
        pub cells: usize,
        pub charts: Vec<PathBuf>,
        /// Files rewritten (those whose text changed).
        pub updated: Vec<PathBuf>,
        pub notes: Vec<String>,
    }

    pub fn run(args: &BoardsArgs) -> Result<()> {
        let r = render(args)?;
        println!(
            "boards: {} rows in {} file(s) under {}, {} cells (the latest row of each)",
            r.read,
            r.files,
            args.data.display(),
            r.cells
        );
        for n in &r.notes {
            println!("boards: {n}");
        }
        for c in &r.charts {
            println!("boards: wrote {}", c.display());
        }
        for (p, what) in [(&args.docs, "tables"), (&args.readme, "speed table")] {
            let state = if r.updated.contains(p) {
                "updated"
            } else {
                "unchanged"
            };
            if p.exists() {
                println!("boards: {} ({what}) {state}", p.display());
            }
        }
        Ok(())
    }

    const KNOWN: [&str; 5] = ["decode", "ttft", "serve", "spec", "prefix"];

    /// Reads the rows and rewrites the page, the README block and the charts.
    pub fn render(args: &BoardsArgs) -> Result<Report> {
        let rows = load::read_dir(&args.data)?;
        let mut rep = Report {
            files: rows.files.len(),
            read: rows.read,
            cells: rows.rows.len(),
            notes: rows.notes.clone(),
            ..Report::default()
        };
        let other: std::collections::BTreeMap<&str, usize> = rows
            .rows
            .iter()
            .filter(|r| !KNOWN.contains(&r.scenario.as_str()))
            .fold(Default::default(), |mut m, r| {
                *m.entry(r.scenario.as_str()).or_default() += 1;
                m
            });
        for (s, n) in other {
            rep.notes
                .push(format!("{n} cell(s) of scenario `{s}` have no board yet"));
        }
        let out = charts::render_all(&rows.rows, &args.out)?;
        rep.notes.extend(out.skipped.iter().cloned());
        rep.charts = out.written.iter().map(|c| c.path.clone()).collect();

        let docs_dir = args.docs.parent().unwrap_or(Path::new(""));
        let mut chart_md = String::new();
        for c in &out.written {
            chart_md += &format!("![{}]({})\n\n", c.title, relative(docs_dir, &c.path));
        }
        for s in &out.skipped {
            let mut s = s.clone();
            if let Some(c) = s.get_mut(0..1) {
                c.make_ascii_uppercase();
            }
            chart_md += &format!("_{s}._\n\n");
        }
        let bodies = [
            tables::decode_table(&rows.rows),
            tables::ttft_table(&rows.rows),
            tables::serve_table(&rows.rows),
            tables::spec_table(&rows.rows),
            tables::prefix_table(&rows.rows),
            chart_md,
        ];
        let old = match std::fs::read_to_string(&args.docs) {
            Ok(s) => Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", args.docs.display())),
        };
        let mut doc = old.clone().unwrap_or_else(template);
        for ((name, title), body) in tables::BLOCKS.iter().zip(&bodies) {
            doc = tables::set_block(&doc, name, title, body);
        }
        if write_if_changed(&args.docs, old.as_deref(), &doc)? {
            rep.updated.push(args.docs.clone());
        }

        match std::fs::read_to_string(&args.readme) {
            Ok(old) => {
                let readme_dir = args.readme.parent().unwrap_or(Path::new(""));
                let body = tables::speed_table(&rows.rows, &relative(readme_dir, &args.docs));
                let new = tables::set_readme_block(&old, &body);
                if write_if_changed(&args.readme, Some(&old), &new)? {
                    rep.updated.push(args.readme.clone());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => rep.notes.push(format!(
                "{} not found: no speed table written",
                args.readme.display()
            )),
            Err(e) => return Err(e).with_context(|| format!("reading {}", args.readme.display())),
        }
        Ok(rep)
    }

    fn write_if_changed(path: &Path, old: Option<&str>, new: &str) -> Result<bool> {
        if old == Some(new) {
            return Ok(false);
        }
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(path, new).with_context(|| format!("writing {}", path.display()))?;
        Ok(true)
    }

    /// `to` relative to the directory `from`, with `/` separators (for markdown links).
    pub fn relative(from: &Path, to: &Path) -> String {
        let norm = |p: &Path| -> Vec<String> {
            let p = if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            };
            let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            let mut v: Vec<String> = Vec::new();
            for c in abs.components() {
                match c {
                    Component::ParentDir => {
                        v.pop();
                    }
                    Component::Normal(s) => v.push(s.to_string_lossy().into_owned()),
                    _ => {}
                }
            }
            v
        };
        let (f, t) = (norm(from), norm(to));
        let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
        let mut parts: Vec<String> = vec!["..".to_string(); f.len() - common];
        parts.extend(t[common..].iter().cloned());
        parts.join("/")
    }

    /// docs/PERFORMANCE.md when it does not exist yet: the introduction, how to read the figures,
    /// and the marked blocks (empty; filled right after).
    fn template() -> String {
        let mut s = format!(
            "# Performance\n\n\
Measured figures of memra, generated. `memra bench` appends one JSON row per figure to \
`research/tune-data/<device>.jsonl` (DESIGN.md §5); `memra boards` (`{BUILD_HINT}`) reads every \
row, keeps the latest one of each cell (device, backend, model, dtype, scenario and its \
parameters), and rewrites the text between the `<!-- boards:NAME:begin -->` and \
`<!-- boards:NAME:end -->` markers below, the speed table in the README and the charts in \
`boards/`. Text outside the markers is never touched; text inside them is overwritten.\n\n\
## How to read the figures\n\n\
- **Median [min–max], N**: each figure is the median of N timed runs after warm-up, with the \
fastest and slowest beside it. Comparisons (speculative against plain decode, prefix hit against \
cold) are paired and interleaved run by run, so drift hits both arms alike.\n\
- **Conditions**: every row names its device (and backend), the commit of the binary that \
measured it and the date (UTC); the line above each table sums them up for the table, and every \
chart carries them in its title and caption.\n\
- **Decode tok/s**: tokens per second summed over the batch (B sequences after a DEPTH-token \
prompt): NEW - 1 decode steps timed from the end of prefill (the forward that picked every \
sequence's first token) to the last token. Rows dated up to 2026-11-30 timed the whole \
run minus the same run stopped after its first token: the same steps, with prefill run twice.\n\
- **GB/s, % of copy bw**: the bytes one decode step has to read (every weight once, plus each \
sequence's KV cache at its mean depth) times steps per second, and that as a fraction of the copy \
bandwidth measured in the same run (device-to-device copy on a GPU; on a CPU a memcpy split over the run's threads, one thread in rows before 2026-12-02).\n\
- **Roofline tok/s**: copy bandwidth × 1e9 / weight bytes × batch: the decode rate if each step \
read every weight byte once at the measured copy speed (KV reads not counted). The decode chart \
draws it as a red line.\n\
- **Anchor (same run)**: another engine on the same weights and machine, measured in the same run \
(HF transformers eager, the gpt-fast recipe, llama.cpp where it builds); `memra N×` is memra's \
speed over the anchor's.\n\
- **TTFT**: one request whose prompt (of the given length) is prefilled in chunks of \
`prefill chunk` tokens, until its first token; prefill tok/s = prompt tokens / TTFT.\n\
- **Serving**: `memra bench serve` against `memra serve` over HTTP: closed loop (c streams at \
once) or open loop (Poisson arrivals at a rate); aggregate output tok/s, and TTFT and \
inter-token latency (ITL) percentiles over every request.\n\
- **Speculative**: decode tok/s with speculation over plain decode on the same prompts, runs \
interleaved and outputs checked identical; acceptance = accepted / drafted tokens; new tokens: \
exactly N per request, or \"≤ N (to EOS)\" where requests end at the model's end-of-sequence \
token (`--stop-at-eos`).\n\
- **Prefix**: TTFT of a prompt whose prefix is already in the prefix cache (hit) against the same \
length cold.\n"
        );
        for (name, title) in tables::BLOCKS {
            s += &format!(
                "\n## {title}\n\n{}\n{}\n",
                tables::begin(name),
                tables::end(name)
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boards_missing_feature_message_says_how_to_build() {
        let m = missing_feature_message();
        assert!(m.contains("`boards` cargo feature"), "{m}");
        assert!(
            m.contains("cargo run --release -p memra --features boards -- boards"),
            "{m}"
        );
    }

    #[cfg(not(feature = "boards"))]
    #[test]
    fn boards_without_feature_exits_with_the_message() {
        let a = BoardsArgs {
            data: "research/tune-data".into(),
            docs: "docs/PERFORMANCE.md".into(),
            readme: "README.md".into(),
            out: "boards".into(),
        };
        let e = run(&a).unwrap_err();
        assert_eq!(e.to_string(), missing_feature_message());
    }

    #[cfg(feature = "boards")]
    #[test]
    fn boards_relative_links() {
        use super::imp::relative;
        use std::path::Path;
        assert_eq!(
            relative(Path::new(""), Path::new("docs/PERFORMANCE.md")),
            "docs/PERFORMANCE.md"
        );
        assert_eq!(
            relative(Path::new("docs"), Path::new("boards/a.png")),
            "../boards/a.png"
        );
        assert_eq!(
            relative(Path::new("/x/docs"), Path::new("/x/docs/a.png")),
            "a.png"
        );
    }

    #[cfg(feature = "boards")]
    mod rendered;
}
