//! Tests of the typed configuration (`super`).
use super::*;

#[test]
fn file_then_flags_override_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("memra.toml");
    std::fs::write(&p, "prefill_chunk = 64\nkv_cache_mib = 8\n").unwrap();
    let args = ConfigArgs {
        config: Some(p.clone()),
        prefill_chunk: Some(7),
        ..Default::default()
    };
    let c = args.resolve().unwrap();
    assert_eq!(
        (c.prefill_chunk, c.kv_cache_mib, c.kv_block_size),
        (7, 8, 16)
    );
    std::fs::write(&p, "prefil_chunk = 64\n").unwrap();
    let e = ConfigArgs {
        config: Some(p),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(format!("{e:#}").contains("prefil_chunk"), "{e:#}");
}

#[test]
fn serve_table_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("memra.toml");
    std::fs::write(
        &p,
        "[serve]\nport = 9000\nmax_running = 3\nmodels = [\"a=x.gguf\"]\n",
    )
    .unwrap();
    let args = ConfigArgs {
        config: Some(p.clone()),
        port: Some(9100),
        ..Default::default()
    };
    let c = args.resolve().unwrap();
    assert_eq!((c.serve.port, c.serve.max_running), (9100, 3));
    assert_eq!(c.serve.models, ["a=x.gguf"]);
    assert_eq!(
        c.serve.queue_capacity,
        ServeConfig::default().queue_capacity
    );
    std::fs::write(&p, "[serve]\nprot = 1\n").unwrap();
    let e = ConfigArgs {
        config: Some(p),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(format!("{e:#}").contains("prot"), "{e:#}");
    // A queue of 0 would refuse every request with 429 while /readyz says ready.
    let e = ConfigArgs {
        queue_capacity: Some(0),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("serve.queue_capacity") && msg.contains("must be positive"),
        "{msg}"
    );
}

/// (path, text) of every .cu, .cuh and .rs file under these directories of the workspace.
fn sources_under(dirs: &[&str]) -> Vec<(std::path::PathBuf, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut sources = Vec::new();
    let mut dirs: Vec<_> = dirs.iter().map(|d| root.join(d)).collect();
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("cu" | "cuh" | "rs")
            ) {
                let text = std::fs::read_to_string(&p).unwrap();
                sources.push((p, text));
            }
        }
    }
    sources
}

/// The host mirrors a kernel's built-in define values where it sizes launches and shared memory
/// (`define("X", N)` in the engine, `get("X", N)` in the config's fit checks): each such N must
/// be the kernels' `#ifndef X` / `#define X N`, or a kernel and its launch disagree once one of
/// them changes (ATTN_ROWS_Q and ATTN_ROWS_MINB are mirrored in three places).
#[test]
fn host_mirrors_of_kernel_defaults_agree() {
    let mut kernel: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (_, text) in sources_under(&["kernels"]) {
        let lines: Vec<&str> = text.lines().collect();
        for w in lines.windows(2) {
            let (Some(name), Some(def)) =
                (w[0].strip_prefix("#ifndef "), w[1].strip_prefix("#define "))
            else {
                continue;
            };
            if let Some(Ok(v)) = def
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix(' '))
                .map(str::parse::<u32>)
            {
                kernel.entry(name.to_string()).or_default().push(v);
            }
        }
    }
    let mut checked = 0;
    for (path, text) in sources_under(&["engine/src", "harness/src"]) {
        for call in ["define(\"", "get(\""] {
            for (at, _) in text.match_indices(call) {
                let rest = &text[at + call.len()..];
                let Some((name, tail)) = rest.split_once("\", ") else {
                    continue;
                };
                let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
                let (Some(vals), Ok(n)) = (kernel.get(name), digits.parse::<u32>()) else {
                    continue;
                };
                if !tail[digits.len()..].starts_with(')') {
                    continue;
                }
                assert!(
                    vals.iter().all(|&v| v == n),
                    "{}: {name} defaults to {n} on the host, {vals:?} in kernels/",
                    path.display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 50, "only {checked} host mirrors found");
}

/// Every define whose built-in value is 0 (a kernel's `#ifndef X` / `#define X 0`, or the
/// engine's `define("X", 0)`) takes "0" in a config file: a device's tuned defaults may turn it
/// on (PDL, QTC_Q8_M1 on the H200), and a user must be able to turn it back off. Found by
/// reading the sources, so a new switch cannot be forgotten in the config's ranges.
#[test]
fn defines_off_by_default_accept_zero() {
    let sources: Vec<String> = sources_under(&["kernels", "engine/src"])
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    let mut zero: Vec<&str> = Vec::new();
    for name in KERNEL_DEFINES {
        let kernel = format!("#ifndef {name}\n#define {name} 0\n");
        let engine = format!("define(\"{name}\", 0)");
        if sources
            .iter()
            .any(|s| s.contains(&kernel) || s.contains(&engine))
        {
            zero.push(name);
        }
    }
    for name in ["PDL", "QTC_Q8_M1", "QTC_WT_ALT", "TCK_FUSE", "TCK_CLUSTER"] {
        assert!(zero.contains(&name), "{name} not found off by default");
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("memra.toml");
    for name in zero {
        std::fs::write(&p, format!("[kernel_defines]\n{name} = \"0\"\n")).unwrap();
        let r = ConfigArgs {
            config: Some(p.clone()),
            ..Default::default()
        }
        .resolve();
        assert!(r.is_ok(), "{name} = \"0\": {:#}", r.err().unwrap());
    }
}

/// Each kernel define kind takes its own range: switches 0/1, QTC_Q8_M1 0 or 2, QTC_XSPLIT 1..=3, QTC_GEMM 0..=3,
/// QTC_SK 0..=3, TCG2_STAGES and TCW_STAGES 2..=8, TCK_STAGES 2..=16, TCK_UB 1..=8, TCW_UPB and
/// TCW_UPB_Q 1..=4 (TCW_STAGES at least twice each, TCW_WG at most 2 above 1), TCW_WG and TCK_WG 1..=3, ATTN_VBATCH 1..=16, QLIN_M1_PREFETCH, TCK_MIN_MB and QTC_GEMM_MIN_BIG from 0, sizes from 1, and the wgmma split-K form's
/// combinations (TCK_STAGES above TCK_UB, twice it with TCK_BULK, TCK_UB at most 4 with
/// TCK_LDG, not TCK_LDG and TCK_BULK both); anything else names the define.
#[test]
fn kernel_define_values_are_checked_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("memra.toml");
    // No tuned defaults: the combination rules are checked as the configuration resolves.
    let resolve = |body: &str| {
        std::fs::write(&p, format!("[kernel_defines]\n{body}\n")).unwrap();
        ConfigArgs {
            config: Some(p.clone()),
            device_defaults: Some("none".into()),
            ..Default::default()
        }
        .resolve()
        .map_err(|e| format!("{e:#}"))
    };
    for ok in [
        "QTC = \"1\"",
        "QTC_DB = \"0\"",
        "QTC_XSPLIT = \"2\"",
        "QTC_SPLIT = \"4\"",
        "QLIN_M1_PREFETCH = \"0\"",
        "QLIN_M1_PREFETCH = \"16\"",
        "ATTN_KV16W = \"0\"",
        "ATTN_V16W = \"1\"",
        "ATTN_VBATCH = \"16\"",
        "ATTN_WIDE_SPLITS = \"0\"",
        "ATTN_WIDE_SPLITS = \"32\"",
        "ATTN_WIDE_ROWS_F16 = \"32\"",
        "ATTN_KORDER = \"0\"",
        "QTC_TOKFAST = \"1\"",
        "QTC_GEMM = \"1\"",
        "QTC_GEMM = \"2\"",
        "TCG2_KU = \"2\"",
        "TCG2_STAGES = \"3\"",
        "QTC_GEMM_MIN = \"128\"",
        "QTC_GEMM_MIN_BIG = \"0\"",
        "QTC_GEMM_MIN_BIG = \"128\"",
        "QTC_Q8_0 = \"0\"",
        "QTC_Q4_K = \"1\"",
        "QTC_Q4_K = \"2\"",
        "QTC_Q4_UNROLL = \"4\"",
        "QTC_GEMM_XASYNC = \"1\"",
        "QTC_SPLIT_BIG = \"0\"",
        "QTC_SPLIT_BIG = \"4\"",
        "QTC_BIG_ROWS = \"16384\"",
        "QTC_SK = \"2\"",
        "QTC_SK = \"3\"",
        "QTC_SK_MIN = \"17\"",
        "TCK_WG = \"1\"",
        "TCW_UPB = \"2\"",
        "TCW_CLUSTER = \"1\"",
        "TCK_STAGES = \"16\"",
        "TCK_UB = \"2\"",
        "TCK_MIN_MB = \"0\"",
        "TCK_MIN_MB = \"40\"",
        "TCK_Q8_0 = \"0\"",
        "TCS_GLU = \"1\"",
        "TCS_ROPE = \"1\"",
        "QTC_Q8_UNROLL = \"2\"",
        "QTC_Q8_UNROLL_NT = \"2\"",
        "QTC_Q8_UNROLL_BIG = \"4\"",
        "QTC_Q8_DB_BIG = \"0\"",
        "QTC_Q8_M1 = \"2\"",
    ] {
        let c = resolve(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        assert_eq!(c.kernel_defines.len(), 1, "{ok}");
    }
    let c = resolve("TCW_UPB = \"2\"\nTCW_STAGES = \"6\"").expect("two units, six stages");
    resolve("TCW_UPB_Q = \"3\"\nTCW_STAGES = \"6\"\nTCW_UPB = \"1\"")
        .expect("three quantized units");
    resolve("TCW_UPB_Q = \"1\"\nTCW_WG = \"3\"").expect("one unit, three warpgroups");
    resolve("TCW_BULK = \"1\"\nTCW_WS = \"1\"").expect("warp-specialized");
    resolve("TCW_BULK = \"1\"\nTCW_WS = \"1\"\nTCW_CLUSTER = \"1\"")
        .expect("warp-specialized cluster");
    resolve("TCW_BULK = \"1\"\nTCW_WS = \"1\"\nTCW_TMA = \"1\"\nTCW_CLUSTER = \"1\"")
        .expect("tensor copies, cluster");
    resolve("ATTN_ROWS = \"64\"\nATTN_TILE = \"1\"\nATTN_TILE_ROWS = \"8\"")
        .expect("the tiled rows entry");
    resolve(
        "ATTN_ROWS = \"64\"\nATTN_TILE = \"1\"\nATTN_TILE_ROWS = \"8\"\nATTN_TILE_MINB = \"2\"",
    )
    .expect("two tiled blocks of 8 rows an SM");
    resolve(
        "TCW_BULK = \"1\"\nTCW_WS = \"1\"\nTCW_TMA = \"1\"\nTCW_WS_Q = \"0\"\nTCW_UPB_Q = \"2\"",
    )
    .expect("tensor copies for BF16, the quantized entries on the ring, two units a group");
    assert_eq!(
        c.kernel_defines.get("TCW_STAGES").map(String::as_str),
        Some("6")
    );
    for (bad, says) in [
        ("QTC = \"2\"", "\"0\" or \"1\""),
        ("QTC_Q8_M1 = \"3\"", "one-token loop"),
        ("QTC_Q8_M1 = \"1\"", "was removed"),
        ("QTC_SK = \"4\"", "wgmma, every matrix"),
        ("TCK_WG = \"0\"", "TCK_WG must be 1 to 3"),
        ("TCK_STAGES = \"17\"", "TCK_STAGES must be 2 to 16"),
        ("TCK_STAGES = \"4\"", "must be more than TCK_UB (4)"),
        ("TCK_UB = \"9\"", "TCK_UB must be 1 to 8"),
        ("TCK_CLUSTER = \"2\"", "\"0\" or \"1\""),
        ("TCK_CL_UB = \"0\"", "TCK_CL_UB must be 1 to 8"),
        ("TCK_CL_MAX = \"17\"", "TCK_CL_MAX must be 2 to 16"),
        ("TCK_CL_STAGES = \"1\"", "TCK_CL_STAGES must be 2 to 16"),
        (
            "TCK_CLUSTER = \"1\"\nTCK_BULK = \"1\"\nTCK_CL_STAGES = \"5\"",
            "TCK_CL_STAGES (5) must be more than TCK_CL_UB (3), at least twice",
        ),
        ("TCK_LDG = \"2\"", "\"0\" or \"1\""),
        ("TCK_BULK = \"2\"", "\"0\" or \"1\""),
        ("TCK_Q8_0 = \"2\"", "\"0\" or \"1\""),
        (
            "QTC_Q4_K = \"3\"",
            "\"2\" (also the wgmma split-K and GEMM forms",
        ),
        ("TCS_GLU = \"2\"", "\"0\" or \"1\""),
        ("TCS_ROPE = \"2\"", "\"0\" or \"1\""),
        ("TCK_MIN_MB = \"65537\"", "TCK_MIN_MB"),
        ("QTC_GEMM_MIN_BIG = \"65537\"", "QTC_GEMM_MIN_BIG"),
        ("TCK_LDG = \"1\"\nTCK_BULK = \"1\"", "set one"),
        (
            "TCK_BULK = \"1\"\nTCK_STAGES = \"6\"",
            "at least twice TCK_UB (4)",
        ),
        (
            "TCK_LDG = \"1\"\nTCK_UB = \"8\"\nTCK_STAGES = \"16\"",
            "at most 4 with TCK_LDG",
        ),
        ("QTC_Q8_DB_BIG = \"2\"", "\"0\" or \"1\""),
        ("QTC_Q8_DB = \"2\"", "\"0\" or \"1\""),
        ("QTC_Q8_UNROLL = \"0\"", "positive integer"),
        ("QTC_XSPLIT = \"4\"", "QTC_XSPLIT must be"),
        ("QTC_XSPLIT = \"0\"", "QTC_XSPLIT must be"),
        ("QTC_SPLIT = \"0\"", "positive integer"),
        ("ATTN_KV16W = \"8\"", "\"0\" or \"1\""),
        ("ATTN_V16W = \"2\"", "\"0\" or \"1\""),
        ("ATTN_VBATCH = \"0\"", "ATTN_VBATCH must be 1 to 16"),
        ("ATTN_VBATCH = \"17\"", "ATTN_VBATCH must be 1 to 16"),
        ("ATTN_HEADS_WIDE = \"16\"", "ATTN_HEADS_WIDE must be 1 to 8"),
        ("ATTN_ROWS_Q = \"0\"", "ATTN_ROWS_Q must be 1 to 8"),
        ("ATTN_ROWS_MINB = \"5\"", "ATTN_ROWS_MINB must be 1 to 4"),
        ("ATTN_TILE = \"1\"", "ATTN_TILE = 1 needs ATTN_ROWS > 0"),
        (
            "ATTN_TILE = \"1\"\nATTN_ROWS = \"64\"\nATTN_TILE_ROWS = \"3\"",
            "= 12 must be 16, 32, 48 or 64",
        ),
        ("ATTN_TILE_ROWS = \"17\"", "ATTN_TILE_ROWS must be 1 to 16"),
        ("ATTN_TILE_MINB = \"3\"", "ATTN_TILE_MINB must be 1 or 2"),
        (
            "ATTN_TILE = \"1\"\nATTN_ROWS = \"64\"\nATTN_TILE_MINB = \"2\"",
            "ATTN_TILE_MINB = 2 blocks of 136320 bytes",
        ),
        (
            "ATTN_SPLIT = \"512\"\nATTN_ROWS = \"64\"\nATTN_ROWS_Q = \"8\"",
            "ATTN_ROWS_Q x ATTN_ROWS_HEADS = 32 needs 397568 bytes",
        ),
        ("QTC_GEMM = \"4\"", "wgmma"),
        ("TCW_WG = \"4\"", "TCW_WG must be 1 to 3"),
        ("TCW_STAGES = \"1\"", "TCW_STAGES must be 2 to 8"),
        ("TCW_UPB = \"5\"", "TCW_UPB must be 1 to 4"),
        ("TCW_CLUSTER = \"2\"", "\"0\" or \"1\""),
        (
            "TCW_CLUSTER = \"1\"\nTCW_BULK = \"1\"",
            "TCW_CLUSTER = 1 needs TCW_BULK = 0",
        ),
        (
            "TCW_CLUSTER = \"1\"\nTCW_UPB_Q = \"2\"",
            "TCW_CLUSTER = 1 needs TCW_BULK = 0",
        ),
        (
            "TCW_CLUSTER = \"1\"\nTCW_STAGES = \"2\"",
            "TCW_STAGES of at least 3",
        ),
        ("TCW_WS = \"1\"", "TCW_WS = 1 needs TCW_BULK = 1"),
        (
            "TCW_WS = \"1\"\nTCW_BULK = \"1\"\nTCW_UPB_Q = \"2\"",
            "TCW_WS = 1 needs TCW_BULK = 1",
        ),
        (
            "TCW_WS = \"1\"\nTCW_BULK = \"1\"\nTCW_WG = \"3\"",
            "TCW_WG at most 2",
        ),
        ("TCW_WS = \"2\"", "\"0\" or \"1\""),
        (
            "TCW_TMA = \"1\"\nTCW_BULK = \"1\"",
            "TCW_TMA = 1 needs TCW_WS = 1",
        ),
        ("TCW_TMA = \"2\"", "\"0\" or \"1\""),
        (
            "TCW_WS = \"1\"\nTCW_BULK = \"1\"\nTCW_WS_Q = \"1\"\nTCW_UPB_Q = \"2\"",
            "unless TCW_WS_Q = 0",
        ),
        ("TCW_WS_Q = \"1\"", "TCW_WS_Q = 1 needs TCW_WS = 1"),
        ("TCW_PP = \"1\"", "TCW_PP = 1 needs TCW_WS = 1"),
        (
            "TCW_PP = \"1\"\nTCW_WS = \"1\"\nTCW_BULK = \"1\"\nTCW_WG = \"1\"",
            "TCW_PP = 1 needs TCW_WS = 1, TCW_WG = 2",
        ),
        ("TCW_PP = \"2\"", "\"0\" or \"1\""),
        (
            "TCW_WS = \"1\"\nTCW_BULK = \"1\"\nTCW_WS_Q = \"0\"\nTCW_CLUSTER = \"1\"\nTCW_UPB_Q = \"2\"",
            "TCW_CLUSTER = 1 needs",
        ),
        ("TCW_WS_Q = \"2\"", "\"0\" or \"1\""),
        ("TCW_UPB = \"0\"", "TCW_UPB must be 1 to 4"),
        ("TCW_UPB_Q = \"5\"", "TCW_UPB_Q must be 1 to 4"),
        (
            "TCW_UPB_Q = \"3\"",
            "TCW_STAGES (4) must be at least twice TCW_UPB_Q (3)",
        ),
        (
            "TCW_UPB = \"3\"\nTCW_UPB_Q = \"1\"",
            "TCW_STAGES (4) must be at least twice TCW_UPB (3)",
        ),
        (
            "TCW_UPB = \"3\"\nTCW_UPB_Q = \"1\"\nTCW_STAGES = \"6\"\nTCW_WG = \"3\"",
            "TCW_UPB above 1 needs TCW_WG at most 2",
        ),
        (
            "TCW_UPB_Q = \"2\"\nTCW_WG = \"3\"",
            "TCW_UPB_Q above 1 needs TCW_WG at most 2",
        ),
        (
            "TCW_UPB = \"3\"\nTCW_STAGES = \"5\"",
            "TCW_STAGES (5) must be at least twice TCW_UPB (3)",
        ),
        (
            "TCW_UPB = \"2\"\nTCW_STAGES = \"3\"",
            "TCW_STAGES (3) must be at least twice TCW_UPB (2)",
        ),
        (
            "TCW_UPB = \"2\"\nTCW_WG = \"3\"",
            "TCW_UPB above 1 needs TCW_WG at most 2",
        ),
        ("TCG2_STAGES = \"1\"", "TCG2_STAGES must be 2 to 8"),
        ("TCG2_KU = \"0\"", "positive integer"),
        ("QTC_TILES = \"2\"", "unknown define"),
        (
            "ATTN_SPLIT = \"512\"\nATTN_WIDE_SPLITS = \"32\"",
            "ATTN_HEADS_WIDE = 4 needs 51456 bytes",
        ),
        (
            "ATTN_SPLIT = \"512\"\nATTN_HEADS = \"8\"",
            "ATTN_HEADS = 8 needs",
        ),
    ] {
        let e = resolve(bad).expect_err(bad);
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn kv_cache_dtype_is_f32_or_f16() {
    assert_eq!(Config::default().kv_cache_dtype, "f32");
    let with = |v: &str| {
        ConfigArgs {
            kv_cache_dtype: Some(v.into()),
            ..Default::default()
        }
        .resolve()
        .map_err(|e| format!("{e:#}"))
    };
    let c = with("f16").unwrap();
    assert_eq!(
        (c.kv_cache_dtype.as_str(), c.source("kv_cache_dtype")),
        ("f16", "flag")
    );
    let e = with("bf16").unwrap_err();
    assert!(e.contains("kv_cache_dtype must be f32 or f16"), "{e}");
    // The CUDA kernels see it as KV_F16.
    let opts = crate::backends::kernel_options(&c, &[]);
    assert_eq!(opts.defines.get("KV_F16").map(String::as_str), Some("1"));
    let plain = crate::backends::kernel_options(&Config::default(), &[]);
    assert!(!plain.defines.contains_key("KV_F16"));
}

#[test]
fn serve_speculative_default_and_validation() {
    use memra_engine::spec::{SpecMethod, SpecParams};
    let d = Config::default().serve.default_spec().unwrap();
    assert_eq!(d, Some(SpecParams::parse("ngram", 4).unwrap().by_policy()));
    assert!(
        !d.unwrap().explicit,
        "the server's default is the policy's choice"
    );
    let with = |m: &str, k: Option<usize>, draft: Option<&str>| {
        ConfigArgs {
            speculative: Some(m.into()),
            speculative_k: k,
            draft_model: draft.map(Into::into),
            ..Default::default()
        }
        .resolve()
        .map_err(|e| format!("{e:#}"))
    };
    assert_eq!(
        with("off", None, None).unwrap().serve.default_spec(),
        Ok(None)
    );
    let c = with("layerskip:3", Some(2), None).unwrap();
    let p = c.serve.default_spec().unwrap().unwrap();
    assert_eq!((p.method, p.k), (SpecMethod::LayerSkip { layers: 3 }, 2));
    assert_eq!(c.source("serve.speculative"), "flag");
    for (m, k) in [("medusa", None), ("ngram", Some(0)), ("ngram", Some(17))] {
        let e = with(m, k, None).unwrap_err();
        assert!(e.contains("serve.speculative"), "{m} {k:?}: {e}");
    }
    let e = with("draft", None, None).unwrap_err();
    assert!(e.contains("needs serve.draft_model"), "{e}");
    assert!(with("draft", None, Some("smollm2-135m-instruct")).is_ok());
}

#[test]
fn cuda_graph_max_batch_from_file_flag_and_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("memra.toml");
    assert_eq!(Config::default().cuda_graph_max_batch, 32);
    std::fs::write(
        &p,
        "cuda_graph_max_batch = 8
",
    )
    .unwrap();
    let from_file = ConfigArgs {
        config: Some(p.clone()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(from_file.cuda_graph_max_batch, 8);
    assert!(from_file
        .source("cuda_graph_max_batch")
        .contains("config file"));
    let c = ConfigArgs {
        config: Some(p.clone()),
        cuda_graph_max_batch: Some(0),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(
        (c.cuda_graph_max_batch, c.source("cuda_graph_max_batch")),
        (0, "flag")
    );
    std::fs::write(
        &p,
        "cuda_graph_max_batch = 300
",
    )
    .unwrap();
    let e = ConfigArgs {
        config: Some(p),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(format!("{e:#}").contains("at most 256"), "{e:#}");
    // A device defaults file may set it, 0 included; out of range is an error naming the key.
    let mut t = Config::default();
    t.set_tuned("cuda_graph_max_batch", &toml::Value::Integer(0))
        .unwrap();
    assert_eq!(t.cuda_graph_max_batch, 0);
    let e = t
        .set_tuned("cuda_graph_max_batch", &toml::Value::Integer(-1))
        .unwrap_err();
    assert!(format!("{e:#}").contains("cuda_graph_max_batch"), "{e:#}");
}

#[test]
fn cuda_graph_bucket_from_file_flag_and_defaults() {
    assert_eq!(Config::default().cuda_graph_bucket, 1);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("memra.toml");
    std::fs::write(&p, "cuda_graph_bucket = 8\n").unwrap();
    let from_file = ConfigArgs {
        config: Some(p.clone()),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(from_file.cuda_graph_bucket, 8);
    let flag = ConfigArgs {
        config: Some(p.clone()),
        cuda_graph_bucket: Some(16),
        ..Default::default()
    }
    .resolve()
    .unwrap();
    assert_eq!(
        (flag.cuda_graph_bucket, flag.source("cuda_graph_bucket")),
        (16, "flag")
    );
    let zero = ConfigArgs {
        cuda_graph_bucket: Some(0),
        ..Default::default()
    }
    .resolve()
    .unwrap_err();
    assert!(
        format!("{zero:#}").contains("cuda_graph_bucket must be 1 to 256"),
        "{zero:#}"
    );
    let mut t = Config::default();
    t.set_tuned("cuda_graph_bucket", &toml::Value::Integer(8))
        .unwrap();
    assert_eq!(t.cuda_graph_bucket, 8);
    assert!(t
        .set_tuned("cuda_graph_bucket", &toml::Value::Integer(0))
        .is_err());
}
