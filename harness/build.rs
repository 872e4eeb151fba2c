//! Records the commit the binary was built from (`MEMRA_BUILD_COMMIT`: short hash, `+dirty` when
//! tracked files differed from it), so rows written on another machine — where the repository may
//! be a copy without current git metadata — name the code that produced them.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    println!(
        "cargo:rustc-env=MEMRA_BUILD_COMMIT={commit}{}",
        if dirty { "+dirty" } else { "" }
    );
    embed_defaults();
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
    // An edit to the code the binary is built from changes `+dirty` without touching the index:
    // look again whenever these sources change (cargo compares the newest mtime under each).
    let root = manifest_dir().join("..");
    for d in [
        "engine/src",
        "kernels",
        "harness/src",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(d).display());
    }
}

/// The harness crate's directory: cargo runs a build script with its package's directory as the
/// working directory. Not `env!("CARGO_MANIFEST_DIR")`: that is fixed when the script is
/// compiled, and cargo reuses a compiled script for a clone of the workspace elsewhere that
/// shares the target directory (the CI clone under /tmp shares ~/.cache/memra-ci/target), so a
/// build here would read the clone's files, or none once the clone is gone (an H200 binary
/// without its defaults: run 66).
fn manifest_dir() -> std::path::PathBuf {
    std::env::current_dir().expect("the build script's working directory")
}

/// `OUT_DIR/embedded_defaults.rs`: `EMBEDDED`, every `boards/defaults/*.toml` as (stem, text).
/// Panics (fails the build) when the directory cannot be read or holds no file: a binary
/// without the tuned defaults would run portable defaults on every device without a word.
fn embed_defaults() {
    let dir = manifest_dir().join("../boards/defaults");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    assert!(
        !files.is_empty(),
        "no tuned defaults file in {}",
        dir.display()
    );
    files.sort();
    let mut code = String::from(
        "/// Every boards/defaults/*.toml, embedded at build time: (file stem, text).\npub const EMBEDDED: &[(&str, &str)] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        code += &format!(
            "    ({stem:?}, include_str!({:?})),\n",
            f.display().to_string()
        );
    }
    code += "];\n";
    let out = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR"))
        .join("embedded_defaults.rs");
    std::fs::write(out, code).expect("writing embedded_defaults.rs");
}
