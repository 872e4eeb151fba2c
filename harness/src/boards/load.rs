//! Reading the rows: every `*.jsonl` under the data directory through polars' NDJSON reader, then
//! the latest row of each cell (device, backend, model, dtype, scenario, params).
//!
//! The reader gets a fixed schema, so fields it does not name (`commit_note`, fields added later)
//! are ignored, a missing field is null, and a value of the wrong type is null instead of an error
//! (`ignore_errors`). The nested objects (`params`, `anchor`, `extra`) are read as text and parsed
//! again with serde_json; `params` is re-serialized with sorted keys to key the cell.

use anyhow::{Context, Result};
use polars::prelude::*;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// One figure (the subset of `bench::rows::Row` the boards use), as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Unix seconds.
    pub time: f64,
    pub commit: String,
    pub device: String,
    pub backend: String,
    pub model: String,
    pub dtype: String,
    pub scenario: String,
    pub params: Map<String, Value>,
    pub n: Option<f64>,
    pub median: f64,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub unit: String,
    pub gbps: Option<f64>,
    pub copy_gbps: Option<f64>,
    pub bw_fraction: Option<f64>,
    pub weight_bytes: Option<f64>,
    pub anchor: Option<Value>,
    pub extra: Option<Value>,
}

impl Row {
    /// A parameter as a number (`batch`, `depth`, `prompt_len`, `concurrency`, ...).
    pub fn num(&self, key: &str) -> Option<f64> {
        self.params.get(key).and_then(Value::as_f64)
    }

    /// A parameter as text (numbers and booleans written out; "" when absent).
    pub fn text(&self, key: &str) -> String {
        match self.params.get(key) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        }
    }

    /// A number in `extra` by path (`["p50"]`, `["plain_tok_s", "median"]`).
    pub fn extra_num(&self, path: &[&str]) -> Option<f64> {
        let mut v = self.extra.as_ref()?;
        for k in path {
            v = v.get(k)?;
        }
        v.as_f64()
    }

    /// The tokens per second a roofline allows: every weight byte read once per decode step at
    /// the copy bandwidth, times the batch (one step serves the whole batch).
    pub fn roofline_tok_s(&self) -> Option<f64> {
        let (c, w) = (self.copy_gbps?, self.weight_bytes?);
        (c > 0.0 && w > 0.0).then(|| c * 1e9 / w * self.num("batch").unwrap_or(1.0))
    }
}

/// What was read: the latest row per cell (sorted by device, backend, model, dtype, scenario,
/// params), the files, and notes about what was skipped.
#[derive(Debug, Default)]
pub struct Rows {
    pub rows: Vec<Row>,
    pub files: Vec<PathBuf>,
    /// Rows in the files, before keeping the latest per cell.
    pub read: usize,
    pub notes: Vec<String>,
}

const KEY: [&str; 6] = ["device", "backend", "model", "dtype", "scenario", "cell"];

fn schema() -> Schema {
    use DataType::{Float64, String as Str};
    let fields = [
        ("time", Float64),
        ("commit", Str),
        ("device", Str),
        ("backend", Str),
        ("model", Str),
        ("dtype", Str),
        ("scenario", Str),
        ("params", Str),
        ("n", Float64),
        ("median", Float64),
        ("min", Float64),
        ("max", Float64),
        ("unit", Str),
        ("gbps", Float64),
        ("copy_gbps", Float64),
        ("bw_fraction", Float64),
        ("weight_bytes", Float64),
        ("anchor", Str),
        ("extra", Str),
        ("settings", Str),
    ];
    Schema::from_iter(fields.into_iter().map(|(n, t)| Field::new(n.into(), t)))
}

/// Every `*.jsonl` directly under `dir`, sorted by name.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .collect();
    v.sort();
    Ok(v)
}

fn parse_ndjson(bytes: Vec<u8>) -> PolarsResult<DataFrame> {
    JsonReader::new(std::io::Cursor::new(bytes))
        .with_json_format(JsonFormat::JsonLines)
        .with_schema(Arc::new(schema()))
        .with_ignore_errors(true)
        .finish()
}

/// One file as a frame of the schema's columns. A line that is not JSON (a run killed while
/// writing) fails the whole read; then the file is read again without such lines, with a note.
fn read_file(path: &Path, notes: &mut Vec<String>) -> Result<Option<DataFrame>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match parse_ndjson(bytes.clone()) {
        Ok(df) => Ok(Some(df)),
        Err(first) => {
            let text = String::from_utf8_lossy(&bytes);
            let (good, bad): (Vec<&str>, Vec<&str>) = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .partition(|l| serde_json::from_str::<Map<String, Value>>(l).is_ok());
            if bad.is_empty() || good.is_empty() {
                return Err(anyhow::Error::from(first))
                    .with_context(|| format!("{}: not JSON lines", path.display()));
            }
            notes.push(format!(
                "{}: {} line(s) that are not JSON objects skipped",
                path.display(),
                bad.len()
            ));
            let df = parse_ndjson(good.join("\n").into_bytes())
                .map_err(anyhow::Error::from)
                .with_context(|| format!("{}: not JSON lines", path.display()))?;
            Ok(Some(df))
        }
    }
}

/// Reads every `*.jsonl` under `dir` and keeps the latest row (by `time`; on a tie the later one
/// in file order) of each cell.
pub fn read_dir(dir: &Path) -> Result<Rows> {
    let files = files(dir)?;
    let mut notes = Vec::new();
    let mut all: Option<DataFrame> = None;
    for f in &files {
        if let Some(df) = read_file(f, &mut notes)? {
            match &mut all {
                None => all = Some(df),
                Some(a) => {
                    a.vstack_mut(&df)?;
                }
            }
        }
    }
    let mut out = Rows {
        files,
        notes,
        ..Rows::default()
    };
    let Some(mut df) = all else {
        return Ok(out);
    };
    out.read = df.height();
    // The cell's params, canonical (sorted keys), as a column to deduplicate on.
    let cells: Vec<String> = df
        .column("params")?
        .str()?
        .iter()
        .map(|p| canonical(&parse_object(p)))
        .collect();
    df.with_column(Column::new("cell".into(), cells))?;
    // A kernel family that rounds its own way (QTC = 1) makes its own cells: "BF16 QTC=1".
    let dtypes: Vec<Option<String>> = df
        .column("dtype")?
        .str()?
        .iter()
        .zip(df.column("settings")?.str()?.iter())
        .map(|(d, st)| d.map(|d| format!("{d}{}", kernel_variant(d, st))))
        .collect();
    df.with_column(Column::new("dtype".into(), dtypes))?;
    // Rows without a scenario or a median cannot be placed on a board.
    let usable = df.column("scenario")?.is_not_null() & df.column("median")?.is_not_null();
    let dropped = df.height() - usable.sum().unwrap_or(0) as usize;
    if dropped > 0 {
        out.notes.push(format!(
            "{dropped} row(s) without a scenario or a median skipped"
        ));
    }
    let df = df.filter(&usable)?.sort(
        ["time"],
        SortMultipleOptions::new().with_maintain_order(true),
    )?;
    let key: Vec<String> = KEY.iter().map(|s| s.to_string()).collect();
    let df = df
        .unique_stable(Some(&key), UniqueKeepStrategy::Last, None)?
        .sort(KEY, SortMultipleOptions::new().with_maintain_order(true))?;
    out.rows = to_rows(&df)?;
    Ok(out)
}

fn to_rows(df: &DataFrame) -> Result<Vec<Row>> {
    let s = |c: &str| -> Result<Vec<Option<String>>> {
        Ok(df
            .column(c)?
            .str()?
            .iter()
            .map(|v| v.map(str::to_string))
            .collect())
    };
    let f = |c: &str| -> Result<Vec<Option<f64>>> { Ok(df.column(c)?.f64()?.iter().collect()) };
    let (time, commit, device, backend) = (f("time")?, s("commit")?, s("device")?, s("backend")?);
    let (model, dtype, scenario, params) = (s("model")?, s("dtype")?, s("scenario")?, s("params")?);
    let (n, median, min, max) = (f("n")?, f("median")?, f("min")?, f("max")?);
    let (unit, gbps, copy_gbps, bw) = (s("unit")?, f("gbps")?, f("copy_gbps")?, f("bw_fraction")?);
    let (weight_bytes, anchor, extra) = (f("weight_bytes")?, s("anchor")?, s("extra")?);
    let or = |v: &Option<String>, d: &str| v.clone().unwrap_or_else(|| d.to_string());
    Ok((0..df.height())
        .map(|i| Row {
            time: time[i].unwrap_or(0.0),
            commit: or(&commit[i], "?"),
            device: or(&device[i], "unknown device"),
            backend: or(&backend[i], "?"),
            model: or(&model[i], "?"),
            dtype: or(&dtype[i], "?"),
            scenario: or(&scenario[i], "?"),
            params: parse_object(params[i].as_deref()),
            n: n[i],
            median: median[i].unwrap_or(f64::NAN),
            min: min[i],
            max: max[i],
            unit: or(&unit[i], ""),
            gbps: gbps[i],
            copy_gbps: copy_gbps[i],
            bw_fraction: bw[i],
            weight_bytes: weight_bytes[i],
            anchor: anchor[i]
                .as_deref()
                .map(parse_value)
                .filter(|v| !v.is_null()),
            extra: extra[i]
                .as_deref()
                .map(parse_value)
                .filter(|v| !v.is_null()),
        })
        .collect())
}

/// The suffix that tells a row's kernels apart when they compute different bits from the
/// lane kernels: " QTC=1" when the row's `settings.kernel_defines` put its `dtype` on the
/// tensor-core linear kernels (QTC = "1": BF16, and Q8_0 unless QTC_Q8_0 = "0"), with
/// " XSPLIT=N" when they rounded x to N < 3 bf16 parts; " KV f16" when its
/// `settings.kv_cache_dtype` was "f16"; else "". Speed-only knobs (tile sizes, warps) keep the
/// cell.
fn kernel_variant(dtype: &str, settings: Option<&str>) -> String {
    let s = parse_object(settings);
    let define = |name: &str| {
        s.get("kernel_defines")
            .and_then(|k| k.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let tc = define("QTC").as_deref() == Some("1")
        && match dtype {
            "BF16" => true,
            "Q8_0" => define("QTC_Q8_0").as_deref() != Some("0"),
            "Q4_K" => matches!(define("QTC_Q4_K").as_deref(), Some("1" | "2")),
            _ => false,
        };
    let mut v = String::new();
    if tc {
        v.push_str(" QTC=1");
        if let Some(p) = define("QTC_XSPLIT").filter(|p| p != "3") {
            v.push_str(&format!(" XSPLIT={p}"));
        }
    }
    if s.get("kv_cache_dtype").and_then(Value::as_str) == Some("f16") {
        v.push_str(" KV f16");
    }
    v
}

/// A nested value read back from polars' text rendering of it.
fn parse_value(s: &str) -> Value {
    serde_json::from_str(s)
        .or_else(|_| serde_json::from_str(&repair(s)))
        .unwrap_or_else(|_| Value::String(s.to_string()))
}

fn parse_object(s: Option<&str>) -> Map<String, Value> {
    match s.map(parse_value) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// The object with its keys sorted at every level, as compact JSON.
fn canonical(m: &Map<String, Value>) -> String {
    crate::bench::rows::canonical(&Value::Object(m.clone()))
}

/// Polars writes a nested value into a text column as JSON except that inside strings it escapes
/// only `"`, newline and carriage return: escape any other backslash and control character.
fn repair(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        if !in_str {
            in_str = c == '"';
            out.push(c);
            continue;
        }
        match c {
            '"' => {
                in_str = false;
                out.push(c);
            }
            '\\' => match chars.peek() {
                Some('"' | 'n' | 'r') => {
                    out.push(c);
                    out.push(chars.next().unwrap_or_default());
                }
                _ => out.push_str("\\\\"),
            },
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boards_repair_escapes_what_polars_leaves() {
        let v = parse_value("{\"t\": \"a\\b\tc\\\"d\\ne\"}");
        assert_eq!(v["t"], "a\\b\tc\"d\ne");
        assert_eq!(parse_value("gpt-fast"), Value::String("gpt-fast".into()));
    }

    #[test]
    fn boards_kernel_variant_splits_qtc_and_kv_f16_rows() {
        let qtc =
            r#"{"cuda_graph_max_batch": 32, "kernel_defines": {"QTC": "1", "LIN_WARPS": "4"}}"#;
        assert_eq!(kernel_variant("BF16", Some(qtc)), " QTC=1");
        assert_eq!(kernel_variant("Q8_0", Some(qtc)), " QTC=1");
        // QTC covers BF16 and Q8_0 only, and Q8_0 not with QTC_Q8_0 = 0 (the H200 defaults).
        assert_eq!(kernel_variant("Q4_K", Some(qtc)), "");
        let bf16_only = r#"{"kernel_defines": {"QTC": "1", "QTC_Q8_0": "0"}}"#;
        assert_eq!(kernel_variant("Q8_0", Some(bf16_only)), "");
        assert_eq!(kernel_variant("BF16", Some(bf16_only)), " QTC=1");
        let x1 = r#"{"kernel_defines": {"QTC": "1", "QTC_XSPLIT": "1"}}"#;
        assert_eq!(kernel_variant("BF16", Some(x1)), " QTC=1 XSPLIT=1");
        let x3 = r#"{"kernel_defines": {"QTC": "1", "QTC_XSPLIT": "3"}}"#;
        assert_eq!(kernel_variant("BF16", Some(x3)), " QTC=1");
        let kv = r#"{"kv_cache_dtype": "f16", "kernel_defines": {"QTC": "1"}}"#;
        assert_eq!(kernel_variant("BF16", Some(kv)), " QTC=1 KV f16");
        let kv32 = r#"{"kv_cache_dtype": "f32", "kernel_defines": {}}"#;
        assert_eq!(kernel_variant("BF16", Some(kv32)), "");
        let speed_only = r#"{"kernel_defines": {"QTC": "0", "QLIN_M1_WARPS": "16"}}"#;
        assert_eq!(kernel_variant("BF16", Some(speed_only)), "");
        assert_eq!(kernel_variant("BF16", None), "");
    }

    /// Two rows of one cell that differ only in QTC stay two rows, each the latest of its own.
    #[test]
    fn boards_qtc_rows_are_their_own_cells() {
        let dir = tempfile::tempdir().unwrap();
        let row = |t: u64, m: f64, qtc: &str| {
            format!(
                r#"{{"time":{t},"commit":"c","device":"D","backend":"cuda","model":"m","dtype":"BF16","scenario":"decode","params":{{"batch":32}},"n":3,"median":{m},"unit":"tok/s","settings":{{"kernel_defines":{{"QTC":"{qtc}"}}}}}}"#
            )
        };
        let lines = [row(1, 10.0, "0"), row(2, 30.0, "1"), row(3, 11.0, "0")].join("\n");
        std::fs::write(dir.path().join("d.jsonl"), lines).unwrap();
        let rows = read_dir(dir.path()).unwrap();
        let got: Vec<(String, f64)> = rows
            .rows
            .iter()
            .map(|r| (r.dtype.clone(), r.median))
            .collect();
        assert_eq!(
            got,
            [("BF16".to_string(), 11.0), ("BF16 QTC=1".to_string(), 30.0)]
        );
    }

    #[test]
    fn boards_canonical_sorts_keys() {
        let a = parse_object(Some("{\"b\": 1, \"a\": {\"y\": 2, \"x\": 3}}"));
        assert_eq!(canonical(&a), "{\"a\":{\"x\":3,\"y\":2},\"b\":1}");
    }
}
