//! A deterministic byte-level BPE tokenizer of any vocabulary size, for synthetic checkpoints.
//!
//! Layout: ids 0..256 are the 256 bytes (GPT-2's byte-to-unicode symbols, id = byte value); then
//! merged tokens, first those a small BPE training run learns from the English-ish corpus compiled
//! in below, then filler merges (a space-or-letter token joined with a letters token, up to 12
//! symbols) drawn from a fixed-key generator until the vocabulary is full; the last three ids are
//! the special tokens `<|endoftext|>` (BOS and padding), `<|im_start|>` and `<|im_end|>` (EOS, the
//! end of a ChatML turn). The tokenizer depends only on the vocabulary size, not on `--seed`, so
//! checkpoints of one shape share it (a draft model needs its target's tokenizer). The
//! pre-tokenizer is the family's ([`PreTokenizer`]), because HF transformers imposes Qwen's on any
//! `qwen2` checkpoint whatever its tokenizer.json says. It is a valid tokenizer, not a good one.

use anyhow::{bail, Result};
use memra_engine::formats::gguf::MetaValue;
use memra_engine::formats::gguf_write::GgufBuilder;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// The special tokens, in id order at the end of the vocabulary.
pub const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// ChatML, the chat template of every synthetic checkpoint.
pub const CHAT_TEMPLATE: &str = "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/// Qwen2/Qwen3's split regex (their tokenizer.json, llama.cpp's `qwen2` pre-tokenizer).
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Llama 3's split regex (its tokenizer.json, llama.cpp's `llama-bpe` pre-tokenizer).
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// How text is split before BPE, as the family's real tokenizer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// GPT-2's byte-level regex (GGUF `gpt-2`).
    Gpt2,
    /// Llama 3's regex (GGUF `llama-bpe`).
    Llama3,
    /// Qwen2's regex after NFC normalization (GGUF `qwen2`).
    Qwen2,
}

impl PreTokenizer {
    /// `tokenizer.ggml.pre`.
    pub fn gguf_name(self) -> &'static str {
        match self {
            PreTokenizer::Gpt2 => "gpt-2",
            PreTokenizer::Llama3 => "llama-bpe",
            PreTokenizer::Qwen2 => "qwen2",
        }
    }

    /// tokenizer.json's `normalizer` and `pre_tokenizer`.
    fn hf_json(self) -> (Value, Value) {
        let split = |re: &str| {
            json!({"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated", "invert": false},
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                 "use_regex": false},
            ]})
        };
        match self {
            PreTokenizer::Gpt2 => (
                Value::Null,
                json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                       "use_regex": true}),
            ),
            PreTokenizer::Llama3 => (Value::Null, split(LLAMA3_REGEX)),
            PreTokenizer::Qwen2 => (json!({"type": "NFC"}), split(QWEN2_REGEX)),
        }
    }
}

/// Longest filler token, in byte symbols.
const MAX_FILLER_LEN: usize = 12;

/// Training text for the first merges: written for this purpose, prose and a little code.
const CORPUS: &str = "\
The engine reads a model from a file and answers one token at a time. Each token is a small \
piece of text: a word, a part of a word, a space or a single byte. When a token is chosen it is \
added to the input, and the model runs again on the longer text. This is called decoding, and \
the simplest kind always takes the most likely token.

A river runs through the middle of the old town. On the north side there is a market where \
people sell bread, cheese, apples and flowers every morning. On the south side there is a \
school, a library and a small park with tall trees. In the summer the children play in the park \
until the sun goes down, and in the winter they skate on the frozen pond.

The weather today is cold and clear. Tomorrow there will be rain in the morning and wind in the \
afternoon. The temperature will stay between four and nine degrees. Next week should be warmer, \
with sunny days and light clouds over the hills.

Questions and answers: What is the largest planet? Jupiter is the largest planet in the solar \
system. How many minutes are there in an hour? There are sixty minutes in an hour. What do bees \
make? Bees make honey and wax. Where does the sun rise? The sun rises in the east.

def count_words(text):
    counts = {}
    for word in text.split():
        counts[word] = counts.get(word, 0) + 1
    return counts

fn main() {
    let numbers: Vec<u32> = (1..=10).collect();
    let total: u32 = numbers.iter().sum();
    println!(\"the total is {}\", total);
}

The user asks a question and the assistant writes a short, helpful and honest answer. If the \
question is not clear, the assistant asks for more details before it answers. The answer \
should be correct, and it should explain each step in plain words.
";

/// A tokenizer's vocabulary, merges and special ids.
#[derive(Debug, Clone)]
pub struct Vocab {
    /// Token strings by id (byte-level symbols).
    pub tokens: Vec<String>,
    /// Merges in priority order; each joins two tokens into a third of the vocabulary.
    pub merges: Vec<(String, String)>,
    pub bos: u32,
    pub eos: u32,
    pub pad: u32,
    pub pre: PreTokenizer,
}

/// GPT-2's byte-to-unicode table: printable Latin-1 bytes map to themselves, the rest to
/// U+0100 upwards (so a space is `Ġ`).
pub fn byte_symbols() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        let printable = (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        table[b as usize] = if printable {
            char::from_u32(b).expect("Latin-1")
        } else {
            n += 1;
            char::from_u32(255 + n).expect("U+0100..")
        };
    }
    table
}

/// Pre-tokenizes like GPT-2's regex, closely enough for training: an optional space followed by
/// a run of letters, of digits, or of other non-space characters; or a run of whitespace.
fn pre_tokens(text: &str) -> Vec<&str> {
    const SPACE: u8 = 3;
    let class = |c: char| {
        if c.is_alphabetic() {
            0
        } else if c.is_numeric() {
            1
        } else if c.is_whitespace() {
            SPACE
        } else {
            2
        }
    };
    let idx: Vec<(usize, char)> = text.char_indices().collect();
    let at = |k: usize| idx.get(k).map_or(text.len(), |x| x.0);
    let mut out = Vec::new();
    let mut k = 0;
    while k < idx.len() {
        if class(idx[k].1) == SPACE {
            let mut j = k;
            while j < idx.len() && class(idx[j].1) == SPACE {
                j += 1;
            }
            // The last space before a word belongs to the word (GPT-2's `\s+(?!\S)`).
            if j < idx.len() && idx[j - 1].1 == ' ' {
                if j - 1 > k {
                    out.push(&text[at(k)..at(j - 1)]);
                }
                k = j - 1;
            } else {
                out.push(&text[at(k)..at(j)]);
                k = j;
                continue;
            }
        }
        let start = k;
        if idx[k].1 == ' ' {
            k += 1;
        }
        let cl = class(idx[k].1);
        while k < idx.len() && class(idx[k].1) == cl {
            k += 1;
        }
        out.push(&text[at(start)..at(k)]);
    }
    out
}

/// BPE training over `CORPUS`: returns at most `max` merges, stopping when no pair occurs twice.
/// Ties break by the pair's strings, so the result is deterministic.
fn train(symbols: &[char; 256], max: usize) -> Vec<(String, String)> {
    let mut words: HashMap<Vec<String>, u64> = HashMap::new();
    for w in pre_tokens(CORPUS) {
        let syms = w.bytes().map(|b| symbols[b as usize].to_string()).collect();
        *words.entry(syms).or_default() += 1;
    }
    let mut words: Vec<(Vec<String>, u64)> = words.into_iter().collect();
    words.sort();
    let mut merges = Vec::new();
    while merges.len() < max {
        let mut counts: HashMap<(&str, &str), u64> = HashMap::new();
        for (w, n) in &words {
            for p in w.windows(2) {
                *counts.entry((&p[0], &p[1])).or_default() += n;
            }
        }
        let Some((&(a, b), &n)) = counts
            .iter()
            .max_by(|x, y| x.1.cmp(y.1).then_with(|| y.0.cmp(x.0)))
        else {
            break;
        };
        if n < 2 {
            break;
        }
        let (a, b) = (a.to_string(), b.to_string());
        let joined = format!("{a}{b}");
        for (w, _) in &mut words {
            let mut i = 0;
            while i + 1 < w.len() {
                if w[i] == a && w[i + 1] == b {
                    w[i] = joined.clone();
                    w.remove(i + 1);
                }
                i += 1;
            }
        }
        merges.push((a, b));
    }
    merges
}

impl Vocab {
    /// The tokenizer with exactly `size` ids, splitting text with `pre`. Errors: fewer than 256
    /// bytes + 3 specials + 1.
    pub fn build(size: usize, pre: PreTokenizer) -> Result<Vocab> {
        let min = 256 + SPECIALS.len() + 1;
        if size < min {
            bail!(
                "vocabulary size {size} is too small for a byte-level tokenizer (at least {min})"
            );
        }
        let symbols = byte_symbols();
        let mut tokens: Vec<String> = symbols.iter().map(|c| c.to_string()).collect();
        let n_merges = size - 256 - SPECIALS.len();
        let mut merges = Vec::with_capacity(n_merges);
        let mut known: HashSet<String> = tokens.iter().cloned().collect();
        for (a, b) in train(&symbols, n_merges) {
            let joined = format!("{a}{b}");
            if known.insert(joined.clone()) {
                tokens.push(joined);
                merges.push((a, b));
            }
        }
        // Filler: a word-start token (`Ġ`, letters, or `Ġ` + letters) of at most
        // MAX_FILLER_LEN - 3 symbols joined with a letters token of at most 3, so every candidate
        // fits; both pools grow with what is added.
        let is_letters = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase());
        let symbols_in = |s: &str| s.chars().count();
        let mut left: Vec<u32> = Vec::new();
        let mut right: Vec<u32> = Vec::new();
        let add_to_pools = |id: u32, t: &str, left: &mut Vec<u32>, right: &mut Vec<u32>| {
            let word = t == "Ġ" || is_letters(t) || t.strip_prefix('Ġ').is_some_and(is_letters);
            if word && symbols_in(t) <= MAX_FILLER_LEN - 3 {
                left.push(id);
            }
            if is_letters(t) && t.len() <= 3 {
                right.push(id);
            }
        };
        for (id, t) in tokens.iter().enumerate() {
            add_to_pools(id as u32, t, &mut left, &mut right);
        }
        let key = super::weights::tensor_key(0, "synth tokenizer filler");
        let mut ctr = 0u64;
        let mut misses = 0u32;
        while merges.len() < n_merges {
            let r = super::weights::draw(key, ctr);
            ctr += 1;
            let a = left[(r as u32 as usize) % left.len()] as usize;
            let b = right[((r >> 32) as usize) % right.len()] as usize;
            let joined = format!("{}{}", tokens[a], tokens[b]);
            if !known.insert(joined.clone()) {
                misses += 1;
                if misses > 1_000_000 {
                    bail!("could not fill a vocabulary of {size} tokens");
                }
                continue;
            }
            misses = 0;
            let id = tokens.len() as u32;
            add_to_pools(id, &joined, &mut left, &mut right);
            merges.push((tokens[a].clone(), tokens[b].clone()));
            tokens.push(joined);
        }
        let first_special = tokens.len() as u32;
        tokens.extend(SPECIALS.iter().map(|s| s.to_string()));
        debug_assert_eq!(tokens.len(), size);
        Ok(Vocab {
            tokens,
            merges,
            bos: first_special,
            pad: first_special,
            eos: first_special + 2,
            pre,
        })
    }

    fn special_ids(&self) -> std::ops::Range<usize> {
        self.tokens.len() - SPECIALS.len()..self.tokens.len()
    }

    /// HF `tokenizer.json`: byte-level BPE with the family's pre-tokenizer and the byte-level
    /// decoder, special tokens as added tokens.
    pub fn tokenizer_json(&self) -> Value {
        let vocab: serde_json::Map<String, Value> = self
            .tokens
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.special_ids().contains(i))
            .map(|(i, t)| (t.clone(), json!(i)))
            .collect();
        let added: Vec<Value> = self
            .special_ids()
            .map(|i| {
                json!({"id": i, "content": self.tokens[i], "single_word": false, "lstrip": false,
                       "rstrip": false, "normalized": false, "special": true})
            })
            .collect();
        let merges: Vec<Value> = self.merges.iter().map(|(a, b)| json!([a, b])).collect();
        let byte_level = |prefix: bool, trim: bool| {
            json!({"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": trim,
                   "use_regex": true})
        };
        let (normalizer, pre_tokenizer) = self.pre.hf_json();
        json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": byte_level(false, false),
            "decoder": byte_level(true, true),
            "model": {
                "type": "BPE",
                "dropout": null,
                "unk_token": null,
                "continuing_subword_prefix": null,
                "end_of_word_suffix": null,
                "fuse_unk": false,
                "byte_fallback": false,
                "ignore_merges": false,
                "vocab": vocab,
                "merges": merges,
            },
        })
    }

    /// HF `tokenizer_config.json` (no BOS prepended; ChatML template).
    pub fn tokenizer_config_json(&self, max_len: usize) -> Value {
        let t = |i: u32| self.tokens[i as usize].clone();
        json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": t(self.bos),
            "eos_token": t(self.eos),
            "pad_token": t(self.pad),
            "unk_token": null,
            "add_bos_token": false,
            "add_eos_token": false,
            "clean_up_tokenization_spaces": false,
            "model_max_length": max_len,
            "chat_template": CHAT_TEMPLATE,
        })
    }

    /// HF `generation_config.json`: generation ends at `<|im_end|>` or `<|endoftext|>`.
    pub fn generation_config_json(&self) -> Value {
        json!({
            "bos_token_id": self.bos,
            "eos_token_id": [self.eos, self.pad],
            "pad_token_id": self.pad,
        })
    }

    /// The `tokenizer.*` GGUF metadata (llama.cpp's `gpt2` model: tokens, types, merges).
    pub fn gguf_metadata(&self, b: &mut GgufBuilder) -> Result<()> {
        let s = |x: &str| MetaValue::String(x.to_string());
        b.metadata("tokenizer.ggml.model", s("gpt2"))?;
        b.metadata("tokenizer.ggml.pre", s(self.pre.gguf_name()))?;
        b.metadata(
            "tokenizer.ggml.tokens",
            MetaValue::Array(self.tokens.iter().map(|t| s(t)).collect()),
        )?;
        let types = (0..self.tokens.len())
            .map(|i| {
                MetaValue::I32(if self.special_ids().contains(&i) {
                    3
                } else {
                    1
                })
            })
            .collect();
        b.metadata("tokenizer.ggml.token_type", MetaValue::Array(types))?;
        b.metadata(
            "tokenizer.ggml.merges",
            MetaValue::Array(
                self.merges
                    .iter()
                    .map(|(a, c)| MetaValue::String(format!("{a} {c}")))
                    .collect(),
            ),
        )?;
        b.metadata("tokenizer.ggml.bos_token_id", MetaValue::U32(self.bos))?;
        b.metadata("tokenizer.ggml.eos_token_id", MetaValue::U32(self.eos))?;
        b.metadata("tokenizer.ggml.padding_token_id", MetaValue::U32(self.pad))?;
        b.metadata("tokenizer.ggml.add_bos_token", MetaValue::Bool(false))?;
        b.metadata("tokenizer.ggml.add_eos_token", MetaValue::Bool(false))?;
        b.metadata("tokenizer.chat_template", s(CHAT_TEMPLATE))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_is_exact_valid_and_deterministic() {
        for size in [260, 2048, 50_000] {
            let v = Vocab::build(size, PreTokenizer::Gpt2).unwrap();
            assert_eq!(v.tokens.len(), size);
            assert_eq!(v.merges.len(), size - 256 - SPECIALS.len());
            let ids: HashMap<&str, usize> = v
                .tokens
                .iter()
                .enumerate()
                .map(|(i, t)| (t.as_str(), i))
                .collect();
            assert_eq!(ids.len(), size, "tokens are unique");
            for (k, (a, b)) in v.merges.iter().enumerate() {
                // Each merge's parts exist before the token it makes.
                let made = ids[format!("{a}{b}").as_str()];
                assert_eq!(made, 256 + k);
                assert!(ids[a.as_str()] < made && ids[b.as_str()] < made);
                assert!(!a.contains(' ') && !b.contains(' '));
            }
            assert_eq!(v.tokens[v.eos as usize], "<|im_end|>");
            let again = Vocab::build(size, PreTokenizer::Qwen2).unwrap();
            assert_eq!(v.tokens, again.tokens);
            assert_eq!(v.merges, again.merges);
        }
        assert!(Vocab::build(100, PreTokenizer::Gpt2).is_err());
    }

    #[test]
    fn corpus_training_learns_english_pieces() {
        let merges = train(&byte_symbols(), 100);
        assert_eq!(merges.len(), 100);
        let joined: Vec<String> = merges.iter().map(|(a, b)| format!("{a}{b}")).collect();
        assert!(joined.iter().any(|t| t == "Ġthe"), "{joined:?}");
    }

    #[test]
    fn pre_tokens_split_like_gpt2() {
        assert_eq!(
            pre_tokens("Hello, world  42x\n\nok"),
            ["Hello", ",", " world", " ", " 42", "x", "\n\n", "ok"]
        );
    }
}
