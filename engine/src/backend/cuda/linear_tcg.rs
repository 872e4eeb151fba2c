//! The second and third tiled tensor-core forms for many tokens (prefill, large batches): x split
//! once into its bf16 parts, then blocks walk the same per-row chain as every other tensor-core
//! form, so rows are bit-identical for every M (docs/DESIGN.md §3). QTC_GEMM = 2
//! (kernels/linear_tcg.cu): 16 warps of mma.sync a block (why: research/cuda-notes.md, run 57).
//! QTC_GEMM = 3 (kernels/linear_tcw.cu, sm_90a only): Hopper's warpgroup MMA, which run 61 found
//! bit-identical to mma.sync m16n8k16.

use super::launch::KernelArg;
use super::linear_tc::{Epilogue, SK_SCRATCH_FLOATS, SMEM_MAX, TC_TILE_ROWS};
use super::linear_tck::{tck_cl_smem_bytes, tck_cluster};
use super::ops::{check, i32_of, push_bias_outs, DevMatrix};
use super::{tma, CudaDevice};
use crate::error::{Error, Result};
use crate::quant::DType;
use cudarc::driver::{CudaSlice, LaunchConfig};

/// Bytes of a stream's buffer of x split into bf16 parts (QTC_GEMM = 2): `2 · QTC_XSPLIT · k`
/// per token, so 32 MiB hold 512 tokens at k = 14,336 with 2 parts; a longer prompt runs in
/// slabs of a multiple of 128 tokens.
pub const TCG2_SCRATCH_BYTES: usize = 32 << 20;

/// Row tiles of 16 and tokens per block: TCG2_MT and 8 · TCG2_NT of kernels/linear_tcg.cu.
const ROW_TILES: u32 = 8;
const TOKENS: usize = 128;

/// Tokens per slab for `k` columns and `parts` bf16 parts: the most [`TCG2_SCRATCH_BYTES`]
/// holds, a multiple of 128 (0 when not even 128 fit).
pub fn slab_tokens(k: usize, parts: usize) -> usize {
    TCG2_SCRATCH_BYTES / (2 * parts * k).max(1) / TOKENS * TOKENS
}

/// Dynamic shared memory of a `linear_tcg2_*` block (bytes): `stages` buffers of `ku` units,
/// each the weights of 8 row tiles (1,024 bytes a tile BF16, 512 + 32 Q8_0) and x of 128
/// tokens in `parts` bf16 parts (512 bytes a part and token tile), then the block's slice
/// totals (128 × 128 f32, 64 KiB).
pub fn smem_bytes(dtype: DType, parts: u32, ku: u32, stages: u32) -> u32 {
    let w_unit = ROW_TILES * if dtype == DType::Q8_0 { 512 + 32 } else { 1024 };
    stages * ku * (w_unit + (TOKENS as u32 / 8) * parts * 512) + (64 << 10)
}

/// Tokens per block of the wgmma form (TCW_N of kernels/linear_tcw.cu).
const TCW_TOKENS: usize = 128;

/// Bytes of one (row tile, unit) of weights and scales in a `linear_tcw_*` stage: 1,024 BF16,
/// 512 + 32 Q8_0, 256 + 32 Q4_K (its d words are read from global memory).
fn tile_unit_bytes(dtype: DType) -> u32 {
    match dtype {
        DType::Q8_0 => 512 + 32,
        DType::Q4_K => 256 + 32,
        _ => 1024,
    }
}

/// f32 elements of a stream's buffer of unit sums of x for the Q4_K GEMM (`tcw_xsum`, QTC_Q4_K
/// = 2): `k / 32 · ld` for a slab of at most [`slab_tokens`] tokens (ld its token count rounded
/// up to 128), which is at most 2 MiB / parts; 512 Ki floats (2 MiB) hold every slab.
pub const XSUM_SCRATCH_FLOATS: usize = 512 << 10;

/// Dynamic shared memory of a `linear_tcw_*` block (bytes): `stages` buffers of one unit, each
/// x of 128 tokens in `parts` bf16 parts (8 KiB a part), the weights of `4 · wg` row tiles
/// (`tile_unit_bytes`) and for Q4_K the unit sums of x of the 128 tokens (512 bytes), then the
/// block's slice totals (64 · 128 · `wg` f32) and an 8-byte mbarrier a stage (TCW_BULK = 1),
/// two with `empty_bars` (TCW_CLUSTER = 1 or TCW_WS = 1: each stage's "full" and "empty"
/// barriers).
pub fn tcw_smem_bytes(dtype: DType, parts: u32, wg: u32, stages: u32, empty_bars: bool) -> u32 {
    let xsum = if dtype == DType::Q4_K { 512 } else { 0 };
    let w_unit = 4 * wg * tile_unit_bytes(dtype) + xsum;
    let bars = if empty_bars { 16 } else { 8 };
    stages * (parts * 8192 + w_unit) + 64 * 128 * wg * 4 + bars * stages
}

/// Dynamic shared memory of a `linear_tck_*` block (bytes): x of `per` units of `tokens` tokens
/// in `parts` bf16 parts (512 bytes a part and 8 tokens), then a ring of `stages` slots for each
/// of the `4 · wg` warps (1,024 bytes BF16, 576 Q8_0: 512 of weights and 32 of scales in a
/// 576-byte slot, 288 Q4_K: 256 of codes and 32 of scale words), then `stages`
/// 8-byte mbarriers a warp (used with TCK_BULK = 1), then for Q4_K the unit sums of x (`per ·
/// tokens` f32).
pub fn tck_smem_bytes(
    dtype: DType,
    parts: u32,
    per: u32,
    tokens: u32,
    wg: u32,
    stages: u32,
) -> u32 {
    let xsum = if dtype == DType::Q4_K {
        per * tokens * 4
    } else {
        0
    };
    let slot = match dtype {
        DType::Q8_0 => 576,
        DType::Q4_K => 288,
        _ => 1024,
    };
    per * (tokens / 8) * parts * 512 + 4 * wg * stages * (slot + 8) + xsum
}

/// Row-group counters a stream holds for the split-K reduce inside the wgmma form (TCK_FUSE = 1):
/// one per (64-row group, token block of the form). 64 Ki cover a 262,144-row lm-head at 256
/// tokens (4,096 groups x 8 blocks of 32) twice over.
pub const TCK_COUNTERS: usize = 64 << 10;

/// Static shared memory of the TCK_FUSE entries (ptxas: 128 bytes, the warpgroups' flags), which
/// the block's limit holds besides [`tck_smem_bytes`].
pub const TCK_FUSE_STATIC_SMEM: u32 = 128;

/// The mode of TCK_FUSE for one call of the wgmma split-K form (`on`: TCK_FUSE = 1; `keys`: row
/// groups x token blocks): 2 where the reduce would take the SwiGLU epilogue (`rows` two halves
/// of I, I a multiple of 64 so the gate and up halves are whole row groups, `out` m·I), 0 where
/// it would take another epilogue (TCS_ROPE's RoPE and KV append), or the rows split into outputs
/// not all multiples of 4 (the reduce's scalar form), or the counters are too few; else 1 (the
/// plain reduce, [`CudaDevice::sk_reduce`]'s `linear_tcs_reduce4`).
pub fn tck_fuse(
    on: bool,
    rows: &[usize],
    m: usize,
    keys: usize,
    epi: Option<&Epilogue<'_>>,
) -> u32 {
    if !on || keys > TCK_COUNTERS || !rows.iter().all(|n| n.is_multiple_of(4)) {
        return 0;
    }
    match epi {
        Some(Epilogue::RopeAppend(_)) => 0,
        Some(Epilogue::SwiGlu(out))
            if rows.len() == 2 && rows[1] == rows[0] && out.len() == m * rows[0] =>
        {
            if rows[0].is_multiple_of(64) {
                2
            } else {
                0
            }
        }
        _ => 1,
    }
}

/// One pre-split tiled form, as [`CudaDevice::linear_slabs`] launches it: the kernel file, its
/// split pass (x into bf16 parts, grid (k / 32, ceil(ceil(mc / 8) / 8)), 256 threads), the entry,
/// and the block's shape.
struct SlabForm {
    file: &'static str,
    split: &'static str,
    /// The pass writing each unit's Σx of the slab (Q4_K: `tcw_xsum`, grid (k / 32, ld / 64),
    /// 256 threads), whose buffer and ld the entry takes after its other arguments.
    xsum: Option<&'static str>,
    func: &'static str,
    /// Rows (in tiles of 16) and tokens a block; threads a block; dynamic shared memory (bytes).
    row_tiles: u32,
    tokens: usize,
    threads: u32,
    smem: u32,
    /// Blocks a cluster along the rows (TCW_CLUSTER: 2, the grid's y rounded up to a multiple;
    /// a block past the last row tile copies its share of x and stores nothing); else 1.
    cluster_y: u32,
    /// TCW_TMA: the entry takes the tensor maps of [`tma::tcw_map_shapes`] after its other
    /// arguments (parts and warpgroups as the form's; whether it reads them: an entry on the
    /// cp.async ring, TCW_WS_Q = 0, gets zeroed maps, nothing encoded).
    tma: Option<(u32, u32, bool)>,
}

impl CudaDevice {
    /// `y = x W^T (+ bias)` for a tensor-core matrix on the second tiled form, outputs as
    /// [`CudaDevice::linear_split`] (already checked by it): per slab, `tcg_split_x` writes the
    /// slab's x as QTC_XSPLIT bf16 parts in B-fragment order into the stream's buffer, then
    /// `linear_tcg2_bf16` / `_q8_0` (blocks of 128 rows by 128 tokens, 512 threads; TCG2_KU
    /// units a stage, TCG2_STAGES stages) computes its rows. K slices as
    /// [`CudaDevice::tc_split`], halved for the canary. Errors: another format, a k too large
    /// for the buffer, the buffer's allocation (out of device memory, or first use inside a
    /// CUDA graph capture), the shared-memory opt-in, a launch failure.
    pub(super) fn linear_tcg2(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        split_canary: bool,
    ) -> Result<()> {
        let func = match w.dtype {
            DType::BF16 => "linear_tcg2_bf16",
            DType::Q8_0 => "linear_tcg2_q8_0",
            d => return Err(Error::Unsupported(format!("tensor-core {}", d.name()))),
        };
        let parts = self.define("QTC_XSPLIT", 3).clamp(1, 3);
        let ku = self.define("TCG2_KU", 1).max(1);
        let stages = self.define("TCG2_STAGES", 4).max(2);
        let smem = smem_bytes(w.dtype, parts, ku, stages);
        check(smem <= SMEM_MAX, || {
            format!("tiled linear: TCG2_KU {ku} x TCG2_STAGES {stages} need {smem} bytes of shared memory a block (at most {SMEM_MAX} bytes)")
        })?;
        let form = SlabForm {
            file: "linear_tcg.cu",
            split: "tcg_split_x",
            xsum: None,
            func,
            row_tiles: ROW_TILES,
            tokens: TOKENS,
            threads: 512,
            smem,
            cluster_y: 1,
            tma: None,
        };
        self.linear_slabs(&form, parts, x, w, ys, rows, m, split_canary)
    }

    /// `y = x W^T (+ bias)` for a tensor-core matrix on the wgmma form (QTC_GEMM = 3), outputs
    /// as [`CudaDevice::linear_split`] (already checked by it): per slab, `tcw_split_x` writes
    /// the slab's x as QTC_XSPLIT bf16 parts in wgmma's core-matrix order into the stream's
    /// buffer (the one QTC_GEMM = 2 uses, [`TCG2_SCRATCH_BYTES`]), then `linear_tcw_bf16` /
    /// `_q8_0` (TCW_WG warpgroups of 64 rows by 128 tokens a block; TCW_STAGES units in the
    /// shared-memory pipeline, filled by cp.async or, with TCW_BULK = 1, by bulk copies)
    /// computes its rows. K slices as [`CudaDevice::tc_split`], halved for the canary. Errors:
    /// a device without wgmma (not sm_90a), another format, a k too large for the buffer, the
    /// shared memory, the buffer's allocation (out of device memory, or first use inside a CUDA
    /// graph capture), a launch failure.
    pub(super) fn linear_tcw(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        split_canary: bool,
    ) -> Result<()> {
        self.require_wgmma("tiled linear: QTC_GEMM = 3")?;
        let func = match w.dtype {
            DType::BF16 => "linear_tcw_bf16",
            DType::Q8_0 => "linear_tcw_q8_0",
            DType::Q4_K => "linear_tcw_q4_k",
            d => return Err(Error::Unsupported(format!("tensor-core {}", d.name()))),
        };
        let parts = self.define("QTC_XSPLIT", 3).clamp(1, 3);
        let wg = self.define("TCW_WG", 2).max(1);
        let stages = self.define("TCW_STAGES", 4).max(2);
        let cluster = self.define("TCW_CLUSTER", 0) == 1;
        // TCW_WS: a producer warp beside the computing warpgroups; TCW_WS_Q = 0 keeps the Q8_0
        // and Q4_K entries on the cp.async ring (kernels/linear_tcw.cu, TCW_Q_RING), and with it
        // off their tensor copies.
        let ws = self.define("TCW_WS", 0) == 1
            && (w.dtype == DType::BF16 || self.define("TCW_WS_Q", 1) == 1);
        let smem = tcw_smem_bytes(w.dtype, parts, wg, stages, cluster || ws);
        check(smem <= SMEM_MAX, || {
            format!("tiled linear: TCW_WG {wg} x TCW_STAGES {stages} need {smem} bytes of shared memory a block (at most {SMEM_MAX} bytes)")
        })?;
        let form = SlabForm {
            file: "linear_tcw.cu",
            split: "tcw_split_x",
            xsum: (w.dtype == DType::Q4_K).then_some("tcw_xsum"),
            func,
            row_tiles: 4 * wg,
            tokens: TCW_TOKENS,
            threads: 128 * wg + if ws { 32 } else { 0 },
            smem,
            cluster_y: if cluster { 2 } else { 1 },
            // The entries take the maps whenever TCW_TMA = 1 (zeroed for the ring's).
            tma: (self.define("TCW_TMA", 0) == 1).then_some((parts, wg, ws)),
        };
        self.linear_slabs(&form, parts, x, w, ys, rows, m, split_canary)
    }

    /// The wgmma split-K form of [`CudaDevice::linear_tc`] (QTC_SK = 3, sm_90a; batched decode
    /// and verify): `linear_tck_*` of kernels/linear_tck.cu, one block per (K slice, run of
    /// 64-row groups, 16 or 32 tokens) writes each slice's sums to the stream's split-K buffer,
    /// then [`CudaDevice::sk_reduce`] adds the slices in order and the bias, or with TCK_FUSE = 1
    /// the form's own warpgroups do, by the same adds ([`tck_fuse`] says where); the same chain
    /// per element as the other forms, so the same bits. 16 tokens a block up to m = 16, else
    /// 32; runs sized for about QTC_SK_WAVES (default 1) waves of the blocks an SM holds; TCK_WG warpgroups
    /// (default 2), TCK_STAGES units in each warp's ring (default 8), TCK_UB units a batch of
    /// MMAs (default 4); the weights by cp.async, or into registers (TCK_LDG = 1), or by one
    /// bulk copy a warp and batch (TCK_BULK = 1). Returns `None` (nothing launched) when the
    /// slice's x and the rings do not fit in shared memory or the slice sums in
    /// [`SK_SCRATCH_FLOATS`], else whether the reduce took the epilogue `epi`
    /// ([`CudaDevice::sk_reduce`]; fused, true for SwiGLU, [`tck_fuse`]'s mode 2). Errors: a
    /// device without wgmma (not sm_90a), another format, the buffer's allocation (out of device
    /// memory, or first use inside a CUDA graph capture), the shared-memory opt-in, a launch
    /// failure.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn linear_tck(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        split_canary: bool,
        epi: Option<&mut Epilogue<'_>>,
    ) -> Result<Option<bool>> {
        self.require_wgmma("split-K linear: QTC_SK = 3")?;
        let (k, r) = (w.cols, w.rows);
        let tokens: u32 = if m <= 16 { 16 } else { 32 };
        let func = match w.dtype {
            DType::BF16 => format!("linear_tck_bf16_n{tokens}"),
            DType::Q8_0 => format!("linear_tck_q8_0_n{tokens}"),
            DType::Q4_K => format!("linear_tck_q4_k_n{tokens}"),
            d => return Err(Error::Unsupported(format!("tensor-core {}", d.name()))),
        };
        let slices = self.tc_slices(r, m, split_canary);
        let per = ((k / 32) as u32).div_ceil(slices);
        let parts = self.define("QTC_XSPLIT", 3).clamp(1, 3);
        let wg = self.define("TCK_WG", 2).clamp(1, 3);
        // TCK_CLUSTER: the cluster entries where they fit ([`tck_cluster`]), else the form below.
        let cl_stages = self.define("TCK_CL_STAGES", 6).max(2);
        let cl_smem = tck_smem_bytes(w.dtype, parts, per, tokens, wg, cl_stages)
            + tck_cl_smem_bytes(tokens, wg);
        let cl = tck_cluster(
            self.define("TCK_CLUSTER", 0) == 1,
            self.define("TCK_CL_MAX", 8),
            slices,
            rows,
            m,
            epi.as_deref(),
        )
        .filter(|_| cl_smem <= SMEM_MAX);
        let mut epi = epi;
        if let Some(mode) = cl {
            let f = (func.as_str(), tokens, wg, cl_smem, mode);
            if self.linear_tck_cluster(f, x, w, ys, rows, m, slices, epi.as_deref_mut())? {
                return Ok(Some(mode == 2));
            }
        }
        let stages = self.define("TCK_STAGES", 8).max(2);
        let smem = tck_smem_bytes(w.dtype, parts, per, tokens, wg, stages);
        // TCK_FUSE's entries hold 128 bytes of static shared memory beside the dynamic.
        let fused = self.define("TCK_FUSE", 0) == 1;
        let limit = SMEM_MAX - if fused { TCK_FUSE_STATIC_SMEM } else { 0 };
        if smem > limit || slices as usize * m * r > SK_SCRATCH_FLOATS {
            return Ok(None);
        }
        let part = self.scratch(&self.sk_part, SK_SCRATCH_FLOATS, "split-K linear")?;
        let part = part.as_ref().expect("made by scratch");
        let cnt = self.scratch(&self.sk_count, TCK_COUNTERS, "split-K linear")?;
        let cnt = cnt.as_ref().expect("made by scratch");
        let f = self.function("linear_tck.cu", &func)?;
        if smem > 48 << 10 {
            self.grant_smem(&func, &f, smem)?;
        }
        let groups = (r as u32).div_ceil(4 * TC_TILE_ROWS as u32);
        let tok_groups = (m as u32).div_ceil(tokens);
        // Blocks an SM holds (registers and shared memory, as the driver counts them).
        let per_sm = f
            .occupancy_max_active_blocks_per_multiprocessor(128 * wg, smem as usize, None)
            .map_err(super::drv)?
            .max(1);
        let blocks =
            self.info().sm_count.max(1) as u32 * per_sm * self.define("QTC_SK_WAVES", 1).max(1);
        // At most `blocks` (rounded down: run 69's qkv at M = 32 took 144 blocks of one an SM on
        // 132 SMs, two waves, 42 us against 22 at M = 16).
        let runs = (blocks / (slices * tok_groups)).clamp(1, groups);
        let rg_run = groups.div_ceil(runs);
        let runs = groups.div_ceil(rg_run);
        let (mi, ki, ri) = (i32_of(m, "m")?, i32_of(k, "k")?, i32_of(r, "r")?);
        let (si, gi) = (slices as i32, rg_run as i32);
        let fuse = tck_fuse(
            fused,
            rows,
            m,
            (groups * tok_groups) as usize,
            epi.as_deref(),
        );
        let (r0, r1) = (
            i32_of(rows[0], "r0")?,
            i32_of(rows.get(1).copied().unwrap_or(0), "r1")?,
        );
        let fi = fuse as i32;
        let null = 0u64;
        let mut b = self.launcher(&f);
        b.arg(x).arg(&w.data);
        match &w.aux {
            Some(aux) => b.arg(aux),
            None => b.arg(&null),
        };
        b.arg(part).arg(&mi).arg(&ki).arg(&ri).arg(&si).arg(&gi);
        // TCK_FUSE's arguments: the bias and the outputs (fuse 1: the reduce's; 2: SwiGLU's
        // `[m, I]`; 0: none), the row split, the counters, the mode.
        match (fuse, epi.as_deref_mut()) {
            (1, _) => push_bias_outs(&mut b, &w.bias, ys, &null),
            (2, Some(Epilogue::SwiGlu(out))) => {
                match &w.bias {
                    Some(bias) => b.arg(bias),
                    None => b.arg(&null),
                };
                b.arg(&**out).arg(&null).arg(&null);
            }
            _ => {
                b.arg(&null).arg(&null).arg(&null).arg(&null);
            }
        }
        b.arg(&r0).arg(&r1).arg(cnt).arg(&fi);
        let cfg = LaunchConfig {
            grid_dim: (slices, runs, tok_groups),
            block_dim: (128 * wg, 1, 1),
            shared_mem_bytes: smem,
        };
        // SAFETY: linear_tck_*(x, q, s, part, M, K, R, slices, rg_run, bias, y, y1, y2, R0, R1,
        // cnt, fuse): x holds m·k f32 (checked by linear_split), q/s the Tc layout of an r × k
        // matrix, part slices·m·r ≤ SK_SCRATCH_FLOATS f32 (checked above); the grid covers every
        // row group once. fuse 1: the outputs and their row split checked by linear_split, every
        // split a multiple of 4 ([`tck_fuse`]); fuse 2: out holds m·I f32, I a multiple of 64;
        // cnt holds TCK_COUNTERS zeros, at least groups·tok_groups ([`tck_fuse`]).
        unsafe { b.launch(cfg) }?;
        match fuse {
            0 => self.sk_reduce(part, w, ys, rows, m, slices, epi).map(Some),
            f => Ok(Some(f == 2)),
        }
    }

    /// The slab loop shared by the pre-split tiled forms: for each slab of at most
    /// [`slab_tokens`] tokens, the split pass writes the slab's x in `parts` bf16 parts into the
    /// stream's buffer, then the form's entry computes every row for the slab's tokens (grid:
    /// token blocks fastest, then row blocks). K slices as [`CudaDevice::tc_split`], halved for
    /// the canary. Errors: a k too large for the buffer, the buffer's allocation, the
    /// shared-memory opt-in, a launch failure.
    #[allow(clippy::too_many_arguments)]
    fn linear_slabs(
        &self,
        form: &SlabForm,
        parts: u32,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        split_canary: bool,
    ) -> Result<()> {
        let slices = self.tc_slices(w.rows, m, split_canary);
        let (k, r) = (w.cols, w.rows);
        let slab = slab_tokens(k, parts as usize);
        check(slab > 0, || {
            format!(
                "tiled linear: k {k} needs {} bytes of split x per token",
                2 * parts as usize * k
            )
        })?;
        let split = self.function(form.file, form.split)?;
        let f = self.function(form.file, form.func)?;
        if form.smem > 48 << 10 {
            self.grant_smem(form.func, &f, form.smem)?;
        }
        let buf = self.scratch(&self.xparts, TCG2_SCRATCH_BYTES, "tiled linear")?;
        let xs = buf.as_ref().expect("made by scratch");
        // Q4_K: the unit-sum pass and its buffer.
        let xsum = match form.xsum {
            Some(name) => Some((
                self.function(form.file, name)?,
                self.scratch(&self.xsum, XSUM_SCRATCH_FLOATS, "tiled linear")?,
            )),
            None => None,
        };
        let (mi, ki, ri) = (i32_of(m, "m")?, i32_of(k, "k")?, i32_of(r, "r")?);
        let r0 = i32_of(rows[0], "r0")?;
        let r1 = i32_of(rows.get(1).copied().unwrap_or(0), "r1")?;
        let si = slices as i32;
        let tiles = (r as u32).div_ceil(TC_TILE_ROWS as u32);
        let null = 0u64;
        let mut m_base = 0;
        while m_base < m {
            let mc = slab.min(m - m_base);
            let (bi, ci) = (i32_of(m_base, "m_base")?, i32_of(mc, "mc")?);
            let mut b = self.launcher(&split);
            b.arg(x).arg(xs).arg(&bi).arg(&ci).arg(&ki);
            let cfg = LaunchConfig {
                grid_dim: ((k / 32) as u32, (mc.div_ceil(8) as u32).div_ceil(8), 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the split pass (x, xs, m_base, mc, K): x holds m·k f32 (checked by
            // linear_split); xs holds ceil(mc / 8)·8 tokens of 2·parts·k bytes, at most
            // TCG2_SCRATCH_BYTES (mc ≤ slab, a multiple of 8).
            unsafe { b.launch(cfg) }?;
            // Q4_K: each unit's Σx of the slab's tokens, [k / 32][ld] f32.
            let ld = mc.div_ceil(TCW_TOKENS) * TCW_TOKENS;
            let li = i32_of(ld, "ld")?;
            if let Some((pass, xsb)) = &xsum {
                let xsb = xsb.as_ref().expect("made by scratch");
                check((k / 32) * ld <= XSUM_SCRATCH_FLOATS, || {
                    format!("tiled linear: k {k} at {ld} tokens passes the unit-sum buffer")
                })?;
                let mut b = self.launcher(pass);
                b.arg(x).arg(xsb).arg(&bi).arg(&ci).arg(&ki).arg(&li);
                let cfg = LaunchConfig {
                    grid_dim: ((k / 32) as u32, (ld / 64) as u32, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: tcw_xsum(x, xsum, m_base, mc, K, ld): x holds m·k f32; xsum holds
                // (k / 32)·ld ≤ XSUM_SCRATCH_FLOATS f32 (checked above); ld a multiple of 64.
                unsafe { b.launch(cfg) }?;
            }
            let mut b = self.launcher(&f);
            b.arg(xs).arg(&w.data);
            match &w.aux {
                Some(aux) => b.arg(aux),
                None => b.arg(&null),
            };
            push_bias_outs(&mut b, &w.bias, ys, &null);
            b.arg(&r0).arg(&r1).arg(&mi).arg(&ki).arg(&ri);
            b.arg(&bi).arg(&ci).arg(&si);
            if let Some((_, xsb)) = &xsum {
                b.arg(xsb.as_ref().expect("made by scratch")).arg(&li);
            }
            if let Some((parts, wg, used)) = form.tma {
                let shapes = tma::tcw_map_shapes(
                    w.dtype,
                    parts,
                    wg,
                    form.cluster_y > 1,
                    k,
                    mc.div_ceil(8),
                    tiles as usize,
                    ld,
                )?;
                let st = self.stream();
                let xsb = xsum
                    .as_ref()
                    .map(|(_, b)| b.as_ref().expect("made by scratch"));
                let ptrs = [
                    Some(xs.bits(st)),
                    Some(w.data.bits(st)),
                    w.aux.as_ref().map(|a| a.bits(st)),
                    xsb.map(|a| a.bits(st)),
                ];
                for (shape, ptr) in shapes.iter().zip(ptrs) {
                    b.arg_map(match (shape, ptr) {
                        (Some(sh), Some(p)) if used => tma::encode(p, sh)?,
                        // SAFETY: a zeroed map is a valid value of this plain C struct; the
                        // entry never reads a map its format has no operand for, nor any map
                        // on the cp.async ring (TCW_WS_Q = 0 for Q8_0 and Q4_K).
                        _ => unsafe { std::mem::zeroed() },
                    });
                }
            }
            b.cluster_y(form.cluster_y);
            let cfg = LaunchConfig {
                grid_dim: (
                    mc.div_ceil(form.tokens) as u32,
                    tiles
                        .div_ceil(form.row_tiles)
                        .next_multiple_of(form.cluster_y),
                    1,
                ),
                block_dim: (form.threads, 1, 1),
                shared_mem_bytes: form.smem,
            };
            // SAFETY: the argument list is LINEAR_TCG2's and LINEAR_TCW's (xs, q, s, bias,
            // LIN_OUT_PARAMS, m_base, mc, slices), then for linear_tcw_q4_k the unit sums of x
            // written above and their ld (a multiple of 128 covering the slab's token blocks);
            // shapes checked by linear_split and at DevMatrix construction.
            unsafe { b.launch(cfg) }?;
            m_base += mc;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slabs are whole blocks of 128 tokens and fit the buffer; the shared memory matches the
    /// kernel file's sizes (160 KiB for BF16 with 2 parts at 4 stages of 1 unit).
    #[test]
    fn slabs_and_shared_memory_follow_the_kernel_layout() {
        assert_eq!(slab_tokens(4096, 2), 2048);
        assert_eq!(slab_tokens(14336, 2), 512);
        assert_eq!(slab_tokens(14336, 3), 384);
        assert_eq!(slab_tokens(1 << 24, 3), 0);
        for (k, p) in [(4096, 1), (4096, 3), (14336, 2), (11008, 2)] {
            let s = slab_tokens(k, p);
            assert_eq!(s % 128, 0);
            assert!(s * 2 * p * k <= TCG2_SCRATCH_BYTES);
            assert!((s + 128) * 2 * p * k > TCG2_SCRATCH_BYTES);
        }
        assert_eq!(smem_bytes(DType::BF16, 2, 1, 4), 160 << 10);
        assert_eq!(
            smem_bytes(DType::Q8_0, 2, 1, 4),
            4 * (8 * 544 + 16 * 1024) + (64 << 10)
        );
        assert_eq!(smem_bytes(DType::BF16, 2, 2, 3), 208 << 10);
        // The wgmma form: 4 stages of 16 KiB x and 8 KiB weights, 64 KiB of totals (2 groups),
        // 4 mbarriers.
        assert_eq!(
            tcw_smem_bytes(DType::BF16, 2, 2, 4, false),
            (160 << 10) + 32
        );
        assert_eq!(
            tcw_smem_bytes(DType::Q8_0, 2, 3, 4, false),
            4 * (16384 + 12 * 544) + (96 << 10) + 32
        );
        assert!(tcw_smem_bytes(DType::BF16, 3, 3, 4, false) > SMEM_MAX);
        // TCW_CLUSTER: a "full" and an "empty" mbarrier a stage; 5 stages of BF16 in 2 parts fit.
        assert_eq!(
            tcw_smem_bytes(DType::BF16, 2, 2, 5, true),
            5 * (24 << 10) + (64 << 10) + 80
        );
        assert!(tcw_smem_bytes(DType::BF16, 2, 2, 5, true) <= SMEM_MAX);
        // The wgmma split-K form: 8 units of 32 tokens in 2 parts (32 KiB) and 8 warps' rings
        // of 8 slots (64 KiB BF16) and their mbarriers; Q8_0 slots of 576 bytes; a 4-slice K = 4,096 slice of 32
        // units at 3 parts and 3 warpgroups does not fit.
        assert_eq!(
            tck_smem_bytes(DType::BF16, 2, 8, 32, 2, 8),
            (96 << 10) + 64 * 8
        );
        assert_eq!(
            tck_smem_bytes(DType::Q8_0, 2, 8, 16, 1, 4),
            (16 << 10) + 16 * (576 + 8)
        );
        assert!(tck_smem_bytes(DType::BF16, 3, 32, 32, 3, 8) > SMEM_MAX);
        // Q4_K: 288-byte slots (256 of codes, 32 of scale words) and the slice's Σx (per · tokens
        // f32); its GEMM stages each unit's Σx of the 128 tokens (512 bytes).
        assert_eq!(
            tck_smem_bytes(DType::Q4_K, 2, 8, 32, 3, 8),
            8 * 4 * 2 * 512 + 12 * 8 * (288 + 8) + 8 * 32 * 4
        );
        assert_eq!(
            tcw_smem_bytes(DType::Q4_K, 2, 2, 4, false),
            4 * (2 * 8192 + 8 * 288 + 512) + 64 * 128 * 2 * 4 + 32
        );
    }

    /// TCK_FUSE's mode without an epilogue: off unless asked; the plain reduce (1) for outputs
    /// of whole quads (an 8B model's Q|K|V split, down, the lm-head at 32 tokens); none where a
    /// split is not a multiple of 4 (the reduce's scalar form) or the counters are too few.
    #[test]
    fn tck_fuse_takes_the_reduce_it_can_do() {
        let groups = |r: usize| r.div_ceil(64);
        assert_eq!(tck_fuse(false, &[4096], 32, groups(4096), None), 0);
        assert_eq!(
            tck_fuse(true, &[4096, 1024, 1024], 32, groups(6144), None),
            1
        );
        assert_eq!(tck_fuse(true, &[4096], 32, groups(4096), None), 1);
        assert_eq!(tck_fuse(true, &[128256], 32, groups(128256), None), 1);
        assert_eq!(tck_fuse(true, &[70], 9, groups(70), None), 0);
        assert_eq!(tck_fuse(true, &[64, 6], 9, groups(70), None), 0);
        // 262,144 rows at 256 tokens fit; twice the blocks do not.
        assert_eq!(tck_fuse(true, &[262144], 256, groups(262144) * 8, None), 1);
        assert_eq!(tck_fuse(true, &[262144], 256, TCK_COUNTERS + 1, None), 0);
    }
}
