//! The JSON of the OpenAI response chunks (the envelope, a choice's text or delta, logprobs), as
//! `serde_json::Value`s: the server's responses (respond.rs) and the SSE criterion bench
//! (harness/benches/sse.rs, which includes this file) build them with the same code. Only std and
//! serde_json here, so the bench can compile it alone.

use serde_json::{json, Value};
use std::hash::{BuildHasher, Hasher};

/// One generated token as the logprobs of a response show it.
#[derive(Debug, Clone)]
pub struct TokenInfo {
    /// The token's own bytes (engine `Tokenizer::token_bytes`; they may end inside a UTF-8
    /// character).
    pub bytes: Vec<u8>,
    pub logprob: f64,
    /// Alternatives, most likely first: (bytes, logprob).
    pub top: Vec<(Vec<u8>, f64)>,
    /// Character offset of the token's text in the choice's text.
    pub text_offset: usize,
}

/// Which endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chat,
    Completion,
}

/// What every response of one request carries.
#[derive(Debug, Clone)]
pub struct Meta {
    pub kind: Kind,
    /// `chatcmpl-…` or `cmpl-…`.
    pub id: String,
    pub created: u64,
    pub model: String,
    pub logprobs: bool,
    pub include_usage: bool,
    /// Choices per prompt.
    pub n: usize,
    /// Completions with `echo`: each prompt's text, put before its choices' text.
    pub echo: Vec<String>,
}

impl Meta {
    /// A response id and timestamp for a request to `model`.
    pub fn new(kind: Kind, model: &str) -> Meta {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u8(0);
        let prefix = match kind {
            Kind::Chat => "chatcmpl",
            Kind::Completion => "cmpl",
        };
        Meta {
            kind,
            id: format!("{prefix}-{:016x}", h.finish()),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            model: model.to_string(),
            logprobs: false,
            include_usage: false,
            n: 1,
            echo: Vec::new(),
        }
    }

    pub fn echo_of(&self, index: usize) -> &str {
        self.echo
            .get(index / self.n.max(1))
            .map_or("", String::as_str)
    }

    pub fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Completion, _) => "text_completion",
        }
    }

    pub fn envelope(&self, chunk: bool, choices: Value) -> Value {
        let mut v = json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        });
        if chunk && self.include_usage {
            v["usage"] = Value::Null;
        }
        v
    }

    /// Logprobs of `items` in the endpoint's shape (chat: `{content: [...]}`; completions:
    /// `{tokens, token_logprobs, top_logprobs, text_offset}`, offsets counted after the echo).
    pub fn logprobs_json(&self, index: usize, items: &[TokenInfo]) -> Value {
        match self.kind {
            Kind::Chat => {
                // The token's text (U+FFFD where it ends inside a character) and its exact bytes.
                let entry = |b: &[u8], lp: f64| json!({"token": String::from_utf8_lossy(b), "logprob": lp, "bytes": b});
                let content: Vec<Value> = items
                    .iter()
                    .map(|i| {
                        let mut e = entry(&i.bytes, i.logprob);
                        e["top_logprobs"] =
                            Value::Array(i.top.iter().map(|(t, lp)| entry(t, *lp)).collect());
                        e
                    })
                    .collect();
                json!({"content": content})
            }
            Kind::Completion => {
                let base = self.echo_of(index).chars().count();
                json!({
                    "tokens": items.iter().map(|i| completion_token(&i.bytes)).collect::<Vec<_>>(),
                    "token_logprobs": items.iter().map(|i| i.logprob).collect::<Vec<_>>(),
                    "top_logprobs": items.iter().map(|i| ranked_map(&i.top)).collect::<Vec<_>>(),
                    "text_offset": items.iter().map(|i| base + i.text_offset).collect::<Vec<_>>(),
                })
            }
        }
    }

    pub fn text_choice(&self, index: usize, text: &str, lp: Value, finish: Option<&str>) -> Value {
        match self.kind {
            Kind::Chat => {
                let delta = if finish.is_some() && text.is_empty() {
                    json!({})
                } else {
                    json!({"content": text})
                };
                json!({"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish})
            }
            Kind::Completion => {
                json!({"index": index, "text": text, "logprobs": lp, "finish_reason": finish})
            }
        }
    }
}

/// A completions `top_logprobs` entry: token text to logprob, most likely first, as OpenAI and
/// vLLM list them (serde_json's `preserve_order` keeps the insertion order). Two tokens with the
/// same text keep the more likely one's logprob.
fn ranked_map(top: &[(Vec<u8>, f64)]) -> Value {
    let mut m = serde_json::Map::new();
    for (t, lp) in top {
        m.entry(completion_token(t)).or_insert_with(|| json!(lp));
    }
    Value::Object(m)
}

/// A token as the legacy completions logprobs write it: its text, or, when its bytes are not
/// whole UTF-8 characters, `bytes:` and each byte as `\xNN` (OpenAI's spelling).
pub fn completion_token(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(t) => t.to_string(),
        Err(_) => bytes.iter().fold(String::from("bytes:"), |mut s, b| {
            s.push_str(&format!("\\x{b:02x}"));
            s
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn completions_top_logprobs_keep_rank_order() {
        let top = vec![
            (b" Paris".to_vec(), -0.25),
            (b" London".to_vec(), -4.5),
            (b" Le".to_vec(), -4.75),
            (b" Paris".to_vec(), -6.0),
        ];
        let s = serde_json::to_string(&super::ranked_map(&top)).unwrap();
        assert_eq!(s, r#"{" Paris":-0.25," London":-4.5," Le":-4.75}"#);
    }

    #[test]
    fn tokens_that_end_inside_a_character_keep_their_bytes() {
        // "’" is E2 80 99; a token holding its first two bytes.
        let part = vec![0xe2, 0x80];
        use super::{json, Kind, Meta, TokenInfo};
        let items = [TokenInfo {
            bytes: part.clone(),
            logprob: -0.5,
            top: vec![(part.clone(), -0.5), (b" a".to_vec(), -1.0)],
            text_offset: 0,
        }];
        let mut meta = Meta::new(Kind::Completion, "m");
        let v = meta.logprobs_json(0, &items);
        assert_eq!(v["tokens"], json!(["bytes:\\xe2\\x80"]));
        assert_eq!(
            v["top_logprobs"][0],
            json!({"bytes:\\xe2\\x80": -0.5, " a": -1.0})
        );
        meta.kind = Kind::Chat;
        let v = meta.logprobs_json(0, &items);
        assert_eq!(v["content"][0]["bytes"], json!([0xe2, 0x80]));
        assert_eq!(v["content"][0]["token"], json!("\u{fffd}"));
        assert_eq!(v["content"][0]["top_logprobs"][1]["bytes"], json!([32, 97]));
        assert_eq!(super::completion_token("é".as_bytes()), "é");
    }
}
