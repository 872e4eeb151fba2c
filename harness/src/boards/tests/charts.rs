//! Chart helpers of boards/charts.rs.

use super::*;

#[test]
fn boards_ttft_anchor_lines_follow_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let row = |len: u32, ms: f64, anchor: f64| {
        format!(
            r#"{{"time": 1796003459, "commit": "abc", "device": "NVIDIA H200", "backend": "cuda", "model": "m.gguf", "dtype": "Q8_0", "scenario": "ttft", "params": {{"prompt_len": {len}}}, "n": 5, "median": {ms}, "min": {ms}, "max": {ms}, "unit": "ms", "anchor": {{"llama.cpp": {{"name": "llama.cpp", "unit": "ms", "n": 5, "median": {anchor}, "min": {lo}, "max": {anchor}}}}}}}"#,
            lo = anchor - 1.0
        )
    };
    let text = [row(1024, 483.0, 94.0), row(512, 230.0, 48.0)].join("\n");
    std::fs::write(dir.path().join("d.jsonl"), text).unwrap();
    let rows = super::super::load::read_dir(dir.path()).unwrap().rows;
    let v: Vec<&Row> = rows.iter().collect();
    let name = |r: &Row| format!("{} {}", model_name(&r.model), r.dtype);
    let lines = anchor_lines(&v, "prompt_len", name);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].legend, "m Q8_0: llama.cpp (anchor, same run)");
    // x positions follow the sorted prompt lengths: 512 first.
    assert_eq!(
        lines[0].points,
        [
            (0, 48.0, Some(47.0), Some(48.0)),
            (1, 94.0, Some(93.0), Some(94.0))
        ]
    );
}
