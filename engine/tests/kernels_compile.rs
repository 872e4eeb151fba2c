//! CI kernel-compile test (no GPU needed): NVRTC from the PyPI wheels `nvidia-cuda-nvrtc==13.0.88`
//! (libnvrtc) and `nvidia-cuda-runtime==13.0.96` (headers) compiles every `kernels/*.cu` for every
//! architecture we ship to, and prints each kernel's registers and spills for sm_90a.
//!
//! NVRTC is found through `MEMRA_NVRTC_DIR` (a directory with `lib/libnvrtc.so.13` and
//! `include/cuda_fp16.h`), else `<site-packages>/nvidia/cu13` from `python3`. The loader reads
//! `LD_LIBRARY_PATH` only at process start, so when it lacks `<dir>/lib` the test re-runs itself
//! with it set. A missing NVRTC is a failure, never a skip.

use memra_engine::backend::cuda::compile::{
    compile, compile_uncached, nvrtc_available, nvrtc_version, parse_ptxas_report, ImageKind,
    KernelOptions, KernelSource, KERNELS,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const ARCHS: [&str; 4] = ["sm_90a", "sm_120a", "sm_89", "sm_80"];
const REEXEC: &str = "MEMRA_NVRTC_TEST_CHILD";

fn nvrtc_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("MEMRA_NVRTC_DIR") {
        return PathBuf::from(d);
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13'))",
        ])
        .output()
        .expect("python3 must run to locate the nvidia-cuda-nvrtc wheel");
    assert!(
        out.status.success(),
        "cannot import the `nvidia` package: pip install nvidia-cuda-nvrtc==13.0.88 \
         nvidia-cuda-runtime==13.0.96 (or set MEMRA_NVRTC_DIR)\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Returns the NVRTC dir when this process can load libnvrtc; otherwise re-runs `test` in a child
/// with `LD_LIBRARY_PATH` set, asserts it passed, and returns `None`.
fn nvrtc_or_reexec(test: &str) -> Option<PathBuf> {
    let dir = nvrtc_dir();
    let lib = dir.join("lib");
    assert!(
        lib.join("libnvrtc.so.13").is_file(),
        "{} has no libnvrtc.so.13: pip install nvidia-cuda-nvrtc==13.0.88",
        lib.display()
    );
    assert!(
        dir.join("include/cuda_fp16.h").is_file(),
        "{} has no cuda_fp16.h: pip install nvidia-cuda-runtime==13.0.96",
        dir.join("include").display()
    );
    let ld = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    if std::env::var_os(REEXEC).is_some() || std::env::split_paths(&ld).any(|p| p == lib) {
        assert!(
            nvrtc_available(),
            "libnvrtc cannot be loaded from {}",
            lib.display()
        );
        return Some(dir);
    }
    let new_ld =
        std::env::join_paths(std::iter::once(lib.clone()).chain(std::env::split_paths(&ld)))
            .expect("LD_LIBRARY_PATH");
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("LD_LIBRARY_PATH", new_ld)
        .env(REEXEC, "1")
        .output()
        .expect("re-run the test binary");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{test} failed with libnvrtc from {}",
        lib.display()
    );
    None
}

fn options(dir: &std::path::Path) -> KernelOptions {
    KernelOptions {
        include_paths: vec![dir.join("include")],
        defines: BTreeMap::new(),
        cache_dir: None,
    }
}

#[test]
fn every_kernel_compiles_for_every_arch() {
    let Some(dir) = nvrtc_or_reexec("every_kernel_compiles_for_every_arch") else {
        return;
    };
    let opts = options(&dir);
    println!("NVRTC {:?} from {}", nvrtc_version(), dir.display());
    let mut failures = Vec::new();
    for k in KERNELS {
        for arch in ARCHS {
            for kind in [ImageKind::Ptx, ImageKind::Cubin] {
                match compile_uncached(k, arch, kind, &opts) {
                    Ok(c) => {
                        assert!(!c.image.is_empty());
                        if arch == "sm_90a" && kind == ImageKind::Cubin {
                            let regs = parse_ptxas_report(&c.log);
                            assert!(
                                !regs.is_empty(),
                                "no ptxas report for {}:\n{}",
                                k.name,
                                c.log
                            );
                            for r in regs {
                                println!(
                                    "sm_90a {:<10} {:<24} {:>3} registers, {:>3} B stack, \
                                     spill {} B stores / {} B loads",
                                    k.name,
                                    r.function,
                                    r.registers,
                                    r.stack_frame,
                                    r.spill_stores,
                                    r.spill_loads
                                );
                            }
                        }
                    }
                    Err(e) => failures.push(format!("{} {arch} {kind:?}: {e}", k.name)),
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "kernel compile failures:\n{}",
        failures.join("\n")
    );
}

#[test]
fn compile_errors_name_the_file_and_the_cache_round_trips() {
    let Some(dir) = nvrtc_or_reexec("compile_errors_name_the_file_and_the_cache_round_trips")
    else {
        return;
    };
    let broken = KernelSource {
        name: "broken.cu",
        src: "#include \"common.cuh\"\nextern \"C\" __global__ void f(float* x) { x[0] = y; }\n",
    };
    let err = compile_uncached(&broken, "sm_90a", ImageKind::Ptx, &options(&dir))
        .expect_err("undeclared identifier must fail")
        .to_string();
    assert!(
        err.contains("broken.cu") && err.contains("identifier"),
        "{err}"
    );

    let cache = tempfile::tempdir().expect("tempdir");
    let mut opts = options(&dir);
    opts.cache_dir = Some(cache.path().to_path_buf());
    opts.defines.insert("LIN_TOKENS".into(), "4".into());
    let k = &KERNELS[0];
    let first = compile(k, "sm_80", ImageKind::Cubin, &opts).expect("compile");
    let second = compile(k, "sm_80", ImageKind::Cubin, &opts).expect("cached");
    assert!(!first.cached && second.cached && first.image == second.image);
    opts.defines.insert("LIN_TOKENS".into(), "8".into());
    assert!(
        !compile(k, "sm_80", ImageKind::Cubin, &opts)
            .expect("other key")
            .cached
    );
    assert_eq!(std::fs::read_dir(cache.path()).expect("dir").count(), 2);
}

/// The linear kernels' opt-in switches change which code is compiled: each set still compiles
/// for sm_90a, and the entries they touch do not spill (QLIN_INT's integer digits, the L2 prefetch, QLIN_MT, the
/// tensor-core kernels' double buffering and two-part x split); ptxas serializes no wgmma.
#[test]
fn linear_switches_compile() {
    let Some(dir) = nvrtc_or_reexec("linear_switches_compile") else {
        return;
    };
    let sets: [&[(&str, &str)]; 46] = [
        &[
            ("QTC_SK_WT", "2"),
            ("QTC_SK_DB", "0"),
            ("QTC_SK_WARPS", "16"),
            ("QTC_XSPLIT", "3"),
        ],
        // The split-K form as h200_run52.sh measures it: the H200's defines, 4 and 8 units.
        &[("QTC_XSPLIT", "2"), ("QTC_UNROLL", "1")],
        &[
            ("QTC_XSPLIT", "2"),
            ("QTC_UNROLL", "1"),
            ("QTC_SK_UNROLL", "8"),
        ],
        // The Q8_0 tensor-core entries' own load groups, as h200_run54.sh measures them (the
        // H200's defines with QTC_Q8_0 = 1).
        &[
            ("QTC_SPLIT", "16"),
            ("QTC_SPLIT_BIG", "4"),
            ("QTC_XSPLIT", "2"),
            ("QTC_UNROLL", "1"),
            ("QTC_DB_BIG", "1"),
            ("QTC_Q8_UNROLL", "4"),
            ("QTC_Q8_UNROLL_NT", "2"),
            ("QTC_Q8_UNROLL_BIG", "2"),
            ("QTC_M1_PREFETCH", "4"),
        ],
        &[
            ("QTC_SPLIT", "16"),
            ("QTC_SPLIT_BIG", "4"),
            ("QTC_XSPLIT", "2"),
            ("QTC_UNROLL", "1"),
            ("QTC_Q8_UNROLL", "8"),
            ("QTC_Q8_UNROLL_BIG", "4"),
            ("QTC_Q8_DB_BIG", "0"),
        ],
        // The `_m1` entries of QTC_Q8_M1 = 2: over the H200's defines; double-buffered with 3
        // units a group (full groups, then the slice's last units one at a time); beside the
        // `_alt` entries; with 3 parts and one row tile, where a group of 4 units does not fit
        // the warp's staging area and the entry keeps the general loop.
        &[
            ("QTC_SPLIT", "16"),
            ("QTC_SPLIT_BIG", "4"),
            ("QTC_XSPLIT", "2"),
            ("QTC_UNROLL", "1"),
            ("QTC_DB_BIG", "1"),
            ("QTC_Q8_UNROLL", "2"),
            ("QTC_Q8_M1", "2"),
        ],
        &[
            ("QTC_SPLIT", "16"),
            ("QTC_XSPLIT", "2"),
            ("QTC_UNROLL", "1"),
            ("QTC_Q8_UNROLL", "3"),
            ("QTC_Q8_DB", "1"),
            ("QTC_Q8_M1", "2"),
        ],
        &[
            ("QTC_SPLIT", "16"),
            ("QTC_XSPLIT", "2"),
            ("QTC_UNROLL", "1"),
            ("QTC_Q8_UNROLL", "2"),
            ("QTC_WT_ALT", "3"),
            ("QTC_Q8_M1", "2"),
        ],
        &[("QTC_XSPLIT", "3"), ("QTC_WT", "1"), ("QTC_Q8_M1", "2")],
        &[("QLIN_INT", "1")],
        &[("QLIN_INT", "1"), ("QLIN_FACTOR", "0"), ("QLIN_MT", "1")],
        // The one-token lanes loop at 2 units and 2 rows a warp.
        &[
            ("QLIN_INT", "1"),
            ("QLIN_M1_UNROLL", "2"),
            ("LIN_ROWS_M1", "2"),
        ],
        &[
            ("QLIN_M1_PREFETCH", "16"),
            ("QLIN_M1_WARPS_BIGK", "16"),
            ("QLIN_M1_PREFETCH_BIGK", "4"),
        ],
        &[("QTC_DB", "1"), ("QTC_XSPLIT", "2"), ("QTC_UNROLL", "2")],
        &[("QTC_WT", "4"), ("QTC_UNROLL", "2")],
        &[("QTC_XSPLIT", "1"), ("QTC_TOKFAST", "1"), ("QTC_GEMM", "1")],
        &[("QTC_GEMM_XASYNC", "1")],
        // The second tiled form (kernels/linear_tcg.cu) as h200_run59.sh measures it: 2 parts
        // with 1 and 2 units a stage, and 1 part.
        &[("QTC_GEMM", "2"), ("QTC_XSPLIT", "2")],
        &[
            ("QTC_GEMM", "2"),
            ("QTC_XSPLIT", "2"),
            ("TCG2_KU", "2"),
            ("TCG2_STAGES", "3"),
        ],
        &[("QTC_GEMM", "2"), ("QTC_XSPLIT", "1"), ("TCG2_STAGES", "3")],
        // The wgmma form (kernels/linear_tcw.cu) with 2 and 3 warpgroups a block, and with two
        // and three units between barriers (TCW_UPB) on cp.async and on bulk copies.
        &[("QTC_GEMM", "3"), ("QTC_XSPLIT", "2")],
        &[
            ("QTC_GEMM", "3"),
            ("QTC_XSPLIT", "2"),
            ("TCW_UPB", "2"),
            ("TCW_UPB_Q", "3"),
            ("TCW_STAGES", "6"),
        ],
        // Clusters of 2 sharing x by multicast bulk copies (TCW_CLUSTER), 3 parts and Q4_K.
        &[
            ("QTC_GEMM", "3"),
            ("QTC_Q4_K", "2"),
            ("TCW_CLUSTER", "1"),
            ("TCW_STAGES", "5"),
        ],
        // Warp specialization: a producer warp's bulk copies on full/empty barriers (TCW_WS),
        // 2 parts and Q4_K.
        &[
            ("QTC_GEMM", "3"),
            ("QTC_XSPLIT", "2"),
            ("QTC_Q4_K", "2"),
            ("TCW_BULK", "1"),
            ("TCW_WS", "1"),
        ],
        // The same in clusters of 2, the producer warps multicasting x (TCW_CLUSTER on TCW_WS).
        &[
            ("QTC_GEMM", "3"),
            ("QTC_XSPLIT", "2"),
            ("QTC_Q4_K", "2"),
            ("TCW_BULK", "1"),
            ("TCW_WS", "1"),
            ("TCW_CLUSTER", "1"),
            ("TCW_STAGES", "5"),
        ],
        // Its copies as tensor copies through tensor maps (TCW_TMA), 2 parts, BF16 alone (TCW_WS_Q
        // = 0: Q8_0 and Q4_K on the cp.async ring, two units a group); then in clusters of 2, 3
        // parts, every format.
        &[
            ("QTC_GEMM", "3"),
            ("QTC_XSPLIT", "2"),
            ("QTC_Q4_K", "2"),
            ("TCW_BULK", "1"),
            ("TCW_WS", "1"),
            ("TCW_TMA", "1"),
            ("TCW_WS_Q", "0"),
            ("TCW_UPB_Q", "2"),
        ],
        // The same with the two warpgroups taking turns at the tensor pipe (TCW_PP, BF16).
        &[
            ("QTC_GEMM", "3"),
            ("QTC_XSPLIT", "2"),
            ("TCW_BULK", "1"),
            ("TCW_WS", "1"),
            ("TCW_TMA", "1"),
            ("TCW_WS_Q", "0"),
            ("TCW_UPB_Q", "2"),
            ("TCW_PP", "1"),
        ],
        &[
            ("QTC_GEMM", "3"),
            ("QTC_Q4_K", "2"),
            ("TCW_BULK", "1"),
            ("TCW_WS", "1"),
            ("TCW_TMA", "1"),
            ("TCW_CLUSTER", "1"),
            ("TCW_STAGES", "5"),
        ],
        &[
            ("QTC_GEMM", "3"),
            ("QTC_Q4_K", "2"),
            ("TCW_UPB", "3"),
            ("TCW_STAGES", "6"),
            ("TCW_BULK", "1"),
        ],
        &[
            ("QTC_GEMM", "3"),
            ("QTC_XSPLIT", "2"),
            ("TCW_WG", "3"),
            ("TCW_BULK", "1"),
        ],
        // The wgmma split-K form (linear_tck_*, kernels/linear_tck.cu; its entries are built in
        // every set): 3 warpgroups with 16-slot rings, and 1 warpgroup with 2 slots in 1 part.
        &[
            ("QTC_SK", "3"),
            ("QTC_XSPLIT", "2"),
            ("TCK_WG", "3"),
            ("TCK_STAGES", "16"),
        ],
        &[
            ("QTC_XSPLIT", "1"),
            ("TCK_WG", "1"),
            ("TCK_STAGES", "2"),
            ("TCK_UB", "1"),
        ],
        // Its register-loading and bulk-copy variants.
        &[("QTC_XSPLIT", "2"), ("TCK_LDG", "1")],
        &[("QTC_XSPLIT", "2"), ("TCK_BULK", "1"), ("TCK_STAGES", "16")],
        // The H200 default since run 72: bulk copies, 8 stages, 3 warpgroups, 3 parts; and the
        // H200 defaults with the reduce inside the form (TCK_FUSE).
        &[("QTC_SK", "3"), ("TCK_BULK", "1"), ("TCK_WG", "3")],
        &[
            ("QTC_SK", "3"),
            ("QTC_XSPLIT", "2"),
            ("TCK_BULK", "1"),
            ("TCK_WG", "3"),
            ("TCK_FUSE", "1"),
        ],
        // The one-token entries with 3 row tiles a block beside QTC_WT's 2 (QTC_WT_ALT), at the
        // H200's load groups (BF16 with the kernel's default of 4 units spills 40 bytes at 3).
        &[
            ("QTC_SPLIT", "16"),
            ("QTC_XSPLIT", "2"),
            ("QTC_UNROLL", "1"),
            ("QTC_Q8_UNROLL", "2"),
            ("QTC_WT_ALT", "3"),
        ],
        // The cluster entries (TCK_CLUSTER: the split-K reduce through a thread-block cluster)
        // at the H200 defaults, and on register loads with 2 warpgroups.
        &[
            ("QTC_SK", "3"),
            ("QTC_XSPLIT", "2"),
            ("TCK_BULK", "1"),
            ("TCK_WG", "3"),
            ("TCK_CLUSTER", "1"),
        ],
        &[("TCK_WG", "2"), ("TCK_LDG", "1"), ("TCK_CLUSTER", "1")],
        // TCK_FUSE on the cp.async ring (2 warpgroups, 3 parts) and on register loads.
        &[("TCK_WG", "2"), ("TCK_FUSE", "1")],
        &[("TCK_WG", "1"), ("TCK_LDG", "1"), ("TCK_FUSE", "1")],
        &[
            ("QTC_SPLIT", "16"),
            ("QTC_SPLIT_BIG", "4"),
            ("QTC_UNROLL", "1"),
            ("QTC_DB_BIG", "1"),
        ],
        &[("QLIN_INT", "1"), ("QIMMA_TILES", "2"), ("QIMMA_PF", "0")],
        &[("QLIN_INT", "1"), ("QIMMA_BPF", "1")],
        // Q4_K on the tensor-core one-token entries (QTC_Q4_K) with their own load groups, over
        // the H200's tensor-core defines (at 2 units `_n1` gets 64 registers and spills 16 bytes:
        // ptxas's choice, NVRTC 13.0).
        &[
            ("QTC", "1"),
            ("QTC_Q4_K", "1"),
            ("QTC_SPLIT", "16"),
            ("QTC_SPLIT_BIG", "4"),
            ("QTC_XSPLIT", "2"),
            ("QTC_UNROLL", "1"),
            ("QTC_Q4_UNROLL", "4"),
            ("QTC_Q4_UNROLL_NT", "2"),
        ],
        // Q4_K on the wgmma split-K and GEMM forms too (QTC_Q4_K = 2; their entries are built in
        // every set) over the H200's defines: bulk copies, 3 warpgroups, 2 parts.
        &[
            ("QTC", "1"),
            ("QTC_Q4_K", "2"),
            ("QTC_SK", "3"),
            ("QTC_GEMM", "3"),
            ("QTC_XSPLIT", "2"),
            ("TCK_BULK", "1"),
            ("TCK_WG", "3"),
            ("QTC_Q4_UNROLL", "4"),
        ],
    ];
    for set in sets {
        let mut opts = options(&dir);
        for (k, v) in set {
            opts.defines.insert(k.to_string(), v.to_string());
        }
        for name in [
            "linear.cu",
            "linear_tc.cu",
            "linear_tct.cu",
            "linear_tcs.cu",
            "linear_tcg.cu",
            "linear_tcw.cu",
            "linear_tck.cu",
            "linear_int.cu",
        ] {
            let k = KERNELS.iter().find(|k| k.name == name).expect(name);
            let c = compile_uncached(k, "sm_90a", ImageKind::Cubin, &opts)
                .unwrap_or_else(|e| panic!("{name} with {set:?}: {e}"));
            let report = parse_ptxas_report(&c.log);
            assert!(!report.is_empty(), "{name}: no ptxas report");
            // ptxas makes every wgmma wait for the one before when it cannot prove the pending
            // MMAs' registers untouched (its C7513-C7515 notes): the pipelined forms' speed.
            assert!(
                !c.log.contains("are serialized"),
                "{name} with {set:?}: ptxas serialized wgmma:\n{}",
                c.log
                    .lines()
                    .filter(|l| l.contains("serialized"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            // The repacked and tensor-core entries are what the switches touch (linear_q6_k spills
            // 4 bytes with the defaults too).
            let touched = |f: &str| {
                f.contains("_r") || f.starts_with("linear_tc") || f.starts_with("linear_imma")
            };
            // TCK_FUSE's reduce is a call (`tck_fused_reduce`, __noinline__) from a loop; at the
            // 168-register cap of 3 warpgroups the call's register saves may spill a few words
            // (the 32-token entries with the H200 set: 4 bytes BF16, 40 Q8_0; 3 parts: 96 and
            // 116); with fewer warpgroups nothing. Nothing else may spill.
            // The Q4_K entries (QTC_Q4_K = 2), with their unit factors and Σx, spill 80 / 100
            // there (n32; n16 12 / 12): TCK_FUSE is off in every shipped set.
            let fused = set.contains(&("TCK_FUSE", "1")) && set.contains(&("TCK_WG", "3"));
            for r in report.iter().filter(|r| touched(&r.function)) {
                let cap = match (fused, r.function.starts_with("linear_tck_")) {
                    (true, true) if r.function.contains("_q4_k_") => 96,
                    (true, true) => 64,
                    _ => 0,
                };
                assert!(
                    r.spill_stores <= cap && r.spill_loads <= 2 * cap,
                    "{name} {} spills {} / {} bytes with {set:?}",
                    r.function,
                    r.spill_stores,
                    r.spill_loads
                );
            }
        }
    }
}

/// The attention kernels compile for sm_90a with the f32 and the f16 KV cache (`KV_F16 = 1`,
/// config `kv_cache_dtype = "f16"`), 1, 2, 4 or 8 query heads a block (`ATTN_HEADS`), with and
/// without the L2 prefetch of K and V rows (`ATTN_PF`; with the f16 cache the 16-byte V loads,
/// `ATTN_V16W`, take the same value, and the V sum's load batch `ATTN_VBATCH` is 16), with the wide entries (`ATTN_WIDE_ROWS`, with the f16 cache `ATTN_WIDE_ROWS_F16`; `ATTN_WIDE_SPLITS` compiles the same ones): every entry is
/// there and the attention entries spill nothing; and the prefill rows entry (`ATTN_ROWS`), alone and
/// with the score loop's skip (`ATTN_SKIP`).
#[test]
fn attention_variants_compile() {
    let Some(dir) = nvrtc_or_reexec("attention_variants_compile") else {
        return;
    };
    let k = KERNELS
        .iter()
        .find(|k| k.name == "attention.cu")
        .expect("attention.cu");
    let report = |f16: bool, heads: u32, pf: u32| {
        let mut opts = options(&dir);
        if f16 {
            opts.defines.insert("KV_F16".into(), "1".into());
            opts.defines.insert("ATTN_V16W".into(), pf.to_string());
        }
        opts.defines.insert("ATTN_HEADS".into(), heads.to_string());
        opts.defines.insert("ATTN_PF".into(), pf.to_string());
        // The weighted V sum's load batch: 16 with the prefetch, the format's default without.
        if pf == 1 {
            opts.defines.insert("ATTN_VBATCH".into(), "16".into());
        }
        // The wide entries (compiled only when a step may take them).
        // With the f16 cache through ATTN_WIDE_ROWS_F16, which compiles them too.
        let wide = if f16 {
            "ATTN_WIDE_ROWS_F16"
        } else {
            "ATTN_WIDE_ROWS"
        };
        opts.defines.insert(wide.into(), "32".into());
        let c = compile_uncached(k, "sm_90a", ImageKind::Cubin, &opts).unwrap_or_else(|e| {
            panic!("attention.cu (KV_F16 {f16}, ATTN_HEADS {heads}, ATTN_PF {pf}): {e}")
        });
        let mut r: Vec<(String, u32)> = parse_ptxas_report(&c.log)
            .iter()
            .map(|r| (r.function.clone(), r.spill_stores + r.spill_loads))
            .collect();
        r.sort();
        r
    };
    let names = |r: &[(String, u32)]| r.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    let base = report(false, 1, 0);
    assert!(base.len() >= 5, "attention entries: {base:?}");
    for f16 in [false, true] {
        for heads in [1, 2, 4, 8] {
            for pf in [0, 1] {
                let r = report(f16, heads, pf);
                assert_eq!(names(&r), names(&base));
                for (f, spill) in r.iter().filter(|(f, _)| f.starts_with("attn_")) {
                    assert_eq!(
                        *spill, 0,
                        "{f} spills {spill} bytes (KV_F16 {f16}, ATTN_HEADS {heads}, ATTN_PF {pf})"
                    );
                }
            }
        }
    }
    // The prefill rows entry (ATTN_ROWS > 0; 2 rows of 4 heads a block, 2 blocks an SM, by default) with each
    // cache format's own defaults: there, and no spill (ATTN_PF with a V batch of 16 and
    // ATTN_KV16W spill 40 and 72 bytes in it at NVRTC 13.0; both are off by default). Then the same
    // with the score loop's skip of groups without keys (ATTN_SKIP = 1) and the tiled rows entry
    // (ATTN_TILE = 1, attn_tile_f32): no attention entry spills.
    for (f16, skip) in [(false, 0), (true, 0), (false, 1), (true, 1)] {
        let mut opts = options(&dir);
        opts.defines
            .insert("KV_F16".into(), u32::from(f16).to_string());
        opts.defines.insert("ATTN_HEADS".into(), "2".into());
        opts.defines.insert("ATTN_ROWS".into(), "64".into());
        opts.defines.insert("ATTN_SKIP".into(), skip.to_string());
        opts.defines.insert("ATTN_TILE".into(), skip.to_string());
        // With the skip, the tiled entry's own module too (16, 4, 12 and 8 rows a block).
        let tile = KERNELS
            .iter()
            .find(|k| k.name == "attention_tile.cu")
            .expect("attention_tile.cu");
        let mut files = vec![(k, "attn_rows_f32", opts.clone())];
        if skip == 1 {
            files.push((tile, "attn_tile_f32", opts.clone()));
            // 4 rows (one slot a thread) and 12 (3 slots a thread across two rows: the V
            // loop's generic path, a key range test a slot).
            for rows in ["4", "12"] {
                let mut o = opts.clone();
                o.defines.insert("ATTN_TILE_ROWS".into(), rows.into());
                files.push((tile, "attn_tile_f32", o));
            }
            // 8 rows, two blocks an SM: 128 registers a thread. NVRTC 13.0 spills a few of the
            // running V sums around the once-a-split merge (164 bytes stored), none in the loops.
            let mut o = opts.clone();
            o.defines.insert("ATTN_TILE_ROWS".into(), "8".into());
            o.defines.insert("ATTN_TILE_MINB".into(), "2".into());
            files.push((tile, "attn_tile_f32", o));
        }
        for (file, entry, opts) in files {
            let c = compile_uncached(file, "sm_90a", ImageKind::Cubin, &opts).unwrap_or_else(|e| {
                panic!(
                    "{} (KV_F16 {f16}, ATTN_ROWS 64, ATTN_SKIP {skip}): {e}",
                    file.name
                )
            });
            let report = parse_ptxas_report(&c.log);
            assert_eq!(
                report.iter().filter(|r| r.function == entry).count(),
                1,
                "{entry} (KV_F16 {f16}): {}",
                c.log
            );
            let spill_cap = if opts.defines.contains_key("ATTN_TILE_MINB") {
                512
            } else {
                0
            };
            for r in report.iter().filter(|r| r.function.starts_with("attn_")) {
                assert!(
                    r.spill_stores + r.spill_loads <= spill_cap,
                    "{} spills (KV_F16 {f16}, ATTN_ROWS 64, ATTN_SKIP {skip}, {:?} rows, {:?} blocks)",
                    r.function,
                    opts.defines.get("ATTN_TILE_ROWS"),
                    opts.defines.get("ATTN_TILE_MINB")
                );
            }
        }
    }
}
