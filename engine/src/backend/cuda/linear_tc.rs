//! The tensor-core linear kernels: `kernels/linear_tc.cu` (BF16/Q8_0, QTC = 1, and Q4_K with
//! QTC_Q4_K = 1 or 2, see [`tc_enabled`]; the weight layout they read is
//! [`super::tc_layout`]'s) and the launch of `kernels/linear_int.cu` (Q8_0/Q4_K with
//! QLIN_INT = 1, M > 1). One mma.sync m16n8k16 walk computes every row for every token count M (decode,
//! verify, batched decode, prefill), so rows are bit-identical for every M; `QTC = 1` in the
//! kernel defines makes BF16 and Q8_0 matrices take it (see [`tc_enabled`]).

use super::attention::KvIndex;
use super::ops::{check, i32_of, push_bias_outs, DevMatrix, WeightLayout};
use super::CudaDevice;
use crate::error::{Error, Result};
use crate::models::RopeStyle;
use crate::quant::DType;
use cudarc::driver::{CudaSlice, LaunchConfig};

/// Shared memory of one token's staged 1,024-element chunk of x as integer digits (QLIN_INT = 1):
/// `XI_CHUNK_F4` float4 of kernels/common.cuh, 3,584 bytes.
pub const XI_CHUNK_BYTES: u32 = 224 * 16;

/// Bytes of a stream's buffer of x staged as integer digits for the integer tensor-core
/// linears (`ceil(k / 1024)` · [`XI_CHUNK_BYTES`] per token): 16 MiB, 334 tokens at k = 14,336.
pub const IMMA_SCRATCH_BYTES: usize = 16 << 20;

/// f32 slice sums a stream's split-K buffer holds (QTC_SK = 1 or 2): slices · M · rows of one linear,
/// 64 MiB (4 slices of 32 tokens of a 128,256-row LM head).
pub const SK_SCRATCH_FLOATS: usize = 16 << 20;

/// Dynamic shared memory one block may have on the devices we build for (sm_80 and sm_90: 227
/// KiB); the split-K form falls back to the one-token family past it, the second tiled form
/// refuses a stage count that needs more.
pub(super) const SMEM_MAX: u32 = 227 << 10;

/// Row tiles a block for a one-token entry at 1-8 tokens (`tiles` row tiles of 16, `sms`
/// multiprocessors): `alt` (QTC_WT_ALT) where it puts fewer row tiles on the busiest SM than
/// `wt` (QTC_WT) does, counting blocks dealt round the SMs, else `wt`. An 8B model on 132 SMs:
/// Q|K|V (384 tiles) takes 3 (128 blocks, 3 tiles an SM, against 192 blocks of 2, 4 on the 60
/// SMs that get two); q/o and down (256 tiles) keep 2 (128 blocks against 86 of 3).
pub fn one_token_wt(tiles: u32, sms: u32, wt: u32, alt: u32) -> u32 {
    let wt = wt.max(1);
    let busiest = |w: u32| tiles.div_ceil(w).div_ceil(sms.max(1)) * w;
    if alt > 0 && busiest(alt) < busiest(wt) {
        alt
    } else {
        wt
    }
}

/// Rows per tile: the m of the m16n8k16 MMA.
pub const TC_TILE_ROWS: usize = 16;

/// Whether the device's kernel defines route `dtype` matrices to the tensor-core kernels:
/// `QTC = 1` and a BF16 matrix, a Q8_0 matrix unless `QTC_Q8_0 = 0` (research/cuda-notes.md,
/// run 39 and run 54), or a Q4_K matrix with `QTC_Q4_K` 1 or 2 (off by default; 1: the
/// one-token entries take every M; 2: also the wgmma split-K and GEMM forms, by QTC_SK = 3's and
/// QTC_GEMM = 3's token counts; see `CudaDevice::linear_tc`).
pub fn tc_enabled(dev: &CudaDevice, dtype: DType) -> bool {
    dev.define("QTC", 0) == 1
        && match dtype {
            DType::BF16 => true,
            DType::Q8_0 => dev.define("QTC_Q8_0", 1) == 1,
            DType::Q4_K => matches!(dev.define("QTC_Q4_K", 0), 1 | 2),
            _ => false,
        }
}

/// What a split-K form's reduce may compute from the slice sums instead of storing the outputs
/// as they are ([`CudaDevice::sk_reduce`]); the same bits as the unfused launches.
pub enum Epilogue<'a> {
    /// SwiGLU of a gate|up matrix's two halves into `[m, I]` f32 (TCS_GLU = 1).
    SwiGlu(&'a mut CudaSlice<f32>),
    /// RoPE of q and k, then k and v appended to one layer's KV cache (TCS_ROPE = 1).
    RopeAppend(RopeAppend<'a>),
}

/// The arguments [`CudaDevice::rope_qk_append`] takes besides q, k and v.
pub struct RopeAppend<'a> {
    /// One layer's key and value caches.
    pub kc: &'a mut CudaSlice<f32>,
    pub vc: &'a mut CudaSlice<f32>,
    /// Each row's position and cache slot.
    pub idx: &'a KvIndex,
    /// `[head_dim / 2]` f32.
    pub inv_freq: &'a CudaSlice<f32>,
    /// (query heads, KV heads).
    pub heads: (usize, usize),
    pub style: RopeStyle,
}

impl CudaDevice {
    /// The K slices of a tensor-core matrix of `rows` rows and the entry-name suffix that has
    /// them: QTC_SPLIT_BIG and "_big" when that is set and `rows` is at least QTC_BIG_ROWS
    /// (default 16,384), else QTC_SPLIT (default 8) and "". Fixed by the matrix's shape, so every
    /// M (and both forms) reduces a row in the same order.
    pub(super) fn tc_split(&self, rows: usize) -> (u32, &'static str) {
        let big = self.define("QTC_SPLIT_BIG", 0);
        if big > 0 && rows >= self.define("QTC_BIG_ROWS", 16384).max(1) as usize {
            (big, "_big")
        } else {
            (self.define("QTC_SPLIT", 8).max(1), "")
        }
    }

    /// The K slices every form walks for a matrix of `rows` rows at `m` tokens:
    /// [`CudaDevice::tc_split`]'s count, halved for the gates' split canary when m > 1 (a
    /// reduction order that depends on the shape, on purpose).
    pub(super) fn tc_slices(&self, rows: usize, m: usize, split_canary: bool) -> u32 {
        let s = self.tc_split(rows).0;
        if split_canary && m > 1 && s > 1 {
            s / 2
        } else {
            s
        }
    }

    /// The fewest tokens at which a matrix of `rows` rows takes the tiled GEMM (with QTC_GEMM
    /// on): QTC_GEMM_MIN (default 64), or for matrices of at least QTC_BIG_ROWS rows (gate+up,
    /// the lm-head) QTC_GEMM_MIN_BIG when it is above 0. Below it the split-K and one-token
    /// forms take the tokens in groups of 32 (but from 64 tokens a matrix whose split-K partials
    /// pass their scratch takes the GEMM: [`CudaDevice::linear_tc`]). The GEMM's blocks are 128
    /// rows by 128 tokens: a
    /// 4,096-row matrix gives 32 of them, too few for an H200's 132 SMs below a few hundred
    /// tokens, while a 28,672-row one gives 224 (H200 run 92, M = 128: gate+up 183 µs on the GEMM
    /// against 222 on the split-K form, down 280 against 117). Every form computes a row by the
    /// same chain, so the choice never changes bits.
    pub(super) fn gemm_min(&self, rows: usize) -> usize {
        let big = self.define("QTC_GEMM_MIN_BIG", 0);
        if big > 0 && rows >= self.define("QTC_BIG_ROWS", 16384).max(1) as usize {
            big as usize
        } else {
            self.define("QTC_GEMM_MIN", 64).max(1) as usize
        }
    }

    /// Errors ([`Error::InvalidArgument`] through `check`) unless the device has Hopper's
    /// warpgroup MMA (sm_90a); `what` names the form and the define that chose it.
    pub(super) fn require_wgmma(&self, what: &str) -> Result<()> {
        check(self.info().arch == "sm_90a", || {
            format!(
                "{what} (wgmma) needs sm_90a; this device is {}",
                self.info().arch
            )
        })
    }

    /// `y = x W^T (+ bias)` on the tensor-core kernels for a [`WeightLayout::Tc`] matrix: `x`
    /// `[m, k]` f32, outputs as [`CudaDevice::linear_split`] (already checked by it). Blocks take
    /// QTC_WT tiles of 16 rows (up to 8 tokens QTC_WT_ALT where [`one_token_wt`] picks it) and up
    /// to 8, 16 or 32 tokens (the `_n1`, `_n2`, `_n4` entries, which
    /// compute each row identically); QTC_SPLIT warps per block. `epi`: where a split-K form
    /// runs, its reduce computes that epilogue instead of storing the outputs as they are (see
    /// [`CudaDevice::sk_reduce`]); returns whether it did. Errors: a launch failure.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn linear_tc(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        split_canary: bool,
        mut epi: Option<&mut Epilogue<'_>>,
    ) -> Result<bool> {
        debug_assert_eq!(w.layout, WeightLayout::Tc);
        let (k, r) = (w.cols, w.rows);
        check(k > 0 && k.is_multiple_of(32), || {
            format!("linear_tc: k {k} must be a positive multiple of 32")
        })?;
        // Q4_K: with QTC_Q4_K = 1 the one-token entries take every M; with 2 the wgmma forms
        // (QTC_SK = 3, QTC_GEMM = 3) too, for every Q4_K matrix (TCK_MIN_MB counts BF16 bytes).
        // Its units are read by super-block (K a multiple of 256, as `tc_layout::repack_tc` requires).
        let q4k = w.dtype == DType::Q4_K;
        check(!q4k || k.is_multiple_of(256), || {
            format!("linear_tc: a Q4_K matrix's k {k} must be a multiple of 256")
        })?;
        let q4_wgmma = q4k && self.define("QTC_Q4_K", 0) == 2;
        // Only the wgmma forms (3) have Q4_K entries.
        let form = |name: &str| match self.define(name, 0) {
            3 if q4_wgmma => 3,
            _ if q4k => 0,
            v => v,
        };
        let gemm = form("QTC_GEMM");
        // The tiled GEMM's form, by QTC_GEMM.
        let tiled = |ys: &mut [&mut CudaSlice<f32>]| match gemm {
            3 => self.linear_tcw(x, w, ys, rows, m, split_canary),
            2 => self.linear_tcg2(x, w, ys, rows, m, split_canary),
            _ => self.linear_tcg(x, w, ys, rows, m, split_canary),
        };
        if gemm >= 1 && m >= self.gemm_min(r) {
            tiled(ys)?;
            return Ok(false);
        }
        // QTC_SK = 1: the split-K form for every matrix; 2: for the BF16 QTC_SPLIT_BIG ones only
        // (H200, M = 32: BF16 gate+up 102 -> 93 us, run 52, while the 4096-row matrices are
        // 1.4-1.7x slower; the Q8_0 gate+up 90 -> 99 us, run 55); 3: the wgmma split-K form
        // (sm_90a) from QTC_SK_MIN tokens (default 9), for matrices of at least TCK_MIN_MB MiB of
        // weights (default 0: every one; H200 run 70: BF16 q/o, 32 MiB, 17.1 -> 19.5 us at M = 32
        // while qkv, 48 MiB, went 31.0 -> 26.3) and for Q8_0 only with TCK_Q8_0 = 1 (default 1;
        // run 70: Q8_0 gate+up 91.3 -> 94.4 us at M = 32).
        let sk = form("QTC_SK");
        if sk == 3
            && m >= self.define("QTC_SK_MIN", 9).max(2) as usize
            && (q4k || w.data.len() >= (self.define("TCK_MIN_MB", 0) as usize) << 20)
            && (w.dtype != DType::Q8_0 || self.define("TCK_Q8_0", 1) != 0)
        {
            if let Some(epi_done) =
                self.linear_tck(x, w, ys, rows, m, split_canary, epi.as_deref_mut())?
            {
                return Ok(epi_done);
            }
            // Its partials pass the scratch (slices·m·r floats: the lm-head from 33 tokens,
            // gate+up from 147, qkv from 171 on an 8B model): from 64 tokens the tiled GEMM reads
            // the weights once, where the one-token form below reads them once per 32 tokens.
            if gemm >= 1 && m >= 64 {
                tiled(ys)?;
                return Ok(false);
            }
        }
        let sk_big = w.dtype == DType::BF16 && self.tc_split(r).1 == "_big";
        if (sk == 1 || (sk == 2 && sk_big)) && (9..=32).contains(&m) {
            if let Some(epi_done) = self.linear_tcs(x, w, ys, rows, m, split_canary, epi)? {
                return Ok(epi_done);
            }
        }
        // Q4_K has entries of up to 16 tokens (`_n1`, `_n2`; kernels/linear_tc.cu).
        let nt: u32 = match m.div_ceil(8) {
            1 => 1,
            2 => 2,
            _ if q4k => 2,
            _ => 4,
        };
        let (split, suffix) = self.tc_split(r);
        let tiles = (r as u32).div_ceil(TC_TILE_ROWS as u32);
        // QTC_WT row tiles a block, or up to 8 tokens QTC_WT_ALT where that spreads them better.
        let (wt0, alt) = (
            self.define("QTC_WT", 2).max(1),
            self.define("QTC_WT_ALT", 0),
        );
        let wt = if nt == 1 && suffix.is_empty() && alt > 0 {
            one_token_wt(tiles, self.info().sm_count.max(1) as u32, wt0, alt)
        } else {
            wt0
        };
        let suffix = if wt != wt0 { "_alt" } else { suffix };
        let func = match w.dtype {
            DType::BF16 => format!("linear_tc_bf16_n{nt}{suffix}"),
            // QTC_Q8_M1 = 2: one token takes the `_m1` entries (the `_n1` ones' slices, row tiles
            // and load groups in a loop of their own: same bits).
            DType::Q8_0 if m == 1 && self.define("QTC_Q8_M1", 0) == 2 => {
                format!("linear_tc_q8_0_m1{suffix}")
            }
            DType::Q8_0 => format!("linear_tc_q8_0_n{nt}{suffix}"),
            DType::Q4_K => format!("linear_tc_q4_k_n{nt}{suffix}"),
            d => return Err(Error::Unsupported(format!("tensor-core {}", d.name()))),
        };
        let (row_groups, tok_groups) = (tiles.div_ceil(wt), (m as u32).div_ceil(8 * nt));
        let cfg = LaunchConfig {
            // QTC_TOKFAST: token groups fastest (kernels/linear_tc.cu).
            grid_dim: if self.define("QTC_TOKFAST", 0) != 0 {
                (tok_groups, row_groups, 1)
            } else {
                (row_groups, tok_groups, 1)
            },
            block_dim: (32 * split, 1, 1),
            shared_mem_bytes: split * wt * nt * 512,
        };
        self.launch_linear("linear_tc.cu", &func, cfg, x, w, ys, rows, m, split_canary)?;
        Ok(false)
    }

    /// The split-K form of [`CudaDevice::linear_tc`] for 9..32 tokens (QTC_SK = 1, or 2 for the
    /// BF16 QTC_SPLIT_BIG matrices only):
    /// `linear_tcs_*` of kernels/linear_tcs.cu writes each K slice's sums for runs of row tiles
    /// against x staged once per block in shared memory, then [`CudaDevice::sk_reduce`] adds the
    /// slices in order and the bias; the same chain per element as the other forms, so the same
    /// bits.
    /// Grid: (slices, row runs, token groups of 8 · NT) with about QTC_SK_WAVES (default 1)
    /// blocks per SM; QTC_SK_WARPS warps (default 8). Returns `None` (nothing launched) when the
    /// slice's staged x or the slice sums do not fit (shared memory, [`SK_SCRATCH_FLOATS`]),
    /// else whether the reduce took the epilogue `epi` ([`CudaDevice::sk_reduce`]).
    /// Errors: another format, the buffer's allocation (out of device memory, or first use
    /// inside a CUDA graph capture), a launch failure.
    #[allow(clippy::too_many_arguments)]
    fn linear_tcs(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        split_canary: bool,
        epi: Option<&mut Epilogue<'_>>,
    ) -> Result<Option<bool>> {
        let (k, r) = (w.cols, w.rows);
        let nt: u32 = if m <= 16 { 2 } else { 4 };
        let slices = self.tc_slices(r, m, split_canary);
        let nu = (k / 32) as u32;
        let per = nu.div_ceil(slices);
        let parts = self.define("QTC_XSPLIT", 3).clamp(1, 3);
        let smem = per * nt * parts * 512;
        if smem > SMEM_MAX || slices as usize * m * r > SK_SCRATCH_FLOATS {
            return Ok(None);
        }
        let func = match w.dtype {
            DType::BF16 => format!("linear_tcs_bf16_n{nt}"),
            DType::Q8_0 => format!("linear_tcs_q8_0_n{nt}"),
            d => return Err(Error::Unsupported(format!("tensor-core {}", d.name()))),
        };
        let part = self.scratch(&self.sk_part, SK_SCRATCH_FLOATS, "split-K linear")?;
        let part = part.as_ref().expect("made by scratch");
        let f = self.function("linear_tcs.cu", &func)?;
        if smem > 48 << 10 {
            self.grant_smem(&func, &f, smem)?;
        }
        let tiles = (r as u32).div_ceil(TC_TILE_ROWS as u32);
        let blocks = (self.info().sm_count.max(1) as u32) * self.define("QTC_SK_WAVES", 1).max(1);
        let runs = blocks.div_ceil(slices).clamp(1, tiles);
        let (mi, ki, ri) = (i32_of(m, "m")?, i32_of(k, "k")?, i32_of(r, "r")?);
        let si = slices as i32;
        let null = 0u64;
        let mut b = self.launcher(&f);
        b.arg(x).arg(&w.data);
        match &w.aux {
            Some(aux) => b.arg(aux),
            None => b.arg(&null),
        };
        b.arg(part).arg(&mi).arg(&ki).arg(&ri).arg(&si);
        let cfg = LaunchConfig {
            grid_dim: (slices, runs, (m as u32).div_ceil(8 * nt)),
            block_dim: (32 * self.define("QTC_SK_WARPS", 8).max(1), 1, 1),
            shared_mem_bytes: smem,
        };
        // SAFETY: linear_tcs_*(x, q, s, part, M, K, R, slices): x holds m·k f32 (checked by
        // linear_split), q/s the Tc layout of an r × k matrix, part slices·m·r ≤
        // SK_SCRATCH_FLOATS f32 (checked above).
        unsafe { b.launch(cfg) }?;
        self.sk_reduce(part, w, ys, rows, m, slices, epi).map(Some)
    }

    /// `linear_tcs_reduce` (or its four-rows-a-thread twin `linear_tcs_reduce4`, when the row
    /// counts are multiples of 4) of kernels/splitk_reduce.cu after a split-K form: y = the `slices`
    /// slice sums of `part` (`[slices][m][w.rows]` f32) added in slice order (the first as is),
    /// then the bias, to the outputs (checked by [`CudaDevice::linear_split`]).
    ///
    /// With [`Epilogue::SwiGlu`] (`[m, I]` f32) and a gate|up matrix of two outputs of I rows
    /// each, I a multiple of 4, `linear_tcs_reduce_swiglu` stores SwiGLU(gate, up) there instead,
    /// from the same sums (the bits [`CudaDevice::gated_act`] would give from the outputs), and
    /// the outputs are left unwritten. With [`Epilogue::RopeAppend`] and a Q|K|V matrix whose
    /// three outputs match its heads, the reduce rotates and appends as
    /// [`CudaDevice::rope_qk_append`] would after it ([`CudaDevice::reduce_rope_append`]).
    /// Returns whether an epilogue ran. Errors: a launch failure.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sk_reduce(
        &self,
        part: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        slices: u32,
        epi: Option<&mut Epilogue<'_>>,
    ) -> Result<bool> {
        let inter = rows[0];
        let done = match epi {
            Some(Epilogue::RopeAppend(ra)) => {
                self.reduce_rope_append(part, w, ys, rows, m, slices, ra)?
            }
            Some(Epilogue::SwiGlu(out))
                if rows.len() == 2
                    && rows[1] == inter
                    && inter.is_multiple_of(4)
                    && out.len() == m * inter =>
            {
                let f = self.function("splitk_reduce.cu", "linear_tcs_reduce_swiglu")?;
                let (mi, ii, si) = (i32_of(m, "m")?, i32_of(inter, "I")?, slices as i32);
                let null = 0u64;
                let mut b = self.launcher(&f);
                b.arg(part);
                match &w.bias {
                    Some(bias) => b.arg(bias),
                    None => b.arg(&null),
                };
                b.arg(&**out).arg(&mi).arg(&ii).arg(&si);
                let cfg = LaunchConfig {
                    grid_dim: ((m * inter).div_ceil(1024) as u32, 1, 1),
                    block_dim: (256, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: linear_tcs_reduce_swiglu(part, bias, out, M, I, slices): part holds
                // slices·m·2I f32 written by the split-K form, bias (or null) 2I f32, out m·I f32
                // (checked above).
                unsafe { b.launch(cfg) }?;
                true
            }
            _ => false,
        };
        if done {
            return Ok(true);
        }
        let (k, r) = (w.cols, w.rows);
        // Four rows a thread (`linear_tcs_reduce4`, the same adds) where no output boundary or
        // 16-byte alignment splits a group of four.
        let quads = r.is_multiple_of(4) && rows.iter().all(|n| n.is_multiple_of(4));
        let name = if quads {
            "linear_tcs_reduce4"
        } else {
            "linear_tcs_reduce"
        };
        let red = self.function("splitk_reduce.cu", name)?;
        let (mi, ki, ri) = (i32_of(m, "m")?, i32_of(k, "k")?, i32_of(r, "r")?);
        let r0 = i32_of(rows[0], "r0")?;
        let r1 = i32_of(rows.get(1).copied().unwrap_or(0), "r1")?;
        let si = slices as i32;
        let null = 0u64;
        let mut b = self.launcher(&red);
        b.arg(part);
        push_bias_outs(&mut b, &w.bias, ys, &null);
        b.arg(&r0).arg(&r1).arg(&mi).arg(&ki).arg(&ri).arg(&si);
        let cfg = LaunchConfig {
            grid_dim: (
                (m * r).div_ceil(if quads { 1024 } else { 256 }) as u32,
                1,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: linear_tcs_reduce[4](part, bias, y, y1, y2, R0, R1, M, K, R, slices): part holds
        // slices·m·r f32 written by the split-K form; outputs and their row split checked by
        // linear_split.
        unsafe { b.launch(cfg) }?;
        Ok(false)
    }

    /// The tiled form of [`CudaDevice::linear_tc`] for many tokens (QTC_GEMM = 1 and m at
    /// least QTC_GEMM_MIN, default 64): `linear_tcg_*` of kernels/linear_tct.cu, blocks of 128
    /// rows by 128 tokens with x and the weights staged in shared memory, each row computed by the
    /// same chain as the one-token form (so bit-identical for every M). Errors: another format,
    /// the shared-memory opt-in, a launch failure.
    fn linear_tcg(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        split_canary: bool,
    ) -> Result<()> {
        // TCG_MT, TCG_NT, TCG_XW, TCG_XF and TCG_STAGES of kernels/linear_tct.cu.
        const ROW_TILES: u32 = 8;
        const TOKENS: u32 = 128;
        const XW: u32 = 20;
        const XF: u32 = 40;
        const STAGES: u32 = 4;
        let suffix = self.tc_split(w.rows).1;
        let (func, w_stage) = match w.dtype {
            DType::BF16 => (format!("linear_tcg_bf16{suffix}"), ROW_TILES * 1024),
            DType::Q8_0 => (format!("linear_tcg_q8_0{suffix}"), ROW_TILES * (512 + 32)),
            d => return Err(Error::Unsupported(format!("tensor-core {}", d.name()))),
        };
        let parts = self.define("QTC_XSPLIT", 3).clamp(1, 3);
        // x staged as bf16 parts, or as f32 with QTC_GEMM_XASYNC = 1.
        let x_stage = if self.define("QTC_GEMM_XASYNC", 0) == 1 {
            TOKENS * XF * 4
        } else {
            parts * TOKENS * XW * 4
        };
        let tiles = (w.rows as u32).div_ceil(TC_TILE_ROWS as u32);
        let cfg = LaunchConfig {
            grid_dim: ((m as u32).div_ceil(TOKENS), tiles.div_ceil(ROW_TILES), 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: STAGES * (w_stage + x_stage),
        };
        self.launch_linear("linear_tct.cu", &func, cfg, x, w, ys, rows, m, split_canary)
    }

    /// `y = x W^T (+ bias)` for M > 1 on the integer tensor-core kernels
    /// (`kernels/linear_int.cu`, QLIN_INT = 1): a repacked ([`WeightLayout::Lanes`]) Q8_0 or Q4_K
    /// matrix. x is staged once per slab of tokens (`stage_x_int`, the same integer digits as the
    /// lane kernels stage) into this stream's digit buffer, then every block reads them, so every
    /// row has the bits the one-token kernel gives it. Slabs: at most QIMMA_SLAB tokens (default
    /// 256) and what [`IMMA_SCRATCH_BYTES`] holds at this k, a multiple of 32. Blocks: up to 8,
    /// 16 or 32 tokens (`_n1`, `_n2`, `_n4`; at most QIMMA_NT tiles of 8, default 4, and 2 with
    /// more than 64 accumulators a thread) by tiles of 16 rows (QIMMA_TILES for Q8_0 above 8
    /// tokens, else 1), 8 warps. Errors: another format, a k too large for the
    /// buffer, the buffer's allocation (out of device memory, or first use inside a CUDA graph
    /// capture), a launch failure.
    pub(super) fn linear_imma(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
    ) -> Result<()> {
        let tiles_q8 = self.define("QIMMA_TILES", 1).max(1);
        let q8 = w.dtype == DType::Q8_0;
        // Row tiles per block: QIMMA_TILES for Q8_0 blocks of more than 8 tokens, else 1, as the
        // LINEAR_IMMA entries of kernels/linear_int.cu are compiled.
        let wt_for = |nt: u32| if q8 && nt >= 2 { tiles_q8 } else { 1 };
        // QIMMA_WARPS of kernels/linear_int.cu.
        let nw: u32 = 8;
        // The 32-token entries exist where a thread keeps at most 64 accumulators: 32 / warps
        // classes by the entry's row tiles at most 4 (kernels/linear_int.cu).
        let nt_max = match self.define("QIMMA_NT", 4) {
            n if n >= 4 && (32 / nw) * wt_for(4) <= 4 => 4,
            n if n >= 2 => 2,
            _ => 1,
        };
        // Token tiles per block for a slab of `mc` tokens (a token's order does not depend on
        // it, so the tail slab takes its own).
        let nt_for = |mc: usize| (mc.div_ceil(8) as u32).next_power_of_two().min(nt_max);
        let func_for = |nt: u32| match w.dtype {
            DType::Q8_0 => Ok(format!("linear_imma_q8_0_n{nt}")),
            DType::Q4_K => Ok(format!("linear_imma_q4_k_n{nt}")),
            d => Err(Error::Unsupported(format!(
                "integer tensor-core {}",
                d.name()
            ))),
        };
        func_for(1)?; // another format is refused before anything is staged
        let (k, r) = (w.cols, w.rows);
        let nc = k.div_ceil(1024);
        let per_token = nc * XI_CHUNK_BYTES as usize;
        check(k > 0 && per_token <= IMMA_SCRATCH_BYTES, || {
            format!("integer linear: k {k} needs {per_token} bytes of staged x per token")
        })?;
        let slab_max = (self.define("QIMMA_SLAB", 256).max(1) as usize)
            .min(IMMA_SCRATCH_BYTES / per_token)
            .max(1);
        let slab = if slab_max >= 32 {
            slab_max / 32 * 32
        } else {
            slab_max
        };
        let tiles = (r as u32).div_ceil(TC_TILE_ROWS as u32);
        let stage = self.function("linear_int.cu", "stage_x_int")?;
        let aux = w.aux.as_ref().ok_or_else(|| {
            Error::InvalidArgument("integer linear: a lanes matrix without its headers".into())
        })?;
        let digits = self.scratch(&self.digits, IMMA_SCRATCH_BYTES, "integer linear")?;
        let xd = digits.as_ref().expect("made by scratch");
        let (ki, ri, mi) = (i32_of(k, "k")?, i32_of(r, "r")?, i32_of(m, "m")?);
        let r0 = i32_of(rows[0], "r0")?;
        let r1 = i32_of(rows.get(1).copied().unwrap_or(0), "r1")?;
        let null = 0u64;
        let mut m_base = 0;
        while m_base < m {
            let mc = slab.min(m - m_base);
            let (bi, ci) = (i32_of(m_base, "m_base")?, i32_of(mc, "mc")?);
            let nt = nt_for(mc);
            let func = func_for(nt)?;
            let wt = wt_for(nt);
            let f = self.function("linear_int.cu", &func)?;
            let smem = nw * wt * nt * 512;
            if smem > 48 << 10 {
                self.grant_smem(&func, &f, smem)?;
            }
            let mut b = self.launcher(&stage);
            b.arg(x).arg(xd).arg(&bi).arg(&ki);
            let cfg = LaunchConfig {
                grid_dim: (nc as u32, mc as u32, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: stage_x_int(x, xd, m_base, K): x holds m·k f32 (checked by linear_split),
            // xd holds mc · per_token ≤ IMMA_SCRATCH_BYTES bytes.
            unsafe { b.launch(cfg) }?;
            let mut b = self.launcher(&f);
            b.arg(xd).arg(&w.data).arg(aux);
            push_bias_outs(&mut b, &w.bias, ys, &null);
            b.arg(&r0)
                .arg(&r1)
                .arg(&mi)
                .arg(&ki)
                .arg(&ri)
                .arg(&bi)
                .arg(&ci);
            let cfg = LaunchConfig {
                grid_dim: ((mc as u32).div_ceil(8 * nt), tiles.div_ceil(wt), 1),
                block_dim: (32 * nw, 1, 1),
                shared_mem_bytes: smem,
            };
            // SAFETY: the argument list is LINEAR_IMMA's (xd, q, h, bias, LIN_OUT_PARAMS, m_base,
            // mc); shapes checked by linear_split and at DevMatrix construction.
            unsafe { b.launch(cfg) }?;
            m_base += mc;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QTC_WT_ALT where it unloads the busiest SM: the 8B shapes on the H200's 132 SMs (Q|K|V
    /// takes 3, q/o, down and the lm-head keep 2), never without an alternative.
    #[test]
    fn one_token_wt_spreads_row_tiles() {
        assert_eq!(one_token_wt(384, 132, 2, 3), 3);
        assert_eq!(one_token_wt(256, 132, 2, 3), 2);
        assert_eq!(one_token_wt(8016, 132, 2, 3), 2);
        assert_eq!(one_token_wt(384, 132, 2, 0), 2);
        // 264 tiles: one block of 2 an SM (2 tiles) against 88 of 3 (3 tiles) keeps QTC_WT; so
        // does a tie (600 tiles: 3 blocks of 2 or 2 of 3 on the busiest SM, 6 tiles either way).
        assert_eq!(one_token_wt(264, 132, 2, 3), 2);
        assert_eq!(one_token_wt(600, 132, 2, 3), 2);
        // Fewer tiles a block can win too (QTC_WT_ALT = 1: 100 tiles, 1 an SM against 2).
        assert_eq!(one_token_wt(100, 132, 2, 1), 1);
        // The self-check's matrix: 3 tiles for each of 132 SMs.
        assert_eq!(one_token_wt(3 * 132, 132, 2, 3), 3);
    }
}
