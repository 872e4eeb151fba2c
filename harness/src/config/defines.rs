//! The names `[kernel_defines]` accepts.

/// Compile-time constants the kernels read (see kernels/*.cu).
pub const KERNEL_DEFINES: [&str; 108] = [
    "LIN_WARPS",
    "LIN_TOKENS",
    "LIN_ROWS",
    "LIN_ROWS_M1",
    "ATTN_SPLIT",
    "ATTN_HEADS",
    "ATTN_HEADS_WIDE",
    "ATTN_WIDE_ROWS",
    "ATTN_WIDE_SPLITS",
    "ATTN_WIDE_ROWS_F16",
    "ATTN_KUNROLL",
    "ATTN_KORDER",
    "ATTN_MINB",
    "ATTN_KV16W",
    "ATTN_PF",
    "ATTN_V16W",
    "ATTN_VBATCH",
    "ATTN_ROWS",
    "ATTN_ROWS_Q",
    "ATTN_ROWS_HEADS",
    "ATTN_ROWS_MINB",
    "ATTN_TILE",
    "ATTN_TILE_ROWS",
    "ATTN_TILE_MINB",
    "ATTN_ROWS_KORDER",
    "ATTN_ROWS_KUNROLL",
    "ATTN_ROWS_VBATCH",
    "ATTN_SKIP",
    "NORM_THREADS",
    "QLIN_FACTOR",
    "QLIN_M1_BLOCKS",
    "QLIN_M1_WARPS",
    "QLIN_M1_UNROLL",
    "QLIN_M1_PREFETCH",
    "QLIN_M1_BIGK",
    "QLIN_M1_WARPS_BIGK",
    "QLIN_M1_PREFETCH_BIGK",
    "QLIN_INT",
    "QLIN_IMMA",
    "QIMMA_TILES",
    "QIMMA_PF",
    "QIMMA_BPF",
    "QIMMA_NT",
    "QIMMA_SLAB",
    "QLIN_MT",
    "QLIN_MT_TOKENS",
    "QLIN_MT_ROWS",
    "QTC",
    "QTC_SPLIT",
    "QTC_WT",
    "QTC_WT_ALT",
    "QTC_XSPLIT",
    "QTC_UNROLL",
    "QTC_DB",
    "QTC_TOKFAST",
    "QTC_GEMM",
    "QTC_GEMM_MIN",
    "QTC_GEMM_MIN_BIG",
    "QTC_Q8_0",
    "QTC_Q4_K",
    "QTC_Q4_UNROLL",
    "QTC_Q4_UNROLL_NT",
    "QTC_GEMM_XASYNC",
    "QTC_SPLIT_BIG",
    "QTC_BIG_ROWS",
    "QTC_DB_BIG",
    "QTC_SK",
    "QTC_SK_WARPS",
    "QTC_SK_WT",
    "QTC_SK_DB",
    "QTC_SK_WAVES",
    "QTC_SK_UNROLL",
    "QTC_SK_MIN",
    "QTC_Q8_UNROLL",
    "QTC_Q8_UNROLL_NT",
    "QTC_Q8_UNROLL_BIG",
    "QTC_Q8_DB_BIG",
    "QTC_Q8_DB",
    "QTC_Q8_M1",
    "QTC_M1_PREFETCH",
    "TCG2_KU",
    "TCG2_STAGES",
    "TCW_WG",
    "TCW_STAGES",
    "TCW_BULK",
    "TCW_UPB",
    "TCW_UPB_Q",
    "TCW_CLUSTER",
    "TCW_WS",
    "TCW_TMA",
    "TCW_WS_Q",
    "TCW_PP",
    "TCK_WG",
    "TCK_STAGES",
    "TCK_UB",
    "TCK_LDG",
    "TCK_BULK",
    "TCK_MIN_MB",
    "TCK_Q8_0",
    "TCK_FUSE",
    "TCK_CLUSTER",
    "TCK_CL_STAGES",
    "TCK_CL_UB",
    // Read by the engine: the largest cluster TCK_CLUSTER takes (past 8: non-portable).
    "TCK_CL_MAX",
    "TCS_GLU",
    "TCS_ROPE",
    // Read by the engine, not the kernels: launches carry programmatic dependent launch
    // (engine/src/backend/cuda/launch.rs).
    "PDL",
    "PDL_EARLY",
];

/// Whether decode attention's `AttnShared` (kernels/attention.cu: 4·S + 24.125·S·GT bytes, S =
/// `ATTN_SPLIT`, GT = `ATTN_HEADS`, and `ATTN_HEADS_WIDE` when an `ATTN_WIDE_*` define compiles the
/// wide entries) fits the 49,152 bytes static shared memory may take. `get(name, default)` reads a
/// define; Err names the defines and the bytes (S = 512 with 4 heads a block: 51,456). With
/// `ATTN_ROWS` > 0 also `attn_rows_f32`'s dynamic shared memory (the same struct for
/// `ATTN_ROWS_Q` × `ATTN_ROWS_HEADS` slots) against sm_90's 232,448 bytes a block.
pub fn attn_shared_fits(get: impl Fn(&str, u32) -> u32) -> Result<(), String> {
    let split = get("ATTN_SPLIT", 256);
    let wide = get("ATTN_WIDE_ROWS", 0) > 0
        || get("ATTN_WIDE_SPLITS", 0) > 0
        || get("ATTN_WIDE_ROWS_F16", 0) > 0;
    let mut heads = vec![("ATTN_HEADS", get("ATTN_HEADS", 1))];
    if wide {
        heads.push(("ATTN_HEADS_WIDE", get("ATTN_HEADS_WIDE", 4)));
    }
    let bytes = |gt: u32| 4 * split as u64 + split as u64 * gt as u64 * 193 / 8;
    for (name, gt) in heads {
        if bytes(gt) > 49_152 {
            return Err(format!(
                "ATTN_SPLIT = {split} with {name} = {gt} needs {} bytes of static shared memory a block, past 49,152 (lower either)",
                bytes(gt)
            ));
        }
    }
    // attn_rows_f32 takes the same struct for ATTN_ROWS_Q × ATTN_ROWS_HEADS slots, and 8 bytes a
    // slot of running max and sum, as dynamic shared memory: up to 232,448 bytes a block on sm_90.
    let slots = get("ATTN_ROWS_Q", 2) * get("ATTN_ROWS_HEADS", 4);
    let rows_bytes = bytes(slots).next_multiple_of(16) + 8 * slots as u64;
    if get("ATTN_ROWS", 0) > 0 && rows_bytes > 232_448 {
        return Err(format!(
            "ATTN_SPLIT = {split} with ATTN_ROWS_Q x ATTN_ROWS_HEADS = {slots} needs {rows_bytes} bytes of shared memory a block, past 232,448 (lower one)"
        ));
    }
    // attn_tile_f32 (ATTN_TILE = 1, on the rows path) spreads its slots 16 ways, at most 4 a thread.
    if get("ATTN_TILE", 0) == 1 {
        if get("ATTN_ROWS", 0) == 0 {
            return Err("ATTN_TILE = 1 needs ATTN_ROWS > 0 (the rows path runs it)".into());
        }
        let ns = get("ATTN_TILE_ROWS", 16) * get("ATTN_ROWS_HEADS", 4);
        if !ns.is_multiple_of(16) || ns > 64 {
            return Err(format!(
                "ATTN_TILE_ROWS x ATTN_ROWS_HEADS = {ns} must be 16, 32, 48 or 64 (attn_tile_f32 spreads its slots 16 ways, at most 4 a thread)"
            ));
        }
        // ATTN_TILE_MINB blocks an SM, each with 1 KiB the driver reserves, out of 233,472 bytes.
        let tr = get("ATTN_TILE_ROWS", 16) as usize;
        let tile_bytes =
            memra_engine::backend::cuda::attention::attn_tile_smem_bytes(ns as usize, tr) as u64;
        let minb = get("ATTN_TILE_MINB", 1) as u64;
        if minb * (tile_bytes + 1024) > 233_472 {
            return Err(format!(
                "ATTN_TILE_MINB = {minb} blocks of {tile_bytes} bytes of shared memory (ATTN_TILE_ROWS x ATTN_ROWS_HEADS = {ns}) do not fit an SM's 233,472 (lower one)"
            ));
        }
    }
    // ATTN_ROWS_MINB blocks an SM, each with 1 KiB the driver reserves, out of 233,472 bytes.
    let minb = get("ATTN_ROWS_MINB", 2) as u64;
    if get("ATTN_ROWS", 0) > 0 && minb * (rows_bytes + 1024) > 233_472 {
        return Err(format!(
            "ATTN_ROWS_MINB = {minb} blocks of {rows_bytes} bytes of shared memory (ATTN_ROWS_Q x ATTN_ROWS_HEADS = {slots}) do not fit an SM's 233,472 (lower one)"
        ));
    }
    Ok(())
}

/// The wgmma forms' define combinations (kernels/linear_tck.cu and linear_tcw.cu assert them at
/// compile time; said here first). `tck(name, default)` reads a define's value.
pub(super) fn check_gemm_combinations(tck: impl Fn(&str, u32) -> u32) -> anyhow::Result<()> {
    // The wgmma split-K form copies a batch of TCK_UB units while its ring holds more
    // (kernels/linear_tck.cu asserts it at compile time; say it here first).
    if tck("TCK_LDG", 0) == 1 && tck("TCK_UB", 4) > 4 {
        anyhow::bail!(
            "kernel_defines.TCK_UB ({}) must be at most 4 with TCK_LDG = 1 (two batches of fragments a lane)",
            tck("TCK_UB", 4)
        );
    }
    if tck("TCK_LDG", 0) == 1 && tck("TCK_BULK", 0) == 1 {
        anyhow::bail!(
            "kernel_defines.TCK_LDG and TCK_BULK are two ways to load the same weights: set one"
        );
    }
    if tck("TCK_BULK", 0) == 1 && tck("TCK_STAGES", 8) < 2 * tck("TCK_UB", 4) {
        anyhow::bail!(
            "kernel_defines.TCK_STAGES ({}) must be at least twice TCK_UB ({}) with TCK_BULK = 1 (two batches a ring)",
            tck("TCK_STAGES", 8),
            tck("TCK_UB", 4)
        );
    }
    if tck("TCK_UB", 4) >= tck("TCK_STAGES", 8) {
        anyhow::bail!(
            "kernel_defines.TCK_STAGES ({}) must be more than TCK_UB ({})",
            tck("TCK_STAGES", 8),
            tck("TCK_UB", 4)
        );
    }
    // The cluster entries' rings (TCK_CLUSTER = 1) by the same rules, with their own sizes.
    if tck("TCK_CLUSTER", 0) == 1 {
        let (st, ub) = (tck("TCK_CL_STAGES", 6), tck("TCK_CL_UB", 3));
        let need = if tck("TCK_BULK", 0) == 1 {
            2 * ub
        } else {
            ub + 1
        };
        if st < need || (tck("TCK_LDG", 0) == 1 && ub > 4) {
            anyhow::bail!(
                "kernel_defines.TCK_CL_STAGES ({st}) must be more than TCK_CL_UB ({ub}), at least twice it with TCK_BULK = 1, and TCK_CL_UB at most 4 with TCK_LDG = 1"
            );
        }
    }
    // The wgmma GEMM waits for TCW_UPB units at a barrier while the ones after them load
    // (kernels/linear_tcw.cu asserts it); a group's fragments do not fit the 168-register
    // cap of 3 warpgroups (Q4_K spills 96 bytes at 2 units, NVRTC 13.0).
    // TCW_UPB_Q (the Q8_0 and Q4_K entries') defaults to TCW_UPB.
    let upb = tck("TCW_UPB", 1);
    for (k, n) in [("TCW_UPB", upb), ("TCW_UPB_Q", tck("TCW_UPB_Q", upb))] {
        if tck("TCW_STAGES", 4) < 2 * n {
            anyhow::bail!(
                "kernel_defines.TCW_STAGES ({}) must be at least twice {k} ({n})",
                tck("TCW_STAGES", 4)
            );
        }
        if n > 1 && tck("TCW_WG", 2) == 3 {
            anyhow::bail!("kernel_defines.{k} above 1 needs TCW_WG at most 2 (3 warpgroups spill its registers)");
        }
    }
    // The clustered GEMM shares x by bulk copies beside its cp.async weights, one unit a
    // barrier, and refills a stage one unit after both blocks freed it.
    // With TCW_WS the producer warp multicasts x by bulk copies beside its weights' ones.
    if tck("TCW_CLUSTER", 0) == 1 {
        if (tck("TCW_BULK", 0) == 1 && tck("TCW_WS", 0) == 0)
            || upb > 1
            || tck("TCW_UPB_Q", upb) > 1
        {
            anyhow::bail!(
                "kernel_defines.TCW_CLUSTER = 1 needs TCW_BULK = 0 (or TCW_WS = 1) and TCW_UPB, TCW_UPB_Q = 1"
            );
        }
        if tck("TCW_STAGES", 4) < 3 {
            anyhow::bail!(
                "kernel_defines.TCW_CLUSTER = 1 needs TCW_STAGES of at least 3 (got {})",
                tck("TCW_STAGES", 4)
            );
        }
    }
    // The warp-specialized GEMM stages every unit by bulk copies from its producer warp, whose
    // SM sub-partition holds 3 warps: 168 registers a thread, which more units a group or a
    // third warpgroup pass (Q4_K spills at 2 units, NVRTC 13.0). With TCW_WS_Q = 0 the Q8_0 and
    // Q4_K entries keep the cp.async ring, so TCW_UPB_Q is theirs to set.
    let ws_q = tck("TCW_WS_Q", tck("TCW_WS", 0));
    if tck("TCW_WS", 0) == 1
        && (tck("TCW_BULK", 0) == 0
            || upb > 1
            || (ws_q == 1 && tck("TCW_UPB_Q", upb) > 1)
            || tck("TCW_WG", 2) == 3)
    {
        anyhow::bail!(
            "kernel_defines.TCW_WS = 1 needs TCW_BULK = 1, TCW_UPB = 1 (and TCW_UPB_Q = 1 unless TCW_WS_Q = 0) and TCW_WG at most 2"
        );
    }
    if tck("TCW_WS", 0) == 0 && ws_q == 1 {
        anyhow::bail!(
            "kernel_defines.TCW_WS_Q = 1 needs TCW_WS = 1 (it says which formats TCW_WS takes)"
        );
    }
    // The tensor copies are the producer warp's.
    if tck("TCW_TMA", 0) == 1 && tck("TCW_WS", 0) == 0 {
        anyhow::bail!("kernel_defines.TCW_TMA = 1 needs TCW_WS = 1 (and so TCW_BULK = 1)");
    }
    // The ping-pong of the two warpgroups: no block barrier a unit (the producer warp's form),
    // two warpgroups, one unit a group.
    if tck("TCW_PP", 0) == 1 && (tck("TCW_WS", 0) == 0 || tck("TCW_WG", 2) != 2 || upb > 1) {
        anyhow::bail!("kernel_defines.TCW_PP = 1 needs TCW_WS = 1, TCW_WG = 2 and TCW_UPB = 1");
    }
    Ok(())
}
