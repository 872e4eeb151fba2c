//! Builds a `tokenizers::Tokenizer` from GGUF tokenizer metadata, matching what HF `tokenizers`
//! does with the model's own `tokenizer.json`:
//!
//! - `gpt2`: byte-level BPE from `tokenizer.ggml.tokens` + `tokenizer.ggml.merges`, with the
//!   pre-tokenizer named by `tokenizer.ggml.pre` (each has its own split regex, as in llama.cpp's
//!   `llama-vocab.cpp` and the models' HF `tokenizer.json`).
//! - `llama`: SentencePiece BPE from tokens + scores. Merges are derived from the scores the way
//!   HF transformers' `SentencePieceExtractor` does (every split of a piece into two pieces of the
//!   vocabulary, ranked by the merged piece's score), with byte fallback and `▁` for spaces.
//!
//! Control (type 3) and user-defined (type 4) tokens become added tokens matched in the raw text.

use crate::error::{Error, Result};
use crate::formats::gguf::{GgufFile, MetaValue};
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::Vocab;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::{Prepend, Replace, NFC};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior,
};

/// Token types as GGUF (and SentencePiece) number them.
pub const TOKEN_CONTROL: i64 = 3;
pub const TOKEN_USER_DEFINED: i64 = 4;

const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn strings(g: &GgufFile, key: &str) -> Result<Vec<String>> {
    let arr = g
        .get(key)
        .and_then(MetaValue::as_array)
        .ok_or_else(|| Error::format(&g.path, format!("missing tokenizer metadata {key}")))?;
    arr.iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| Error::format(&g.path, format!("{key}: non-string element")))
        })
        .collect()
}

fn numbers(g: &GgufFile, key: &str, n: usize) -> Result<Option<Vec<f64>>> {
    let Some(v) = g.get(key) else { return Ok(None) };
    let arr = v
        .as_array()
        .ok_or_else(|| Error::format(&g.path, format!("{key} is not an array")))?;
    if arr.len() != n {
        return Err(Error::format(
            &g.path,
            format!(
                "{key} has {} entries, tokenizer.ggml.tokens has {n}",
                arr.len()
            ),
        ));
    }
    arr.iter()
        .map(|x| {
            x.as_f64()
                .ok_or_else(|| Error::format(&g.path, format!("{key}: non-numeric element")))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

fn tk_err(g: &GgufFile, e: impl std::fmt::Display) -> Error {
    Error::format(&g.path, format!("building tokenizer: {e}"))
}

/// Builds the tokenizer described by `g`'s metadata.
pub fn tokenizer_from_gguf(g: &GgufFile) -> Result<tokenizers::Tokenizer> {
    tokenizer_from_gguf_with_pre(g, None)
}

/// [`tokenizer_from_gguf`], optionally ignoring `tokenizer.ggml.pre` in favour of `pre` (gates use
/// `Some("default")` as a canary: the classic bug of splitting every BPE vocabulary with GPT-2's
/// regex; for SentencePiece vocabularies any override flips `add_space_prefix`, the classic
/// dummy-prefix bug).
pub fn tokenizer_from_gguf_with_pre(
    g: &GgufFile,
    pre: Option<&str>,
) -> Result<tokenizers::Tokenizer> {
    let model = g
        .get("tokenizer.ggml.model")
        .and_then(MetaValue::as_str)
        .ok_or_else(|| Error::format(&g.path, "missing tokenizer metadata tokenizer.ggml.model"))?;
    let tokens = strings(g, "tokenizer.ggml.tokens")?;
    let types = numbers(g, "tokenizer.ggml.token_type", tokens.len())?
        .unwrap_or_else(|| vec![1.0; tokens.len()]);
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let mut tk = match model {
        "gpt2" => gpt2(g, vocab, pre)?,
        "llama" => sentencepiece(g, &tokens, vocab, pre.is_some())?,
        other => {
            return Err(Error::format(
                &g.path,
                format!("tokenizer.ggml.model {other:?} is not supported (gpt2, llama)"),
            ))
        }
    };
    let added: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, &t)| t as i64 == TOKEN_CONTROL || t as i64 == TOKEN_USER_DEFINED)
        .map(|(s, &t)| AddedToken::from(s.clone(), t as i64 == TOKEN_CONTROL).normalized(false))
        .collect();
    tk.add_special_tokens(&added);
    Ok(tk)
}

fn gpt2(g: &GgufFile, vocab: Vocab, pre_override: Option<&str>) -> Result<tokenizers::Tokenizer> {
    let merges = strings(g, "tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| Error::format(&g.path, format!("merge {m:?} has no space")))
        })
        .collect::<Result<Vec<_>>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| tk_err(g, e))?;
    let mut tk = tokenizers::Tokenizer::new(bpe);
    let pre = pre_override.unwrap_or_else(|| {
        g.get("tokenizer.ggml.pre")
            .and_then(MetaValue::as_str)
            .unwrap_or("default")
    });
    let split = |re: &str| -> Result<PreTokenizerWrapper> {
        let s = Split::new(
            SplitPattern::Regex(re.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| tk_err(g, e))?;
        Ok(PreTokenizerWrapper::Sequence(PreSequence::new(vec![
            s.into(),
            ByteLevel::new(false, true, false).into(),
        ])))
    };
    let pre_tokenizer: PreTokenizerWrapper = match pre {
        "default" | "gpt2" | "gpt-2" => ByteLevel::new(false, true, true).into(),
        "smollm" | "starcoder" | "refact" => PreSequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])
        .into(),
        "qwen2" => {
            tk.with_normalizer(Some(NFC));
            split(QWEN2_REGEX)?
        }
        "llama3" | "llama-v3" | "llama-bpe" | "smaug-bpe" => split(LLAMA3_REGEX)?,
        other => {
            return Err(Error::format(
                &g.path,
                format!(
                    "tokenizer.ggml.pre {other:?} is not supported (default, gpt2, smollm, starcoder, qwen2, llama3)"
                ),
            ))
        }
    };
    tk.with_pre_tokenizer(Some(pre_tokenizer));
    tk.with_decoder(Some(ByteLevelDecoder::default()));
    Ok(tk)
}

fn sentencepiece(
    g: &GgufFile,
    tokens: &[String],
    vocab: Vocab,
    flip_prefix: bool,
) -> Result<tokenizers::Tokenizer> {
    let scores = numbers(g, "tokenizer.ggml.scores", tokens.len())?.ok_or_else(|| {
        Error::format(&g.path, "missing tokenizer metadata tokenizer.ggml.scores")
    })?;
    // Every split of a piece into two vocabulary pieces is a merge, ranked by the merged piece's
    // score (higher first), then by piece id, then by the parts' ids.
    let mut ranked: Vec<(f64, u32, u32, u32)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        for (cut, _) in piece.char_indices().skip(1) {
            let (l, r) = piece.split_at(cut);
            if let (Some(&li), Some(&ri)) = (vocab.get(l), vocab.get(r)) {
                ranked.push((scores[id], id as u32, li, ri));
            }
        }
    }
    ranked.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    let merges = ranked
        .iter()
        .map(|&(_, _, l, r)| (tokens[l as usize].clone(), tokens[r as usize].clone()))
        .collect();
    let unk = g
        .get("tokenizer.ggml.unknown_token_id")
        .and_then(MetaValue::as_u64)
        .and_then(|i| tokens.get(i as usize))
        .cloned();
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(true)
        .fuse_unk(true);
    if let Some(u) = unk {
        builder = builder.unk_token(u);
    }
    let bpe = builder.build().map_err(|e| tk_err(g, e))?;
    let mut tk = tokenizers::Tokenizer::new(bpe);
    let prefix = g
        .get("tokenizer.ggml.add_space_prefix")
        .and_then(MetaValue::as_bool)
        .unwrap_or(true)
        ^ flip_prefix;
    let replace = Replace::new(" ", "▁").map_err(|e| tk_err(g, e))?;
    let normalizer: NormalizerWrapper = if prefix {
        tokenizers::normalizers::Sequence::new(vec![
            Prepend::new("▁".into()).into(),
            replace.into(),
        ])
        .into()
    } else {
        replace.into()
    };
    tk.with_normalizer(Some(normalizer));
    let mut decoders: Vec<DecoderWrapper> = vec![
        Replace::new("▁", " ").map_err(|e| tk_err(g, e))?.into(),
        ByteFallback::default().into(),
        Fuse::default().into(),
    ];
    if prefix {
        decoders.push(Strip::new(' ', 1, 0).into());
    }
    tk.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(tk)
}
