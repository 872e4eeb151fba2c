//! Tokenizers (the `tokenizers` crate, from `tokenizer.json` or built from GGUF metadata) and chat
//! templates.

pub mod chat_template;
pub mod gguf_vocab;

use crate::error::{Error, Result};
use crate::formats::gguf::{GgufFile, MetaValue};
pub use chat_template::ChatTemplate;
use std::path::Path;

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
        Tokenizer {
            inner,
            bos,
            add_bos,
            eos,
            template,
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
