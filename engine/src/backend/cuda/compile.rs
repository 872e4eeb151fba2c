//! Kernel sources and their NVRTC compilation: every `kernels/*.cu` is embedded in the binary,
//! spliced with `kernels/common.cuh`, compiled for one architecture with the tuned constants as
//! `-D` defines, and cached on disk under a key of sha256(source, options, arch).
//!
//! Needs only libnvrtc (no driver, no GPU), so the CI kernel-compile test uses this module too.

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

/// One kernel file: its name (`norm.cu`) and its source text, embedded at build time.
#[derive(Debug, Clone, Copy)]
pub struct KernelSource {
    /// File name under `kernels/`, used in logs and error messages.
    pub name: &'static str,
    /// The `.cu` text as written (before `common.cuh` and `wgmma.cuh` are spliced in).
    pub src: &'static str,
}

/// The shared header every kernel file includes.
pub const COMMON_CUH: &str = include_str!("../../../../kernels/common.cuh");

/// Hopper's wgmma, mbarrier and bulk-copy helpers, included (after `common.cuh`) by the wgmma
/// GEMM files.
pub const WGMMA_CUH: &str = include_str!("../../../../kernels/wgmma.cuh");

/// Every kernel file of the engine.
pub const KERNELS: &[KernelSource] = &[
    KernelSource {
        name: "norm.cu",
        src: include_str!("../../../../kernels/norm.cu"),
    },
    KernelSource {
        name: "embed.cu",
        src: include_str!("../../../../kernels/embed.cu"),
    },
    KernelSource {
        name: "rope.cu",
        src: include_str!("../../../../kernels/rope.cu"),
    },
    KernelSource {
        name: "linear.cu",
        src: include_str!("../../../../kernels/linear.cu"),
    },
    KernelSource {
        name: "linear_int.cu",
        src: include_str!("../../../../kernels/linear_int.cu"),
    },
    KernelSource {
        name: "linear_tc.cu",
        src: include_str!("../../../../kernels/linear_tc.cu"),
    },
    KernelSource {
        name: "linear_tct.cu",
        src: include_str!("../../../../kernels/linear_tct.cu"),
    },
    KernelSource {
        name: "linear_tcs.cu",
        src: include_str!("../../../../kernels/linear_tcs.cu"),
    },
    KernelSource {
        name: "linear_tcg.cu",
        src: include_str!("../../../../kernels/linear_tcg.cu"),
    },
    KernelSource {
        name: "linear_tcw.cu",
        src: include_str!("../../../../kernels/linear_tcw.cu"),
    },
    KernelSource {
        name: "linear_tck.cu",
        src: include_str!("../../../../kernels/linear_tck.cu"),
    },
    KernelSource {
        name: "splitk_reduce.cu",
        src: include_str!("../../../../kernels/splitk_reduce.cu"),
    },
    KernelSource {
        name: "attention.cu",
        src: include_str!("../../../../kernels/attention.cu"),
    },
    KernelSource {
        name: "attention_tile.cu",
        src: include_str!("../../../../kernels/attention_tile.cu"),
    },
    KernelSource {
        name: "kv_append.cu",
        src: include_str!("../../../../kernels/kv_append.cu"),
    },
    KernelSource {
        name: "act.cu",
        src: include_str!("../../../../kernels/act.cu"),
    },
    KernelSource {
        name: "sample.cu",
        src: include_str!("../../../../kernels/sample.cu"),
    },
];

/// The kernel file called `name` (`"norm.cu"`).
pub fn kernel(name: &str) -> Result<&'static KernelSource> {
    KERNELS
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| Error::InvalidArgument(format!("no kernel file {name}")))
}

/// The NVRTC architecture for a compute capability: `sm_90a` for 9.0 (wgmma, setmaxnreg),
/// `sm_120a` for 12.0, otherwise `sm_XY`.
pub fn arch_for(major: i32, minor: i32) -> String {
    match (major, minor) {
        (9, 0) => "sm_90a".into(),
        (12, 0) => "sm_120a".into(),
        _ => format!("sm_{major}{minor}"),
    }
}

/// Where the CUDA headers usually are: `/usr/local/cuda/include`, kept only if it exists. Other
/// locations (`$CUDA_HOME`, the PyPI wheels) come from the caller's configuration.
pub fn default_include_paths() -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("/usr/local/cuda/include")];
    v.retain(|p| p.join("cuda_fp16.h").is_file());
    v
}

/// How kernels are compiled: header directories, tuned constants, cache location.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    /// Directories holding `cuda_fp16.h` and `cuda_bf16.h` (`/usr/local/cuda/include` on the GPU
    /// machine; `<site-packages>/nvidia/cu13/include` from the PyPI wheels).
    pub include_paths: Vec<PathBuf>,
    /// Compile-time constants, passed as `-DNAME=VALUE` (e.g. `LIN_TOKENS=8`). Sorted, so the
    /// cache key does not depend on insertion order.
    pub defines: BTreeMap<String, String>,
    /// Where compiled images are cached (the harness passes `<cache_dir>/kernels`); `None`
    /// disables the cache.
    pub cache_dir: Option<PathBuf>,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            include_paths: default_include_paths(),
            defines: BTreeMap::new(),
            cache_dir: None,
        }
    }
}

/// What NVRTC should produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// PTX text (`-arch=compute_XY`), JIT-compiled by the driver at load.
    Ptx,
    /// Machine code for one architecture (`-arch=sm_XY`), with the ptxas report in the log.
    Cubin,
}

/// One compiled kernel file.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// PTX text (NUL-terminated) or CUBIN bytes.
    pub image: Vec<u8>,
    /// Which of the two `image` is.
    pub kind: ImageKind,
    /// NVRTC's log (warnings; for a CUBIN, ptxas's register and spill lines). Empty on a cache hit.
    pub log: String,
    /// Whether the image came from the disk cache.
    pub cached: bool,
}

/// True when libnvrtc can be loaded (cudarc panics on first use otherwise).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The source NVRTC sees: `common.cuh` and `wgmma.cuh` spliced in place of their `#include`
/// lines (so NVRTC needs no include callback for the project's own headers).
pub fn full_source(k: &KernelSource) -> String {
    let common = COMMON_CUH.replace("#pragma once", "");
    let wgmma = WGMMA_CUH.replace("#pragma once", "");
    k.src
        .replace("#include \"common.cuh\"", &common)
        .replace("#include \"wgmma.cuh\"", &wgmma)
}

fn nvrtc_args(arch: &str, kind: ImageKind, opts: &KernelOptions) -> Vec<String> {
    let target = match kind {
        ImageKind::Ptx => arch.replacen("sm_", "compute_", 1),
        ImageKind::Cubin => arch.to_string(),
    };
    let mut a = vec![
        format!("--gpu-architecture={target}"),
        "--std=c++17".to_string(),
        "--fmad=true".to_string(),
    ];
    if kind == ImageKind::Cubin {
        a.push("--ptxas-options=-v".to_string());
    }
    for p in &opts.include_paths {
        a.push(format!("--include-path={}", p.display()));
    }
    for (k, v) in &opts.defines {
        a.push(format!("-D{k}={v}"));
    }
    a
}

/// The cache key: sha256 over the full source, the NVRTC options (include paths excluded: they
/// locate headers of one CUDA version, which the NVRTC version below stands for) and the arch.
pub fn cache_key(k: &KernelSource, arch: &str, kind: ImageKind, opts: &KernelOptions) -> String {
    let mut h = Sha256::new();
    h.update(full_source(k).as_bytes());
    h.update([0]);
    for a in nvrtc_args(arch, kind, opts) {
        if !a.starts_with("--include-path=") {
            h.update(a.as_bytes());
            h.update([0]);
        }
    }
    h.update(arch.as_bytes());
    h.update(format!("{:?}", nvrtc_version()).as_bytes());
    hex::encode(h.finalize())
}

/// NVRTC's (major, minor) version, or `None` when libnvrtc is missing.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    if !nvrtc_available() {
        return None;
    }
    let (mut a, mut b) = (0, 0);
    // SAFETY: the library is present; the out-pointers are valid.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut a, &mut b) };
    (r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((a, b))
}

/// Compiles `k` for `arch` (`sm_90a`, ...), through the disk cache when `opts.cache_dir` is set.
/// A compile error is an [`Error::Unsupported`] naming the file and arch and carrying NVRTC's log.
pub fn compile(
    k: &KernelSource,
    arch: &str,
    kind: ImageKind,
    opts: &KernelOptions,
) -> Result<Compiled> {
    let path = opts.cache_dir.as_ref().map(|d| {
        let ext = if kind == ImageKind::Ptx {
            "ptx"
        } else {
            "cubin"
        };
        d.join(format!(
            "{}-{arch}-{}.{ext}",
            k.name,
            cache_key(k, arch, kind, opts)
        ))
    });
    if let Some(p) = &path {
        if let Ok(image) = std::fs::read(p) {
            return Ok(Compiled {
                image,
                kind,
                log: String::new(),
                cached: true,
            });
        }
    }
    let c = compile_uncached(k, arch, kind, opts)?;
    if let Some(p) = &path {
        store(p, &c.image);
    }
    Ok(c)
}

/// Writes through a temporary file and a rename, so a concurrent reader never sees half a file.
/// A failure only costs a recompile next time, so it is logged, not returned.
fn store(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let r = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(&tmp, bytes))
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = r {
        tracing::warn!("kernel cache {}: {e}", path.display());
    }
}

/// Compiles with no cache.
pub fn compile_uncached(
    k: &KernelSource,
    arch: &str,
    kind: ImageKind,
    opts: &KernelOptions,
) -> Result<Compiled> {
    use cudarc::nvrtc::{result, sys};
    if !nvrtc_available() {
        return Err(Error::Unsupported(
            "libnvrtc not found (CUDA 13 NVRTC must be on the library path)".into(),
        ));
    }
    let fail = |what: &str, e: &dyn std::fmt::Debug| {
        Error::Unsupported(format!("NVRTC {what} for {} ({arch}): {e:?}", k.name))
    };
    let src = CString::new(full_source(k)).map_err(|e| fail("source", &e))?;
    let name = CString::new(k.name).map_err(|e| fail("name", &e))?;
    let args = nvrtc_args(arch, kind, opts);
    let prog = result::create_program(&src, Some(&name)).map_err(|e| fail("create", &e))?;
    // SAFETY: `prog` is live until destroy_program below; `src`/`name` outlive it.
    let compiled = unsafe { result::compile_program(prog, &args) };
    let log = unsafe { result::get_program_log(prog) }
        .map(|l| {
            // SAFETY: NVRTC NUL-terminates the log.
            unsafe { CStr::from_ptr(l.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let image = compiled.map_err(|e| {
        Error::Unsupported(format!(
            "NVRTC failed to compile {} for {arch} ({e:?}), options {args:?}:\n{log}",
            k.name
        ))
    });
    let image = image.and_then(|()| match kind {
        ImageKind::Ptx => unsafe { result::get_ptx(prog) }
            .map(|v| v.into_iter().map(|c| c as u8).collect())
            .map_err(|e| fail("get PTX", &e)),
        ImageKind::Cubin => {
            let mut n = 0usize;
            // SAFETY: `prog` compiled for a real arch; the buffer has the reported size.
            let mut buf;
            unsafe {
                sys::nvrtcGetCUBINSize(prog, &mut n)
                    .result()
                    .map_err(|e| fail("get CUBIN size", &e))?;
                buf = vec![0u8; n];
                sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast())
                    .result()
                    .map_err(|e| fail("get CUBIN", &e))?;
            }
            Ok(buf)
        }
    });
    // SAFETY: `prog` came from create_program and is destroyed once.
    let _ = unsafe { result::destroy_program(prog) };
    Ok(Compiled {
        image: image?,
        kind,
        log,
        cached: false,
    })
}

/// One kernel's line of ptxas's `-v` report, parsed from a CUBIN compile log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegReport {
    /// The `extern "C"` kernel name.
    pub function: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes spilled to local memory by stores (`spill stores`).
    pub spill_stores: u32,
    /// Bytes reloaded from spills (`spill loads`).
    pub spill_loads: u32,
    /// Stack frame bytes per thread.
    pub stack_frame: u32,
}

/// Parses ptxas `-v` output ("Compiling entry function 'x'", "N bytes stack frame, N bytes spill
/// stores, N bytes spill loads", "Used N registers"). A "Function properties for f" line names
/// the function the lines after it describe: an entry's own, or a called (`__noinline__`)
/// function's, which are no entry's and are skipped.
pub fn parse_ptxas_report(log: &str) -> Vec<RegReport> {
    let num_before = |line: &str, unit: &str| -> u32 {
        line.find(unit)
            .and_then(|i| line[..i].split_whitespace().last())
            .and_then(|w| w.parse().ok())
            .unwrap_or(0)
    };
    let mut out: Vec<RegReport> = Vec::new();
    // The entry the lines describe (None: a called function's lines).
    let mut cur: Option<usize> = None;
    for line in log.lines() {
        if let Some(i) = line.find("entry function '") {
            let rest = &line[i + "entry function '".len()..];
            let name = rest.split('\'').next().unwrap_or("").to_string();
            out.push(RegReport {
                function: name,
                registers: 0,
                spill_stores: 0,
                spill_loads: 0,
                stack_frame: 0,
            });
            cur = Some(out.len() - 1);
        } else if let Some(i) = line.find("Function properties for ") {
            let name = line[i + "Function properties for ".len()..].trim();
            cur = out.iter().rposition(|r| r.function == name);
        } else if let Some(r) = cur.and_then(|i| out.get_mut(i)) {
            if line.contains("stack frame") {
                r.stack_frame = num_before(line, "bytes stack frame");
                r.spill_stores = num_before(line, "bytes spill stores");
                r.spill_loads = num_before(line, "bytes spill loads");
            } else if line.contains("Used") && line.contains("registers") {
                r.registers = num_before(line, "registers");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each entry keeps its own figures; a called function's lines (here after the first entry's
    /// register line, as ptxas prints them) change no entry.
    #[test]
    fn ptxas_report_keeps_called_functions_apart() {
        let log = "\
ptxas info    : Compiling entry function 'linear_tck_bf16_n32' for 'sm_90a'
ptxas info    : Function properties for linear_tck_bf16_n32
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers, 8 bytes cumulative stack size
ptxas info    : Function properties for _Z16tck_fused_reducePKf
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'tcw_split_x' for 'sm_90a'
ptxas info    : Function properties for tcw_split_x
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 22 registers, used 0 barriers
";
        let r = parse_ptxas_report(log);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].function.as_str(), r[0].registers, r[0].stack_frame),
            ("linear_tck_bf16_n32", 168, 8)
        );
        assert_eq!((r[0].spill_stores, r[0].spill_loads), (4, 4));
        assert_eq!(
            (r[1].function.as_str(), r[1].registers),
            ("tcw_split_x", 22)
        );
        assert_eq!((r[1].spill_stores, r[1].spill_loads), (0, 0));
    }
}
