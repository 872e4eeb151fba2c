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
    /// propose what followed (Saxena 2023, "prompt lookup decoding").
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
}

impl SpecParams {
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
            "ngram" => match num(3)? {
                0 => {
                    return Err("ngram:N needs N of at least 1 (the longest n-gram matched)".into())
                }
                max_n => SpecMethod::Ngram { max_n },
            },
            "layerskip" => SpecMethod::LayerSkip { layers: num(0)? },
            "draft" => SpecMethod::DraftModel,
            _ => {
                return Err(format!(
                    "unknown speculative method {method:?} (ngram[:N], layerskip:L, draft)"
                ))
            }
        };
        if method == (SpecMethod::LayerSkip { layers: 0 }) {
            return Err("layerskip needs a layer count, e.g. layerskip:8".into());
        }
        Ok(SpecParams { method, k })
    }
}

/// The draft length that maximizes expected tokens per unit of step time, up to `k_max`:
/// with per-token acceptance `p` (each draft token accepted with probability p while all before
/// it were), a verify of k drafts yields 1 + p + p² + … + pᵏ tokens on average and costs about
/// 1 + k·(`row_cost` + `draft_cost`) decode steps: the verify row (measured per device) plus
/// drafting the token (0 for n-gram lookup, L / layers for layer-skip, the draft model's bytes
/// over the target's). `row_cost` ≤ 0 turns the policy off (`k_max`). The choice only changes
/// speed: every draft is verified, so output is unchanged. (Dynamic draft length in the spirit
/// of Leviathan et al. 2023 §3.5 and Mamou et al. 2024, "Dynamic Speculation Lookahead".)
pub fn draft_len(p: f32, row_cost: f32, draft_cost: f32, k_max: usize) -> usize {
    if row_cost <= 0.0 || k_max <= 1 {
        return k_max;
    }
    let row_cost = row_cost + draft_cost.max(0.0);
    let p = p.clamp(0.0, 1.0);
    let (mut best, mut best_rate) = (1, 0.0f32);
    let (mut tokens, mut pk) = (1.0f32, 1.0f32);
    for k in 1..=k_max {
        pk *= p;
        tokens += pk;
        let rate = tokens / (1.0 + k as f32 * row_cost);
        if rate > best_rate {
            (best, best_rate) = (k, rate);
        }
    }
    best
}

pub mod drafters;
pub use drafters::{DraftJob, DraftModelDrafter, DraftState, Drafter, LayerSkipDrafter};

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
    /// Finds the most recent earlier occurrence of the last n tokens (n from `max_n` down to
    /// [`MIN_NGRAM`]) and proposes the up to `k` tokens that followed it.
    pub fn propose(&self, tokens: &[u32], k: usize) -> Vec<u32> {
        let len = tokens.len();
        if let Some(d) = Self::lookup(tokens, len, self.max_n, MIN_NGRAM, 0, k) {
            return d;
        }
        // No match for the tail: maybe the last token replaced one token of a copied span (an
        // edit). Match the n >= EDIT_NGRAM tokens before it and propose what followed the
        // replaced token.
        Self::lookup(tokens, len - len.min(1), self.max_n, EDIT_NGRAM, 1, k).unwrap_or_default()
    }

    /// The continuation (up to `k` tokens, after skipping `skip`) of the latest earlier
    /// occurrence of `tokens[..end]`'s last n tokens, n from `max_n` down to `min_n`.
    fn lookup(
        tokens: &[u32],
        end: usize,
        max_n: usize,
        min_n: usize,
        skip: usize,
        k: usize,
    ) -> Option<Vec<u32>> {
        for n in (min_n..=max_n.min(end.saturating_sub(1))).rev() {
            let tail = &tokens[end - n..end];
            // Latest match first; the match must end before the tail starts.
            for start in (0..end - n).rev() {
                if &tokens[start..start + n] == tail {
                    let from = start + n + skip;
                    let stop = (from + k).min(tokens.len());
                    if stop > from {
                        return Some(tokens[from..stop].to_vec());
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ngram_proposes_what_followed_the_latest_match() {
        let d = NgramDrafter { max_n: 3 };
        // "a b c d ... a b" -> propose "c d".
        assert_eq!(d.propose(&[1, 2, 3, 4, 9, 1, 2], 2), vec![3, 4]);
        // Latest match wins.
        assert_eq!(d.propose(&[1, 2, 5, 1, 2, 6, 1, 2], 1), vec![6]);
        // Shorter n when the longer tail never occurred (down to MIN_NGRAM); nothing when
        // nothing matches.
        assert_eq!(d.propose(&[7, 1, 8, 9, 7, 1], 3), vec![8, 9, 7]);
        assert!(
            d.propose(&[7, 1, 8, 9, 1], 3).is_empty(),
            "a 1-token match is not used"
        );
        assert!(d.propose(&[1, 2, 3], 4).is_empty());
        assert!(d.propose(&[], 4).is_empty());
    }

    #[test]
    fn ngram_continues_past_a_one_token_edit() {
        let d = NgramDrafter { max_n: 3 };
        // "a b c X d e f ... a b c Y": no match for the tail, so the 3 tokens before Y are
        // matched and what followed X is proposed.
        assert_eq!(
            d.propose(&[1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 9], 3),
            vec![5, 6, 7]
        );
        // Only 2 tokens of context before the edit: below EDIT_NGRAM, nothing.
        assert!(d.propose(&[8, 2, 3, 4, 5, 6, 1, 2, 3, 9], 3).is_empty());
    }

    #[test]
    fn method_syntax_is_checked() {
        assert_eq!(
            SpecParams::parse("ngram", 4).unwrap().method,
            SpecMethod::Ngram { max_n: 3 }
        );
        assert_eq!(
            SpecParams::parse("ngram:5", 2).unwrap().method,
            SpecMethod::Ngram { max_n: 5 }
        );
        assert!(SpecParams::parse("ngram:0", 4)
            .unwrap_err()
            .contains("at least 1"));
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
        assert_eq!(draft_len(0.3, 0.0, 0.0, 8), 8);
        // Near-certain acceptance with cheap rows: draft all 8; coin-flip acceptance: 2
        // ((1 + .5 + .25) / 1.3 = 1.35 beats 1 draft's 1.5 / 1.15 = 1.30 and 3 drafts' 1.30).
        assert_eq!(draft_len(0.99, 0.1, 0.0, 8), 8);
        assert_eq!(draft_len(0.5, 0.15, 0.0, 8), 2);
        // Rarely accepted: one draft (the least a speculating step proposes).
        assert_eq!(draft_len(0.05, 0.15, 0.0, 8), 1);
        // More acceptance never shortens the draft; dearer rows never lengthen it.
        let mut last = 0;
        for i in 0..=20 {
            let k = draft_len(i as f32 / 20.0, 0.12, 0.0, 16);
            assert!(k >= last, "p = {}: {k} < {last}", i as f32 / 20.0);
            last = k;
        }
        assert!(draft_len(0.8, 0.5, 0.0, 16) <= draft_len(0.8, 0.1, 0.0, 16));
        // A draft that costs to make shortens the draft like a dearer row.
        assert_eq!(draft_len(0.8, 0.1, 0.4, 16), draft_len(0.8, 0.5, 0.0, 16));
        // No row cost: the policy is off whatever drafting costs.
        assert_eq!(draft_len(0.9, 0.0, 0.3, 16), 16);
    }

    #[test]
    fn parse_methods() {
        assert_eq!(
            SpecParams::parse("ngram", 4).unwrap().method,
            SpecMethod::Ngram { max_n: 3 }
        );
        assert_eq!(
            SpecParams::parse("layerskip:6", 2).unwrap().method,
            SpecMethod::LayerSkip { layers: 6 }
        );
        assert!(SpecParams::parse("layerskip", 2).is_err());
        assert!(SpecParams::parse("medusa", 2).is_err());
        assert!(SpecParams::parse("ngram", 0).is_err());
        // Display gives back the request syntax.
        for m in ["ngram:3", "layerskip:6", "draft"] {
            assert_eq!(SpecParams::parse(m, 2).unwrap().method.to_string(), m);
        }
    }
}
