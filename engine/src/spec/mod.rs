//! Speculative decoding: drafters propose tokens, the target verifies them in one forward over
//! K+1 rows inside the normal batched step, and a draft token is accepted while it equals the
//! token the target itself chooses at that position — argmax for greedy, the seeded draw keyed on
//! (seed, sequence, position) for sampling. Since verify rows are just a chunk of the sequence
//! (whose logits do not depend on chunking, DESIGN.md §3), output bytes and logprobs equal plain
//! decode exactly; the only effect of speculation is speed. (Leviathan et al. 2023 and Chen et
//! al. 2023 accept by probability ratio, which is only distribution-equal; memra does not.)

/// How a request drafts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecMethod {
    /// Prompt lookup: match the last n (≤ `max_n`) tokens earlier in prompt + output and
    /// propose what followed, at most n − 1 tokens (Saxena 2023, "prompt lookup decoding";
    /// see [`NgramDrafter::propose`]).
    Ngram { max_n: usize },
    /// Self-drafting with the target's first `layers` layers, final norm and LM head (LayerSkip,
    /// Elhoushi et al. 2024), greedy.
    LayerSkip { layers: usize },
    /// A smaller model sharing the tokenizer, loaded beside the target (`--draft-model`), greedy.
    DraftModel,
}

impl std::fmt::Display for SpecMethod {
    /// The request syntax: `ngram:3`, `layerskip:12`, `draft`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecMethod::Ngram { max_n } => write!(f, "ngram:{max_n}"),
            SpecMethod::LayerSkip { layers } => write!(f, "layerskip:{layers}"),
            SpecMethod::DraftModel => write!(f, "draft"),
        }
    }
}

/// A request's speculation settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecParams {
    pub method: SpecMethod,
    /// Most draft tokens per verify (1..=16).
    pub k: usize,
    /// True when the request asked for this speculation itself (the `speculative` extension,
    /// `memra run --spec`); false when the server's default policy chose it
    /// ([`SpecParams::by_policy`]). A policy choice also pauses below the break-even acceptance
    /// that counts its drafter's own cost, and does not speculate at all when no acceptance
    /// pays for it; an explicit one pauses only below `spec_min_acceptance`.
    pub explicit: bool,
}

impl SpecParams {
    /// The layers a `layerskip:L` drafter runs (L), or None for the other methods.
    pub fn layer_skip(&self) -> Option<usize> {
        match self.method {
            SpecMethod::LayerSkip { layers } => Some(layers),
            _ => None,
        }
    }

    /// Parses `ngram`, `ngram:N`, `layerskip:L`, `draft`; `k` is given separately.
    pub fn parse(method: &str, k: usize) -> Result<SpecParams, String> {
        if !(1..=16).contains(&k) {
            return Err(format!("speculative k must be in 1..=16 (got {k})"));
        }
        let (name, arg) = method.split_once(':').unwrap_or((method, ""));
        let num = |d: usize| -> Result<usize, String> {
            if arg.is_empty() {
                Ok(d)
            } else {
                arg.parse()
                    .map_err(|_| format!("bad number in speculative method {method:?}"))
            }
        };
        let method = match name {
            "ngram" => match num(DEFAULT_NGRAM)? {
                n if n < MIN_NGRAM => {
                    return Err(format!(
                        "ngram:N needs N of at least {MIN_NGRAM} (the longest n-gram matched; \
                         the drafter matches at least {MIN_NGRAM} tokens)"
                    ))
                }
                max_n => SpecMethod::Ngram { max_n },
            },
            "layerskip" => SpecMethod::LayerSkip { layers: num(0)? },
            // The server's draft model comes from `--draft-model`, not from the method (`memra
            // run` strips its own `draft:MODEL` before parsing).
            "draft" if arg.is_empty() => SpecMethod::DraftModel,
            "draft" => {
                return Err(format!(
                    "speculative method {method:?}: draft takes no argument (the draft model is \
                     the server's --draft-model)"
                ))
            }
            _ => {
                return Err(format!(
                    "unknown speculative method {method:?} (ngram[:N], layerskip:L, draft)"
                ))
            }
        };
        if method == (SpecMethod::LayerSkip { layers: 0 }) {
            return Err("layerskip needs a layer count, e.g. layerskip:8".into());
        }
        Ok(SpecParams {
            method,
            k,
            explicit: true,
        })
    }

    /// The same settings as the server's default rather than the request's own choice.
    pub fn by_policy(self) -> SpecParams {
        SpecParams {
            explicit: false,
            ..self
        }
    }
}

/// The draft length that maximizes expected tokens per unit of step time, up to `k_max`:
/// with per-token acceptance `p` (each draft token accepted with probability p while all before
/// it were), a verify of k drafts yields 1 + p + p² + … + pᵏ tokens on average and costs about
/// `base` + k·(`row_cost` + `draft_cost`) decode steps ([`verify_cost`]): a verify's fixed part
/// and its rows (both measured per device by `memra tune`) plus drafting the tokens (0 for
/// n-gram lookup, L / layers for layer-skip, the draft model's bytes over the target's).
/// `row_cost` ≤ 0 turns the policy off (`k_max`). The choice only changes speed: every draft is
/// verified, so output is unchanged. (Dynamic draft length in the spirit of Leviathan et al.
/// 2023 §3.5 and Mamou et al. 2024, "Dynamic Speculation Lookahead".)
pub fn draft_len(p: f32, base: f32, row_cost: f32, draft_cost: f32, k_max: usize) -> usize {
    if row_cost <= 0.0 || k_max <= 1 {
        return k_max;
    }
    let p = p.clamp(0.0, 1.0);
    let (mut best, mut best_rate) = (1, 0.0f32);
    let (mut tokens, mut pk) = (1.0f32, 1.0f32);
    for k in 1..=k_max {
        pk *= p;
        tokens += pk;
        let rate = tokens / verify_cost(base, row_cost + draft_cost.max(0.0), k);
        if rate > best_rate {
            (best, best_rate) = (k, rate);
        }
    }
    best
}

/// Cost of a verify of `k` drafts in decode steps of one sequence: `base` + k·`row_cost`
/// (`base` ≥ 1: a verify holds the decode row itself; above 1 when a step of more than one row
/// takes a slower kernel path, as the H200's integer tensor-core path does for Q8_0).
pub fn verify_cost(base: f32, row_cost: f32, k: usize) -> f32 {
    base.max(1.0) + k as f32 * row_cost.max(0.0)
}

/// The lowest per-token acceptance at which some draft length of 1..=`k_max` pays under
/// [`verify_cost`] (expected tokens per verify at least its cost), or 1.0 when none does below
/// certainty: the floor under which a sequence pauses speculation. Found by bisection per k
/// (the expected tokens rise with the acceptance).
pub fn break_even_acceptance(base: f32, row_cost: f32, k_max: usize) -> f32 {
    let tokens = |a: f64, k: usize| (0..=k).map(|i| a.powi(i as i32)).sum::<f64>();
    let mut best = 1.0f64;
    for k in 1..=k_max.max(1) {
        let cost = f64::from(verify_cost(base, row_cost, k));
        if tokens(1.0, k) < cost {
            continue;
        }
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..50 {
            let mid = (lo + hi) / 2.0;
            if tokens(mid, k) < cost {
                lo = mid
            } else {
                hi = mid
            }
        }
        best = best.min(hi);
    }
    best as f32
}

pub mod drafters;
pub use drafters::{DraftJob, DraftModelDrafter, DraftState, Drafter, LayerSkipDrafter};

/// The longest tail `ngram` matches when the request names no N: long enough that a match can
/// draft the largest k (16) in full.
pub const DEFAULT_NGRAM: usize = 17;

/// Shortest tail that may be matched: a single-token match proposes noise far more often than
/// a continuation (measured on the CPU benchmark prompts: acceptance 10-41% with 1-token matches).
pub const MIN_NGRAM: usize = 2;

/// Shortest context matched before an edited token (a one-token substitution inside a copied
/// span): with 2 tokens the guess misfires too often on chat (measured: acceptance 29% -> 17%).
pub const EDIT_NGRAM: usize = 3;

/// Prompt-lookup drafter (Saxena 2023): needs no model, proposes from the sequence's own tokens.
pub struct NgramDrafter {
    pub max_n: usize,
}

impl NgramDrafter {
    /// Finds the latest of the longest earlier occurrences of the sequence's tail (up to `max_n`
    /// tokens, at least [`MIN_NGRAM`]) and proposes what followed it: at most `k` tokens, and at
    /// most one fewer than the match is long. A 2-token match drafts 1 token, a 5-token match up
    /// to 4: measured on the CPU benchmark's prompts, the tokens a match predicts correctly grow
    /// with its length (2 tokens: 1.2 on average, 3: 2.6–3.7, 7 and more: about 6 of 8), so short
    /// matches drafting k tokens mostly bought rejected verify rows.
    pub fn propose(&self, tokens: &[u32], k: usize) -> Vec<u32> {
        let len = tokens.len();
        if let Some((n, from)) = Self::longest_match(tokens, len, self.max_n) {
            if n >= MIN_NGRAM {
                return Self::continuation(tokens, from, k.min(n - 1));
            }
        }
        // No match for the tail: maybe the last token replaced one token of a copied span (an
        // edit). Match the n >= EDIT_NGRAM tokens before it and propose what followed the
        // replaced token.
        // The replaced token must come before the new one (an occurrence ending at len - 2
        // would make the new token its own replacement's successor).
        match Self::longest_match(tokens, len.saturating_sub(1), self.max_n) {
            Some((n, from)) if n >= EDIT_NGRAM && from + 2 < len => {
                Self::continuation(tokens, from + 1, k.min(n - 1))
            }
            _ => Vec::new(),
        }
    }

    /// `m` tokens of the sequence from `from`, continuing into the draft itself past the end:
    /// a match that overlaps its own tail (a repeating pattern) keeps repeating.
    fn continuation(tokens: &[u32], from: usize, m: usize) -> Vec<u32> {
        let mut d = Vec::with_capacity(m);
        for i in from..from + m {
            let t = match tokens.get(i) {
                Some(&t) => t,
                None => d[i - tokens.len()],
            };
            d.push(t);
        }
        d
    }

    /// The longest earlier occurrence of `tokens[..end]`'s tail, up to `max_n` tokens, latest
    /// first among equals: (its length n, the index just past it). An occurrence ends before
    /// `end - 1`, so at least one token follows it. One backward scan over the sequence.
    fn longest_match(tokens: &[u32], end: usize, max_n: usize) -> Option<(usize, usize)> {
        if end < 2 || max_n == 0 {
            return None;
        }
        let last = tokens[end - 1];
        let mut best: Option<(usize, usize)> = None;
        // `e` is the exclusive end of a candidate occurrence.
        for e in (1..end).rev() {
            if tokens[e - 1] != last {
                continue;
            }
            let mut n = 1;
            while n < max_n && n < e && tokens[e - 1 - n] == tokens[end - 1 - n] {
                n += 1;
            }
            if best.is_none_or(|(b, _)| n > b) {
                best = Some((n, e));
                if n == max_n {
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ngram_proposes_what_followed_the_latest_longest_match() {
        let d = NgramDrafter { max_n: 17 };
        // "a b c d e ... a b c": a 3-token match drafts up to 2 tokens, "d e".
        assert_eq!(d.propose(&[1, 2, 3, 4, 5, 9, 1, 2, 3], 4), vec![4, 5]);
        // ... and k caps it.
        assert_eq!(d.propose(&[1, 2, 3, 4, 5, 9, 1, 2, 3], 1), vec![4]);
        // A 2-token match drafts 1 token.
        assert_eq!(d.propose(&[1, 2, 3, 4, 9, 1, 2], 4), vec![3]);
        // The latest of equally long matches wins.
        assert_eq!(d.propose(&[1, 2, 5, 1, 2, 6, 1, 2], 4), vec![6]);
        // A longer match wins over a later, shorter one: "7 1 2" occurred once, early.
        assert_eq!(
            d.propose(&[7, 1, 2, 8, 9, 4, 1, 2, 5, 7, 1, 2], 4),
            vec![8, 9]
        );
        // A long copied span drafts k in full.
        let span: Vec<u32> = (10..30).collect();
        let mut t = span.clone();
        t.push(99);
        t.extend_from_slice(&span[..10]);
        assert_eq!(d.propose(&t, 8), (20..28).collect::<Vec<u32>>());
        // max_n bounds the match, so the draft: a 3-gram drafter drafts at most 2.
        assert_eq!(NgramDrafter { max_n: 3 }.propose(&t, 8), vec![20, 21]);
        // Repeats: "5 5 5 5" matches its own tail shifted by one (3 tokens) and the pattern
        // continues into the draft; "1 2 1 2 1" continues "2 1".
        assert_eq!(d.propose(&[5, 5, 5, 5], 4), vec![5, 5]);
        assert_eq!(d.propose(&[1, 2, 1, 2, 1], 4), vec![2, 1]);
        assert!(
            d.propose(&[7, 1, 8, 9, 1], 3).is_empty(),
            "a 1-token match is not used"
        );
        assert!(d.propose(&[1, 2, 3], 4).is_empty());
        assert!(d.propose(&[1], 4).is_empty());
        assert!(d.propose(&[], 4).is_empty());
    }

    #[test]
    fn ngram_continues_past_a_one_token_edit() {
        let d = NgramDrafter { max_n: 17 };
        // "a b c d X e f g ... a b c d Y": no match for the tail, so the 4 tokens before Y are
        // matched and what followed X is proposed (up to 3: one fewer than the match).
        assert_eq!(
            d.propose(&[1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 9], 8),
            vec![6, 7, 8]
        );
        // Only 2 tokens of context before the edit: below EDIT_NGRAM, nothing.
        assert!(d.propose(&[8, 2, 3, 4, 5, 6, 1, 2, 3, 9], 3).is_empty());
        // A run broken by a new token: the only occurrence of the run's tail is the run shifted
        // by one, whose successor is the new token itself; no draft of it.
        assert!(d.propose(&[5, 5, 5, 5, 9], 4).is_empty());
    }

    #[test]
    fn method_syntax_is_checked() {
        assert_eq!(
            SpecParams::parse("ngram", 4).unwrap().method,
            SpecMethod::Ngram {
                max_n: DEFAULT_NGRAM
            }
        );
        assert_eq!(
            SpecParams::parse("ngram:5", 2).unwrap().method,
            SpecMethod::Ngram { max_n: 5 }
        );
        for short in ["ngram:0", "ngram:1"] {
            assert!(SpecParams::parse(short, 4)
                .unwrap_err()
                .contains("at least 2"));
        }
        assert_eq!(
            SpecParams::parse("ngram:2", 4).unwrap().method,
            SpecMethod::Ngram { max_n: 2 }
        );
        assert!(SpecParams::parse("ngram:x", 4)
            .unwrap_err()
            .contains("bad number"));
        assert!(SpecParams::parse("layerskip", 4)
            .unwrap_err()
            .contains("layer count"));
        assert!(SpecParams::parse("ngram", 0)
            .unwrap_err()
            .contains("1..=16"));
        assert!(SpecParams::parse("magic", 4)
            .unwrap_err()
            .contains("unknown"));
    }

    #[test]
    fn draft_len_follows_acceptance_and_cost() {
        // Free verify rows, or no cost model: the request's k.
        assert_eq!(draft_len(0.3, 1.0, 0.0, 0.0, 8), 8);
        // Near-certain acceptance with cheap rows: draft all 8; coin-flip acceptance: 2
        // ((1 + .5 + .25) / 1.3 = 1.35 beats 1 draft's 1.5 / 1.15 = 1.30 and 3 drafts' 1.30).
        assert_eq!(draft_len(0.99, 1.0, 0.1, 0.0, 8), 8);
        assert_eq!(draft_len(0.5, 1.0, 0.15, 0.0, 8), 2);
        // Rarely accepted: one draft (the least a speculating step proposes).
        assert_eq!(draft_len(0.05, 1.0, 0.15, 0.0, 8), 1);
        // More acceptance never shortens the draft; dearer rows never lengthen it.
        let mut last = 0;
        for i in 0..=20 {
            let k = draft_len(i as f32 / 20.0, 1.0, 0.12, 0.0, 16);
            assert!(k >= last, "p = {}: {k} < {last}", i as f32 / 20.0);
            last = k;
        }
        assert!(draft_len(0.8, 1.0, 0.5, 0.0, 16) <= draft_len(0.8, 1.0, 0.1, 0.0, 16));
        // A draft that costs to make shortens the draft like a dearer row.
        assert_eq!(
            draft_len(0.8, 1.0, 0.1, 0.4, 16),
            draft_len(0.8, 1.0, 0.5, 0.0, 16)
        );
        // No row cost: the policy is off whatever drafting costs.
        assert_eq!(draft_len(0.9, 1.0, 0.0, 0.3, 16), 16);
        // A fixed verify overhead (a slower path for steps of more than one row) never shortens
        // the draft: more drafts share it.
        for i in 0..=20 {
            let p = i as f32 / 20.0;
            assert!(draft_len(p, 1.7, 0.08, 0.0, 16) >= draft_len(p, 1.0, 0.08, 0.0, 16));
        }
        // p = 0.5 with base 1.7 and rows of 0.08: 3 drafts (1.875 / 1.94 = 0.966 beats 2 drafts'
        // 1.75 / 1.86 = 0.941 and 4 drafts' 1.9375 / 2.02 = 0.959).
        assert_eq!(draft_len(0.5, 1.7, 0.08, 0.0, 16), 3);
    }

    #[test]
    fn break_even_acceptance_is_the_cheapest_paying_draft() {
        // No fixed overhead: one draft pays once 1 + a >= 1 + row cost, so a = row cost.
        assert!((break_even_acceptance(1.0, 0.2, 8) - 0.2).abs() < 1e-4);
        // A fixed overhead of 0.7 steps with rows of 0.08: 3 or 4 drafts pay first, near 0.52
        // (one draft would need 0.78).
        let a = break_even_acceptance(1.7, 0.08, 8);
        assert!((0.515..0.53).contains(&a), "{a}");
        assert!(break_even_acceptance(1.7, 0.08, 1) > 0.779);
        // Nothing pays below certainty: 1.0.
        assert_eq!(break_even_acceptance(2.5, 1.0, 1), 1.0);
        assert!(
            (verify_cost(0.5, 0.25, 4) - 2.0).abs() < 1e-6,
            "base is at least 1"
        );
    }

    #[test]
    fn parse_methods() {
        assert_eq!(
            SpecParams::parse("ngram", 4).unwrap().method,
            SpecMethod::Ngram {
                max_n: DEFAULT_NGRAM
            }
        );
        assert_eq!(
            SpecParams::parse("layerskip:6", 2).unwrap().method,
            SpecMethod::LayerSkip { layers: 6 }
        );
        assert!(SpecParams::parse("layerskip", 2).is_err());
        assert!(SpecParams::parse("medusa", 2).is_err());
        let e = SpecParams::parse("draft:x", 2).unwrap_err();
        assert!(
            e.contains("no argument") && e.contains("--draft-model"),
            "{e}"
        );
        assert!(SpecParams::parse("ngram", 0).is_err());
        // Display gives back the request syntax.
        for m in ["ngram:3", "layerskip:6", "draft"] {
            assert_eq!(SpecParams::parse(m, 2).unwrap().method.to_string(), m);
        }
    }
}
