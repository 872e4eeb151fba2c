//! Self-check of the sampling kernel against the host sampler ([`crate::sample::pick`]).

use super::selfcheck::{CheckRow, Rng};
use super::CudaDevice;
use crate::error::Result;

/// The sampling kernel against [`crate::sample::pick`] on the host: the same token for every
/// pick (the draw is defined to be exact on both), the same top-logprob ids, logprobs within
/// 1e-5, and a pick's result bit-identical whether it runs alone or among 24 others.
pub(super) fn check_sample(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    use crate::backend::{Pick, Picked};
    use crate::sample::{pick, SamplingParams};
    let mut out = Vec::new();
    let sets: Vec<(&str, SamplingParams)> = vec![
        ("greedy", SamplingParams::greedy()),
        (
            "t=0.7",
            SamplingParams {
                temperature: 0.7,
                seed: 11,
                ..Default::default()
            },
        ),
        (
            "t=1 top_k=40",
            SamplingParams {
                top_k: 40,
                seed: 12,
                ..Default::default()
            },
        ),
        (
            "t=0.9 top_p=0.9",
            SamplingParams {
                temperature: 0.9,
                top_p: 0.9,
                seed: 13,
                ..Default::default()
            },
        ),
        (
            "top_k=100 top_p=0.95 min_p=0.05",
            SamplingParams {
                top_k: 100,
                top_p: 0.95,
                min_p: 0.05,
                seed: 14,
                ..Default::default()
            },
        ),
        (
            "penalties + bias, t=0.8",
            SamplingParams {
                temperature: 0.8,
                repetition_penalty: 1.3,
                frequency_penalty: 0.5,
                presence_penalty: 0.3,
                logit_bias: vec![(5, 4.0), (17, -100.0)],
                seed: 15,
                ..Default::default()
            },
        ),
    ];
    for (vocab, step) in [(151_936usize, 0.0f32), (1000, 0.5)] {
        let rows = 3;
        // Large vocab: continuous logits; small: logits on a 0.5 grid, so ties are common.
        let host: Vec<f32> = (0..rows * vocab)
            .map(|_| {
                let v = rng.uniform(-12.0, 12.0);
                if step > 0.0 {
                    (v / step).round() * step
                } else {
                    v
                }
            })
            .collect();
        let logits = dev.upload(&host)?;
        let mut scratch = super::sample::SampleScratch::new(dev, vocab)?;
        let prompt: Vec<u32> = (0..40).map(|i| (i * 37 % vocab) as u32).collect();
        let output: Vec<u32> = (0..12).map(|i| (i * 11 % 50) as u32).collect();
        for (name, p) in &sets {
            let picks: Vec<Pick<'_>> = (0..25)
                .map(|j| Pick {
                    row: j % rows,
                    params: p,
                    prompt: &prompt,
                    output: &output,
                    extra: &output[..j % 3],
                    sequence: (j / 5) as u32,
                    position: 100 + j as u64,
                    logprobs: Some([0, 1, 5, 20][j % 4]),
                    want_logits: false,
                })
                .collect();
            let gpu = dev.sample_picks(&logits, vocab, rows, &picks, &mut scratch)?;
            let alone: Vec<Picked> = picks
                .iter()
                .map(|pk| {
                    dev.sample_picks(&logits, vocab, rows, std::slice::from_ref(pk), &mut scratch)
                })
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .flatten()
                .collect();
            let mut ok = true;
            let mut max = 0f32;
            for (pk, g) in picks.iter().zip(&gpu) {
                let c = pick(&host[pk.row * vocab..][..vocab], pk);
                ok &= g.token == c.token;
                let (gl, cl) = (
                    g.logprob.as_ref().expect("asked"),
                    c.logprob.expect("asked"),
                );
                ok &= gl.1.iter().map(|x| x.0).eq(cl.1.iter().map(|x| x.0));
                for (a, b) in std::iter::once((gl.0, cl.0))
                    .chain(gl.1.iter().zip(&cl.1).map(|(a, b)| (a.1, b.1)))
                {
                    max = max.max((a - b).abs());
                }
            }
            let ident = gpu.iter().zip(&alone).all(|(a, b)| {
                a.token == b.token
                    && a.logprob.as_ref().map(|l| l.0.to_bits())
                        == b.logprob.as_ref().map(|l| l.0.to_bits())
            });
            out.push(CheckRow {
                op: "sample_picks".into(),
                case: format!("V={vocab} {name}"),
                max_abs_diff: max,
                tolerance: "same tokens; logprob 1e-5".into(),
                within: ok && max <= 1e-5,
                batch_identical: Some(ident),
            });
        }
    }
    Ok(out)
}
