//! The serving gate (issue: gates item 5): the same greedy and seeded-sampled prompts sent to a
//! running `memra serve`, first one at a time and then all at once, as streams; every stream's
//! text and logprobs must be byte-identical between the two arms.

use super::spec::GateSpec;
use super::Outcome;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `memra serve` child process, killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(model: &Path, canary: bool) -> Result<Server> {
        let exe = std::env::current_exe().context("locating the memra binary")?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "--backend",
            super::arms::lane_name(),
            "--gpu-memory-utilization",
            "0.3",
            "--kv-cache-mib",
            "256",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ])
        .arg("--model")
        .arg(model)
        .arg("--exit-with-stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if canary {
            cmd.args(["--sched-canary", "shared-rng"]);
        }
        let mut child = cmd.spawn().context("starting memra serve")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let base = line
            .trim()
            .strip_prefix("memra serve: listening on ")
            .with_context(|| format!("unexpected server output {line:?}"))?
            .to_string();
        let server = Server { child, base };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = ureq::get(&format!("{}/readyz", server.base)).call() {
                if r.status() == 200 {
                    return Ok(server);
                }
            }
            if Instant::now() > deadline {
                bail!("memra serve did not become ready in 120 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// One streamed completion: the concatenated text and the logprobs objects, in order.
    fn stream(&self, body: &Value) -> Result<(String, Vec<Value>)> {
        let resp = ureq::post(&format!("{}/v1/completions", self.base))
            .set("Content-Type", "application/json")
            .send_string(&body.to_string())
            .map_err(|e| anyhow::anyhow!("request failed: {e}"))?;
        let mut text = String::new();
        let mut logprobs = Vec::new();
        for line in BufReader::new(resp.into_reader()).lines() {
            let line = line?;
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            if data == "[DONE]" {
                break;
            }
            let chunk: Value = serde_json::from_str(data).context("SSE chunk is not JSON")?;
            for c in chunk["choices"].as_array().into_iter().flatten() {
                text.push_str(c["text"].as_str().unwrap_or(""));
                if !c["logprobs"].is_null() {
                    logprobs.push(c["logprobs"].clone());
                }
            }
        }
        Ok((text, logprobs))
    }
}

/// Runs the serving gate: `n_prompts` greedy and `n_prompts` seeded requests.
pub fn run(g: &GateSpec, model: &Path, texts: &[String], canary: bool) -> Result<Outcome> {
    let server = Server::start(model, canary)?;
    let s = g.sampling.as_ref();
    let bodies: Vec<Value> = texts
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            let greedy = json!({"prompt": t, "max_tokens": g.max_tokens, "temperature": 0,
                "stream": true, "logprobs": 2});
            let seeded = json!({"prompt": t, "max_tokens": g.max_tokens,
                "temperature": s.map_or(0.8, |s| s.temperature),
                "top_p": s.map_or(1.0, |s| s.top_p),
                "seed": s.map_or(0, |s| s.seed) + i as u64,
                "stream": true, "logprobs": 2});
            [greedy, seeded]
        })
        .collect();
    let one_at_a_time: Vec<(String, Vec<Value>)> = bodies
        .iter()
        .map(|b| server.stream(b))
        .collect::<Result<_>>()?;
    let all_at_once: Vec<Result<(String, Vec<Value>)>> = std::thread::scope(|sc| {
        let handles: Vec<_> = bodies
            .iter()
            .map(|b| sc.spawn(|| server.stream(b)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| bail!("client thread panicked")))
            .collect()
    });
    let _ = server.child.stdin.as_ref().map(|mut s| s.flush());
    for (i, (a, b)) in one_at_a_time.iter().zip(all_at_once).enumerate() {
        let b = b?;
        let kind = if i % 2 == 0 { "greedy" } else { "seeded" };
        if a.0 != b.0 {
            let at =
                a.0.bytes()
                    .zip(b.0.bytes())
                    .take_while(|(x, y)| x == y)
                    .count();
            return Ok(Outcome {
                green: false,
                compared: i,
                diff: None,
                detail: format!(
                    "request {} ({kind}): text differs at byte {at}: alone {:?} vs concurrent {:?}",
                    i / 2,
                    &a.0[at.min(a.0.len())..]
                        .chars()
                        .take(20)
                        .collect::<String>(),
                    &b.0[at.min(b.0.len())..]
                        .chars()
                        .take(20)
                        .collect::<String>()
                ),
            });
        }
        if serde_json::to_string(&a.1)? != serde_json::to_string(&b.1)? {
            let pos = a.1.iter().zip(&b.1).take_while(|(x, y)| x == y).count();
            return Ok(Outcome {
                green: false,
                compared: i,
                diff: None,
                detail: format!("request {} ({kind}): logprobs differ at chunk {pos}", i / 2),
            });
        }
    }
    Ok(Outcome {
        green: true,
        compared: one_at_a_time.len(),
        diff: None,
        detail: format!(
            "{} streams ({} greedy, {} seeded): text and logprobs byte-identical alone and all at once",
            one_at_a_time.len(),
            texts.len(),
            texts.len()
        ),
    })
}
