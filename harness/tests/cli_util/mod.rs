//! Running the built `memra` binary from integration tests, with the environment variables it
//! reads (and proxies) removed so a developer's settings cannot leak in.

#![allow(dead_code)]

use std::process::{Command, Output, Stdio};

/// Runs the memra binary with a clean environment for the settings it reads.
pub fn memra(args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memra"));
    c.args(args).stdin(Stdio::null());
    for v in [
        "MEMRA_CONFIG",
        "MEMRA_CACHE_DIR",
        "MEMRA_PYTHON",
        "HF_ENDPOINT",
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        c.env_remove(v);
    }
    c.output().expect("run memra")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "memra failed: {}\nstderr:\n{}",
        o.status,
        stderr(&o)
    );
    o
}

pub fn failed(o: Output) -> String {
    assert!(
        !o.status.success(),
        "memra should fail; stdout: {}",
        stdout(&o)
    );
    assert_eq!(stdout(&o), "", "nothing on stdout when failing");
    stderr(&o)
}
