//! Request bodies and their validation into engine terms.
//!
//! Every body is typed with `deny_unknown_fields`, so a parameter we do not know is a 400 naming
//! it; parameters OpenAI defines that we do not implement yet are declared and rejected by name
//! ([`reject_unsupported`]). Ranges follow the OpenAI API (vLLM's for its extensions).

use super::errors::ApiError;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

pub use super::validate::{max_tokens, Options};

/// Most choices per prompt.
pub const MAX_N: i64 = 16;
/// Most alternatives per position in logprobs.
pub const MAX_TOP_LOGPROBS: i64 = 20;
/// Most stop strings.
pub const MAX_STOP: usize = 4;
/// Most prompts in one completions request.
pub const MAX_PROMPTS: usize = 64;
/// Tokens a completions request generates when it does not say (as OpenAI's legacy endpoint).
pub const DEFAULT_COMPLETION_TOKENS: usize = 16;

/// Parameters both generation endpoints accept.
const SHARED_PARAMETERS: &[&str] = &[
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logit_bias",
    "seed",
    "stop",
    "n",
    "logprobs",
    "stream",
    "stream_options",
    "user",
    "ignore_eos",
    "speculative",
];
/// Parameters only `POST /v1/chat/completions` accepts.
const CHAT_ONLY: &[&str] = &["max_completion_tokens", "top_logprobs"];
/// Parameters only `POST /v1/completions` accepts (`best_of` only equal to `n`).
const COMPLETION_ONLY: &[&str] = &["echo", "best_of"];

/// Parameters `POST /v1/chat/completions` accepts (reported by `GET /v1/models`).
pub fn chat_parameters() -> Vec<&'static str> {
    [SHARED_PARAMETERS, CHAT_ONLY].concat()
}

/// Parameters `POST /v1/completions` accepts (reported by `GET /v1/models`).
pub fn completion_parameters() -> Vec<&'static str> {
    [SHARED_PARAMETERS, COMPLETION_ONLY].concat()
}

/// Every parameter either endpoint accepts (the model card's `supported_parameters`; per
/// endpoint in `supported_parameters_by_endpoint`).
pub fn supported_parameters() -> Vec<&'static str> {
    [SHARED_PARAMETERS, CHAT_ONLY, COMPLETION_ONLY].concat()
}

/// Parses a JSON body into `T`; malformed JSON and schema violations are 400s naming the
/// parameter.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ApiError::Invalid {
        message: format!("malformed JSON body: {e}"),
        param: None,
        code: Some("invalid_json"),
    })?;
    if !v.is_object() {
        return Err(ApiError::Invalid {
            message: "the body must be a JSON object".into(),
            param: None,
            code: Some("invalid_json"),
        });
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let mut path = e.path().to_string();
        let msg = e.inner().to_string();
        if msg.starts_with("unknown field") {
            return ApiError::unknown(&path);
        }
        // A missing field is reported at its parent; name the field itself.
        if let Some(field) = msg
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next())
        {
            path = if path == "." {
                field.to_string()
            } else {
                format!("{path}.{field}")
            };
            return ApiError::invalid(&path, format!("`{path}` is required"));
        }
        ApiError::invalid(&path, format!("`{path}`: {}", plain_serde_message(&msg)))
    })
}

/// serde's wording, in the API's terms (no Rust type names).
fn plain_serde_message(msg: &str) -> String {
    if msg.contains("untagged enum Stop") {
        return "must be a string or a list of strings".into();
    }
    msg.replace("expected i64", "expected an integer")
        .replace("expected u64", "expected a non-negative integer")
        .replace("expected u32", "expected a non-negative integer")
        .replace("expected f64", "expected a number")
        .replace("expected struct Message", "expected a message object")
        .replace("expected struct StreamOptions", "expected an object")
        .replace("floating point", "number")
}

/// Rejects every parameter in `params` that is present (not null): known to OpenAI, not
/// implemented here.
pub fn reject_unsupported(params: &[(&str, bool)]) -> Result<(), ApiError> {
    match params.iter().find(|(_, present)| *present) {
        Some((name, _)) => Err(ApiError::unsupported(name)),
        None => Ok(()),
    }
}

/// `stop`: one string or a list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    /// Send a last chunk with `"choices": []` and the usage.
    pub include_usage: Option<bool>,
}

/// One chat message. Content is a string or a list of `{type: "text", text}` parts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub role: String,
    pub content: Option<Value>,
    pub name: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_calls: Option<Value>,
    pub function_call: Option<Value>,
    pub refusal: Option<Value>,
    pub audio: Option<Value>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<Message>,
    pub max_tokens: Option<i64>,
    pub max_completion_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub logit_bias: Option<HashMap<String, f64>>,
    pub seed: Option<serde_json::Number>,
    pub stop: Option<Stop>,
    pub n: Option<i64>,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<i64>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub user: Option<String>,
    pub ignore_eos: Option<bool>,
    /// memra extension: `"off"` or `{"method", "k"}` (see [`Common::speculative`]).
    pub speculative: Option<Value>,
    // Known to OpenAI, not implemented yet: rejected by name.
    pub tools: Option<Value>,
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<Value>,
    pub functions: Option<Value>,
    pub function_call: Option<Value>,
    pub response_format: Option<Value>,
    pub audio: Option<Value>,
    pub modalities: Option<Value>,
    pub prediction: Option<Value>,
    pub reasoning_effort: Option<Value>,
    pub web_search_options: Option<Value>,
    pub service_tier: Option<Value>,
    pub store: Option<Value>,
    pub metadata: Option<Value>,
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: Value,
    pub max_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub logit_bias: Option<HashMap<String, f64>>,
    pub seed: Option<serde_json::Number>,
    pub stop: Option<Stop>,
    pub n: Option<i64>,
    pub logprobs: Option<i64>,
    pub echo: Option<bool>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub user: Option<String>,
    pub ignore_eos: Option<bool>,
    /// memra extension: `"off"` or `{"method", "k"}` (see [`Common::speculative`]).
    pub speculative: Option<Value>,
    /// Accepted only when it changes nothing (equal to `n`).
    pub best_of: Option<i64>,
    pub suffix: Option<Value>,
}

/// `POST /tokenize`: a `prompt` or chat `messages`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizeRequest {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub messages: Option<Vec<Message>>,
    /// With a prompt: add BOS when the model wants one (default true).
    pub add_special_tokens: Option<bool>,
    /// With messages: end with the assistant turn's opening (default true).
    pub add_generation_prompt: Option<bool>,
}

/// `POST /detokenize`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetokenizeRequest {
    pub model: Option<String>,
    pub tokens: Vec<i64>,
}

/// The sampling and stopping parameters chat and completions share.
#[derive(Debug, Clone, Default)]
pub struct Common {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub logit_bias: Option<HashMap<String, f64>>,
    pub seed: Option<serde_json::Number>,
    pub stop: Option<Stop>,
    pub n: Option<i64>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub user: Option<String>,
    pub ignore_eos: Option<bool>,
    /// memra extension: `"off"` or `{"method": "ngram" | "ngram:N" | "layerskip:L", "k": K}`.
    pub speculative: Option<Value>,
}

impl ChatRequest {
    /// The shared parameters.
    pub fn common(&self) -> Common {
        Common {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            min_p: self.min_p,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            repetition_penalty: self.repetition_penalty,
            logit_bias: self.logit_bias.clone(),
            seed: self.seed.clone(),
            stop: self.stop.clone(),
            n: self.n,
            stream: self.stream,
            stream_options: self.stream_options.clone(),
            user: self.user.clone(),
            ignore_eos: self.ignore_eos,
            speculative: self.speculative.clone(),
        }
    }

    /// Rejects the OpenAI parameters not implemented yet.
    pub fn reject_unsupported(&self) -> Result<(), ApiError> {
        reject_unsupported(&[
            ("tools", self.tools.is_some()),
            ("tool_choice", self.tool_choice.is_some()),
            ("parallel_tool_calls", self.parallel_tool_calls.is_some()),
            ("functions", self.functions.is_some()),
            ("function_call", self.function_call.is_some()),
            ("response_format", self.response_format.is_some()),
            ("audio", self.audio.is_some()),
            ("modalities", self.modalities.is_some()),
            ("prediction", self.prediction.is_some()),
            ("reasoning_effort", self.reasoning_effort.is_some()),
            ("web_search_options", self.web_search_options.is_some()),
            ("service_tier", self.service_tier.is_some()),
            ("store", self.store.is_some()),
            ("metadata", self.metadata.is_some()),
        ])
    }
}

impl CompletionRequest {
    /// The shared parameters.
    pub fn common(&self) -> Common {
        Common {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            min_p: self.min_p,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            repetition_penalty: self.repetition_penalty,
            logit_bias: self.logit_bias.clone(),
            seed: self.seed.clone(),
            stop: self.stop.clone(),
            n: self.n,
            stream: self.stream,
            stream_options: self.stream_options.clone(),
            user: self.user.clone(),
            ignore_eos: self.ignore_eos,
            speculative: self.speculative.clone(),
        }
    }
}

/// The conversation as the chat template wants it: `[{role, content: string}]`. Roles: system,
/// developer (as system), user, assistant, tool. The last message must have content.
pub fn chat_messages(msgs: &[Message]) -> Result<Value, ApiError> {
    if msgs.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` must not be empty",
        ));
    }
    let mut out = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        let p = |f: &str| format!("messages[{i}].{f}");
        for (name, present) in [
            ("tool_calls", m.tool_calls.is_some()),
            ("function_call", m.function_call.is_some()),
            ("refusal", m.refusal.is_some()),
            ("audio", m.audio.is_some()),
        ] {
            if present {
                return Err(ApiError::unsupported(&p(name)));
            }
        }
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            r @ ("user" | "assistant" | "tool") => r,
            r => {
                return Err(ApiError::invalid(
                    p("role"),
                    format!(
                        "unknown role {r:?} in messages[{i}] (system, developer, user, \
                         assistant or tool)"
                    ),
                ))
            }
        };
        let content = match &m.content {
            None => {
                return Err(ApiError::invalid(
                    p("content"),
                    format!("messages[{i}] has no content"),
                ))
            }
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => {
                let mut texts = Vec::with_capacity(parts.len());
                for (j, part) in parts.iter().enumerate() {
                    let kind = part.get("type").and_then(Value::as_str);
                    let text = part.get("text").and_then(Value::as_str);
                    match (kind, text) {
                        (Some("text"), Some(t))
                            if part.as_object().is_some_and(|o| o.len() == 2) =>
                        {
                            texts.push(t)
                        }
                        (Some(k), _) if k != "text" => {
                            return Err(ApiError::invalid(
                                format!("messages[{i}].content[{j}].type"),
                                format!(
                                    "content parts of type {k:?} are not supported (only \"text\")"
                                ),
                            ))
                        }
                        _ => {
                            return Err(ApiError::invalid(
                                format!("messages[{i}].content[{j}]"),
                                "a content part must be {\"type\": \"text\", \"text\": string}",
                            ))
                        }
                    }
                }
                // Parts are joined by newlines, as vLLM does.
                texts.join("\n")
            }
            Some(_) => {
                return Err(ApiError::invalid(
                    p("content"),
                    "content must be a string or a list of text parts",
                ))
            }
        };
        let mut msg = serde_json::json!({"role": role, "content": content});
        if let Some(n) = &m.name {
            msg["name"] = Value::String(n.clone());
        }
        if let Some(t) = &m.tool_call_id {
            msg["tool_call_id"] = Value::String(t.clone());
        }
        out.push(msg);
    }
    Ok(Value::Array(out))
}

/// One prompt of a completions request.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Text(String),
    Ids(Vec<u32>),
}

/// `prompt`: a string, a list of strings, a list of token ids, or a list of token-id lists.
pub fn prompts(v: &Value) -> Result<Vec<Prompt>, ApiError> {
    let bad = || {
        ApiError::invalid(
            "prompt",
            "`prompt` must be a string, a list of strings, a list of token ids or a list of \
             token-id lists",
        )
    };
    let ids = |v: &Value| -> Result<Vec<u32>, ApiError> {
        let a = v.as_array().ok_or_else(bad)?;
        a.iter()
            .map(|x| {
                x.as_u64()
                    .filter(|&i| i <= u32::MAX as u64)
                    .map(|i| i as u32)
                    .ok_or_else(|| {
                        ApiError::invalid("prompt", format!("invalid token id {x} in `prompt`"))
                    })
            })
            .collect()
    };
    let out = match v {
        Value::String(s) => vec![Prompt::Text(s.clone())],
        Value::Array(a) if a.is_empty() => {
            return Err(ApiError::invalid("prompt", "`prompt` must not be empty"))
        }
        Value::Array(a) if a.iter().all(Value::is_string) => a
            .iter()
            .map(|s| Prompt::Text(s.as_str().unwrap_or_default().to_string()))
            .collect(),
        Value::Array(a) if a.iter().all(Value::is_number) => vec![Prompt::Ids(ids(v)?)],
        Value::Array(a) if a.iter().all(Value::is_array) => a
            .iter()
            .map(|x| ids(x).map(Prompt::Ids))
            .collect::<Result<_, _>>()?,
        _ => return Err(bad()),
    };
    if out.len() > MAX_PROMPTS {
        return Err(ApiError::invalid(
            "prompt",
            format!(
                "at most {MAX_PROMPTS} prompts per request (got {})",
                out.len()
            ),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(body: &str) -> Result<ChatRequest, ApiError> {
        parse(body.as_bytes())
    }

    fn param(e: ApiError) -> String {
        e.body()["error"]["param"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    #[test]
    fn unknown_and_unsupported_parameters_are_named() {
        let e = chat(r#"{"messages":[{"role":"user","content":"hi"}],"foo":1}"#).unwrap_err();
        assert_eq!(param(e), "foo");
        let e = chat(r#"{"messages":[{"role":"user","content":"hi","x":1}]}"#).unwrap_err();
        assert_eq!(param(e), "messages[0].x");
        let r = chat(r#"{"messages":[{"role":"user","content":"hi"}],"tools":[]}"#).unwrap();
        assert_eq!(param(r.reject_unsupported().unwrap_err()), "tools");
        let e = chat(r#"{"messages":[],"temperature":"hot"}"#).unwrap_err();
        assert_eq!(param(e), "temperature");
        let e = chat("{\"messages\": [").unwrap_err();
        assert_eq!(e.body()["error"]["code"], "invalid_json");
    }

    /// Each endpoint's advertised list is what its request accepts (a parameter given as null
    /// parses), and nothing it does not.
    #[test]
    fn advertised_parameters_parse() {
        for p in chat_parameters() {
            let body = format!(r#"{{"messages":[{{"role":"user","content":"hi"}}],"{p}":null}}"#);
            assert!(chat(&body).is_ok(), "chat {p}");
        }
        for p in completion_parameters() {
            let body = format!(r#"{{"prompt":"hi","{p}":null}}"#);
            assert!(
                parse::<CompletionRequest>(body.as_bytes()).is_ok(),
                "completions {p}"
            );
        }
        let body = r#"{"prompt":"hi","max_completion_tokens":3}"#;
        assert!(parse::<CompletionRequest>(body.as_bytes()).is_err());
        assert!(chat(r#"{"messages":[],"echo":true}"#).is_err());
        let all = supported_parameters();
        assert!(all.contains(&"echo") && all.contains(&"max_completion_tokens"));
    }

    #[test]
    fn ranges() {
        let ok = Common::default().validate(100).unwrap();
        assert_eq!(ok.params.temperature, 1.0);
        assert_eq!(ok.n, 1);
        let bad = |c: Common| param(c.validate(100).unwrap_err());
        assert_eq!(
            bad(Common {
                temperature: Some(2.5),
                ..Default::default()
            }),
            "temperature"
        );
        assert_eq!(
            bad(Common {
                n: Some(0),
                ..Default::default()
            }),
            "n"
        );
        assert_eq!(
            bad(Common {
                top_p: Some(0.0),
                ..Default::default()
            }),
            "top_p"
        );
        let lb = |k: &str, v: f64| Common {
            logit_bias: Some([(k.to_string(), v)].into()),
            ..Default::default()
        };
        assert_eq!(bad(lb("100", 1.0)), "logit_bias");
        assert_eq!(bad(lb("5", 101.0)), "logit_bias");
        assert_eq!(bad(lb("x", 1.0)), "logit_bias");
        assert_eq!(
            lb("5", -100.0).validate(100).unwrap().params.logit_bias,
            [(5, -100.0)]
        );
        let stops = Common {
            stop: Some(Stop::Many(vec!["a".into(); 5])),
            ..Default::default()
        };
        assert_eq!(bad(stops), "stop");
        let opts = Common {
            stream_options: Some(StreamOptions::default()),
            ..Default::default()
        };
        assert_eq!(bad(opts), "stream_options");
    }

    #[test]
    fn max_tokens_room() {
        assert_eq!(
            max_tokens("max_tokens", None, 16, 10, 20, "prompt").unwrap(),
            10
        );
        assert_eq!(
            max_tokens("max_tokens", None, 16, 19, 20, "prompt").unwrap(),
            1
        );
        assert_eq!(
            max_tokens("max_tokens", Some(10), 16, 10, 20, "prompt").unwrap(),
            10
        );
        let e = max_tokens("max_tokens", Some(11), 16, 10, 20, "prompt").unwrap_err();
        let m = e.body()["error"]["message"].as_str().unwrap().to_string();
        assert!(m.contains("10 tokens") && m.contains("20"), "{m}");
        assert_eq!(
            param(max_tokens("max_tokens", Some(0), 16, 1, 20, "p").unwrap_err()),
            "max_tokens"
        );
        assert_eq!(
            param(max_tokens("max_tokens", None, 16, 20, 20, "prompt").unwrap_err()),
            "prompt"
        );
    }

    #[test]
    fn messages_and_prompts() {
        let m = |v: Value| -> Vec<Message> { serde_json::from_value(v).unwrap() };
        let v = chat_messages(&m(serde_json::json!([
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ])))
        .unwrap();
        assert_eq!(v[0]["role"], "system");
        assert_eq!(v[1]["content"], "a\nb");
        let e = chat_messages(&m(serde_json::json!([{"role": "robot", "content": "x"}])));
        assert_eq!(param(e.unwrap_err()), "messages[0].role");
        let v = chat_messages(&m(serde_json::json!([{"role": "user", "content": ""}])));
        assert_eq!(
            v.unwrap()[0]["content"],
            "",
            "empty content is a message (as OpenAI takes it)"
        );
        let e = chat_messages(&m(serde_json::json!([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "x"}}]}])));
        assert_eq!(param(e.unwrap_err()), "messages[0].content[0].type");
        assert_eq!(param(chat_messages(&[]).unwrap_err()), "messages");

        let p = |v: Value| prompts(&v);
        assert_eq!(
            p(serde_json::json!("hi")).unwrap(),
            [Prompt::Text("hi".into())]
        );
        assert_eq!(
            p(serde_json::json!([1, 2])).unwrap(),
            [Prompt::Ids(vec![1, 2])]
        );
        assert_eq!(p(serde_json::json!([[1], [2]])).unwrap().len(), 2);
        assert_eq!(p(serde_json::json!(["a", "b"])).unwrap().len(), 2);
        assert!(p(serde_json::json!([-1])).is_err());
        assert!(p(serde_json::json!([])).is_err());
        assert!(p(serde_json::json!([1, "a"])).is_err());
    }
}
