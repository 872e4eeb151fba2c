//! The `speculative` gates (Level A (f), DESIGN.md §3): for each drafter and K, greedy and (with
//! `sampling`) seeded, the speculating requests' logits at every position are bit-identical to
//! plain decode, both in a batch beside plain requests and each alone; and each drafter must have
//! proposed something, or the gate would be testing nothing.

use super::arms::{compare, sched_config, scheduled, BackendCanary, Job, Submission, Trace};
use super::spec::GateSpec;
use super::{params, Outcome};
use anyhow::Result;
use memra_engine::models::Model;
use memra_engine::sample::SamplingParams;
use memra_engine::sched::SchedCanary;
use memra_engine::spec::SpecParams;
use std::sync::Arc;

/// Runs gate `g` on `model` over the tokenized prompts `ps`. Reference: every request plain, all
/// at once. Fast arms: the odd requests speculate (a) in the same batch as the even plain ones,
/// (b) one at a time, alone. Errors: an unknown drafter, a failed request.
pub fn run(
    g: &GateSpec,
    model: &Arc<Model>,
    ps: &[Vec<u32>],
    sched_canary: Option<SchedCanary>,
    backend_canary: BackendCanary,
) -> Result<Outcome> {
    let mut compared = 0;
    let mut drafted = vec![0u64; g.drafters.len()];
    let sampling_sets: &[bool] = if g.sampling.is_some() {
        &[false, true]
    } else {
        &[false]
    };
    for &sampled in sampling_sets {
        let pick = |i: usize| {
            if sampled {
                params(g, i)
            } else {
                SamplingParams::greedy()
            }
        };
        let jobs_with = |sp: Option<SpecParams>| -> Vec<Job> {
            ps.iter()
                .enumerate()
                .map(|(i, p)| Job {
                    prompt: p.clone(),
                    params: pick(i),
                    n: 1,
                    tenant: format!("g{i}"),
                    spec: sp.filter(|_| i % 2 == 1),
                })
                .collect()
        };
        let (reference, _) = scheduled(
            model,
            &jobs_with(None),
            g.max_tokens,
            sched_config(64, None),
            BackendCanary::None,
            Submission::AllAtOnce,
        )?;
        let odd = |t: &[Trace]| -> Vec<Trace> { t.iter().skip(1).step_by(2).cloned().collect() };
        let reference_odd = odd(&reference);
        for (di, d) in g.drafters.iter().enumerate() {
            for &k in &g.ks {
                let sp = SpecParams::parse(d, k).map_err(anyhow::Error::msg)?;
                let jobs = jobs_with(Some(sp));
                let alone: Vec<Job> = jobs.iter().skip(1).step_by(2).cloned().collect();
                let arms = [
                    ("in a batch", jobs, Submission::AllAtOnce, &reference),
                    ("alone", alone, Submission::Sequential, &reference_odd),
                ];
                for (how, jobs, mode, want) in arms {
                    let (fast, _) = scheduled(
                        model,
                        &jobs,
                        g.max_tokens,
                        sched_config(64, sched_canary),
                        backend_canary,
                        mode,
                    )?;
                    drafted[di] += fast.iter().map(|t| t.drafted as u64).sum::<u64>();
                    let (n, diff) = compare(want, &fast, true);
                    compared += n;
                    if diff.is_some() {
                        let mut o = Outcome::from_compare("", (compared, diff));
                        let s = if sampled { "seeded" } else { "greedy" };
                        o.detail = format!("{d} k={k} {s} {how}: {}", o.detail);
                        return Ok(o);
                    }
                }
            }
        }
    }
    if let Some(i) = drafted.iter().position(|&n| n == 0) {
        return Ok(Outcome {
            green: false,
            compared,
            diff: None,
            detail: format!(
                "drafter {} proposed no draft token in any run: the gate tested nothing for it \
                 (longer max_tokens or prompts the drafter can match)",
                g.drafters[i]
            ),
        });
    }
    Ok(Outcome::from_compare(
        &format!(
            "drafters {:?} at k {:?} ({:?} draft tokens), greedy{}, in a batch and alone, \
             bit-identical to plain decode",
            g.drafters,
            g.ks,
            drafted,
            if g.sampling.is_some() {
                " and seeded"
            } else {
                ""
            }
        ),
        (compared, None),
    ))
}
