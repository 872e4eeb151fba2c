//! `memra boards` on the fixture rows (harness/tests/fixtures/boards/): table cells, text outside
//! the markers, the README block, the PNGs, and byte-identical output on a second run.

use super::super::imp::render;
use super::super::tables::{begin, end, BLOCKS};
use super::BoardsArgs;
use std::path::{Path, PathBuf};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/boards");

const DOC: &str = "# Perf (hand-written)\n\nIntro kept as is.\n\n## Decode\n\n\
<!-- boards:decode:begin -->\nstale table\n<!-- boards:decode:end -->\n\n\
Between the blocks: kept.\n\n## TTFT\n<!-- boards:ttft:begin -->\n<!-- boards:ttft:end -->\nTail text.\n";

const README: &str = "# memra\n\nIntro paragraph.\n\n## Set up\n\nSteps.\n\n## Gates\n\nMore.\n";

struct Fx {
    _dir: tempfile::TempDir,
    args: BoardsArgs,
}

fn fixture() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tune-data");
    std::fs::create_dir_all(&data).unwrap();
    for f in ["nvidia-h200.jsonl", "cpu-2-threads.jsonl"] {
        std::fs::copy(Path::new(FIXTURES).join(f), data.join(f)).unwrap();
    }
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/PERFORMANCE.md"), DOC).unwrap();
    std::fs::write(dir.path().join("README.md"), README).unwrap();
    let args = BoardsArgs {
        data,
        docs: dir.path().join("docs/PERFORMANCE.md"),
        readme: dir.path().join("README.md"),
        out: dir.path().join("boards"),
    };
    Fx { _dir: dir, args }
}

/// The text of `doc` outside every marked block (the markers kept, their insides dropped).
fn outside(doc: &str) -> String {
    let mut d = doc.to_string();
    for name in BLOCKS.iter().map(|b| b.0).chain(["speed"]) {
        let (b, e) = (begin(name), end(name));
        if let (Some(i), Some(j)) = (d.find(&b), d.find(&e)) {
            d = format!("{}{b}{}", &d[..i], &d[j..]);
        }
    }
    d
}

/// The body of NAME's block.
fn block<'a>(doc: &'a str, name: &str) -> &'a str {
    let i = doc.find(&begin(name)).unwrap() + begin(name).len();
    let j = doc.find(&end(name)).unwrap();
    &doc[i..j]
}

/// The table line whose cells start with `prefix` (cells joined by " | ").
fn line<'a>(table: &'a str, prefix: &str) -> &'a str {
    let want = format!("| {} |", prefix.trim_end_matches(" |"));
    let v: Vec<&str> = table.lines().filter(|l| l.starts_with(&want)).collect();
    assert_eq!(v.len(), 1, "one line starting {want:?} in\n{table}");
    v[0]
}

fn cells(l: &str) -> Vec<String> {
    l.trim_matches('|')
        .split(" | ")
        .map(|c| c.trim().to_string())
        .collect()
}

fn check_png(p: &PathBuf) {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(b.len() > 1000, "{} has {} bytes", p.display(), b.len());
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{}", p.display());
    assert_eq!(&b[12..16], b"IHDR");
    let w = u32::from_be_bytes(b[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(b[20..24].try_into().unwrap());
    assert_eq!((w, h), (1280, 760));
    assert_eq!(&b[b.len() - 8..b.len() - 4], b"IEND", "{}", p.display());
}

#[test]
fn boards_render_fixture_tables_charts_and_readme() {
    let fx = fixture();
    let rep = render(&fx.args).unwrap();
    assert_eq!((rep.files, rep.read), (2, 21), "{rep:?}");
    // 20 H200 rows, one replaced by a later figure of its cell; one CPU row.
    assert_eq!(rep.cells, 20, "{rep:?}");
    let notes = rep.notes.join("\n");
    assert!(
        notes.contains("cpu-2-threads.jsonl: 1 line(s) that are not JSON objects skipped"),
        "{notes}"
    );
    assert!(
        notes.contains("1 cell(s) of scenario `mystery` have no board yet"),
        "{notes}"
    );

    let doc = std::fs::read_to_string(&fx.args.docs).unwrap();
    // Text outside the markers is untouched; blocks the page lacked were appended at its end.
    let (before, after) = (outside(DOC), outside(&doc));
    assert!(
        after.starts_with(&before),
        "before:\n{before}\nafter:\n{after}"
    );
    assert!(
        after[before.len()..].starts_with("\n## Serving under load\n\n<!-- boards:serve:begin -->")
    );
    assert!(!doc.contains("stale table"));

    // Decode: the later BF16 figure (its params in another key order) replaced the earlier one.
    let dec = block(&doc, "decode");
    assert!(dec.contains("Conditions: device NVIDIA H200 (cuda), cpu 2 threads (cpu); commit bfbeb4f, d5e29d3, f21725f; measured 2026-11-30 (UTC); N = 5 runs per figure."), "{dec}");
    assert_eq!(
        cells(line(
            dec,
            "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16 | 1 | 128 | 256"
        )),
        [
            "NVIDIA H200 (cuda)",
            "llama-3.1-8b-bf16.gguf",
            "BF16",
            "1",
            "128",
            "256",
            "62.9 [62.8–63.1]",
            "1014",
            "23.9%",
            "264",
            "–",
            "bfbeb4f",
            "2026-11-30",
            "5"
        ]
    );
    assert!(!dec.contains("33.4"), "{dec}");
    // Another cell of the same model at another new_tokens: its own line, sorted before.
    let l128 = line(
        dec,
        "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16 | 1 | 128 | 128",
    );
    assert!(l128.contains("| 40.0 [39.5–40.5] |"), "{l128}");
    assert!(dec.find(l128).unwrap() < dec.find("| 1 | 128 | 256 |").unwrap());
    assert_eq!(
        cells(line(
            dec,
            "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16 | 8 |"
        ))[6..10],
        ["480 [470–490]", "970", "22.8%", "2117"]
    );
    assert_eq!(
        cells(line(dec, "NVIDIA H200 (cuda) | llama-3.1-8b-q8_0.gguf"))[6..],
        ["52.2 [52.1–52.4]", "449", "10.5%", "500", "hf-eager: failed (python3: No module named torch); llama.cpp 60.0 [59.0–61.0] tok/s (memra 0.87×)", "d5e29d3", "2026-11-30", "5"]
    );
    assert_eq!(
        cells(line(dec, "cpu 2 threads (cpu)"))[6..11],
        [
            "80.5 [79.0–81.0]",
            "8.90",
            "74.0%",
            "109",
            "llama.cpp 105 [103–107] tok/s (memra 0.77×)"
        ]
    );

    let ttft = block(&doc, "ttft");
    assert_eq!(
        cells(line(
            ttft,
            "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16 | 1024"
        ))[4..],
        [
            "512",
            "9090 [9090–9090] ms",
            "113",
            "–",
            "d5e29d3",
            "2026-11-30",
            "3†"
        ]
    );
    // The footnote of a figure below five runs sits under the table that shows one.
    assert!(
        ttft.contains("† N below the 5 timed runs a board figure asks for"),
        "{ttft}"
    );
    assert!(!dec.contains("† N below"), "{dec}");
    assert!(line(
        ttft,
        "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16 | 512"
    )
    .contains("4500 [4490–4510] ms"));

    let serve = block(&doc, "serve");
    assert_eq!(
        cells(line(
            serve,
            "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16 | closed, c=4"
        ))[4..9],
        [
            "512 / 128",
            "220 [215–224]",
            "150 / 180",
            "18.1 / 22.4",
            "64 (1 failed)"
        ]
    );
    // c=1 sorts before c=4.
    assert!(serve.find("closed, c=1").unwrap() < serve.find("closed, c=4").unwrap());

    let spec = block(&doc, "spec");
    assert_eq!(
        cells(line(
            spec,
            "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16 | chat"
        ))[4..11],
        [
            "ngram",
            "4",
            "128",
            "1.42 [1.35–1.50]",
            "63.0%",
            "60.0",
            "85.2"
        ]
    );
    // A spec cell that stops at end-of-sequence is a row of its own.
    let code: Vec<&str> = spec
        .lines()
        .filter(|l| l.contains("| code | ngram | 4 |"))
        .collect();
    assert_eq!(code.len(), 2, "{spec}");
    assert!(
        cells(code[0])[6..8] == ["128", "2.10 [2.00–2.20]"],
        "{spec}"
    );
    assert!(
        cells(code[1])[6..8] == ["≤ 256 (to EOS)", "2.30 [2.25–2.40]"],
        "{spec}"
    );
    let prefix = block(&doc, "prefix");
    assert_eq!(
        cells(line(
            prefix,
            "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16 | 4096"
        ))[4..9],
        [
            "64",
            "820 [810–830]",
            "95.0 [93.0–97.0]",
            "8.63 [8.40–8.90]",
            "4096"
        ]
    );

    // Charts: written where rows exist, listed in the charts block with paths relative to docs/.
    let out = &fx.args.out;
    let want = [
        "decode-nvidia-h200",
        "serve-nvidia-h200",
        "ttft-nvidia-h200",
        "spec-nvidia-h200",
        "decode-cpu-2-threads",
    ];
    for w in want {
        check_png(&out.join(format!("{w}.png")));
        assert!(
            block(&doc, "charts").contains(&format!("](../boards/{w}.png)")),
            "{w}"
        );
    }
    assert!(!out.join("serve-cpu-2-threads.png").exists());
    let mut pngs: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    pngs.sort();
    assert_eq!(pngs.len(), want.len(), "{pngs:?}");
    assert!(block(&doc, "charts").contains("![Decode tok/s at batch 1 — NVIDIA H200 (cuda)]"));

    // README: the speed block under a new "## Speed" heading before the first section.
    let readme = std::fs::read_to_string(&fx.args.readme).unwrap();
    assert!(
        readme.starts_with(
            "# memra\n\nIntro paragraph.\n\n## Speed\n\n<!-- boards:speed:begin -->\n"
        ),
        "{readme}"
    );
    assert_eq!(
        outside(&readme).replace(
            "## Speed\n\n<!-- boards:speed:begin --><!-- boards:speed:end -->\n\n",
            ""
        ),
        README
    );
    let speed = block(&readme, "speed");
    assert!(speed.contains("decode tok/s, bs=1, depth 128"), "{speed}");
    assert_eq!(
        cells(line(
            speed,
            "NVIDIA H200 (cuda) | llama-3.1-8b-bf16.gguf | BF16"
        )),
        [
            "NVIDIA H200 (cuda)",
            "llama-3.1-8b-bf16.gguf",
            "BF16",
            "62.9 [62.8–63.1]",
            "23.9%",
            "9090 [9090–9090] (1024 tokens)",
            "bfbeb4f, d5e29d3 · 2026-11-30 · N 5 / 3†"
        ]
    );
    assert_eq!(
        cells(line(speed, "NVIDIA H200 (cuda) | llama-3.1-8b-q8_0.gguf"))[5],
        "–"
    );
    assert!(speed.contains("† N below the 5"), "{speed}");
    assert!(
        speed.contains("[PERFORMANCE.md](docs/PERFORMANCE.md)"),
        "{speed}"
    );

    // Same rows, same bytes: a second run rewrites nothing.
    let (doc1, readme1) = (doc, readme);
    let rep2 = render(&fx.args).unwrap();
    assert!(rep2.updated.is_empty(), "{:?}", rep2.updated);
    assert_eq!(std::fs::read_to_string(&fx.args.docs).unwrap(), doc1);
    assert_eq!(std::fs::read_to_string(&fx.args.readme).unwrap(), readme1);
}

#[test]
fn boards_new_page_and_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tune-data");
    std::fs::create_dir_all(&data).unwrap();
    let args = BoardsArgs {
        data,
        docs: dir.path().join("docs/PERFORMANCE.md"),
        readme: dir.path().join("README.md"),
        out: dir.path().join("boards"),
    };
    let rep = render(&args).unwrap();
    assert_eq!((rep.files, rep.cells), (0, 0));
    assert!(rep.charts.is_empty());
    let notes = rep.notes.join("\n");
    for what in [
        "decode tok/s chart",
        "aggregate tok/s against concurrency",
        "TTFT against prompt length",
        "speculative speedup",
    ] {
        assert!(notes.contains(what), "{notes}");
    }
    assert!(notes.contains("README.md not found"), "{notes}");
    let doc = std::fs::read_to_string(&args.docs).unwrap();
    assert!(doc.starts_with("# Performance\n"));
    for (name, _) in BLOCKS {
        assert_eq!(doc.matches(&begin(name)).count(), 1, "{name}");
    }
    assert!(
        block(&doc, "decode").contains("_No decode rows yet"),
        "{doc}"
    );
    assert!(
        block(&doc, "charts").contains("_Skipped the decode tok/s chart"),
        "{doc}"
    );
}

#[test]
fn boards_short_commits_keep_dirty_mark() {
    use super::super::tables::short;
    assert_eq!(short("f21725f9a7ad+dirty"), "f21725f+dirty");
    assert_eq!(short("bfbeb4fd9202"), "bfbeb4f");
}

#[test]
fn boards_markers_keep_outside_text() {
    use super::super::tables::{replace_block, set_block, set_readme_block};
    let d = "a\n<!-- boards:x:begin -->\nold\n<!-- boards:x:end -->\nb\n";
    assert_eq!(
        replace_block(d, "x", "new\n").unwrap(),
        "a\n<!-- boards:x:begin -->\nnew\n<!-- boards:x:end -->\nb\n"
    );
    assert_eq!(replace_block(d, "y", "new"), None);
    assert_eq!(
        set_block("a\n", "y", "Why", "body"),
        "a\n\n## Why\n\n<!-- boards:y:begin -->\nbody\n<!-- boards:y:end -->\n"
    );
    // An existing "## Speed" heading gets the markers right under it.
    assert_eq!(
        set_readme_block("# r\n\n## Speed\n\nText.\n", "t"),
        "# r\n\n## Speed\n\n<!-- boards:speed:begin -->\nt\n<!-- boards:speed:end -->\n\nText.\n"
    );
}
