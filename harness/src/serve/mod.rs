//! `memra serve`: an OpenAI-compatible HTTP server over the continuous-batching scheduler.
//!
//! axum/hyper on tokio; each model's engine owns its thread ([`SchedulerHandle`]) and talks to
//! the handlers through channels: a request's events go from the engine thread into an unbounded
//! channel that its handler (or its SSE stream) drains. Layout:
//! [`schemas`] (typed requests, validation) → [`generate`] (submit, events → text pieces) →
//! [`text`] (incremental detokenization, stop strings) → [`respond`] (JSON and SSE shapes);
//! [`routes`] wires them to HTTP, [`errors`] maps every failure to a status in one place,
//! [`metrics`] exports Prometheus text.

mod auth;
mod chunks;
mod errors;
mod generate;
mod metrics;
mod respond;
mod routes;
mod schemas;
mod text;
mod validate;

use crate::config::{Config, ServeConfig};
use anyhow::{bail, Context, Result};
use clap::Args;
use memra_engine::sched::{SchedulerConfig, SchedulerHandle};
use memra_engine::tokenizer::Tokenizer;
use metrics::Metrics;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The model served when none is configured (pulled on first use).
pub const DEFAULT_MODEL: &str = "smollm2-135m-instruct";

/// Arguments of `memra serve` (bind address, limits and keys are config flags: see --help).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Model to serve, as ALIAS=MODEL or MODEL (the alias is then the model's name); MODEL is
    /// anything `memra pull` accepts. Repeat for several models. [default: smollm2-135m-instruct]
    #[arg(long = "model", value_name = "[ALIAS=]MODEL")]
    pub models: Vec<String>,
    /// Print the resolved configuration (TOML, keys redacted) and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Exit when standard input closes (lets a parent process tie the server's life to its own).
    #[arg(long, hide = true)]
    pub exit_with_stdin: bool,
    /// A deliberately broken scheduler, for the serving gate's canary only: shared-rng.
    #[arg(long, hide = true)]
    pub sched_canary: Option<String>,
}

/// The serving gate's canary, set once from `--sched-canary`.
static SCHED_CANARY: OnceLock<Option<memra_engine::sched::SchedCanary>> = OnceLock::new();

/// One served model.
pub struct ModelEntry {
    /// The id clients name it by.
    pub id: String,
    pub tokenizer: Arc<Tokenizer>,
    pub handle: SchedulerHandle,
    /// Prompt plus generated tokens per sequence: the model's context, capped by the KV cache
    /// and the configured `context_len`.
    pub max_model_len: usize,
    /// Size of the model's output vocabulary (valid token ids are below it).
    pub vocab: usize,
    /// Unix time it was loaded.
    pub created: u64,
    pub metrics: Arc<Metrics>,
    /// Whether a draft model is loaded beside it (for `speculative.method = "draft"`).
    pub has_draft: bool,
    /// Transformer layers of the model (`speculative.method = "layerskip:L"` needs L below it).
    pub n_layers: usize,
    /// Speculation for requests without the extension (`serve.speculative`; None = off).
    pub default_spec: Option<memra_engine::spec::SpecParams>,
}

/// What every handler shares.
pub struct AppState {
    /// Set once every model has loaded.
    pub models: OnceLock<Vec<Arc<ModelEntry>>>,
    /// SIGTERM or Ctrl-C arrived: refuse new work, finish what runs.
    pub draining: AtomicBool,
    /// Generations in flight.
    pub inflight: AtomicUsize,
    /// Next scheduler request id.
    pub next_id: AtomicU64,
    pub metrics: Arc<Metrics>,
    pub cfg: ServeConfig,
    /// API keys and tenants.
    pub auth: auth::Auth,
}

impl AppState {
    fn new(cfg: ServeConfig) -> Result<AppState> {
        Ok(AppState {
            models: OnceLock::new(),
            draining: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            metrics: Arc::new(Metrics::new()),
            auth: auth::Auth::new(cfg.api_key.as_deref(), cfg.keyring.as_deref())?,
            cfg,
        })
    }

    /// Whether `/readyz` should say yes.
    pub fn ready(&self) -> bool {
        !self.draining.load(Ordering::SeqCst)
            && self
                .models
                .get()
                .is_some_and(|m| m.iter().all(|e| !e.handle.is_stopped()))
    }

    /// The loaded models, or 503 while loading or draining.
    pub fn loaded(&self) -> Result<&[Arc<ModelEntry>], errors::ApiError> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(errors::ApiError::Unavailable {
                message: "the server is shutting down".into(),
                retry_after_secs: 5,
            });
        }
        self.models
            .get()
            .map(Vec::as_slice)
            .ok_or_else(|| errors::ApiError::Unavailable {
                message: "the model is still loading".into(),
                retry_after_secs: 5,
            })
    }

    /// The model a request names (the only one when it names none); 404 when unknown, 400 when
    /// it names none and the server serves several (no silent choice between them).
    pub fn model(&self, name: Option<&str>) -> Result<Arc<ModelEntry>, errors::ApiError> {
        let models = self.loaded()?;
        match name {
            None | Some("") if models.len() > 1 => Err(errors::ApiError::invalid(
                "model",
                format!(
                    "`model` is required when the server serves several models: one of {:?}",
                    models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>()
                ),
            )),
            None | Some("") => Ok(models[0].clone()),
            Some(n) => models
                .iter()
                .find(|m| m.id == n)
                .cloned()
                .ok_or_else(|| errors::ApiError::ModelNotFound(n.to_string())),
        }
    }
}

/// `ALIAS=MODEL` or `MODEL` → (alias, spec). The default alias is the model's name: the last
/// path or repository component, without `.gguf` or a revision.
pub fn alias_and_spec(s: &str) -> (String, String) {
    if let Some((a, spec)) = s.split_once('=') {
        if !a.is_empty() && !a.contains(['/', ':']) {
            return (a.to_string(), spec.to_string());
        }
    }
    let last = s
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or(s);
    let last = last.split('@').next().unwrap_or(last);
    let name = last.strip_suffix(".gguf").unwrap_or(last);
    (name.to_string(), s.to_string())
}

/// Runs `memra serve`.
pub fn run(args: &ServeArgs, cfg: &Config) -> Result<()> {
    let mut cfg = cfg.clone();
    if !args.models.is_empty() {
        cfg.serve.models = args.models.clone();
        cfg.sources.insert("serve.models".into(), "flag".into());
    }
    if cfg.serve.models.is_empty() {
        cfg.serve.models = vec![DEFAULT_MODEL.to_string()];
    }
    if args.print_config {
        let mut shown = cfg.clone();
        if shown.serve.api_key.is_some() {
            shown.serve.api_key = Some("<redacted>".into());
        }
        print!(
            "{}",
            crate::defaults::annotate(&toml::to_string_pretty(&shown)?, &shown)
        );
        let unset: Vec<&str> = [
            ("cuda_home", cfg.cuda_home.is_none()),
            ("serve.api_key", cfg.serve.api_key.is_none()),
            ("serve.keyring", cfg.serve.keyring.is_none()),
            ("serve.draft_model", cfg.serve.draft_model.is_none()),
        ]
        .into_iter()
        .filter_map(|(k, none)| none.then_some(k))
        .collect();
        if !unset.is_empty() {
            println!("# unset (none): {}", unset.join(", "));
        }
        if cfg.backend == "auto" {
            let b = if crate::backends::use_cuda(&cfg)? {
                "cuda"
            } else {
                "cpu"
            };
            println!("# backend \"auto\" resolves to {b} on this machine");
        }
        return Ok(());
    }
    let specs: Vec<(String, String)> = cfg.serve.models.iter().map(|s| alias_and_spec(s)).collect();
    for (i, (a, _)) in specs.iter().enumerate() {
        if specs[..i].iter().any(|(b, _)| b == a) {
            bail!("two models share the alias {a:?}; name them with ALIAS=MODEL");
        }
    }
    let canary = match args.sched_canary.as_deref() {
        None => None,
        Some("shared-rng") => Some(memra_engine::sched::SchedCanary::SharedRng),
        Some(other) => bail!("unknown --sched-canary {other:?} (shared-rng)"),
    };
    let _ = SCHED_CANARY.set(canary);
    if args.exit_with_stdin {
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            std::process::exit(0);
        });
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(serve(cfg, specs))
}

fn load_models(
    cfg: &Config,
    specs: &[(String, String)],
    metrics: &Arc<Metrics>,
) -> Result<Vec<Arc<ModelEntry>>> {
    let mut out = Vec::new();
    for (alias, spec) in specs {
        let path = crate::pull::resolve(spec, cfg)?;
        let loaded = memra_engine::loader::load(&path)?;
        let (blocks, make) = crate::run::backend_factory(&loaded.model, cfg)?;
        let c = &loaded.model.config;
        let mut max_model_len = c.max_context.min(blocks * cfg.kv_block_size);
        if cfg.serve.context_len > 0 {
            if cfg.serve.context_len > max_model_len {
                tracing::warn!(
                    model = alias.as_str(),
                    context_len = cfg.serve.context_len,
                    max_model_len,
                    "context_len is above what the model and its KV cache hold; serving {max_model_len}"
                );
            }
            max_model_len = max_model_len.min(cfg.serve.context_len);
        }
        let sc = SchedulerConfig {
            max_batch_tokens: cfg.serve.max_batch_tokens,
            max_running: cfg.serve.max_running,
            queue_capacity: cfg.serve.queue_capacity,
            max_context: max_model_len,
            canary: SCHED_CANARY.get().copied().flatten(),
            spec_max_running: cfg.spec_max_running,
            spec_min_acceptance: cfg.spec_min_acceptance,
            spec_row_cost: cfg.spec_row_cost,
            spec_verify_base: cfg.spec_verify_base,
        };
        let make_draft = match &cfg.serve.draft_model {
            Some(d) => {
                let dl = memra_engine::loader::load(&crate::pull::resolve(d, cfg)?)?;
                Some(crate::run::backend_factory(&dl.model, cfg)?.1)
            }
            None => None,
        };
        let has_draft = make_draft.is_some();
        let default_spec = cfg.serve.default_spec().map_err(anyhow::Error::msg)?;
        if let Some(layers) = default_spec.and_then(|s| s.layer_skip()) {
            if layers >= c.n_layers {
                bail!(
                    "--speculative layerskip:{layers} drafts with {layers} layers; {alias} has {} \
                     (use fewer)",
                    c.n_layers
                );
            }
        }
        let handle = SchedulerHandle::spawn_with_draft(make, make_draft, sc)
            .with_context(|| format!("starting the engine for {alias}"))?;
        tracing::info!(
            model = alias.as_str(),
            path = %path.display(),
            max_model_len,
            kv_blocks = blocks,
            "model loaded"
        );
        out.push(Arc::new(ModelEntry {
            id: alias.clone(),
            vocab: c.vocab_size,
            tokenizer: loaded.tokenizer.clone(),
            handle,
            max_model_len,
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            metrics: metrics.clone(),
            has_draft,
            n_layers: c.n_layers,
            default_spec,
        }));
    }
    Ok(out)
}

async fn serve(cfg: Config, specs: Vec<(String, String)>) -> Result<()> {
    let state = Arc::new(AppState::new(cfg.serve.clone())?);
    let listener = tokio::net::TcpListener::bind((cfg.serve.host.as_str(), cfg.serve.port))
        .await
        .with_context(|| format!("binding {}:{}", cfg.serve.host, cfg.serve.port))?;
    let addr = listener.local_addr()?;
    // The one line on stdout: scripts and tests read the address from it (port 0 = any).
    println!("memra serve: listening on http://{addr}");
    use std::io::Write;
    let _ = std::io::stdout().flush();

    let (fail_tx, mut fail_rx) = tokio::sync::mpsc::channel::<anyhow::Error>(1);
    let st = state.clone();
    tokio::spawn(async move {
        let m = st.metrics.clone();
        let r = tokio::task::spawn_blocking(move || load_models(&cfg, &specs, &m)).await;
        match r {
            Ok(Ok(models)) => {
                let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
                eprintln!("memra serve: ready ({})", ids.join(", "));
                let _ = st.models.set(models);
            }
            Ok(Err(e)) => {
                let _ = fail_tx.send(e).await;
            }
            Err(e) => {
                let _ = fail_tx.send(anyhow::anyhow!("loading panicked: {e}")).await;
            }
        }
    });

    let (drain_tx, drain_rx) = tokio::sync::watch::channel(false);
    let app = routes::router(state.clone());
    let st = state.clone();
    let graceful = async move {
        shutdown_signal().await;
        st.draining.store(true, Ordering::SeqCst);
        let _ = drain_tx.send(true);
        eprintln!(
            "memra serve: draining ({} in flight, up to {} s)",
            st.inflight.load(Ordering::SeqCst),
            st.cfg.drain_secs
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(st.cfg.drain_secs);
        while st.inflight.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if st.inflight.load(Ordering::SeqCst) > 0 {
            // Past the deadline: stop the engines, so every request still in flight ends with a
            // 503 in the OpenAI error shape (a stream: an error event, then [DONE]) instead of
            // a cut connection; give those answers a moment to go out.
            tracing::warn!("drain deadline passed with requests in flight; ending them with 503");
            for m in st.models.get().into_iter().flatten() {
                m.handle.shutdown();
            }
            let grace = tokio::time::Instant::now() + Duration::from_secs(1);
            while st.inflight.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < grace {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let hard_stop = {
        let mut rx = drain_rx;
        let secs = state.cfg.drain_secs;
        async move {
            let _ = rx.wait_for(|d| *d).await;
            tokio::time::sleep(Duration::from_secs(secs) + Duration::from_secs(3)).await;
        }
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(graceful);
    let result = tokio::select! {
        r = server => r.context("server"),
        Some(e) = fail_rx.recv() => Err(e),
        _ = hard_stop => {
            tracing::warn!("drain deadline passed with requests in flight; exiting");
            Ok(())
        }
    };
    for m in state.models.get().into_iter().flatten() {
        m.handle.shutdown();
    }
    if result.is_ok() {
        eprintln!("memra serve: stopped");
    }
    result
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases() {
        let a = |s: &str| alias_and_spec(s).0;
        assert_eq!(a("smollm2-135m-instruct"), "smollm2-135m-instruct");
        assert_eq!(a("small=smollm2-135m-instruct"), "small");
        assert_eq!(a("/m/x/smollm2.gguf"), "smollm2");
        assert_eq!(a("hf:owner/repo"), "repo");
        assert_eq!(a("hf:owner/repo@main:model-q8.gguf"), "model-q8");
        assert_eq!(alias_and_spec("s=/a/b.gguf").1, "/a/b.gguf");
    }
}
