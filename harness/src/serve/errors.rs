//! API errors: every failure a handler can meet is classified into [`ApiError`] where it is
//! produced, and mapped to an HTTP status and the OpenAI error body here, in one place.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use memra_engine::sched::SubmitError;
use serde_json::json;

/// Why a request failed. `IntoResponse` turns it into the status and
/// `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    /// 400: the request is malformed or asks for something invalid or unsupported. `param`
    /// names the offending parameter when there is one.
    Invalid {
        message: String,
        param: Option<String>,
        code: Option<&'static str>,
    },
    /// 401: the API key is missing or wrong.
    Unauthorized,
    /// 403: the key is known but disabled.
    Forbidden,
    /// 429: the key's tenant already runs its maximum number of requests.
    TenantBusy { tenant: String, cap: usize },
    /// 404: no model is served under this id.
    ModelNotFound(String),
    /// 404: no such route.
    RouteNotFound(String),
    /// 405: the route exists, the method does not.
    MethodNotAllowed(String),
    /// 413: the body is over the size limit.
    TooLarge(usize),
    /// 408: the body stopped arriving (serve.body_timeout_secs without data).
    BodyTimeout,
    /// 415: the body is not plain JSON (its Content-Type or Content-Encoding, named here).
    UnsupportedMedia(String),
    /// 429: the waiting queue is full.
    QueueFull { retry_after_secs: u64 },
    /// 503: the server is loading, draining or its engine stopped.
    Unavailable {
        message: String,
        retry_after_secs: u64,
    },
    /// 500: anything else (an engine failure, a bug).
    Internal(String),
}

impl ApiError {
    /// A 400 naming `param`.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::Invalid {
            message: message.into(),
            param: Some(param.into()),
            code: None,
        }
    }

    /// A 400 for a parameter the server knows of but does not implement.
    pub fn unsupported(param: &str) -> ApiError {
        ApiError::Invalid {
            message: format!("parameter `{param}` is not supported yet"),
            param: Some(param.to_string()),
            code: Some("unsupported_parameter"),
        }
    }

    /// A 400 for a parameter the endpoint does not know.
    pub fn unknown(param: &str) -> ApiError {
        ApiError::Invalid {
            message: format!("unknown parameter `{param}`"),
            param: Some(param.to_string()),
            code: Some("unknown_parameter"),
        }
    }

    /// The HTTP status this error maps to.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Invalid { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden => StatusCode::FORBIDDEN,
            ApiError::TenantBusy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::ModelNotFound(_) | ApiError::RouteNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMedia(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::QueueFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The OpenAI-shaped error body.
    pub fn body(&self) -> serde_json::Value {
        let (message, typ, param, code): (String, &str, Option<&str>, Option<&str>) = match self {
            ApiError::Invalid {
                message,
                param,
                code,
            } => (
                message.clone(),
                "invalid_request_error",
                param.as_deref(),
                *code,
            ),
            ApiError::Unauthorized => (
                "missing or invalid API key (send `Authorization: Bearer <key>`)".into(),
                "authentication_error",
                None,
                Some("invalid_api_key"),
            ),
            ApiError::ModelNotFound(m) => (
                format!("the model `{m}` does not exist (see GET /v1/models)"),
                "invalid_request_error",
                Some("model"),
                Some("model_not_found"),
            ),
            ApiError::Forbidden => (
                "this API key is disabled".into(),
                "permission_error",
                None,
                Some("key_disabled"),
            ),
            ApiError::TenantBusy { tenant, cap } => (
                format!("tenant `{tenant}` already has {cap} requests running; retry later"),
                "rate_limit_error",
                None,
                Some("rate_limit_exceeded"),
            ),
            ApiError::MethodNotAllowed(p) => (
                format!("method not allowed: {p}"),
                "invalid_request_error",
                None,
                Some("method_not_allowed"),
            ),
            ApiError::RouteNotFound(p) => (
                format!("no route {p}"),
                "invalid_request_error",
                None,
                Some("not_found"),
            ),
            ApiError::TooLarge(limit) => (
                format!("the request body is larger than {limit} bytes"),
                "invalid_request_error",
                None,
                Some("request_too_large"),
            ),
            ApiError::BodyTimeout => (
                "the request body stopped arriving before it was complete".into(),
                "invalid_request_error",
                None,
                Some("request_timeout"),
            ),
            ApiError::UnsupportedMedia(what) => (
                format!("the request body must be JSON sent as `Content-Type: application/json` without a Content-Encoding (got {what})"),
                "invalid_request_error",
                None,
                Some("unsupported_media_type"),
            ),
            ApiError::QueueFull { .. } => (
                "the server is busy: its request queue is full; retry later".into(),
                "rate_limit_error",
                None,
                Some("rate_limit_exceeded"),
            ),
            ApiError::Unavailable { message, .. } => (
                message.clone(),
                "service_unavailable",
                None,
                Some("service_unavailable"),
            ),
            ApiError::Internal(m) => (m.clone(), "server_error", None, Some("internal_error")),
        };
        json!({"error": {"message": message, "type": typ, "param": param, "code": code}})
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::TenantBusy { .. } => Some(1),
            ApiError::QueueFull { retry_after_secs }
            | ApiError::Unavailable {
                retry_after_secs, ..
            } => Some((*retry_after_secs).max(1)),
            _ => None,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}",
            self.status().as_u16(),
            self.body()["error"]["message"]
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(m) = &self {
            tracing::error!("internal error: {m}");
        }
        let mut r = (self.status(), axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after() {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        // Refused with the body unread (auth's 401 / 403 / 429, 415) or half read (408): the
        // connection cannot carry another request, so say so, or a keep-alive client would send
        // its next request into a closed socket (RFC 9110 §15.5.9 for 408).
        if matches!(
            self,
            ApiError::UnsupportedMedia(_)
                | ApiError::BodyTimeout
                | ApiError::Unauthorized
                | ApiError::Forbidden
                | ApiError::TenantBusy { .. }
        ) {
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        r
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> ApiError {
        match e {
            SubmitError::QueueFull {
                retry_after_secs, ..
            } => ApiError::QueueFull { retry_after_secs },
            SubmitError::Stopped => ApiError::Unavailable {
                message: "the engine has stopped".into(),
                retry_after_secs: 5,
            },
            SubmitError::Invalid(m) => ApiError::Invalid {
                message: m,
                param: None,
                code: None,
            },
        }
    }
}

/// Engine errors met while preparing a request (tokenizing, rendering the chat template) are
/// about the request; parameter errors name the parameter (the engine's messages start with it).
pub fn from_engine(e: memra_engine::Error, param: &str) -> ApiError {
    use memra_engine::Error as E;
    match e {
        E::InvalidArgument(m) => {
            let name = m.split_whitespace().next().unwrap_or(param).to_string();
            ApiError::Invalid {
                message: m,
                param: Some(name),
                code: None,
            }
        }
        E::Template(m) => ApiError::invalid(param, format!("chat template: {m}")),
        E::Tokenizer(m) => ApiError::invalid(param, format!("tokenizer: {m}")),
        other => ApiError::Internal(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_shapes() {
        let e = ApiError::unknown("foo");
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        let b = e.body();
        assert_eq!(b["error"]["param"], "foo");
        assert_eq!(b["error"]["type"], "invalid_request_error");
        let r = ApiError::from(SubmitError::QueueFull {
            queued: 3,
            retry_after_secs: 2,
        })
        .into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
        assert_eq!(
            ApiError::ModelNotFound("x".into()).body()["error"]["code"],
            "model_not_found"
        );
        let e = from_engine(
            memra_engine::Error::InvalidArgument("top_p must be in (0, 1]".into()),
            "x",
        );
        assert_eq!(e.body()["error"]["param"], "top_p");
    }
}
