//! Response shapes: the OpenAI JSON of a finished request, and the server-sent events of a
//! streamed one (`chat.completion.chunk` / `text_completion` chunks, then `data: [DONE]`).

use super::chunks::{Kind, Meta, TokenInfo};
use super::errors::ApiError;
use super::generate::{Generation, Out};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

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

/// One chunk as a server-sent event (harness/benches/sse.rs builds its events the same way).
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
