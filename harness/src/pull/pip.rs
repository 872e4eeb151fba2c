//! Running pip: a presence check, and `pip download` of pinned wheels with clear errors.

use anyhow::{bail, Context, Result};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// How many of pip's last stderr lines a failure message quotes.
const TAIL_LINES: usize = 12;

/// Checks that `<python> -m pip --version` runs; otherwise fails with a message that says what
/// was tried and how to fix it.
pub fn check(python: &str) -> Result<()> {
    let out = Command::new(python)
        .args(["-m", "pip", "--version"])
        .stdin(Stdio::null())
        .output();
    let reason = match out {
        Ok(o) if o.status.success() => return Ok(()),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty());
            format!("{}: {}", o.status, last.unwrap_or("no output").trim())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => format!("{python}: not found"),
        Err(e) => format!("{python}: {e}"),
    };
    bail!("pip is not available (tried `{python} -m pip`): install pip or set --python ({reason})")
}

/// Runs `<python> -m pip download --no-deps --only-binary=:all: -d <dest> <packages...>`.
/// pip's stdout and stderr are shown on our stderr (stdout stays free for the result); on failure
/// the error quotes pip's last stderr lines and hints at the network or the package index.
pub fn download(python: &str, packages: &[String], dest: &Path) -> Result<()> {
    let mut child = Command::new(python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .arg("--disable-pip-version-check")
        .arg("-d")
        .arg(dest)
        .args(packages)
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting `{python} -m pip download`"))?;
    let pipe = child.stderr.take().expect("stderr is piped");
    // Echo pip's stderr as it comes and keep its tail for the error message.
    let tee = std::thread::spawn(move || {
        let mut tail = VecDeque::with_capacity(TAIL_LINES);
        let mut echo = std::io::stderr();
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(echo, "{line}");
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line);
        }
        tail
    });
    let status = child.wait().context("waiting for pip")?;
    let tail = tee.join().unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    let tail: Vec<String> = tail.into_iter().filter(|l| !l.trim().is_empty()).collect();
    let quoted = if tail.is_empty() {
        "    (pip wrote nothing to stderr)".to_string()
    } else {
        tail.iter()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    bail!(
        "`{python} -m pip download {}` failed ({status}); pip said:\n{quoted}\n\
         hint: pip needs to reach the package index: check the network connection, any proxy \
         settings, and PIP_INDEX_URL / pip.conf",
        packages.join(" ")
    )
}
