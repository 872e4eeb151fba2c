//! Which kernel defines a `memra tune` sweep can move for a model, and the value each has now
//! (the kernels' own default chains of kernels/linear_tc.cu).

use memra_engine::quant::DType;
use std::collections::BTreeMap;

/// One kernel-define sweep of `memra tune`: (define, candidates, the kernel's own default, what
/// is measured: Some(depth) = decode tok/s at that depth, None = TTFT of a 512-token prompt, the
/// decode batch).
pub(super) type KnobSweep = (&'static str, &'static [u32], u32, Option<usize>, usize);

/// The kernel-define sweeps of `memra tune --what kernels`, in order, each a [`KnobSweep`]. The
/// QLIN_* knobs act on Q8_0 and Q4_K matrices only (tune a model in those formats); QIMMA_* with
/// QLIN_INT = 1 only (decided before the sweeps). The tensor-core knobs (QTC_UNROLL ..
/// QTC_Q8_M1) change loads or instructions, never bits; each is swept on the format whose entries
/// it sets ([`sweep_applies`]). The decode batch is 1 but where a knob routes more rows (QTC_SK
/// routes 9-32 tokens, so bs=32).
pub(super) const SWEEPS: [KnobSweep; 34] = [
    ("LIN_TOKENS", &[4, 8, 16], 8, None, 1),
    ("QIMMA_TILES", &[1, 2], 1, None, 1),
    ("QIMMA_PF", &[0, 1], 1, None, 1),
    ("QIMMA_BPF", &[0, 1], 0, None, 1),
    ("LIN_ROWS", &[1, 2], 1, None, 1),
    ("QLIN_MT", &[0, 1], 0, None, 1),
    ("LIN_WARPS", &[2, 4, 8], 4, Some(128), 1),
    ("LIN_ROWS_M1", &[1, 2, 4], 1, Some(128), 1),
    ("QLIN_M1_WARPS", &[4, 8, 16], 8, Some(128), 1),
    ("QLIN_M1_UNROLL", &[2, 4, 8], 4, Some(128), 1),
    ("QLIN_M1_PREFETCH", &[0, 4, 16], 0, Some(128), 1),
    ("NORM_THREADS", &[128, 256, 512], 256, Some(128), 1),
    ("ATTN_SPLIT", &[128, 256, 512], 256, Some(2048), 1),
    ("ATTN_HEADS", &[1, 2, 4], 1, Some(2048), 1),
    ("ATTN_PF", &[0, 1], 0, Some(2048), 1),
    ("ATTN_WIDE_ROWS", &[0, 16, 32], 0, Some(128), 32),
    ("ATTN_WIDE_SPLITS", &[0, 32], 0, Some(8192), 1),
    ("ATTN_ROWS", &[0, 64], 0, None, 1),
    // The tiled rows entry (needs ATTN_ROWS > 0: `attn_fits` drops 1 where it is 0).
    ("ATTN_TILE", &[0, 1], 0, None, 1),
    ("QTC_UNROLL", &[1, 2, 4], 4, Some(128), 1),
    ("QTC_DB_BIG", &[0, 1], 0, Some(128), 1),
    ("QTC_Q8_UNROLL", &[1, 2, 4], 4, Some(128), 1),
    ("QTC_Q8_UNROLL_BIG", &[1, 2, 4], 4, Some(128), 1),
    ("QTC_Q8_DB_BIG", &[0, 1], 0, Some(128), 1),
    ("QTC_Q8_M1", &[0, 2], 0, Some(128), 1),
    ("QTC_Q4_UNROLL", &[1, 4], 4, Some(128), 1),
    ("QTC_Q4_UNROLL_NT", &[1, 2], 4, Some(128), 32),
    ("QTC_WT_ALT", &[0, 3], 0, Some(128), 1),
    ("QTC_SK", &[0, 2, 3], 0, Some(128), 32),
    ("QTC_GEMM_MIN", &[64, 256], 64, Some(128), 64),
    ("QTC_GEMM_MIN_BIG", &[0, 128], 0, Some(128), 128),
    ("TCS_GLU", &[0, 1], 0, Some(128), 32),
    ("TCS_ROPE", &[0, 1], 0, Some(128), 32),
    ("TCK_FUSE", &[0, 1], 0, Some(128), 32),
];

/// Whether sweeping kernel define `name` on a model whose matrices are `fmt` can change
/// anything under `defines`: the tensor-core knobs need `QTC = 1` and a model of the format whose
/// entries they set (`QTC_UNROLL`, `QTC_DB_BIG`: BF16, since on a Q8_0 model they would reach only
/// the Q8_0 entries that follow them by default; `QTC_Q8_*`: Q8_0 with `QTC_Q8_0` not 0, the
/// kernels' default being 1; `QTC_Q4_*`: Q4_K with `QTC_Q4_K = 1`), and the `_BIG` ones
/// `QTC_SPLIT_BIG` > 0 (no `_big` entries
/// otherwise); `QTC_SK` (the split-K forms' routing at 9-32 tokens) either tensor-core format;
/// `TCS_GLU` and `TCS_ROPE` (SwiGLU in the wgmma split-K reduce of gate|up, RoPE and the KV append
/// in that of Q|K|V) and `TCK_FUSE` (that reduce inside the form) need `QTC = 1` and `QTC_SK = 3`; `QTC_GEMM_MIN` and `QTC_GEMM_MIN_BIG`
/// (where the tiled GEMM starts) `QTC = 1`, `QTC_GEMM` on and either tensor-core format.
/// The other knobs always apply.
pub(super) fn sweep_applies(
    name: &str,
    defines: &BTreeMap<String, String>,
    fmt: Option<DType>,
) -> bool {
    let val = |k: &str, default: &str| defines.get(k).map_or(default, |v| v.trim()).to_string();
    if name == "TCS_GLU" || name == "TCS_ROPE" || name == "TCK_FUSE" {
        return val("QTC", "0") == "1" && val("QTC_SK", "0") == "3";
    }
    if name == "QTC_GEMM_MIN" || name == "QTC_GEMM_MIN_BIG" {
        // Routes 64-255 tokens of BF16 and tensor-core Q8_0 matrices; only with the GEMM on. The
        // big matrices' start (swept at 128 tokens) moves nothing while every matrix takes the
        // GEMM from 128 tokens or fewer.
        let q8_tc = fmt == Some(DType::Q8_0) && val("QTC_Q8_0", "1") == "1";
        let later = name == "QTC_GEMM_MIN" || val("QTC_GEMM_MIN", "64").parse().unwrap_or(64) > 128;
        return val("QTC", "0") == "1"
            && val("QTC_GEMM", "0") != "0"
            && (fmt == Some(DType::BF16) || q8_tc)
            && later;
    }
    if !name.starts_with("QTC_") {
        return true;
    }
    let big_ok =
        !name.ends_with("_BIG") || val("QTC_SPLIT_BIG", "0").parse::<u32>().unwrap_or(0) > 0;
    let q8_tc = fmt == Some(DType::Q8_0) && val("QTC_Q8_0", "1") == "1";
    let q4_tc = fmt == Some(DType::Q4_K) && matches!(val("QTC_Q4_K", "0").as_str(), "1" | "2");
    let fmt_ok = if name == "QTC_SK" || name == "QTC_WT_ALT" {
        fmt == Some(DType::BF16) || q8_tc
    } else if name.starts_with("QTC_Q8_") {
        q8_tc
    } else if name.starts_with("QTC_Q4_") {
        q4_tc
    } else {
        fmt == Some(DType::BF16)
    };
    val("QTC", "0") == "1" && fmt_ok && big_ok
}

/// Whether candidate `name = v` over `defines` leaves decode attention's static shared memory
/// within its limit ([`crate::config::attn_shared_fits`]); names outside attention always fit.
/// A sweep skips candidates that do not (ATTN_SPLIT = 512 beside the wide entries).
pub(super) fn attn_fits(name: &str, v: u32, defines: &BTreeMap<String, String>) -> bool {
    !name.starts_with("ATTN_")
        || crate::config::attn_shared_fits(|k, d| {
            if k == name {
                v
            } else {
                current_define(k, defines, d)
            }
        })
        .is_ok()
}

/// The value kernel define `name` has under `defines`: its own entry, else that of the define it
/// defaults to in the kernel source (QTC_DB_BIG: QTC_DB; QTC_Q8_UNROLL*, QTC_Q4_UNROLL*: QTC_UNROLL;
/// QTC_Q8_DB_BIG: QTC_DB_BIG, then QTC_DB; QTC_Q8_DB: QTC_DB), else `default`, the kernel's own default.
pub(super) fn current_define(name: &str, defines: &BTreeMap<String, String>, default: u32) -> u32 {
    let get = |k: &str| defines.get(k).and_then(|v| v.trim().parse::<u32>().ok());
    // The chains of kernels/linear_tc.cu's #defines (QTC_SPLIT, QTC_SPLIT_BIG: common.cuh), nearest first.
    let follows: &[&str] = match name {
        "QTC_DB_BIG" => &["QTC_DB"],
        "QTC_Q8_UNROLL" | "QTC_Q8_UNROLL_NT" | "QTC_Q8_UNROLL_BIG" | "QTC_Q4_UNROLL"
        | "QTC_Q4_UNROLL_NT" => &["QTC_UNROLL"],
        "QTC_Q8_DB_BIG" => &["QTC_DB_BIG", "QTC_DB"],
        "QTC_Q8_DB" => &["QTC_DB"],
        _ => &[],
    };
    std::iter::once(name)
        .chain(follows.iter().copied())
        .find_map(get)
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::{attn_fits, current_define, sweep_applies};
    use memra_engine::quant::DType;
    use std::collections::BTreeMap;

    #[test]
    fn tensor_core_sweeps_follow_their_switches_and_defaults() {
        let d = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let (bf16, q8) = (Some(DType::BF16), Some(DType::Q8_0));
        // Without QTC = 1 the tensor-core knobs change nothing; the others always apply.
        assert!(!sweep_applies("QTC_UNROLL", &d(&[]), bf16));
        assert!(sweep_applies("LIN_WARPS", &d(&[]), q8));
        let qtc = d(&[("QTC", "1"), ("QTC_SPLIT_BIG", "4")]);
        // Each knob on the format whose entries it sets.
        assert!(sweep_applies("QTC_UNROLL", &qtc, bf16));
        assert!(!sweep_applies("QTC_UNROLL", &qtc, q8));
        assert!(sweep_applies("QTC_DB_BIG", &qtc, bf16));
        assert!(sweep_applies("QTC_Q8_UNROLL", &qtc, q8));
        assert!(sweep_applies("QTC_Q8_DB_BIG", &qtc, q8));
        assert!(!sweep_applies("QTC_Q8_UNROLL", &qtc, bf16));
        // Q4_K's load groups only on a Q4_K model with QTC_Q4_K on.
        let q4 = Some(DType::Q4_K);
        assert!(!sweep_applies("QTC_Q4_UNROLL", &qtc, q4));
        let q4tc = d(&[("QTC", "1"), ("QTC_Q4_K", "1")]);
        assert!(sweep_applies("QTC_Q4_UNROLL", &q4tc, q4));
        assert!(sweep_applies("QTC_Q4_UNROLL_NT", &q4tc, q4));
        let q4wg = d(&[("QTC", "1"), ("QTC_Q4_K", "2")]);
        assert!(sweep_applies("QTC_Q4_UNROLL", &q4wg, q4));
        assert!(!sweep_applies("QTC_Q4_UNROLL", &q4tc, bf16));
        assert!(!sweep_applies("QTC_UNROLL", &q4tc, q4));
        assert_eq!(
            current_define("QTC_Q4_UNROLL", &d(&[("QTC_UNROLL", "1")]), 4),
            1
        );
        // Q8_0 off the tensor cores, or no big matrices: nothing to sweep.
        let lanes = d(&[("QTC", "1"), ("QTC_SPLIT_BIG", "4"), ("QTC_Q8_0", "0")]);
        assert!(!sweep_applies("QTC_Q8_UNROLL", &lanes, q8));
        let no_big = d(&[("QTC", "1")]);
        assert!(!sweep_applies("QTC_DB_BIG", &no_big, bf16));
        assert!(!sweep_applies("QTC_Q8_UNROLL_BIG", &no_big, q8));
        assert!(sweep_applies("QTC_Q8_UNROLL", &no_big, q8));
        // The split-K routing: both tensor-core formats, nothing on the lanes or without QTC.
        assert!(sweep_applies("QTC_SK", &qtc, bf16));
        assert!(sweep_applies("QTC_SK", &qtc, q8));
        assert!(!sweep_applies("QTC_SK", &lanes, q8));
        assert!(!sweep_applies("QTC_SK", &d(&[]), bf16));
        // The fused SwiGLU reduce: only where gate|up takes the wgmma split-K form.
        assert!(!sweep_applies("TCS_GLU", &qtc, bf16));
        let sk3 = d(&[("QTC", "1"), ("QTC_SK", "3")]);
        assert!(sweep_applies("TCS_GLU", &sk3, bf16));
        assert!(sweep_applies("TCS_GLU", &sk3, q8));
        assert!(!sweep_applies("TCS_GLU", &d(&[("QTC_SK", "3")]), bf16));
        assert!(sweep_applies("TCS_ROPE", &sk3, bf16));
        assert!(!sweep_applies("TCS_ROPE", &qtc, bf16));
        assert!(sweep_applies("TCK_FUSE", &sk3, bf16));
        // QTC_WT_ALT: the one-token entries of either tensor-core format.
        assert!(sweep_applies("QTC_WT_ALT", &qtc, q8));
        assert!(sweep_applies("QTC_WT_ALT", &qtc, bf16));
        assert!(!sweep_applies("QTC_WT_ALT", &lanes, q8));
        assert!(!sweep_applies("TCK_FUSE", &qtc, bf16));
        // Where the GEMM starts: only with the GEMM on, on either tensor-core format.
        assert!(!sweep_applies("QTC_GEMM_MIN", &qtc, bf16));
        let gemm = d(&[("QTC", "1"), ("QTC_GEMM", "3")]);
        assert!(sweep_applies("QTC_GEMM_MIN", &gemm, bf16));
        assert!(sweep_applies("QTC_GEMM_MIN", &gemm, q8));
        let gemm_lanes = d(&[("QTC", "1"), ("QTC_GEMM", "3"), ("QTC_Q8_0", "0")]);
        assert!(!sweep_applies("QTC_GEMM_MIN", &gemm_lanes, q8));
        assert!(!sweep_applies(
            "QTC_GEMM_MIN",
            &d(&[("QTC_GEMM", "3")]),
            bf16
        ));
        // The big matrices' start only where the others' is past 128 tokens.
        assert!(!sweep_applies("QTC_GEMM_MIN_BIG", &gemm, bf16));
        let late = d(&[("QTC", "1"), ("QTC_GEMM", "3"), ("QTC_GEMM_MIN", "256")]);
        assert!(sweep_applies("QTC_GEMM_MIN_BIG", &late, bf16));
        assert!(!sweep_applies("QTC_GEMM_MIN_BIG", &qtc, bf16));
        // The current value: own entry, else the defines it follows in the kernel, else default.
        let h200 = d(&[("QTC_UNROLL", "1"), ("QTC_DB_BIG", "1")]);
        assert_eq!(current_define("QTC_Q8_UNROLL", &h200, 4), 1);
        assert_eq!(current_define("QTC_Q8_UNROLL_BIG", &h200, 4), 1);
        assert_eq!(current_define("QTC_Q8_DB_BIG", &h200, 0), 1);
        assert_eq!(current_define("QTC_DB_BIG", &d(&[("QTC_DB", "1")]), 0), 1);
        assert_eq!(current_define("QTC_Q8_DB_BIG", &d(&[]), 0), 0);
        assert_eq!(current_define("QTC_UNROLL", &d(&[]), 4), 4);
        let own = d(&[("QTC_UNROLL", "1"), ("QTC_Q8_UNROLL", "2")]);
        assert_eq!(current_define("QTC_Q8_UNROLL", &own, 4), 2);
        // Attention candidates whose static shared memory passes 48 KB are skipped: a split of
        // 512 positions fits with 2 heads a block, not beside the 4-heads wide entries.
        let h200_attn = d(&[("ATTN_HEADS", "2"), ("ATTN_WIDE_SPLITS", "32")]);
        assert!(attn_fits("ATTN_SPLIT", 256, &h200_attn));
        assert!(!attn_fits("ATTN_SPLIT", 512, &h200_attn));
        assert!(attn_fits("ATTN_SPLIT", 512, &d(&[("ATTN_HEADS", "2")])));
        assert!(attn_fits(
            "ATTN_WIDE_SPLITS",
            0,
            &d(&[("ATTN_SPLIT", "512")])
        ));
        assert!(!attn_fits(
            "ATTN_WIDE_SPLITS",
            32,
            &d(&[("ATTN_SPLIT", "512")])
        ));
        // The prefill rows entry's dynamic shared memory: 4 x 4 slots fit at 512 positions, 8 x 4
        // do not.
        assert!(attn_fits("ATTN_ROWS", 64, &d(&[("ATTN_SPLIT", "512")])));
        let wide_rows = d(&[("ATTN_SPLIT", "512"), ("ATTN_ROWS_Q", "8")]);
        assert!(!attn_fits("ATTN_ROWS", 64, &wide_rows));
        assert!(attn_fits("ATTN_ROWS", 0, &wide_rows));
        // ATTN_ROWS_MINB blocks of it an SM: the defaults (2 of 2 x 4 slots) fit; two of 4 x 4
        // slots at 256 positions (99,968 bytes each) fit, three do not; three of 4 x 1 do.
        assert!(attn_fits("ATTN_ROWS", 64, &d(&[])));
        let r44 = |minb: &'static str| d(&[("ATTN_ROWS_Q", "4"), ("ATTN_ROWS_MINB", minb)]);
        assert!(attn_fits("ATTN_ROWS", 64, &r44("2")));
        assert!(!attn_fits("ATTN_ROWS", 64, &r44("3")));
        let r41 = d(&[
            ("ATTN_ROWS_Q", "4"),
            ("ATTN_ROWS_MINB", "3"),
            ("ATTN_ROWS_HEADS", "1"),
        ]);
        assert!(attn_fits("ATTN_ROWS", 64, &r41));
        // With the default 2 blocks an SM, 8 x 4 slots (198,912 bytes) fit a block but not two.
        assert!(!attn_fits("ATTN_ROWS", 64, &d(&[("ATTN_ROWS_Q", "8")])));
        let r84 = d(&[("ATTN_ROWS_Q", "8"), ("ATTN_ROWS_MINB", "1")]);
        assert!(attn_fits("ATTN_ROWS", 64, &r84));
        assert!(attn_fits("QTC_UNROLL", 2, &d(&[("ATTN_SPLIT", "4096")])));
        // The tiled rows entry is a candidate only on the rows path (the sweep after ATTN_ROWS).
        assert!(!attn_fits("ATTN_TILE", 1, &d(&[])));
        assert!(attn_fits("ATTN_TILE", 0, &d(&[])));
        assert!(attn_fits("ATTN_TILE", 1, &d(&[("ATTN_ROWS", "64")])));
        let tile3 = d(&[("ATTN_ROWS", "64"), ("ATTN_TILE_ROWS", "3")]);
        assert!(!attn_fits("ATTN_TILE", 1, &tile3));
    }
}
