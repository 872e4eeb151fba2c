//! Response shapes: the OpenAI JSON of a finished request, and the server-sent events of a
//! streamed one (`chat.completion.chunk` / `text_completion` chunks, then `data: [DONE]`).

use super::errors::ApiError;
use super::generate::{Generation, Out, TokenInfo};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

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

    fn echo_of(&self, index: usize) -> &str {
        self.echo
            .get(index / self.n.max(1))
            .map_or("", String::as_str)
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Completion, _) => "text_completion",
        }
    }

    fn envelope(&self, chunk: bool, choices: Value) -> Value {
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
    fn logprobs_json(&self, index: usize, items: &[TokenInfo]) -> Value {
        match self.kind {
            Kind::Chat => {
                let entry =
                    |t: &str, lp: f64| json!({"token": t, "logprob": lp, "bytes": t.as_bytes()});
                let content: Vec<Value> = items
                    .iter()
                    .map(|i| {
                        let mut e = entry(&i.token, i.logprob);
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
                    "tokens": items.iter().map(|i| i.token.as_str()).collect::<Vec<_>>(),
                    "token_logprobs": items.iter().map(|i| i.logprob).collect::<Vec<_>>(),
                    "top_logprobs": items
                        .iter()
                        .map(|i| i.top.iter().map(|(t, lp)| (t.clone(), json!(lp))).collect::<serde_json::Map<_, _>>())
                        .collect::<Vec<_>>(),
                    "text_offset": items.iter().map(|i| base + i.text_offset).collect::<Vec<_>>(),
                })
            }
        }
    }

    fn text_choice(&self, index: usize, text: &str, lp: Value, finish: Option<&str>) -> Value {
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

/// Runs the generation to the end and answers with one JSON body.
pub async fn collect(mut gen: Generation, meta: Meta) -> Result<Response, ApiError> {
    let k = gen.num_choices();
    let mut texts: Vec<String> = (0..k).map(|i| meta.echo_of(i).to_string()).collect();
    let mut lps: Vec<Vec<TokenInfo>> = vec![Vec::new(); k];
    let mut reasons: Vec<&str> = vec!["stop"; k];
    while let Some(step) = gen.next().await {
        for o in step? {
            match o {
                Out::Text {
                    index,
                    text,
                    logprobs,
                } => {
                    texts[index].push_str(&text);
                    lps[index].extend(logprobs);
                }
                Out::Finish { index, reason } => reasons[index] = reason,
            }
        }
    }
    let choices: Vec<Value> = (0..k)
        .map(|i| {
            let lp = if meta.logprobs {
                meta.logprobs_json(i, &lps[i])
            } else {
                Value::Null
            };
            match meta.kind {
                Kind::Chat => json!({
                    "index": i,
                    "message": {"role": "assistant", "content": texts[i]},
                    "logprobs": lp,
                    "finish_reason": reasons[i],
                }),
                Kind::Completion => json!({
                    "index": i,
                    "text": texts[i],
                    "logprobs": lp,
                    "finish_reason": reasons[i],
                }),
            }
        })
        .collect();
    let mut body = meta.envelope(false, Value::Array(choices));
    body["usage"] = gen.usage().json();
    Ok(axum::Json(body).into_response())
}

struct StreamState {
    gen: Generation,
    meta: Meta,
    queue: VecDeque<Event>,
    finished: bool,
}

fn data(v: &Value) -> Event {
    // Compact JSON has no raw newlines, so it is one `data:` line.
    Event::default().data(v.to_string())
}

impl StreamState {
    fn push_outs(&mut self, outs: Vec<Out>) {
        for o in outs {
            let choice = match o {
                Out::Text {
                    index,
                    text,
                    logprobs,
                } => {
                    let lp = if self.meta.logprobs && !logprobs.is_empty() {
                        self.meta.logprobs_json(index, &logprobs)
                    } else {
                        Value::Null
                    };
                    self.meta.text_choice(index, &text, lp, None)
                }
                Out::Finish { index, reason } => {
                    self.meta.text_choice(index, "", Value::Null, Some(reason))
                }
            };
            let chunk = self.meta.envelope(true, json!([choice]));
            self.queue.push_back(data(&chunk));
        }
    }
}

/// Answers with server-sent events: a first chunk per choice (chat: the role; completions with
/// echo: the prompt), text chunks as they are released, a finish chunk per choice, the usage
/// chunk (`"choices": []`) when asked, then `data: [DONE]`. Comments keep the connection alive
/// while the request waits. Dropping the stream (client gone) cancels the generation.
pub fn stream(gen: Generation, meta: Meta, keepalive: Duration) -> Response {
    let mut queue = VecDeque::new();
    for i in 0..gen.num_choices() {
        let first = match meta.kind {
            Kind::Chat => Some(json!({
                "index": i,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": null,
                "finish_reason": null,
            })),
            Kind::Completion if !meta.echo_of(i).is_empty() => {
                Some(meta.text_choice(i, meta.echo_of(i), Value::Null, None))
            }
            Kind::Completion => None,
        };
        if let Some(c) = first {
            queue.push_back(data(&meta.envelope(true, json!([c]))));
        }
    }
    let state = StreamState {
        gen,
        meta,
        queue,
        finished: false,
    };
    let events = futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.queue.pop_front() {
                return Some((Ok::<_, Infallible>(ev), st));
            }
            if st.finished {
                return None;
            }
            match st.gen.next().await {
                Some(Ok(outs)) => st.push_outs(outs),
                Some(Err(e)) => {
                    tracing::warn!("stream ended by an error: {e}");
                    st.queue.push_back(data(&e.body()));
                    st.queue.push_back(Event::default().data("[DONE]"));
                    st.finished = true;
                }
                None => {
                    if st.meta.include_usage {
                        let mut u = st.meta.envelope(true, json!([]));
                        u["usage"] = st.gen.usage().json();
                        st.queue.push_back(data(&u));
                    }
                    st.queue.push_back(Event::default().data("[DONE]"));
                    st.finished = true;
                }
            }
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive).text("keep-alive"))
        .into_response()
}
