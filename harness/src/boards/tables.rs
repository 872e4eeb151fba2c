//! The markdown: tables per scenario, the README's speed table, and the marked blocks they go in
//! (`<!-- boards:NAME:begin -->` … `<!-- boards:NAME:end -->`; text outside them is kept as is).

use super::load::Row;
use crate::bench::BOARD_MIN_RUNS;
use std::collections::{BTreeMap, BTreeSet};

/// The blocks of docs/PERFORMANCE.md, in page order, with the section title used when a page
/// lacks one (appended at the end).
pub const BLOCKS: [(&str, &str); 6] = [
    ("decode", "Decode"),
    ("ttft", "Time to first token"),
    ("serve", "Serving under load"),
    ("spec", "Speculative decoding"),
    ("prefix", "Prefix-cache hits"),
    ("charts", "Charts"),
];

pub fn begin(name: &str) -> String {
    format!("<!-- boards:{name}:begin -->")
}

pub fn end(name: &str) -> String {
    format!("<!-- boards:{name}:end -->")
}

/// `doc` with the text between NAME's markers replaced by `body`; None when a marker is missing.
pub fn replace_block(doc: &str, name: &str, body: &str) -> Option<String> {
    let (b, e) = (begin(name), end(name));
    let i = doc.find(&b)?;
    let j = i + doc[i..].find(&e)?;
    Some(format!(
        "{}{b}\n{}\n{}",
        &doc[..i],
        body.trim_end_matches('\n'),
        &doc[j..]
    ))
}

/// `doc` with NAME's block set to `body`; a page without the markers gets a section (`## title`)
/// holding them at its end.
pub fn set_block(doc: &str, name: &str, title: &str, body: &str) -> String {
    replace_block(doc, name, body).unwrap_or_else(|| {
        let mut d = doc.trim_end_matches('\n').to_string();
        if !d.is_empty() {
            d.push_str("\n\n");
        }
        format!(
            "{d}## {title}\n\n{}\n{}\n{}\n",
            begin(name),
            body.trim_end_matches('\n'),
            end(name)
        )
    })
}

/// The README with its speed block set: markers are added under a `## Speed` heading when absent
/// (the heading is made before the README's first `## ` section when there is none).
pub fn set_readme_block(doc: &str, body: &str) -> String {
    if let Some(d) = replace_block(doc, "speed", body) {
        return d;
    }
    let block = format!(
        "{}\n{}\n{}\n",
        begin("speed"),
        body.trim_end_matches('\n'),
        end("speed")
    );
    let mut lines: Vec<&str> = doc.split_inclusive('\n').collect();
    if let Some(i) = lines.iter().position(|l| l.trim_end() == "## Speed") {
        let insert = format!("\n{block}");
        lines.insert(i + 1, &insert);
        return lines.concat();
    }
    let section = format!("## Speed\n\n{block}\n");
    match lines.iter().position(|l| l.starts_with("## ")) {
        Some(i) => {
            lines.insert(i, &section);
            lines.concat()
        }
        None => {
            let mut d = doc.trim_end_matches('\n').to_string();
            if !d.is_empty() {
                d.push_str("\n\n");
            }
            d + section.trim_end_matches('\n') + "\n"
        }
    }
}

/// A figure to about four significant digits, no exponent.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let a = x.abs();
    if a >= 100.0 || x == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// `median [min–max]`.
pub fn spread(r: &Row) -> String {
    match (r.min, r.max) {
        (Some(lo), Some(hi)) => format!("{} [{}–{}]", num(r.median), num(lo), num(hi)),
        _ => num(r.median),
    }
}

pub fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

/// YYYY-MM-DD (UTC) of Unix seconds.
pub fn date(t: f64) -> String {
    crate::dates::utc_date(t.floor() as i64)
}

/// A commit as git abbreviates it, keeping a suffix such as `+dirty` (a build from a tree with
/// changes not committed).
pub fn short(commit: &str) -> String {
    let (hash, suffix) = commit
        .split_once('+')
        .map_or((commit, String::new()), |(h, s)| (h, format!("+{s}")));
    hash.chars().take(7).collect::<String>() + &suffix
}

pub fn device(r: &Row) -> String {
    format!("{} ({})", r.device, r.backend)
}

/// Whether `r` has fewer timed runs than a board figure asks for (unknown N counts as fewer).
pub fn few_runs(r: &Row) -> bool {
    r.n.is_none_or(|n| n < BOARD_MIN_RUNS as f64)
}

/// N of `r`, marked † below [`BOARD_MIN_RUNS`].
pub fn n(r: &Row) -> String {
    let mark = if few_runs(r) { "†" } else { "" };
    r.n.map_or("?†".into(), |n| format!("{n}{mark}"))
}

/// The footnote under a table or chart with any figure of fewer than [`BOARD_MIN_RUNS`] runs
/// (empty otherwise).
pub fn few_runs_note(rows: &[&Row]) -> String {
    if !rows.iter().any(|r| few_runs(r)) {
        return String::new();
    }
    format!(
        "\n† N below the {BOARD_MIN_RUNS} timed runs a board figure asks for (DESIGN.md §5): an \
         earlier measurement kept as a record; re-measure it (`memra bench`, N ≥ \
         {BOARD_MIN_RUNS}) before citing it.\n"
    )
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.filter(|x| x.is_finite()).map_or("–".into(), f)
}

/// Markdown-safe cell text.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// A markdown table; `right` marks the columns aligned right.
fn table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n|", header.join(" | "));
    for (i, _) in header.iter().enumerate() {
        s += if right.get(i).copied().unwrap_or(false) {
            "---:|"
        } else {
            "---|"
        };
    }
    s.push('\n');
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
        s += &format!("| {} |\n", cells.join(" | "));
    }
    s
}

/// Devices, commits, dates and N of `rows`: the conditions line above a table or under a chart.
pub fn conditions(rows: &[&Row]) -> String {
    let set = |f: &dyn Fn(&Row) -> String| -> Vec<String> {
        rows.iter()
            .map(|r| f(r))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let devices = set(&device);
    let commits = set(&|r| short(&r.commit));
    let dates = set(&|r| date(r.time));
    let ns: BTreeSet<i64> = rows.iter().filter_map(|r| r.n.map(|n| n as i64)).collect();
    let ns: Vec<String> = ns.iter().map(|n| n.to_string()).collect();
    let span = match (dates.first(), dates.last()) {
        (Some(a), Some(b)) if a != b => format!("{a} … {b}"),
        (Some(a), _) => a.clone(),
        _ => "?".into(),
    };
    format!(
        "device {}; commit {}; measured {span} (UTC); N = {} runs per figure",
        devices.join(", "),
        commits.join(", "),
        if ns.is_empty() {
            "?".into()
        } else {
            ns.join(", ")
        }
    )
}

/// One anchor of a row, as `bench --vs` (an object of anchors by name) or research/cpu-board (one
/// anchor object) writes it; a list of anchor objects is read too.
pub struct Anchor {
    pub name: String,
    pub unit: String,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Why it was not measured.
    pub error: Option<String>,
}

pub fn anchors(r: &Row) -> Vec<Anchor> {
    use serde_json::Value;
    fn one(name: Option<&str>, v: &Value, r: &Row) -> Option<Anchor> {
        let o = v.as_object()?;
        let s = |k: &str| o.get(k).and_then(Value::as_str);
        let f = |k: &str| o.get(k).and_then(Value::as_f64);
        Some(Anchor {
            name: ["name", "anchor", "engine", "tool"]
                .iter()
                .find_map(|k| s(k))
                .or(name)
                .unwrap_or("anchor")
                .to_string(),
            unit: s("unit").unwrap_or(&r.unit).to_string(),
            median: f("median"),
            min: f("min"),
            max: f("max"),
            error: o.get("error").map(|e| {
                let e = e.as_str().map_or_else(|| e.to_string(), str::to_string);
                let first = e.lines().next().unwrap_or("").to_string();
                if first.chars().count() > 80 {
                    first.chars().take(79).collect::<String>() + "…"
                } else {
                    first
                }
            }),
        })
    }
    let mut v: Vec<Anchor> = match &r.anchor {
        None => vec![],
        Some(Value::Array(a)) => a.iter().filter_map(|x| one(None, x, r)).collect(),
        Some(Value::Object(o))
            if o.contains_key("median") || o.contains_key("error") || o.contains_key("name") =>
        {
            one(None, r.anchor.as_ref().unwrap_or(&Value::Null), r)
                .into_iter()
                .collect()
        }
        Some(Value::Object(o)) => o.iter().filter_map(|(k, x)| one(Some(k), x, r)).collect(),
        Some(Value::String(s)) => vec![Anchor {
            name: s.clone(),
            unit: r.unit.clone(),
            median: None,
            min: None,
            max: None,
            error: None,
        }],
        Some(_) => vec![],
    };
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// The anchors measured beside a row: `name median [min–max] unit (memra N×)`, where N× is
/// memra's speed over the anchor's (for a time, anchor / memra); `name: failed (why)` for one
/// that could not run.
pub fn anchor(r: &Row) -> String {
    let v = anchors(r);
    if v.is_empty() {
        return "–".into();
    }
    v.iter()
        .map(|a| {
            if let Some(e) = &a.error {
                return format!("{}: failed ({e})", a.name);
            }
            let Some(m) = a.median else {
                return a.name.clone();
            };
            let range = match (a.min, a.max) {
                (Some(lo), Some(hi)) => format!(" [{}–{}]", num(lo), num(hi)),
                _ => String::new(),
            };
            let ratio = if m > 0.0 && r.median > 0.0 && a.unit == r.unit {
                let x = if is_time(&a.unit) {
                    m / r.median
                } else {
                    r.median / m
                };
                format!(" (memra {x:.2}×)")
            } else {
                String::new()
            };
            format!("{} {}{range} {}{ratio}", a.name, num(m), a.unit)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The anchors with a figure in the row's unit, by name (for the charts).
pub fn anchor_values(r: &Row) -> Vec<(String, f64, Option<f64>, Option<f64>)> {
    anchors(r)
        .into_iter()
        .filter(|a| a.unit == r.unit && a.error.is_none())
        .filter_map(|a| Some((a.name, a.median?, a.min, a.max)))
        .collect()
}

fn is_time(unit: &str) -> bool {
    matches!(unit, "ms" | "s" | "us")
}

/// Sort key of a row within a table: the model and dtype, then the given numeric params, then the
/// canonical params.
fn key(r: &Row, nums: &[&str], texts: &[&str]) -> (String, Vec<String>, Vec<i64>, String) {
    (
        format!("{}\u{0}{}\u{0}{}", device(r), r.model, r.dtype),
        texts.iter().map(|k| r.text(k)).collect(),
        nums.iter()
            .map(|k| r.num(k).map_or(i64::MIN, |x| (x * 1000.0).round() as i64))
            .collect(),
        serde_json::Value::Object(r.params.clone()).to_string(),
    )
}

fn sorted<'a>(rows: &'a [Row], scenario: &str, nums: &[&str], texts: &[&str]) -> Vec<&'a Row> {
    let mut v: Vec<&Row> = rows.iter().filter(|r| r.scenario == scenario).collect();
    v.sort_by_cached_key(|r| key(r, nums, texts));
    v
}

fn none_yet(what: &str, cmd: &str) -> String {
    format!("_No {what} rows yet: `{cmd}` on a device adds them._\n")
}

fn with_conditions(rows: &[&Row], body: String) -> String {
    format!(
        "Conditions: {}.\n\n{body}{}",
        conditions(rows),
        few_runs_note(rows)
    )
}

pub fn decode_table(rows: &[Row]) -> String {
    let v = sorted(rows, "decode", &["batch", "depth", "new_tokens"], &[]);
    if v.is_empty() {
        return none_yet("decode", "memra bench decode");
    }
    let t: Vec<Vec<String>> = v
        .iter()
        .map(|r| {
            vec![
                device(r),
                r.model.clone(),
                r.dtype.clone(),
                r.text("batch"),
                r.text("depth"),
                r.text("new_tokens"),
                spread(r),
                opt(r.gbps, num),
                opt(r.bw_fraction, pct),
                opt(r.roofline_tok_s(), num),
                anchor(r),
                short(&r.commit),
                date(r.time),
                n(r),
            ]
        })
        .collect();
    with_conditions(
        &v,
        table(
            &[
                "device",
                "model",
                "dtype",
                "batch",
                "depth",
                "new tokens",
                "tok/s median [min–max]",
                "GB/s",
                "% of copy bw",
                "roofline tok/s",
                "anchor (same run)",
                "commit",
                "date",
                "N",
            ],
            &[
                false, false, false, true, true, true, true, true, true, true,
            ],
            &t,
        ),
    )
}

pub fn ttft_table(rows: &[Row]) -> String {
    let v = sorted(rows, "ttft", &["prompt_len", "prefill_chunk"], &[]);
    if v.is_empty() {
        return none_yet("TTFT", "memra bench ttft");
    }
    let t: Vec<Vec<String>> = v
        .iter()
        .map(|r| {
            let prefill = r
                .num("prompt_len")
                .filter(|_| r.unit == "ms" && r.median > 0.0)
                .map(|p| p / r.median * 1e3);
            vec![
                device(r),
                r.model.clone(),
                r.dtype.clone(),
                r.text("prompt_len"),
                r.text("prefill_chunk"),
                format!("{} {}", spread(r), r.unit),
                opt(prefill, num),
                anchor(r),
                short(&r.commit),
                date(r.time),
                n(r),
            ]
        })
        .collect();
    with_conditions(
        &v,
        table(
            &[
                "device",
                "model",
                "dtype",
                "prompt tokens",
                "prefill chunk",
                "TTFT median [min–max]",
                "prefill tok/s",
                "anchor (same run)",
                "commit",
                "date",
                "N",
            ],
            &[false, false, false, true, true, true, true],
            &t,
        ),
    )
}

/// Rows of one scenario grouped by their params without `split` (serve's `metric`, prefix's
/// `arm`): the members by that param's value, in table order.
fn grouped<'a>(
    rows: &'a [Row],
    scenario: &str,
    split: &str,
    nums: &[&str],
    texts: &[&str],
) -> Vec<BTreeMap<String, &'a Row>> {
    let mut groups: BTreeMap<_, BTreeMap<String, &Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.scenario == scenario) {
        let mut base = r.clone();
        let part = r.text(split);
        base.params.remove(split);
        groups
            .entry(key(&base, nums, texts))
            .or_default()
            .insert(part, r);
    }
    groups.into_values().collect()
}

fn first<'a>(g: &BTreeMap<String, &'a Row>, order: &[&str]) -> &'a Row {
    order
        .iter()
        .find_map(|k| g.get(*k).copied())
        .or_else(|| g.values().next().copied())
        .expect("a group has a member")
}

pub fn serve_table(rows: &[Row]) -> String {
    let groups = grouped(
        rows,
        "serve",
        "metric",
        &["concurrency", "rate", "input_len", "new_tokens"],
        &["mode"],
    );
    if groups.is_empty() {
        return none_yet("serve", "memra bench serve");
    }
    let p = |r: Option<&&Row>| -> String {
        r.map_or("–".into(), |r| {
            let p50 = r.extra_num(&["p50"]).unwrap_or(r.median);
            let p99 = r.extra_num(&["p99"]).or(r.max);
            format!("{} / {}", num(p50), opt(p99, num))
        })
    };
    let mut all = Vec::new();
    let t: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            let r = first(g, &["throughput", "ttft", "itl"]);
            all.push(r);
            let load = match r.text("mode").as_str() {
                "open" => format!("open, {} req/s", r.text("rate")),
                _ => format!("closed, c={}", r.text("concurrency")),
            };
            let reqs = match (r.extra_num(&["requests"]), r.extra_num(&["errors"])) {
                (Some(q), e) => format!("{q} ({} failed)", e.unwrap_or(0.0)),
                _ => "–".into(),
            };
            vec![
                device(r),
                r.model.clone(),
                r.dtype.clone(),
                load,
                format!("{} / {}", r.text("input_len"), r.text("new_tokens")),
                g.get("throughput").map_or("–".into(), |r| spread(r)),
                p(g.get("ttft")),
                p(g.get("itl")),
                reqs,
                short(&r.commit),
                date(r.time),
                n(r),
            ]
        })
        .collect();
    with_conditions(
        &all,
        table(
            &[
                "device",
                "model",
                "dtype",
                "load",
                "input / new tokens",
                "aggregate tok/s median [min–max]",
                "TTFT ms p50 / p99",
                "ITL ms p50 / p99",
                "requests",
                "commit",
                "date",
                "N",
            ],
            &[false, false, false, false, true, true, true, true, true],
            &t,
        ),
    )
}

pub fn spec_table(rows: &[Row]) -> String {
    let v = sorted(
        rows,
        "spec",
        &["k", "new_tokens"],
        &["class", "method", "stop"],
    );
    if v.is_empty() {
        return none_yet("speculative", "memra bench spec");
    }
    let t: Vec<Vec<String>> = v
        .iter()
        .map(|r| {
            vec![
                device(r),
                r.model.clone(),
                r.dtype.clone(),
                r.text("class"),
                r.text("method"),
                r.text("k"),
                // Exactly N tokens, or up to the end-of-sequence token (at most N).
                if r.text("stop") == "eos" {
                    format!("≤ {} (to EOS)", r.text("new_tokens"))
                } else {
                    r.text("new_tokens")
                },
                spread(r),
                opt(r.extra_num(&["acceptance"]), pct),
                opt(r.extra_num(&["plain_tok_s", "median"]), num),
                opt(r.extra_num(&["spec_tok_s", "median"]), num),
                short(&r.commit),
                date(r.time),
                n(r),
            ]
        })
        .collect();
    with_conditions(
        &v,
        table(
            &[
                "device",
                "model",
                "dtype",
                "prompt class",
                "method",
                "K",
                "new tokens",
                "speedup (×) median [min–max]",
                "acceptance",
                "plain tok/s",
                "spec tok/s",
                "commit",
                "date",
                "N",
            ],
            &[
                false, false, false, false, false, true, true, true, true, true, true,
            ],
            &t,
        ),
    )
}

pub fn prefix_table(rows: &[Row]) -> String {
    let groups = grouped(rows, "prefix", "arm", &["prompt_len", "suffix_len"], &[]);
    if groups.is_empty() {
        return none_yet("prefix-cache", "memra bench prefix");
    }
    let mut all = Vec::new();
    let t: Vec<Vec<String>> = groups
        .iter()
        .map(|g| {
            let r = first(g, &["ratio", "hit", "cold"]);
            all.push(r);
            let cached = g
                .get("hit")
                .and_then(|h| h.extra_num(&["cached_tokens"]))
                .or_else(|| r.extra_num(&["cached_tokens"]));
            vec![
                device(r),
                r.model.clone(),
                r.dtype.clone(),
                r.text("prompt_len"),
                r.text("suffix_len"),
                g.get("cold").map_or("–".into(), |r| spread(r)),
                g.get("hit").map_or("–".into(), |r| spread(r)),
                g.get("ratio").map_or("–".into(), |r| spread(r)),
                opt(cached, |c| format!("{c}")),
                short(&r.commit),
                date(r.time),
                n(r),
            ]
        })
        .collect();
    with_conditions(
        &all,
        table(
            &[
                "device",
                "model",
                "dtype",
                "prompt tokens",
                "suffix tokens",
                "cold TTFT ms",
                "hit TTFT ms",
                "cold / hit (×) median [min–max]",
                "cached tokens",
                "commit",
                "date",
                "N",
            ],
            &[false, false, false, true, true, true, true, true, true],
            &t,
        ),
    )
}

/// The README's short table: per device, backend, model and dtype, decode at batch 1 (the
/// shallowest depth measured) and TTFT at the prompt length nearest 1024 tokens.
pub fn speed_table(rows: &[Row], docs_link: &str) -> String {
    type Pick<'a> = (Option<&'a Row>, Option<&'a Row>);
    let mut by: BTreeMap<(String, String, String), Pick> = BTreeMap::new();
    let id = |r: &Row| (device(r), r.model.clone(), r.dtype.clone());
    for r in rows {
        let e = by.entry(id(r)).or_default();
        match r.scenario.as_str() {
            "decode" if r.num("batch").unwrap_or(1.0) == 1.0 => {
                // The shallowest depth; of several cells there (other new_tokens), the latest.
                let depth = |r: &Row| (r.num("depth").unwrap_or(0.0), -r.time);
                if e.0.is_none_or(|o| depth(r) < depth(o)) {
                    e.0 = Some(r);
                }
            }
            "ttft" => {
                let d = |r: &Row| {
                    let p = r.num("prompt_len").unwrap_or(0.0);
                    ((p - 1024.0).abs(), p, -r.time)
                };
                if e.1.is_none_or(|o| d(r) < d(o)) {
                    e.1 = Some(r);
                }
            }
            _ => {}
        }
    }
    by.retain(|_, (d, t)| d.is_some() || t.is_some());
    let regen = format!("Regenerate with `{}`.", super::BUILD_HINT);
    if by.is_empty() {
        return format!(
            "_No decode or TTFT rows yet (`memra bench decode`, `memra bench ttft`)._ {regen}\n"
        );
    }
    let depths: BTreeSet<String> = by
        .values()
        .filter_map(|p| p.0)
        .map(|r| r.text("depth"))
        .collect();
    let one_depth = (depths.len() == 1).then(|| depths.iter().next().cloned().unwrap_or_default());
    let mut all = Vec::new();
    let t: Vec<Vec<String>> = by
        .iter()
        .map(|((dev, model, dtype), (d, tt))| {
            all.extend(d.iter().chain(tt.iter()).copied());
            let dec = d.map_or("–".into(), |r| match &one_depth {
                Some(_) => spread(r),
                None => format!("{} (depth {})", spread(r), r.text("depth")),
            });
            let ttft = tt.map_or("–".into(), |r| {
                format!("{} ({} tokens)", spread(r), r.text("prompt_len"))
            });
            let mine: Vec<&Row> = d.iter().chain(tt.iter()).copied().collect();
            let commits: BTreeSet<String> = mine.iter().map(|r| short(&r.commit)).collect();
            let dates: BTreeSet<String> = mine.iter().map(|r| date(r.time)).collect();
            let ns: Vec<String> = mine.iter().map(|r| n(r)).collect();
            vec![
                dev.clone(),
                model.clone(),
                dtype.clone(),
                dec,
                opt(d.and_then(|r| r.bw_fraction), pct),
                ttft,
                format!(
                    "{} · {} · N {}",
                    commits.into_iter().collect::<Vec<_>>().join(", "),
                    dates.into_iter().collect::<Vec<_>>().join(", "),
                    ns.join(" / ")
                ),
            ]
        })
        .collect();
    let dec_head = match &one_depth {
        Some(depth) if !depth.is_empty() => format!("decode tok/s, bs=1, depth {depth}"),
        _ => "decode tok/s, bs=1".into(),
    };
    format!(
        "{}Median [min–max] of N runs, latest row per cell; % of copy bw is the weight and KV bytes \
         read per second over the copy bandwidth measured in the same run. Conditions: {}. Every \
         figure, anchors and charts: [PERFORMANCE.md]({docs_link}). {regen}\n",
        table(
            &[
                "device",
                "model",
                "dtype",
                &dec_head,
                "% of copy bw",
                "TTFT ms (prompt)",
                "commit · date · N (decode / TTFT)",
            ],
            &[false, false, false, true, true, true],
            &t,
        ) + &few_runs_note(&all)
            + "\n",
        conditions(&all)
    )
}
