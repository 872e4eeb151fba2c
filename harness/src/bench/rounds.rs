//! Merging the rounds of an interleaved comparison (`memra bench decode|ttft --vs ... --rounds
//! R`): each round measures every cell of memra and of each anchor with part of the reps; a
//! figure is then the median/min/max over every round's runs, and each round's median is kept
//! beside it (`rounds`), so drift across the call shows.

use super::rows::{Row, Stats};
use serde_json::{json, Value};

/// memra's rows of every round, merged cell by cell (the first round's rows, matched by
/// `params`): stats over all rounds' samples, the achieved GB/s rescaled to the new median, and
/// `extra.rounds` = each round's median. One round is returned as it is.
pub fn merge_rows(rounds: Vec<Vec<Row>>) -> Vec<Row> {
    let mut it = rounds.into_iter();
    let Some(mut out) = it.next() else {
        return Vec::new();
    };
    let rest: Vec<Vec<Row>> = it.collect();
    if rest.is_empty() {
        return out;
    }
    for row in out.iter_mut() {
        let mut samples = row.samples.clone();
        let mut medians = vec![row.stats.median];
        for r in rest
            .iter()
            .filter_map(|round| round.iter().find(|r| r.params == row.params))
        {
            samples.extend_from_slice(&r.samples);
            medians.push(r.stats.median);
        }
        if samples.is_empty() {
            continue;
        }
        row.restat(samples);
        let mut extra = row.extra.take().unwrap_or_else(|| json!({}));
        if let Some(m) = extra.as_object_mut() {
            m.insert("rounds".into(), json!(medians));
        }
        row.extra = Some(extra);
    }
    out
}

/// The anchors of every round (per cell: params and {anchor name: figure}), merged per cell and
/// anchor: median/min/max/n over the `samples` of the rounds it ran in, with `rounds` = each of
/// those rounds' median. Rounds in which it failed leave their first `error` and their count
/// (`failed_rounds`) beside the figure; when every round failed the figure is that error. One
/// whose figures carry no samples keeps the first good round's figure and the medians. One round
/// is returned as it is.
pub fn merge_anchors(rounds: Vec<Vec<(Value, Value)>>) -> Vec<(Value, Value)> {
    let mut it = rounds.into_iter();
    let Some(mut out) = it.next() else {
        return Vec::new();
    };
    let rest: Vec<Vec<(Value, Value)>> = it.collect();
    if rest.is_empty() {
        return out;
    }
    for (params, all) in out.iter_mut() {
        let Some(map) = all.as_object_mut() else {
            continue;
        };
        for (name, first) in map.iter_mut() {
            let mut figs = vec![first.clone()];
            figs.extend(rest.iter().filter_map(|round| {
                round
                    .iter()
                    .find(|(p, _)| p == params)
                    .and_then(|(_, a)| a.get(name))
                    .cloned()
            }));
            *first = merge_figures(&figs);
        }
    }
    out
}

/// One anchor's figures on one cell, a round each, as one figure (see [`merge_anchors`]).
fn merge_figures(figs: &[Value]) -> Value {
    let (bad, good): (Vec<&Value>, Vec<&Value>) =
        figs.iter().partition(|f| f.get("error").is_some());
    let Some(first) = good.first() else {
        // Every round failed: the first error.
        let mut e = figs[0].clone();
        e["failed_rounds"] = json!(figs.len());
        e["rounds"] = json!(figs.len());
        return e;
    };
    let samples: Option<Vec<f64>> = good
        .iter()
        .map(|f| {
            f["samples"]
                .as_array()
                .filter(|a| !a.is_empty())
                .map(|a| a.iter().filter_map(Value::as_f64).collect::<Vec<f64>>())
        })
        .collect::<Option<Vec<Vec<f64>>>>()
        .map(|v| v.concat());
    let mut out = (*first).clone();
    if let Some(all) = samples.filter(|s| !s.is_empty()) {
        let s = Stats::of(&all);
        out["n"] = json!(s.n);
        out["median"] = json!(s.median);
        out["min"] = json!(s.min);
        out["max"] = json!(s.max);
        out["samples"] = json!(all);
    }
    out["rounds"] = json!(good.iter().map(|f| f["median"].clone()).collect::<Vec<_>>());
    if let Some(e) = bad.first() {
        // Some rounds failed: the others' figure, with the first error beside it.
        out["error"] = e["error"].clone();
        out["failed_rounds"] = json!(bad.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(samples: &[f64]) -> Value {
        let s = Stats::of(samples);
        json!({"name": "llama.cpp", "unit": "tok/s", "n": s.n, "median": s.median,
               "min": s.min, "max": s.max, "samples": samples})
    }

    #[test]
    fn anchor_rounds_merge_over_all_samples() {
        let p = json!({"batch": 1});
        let r1 = vec![(
            p.clone(),
            json!({"llama.cpp": fig(&[10.0, 12.0]), "gpt-fast": fig(&[5.0])}),
        )];
        let r2 = vec![(
            p.clone(),
            json!({"llama.cpp": fig(&[20.0, 11.0]), "gpt-fast": {"name": "gpt-fast", "error": "oom"}}),
        )];
        let m = merge_anchors(vec![r1, r2]);
        assert_eq!(m.len(), 1);
        let l = &m[0].1["llama.cpp"];
        assert_eq!(l["n"], 4);
        assert_eq!(l["median"], 11.5);
        assert_eq!(
            (l["min"].as_f64(), l["max"].as_f64()),
            (Some(10.0), Some(20.0))
        );
        assert_eq!(l["rounds"], json!([11.0, 15.5]));
        // A round that failed leaves the other's figure, with its error beside it.
        let g = &m[0].1["gpt-fast"];
        assert_eq!(
            (g["median"].as_f64(), g["n"].as_u64()),
            (Some(5.0), Some(1))
        );
        assert_eq!(g["error"], "oom");
        assert_eq!(g["failed_rounds"].as_u64(), Some(1));
        assert_eq!(g["rounds"], json!([5.0]));
        // Every round failed: the error alone.
        let err = json!({"name": "x", "error": "no binary"});
        let m = merge_anchors(vec![
            vec![(p.clone(), json!({ "x": err }))],
            vec![(p.clone(), json!({ "x": err }))],
        ]);
        assert_eq!(m[0].1["x"]["error"], "no binary");
        assert!(m[0].1["x"].get("median").is_none());
        assert_eq!(m[0].1["x"]["failed_rounds"].as_u64(), Some(2));
        // No samples (an older anchor script): the first figure, with the medians beside it.
        let old = |m: f64| json!({"median": m, "min": m, "max": m, "n": 1});
        let m = merge_anchors(vec![
            vec![(p.clone(), json!({"a": old(3.0)}))],
            vec![(p.clone(), json!({"a": old(4.0)}))],
        ]);
        assert_eq!(m[0].1["a"]["median"], 3.0);
        assert_eq!(m[0].1["a"]["rounds"], json!([3.0, 4.0]));
    }
}
