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
            "ngram" => SpecMethod::Ngram {
                max_n: num(3)?.max(1),
            },
            "layerskip" => SpecMethod::LayerSkip { layers: num(0)? },
            "draft" => SpecMethod::DraftModel,
            _ => {
                return Err(format!(
                    "unknown speculative method {method:?} (ngram[:N], layerskip:L)"
                ))
            }
        };
        if method == (SpecMethod::LayerSkip { layers: 0 }) {
            return Err("layerskip needs a layer count, e.g. layerskip:8".into());
        }
        Ok(SpecParams { method, k })
    }
}

pub mod drafters;
pub use drafters::{DraftJob, DraftModelDrafter, DraftState, Drafter, LayerSkipDrafter};

/// Shortest tail that may be matched: a single-token match proposes noise far more often than
/// a continuation (measured on the CPU benchmark prompts: acceptance 10-41% with 1-token matches).
pub const MIN_NGRAM: usize = 2;

/// Prompt-lookup drafter (Saxena 2023): needs no model, proposes from the sequence's own tokens.
pub struct NgramDrafter {
    pub max_n: usize,
}

impl NgramDrafter {
    /// Finds the most recent earlier occurrence of the last n tokens (n from `max_n` down to
    /// [`MIN_NGRAM`]) and proposes the up to `k` tokens that followed it.
    pub fn propose(&self, tokens: &[u32], k: usize) -> Vec<u32> {
        let len = tokens.len();
        for n in (MIN_NGRAM..=self.max_n.min(len.saturating_sub(1))).rev() {
            let tail = &tokens[len - n..];
            // Latest match first; the match must end before the tail starts.
            for start in (0..len - n).rev() {
                if &tokens[start..start + n] == tail {
                    let from = start + n;
                    let end = (from + k).min(len);
                    if end > from {
                        return tokens[from..end].to_vec();
                    }
                }
            }
        }
        Vec::new()
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
    }
}
