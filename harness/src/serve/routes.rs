//! HTTP routes: request parsing and validation, then a [`Generation`] answered as JSON or SSE.

use super::chunks::{Kind, Meta};
use super::errors::{from_engine, ApiError};
use super::generate::{Generation, PromptJob};
use super::respond;
use super::schemas::{self, ChatRequest, CompletionRequest, DetokenizeRequest, Prompt};
use super::{AppState, ModelEntry};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

type St = State<Arc<AppState>>;
type Body = Result<Bytes, BytesRejection>;

/// Every route, with auth on the API routes, the body limit, panic catching and the request
/// counter.
pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route_layer(middleware::from_fn(json_only))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(api)
        .method_not_allowed_fallback(|req: Request| async move {
            ApiError::MethodNotAllowed(format!("{} {}", req.method(), req.uri().path()))
        })
        .fallback(|req: Request| async move {
            ApiError::RouteNotFound(format!("{} {}", req.method(), req.uri().path()))
        })
        .layer(middleware::from_fn_with_state(state.clone(), length_limit))
        .layer(middleware::from_fn_with_state(state.clone(), count))
        .layer(DefaultBodyLimit::max(state.cfg.max_body_bytes))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            Duration::from_secs(state.cfg.body_timeout_secs.max(1)),
        ))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                ApiError::Internal("the request handler panicked".into()).into_response()
            },
        ))
        .with_state(state)
}

/// Counts every response by route and status.
async fn count(State(st): St, path: Option<MatchedPath>, req: Request, next: Next) -> Response {
    let route = path.map_or_else(|| "other".to_string(), |p| p.as_str().to_string());
    let r = next.run(req).await;
    st.metrics
        .requests
        .with_label_values(&[route.as_str(), r.status().as_str()])
        .inc();
    r
}

/// 415 for a POST whose body is not plain JSON: a Content-Type other than application/json
/// (parameters such as `charset` allowed; none at all also refused, as curl's `-d` sends a form
/// type) or any Content-Encoding but identity (bodies are not decompressed).
async fn json_only(req: Request, next: Next) -> Response {
    if req.method() == axum::http::Method::POST {
        let h = req.headers();
        let text = |v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
        // Every Content-Encoding header, each a comma-separated list, must say identity.
        for enc in h.get_all(header::CONTENT_ENCODING) {
            let t = text(enc);
            if t.split(',')
                .any(|c| !c.trim().eq_ignore_ascii_case("identity"))
            {
                return ApiError::UnsupportedMedia(format!("Content-Encoding: {t}"))
                    .into_response();
            }
        }
        let ok = h.get_all(header::CONTENT_TYPE).iter().count() == 1
            && h.get(header::CONTENT_TYPE).is_some_and(|v| {
                let t = text(v);
                let essence = t.split(';').next().unwrap_or("").trim();
                essence.eq_ignore_ascii_case("application/json")
            });
        if !ok {
            let what = h.get(header::CONTENT_TYPE).map_or_else(
                || "no Content-Type".to_string(),
                |v| format!("Content-Type: {}", text(v)),
            );
            return ApiError::UnsupportedMedia(what).into_response();
        }
    }
    next.run(req).await
}

/// Refuses a body whose announced length is over the limit before reading it (a body without a
/// length is cut off at the limit by `DefaultBodyLimit` as it is read).
async fn length_limit(State(st): St, req: Request, next: Next) -> Response {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > st.cfg.max_body_bytes as u64) {
        return ApiError::TooLarge(st.cfg.max_body_bytes).into_response();
    }
    next.run(req).await
}

/// Validates the shared parameters for model `m` and scopes the request by tenant: the prefix
/// cache is shared by the key's tenant first, then by the request's `user`.
fn options(
    common: schemas::Common,
    m: &ModelEntry,
    tenant: &Tenant,
) -> Result<schemas::Options, ApiError> {
    let mut opts = common.validate(m.vocab)?;
    opts.tenant = format!("{}\u{1f}{}", tenant.0, opts.tenant);
    if !opts.spec_set {
        opts.spec = m.default_spec;
    }
    if opts
        .spec
        .is_some_and(|s| s.method == memra_engine::spec::SpecMethod::DraftModel)
        && !m.has_draft
    {
        return Err(ApiError::invalid(
            "speculative",
            "`speculative.method` \"draft\" needs a draft model: start the server with --draft-model",
        ));
    }
    if let Some(layers) = opts.spec.and_then(|s| s.layer_skip()) {
        if layers >= m.n_layers {
            return Err(ApiError::invalid(
                "speculative",
                format!(
                    "layerskip:{layers} drafts with {layers} layers; the model has {} (use fewer)",
                    m.n_layers
                ),
            ));
        }
    }
    Ok(opts)
}

/// The caller's tenant, set by [`auth`] for the handlers.
#[derive(Clone)]
pub struct Tenant(pub String);

/// Requires `Authorization: Bearer <key>` when keys are configured (compared by sha256): 401, 403
/// for a disabled key, 429 over the tenant's cap, each with `Connection: close` (the body is not
/// read). The tenant's slot is held until the response
/// body (a stream included) is finished or dropped.
async fn auth(State(st): St, mut req: Request, next: Next) -> Response {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let grant = match st.auth.admit(header) {
        Ok(g) => g,
        // The body is left unread: the answer says `Connection: close` (ApiError::into_response).
        Err(e) => return e.into_response(),
    };
    req.extensions_mut().insert(Tenant(grant.tenant.clone()));
    let resp = next.run(req).await;
    let (parts, body) = resp.into_parts();
    let stream = futures::StreamExt::map(body.into_data_stream(), move |chunk| {
        let _held = &grant;
        chunk
    });
    Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

async fn readyz(State(st): St) -> Response {
    if st.ready() {
        Json(json!({"status": "ready"})).into_response()
    } else {
        let why = if st.draining.load(std::sync::atomic::Ordering::SeqCst) {
            "draining"
        } else {
            "loading"
        };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": why})),
        )
            .into_response()
    }
}

async fn metrics(State(st): St) -> Response {
    let models = st.models.get().map(Vec::as_slice).unwrap_or(&[]);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        st.metrics.render(models),
    )
        .into_response()
}

fn model_card(m: &ModelEntry) -> Value {
    json!({
        "id": m.id,
        "object": "model",
        "created": m.created,
        "owned_by": "memra",
        "max_model_len": m.max_model_len,
        "supported_parameters": schemas::supported_parameters(),
        "supported_parameters_by_endpoint": {
            "/v1/chat/completions": schemas::chat_parameters(),
            "/v1/completions": schemas::completion_parameters(),
        },
    })
}

async fn models(State(st): St) -> Result<Json<Value>, ApiError> {
    let data: Vec<Value> = st.loaded()?.iter().map(|m| model_card(m)).collect();
    Ok(Json(json!({"object": "list", "data": data})))
}

async fn model(State(st): St, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let m = st.model(Some(&id))?;
    Ok(Json(model_card(&m)))
}

/// The request body, or 413 / 408 (no data for `body_timeout_secs`) / 400.
fn body(b: Body, limit: usize) -> Result<Bytes, ApiError> {
    b.map_err(|e| {
        let timed_out = {
            let mut src: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            std::iter::from_fn(|| {
                let s = src?;
                src = s.source();
                Some(s)
            })
            .any(|s| s.is::<tower_http::timeout::TimeoutError>())
        };
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(limit)
        } else if timed_out {
            ApiError::BodyTimeout
        } else {
            ApiError::Invalid {
                message: format!("cannot read the request body: {e}"),
                param: None,
                code: None,
            }
        }
    })
}

fn check_ids(ids: &[u32], vocab: usize, param: &str) -> Result<(), ApiError> {
    match ids.iter().find(|&&t| t as usize >= vocab) {
        Some(t) => Err(ApiError::invalid(
            param,
            format!("token id {t} is outside the vocabulary (size {vocab})"),
        )),
        None => Ok(()),
    }
}

fn keepalive(st: &AppState) -> Duration {
    Duration::from_secs(st.cfg.keepalive_secs.max(1))
}

fn chat_prompt(
    m: &ModelEntry,
    msgs: &[schemas::Message],
    gen_prompt: bool,
) -> Result<Vec<u32>, ApiError> {
    let messages = schemas::chat_messages(msgs)?;
    let text = m
        .tokenizer
        .apply_chat_template(&messages, None, gen_prompt)
        .map_err(|e| from_engine(e, "messages"))?;
    // The template writes its own BOS when the model wants one.
    m.tokenizer
        .encode(&text, false)
        .map_err(|e| from_engine(e, "messages"))
}

async fn chat(
    State(st): St,
    axum::Extension(tenant): axum::Extension<Tenant>,
    b: Body,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let req: ChatRequest = schemas::parse(&body(b, st.cfg.max_body_bytes)?)?;
    req.reject_unsupported()?;
    let m = st.model(req.model.as_deref())?;
    let opts = options(req.common(), &m, &tenant)?;
    let logprobs = match (req.logprobs.unwrap_or(false), req.top_logprobs) {
        (_, Some(k)) if !(0..=schemas::MAX_TOP_LOGPROBS).contains(&k) => {
            return Err(ApiError::invalid(
                "top_logprobs",
                format!(
                    "`top_logprobs` must be in [0, {}] (got {k})",
                    schemas::MAX_TOP_LOGPROBS
                ),
            ))
        }
        (false, Some(k)) if k > 0 => {
            return Err(ApiError::invalid(
                "top_logprobs",
                "`top_logprobs` needs `logprobs: true`",
            ))
        }
        (true, k) => Some(k.unwrap_or(0) as u32),
        (false, _) => None,
    };
    let ids = chat_prompt(&m, &req.messages, true)?;
    let (param, requested) = match (req.max_completion_tokens, req.max_tokens) {
        (Some(v), _) => ("max_completion_tokens", Some(v)),
        (None, v) => ("max_tokens", v),
    };
    let max_tokens = schemas::max_tokens(
        param,
        requested,
        usize::MAX,
        ids.len(),
        m.max_model_len,
        "messages",
    )?;
    tracing::debug!(model = %m.id, prompt_tokens = ids.len(), max_tokens, n = opts.n, "chat");
    let jobs = vec![PromptJob { ids, max_tokens }];
    let gen = Generation::start(&st, m.clone(), jobs, &opts, logprobs, arrived)?;
    let mut meta = Meta::new(Kind::Chat, &m.id);
    meta.logprobs = logprobs.is_some();
    meta.include_usage = opts.include_usage;
    meta.n = opts.n as usize;
    if opts.stream {
        Ok(respond::stream(gen, meta, keepalive(&st)))
    } else {
        respond::collect(gen, meta).await
    }
}

async fn completions(
    State(st): St,
    axum::Extension(tenant): axum::Extension<Tenant>,
    b: Body,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let req: CompletionRequest = schemas::parse(&body(b, st.cfg.max_body_bytes)?)?;
    if req.suffix.is_some() {
        return Err(ApiError::unsupported("suffix"));
    }
    if req.best_of.is_some_and(|b| b != req.n.unwrap_or(1)) {
        return Err(ApiError::unsupported("best_of"));
    }
    let m = st.model(req.model.as_deref())?;
    let opts = options(req.common(), &m, &tenant)?;
    let logprobs = match req.logprobs {
        Some(k) if !(0..=schemas::MAX_TOP_LOGPROBS).contains(&k) => {
            return Err(ApiError::invalid(
                "logprobs",
                format!(
                    "`logprobs` must be in [0, {}] (got {k})",
                    schemas::MAX_TOP_LOGPROBS
                ),
            ))
        }
        k => k.map(|k| k as u32),
    };
    let echo = req.echo.unwrap_or(false);
    if echo && logprobs.is_some() {
        return Err(ApiError::Invalid {
            message: "`echo` with `logprobs` (prompt logprobs) is not supported yet".into(),
            param: Some("echo".into()),
            code: Some("unsupported_parameter"),
        });
    }
    let mut jobs = Vec::new();
    let mut echoes = Vec::new();
    for p in schemas::prompts(&req.prompt)? {
        let (ids, text) = match p {
            Prompt::Text(s) => {
                let ids = m
                    .tokenizer
                    .encode(&s, true)
                    .map_err(|e| from_engine(e, "prompt"))?;
                (ids, s)
            }
            Prompt::Ids(ids) => {
                check_ids(&ids, m.vocab, "prompt")?;
                // The echo is the prompt as given, special tokens included (as /detokenize).
                let text = if echo {
                    m.tokenizer
                        .decode(&ids, false)
                        .map_err(|e| from_engine(e, "prompt"))?
                } else {
                    String::new()
                };
                (ids, text)
            }
        };
        if ids.is_empty() {
            return Err(ApiError::invalid("prompt", "the prompt is empty"));
        }
        let max_tokens = schemas::max_tokens(
            "max_tokens",
            req.max_tokens,
            schemas::DEFAULT_COMPLETION_TOKENS,
            ids.len(),
            m.max_model_len,
            "prompt",
        )?;
        jobs.push(PromptJob { ids, max_tokens });
        echoes.push(text);
    }
    tracing::debug!(model = %m.id, prompts = jobs.len(), n = opts.n, "completion");
    let gen = Generation::start(&st, m.clone(), jobs, &opts, logprobs, arrived)?;
    let mut meta = Meta::new(Kind::Completion, &m.id);
    meta.logprobs = logprobs.is_some();
    meta.include_usage = opts.include_usage;
    meta.n = opts.n as usize;
    if echo {
        meta.echo = echoes;
    }
    if opts.stream {
        Ok(respond::stream(gen, meta, keepalive(&st)))
    } else {
        respond::collect(gen, meta).await
    }
}

async fn tokenize(State(st): St, b: Body) -> Result<Json<Value>, ApiError> {
    let req: schemas::TokenizeRequest = schemas::parse(&body(b, st.cfg.max_body_bytes)?)?;
    let m = st.model(req.model.as_deref())?;
    let ids = match (&req.prompt, &req.messages) {
        (Some(p), None) => m
            .tokenizer
            .encode(p, req.add_special_tokens.unwrap_or(true))
            .map_err(|e| from_engine(e, "prompt"))?,
        (None, Some(msgs)) => chat_prompt(&m, msgs, req.add_generation_prompt.unwrap_or(true))?,
        _ => {
            return Err(ApiError::invalid(
                "prompt",
                "give exactly one of `prompt` and `messages`",
            ))
        }
    };
    Ok(Json(json!({
        "tokens": ids,
        "count": ids.len(),
        "max_model_len": m.max_model_len,
    })))
}

async fn detokenize(State(st): St, b: Body) -> Result<Json<Value>, ApiError> {
    let req: DetokenizeRequest = schemas::parse(&body(b, st.cfg.max_body_bytes)?)?;
    let m = st.model(req.model.as_deref())?;
    let ids: Vec<u32> = req
        .tokens
        .iter()
        .map(|&t| {
            u32::try_from(t)
                .map_err(|_| ApiError::invalid("tokens", format!("invalid token id {t}")))
        })
        .collect::<Result<_, _>>()?;
    check_ids(&ids, m.vocab, "tokens")?;
    let text = m
        .tokenizer
        .decode(&ids, false)
        .map_err(|e| from_engine(e, "tokens"))?;
    Ok(Json(json!({"prompt": text})))
}
