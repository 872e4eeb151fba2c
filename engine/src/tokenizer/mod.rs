//! Tokenizers (the `tokenizers` crate, from `tokenizer.json` or built from GGUF metadata) and chat
//! templates.

pub mod chat_template;
pub mod gguf_vocab;

use crate::error::{Error, Result};
use crate::formats::gguf::{GgufFile, MetaValue};
pub use chat_template::ChatTemplate;
use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;
use tokenizers::{DecoderWrapper, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

/// Token texts that end a turn in the chat formats we know, besides the declared EOS.
const END_OF_TURN: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|eom_id|>",
];

/// A model's tokenizer, special tokens and chat template.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Beginning-of-sequence id, and whether encoding prompts prepends it.
    pub bos: Option<u32>,
    pub add_bos: bool,
    /// Ids that end generation (declared EOS plus end-of-turn tokens present in the vocabulary).
    pub eos: Vec<u32>,
    template: Option<ChatTemplate>,
    /// Whether the decoder maps vocabulary characters back to bytes (GPT-2's byte-level BPE).
    byte_level: bool,
}

impl Tokenizer {
    /// From GGUF metadata. Errors name the file and the missing or malformed key.
    pub fn from_gguf(g: &GgufFile) -> Result<Tokenizer> {
        Self::from_gguf_with_pre(g, None)
    }

    /// [`Tokenizer::from_gguf`] with the pre-tokenizer forced to `pre` (a gate canary).
    pub fn from_gguf_with_pre(g: &GgufFile, pre: Option<&str>) -> Result<Tokenizer> {
        let inner = gguf_vocab::tokenizer_from_gguf_with_pre(g, pre)?;
        let id = |k: &str| g.get(k).and_then(MetaValue::as_u64).map(|v| v as u32);
        let bos = id("tokenizer.ggml.bos_token_id");
        let add_bos = g
            .get("tokenizer.ggml.add_bos_token")
            .and_then(MetaValue::as_bool)
            .unwrap_or(false);
        let template = match g.get("tokenizer.chat_template").and_then(MetaValue::as_str) {
            Some(t) => {
                Some(ChatTemplate::new(t).map_err(|e| Error::format(&g.path, e.to_string()))?)
            }
            None => None,
        };
        Ok(Self::finish(
            inner,
            bos,
            add_bos,
            id("tokenizer.ggml.eos_token_id"),
            template,
        ))
    }

    /// From an HF directory: `tokenizer.json`, with BOS/EOS and the template from
    /// `tokenizer_config.json` and extra EOS ids from `generation_config.json` when present.
    pub fn from_hf_dir(dir: &Path) -> Result<Tokenizer> {
        let tj = dir.join("tokenizer.json");
        if !tj.exists() {
            return Err(Error::format(dir, "missing tokenizer.json"));
        }
        let inner = tokenizers::Tokenizer::from_file(&tj)
            .map_err(|e| Error::format(&tj, format!("invalid tokenizer.json: {e}")))?;
        let read_json = |name: &str| -> Result<Option<serde_json::Value>> {
            let p = dir.join(name);
            if !p.exists() {
                return Ok(None);
            }
            let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
            serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| Error::format(&p, format!("invalid JSON: {e}")))
        };
        let cfg = read_json("tokenizer_config.json")?.unwrap_or_default();
        let token_text = |k: &str| -> Option<String> {
            match cfg.get(k)? {
                serde_json::Value::String(s) => Some(s.clone()),
                v => v.get("content")?.as_str().map(str::to_string),
            }
        };
        let bos = token_text("bos_token").and_then(|t| inner.token_to_id(&t));
        let eos = token_text("eos_token").and_then(|t| inner.token_to_id(&t));
        let add_bos = cfg
            .get("add_bos_token")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let template_src = match cfg.get("chat_template") {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Array(list)) => list
                .iter()
                .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
                .and_then(|t| t.get("template")?.as_str().map(str::to_string)),
            _ => None,
        };
        let template = match template_src {
            Some(t) => Some(
                ChatTemplate::new(&t)
                    .map_err(|e| Error::format(dir.join("tokenizer_config.json"), e.to_string()))?,
            ),
            None => None,
        };
        let mut tk = Self::finish(inner, bos, add_bos, eos, template);
        if let Some(gc) = read_json("generation_config.json")? {
            let ids: Vec<u64> = match gc.get("eos_token_id") {
                Some(serde_json::Value::Number(n)) => n.as_u64().into_iter().collect(),
                Some(serde_json::Value::Array(a)) => a.iter().filter_map(|v| v.as_u64()).collect(),
                _ => vec![],
            };
            for i in ids {
                if !tk.eos.contains(&(i as u32)) {
                    tk.eos.push(i as u32);
                }
            }
        }
        Ok(tk)
    }

    fn finish(
        inner: tokenizers::Tokenizer,
        bos: Option<u32>,
        add_bos: bool,
        eos: Option<u32>,
        template: Option<ChatTemplate>,
    ) -> Tokenizer {
        let mut eos: Vec<u32> = eos.into_iter().collect();
        for t in END_OF_TURN {
            if let Some(i) = inner.token_to_id(t) {
                if !eos.contains(&i) {
                    eos.push(i);
                }
            }
        }
        let byte_level = match inner.get_decoder() {
            Some(DecoderWrapper::ByteLevel(_)) => true,
            Some(DecoderWrapper::Sequence(s)) => s
                .get_decoders()
                .iter()
                .any(|d| matches!(d, DecoderWrapper::ByteLevel(_))),
            _ => false,
        };
        Tokenizer {
            inner,
            bos,
            add_bos,
            eos,
            template,
            byte_level,
        }
    }

    /// Token ids of `text`. Special tokens written in the text map to their ids. With
    /// `add_special`, BOS is prepended when the model asks for it.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if add_special && self.add_bos {
            ids.extend(self.bos);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Text of `ids`; special tokens are dropped when `skip_special`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Text of one token as stored in the vocabulary.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The bytes one token stands for, also when they end inside a UTF-8 character (where
    /// [`Tokenizer::decode`] of the token alone shows U+FFFD). Byte-fallback pieces (`<0xNN>`)
    /// give their byte; byte-level BPE vocabularies (GPT-2's byte-to-unicode alphabet) map each
    /// character of the stored token back to its byte; any other token gives the UTF-8 of its
    /// decoded text. Concatenated over the ids of an encoded text, these are the text's bytes
    /// (what the OpenAI API's logprobs `bytes` field carries). None for an id outside the
    /// vocabulary.
    pub fn token_bytes(&self, id: u32) -> Option<Vec<u8>> {
        let raw = self.inner.id_to_token(id)?;
        if let Some(b) = byte_fallback_piece(&raw) {
            return Some(vec![b]);
        }
        if self.byte_level && !self.is_added(id) {
            let table = byte_level_table();
            if let Some(bytes) = raw.chars().map(|c| table.get(&c).copied()).collect() {
                return Some(bytes);
            }
        }
        self.inner.decode(&[id], false).ok().map(String::into_bytes)
    }

    fn is_added(&self, id: u32) -> bool {
        self.inner
            .get_added_vocabulary()
            .get_added_tokens_decoder()
            .contains_key(&id)
    }

    /// Whether the model ships a chat template.
    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    /// Renders a conversation with the model's own template. Errors: the model has no template
    /// (use plain completion), or the template raised an error.
    pub fn apply_chat_template(
        &self,
        messages: &serde_json::Value,
        tools: Option<&serde_json::Value>,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let t = self.template.as_ref().ok_or_else(|| {
            Error::Template(
                "this model has no chat template (it is a base model); use plain completion instead"
                    .into(),
            )
        })?;
        let text = |id: Option<u32>| {
            id.and_then(|i| self.inner.id_to_token(i))
                .unwrap_or_default()
        };
        t.render(
            messages,
            tools,
            add_generation_prompt,
            &text(self.bos),
            &text(self.eos.first().copied()),
        )
    }
}

/// The byte of a byte-fallback piece, `<0xNN>` (SentencePiece's spelling).
fn byte_fallback_piece(raw: &str) -> Option<u8> {
    let hex = raw.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

/// Character → byte of the byte-level alphabet, read off the `tokenizers` ByteLevel
/// pre-tokenizer itself: text holding every byte value that UTF-8 can contain (all of U+0000..
/// U+07FF, then one character in each 256 code points above, which covers every lead byte of
/// three- and four-byte characters) is pre-tokenized, and its bytes are paired with the
/// characters that come out, one per byte. Bytes that never occur in UTF-8 (C0, C1, F5..FF) have
/// no entry.
fn byte_level_table() -> &'static HashMap<char, u8> {
    static TABLE: OnceLock<HashMap<char, u8>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let text: String = (0..0x800u32)
            .chain((0x800..0x11_0000).step_by(0x100))
            .filter_map(char::from_u32)
            .collect();
        let mut pts = PreTokenizedString::from(text.as_str());
        let bl = tokenizers::pre_tokenizers::byte_level::ByteLevel::new(false, false, false);
        if bl.pre_tokenize(&mut pts).is_err() {
            return HashMap::new();
        }
        let mapped: String = pts
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(s, _, _)| s)
            .collect();
        if mapped.chars().count() != text.len() {
            return HashMap::new();
        }
        mapped.chars().zip(text.bytes()).collect()
    })
}
