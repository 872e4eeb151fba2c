//! The PNG charts (plotters, bitmap backend, the font in boards/fonts/ registered at run time so no
//! system font is needed): per device, decode tok/s per model and dtype against the anchors and
//! the roofline, aggregate tok/s against concurrency, TTFT against prompt length, and the
//! speculative speedup per prompt class. Each carries its conditions (device in the title;
//! commits, dates and N in the caption under it).

use super::load::Row;
use super::tables::{anchor_values, conditions, device, num};
use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const FONT: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../boards/fonts/DejaVuSans.ttf"
));
const FAMILY: &str = "sans-serif";
const W: u32 = 1280;
const H: u32 = 760;
/// Height of the caption strip under the plot.
const CAPTION_H: u32 = 96;

const MEMRA: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(174, 199, 232),
    RGBColor(152, 223, 138),
    RGBColor(197, 176, 213),
    RGBColor(0, 90, 80),
    RGBColor(60, 60, 160),
];
const ANCHORS: [RGBColor; 4] = [
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(227, 119, 194),
];
const ROOF: RGBColor = RGBColor(214, 39, 40);

/// Registers the vendored font as plotters' `sans-serif` (once per process).
pub fn register_font() -> Result<()> {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok =
        *OK.get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    ok.then_some(())
        .ok_or_else(|| anyhow!("boards/fonts/DejaVuSans.ttf is not a font plotters can read"))
}

/// A chart that was written.
#[derive(Debug, Clone)]
pub struct Chart {
    pub path: PathBuf,
    pub title: String,
}

/// What `render_all` did: the charts written, and a note per chart it skipped.
#[derive(Debug, Default)]
pub struct Outcome {
    pub written: Vec<Chart>,
    pub skipped: Vec<String>,
}

/// `nvidia-h200` from "NVIDIA H200" (as `bench` names the tune-data files).
pub fn slug(s: &str) -> String {
    crate::defaults::slug(s)
}

/// An axis label: `num` without trailing zeros (0.5, 2.5, 250).
fn axis(v: f64) -> String {
    let s = num(v);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn pe(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing a chart: {e}")
}

/// The model's file name without its extension.
fn model_name(m: &str) -> &str {
    m.strip_suffix(".gguf")
        .or_else(|| m.strip_suffix(".safetensors"))
        .unwrap_or(m)
}

/// Rows per device and backend, with the file name stem of each (the backend is added only
/// when one device has rows of several backends).
fn per_device(rows: &[Row]) -> Vec<(String, Vec<&Row>)> {
    let mut by: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by.entry((r.device.clone(), r.backend.clone()))
            .or_default()
            .push(r);
    }
    let mut backends: BTreeMap<&str, usize> = BTreeMap::new();
    for (d, _) in by.keys() {
        *backends.entry(d.as_str()).or_default() += 1;
    }
    by.iter()
        .map(|((d, b), v)| {
            let stem = if backends[d.as_str()] > 1 {
                slug(&format!("{d} {b}"))
            } else {
                slug(d)
            };
            (stem, v.clone())
        })
        .collect()
}

/// Writes every chart whose rows exist under `out`.
pub fn render_all(rows: &[Row], out: &Path) -> Result<Outcome> {
    register_font()?;
    std::fs::create_dir_all(out)?;
    let mut o = Outcome::default();
    type Draw = fn(&[&Row], &Path, &str) -> Result<Option<String>>;
    let kinds: [(&str, Draw, &str); 4] = [
        (
            "decode",
            decode_chart,
            "decode tok/s chart: no decode rows at batch 1 yet (`memra bench decode`)",
        ),
        (
            "serve",
            serve_chart,
            "aggregate tok/s against concurrency: no closed-loop serve rows yet (`memra bench serve`)",
        ),
        (
            "ttft",
            ttft_chart,
            "TTFT against prompt length: no ttft rows yet (`memra bench ttft`)",
        ),
        (
            "spec",
            spec_chart,
            "speculative speedup per prompt class: no spec rows yet (`memra bench spec`)",
        ),
    ];
    for (kind, draw, none) in kinds {
        let mut any = false;
        for (stem, rs) in per_device(rows) {
            let path = out.join(format!("{kind}-{stem}.png"));
            if let Some(title) = draw(&rs, &path, &stem)? {
                any = true;
                o.written.push(Chart { path, title });
            }
        }
        if !any {
            o.skipped.push(format!("skipped the {none}"));
        }
    }
    Ok(o)
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;
type Cart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The canvas: the plot area and the caption strip under it.
fn canvas(path: &Path) -> Result<(Area<'_>, Area<'_>, Area<'_>)> {
    let root = BitMapBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(pe)?;
    let (plot, cap) = root.split_vertically(H - CAPTION_H);
    Ok((root, plot, cap))
}

fn caption(cap: &Area<'_>, lines: &[String]) -> Result<()> {
    let style = TextStyle::from((FAMILY, 15).into_font()).color(&BLACK);
    for (i, l) in lines.iter().enumerate() {
        cap.draw_text(l, &style, (16, 6 + 20 * i as i32))
            .map_err(pe)?;
    }
    Ok(())
}

fn chart<'a, 'b>(
    plot: &'a Area<'b>,
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    y_desc: &str,
) -> Result<Cart<'a, 'b>> {
    let mut c = ChartBuilder::on(plot)
        .caption(title, (FAMILY, 24))
        .margin(18)
        .x_label_area_size(58)
        .y_label_area_size(78)
        .build_cartesian_2d(x, y)
        .map_err(pe)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .y_desc(y_desc)
        .y_label_formatter(&|v| axis(*v))
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 16))
        .draw()
        .map_err(pe)?;
    Ok(c)
}

/// Category labels under the x axis (one or two lines each, centred on `x`).
fn x_labels(
    plot: &Area<'_>,
    c: &Cart<'_, '_>,
    y0: f64,
    labels: &[(f64, Vec<String>)],
) -> Result<()> {
    let style = TextStyle::from((FAMILY, 15).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (x, lines) in labels {
        let (px, py) = c.backend_coord(&(*x, y0));
        for (i, l) in lines.iter().enumerate() {
            plot.draw_text(l, &style, (px, py + 8 + 18 * i as i32))
                .map_err(pe)?;
        }
    }
    Ok(())
}

fn legend<'a, 'b: 'a>(c: &mut Cart<'a, 'b>, pos: SeriesLabelPosition) -> Result<()> {
    c.configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, 14))
        .draw()
        .map_err(pe)
}

fn value_label<'a>(s: String, x: f64, y: f64) -> Text<'a, (f64, f64), String> {
    Text::new(
        s,
        (x, y),
        TextStyle::from((FAMILY, 13).into_font())
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom)),
    )
}

fn whisker(x: f64, lo: f64, hi: f64, half: f64) -> Vec<PathElement<(f64, f64)>> {
    let s = BLACK.stroke_width(1);
    vec![
        PathElement::new(vec![(x, lo), (x, hi)], s),
        PathElement::new(vec![(x - half, lo), (x + half, lo)], s),
        PathElement::new(vec![(x - half, hi), (x + half, hi)], s),
    ]
}

/// One bar of a grouped bar chart.
struct Bar {
    group: usize,
    slot: usize,
    value: f64,
    lo: Option<f64>,
    hi: Option<f64>,
    label: String,
}

/// Draws bars of one legend entry; groups are unit wide, `slots` bars per group.
fn bars(
    c: &mut Cart<'_, '_>,
    v: &[Bar],
    slots: usize,
    color: RGBColor,
    legend: &str,
) -> Result<()> {
    let w = 0.8 / slots.max(1) as f64;
    let x0 = |b: &Bar| b.group as f64 + 0.1 + w * b.slot as f64;
    c.draw_series(v.iter().map(|b| {
        Rectangle::new(
            [(x0(b) + w * 0.06, 0.0), (x0(b) + w * 0.94, b.value)],
            color.filled(),
        )
    }))
    .map_err(pe)?
    .label(legend)
    .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    for b in v {
        let xc = x0(b) + w / 2.0;
        if let (Some(lo), Some(hi)) = (b.lo, b.hi) {
            c.draw_series(whisker(xc, lo, hi, w * 0.15)).map_err(pe)?;
        }
        let top = b.hi.unwrap_or(b.value).max(b.value);
        c.draw_series(std::iter::once(value_label(b.label.clone(), xc, top)))
            .map_err(pe)?;
    }
    Ok(())
}

fn top(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if m > 0.0 {
        // Headroom for the value labels and the legend.
        m * 1.3
    } else {
        1.0
    }
}

fn title_device(rows: &[&Row]) -> String {
    rows.first().map_or_else(String::new, |r| device(r))
}

/// Of rows sharing a chart position (`slot`; cells that differ in a parameter the chart does not
/// show, e.g. `new_tokens`), the latest one, in the input order.
fn latest(v: Vec<&Row>, slot: impl Fn(&Row) -> String) -> Vec<&Row> {
    let mut best: BTreeMap<String, &Row> = BTreeMap::new();
    for r in &v {
        let e = best.entry(slot(r)).or_insert(r);
        if r.time > e.time {
            *e = r;
        }
    }
    v.into_iter()
        .filter(|r| best.values().any(|b| std::ptr::eq(*b, *r)))
        .collect()
}

/// Decode tok/s at batch 1 per model and dtype (a bar per depth), anchors beside them, and the
/// roofline of each model as a red line.
fn decode_chart(rows: &[&Row], path: &Path, _stem: &str) -> Result<Option<String>> {
    let v: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.scenario == "decode" && r.num("batch").unwrap_or(1.0) == 1.0)
        .collect();
    if v.is_empty() {
        return Ok(None);
    }
    let v = latest(v, |r| {
        format!("{}\u{0}{}\u{0}{}", r.model, r.dtype, r.text("depth"))
    });
    let groups: BTreeSet<(String, String)> = v
        .iter()
        .map(|r| (r.model.clone(), r.dtype.clone()))
        .collect();
    let groups: Vec<(String, String)> = groups.into_iter().collect();
    let depth = |r: &Row| r.num("depth").map_or(i64::MIN, |d| d as i64);
    let depths: BTreeSet<i64> = v.iter().map(|r| depth(r)).collect();
    let depths: Vec<i64> = depths.into_iter().collect();
    let anchors: BTreeSet<String> = v
        .iter()
        .flat_map(|r| anchor_values(r).into_iter().map(|a| a.0))
        .collect();
    let anchors: Vec<String> = anchors.into_iter().collect();
    let slots = depths.len() * (1 + anchors.len());
    let gi = |r: &Row| {
        groups
            .iter()
            .position(|g| g.0 == r.model && g.1 == r.dtype)
            .unwrap_or(0)
    };
    let di = |r: &Row| depths.iter().position(|&d| d == depth(r)).unwrap_or(0);
    let mut memra: Vec<Vec<Bar>> = (0..depths.len()).map(|_| vec![]).collect();
    let mut anch: Vec<Vec<Bar>> = (0..anchors.len()).map(|_| vec![]).collect();
    for r in &v {
        let (g, d) = (gi(r), di(r));
        memra[d].push(Bar {
            group: g,
            slot: d * (1 + anchors.len()),
            value: r.median,
            lo: r.min,
            hi: r.max,
            label: num(r.median),
        });
        for (name, m, lo, hi) in anchor_values(r) {
            let a = anchors.iter().position(|x| *x == name).unwrap_or(0);
            anch[a].push(Bar {
                group: g,
                slot: d * (1 + anchors.len()) + 1 + a,
                value: m,
                lo,
                hi,
                label: num(m),
            });
        }
    }
    // The roofline of each group: from its shallowest row.
    let roofs: Vec<Option<f64>> = groups
        .iter()
        .map(|(m, dt)| {
            v.iter()
                .filter(|r| &r.model == m && &r.dtype == dt)
                .min_by_key(|r| depth(r))
                .and_then(|r| r.roofline_tok_s())
        })
        .collect();
    let ymax = top(v
        .iter()
        .map(|r| r.max.unwrap_or(r.median))
        .chain(anch.iter().flatten().map(|b| b.hi.unwrap_or(b.value)))
        .chain(roofs.iter().flatten().copied()));
    let title = format!("Decode tok/s at batch 1 — {}", title_device(&v));
    let (root, plot, cap) = canvas(path)?;
    let mut c = chart(&plot, &title, 0.0..groups.len() as f64, 0.0..ymax, "tok/s")?;
    for (d, b) in memra.iter().enumerate() {
        let name = match depths[d] {
            i64::MIN => "memra".to_string(),
            x => format!("memra, depth {x}"),
        };
        bars(&mut c, b, slots, MEMRA[d % MEMRA.len()], &name)?;
    }
    for (a, b) in anch.iter().enumerate() {
        bars(
            &mut c,
            b,
            slots,
            ANCHORS[a % ANCHORS.len()],
            &format!("{} (anchor, same run)", anchors[a]),
        )?;
    }
    let mut first = true;
    for (g, roof) in roofs.iter().enumerate() {
        let Some(y) = *roof else { continue };
        let (x0, x1) = (g as f64 + 0.04, g as f64 + 0.96);
        let s = c
            .draw_series(std::iter::once(PathElement::new(
                vec![(x0, y), (x1, y)],
                ROOF.stroke_width(3),
            )))
            .map_err(pe)?;
        if first {
            s.label("roofline: copy GB/s × 1e9 / weight bytes")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], ROOF.stroke_width(3)));
            first = false;
        }
        c.draw_series(std::iter::once(value_label(
            format!("roofline {}", num(y)),
            g as f64 + 0.5,
            y,
        )))
        .map_err(pe)?;
    }
    legend(&mut c, SeriesLabelPosition::UpperRight)?;
    let labels: Vec<(f64, Vec<String>)> = groups
        .iter()
        .enumerate()
        .map(|(i, (m, d))| (i as f64 + 0.5, vec![model_name(m).to_string(), d.clone()]))
        .collect();
    x_labels(&plot, &c, 0.0, &labels)?;
    drop(c);
    caption(
        &cap,
        &[
            format!("Conditions: {}.", conditions(&v)),
            "Bars: median tokens/s of one sequence (batch 1) over N runs after warm-up; whiskers: min–max. Anchors: measured in the same run."
                .into(),
            "Roofline: the rate if each decode step read every weight byte once at the copy bandwidth measured in the same run (KV reads not counted)."
                .into(),
            "Latest row per cell of research/tune-data/*.jsonl; tables and all batch sizes: docs/PERFORMANCE.md.".into(),
        ],
    )?;
    root.present().map_err(pe)?;
    Ok(Some(title))
}

/// (x index, median, min, max)
type Point = (usize, f64, Option<f64>, Option<f64>);

/// Points joined by lines over categorical x positions, one series per key.
struct Line {
    legend: String,
    points: Vec<Point>,
}

fn lines_chart(
    path: &Path,
    title: &str,
    y_desc: &str,
    xs: &[String],
    x_desc: &str,
    series: &[Line],
    cap_lines: Vec<String>,
) -> Result<()> {
    let ymax = top(series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.3.unwrap_or(p.1))));
    let (root, plot, cap) = canvas(path)?;
    let mut c = chart(&plot, title, 0.0..xs.len() as f64, 0.0..ymax, y_desc)?;
    for (i, s) in series.iter().enumerate() {
        let color = MEMRA[i % MEMRA.len()];
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.0 as f64 + 0.5, p.1)).collect();
        c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(pe)?
            .label(s.legend.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2))
            });
        c.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(pe)?;
        for p in &s.points {
            let x = p.0 as f64 + 0.5;
            if let (Some(lo), Some(hi)) = (p.2, p.3) {
                c.draw_series(whisker(x, lo, hi, 0.04)).map_err(pe)?;
            }
            c.draw_series(std::iter::once(value_label(
                num(p.1),
                x,
                p.3.unwrap_or(p.1).max(p.1),
            )))
            .map_err(pe)?;
        }
    }
    legend(&mut c, SeriesLabelPosition::UpperLeft)?;
    let mut labels: Vec<(f64, Vec<String>)> = xs
        .iter()
        .enumerate()
        .map(|(i, x)| (i as f64 + 0.5, vec![x.clone()]))
        .collect();
    if let Some(last) = labels.last_mut() {
        // The axis name under the last category.
        last.1.push(x_desc.to_string());
    }
    x_labels(&plot, &c, 0.0, &labels)?;
    drop(c);
    caption(&cap, &cap_lines)?;
    root.present().map_err(pe)?;
    Ok(())
}

fn series_by(
    v: &[&Row],
    x: impl Fn(&Row) -> Option<f64>,
    name: impl Fn(&Row) -> String,
) -> (Vec<String>, Vec<Line>) {
    let key = |f: f64| (f * 1000.0).round() as i64;
    let v = latest(v.to_vec(), |r| {
        format!("{}\u{0}{:?}", name(r), x(r).map(key))
    });
    let xs: BTreeSet<i64> = v.iter().filter_map(|r| x(r).map(key)).collect();
    let xs: Vec<i64> = xs.into_iter().collect();
    let mut by: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    for r in v {
        let Some(xv) = x(r) else { continue };
        let i = xs.iter().position(|&k| k == key(xv)).unwrap_or(0);
        by.entry(name(r))
            .or_default()
            .push((i, r.median, r.min, r.max));
    }
    let lines = by
        .into_iter()
        .map(|(legend, mut points)| {
            points.sort_by_key(|p| p.0);
            Line { legend, points }
        })
        .collect();
    (xs.iter().map(|&k| axis(k as f64 / 1000.0)).collect(), lines)
}

/// One line per (series name, anchor) from the anchors recorded in `v`'s rows, on the x axis of
/// [`series_by`] over the numeric param `x` (the latest row per name and x, as there).
fn anchor_lines(v: &[&Row], x: &str, name: impl Fn(&Row) -> String) -> Vec<Line> {
    let key = |r: &Row| r.num(x).map(|f| (f * 1000.0).round() as i64);
    let xs: BTreeSet<i64> = v.iter().filter_map(|r| key(r)).collect();
    let xs: Vec<i64> = xs.into_iter().collect();
    let v = latest(v.to_vec(), |r| format!("{}\u{0}{:?}", name(r), key(r)));
    let mut by: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    for r in v {
        let Some(k) = key(r) else { continue };
        let i = xs.iter().position(|&x| x == k).unwrap_or(0);
        for (anchor, m, lo, hi) in anchor_values(r) {
            by.entry(format!("{}: {anchor} (anchor, same run)", name(r)))
                .or_default()
                .push((i, m, lo, hi));
        }
    }
    by.into_iter()
        .map(|(legend, mut points)| {
            points.sort_by_key(|p| p.0);
            Line { legend, points }
        })
        .collect()
}

/// Aggregate output tok/s against concurrency (closed-loop `serve` rows).
fn serve_chart(rows: &[&Row], path: &Path, _stem: &str) -> Result<Option<String>> {
    let v: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| {
            r.scenario == "serve"
                && r.text("metric") == "throughput"
                && r.text("mode") != "open"
                && r.num("concurrency").is_some()
        })
        .collect();
    if v.is_empty() {
        return Ok(None);
    }
    let (xs, series) = series_by(
        &v,
        |r| r.num("concurrency"),
        |r| {
            format!(
                "{} {} (in {} / new {} tokens)",
                model_name(&r.model),
                r.dtype,
                r.text("input_len"),
                r.text("new_tokens")
            )
        },
    );
    let title = format!(
        "Aggregate output tok/s against concurrency — {}",
        title_device(&v)
    );
    lines_chart(
        path,
        &title,
        "aggregate output tok/s",
        &xs,
        "concurrent streams",
        &series,
        vec![
            format!("Conditions: {}.", conditions(&v)),
            "Closed loop: c streams at once through `memra serve` (/v1/completions, greedy, ignore_eos); points: median over N runs, whiskers: min–max."
                .into(),
            "Latest row per cell of research/tune-data/*.jsonl; TTFT and inter-token latency percentiles: docs/PERFORMANCE.md.".into(),
        ],
    )?;
    Ok(Some(title))
}

/// TTFT against prompt length (`ttft` rows).
fn ttft_chart(rows: &[&Row], path: &Path, _stem: &str) -> Result<Option<String>> {
    let v: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.scenario == "ttft" && r.num("prompt_len").is_some())
        .collect();
    if v.is_empty() {
        return Ok(None);
    }
    let name = |r: &Row| format!("{} {}", model_name(&r.model), r.dtype);
    let (xs, mut series) = series_by(&v, |r| r.num("prompt_len"), name);
    series.extend(anchor_lines(&v, "prompt_len", name));
    let title = format!(
        "Time to first token against prompt length — {}",
        title_device(&v)
    );
    let unit = v.first().map_or("ms", |r| r.unit.as_str());
    lines_chart(
        path,
        &title,
        &format!("TTFT ({unit})"),
        &xs,
        "prompt tokens",
        &series,
        vec![
            format!("Conditions: {}.", conditions(&v)),
            "One request, prompt prefilled in chunks, until its first token; points: median over N runs, whiskers: min–max."
                .into(),
            "Anchors: another engine on the same weights in the same run (llama.cpp: prompt tokens / llama-bench's prompt tok/s).".into(),
            "Latest row per cell of research/tune-data/*.jsonl; prefill tok/s and anchors: docs/PERFORMANCE.md.".into(),
        ],
    )?;
    Ok(Some(title))
}

/// Speculative speedup per prompt class: a bar per model, dtype, drafter and K.
fn spec_chart(rows: &[&Row], path: &Path, _stem: &str) -> Result<Option<String>> {
    let v: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.scenario == "spec")
        .collect();
    if v.is_empty() {
        return Ok(None);
    }
    let v = latest(v, |r| {
        format!(
            "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
            r.model,
            r.dtype,
            r.text("method"),
            r.text("k"),
            r.text("class"),
            r.text("stop")
        )
    });
    let classes: BTreeSet<String> = v.iter().map(|r| r.text("class")).collect();
    let classes: Vec<String> = classes.into_iter().collect();
    let name = |r: &Row| {
        format!(
            "{} {}: {}, K={}{}",
            model_name(&r.model),
            r.dtype,
            r.text("method"),
            r.text("k"),
            if r.text("stop") == "eos" {
                ", to EOS"
            } else {
                ""
            }
        )
    };
    let names: BTreeSet<String> = v.iter().map(|r| name(r)).collect();
    let names: Vec<String> = names.into_iter().collect();
    let mut per: Vec<Vec<Bar>> = names.iter().map(|_| vec![]).collect();
    for r in &v {
        let s = names.iter().position(|n| *n == name(r)).unwrap_or(0);
        let acc = r
            .extra_num(&["acceptance"])
            .map_or(String::new(), |a| format!(" ({:.0}%)", a * 100.0));
        per[s].push(Bar {
            group: classes
                .iter()
                .position(|c| *c == r.text("class"))
                .unwrap_or(0),
            slot: s,
            value: r.median,
            lo: r.min,
            hi: r.max,
            label: format!("{:.2}×{acc}", r.median),
        });
    }
    let ymax = top(v.iter().map(|r| r.max.unwrap_or(r.median)).chain([1.0]));
    let title = format!(
        "Speculative decoding speedup per prompt class — {}",
        title_device(&v)
    );
    let (root, plot, cap) = canvas(path)?;
    let mut c = chart(
        &plot,
        &title,
        0.0..classes.len() as f64,
        0.0..ymax,
        "speedup over plain decode (×)",
    )?;
    for (s, b) in per.iter().enumerate() {
        bars(&mut c, b, names.len(), MEMRA[s % MEMRA.len()], &names[s])?;
    }
    c.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 1.0), (classes.len() as f64, 1.0)],
        BLACK.stroke_width(2),
    )))
    .map_err(pe)?
    .label("plain decode (1×)")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK.stroke_width(2)));
    legend(&mut c, SeriesLabelPosition::UpperRight)?;
    let labels: Vec<(f64, Vec<String>)> = classes
        .iter()
        .enumerate()
        .map(|(i, cl)| (i as f64 + 0.5, vec![cl.clone()]))
        .collect();
    x_labels(&plot, &c, 0.0, &labels)?;
    drop(c);
    caption(
        &cap,
        &[
            format!("Conditions: {}.", conditions(&v)),
            "Bars: median of the paired spec/plain decode tok/s ratios (interleaved runs, outputs identical); whiskers: min–max; in brackets: acceptance."
                .into(),
            "Latest row per cell of research/tune-data/*.jsonl; both arms' tok/s: docs/PERFORMANCE.md.".into(),
        ],
    )?;
    root.present().map_err(pe)?;
    Ok(Some(title))
}

#[cfg(test)]
#[path = "tests/charts.rs"]
mod tests;
