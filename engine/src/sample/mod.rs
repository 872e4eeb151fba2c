//! Token selection: penalties, logit bias, temperature, top-k, top-p, min-p, then greedy argmax or
//! a seeded draw from the counter-based generator in [`rng`].
//!
//! Order and semantics follow vLLM's sampler: repetition penalty (CTRL, Keskar et al. 2019: divide
//! positive logits, multiply negative ones) over prompt and output tokens; presence and frequency
//! penalties (OpenAI API) over output tokens; logit bias; temperature; top-k; top-p (Holtzman et
//! al. 2019); min-p (Nguyen et al. 2024).

pub mod rng;
pub mod select;

use crate::error::{Error, Result};
use std::collections::HashMap;

/// Per-request sampling parameters. Defaults are the neutral values (no filtering, no penalty).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: f32,
    /// 0 means off.
    pub top_k: usize,
    /// 1 means off.
    pub top_p: f32,
    /// 0 means off.
    pub min_p: f32,
    /// 1 means off.
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    /// Added to the logit of each token id.
    pub logit_bias: Vec<(u32, f32)>,
    /// Seed of the counter-based generator.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
            seed: 0,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            ..Default::default()
        }
    }

    /// Checks ranges; the error names the parameter.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad("temperature must be a finite number >= 0");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p must be in (0, 1]");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p must be in [0, 1]");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad("repetition_penalty must be a finite number > 0");
        }
        if !(self.presence_penalty.is_finite() && (-2.0..=2.0).contains(&self.presence_penalty)) {
            return bad("presence_penalty must be in [-2, 2]");
        }
        if !(self.frequency_penalty.is_finite() && (-2.0..=2.0).contains(&self.frequency_penalty)) {
            return bad("frequency_penalty must be in [-2, 2]");
        }
        if self.logit_bias.iter().any(|(_, b)| !b.is_finite()) {
            return bad("logit_bias values must be finite");
        }
        Ok(())
    }
}

/// Picks the next token from `logits` (one row, `vocab` f32). `prompt` and `output` are the
/// sequence's tokens so far (for penalties); `sequence` and `position` key the random draw
/// (position = index of the token being chosen in the whole sequence).
pub fn sample(
    logits: &[f32],
    p: &SamplingParams,
    prompt: &[u32],
    output: &[u32],
    sequence: u32,
    position: u64,
) -> u32 {
    choose(&process(logits, p, prompt, output), p, sequence, position)
}

/// Chooses a token for `pick` from its raw logits row `row` on the host: edits (penalties and
/// bias), then [`choose`], then [`logprobs`] when asked.
pub fn pick(row: &[f32], pick: &crate::backend::Pick<'_>) -> crate::backend::Picked {
    let ed = edits(pick.params, pick.prompt, pick.output, pick.extra);
    // The row is copied only when something edits it.
    let edited;
    let l: &[f32] = if ed.is_empty() {
        row
    } else {
        let mut v = row.to_vec();
        for e in ed {
            if let Some(x) = v.get_mut(e.id as usize) {
                *x = e.apply(*x);
            }
        }
        edited = v;
        &edited
    };
    let token = choose(l, pick.params, pick.sequence, pick.position);
    crate::backend::Picked {
        token,
        logprob: pick
            .logprobs
            .map(|k| logprobs(l, token, k.min(crate::backend::MAX_TOP_LOGPROBS))),
        logits: pick.want_logits.then(|| row.to_vec()),
    }
}

/// Logits after penalties and logit bias: the distribution logprobs are reported from.
pub fn process(logits: &[f32], p: &SamplingParams, prompt: &[u32], output: &[u32]) -> Vec<f32> {
    let mut l = logits.to_vec();
    for e in edits(p, prompt, output, &[]) {
        if let Some(v) = l.get_mut(e.id as usize) {
            *v = e.apply(*v);
        }
    }
    l
}

/// What penalties and logit bias do to one token's logit, in this order: the repetition
/// penalty (divide a positive logit, multiply a negative one), then subtract `sub` (frequency ×
/// count + presence), then add `bias`. The CPU and the CUDA sampler apply the same edits with
/// the same f32 operations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Edit {
    pub id: u32,
    /// Repetition penalty to apply (`None`: the token was not seen or the penalty is off).
    pub rep: Option<f32>,
    pub sub: Option<f32>,
    pub bias: Option<f32>,
}

impl Edit {
    /// The edited logit.
    pub fn apply(&self, mut v: f32) -> f32 {
        if let Some(r) = self.rep {
            v = if v > 0.0 { v / r } else { v * r };
        }
        if let Some(s) = self.sub {
            v -= s;
        }
        if let Some(b) = self.bias {
            v += b;
        }
        v
    }
}

/// The edits `p` makes for a sequence with `prompt` and `output` tokens, where `extra` are
/// tokens after `output` not yet in it (the drafts before a speculative verify row). One edit
/// per token id, sorted by id; empty when no penalty or bias is on. Duplicate logit-bias ids
/// add up.
pub fn edits(p: &SamplingParams, prompt: &[u32], output: &[u32], extra: &[u32]) -> Vec<Edit> {
    let mut out: std::collections::BTreeMap<u32, Edit> = Default::default();
    fn get(out: &mut std::collections::BTreeMap<u32, Edit>, id: u32) -> &mut Edit {
        out.entry(id).or_insert(Edit {
            id,
            rep: None,
            sub: None,
            bias: None,
        })
    }
    let generated = output.iter().chain(extra);
    if p.repetition_penalty != 1.0 {
        for &id in prompt.iter().chain(generated.clone()) {
            get(&mut out, id).rep = Some(p.repetition_penalty);
        }
    }
    if p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 {
        let mut counts: HashMap<u32, u32> = HashMap::new();
        for &t in generated {
            *counts.entry(t).or_default() += 1;
        }
        for (id, n) in counts {
            get(&mut out, id).sub = Some(n as f32 * p.frequency_penalty + p.presence_penalty);
        }
    }
    for &(id, b) in &p.logit_bias {
        let e = get(&mut out, id);
        e.bias = Some(e.bias.map_or(b, |a| a + b));
    }
    out.into_values().collect()
}

/// Chooses from processed logits: argmax at temperature 0, else the seeded draw of
/// [`select`] after temperature, top-k, top-p and min-p, with the random bits keyed on
/// (seed, sequence, position).
pub fn choose(l: &[f32], p: &SamplingParams, sequence: u32, position: u64) -> u32 {
    choose_with_draw(l, p, || rng::draw24(p.seed, sequence, position))
}

/// [`choose`] with the 24 random bits supplied by the caller (called only when sampling). Gates
/// use it to build a deliberately broken arm with a shared stateful generator.
pub fn choose_with_draw(l: &[f32], p: &SamplingParams, draw: impl FnOnce() -> u32) -> u32 {
    if p.temperature == 0.0 {
        return argmax(l);
    }
    select::draw(l, p.temperature, p.top_k, p.top_p, p.min_p, draw())
}

/// Log-softmax of `l` at `token`, and the `top` most likely (id, logprob) pairs (ties: lower id
/// first; NaN logits are never listed). Computed in f64 for the normalizer, reported as f32.
pub fn logprobs(l: &[f32], token: u32, top: usize) -> (f32, Vec<(u32, f32)>) {
    let max = l.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max as f64
        + l.iter()
            .map(|&v| ((v - max) as f64).exp())
            .sum::<f64>()
            .ln();
    let lp = |i: u32| (l[i as usize] as f64 - lse) as f32;
    let best = select::top_n(l, top);
    (lp(token), best.into_iter().map(|i| (i, lp(i))).collect())
}

/// Index of the largest value; the lowest index wins ties. NaN never wins.
pub fn argmax(l: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &v) in l.iter().enumerate() {
        if v > l[best] || l[best].is_nan() {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_argmax_lowest_index_on_ties() {
        assert_eq!(
            sample(
                &[0.1, 3.0, 3.0, -1.0],
                &SamplingParams::greedy(),
                &[],
                &[],
                0,
                0
            ),
            1
        );
    }

    #[test]
    fn edits_match_the_penalty_rules() {
        let p = SamplingParams {
            repetition_penalty: 2.0,
            frequency_penalty: 0.5,
            presence_penalty: 0.25,
            logit_bias: vec![(9, 1.0), (9, 0.5)],
            ..Default::default()
        };
        let e = edits(&p, &[1], &[2, 2], &[3]);
        assert_eq!(e.iter().map(|e| e.id).collect::<Vec<_>>(), vec![1, 2, 3, 9]);
        assert_eq!(e[0].sub, None);
        assert_eq!(e[1].sub, Some(1.25));
        assert_eq!(e[2].sub, Some(0.75));
        assert_eq!(e[3].bias, Some(1.5));
        assert_eq!(e[1].apply(3.0), 3.0 / 2.0 - 1.25);
        assert_eq!(e[0].apply(-3.0), -6.0);
        assert!(edits(&SamplingParams::default(), &[1, 2], &[3], &[]).is_empty());
    }

    #[test]
    fn penalties_move_logits() {
        let p = SamplingParams {
            temperature: 0.0,
            repetition_penalty: 2.0,
            ..Default::default()
        };
        // Token 0 is repeated: 3.0 / 2 = 1.5 < 2.0, so token 1 wins.
        assert_eq!(sample(&[3.0, 2.0], &p, &[0], &[], 0, 0), 1);
        let p = SamplingParams {
            temperature: 0.0,
            frequency_penalty: 0.6,
            ..Default::default()
        };
        assert_eq!(sample(&[3.0, 2.0], &p, &[], &[0, 0], 0, 0), 1);
        assert_eq!(sample(&[3.0, 2.0], &p, &[], &[0], 0, 0), 0);
        let p = SamplingParams {
            temperature: 0.0,
            logit_bias: vec![(1, 5.0)],
            ..Default::default()
        };
        assert_eq!(sample(&[3.0, 2.0], &p, &[], &[], 0, 0), 1);
    }

    #[test]
    fn seeded_draws_are_reproducible_and_follow_the_distribution() {
        let l = [1.0f32, 0.0, -1.0];
        let p = SamplingParams {
            seed: 42,
            ..Default::default()
        };
        let draws: Vec<u32> = (0..4000)
            .map(|pos| sample(&l, &p, &[], &[], 0, pos))
            .collect();
        let again: Vec<u32> = (0..4000)
            .map(|pos| sample(&l, &p, &[], &[], 0, pos))
            .collect();
        assert_eq!(draws, again);
        let f0 = draws.iter().filter(|&&t| t == 0).count() as f32 / 4000.0;
        // softmax([1,0,-1])[0] = 0.665; 4000 draws put the estimate within ±0.03 at > 99.9%.
        assert!((f0 - 0.665).abs() < 0.03, "frequency of token 0: {f0}");
    }

    #[test]
    fn logprobs_normalize_and_rank() {
        let (lp, top) = logprobs(&[2.0, 1.0, 2.0, 0.0], 1, 3);
        let z = (2.0f64.exp() * 2.0 + 1.0f64.exp() + 1.0).ln();
        assert!((lp as f64 - (1.0 - z)).abs() < 1e-6);
        assert_eq!(top.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 2, 1]);
        let total: f64 = [2.0f64, 1.0, 2.0, 0.0].iter().map(|v| (v - z).exp()).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn validate_names_the_parameter() {
        let e = SamplingParams {
            top_p: 0.0,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("top_p"));
        let e = SamplingParams {
            temperature: f32::NAN,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("temperature"));
    }
}
