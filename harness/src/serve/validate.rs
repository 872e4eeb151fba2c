//! Validation of the parameters chat and completions share: ranges, penalties, stop strings,
//! seeds, token budgets and the `speculative` extension, each error a 400 naming the parameter.

use super::errors::ApiError;
use super::schemas::*;
use memra_engine::sample::SamplingParams;
use serde_json::Value;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

/// A validated request's engine-side options.
#[derive(Debug, Clone)]
pub struct Options {
    pub params: SamplingParams,
    pub n: u32,
    pub stops: Arc<[String]>,
    pub ignore_eos: bool,
    pub stream: bool,
    pub include_usage: bool,
    /// Prefix-cache namespace.
    pub tenant: String,
    /// Speculative decoding requested for this request.
    pub spec: Option<memra_engine::spec::SpecParams>,
    /// Whether the request carried the `speculative` extension (else the server's default
    /// applies, `serve.speculative`).
    pub spec_set: bool,
}

fn in_range(name: &str, v: Option<f64>, lo: f64, hi: f64, default: f64) -> Result<f32, ApiError> {
    let v = v.unwrap_or(default);
    if !(v.is_finite() && v >= lo && v <= hi) {
        return Err(ApiError::invalid(
            name,
            format!("`{name}` must be in [{lo}, {hi}] (got {v})"),
        ));
    }
    Ok(v as f32)
}

/// Like [`in_range`] with the lower bound excluded: `(lo, hi]`.
fn in_open_range(
    name: &str,
    v: Option<f64>,
    lo: f64,
    hi: f64,
    default: f64,
) -> Result<f32, ApiError> {
    let v = v.unwrap_or(default);
    if !(v.is_finite() && v > lo && v <= hi) {
        return Err(ApiError::invalid(
            name,
            format!("`{name}` must be in ({lo}, {hi}] (got {v})"),
        ));
    }
    Ok(v as f32)
}

/// A random seed for a request that gave none.
fn random_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

impl Common {
    /// Checks every shared parameter against its range; `vocab` bounds `logit_bias` keys.
    pub fn validate(&self, vocab: usize) -> Result<Options, ApiError> {
        let temperature = in_range("temperature", self.temperature, 0.0, 2.0, 1.0)?;
        let top_p = in_open_range("top_p", self.top_p, 0.0, 1.0, 1.0)?;
        let min_p = in_range("min_p", self.min_p, 0.0, 1.0, 0.0)?;
        let presence_penalty = in_range("presence_penalty", self.presence_penalty, -2.0, 2.0, 0.0)?;
        let frequency_penalty =
            in_range("frequency_penalty", self.frequency_penalty, -2.0, 2.0, 0.0)?;
        let repetition_penalty = in_open_range(
            "repetition_penalty",
            self.repetition_penalty,
            0.0,
            10.0,
            1.0,
        )?;
        // vLLM's convention: -1 (or 0) turns top-k off.
        let top_k = match self.top_k.unwrap_or(0) {
            k if k == -1 || k == 0 => 0,
            k if k > 0 => k as usize,
            k => {
                return Err(ApiError::invalid(
                    "top_k",
                    format!("`top_k` must be -1 (off) or positive (got {k})"),
                ))
            }
        };
        let mut logit_bias = Vec::new();
        for (k, &b) in self.logit_bias.iter().flatten() {
            let id: u32 = k.parse().map_err(|_| {
                ApiError::invalid(
                    "logit_bias",
                    format!("`logit_bias` keys must be token ids (got {k:?})"),
                )
            })?;
            if id as usize >= vocab {
                return Err(ApiError::invalid(
                    "logit_bias",
                    format!("`logit_bias` token id {id} is outside the vocabulary (size {vocab})"),
                ));
            }
            if !(b.is_finite() && (-100.0..=100.0).contains(&b)) {
                return Err(ApiError::invalid(
                    "logit_bias",
                    format!("`logit_bias` values must be in [-100, 100] (got {b} for {id})"),
                ));
            }
            logit_bias.push((id, b as f32));
        }
        logit_bias.sort_by_key(|&(id, _)| id);
        let seed = match &self.seed {
            None => random_seed(),
            Some(s) => s
                .as_u64()
                .or_else(|| s.as_i64().map(|v| v as u64))
                .ok_or_else(|| ApiError::invalid("seed", "`seed` must be an integer"))?,
        };
        let n = self.n.unwrap_or(1);
        if !(1..=MAX_N).contains(&n) {
            return Err(ApiError::invalid(
                "n",
                format!("`n` must be in [1, {MAX_N}] (got {n})"),
            ));
        }
        let stops: Vec<String> = match &self.stop {
            None => vec![],
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        if stops.len() > MAX_STOP {
            return Err(ApiError::invalid(
                "stop",
                format!("at most {MAX_STOP} stop strings (got {})", stops.len()),
            ));
        }
        if stops.iter().any(String::is_empty) {
            return Err(ApiError::invalid("stop", "stop strings must not be empty"));
        }
        let stream = self.stream.unwrap_or(false);
        if self.stream_options.is_some() && !stream {
            return Err(ApiError::invalid(
                "stream_options",
                "`stream_options` is only allowed with `stream: true`",
            ));
        }
        let include_usage = self
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        let params = SamplingParams {
            temperature,
            top_k,
            top_p,
            min_p,
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            logit_bias,
            seed,
        };
        params
            .validate()
            .map_err(|e| super::errors::from_engine(e, "temperature"))?;
        Ok(Options {
            params,
            n: n as u32,
            stops: stops.into(),
            ignore_eos: self.ignore_eos.unwrap_or(false),
            stream,
            include_usage,
            tenant: self.user.clone().unwrap_or_default(),
            spec: parse_speculative(self.speculative.as_ref())?,
            spec_set: self.speculative.is_some(),
        })
    }
}

/// The `speculative` extension: `"off"` = plain decode; otherwise a method and K. Absent (or
/// null) parses to None here; the caller then applies the server's default.
fn parse_speculative(
    v: Option<&Value>,
) -> Result<Option<memra_engine::spec::SpecParams>, ApiError> {
    let bad = |m: String| ApiError::invalid("speculative", m);
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s == "off" => Ok(None),
        Some(Value::Object(o)) => {
            if let Some(k) = o.keys().find(|k| *k != "method" && *k != "k") {
                return Err(bad(format!("unknown field `speculative.{k}` (method, k)")));
            }
            let method = o
                .get("method")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("`speculative.method` must be a string".into()))?;
            let k = match o.get("k") {
                None => 4,
                Some(v) => v
                    .as_u64()
                    .ok_or_else(|| bad("`speculative.k` must be a positive integer".into()))?
                    as usize,
            };
            memra_engine::spec::SpecParams::parse(method, k)
                .map(Some)
                .map_err(bad)
        }
        Some(_) => Err(bad(
            "`speculative` must be \"off\" or {\"method\", \"k\"}".into()
        )),
    }
}

/// Tokens to generate for a prompt of `prompt_len` tokens: `requested` if it fits,
/// `default` (capped by the room left) otherwise. Errors name both numbers.
pub fn max_tokens(
    param: &str,
    requested: Option<i64>,
    default: usize,
    prompt_len: usize,
    max_model_len: usize,
    prompt_param: &str,
) -> Result<usize, ApiError> {
    if prompt_len >= max_model_len {
        return Err(ApiError::invalid(
            prompt_param,
            format!(
                "the prompt has {prompt_len} tokens but the context length is {max_model_len}: \
                 no room to generate"
            ),
        ));
    }
    let room = max_model_len - prompt_len;
    match requested {
        None => Ok(default.min(room)),
        Some(m) if m < 1 => Err(ApiError::invalid(
            param,
            format!("`{param}` must be at least 1 (got {m})"),
        )),
        Some(m) if m as u64 > room as u64 => Err(ApiError::invalid(
            param,
            format!(
                "`{param}` is {m} but the prompt has {prompt_len} tokens and the context length \
                 is {max_model_len}: at most {room} tokens can be generated"
            ),
        )),
        Some(m) => Ok(m as usize),
    }
}
