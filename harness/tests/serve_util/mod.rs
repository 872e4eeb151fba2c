//! Helpers for the `memra serve` tests: start the built binary on a free port with the real
//! SmolLM2 model, wait until it is ready, and talk HTTP to it (ureq).
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The alias the servers give the model.
pub const MODEL: &str = "smollm2";

/// Path of the pulled SmolLM2 model: `$MEMRA_CACHE_DIR` or `~/.cache/memra`. Panics with the
/// command to run when it is missing (a test that silently skips cannot fail).
pub fn model_path() -> PathBuf {
    let name = "smollm2-135m-instruct";
    let cache = std::env::var_os("MEMRA_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/memra")
        });
    let p = cache.join("models").join(name).join(format!("{name}.gguf"));
    assert!(
        p.exists(),
        "{} is missing: run `memra pull {name}` (or set MEMRA_CACHE_DIR)",
        p.display()
    );
    p
}

/// A chat request asking `q`, with `extra` parameters merged in.
pub fn chat_body(q: &str, extra: Value) -> Value {
    let mut b = serde_json::json!({"model": MODEL, "messages": [{"role": "user", "content": q}]});
    merge(&mut b, extra);
    b
}

/// The message content of choice `i` of a chat answer.
pub fn content(v: &Value, i: usize) -> String {
    v["choices"][i]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content in {v}"))
        .to_string()
}

/// Merges the keys of `extra` into the object `base` (null removes a key).
pub fn merge(base: &mut Value, extra: Value) {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        for (k, v) in e {
            if v.is_null() {
                b.remove(&k);
            } else {
                b.insert(k, v);
            }
        }
    }
}

/// A running `memra serve`.
pub struct Server {
    child: Child,
    /// Kept open: the server exits when it closes (`--exit-with-stdin`), so a server outlives
    /// no test process.
    stdin: Option<ChildStdin>,
    pub base: String,
    pub agent: ureq::Agent,
    log: PathBuf,
}

/// A parsed SSE response.
pub struct Stream {
    pub content_type: String,
    /// JSON payloads of the `data:` lines, in order (without `[DONE]`).
    pub chunks: Vec<Value>,
    /// How many `data: [DONE]` lines came, and whether the last data line was one.
    pub done_count: usize,
}

/// The server most tests share: context 512, 64 MiB of KV.
pub fn shared() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| Server::start(&["--context-len", "512"]))
}

impl Server {
    /// Starts `memra serve` on a free port with the model as [`MODEL`] and waits for /readyz.
    pub fn start(extra: &[&str]) -> Server {
        let log = std::env::temp_dir().join(format!(
            "memra-serve-test-{}-{}.log",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let model = format!("{MODEL}={}", model_path().display());
        let mut c = Command::new(env!("CARGO_BIN_EXE_memra"));
        c.args([
            "serve",
            "--model",
            &model,
            "--port",
            "0",
            "--kv-cache-mib",
            "64",
            "--exit-with-stdin",
        ])
        .args(extra)
        .env("MEMRA_LOG", "memra=debug,info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
        for v in ["MEMRA_CONFIG", "MEMRA_API_KEY"] {
            c.env_remove(v);
        }
        let mut child = c.spawn().expect("start memra serve");
        let stdin = child.stdin.take();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let base = line
            .trim()
            .strip_prefix("memra serve: listening on ")
            .unwrap_or_else(|| {
                panic!(
                    "unexpected first line {line:?}; log: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            })
            .to_string();
        std::thread::spawn(move || {
            let mut sink = String::new();
            while out.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        let s = Server {
            child,
            stdin,
            base,
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(300))
                .build(),
            log,
        };
        let t0 = Instant::now();
        while s.get("/readyz").0 != 200 {
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "not ready: {}",
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    /// The server's stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Absolute URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// POSTs JSON; returns the status and the JSON answer (errors included).
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        match self.agent.post(&self.url(path)).send_json(body.clone()) {
            Ok(r) => (r.status(), r.into_json().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap()),
            Err(e) => panic!("POST {path}: {e}\n{}", self.log_text()),
        }
    }

    /// POSTs raw bytes as JSON; returns the status and the JSON answer.
    pub fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        let req = self
            .agent
            .post(&self.url(path))
            .set("content-type", "application/json");
        match req.send_string(body) {
            Ok(r) => (r.status(), r.into_json().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_json().unwrap()),
            Err(e) => panic!("POST {path}: {e}"),
        }
    }

    /// Announces a JSON body of `len` bytes and reads the answer before sending it: a server
    /// that refuses by the length alone answers at once (and closes, so a client still writing
    /// would see a broken pipe instead of the answer).
    pub fn post_oversized(&self, path: &str, len: usize) -> (u16, Value) {
        use std::io::{Read, Write};
        let addr = self.base.strip_prefix("http://").unwrap();
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            tcp,
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             content-length: {len}\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        let _ = tcp.read_to_string(&mut answer);
        let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
        let code = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("a status line");
        (
            code,
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}")),
        )
    }

    /// GETs `path`; returns the status and the body text.
    pub fn get(&self, path: &str) -> (u16, String) {
        match self.agent.get(&self.url(path)).call() {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        }
    }

    /// GETs `path` as JSON.
    pub fn get_json(&self, path: &str) -> (u16, Value) {
        let (c, t) = self.get(path);
        (
            c,
            serde_json::from_str(&t).unwrap_or_else(|e| panic!("{path}: {e}: {t}")),
        )
    }

    /// POSTs a streaming request and reads the whole event stream, checking its framing: every
    /// event is `data: <json>` (or a keep-alive comment) followed by a blank line, and the last
    /// one is `data: [DONE]`.
    pub fn stream(&self, path: &str, body: &Value) -> Stream {
        let r = match self.agent.post(&self.url(path)).send_json(body.clone()) {
            Ok(r) => r,
            Err(e) => panic!("POST {path}: {e}"),
        };
        assert_eq!(r.status(), 200);
        let content_type = r.content_type().to_string();
        let text = r.into_string().unwrap();
        let mut chunks = Vec::new();
        let mut done_count = 0;
        let mut last_was_done = false;
        for event in text.split("\n\n").filter(|e| !e.is_empty()) {
            assert!(!event.contains('\n'), "one line per event: {event:?}");
            if event.starts_with(':') {
                continue;
            }
            let data = event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("bad event {event:?}"));
            if data == "[DONE]" {
                done_count += 1;
                last_was_done = true;
            } else {
                last_was_done = false;
                chunks.push(serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")));
            }
        }
        assert!(
            last_was_done,
            "the stream must end with data: [DONE]: {text}"
        );
        Stream {
            content_type,
            chunks,
            done_count,
        }
    }

    /// Sum of a metric's samples (all label sets).
    pub fn gauge(&self, name: &str) -> f64 {
        let (_, text) = self.get("/metrics");
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Waits until no sequence runs or waits and every used KV block is one the prefix cache
    /// holds; panics after `limit`.
    pub fn wait_idle(&self, limit: Duration) {
        let t0 = Instant::now();
        loop {
            let (run, queued) = (
                self.gauge("memra_running_sequences"),
                self.gauge("memra_queue_depth"),
            );
            let (used, cached) = (
                self.gauge("memra_kv_blocks_used"),
                self.gauge("memra_kv_blocks_prefix_cached"),
            );
            if run == 0.0 && queued == 0.0 && used == 0.0 {
                return;
            }
            assert!(
                t0.elapsed() < limit,
                "not idle after {limit:?}: running {run}, queued {queued}, blocks used {used}, cached {cached}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends a signal (`TERM`, `INT`) to the server.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }

    /// Waits for the server to exit; panics after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                t0.elapsed() < limit,
                "server still running: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}
