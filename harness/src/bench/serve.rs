//! `memra bench serve`: `memra serve` as a child process under a built-in load generator.
//!
//! The server is this binary run as `memra --config TMP serve --model PATH`, where TMP is the
//! resolved configuration of this run (backend, threads, KV cache, prefill chunk, serve limits,
//! tuned device defaults, ...; bound to 127.0.0.1 port 0, API keys dropped), so the server runs
//! exactly what the flags of `memra bench` say. The client streams `POST /v1/completions` (greedy, `ignore_eos`, `max_tokens =
//! --new-tokens`, usage in the last chunk), one blocking HTTP client thread per stream:
//!
//! - closed loop: `c` streams, each sending its next request as soon as its last one ended;
//! - open loop: requests arrive at Poisson times of rate R (exponential gaps, seeded), each on
//!   its own stream, however many are already in flight.
//!
//! Per request: TTFT = send to the first SSE chunk with text; inter-token latency = the gaps
//! between successive text chunks (the server sends a chunk per token unless text is held back,
//! e.g. a partial UTF-8 character, so `extra` gives chunks and tokens; `tpot` is (last chunk -
//! first chunk) / (tokens - 1) per request). A request counts as an error when the status is not
//! 200, the stream carries an error, or the usage reports fewer than `max_tokens` tokens.
//! Aggregate tok/s of a timed run = completion tokens of its successful requests / the run's wall
//! time (first send to last response end). Per level: `--warmup` untimed runs of one request per
//! stream, then `--reps` timed runs; the throughput row's median/min/max is over the runs, the
//! latency rows' over every request of every run. The server speculates as configured
//! (`serve.speculative`, n-gram with k = 4 by default; `--speculative off` measures plain
//! decode); `extra.speculative` on every row says which.

use super::rows::{percentile, percentiles, Row, Stats};
use super::{prompt_ids, BenchArgs, Ctx};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A `memra serve` child process, killed on drop.
struct Server {
    child: Child,
    base: String,
    log: std::fs::File,
    /// The child's configuration file, deleted once the child has read it (its first line of
    /// output), so that a bench killed mid-run (SIGTERM) leaves no file behind.
    config: Option<tempfile::NamedTempFile>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts the server on `model` with `cfg` and waits until `/readyz` says yes.
    fn start(cfg: &crate::config::Config, model: &Path) -> Result<Server> {
        let mut c = cfg.clone();
        c.serve.host = "127.0.0.1".into();
        c.serve.port = 0;
        c.serve.api_key = None;
        c.serve.keyring = None;
        c.serve.models = Vec::new();
        // The configuration is already resolved (tuned device defaults included).
        c.device_defaults = "none".into();
        let mut file = tempfile::Builder::new()
            .prefix("memra-bench-serve")
            .suffix(".toml")
            .tempfile()?;
        file.write_all(toml::to_string(&c)?.as_bytes())?;
        file.flush()?;
        let log = tempfile::tempfile()?;
        let exe = std::env::current_exe().context("locating the memra binary")?;
        let mut child = Command::new(exe)
            .arg("--config")
            .arg(file.path())
            .arg("serve")
            .arg("--model")
            .arg(model)
            .arg("--exit-with-stdin")
            .env_remove("MEMRA_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.try_clone()?)
            .spawn()
            .context("starting memra serve")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let mut server = Server {
            child,
            base: String::new(),
            log,
            config: Some(file),
        };
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        // The child has parsed its configuration before it prints anything.
        server.config = None;
        server.base = match line.trim().strip_prefix("memra serve: listening on ") {
            Some(b) => b.to_string(),
            None => bail!(
                "memra serve did not start: {:?}\n{}",
                line.trim(),
                server.log_tail()
            ),
        };
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            if let Ok(r) = ureq::get(&format!("{}/readyz", server.base)).call() {
                if r.status() == 200 {
                    return Ok(server);
                }
            }
            if let Ok(Some(st)) = server.child.try_wait() {
                bail!(
                    "memra serve exited ({st}) while loading:\n{}",
                    server.log_tail()
                );
            }
            if Instant::now() > deadline {
                bail!("memra serve did not become ready in 600 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last 2 kB of the server's standard error.
    fn log_tail(&mut self) -> String {
        let mut s = String::new();
        let _ = self.log.rewind();
        let _ = self.log.read_to_string(&mut s);
        let start = s.len().saturating_sub(2048);
        let start = (start..s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(s.len());
        s[start..].to_string()
    }
}

/// One successful streamed request.
#[derive(Debug, Clone)]
struct Sample {
    end: Instant,
    /// Seconds from send to the first text chunk.
    ttft: f64,
    /// Seconds between successive text chunks.
    gaps: Vec<f64>,
    /// (last chunk - first chunk) / (tokens - 1), seconds.
    tpot: Option<f64>,
    tokens: usize,
}

/// What one request ended as.
type Outcome = std::result::Result<Sample, String>;

/// Streams one completion and times its chunks.
fn stream_one(agent: &ureq::Agent, url: &str, body: &str, expect: usize) -> Outcome {
    let start = Instant::now();
    let resp = match agent
        .post(url)
        .set("Content-Type", "application/json")
        .send_string(body)
    {
        Ok(r) => r,
        Err(ureq::Error::Status(code, r)) => {
            let text = r.into_string().unwrap_or_default();
            return Err(format!("HTTP {code}: {}", text.trim()));
        }
        Err(e) => return Err(format!("request failed: {e}")),
    };
    let (mut chunks, mut tokens) = (Vec::new(), None);
    for line in BufReader::new(resp.into_reader()).lines() {
        let line = line.map_err(|e| format!("reading the stream: {e}"))?;
        let at = Instant::now();
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let v: Value =
            serde_json::from_str(data).map_err(|e| format!("SSE chunk is not JSON: {e}"))?;
        if let Some(e) = v.get("error") {
            return Err(format!("stream error: {e}"));
        }
        let text = v["choices"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["text"].as_str().is_some_and(|t| !t.is_empty()));
        if text {
            chunks.push(at);
        }
        if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
            tokens = Some(n as usize);
        }
    }
    let end = Instant::now();
    let tokens = tokens.ok_or("the stream carried no usage")?;
    if tokens != expect {
        return Err(format!("{tokens} of {expect} tokens generated"));
    }
    let first = *chunks.first().ok_or("the stream carried no text")?;
    let last = *chunks.last().expect("non-empty");
    Ok(Sample {
        end,
        ttft: (first - start).as_secs_f64(),
        gaps: chunks
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect(),
        tpot: (tokens > 1).then(|| (last - first).as_secs_f64() / (tokens - 1) as f64),
        tokens,
    })
}

/// A closed- or open-loop level.
#[derive(Debug, Clone, Copy)]
enum Level {
    Closed(usize),
    Open(f64),
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Level::Closed(c) => write!(f, "concurrency {c}"),
            Level::Open(r) => write!(f, "rate {r}/s"),
        }
    }
}

/// How long a timed run goes on.
#[derive(Debug, Clone, Copy)]
enum Until {
    Requests(usize),
    Secs(f64),
}

/// Request bodies, each with a prompt no other request of the run shares.
struct Bodies<'a> {
    args: &'a BenchArgs,
    vocab: usize,
    next: AtomicU64,
}

impl Bodies<'_> {
    fn next(&self) -> String {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let prompt = match &self.args.load.prompt_text {
            Some(t) => json!(format!("{i}: {t}")),
            None => json!(prompt_ids(self.args.load.input_len, self.vocab, i)),
        };
        json!({"prompt": prompt, "max_tokens": self.args.new_tokens, "temperature": 0,
               "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}})
        .to_string()
    }
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(10))
        .timeout_read(Duration::from_secs(600))
        .build()
}

/// One run at `level`: every request's outcome and the wall time from first send to last end.
fn run_level(
    url: &str,
    bodies: &Bodies,
    level: Level,
    until: Until,
    seed: u64,
) -> (Vec<Outcome>, f64) {
    let out = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let more = |issued: usize| match until {
        Until::Requests(n) => issued < n,
        Until::Secs(s) => t0.elapsed().as_secs_f64() < s,
    };
    match level {
        Level::Closed(c) => {
            let issued = AtomicUsize::new(0);
            std::thread::scope(|sc| {
                for _ in 0..c {
                    sc.spawn(|| {
                        let agent = agent();
                        loop {
                            let i = issued.fetch_add(1, Ordering::SeqCst);
                            if !more(i) {
                                break;
                            }
                            let o = stream_one(&agent, url, &bodies.next(), bodies.args.new_tokens);
                            out.lock().unwrap_or_else(|e| e.into_inner()).push(o);
                        }
                    });
                }
            });
        }
        Level::Open(rate) => {
            let agent = agent();
            let mut rng = seed ^ 0x0A11_1BA1;
            let mut at = 0.0;
            std::thread::scope(|sc| {
                let mut issued = 0;
                loop {
                    // Exponential gap: -ln(U) / rate, U uniform in (0, 1].
                    let u =
                        ((super::splitmix64(&mut rng) >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
                    at += -u.ln() / rate;
                    let due = match until {
                        Until::Requests(n) => issued < n,
                        Until::Secs(s) => at < s,
                    };
                    if !due {
                        break;
                    }
                    issued += 1;
                    let wait = Duration::from_secs_f64(at).saturating_sub(t0.elapsed());
                    std::thread::sleep(wait);
                    let body = bodies.next();
                    let (agent, out) = (&agent, &out);
                    sc.spawn(move || {
                        let o = stream_one(agent, url, &body, bodies.args.new_tokens);
                        out.lock().unwrap_or_else(|e| e.into_inner()).push(o);
                    });
                }
            });
        }
    }
    let outcomes = out.into_inner().unwrap_or_else(|e| e.into_inner());
    let wall = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok())
        .map(|s| s.end)
        .max()
        .map_or(0.0, |e| (e - t0).as_secs_f64());
    (outcomes, wall)
}

/// The levels `args` ask for: closed-loop concurrencies, then open-loop rates.
fn levels(args: &BenchArgs) -> Result<Vec<Level>> {
    let mut v: Vec<Level> = match (&args.load.concurrency, args.load.rate.is_empty()) {
        (Some(c), _) => c.iter().map(|&c| Level::Closed(c)).collect(),
        (None, true) => [1, 2, 4, 8, 16, 32, 64].map(Level::Closed).to_vec(),
        (None, false) => Vec::new(),
    };
    v.extend(args.load.rate.iter().map(|&r| Level::Open(r)));
    for l in &v {
        match *l {
            Level::Closed(0) => bail!("--concurrency levels must be at least 1"),
            Level::Open(r) if !(r > 0.0 && r.is_finite()) => bail!("--rate must be positive"),
            _ => {}
        }
    }
    Ok(v)
}

/// The rows: per level, aggregate output tok/s, TTFT (ms) and inter-token latency (ms).
pub fn run(args: &BenchArgs, ctx: &mut Ctx) -> Result<Vec<Row>> {
    if args.new_tokens < 2 {
        bail!("serve needs --new-tokens of at least 2 (inter-token latency)");
    }
    if args.load.prompt_text.is_none() && args.load.input_len == 0 {
        bail!("--input-len must be at least 1");
    }
    if let Some(d) = args.load.duration {
        if d.is_nan() || d <= 0.0 {
            bail!("--duration must be positive");
        }
    }
    // The server's context: the model's (0 = unknown), capped by `--context-len` (the KV cache,
    // known once the server runs, may cap it further).
    let context = match (
        ctx.loaded.model.config.max_context,
        ctx.cfg.serve.context_len,
    ) {
        (0, c) | (c, 0) => c,
        (m, c) => m.min(c),
    };
    if context > 0
        && args.load.prompt_text.is_none()
        && args.load.input_len + args.new_tokens > context
    {
        bail!(
            "--input-len {} plus --new-tokens {} is beyond the context of {context} tokens \
             (the model's, or --context-len)",
            args.load.input_len,
            args.new_tokens
        );
    }
    let levels = levels(args)?;
    let mut server = Server::start(ctx.cfg, &ctx.path)?;
    eprintln!("bench serve: memra serve ready at {}", server.base);
    let url = format!("{}/v1/completions", server.base);
    let bodies = Bodies {
        args,
        vocab: ctx.loaded.model.config.vocab_size,
        next: AtomicU64::new(ctx.fresh_seed() << 20),
    };
    let mut rows = Vec::new();
    for (li, &level) in levels.iter().enumerate() {
        let until = match (level, args.load.duration, args.load.requests) {
            (_, Some(s), _) => Until::Secs(s),
            (Level::Closed(c), None, 0) => Until::Requests((4 * c).max(8)),
            (Level::Open(r), None, 0) => Until::Requests(((10.0 * r) as usize).max(16)),
            (_, None, n) => Until::Requests(n),
        };
        // Warm-up: one request per stream at the level's concurrency (open loop: about as many
        // streams as arrive in a second, at most 8).
        let warm = match level {
            Level::Closed(c) => c,
            Level::Open(r) => (r.ceil() as usize).clamp(1, 8),
        };
        for _ in 0..args.warmup {
            let (o, _) = run_level(&url, &bodies, Level::Closed(warm), Until::Requests(warm), 0);
            if let Some(Err(e)) = o.iter().find(|o| o.is_err()) {
                bail!("warm-up request failed: {e}\n{}", server.log_tail());
            }
        }
        let (mut tput, mut ttft, mut gaps, mut tpot) = (vec![], vec![], vec![], vec![]);
        let (mut requests, mut errors, mut tokens, mut first_error) = (0, 0, 0, None);
        for rep in 0..args.reps {
            let seed = args.seed ^ ((li as u64) << 32) ^ rep as u64;
            let (outcomes, wall) = run_level(&url, &bodies, level, until, seed);
            let mut run_tokens = 0;
            for o in &outcomes {
                requests += 1;
                match o {
                    Ok(s) => {
                        run_tokens += s.tokens;
                        ttft.push(s.ttft * 1e3);
                        gaps.extend(s.gaps.iter().map(|g| g * 1e3));
                        tpot.extend(s.tpot.map(|t| t * 1e3));
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| e.clone());
                    }
                }
            }
            tokens += run_tokens;
            if run_tokens > 0 {
                tput.push(run_tokens as f64 / wall.max(1e-9));
            }
        }
        if ttft.is_empty() {
            bail!(
                "every request failed at {level}; the first: {}\n{}",
                first_error.unwrap_or_default(),
                server.log_tail()
            );
        }
        if let Some(e) = &first_error {
            eprintln!(
                "bench serve: {errors} of {requests} requests failed at {level}; the first: {e}"
            );
        }
        let mut params = json!({"new_tokens": args.new_tokens,
                                "prompt": args.load.prompt_text.as_deref().map_or("random", |_| "text")});
        match &args.load.prompt_text {
            Some(t) => params["prompt_text"] = json!(t),
            None => params["input_len"] = json!(args.load.input_len),
        }
        match level {
            Level::Closed(c) => {
                params["mode"] = json!("closed");
                params["concurrency"] = json!(c);
            }
            Level::Open(r) => {
                params["mode"] = json!("open");
                params["rate"] = json!(r);
            }
        }
        match until {
            Until::Requests(n) => params["requests"] = json!(n),
            Until::Secs(s) => params["duration_s"] = json!(s),
        }
        // The server speculates by default (`serve.speculative`); each row says how.
        let spec = match ctx.cfg.serve.speculative.as_str() {
            "off" => "off".to_string(),
            m => format!("{m} k={}", ctx.cfg.serve.speculative_k),
        };
        let counts = json!({"requests": requests, "errors": errors, "speculative": spec});
        let with = |metric: &str| {
            let mut p = params.clone();
            p["metric"] = json!(metric);
            p
        };
        let merge = |mut a: Value, b: &Value| {
            for (k, v) in b.as_object().into_iter().flatten() {
                a[k] = v.clone();
            }
            a
        };
        let mut r = ctx
            .env
            .row("serve", with("throughput"), Stats::of(&tput), "tok/s", None);
        r.extra = Some(merge(json!({"output_tokens": tokens}), &counts));
        rows.push(r);
        let mut r = ctx
            .env
            .row("serve", with("ttft"), Stats::of(&ttft), "ms", None);
        r.extra = Some(merge(percentiles(&ttft), &counts));
        rows.push(r);
        if !gaps.is_empty() {
            let mut r = ctx
                .env
                .row("serve", with("itl"), Stats::of(&gaps), "ms", None);
            let mut e = merge(percentiles(&gaps), &counts);
            e["chunks"] = json!(gaps.len() + ttft.len());
            e["tokens"] = json!(tokens);
            e["tpot_p50"] = json!(percentile(&tpot, 50.0));
            r.extra = Some(e);
            rows.push(r);
        }
    }
    drop(server);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_levels_and_validation() {
        use clap::Parser;
        #[derive(Parser)]
        struct A {
            #[command(flatten)]
            b: BenchArgs,
        }
        let parse = |s: &[&str]| A::try_parse_from(s).map(|a| levels(&a.b));
        let l = parse(&["x", "serve"]).unwrap().unwrap();
        assert_eq!(l.len(), 7);
        let l = parse(&["x", "serve", "--rate", "2,4"]).unwrap().unwrap();
        assert!(matches!(l[..], [Level::Open(_), Level::Open(_)]));
        let l = parse(&["x", "serve", "--rate", "2", "--concurrency", "3"])
            .unwrap()
            .unwrap();
        assert!(matches!(l[..], [Level::Closed(3), Level::Open(_)]));
        assert!(parse(&["x", "serve", "--concurrency", "0"])
            .unwrap()
            .is_err());
        assert!(parse(&["x", "serve", "--rate", "0"]).unwrap().is_err());
    }
}
