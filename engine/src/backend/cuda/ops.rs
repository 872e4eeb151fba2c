//! Launch wrappers for the kernels of `kernels/*.cu`: shapes are checked here, grids derived from
//! the tuned constants, and every launch goes on the device's stream. Activations are f32.

use super::linear_tc::{Epilogue, RopeAppend};
use super::CudaDevice;
use crate::error::{Error, Result};
use crate::models::{Activation, RopeStyle};
use crate::quant::DType;
use cudarc::driver::{CudaSlice, LaunchConfig};

/// How a [`DevMatrix`]'s bytes are laid out, which picks the kernels that read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightLayout {
    /// Raw GGUF/safetensors rows (`linear_<fmt>` kernels of kernels/linear.cu).
    Raw,
    /// Q8_0/Q4_K quants split from their headers, a lane's unit one aligned 16-byte load
    /// (`linear_<fmt>_r` kernels).
    Lanes,
    /// Tiles of 16 rows in MMA fragment order (kernels/linear_tc.cu; BF16 and Q8_0 with QTC = 1).
    Tc,
}

/// A weight matrix on the device: `[rows, cols]` in its stored format (raw GGUF/safetensors
/// bytes, row-major, `rows * dtype.bytes_for(cols)` bytes) or repacked (see `layout`), with an
/// optional f32 bias `[rows]`.
pub struct DevMatrix {
    /// Raw bytes, or the aligned quants of a repacked matrix.
    pub data: CudaSlice<u8>,
    /// Block headers of a repacked matrix (Q8_0: f16 scales `[rows, cols/32]`; Q4_K: 16 bytes
    /// per super-block `[rows, cols/256]`: d, dmin, the 12-byte scale table; Tc Q8_0: the
    /// scales of each tile's rows per unit).
    pub aux: Option<CudaSlice<u8>>,
    /// Which layout `data` and `aux` hold.
    pub layout: WeightLayout,
    pub dtype: DType,
    pub rows: usize,
    pub cols: usize,
    pub bias: Option<CudaSlice<f32>>,
}

/// Splits GGUF Q8_0 / Q4_K rows into 16-byte-aligned quants and a header array (the layout the
/// `linear_*_r` kernels read); `None` for other formats. Q8_0: quants `[rows, cols]` i8, headers
/// `[rows, cols/32]` f16 scales. Q4_K: quants `[rows, cols/32, 16]` — sub-block j of a
/// super-block as 16 bytes, byte i = value i | value (i + 16) << 4 — and headers
/// `[rows, cols/256, 16]` (d, dmin, the 12-byte scale/min table, as stored).
fn repack(raw: &[u8], dtype: DType) -> Option<(Vec<u8>, Vec<u8>)> {
    match dtype {
        DType::Q8_0 => {
            let blocks = raw.len() / 34;
            let (mut q, mut h) = (
                Vec::with_capacity(blocks * 32),
                Vec::with_capacity(blocks * 2),
            );
            for b in raw.chunks_exact(34) {
                h.extend_from_slice(&b[..2]);
                q.extend_from_slice(&b[2..]);
            }
            Some((q, h))
        }
        DType::Q4_K => {
            let blocks = raw.len() / 144;
            let (mut q, mut h) = (
                Vec::with_capacity(blocks * 128),
                Vec::with_capacity(blocks * 16),
            );
            for b in raw.chunks_exact(144) {
                h.extend_from_slice(&b[..16]);
                let qs = &b[16..];
                for j in 0..8 {
                    let (g, shift) = (&qs[32 * (j / 2)..][..32], 4 * (j % 2));
                    let v = |i: usize| (g[i] >> shift) & 0x0f;
                    q.extend((0..16).map(|i| v(i) | (v(i + 16) << 4)));
                }
            }
            Some((q, h))
        }
        _ => None,
    }
}

impl DevMatrix {
    /// Uploads `rows x cols` raw bytes of `dtype`. Errors when `cols` is not a multiple of 32 or
    /// of the format's block, or the byte count is wrong; out of device memory is an error
    /// naming the size.
    pub fn upload(
        dev: &CudaDevice,
        raw: &[u8],
        dtype: DType,
        rows: usize,
        cols: usize,
        bias: Option<&[f32]>,
    ) -> Result<DevMatrix> {
        let row = dtype.bytes_for(cols);
        if !cols.is_multiple_of(32) || row.map(|b| b * rows) != Some(raw.len()) {
            return Err(Error::Unsupported(format!(
                "CUDA weights: a [{rows}, {cols}] {} matrix of {} bytes (rows must hold whole \
                 32-element units)",
                dtype.name(),
                raw.len()
            )));
        }
        let data = dev.upload(raw)?;
        let bias = bias.map(|b| dev.upload(b)).transpose()?;
        Ok(DevMatrix {
            data,
            aux: None,
            layout: WeightLayout::Raw,
            dtype,
            rows,
            cols,
            bias,
        })
    }

    /// [`DevMatrix::upload`], repacking Q8_0 and Q4_K into the aligned layout of the
    /// `linear_*_r` kernels (same values and lane order, 16-byte loads; with QLIN_FACTOR = 1, the
    /// default, the scale is applied once per unit, a rounding of its own that is the same for
    /// every M). Such a matrix serves linear layers only, not embedding gathers.
    pub fn upload_repacked(
        dev: &CudaDevice,
        raw: &[u8],
        dtype: DType,
        rows: usize,
        cols: usize,
        bias: Option<&[f32]>,
    ) -> Result<DevMatrix> {
        let checked = dtype.bytes_for(cols).map(|b| b * rows) == Some(raw.len());
        if super::linear_tc::tc_enabled(dev, dtype) {
            if let Some((q, s)) = super::tc_layout::repack_tc(raw, dtype, rows, cols) {
                return Ok(DevMatrix {
                    data: dev.upload(&q)?,
                    aux: if s.is_empty() {
                        None
                    } else {
                        Some(dev.upload(&s)?)
                    },
                    layout: WeightLayout::Tc,
                    dtype,
                    rows,
                    cols,
                    bias: bias.map(|b| dev.upload(b)).transpose()?,
                });
            }
        }
        match repack(raw, dtype).filter(|_| checked && cols.is_multiple_of(32)) {
            Some((q, h)) => Ok(DevMatrix {
                data: dev.upload(&q)?,
                aux: Some(dev.upload(&h)?),
                layout: WeightLayout::Lanes,
                dtype,
                rows,
                cols,
                bias: bias.map(|b| dev.upload(b)).transpose()?,
            }),
            None => Self::upload(dev, raw, dtype, rows, cols, bias),
        }
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.dtype.bytes_for(self.cols).unwrap_or(0)
    }
}

/// The kernel-name suffix of a weight format (`q4_k`).
fn fmt_suffix(d: DType) -> String {
    d.name().to_lowercase()
}

/// Pushes what every linear entry takes after its weights: the bias (or a null pointer) and the
/// three outputs `y, y1, y2` of `LIN_OUT_PARAMS` (kernels/common.cuh), the unused ones null.
/// `ys` holds 1 to 3 outputs (checked by [`CudaDevice::linear_split`]).
pub(super) fn push_bias_outs<'a>(
    b: &mut super::launch::Launch<'a>,
    bias: &'a Option<CudaSlice<f32>>,
    ys: &'a mut [&mut CudaSlice<f32>],
    null: &'a u64,
) {
    match bias {
        Some(bias) => b.arg(bias),
        None => b.arg(null),
    };
    let mut outs = ys.iter_mut();
    let y0 = outs.next().expect("checked: 1..=3 outputs");
    b.arg(&**y0);
    for y in [outs.next(), outs.next()] {
        match y {
            Some(y) => b.arg(&**y),
            None => b.arg(null),
        };
    }
}

pub(super) fn check(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(what()))
    }
}

pub(super) fn i32_of(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::InvalidArgument(format!("{what} {v} exceeds i32")))
}

impl CudaDevice {
    /// RMSNorm with an optional fused residual add, one block per row.
    /// `x`: `[rows, n]` f32; `residual`: `[rows, n]` f32, updated to `x + residual` when given;
    /// `w`: `[n]` f32; `out`: `[rows, n]` f32 = `h / sqrt(mean(h²) + eps) * w` with `h` the sum
    /// (or `x` alone).
    pub fn rms_norm_residual(
        &self,
        x: &CudaSlice<f32>,
        residual: Option<&mut CudaSlice<f32>>,
        w: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        rows: usize,
        eps: f32,
    ) -> Result<()> {
        let n = w.len();
        check(x.len() == rows * n && out.len() == rows * n, || {
            format!(
                "rms_norm: x {} / out {} != {rows} x {n}",
                x.len(),
                out.len()
            )
        })?;
        let f = self.function("norm.cu", "rms_norm_residual_f32")?;
        let cfg = LaunchConfig {
            grid_dim: (rows as u32, 1, 1),
            block_dim: (self.define("NORM_THREADS", 256), 1, 1),
            shared_mem_bytes: 0,
        };
        let n = i32_of(n, "n")?;
        let null = 0u64;
        let mut b = self.launcher(&f);
        b.arg(x);
        match residual {
            Some(r) => {
                check(r.len() == x.len(), || "rms_norm: residual shape".into())?;
                b.arg(r)
            }
            None => b.arg(&null),
        };
        b.arg(w).arg(out).arg(&n).arg(&eps);
        // SAFETY: argument types and counts match the kernel signature; shapes checked above.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// Embedding gather: `out[t, :] = table[ids[t], :] * scale` as f32 (`scale` applied only
    /// when given, as Gemma's sqrt(hidden)). `table`: a `[vocab, n]` matrix of any weight format,
    /// n % 32 == 0; `ids`: `[tokens]`, each < vocab (the caller checks); `out`: `[tokens, n]` f32.
    /// Values are bit-identical to the CPU's dequantization.
    pub fn embed(
        &self,
        table: &DevMatrix,
        ids: &CudaSlice<u32>,
        out: &mut CudaSlice<f32>,
        scale: Option<f32>,
    ) -> Result<()> {
        let n = table.cols;
        let tokens = ids.len();
        check(n.is_multiple_of(32) && out.len() == tokens * n, || {
            format!("embed: out {} for {tokens} tokens of {n}", out.len())
        })?;
        let f = self.function("embed.cu", &format!("embed_{}", fmt_suffix(table.dtype)))?;
        let threads = 128u32;
        let cfg = LaunchConfig {
            grid_dim: (tokens as u32, ((n / 32) as u32).div_ceil(threads), 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let ni = i32_of(n, "n")?;
        let row_bytes = table.row_bytes() as i64;
        let (sc, apply) = (scale.unwrap_or(1.0), i32::from(scale.is_some()));
        let mut b = self.launcher(&f);
        b.arg(&table.data)
            .arg(ids)
            .arg(out)
            .arg(&ni)
            .arg(&row_bytes)
            .arg(&sc)
            .arg(&apply);
        // SAFETY: signature matches; ids must be < vocab (the caller's tokenizer guarantees it).
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// `out[i, :] = x[rows[i], :]`. `x`: `[*, n]` f32; `rows`: `[count]`; `out`: `[count, n]`.
    pub fn gather_rows(
        &self,
        x: &CudaSlice<f32>,
        rows: &CudaSlice<u32>,
        out: &mut CudaSlice<f32>,
        n: usize,
    ) -> Result<()> {
        let count = rows.len();
        check(out.len() == count * n, || "gather_rows: shapes".into())?;
        let f = self.function("embed.cu", "gather_rows_f32")?;
        let cfg = LaunchConfig {
            grid_dim: (count as u32, (n as u32).div_ceil(256), 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let ni = i32_of(n, "n")?;
        let mut b = self.launcher(&f);
        b.arg(x).arg(rows).arg(out).arg(&ni);
        // SAFETY: signature matches; rows index rows of x (the caller builds them).
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// `x += d`, element-wise. Both `[len]` f32.
    pub fn add_assign(&self, x: &mut CudaSlice<f32>, d: &CudaSlice<f32>) -> Result<()> {
        check(x.len() == d.len(), || "add: shapes".into())?;
        let f = self.function("norm.cu", "add_f32")?;
        let n = i32_of(x.len(), "len")?;
        let cfg = LaunchConfig::for_num_elems(x.len() as u32);
        let mut b = self.launcher(&f);
        b.arg(x).arg(d).arg(&n);
        // SAFETY: signature matches; shapes checked above.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// Logit soft-capping in place: `x = tanh(x / cap) * cap`. `x`: `[len]` f32.
    pub fn softcap(&self, x: &mut CudaSlice<f32>, cap: f32) -> Result<()> {
        let f = self.function("act.cu", "softcap_f32")?;
        let n = i32_of(x.len(), "len")?;
        let cfg = LaunchConfig::for_num_elems(x.len() as u32);
        let mut b = self.launcher(&f);
        b.arg(x).arg(&n).arg(&cap);
        // SAFETY: signature matches.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// Rotary embedding in place. `x`: `[tokens, heads, head_dim]` f32; `pos`: `[tokens]`;
    /// `inv_freq`: `[head_dim / 2]` f32 (`base^(-2i/head_dim)`, computed as the CPU does).
    pub fn rope(
        &self,
        x: &mut CudaSlice<f32>,
        pos: &CudaSlice<u32>,
        inv_freq: &CudaSlice<f32>,
        heads: usize,
        style: RopeStyle,
    ) -> Result<()> {
        let head_dim = inv_freq.len() * 2;
        let tokens = pos.len();
        check(
            x.len() == tokens * heads * head_dim && head_dim <= 2048,
            || format!("rope: x {} != {tokens} x {heads} x {head_dim}", x.len()),
        )?;
        let f = self.function("rope.cu", "rope_f32")?;
        let cfg = LaunchConfig {
            grid_dim: (tokens as u32, heads as u32, 1),
            block_dim: ((head_dim / 2) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let (heads, hd) = (i32_of(heads, "heads")?, i32_of(head_dim, "head_dim")?);
        let interleaved = i32::from(style == RopeStyle::Interleaved);
        let mut b = self.launcher(&f);
        b.arg(x)
            .arg(pos)
            .arg(inv_freq)
            .arg(&heads)
            .arg(&hd)
            .arg(&interleaved);
        // SAFETY: signature matches; shapes checked above.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// `y = x Wᵀ + b`. `x`: `[m, k]` f32 (`m = x.len() / k` tokens, `k = w.cols`, k % 32 == 0);
    /// `w`: `[r, k]` in any weight format with its optional bias `[r]`; `y`: `[m, r]` f32. One
    /// fixed reduction order per output element, whatever `m` (kernels/linear.cu). With
    /// `split_canary` and m > 1 the reduction is split in two halves — a deliberately
    /// shape-dependent variant for the gates' canary arm, never for serving.
    pub fn linear(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        y: &mut CudaSlice<f32>,
        split_canary: bool,
    ) -> Result<()> {
        self.linear_split(x, w, &mut [y], split_canary)
    }

    /// [`CudaDevice::linear`] for a fused matrix (rows of Q|K|V or gate|up concatenated): its
    /// rows go, in order, to the one to three outputs `ys`, output i taking `ys[i].len() / m`
    /// rows (`[m, r_i]` f32, Σ r_i = r). Each row is computed exactly as in the unfused matrix.
    /// Errors: shapes that do not add up.
    pub fn linear_split(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        split_canary: bool,
    ) -> Result<()> {
        self.linear_split_epi(x, w, ys, split_canary, None)?;
        Ok(())
    }

    /// A gate|up matrix (`w`: the gate rows, then as many up rows) then `out = act(gate) * up`:
    /// [`CudaDevice::linear_split`] into `gate` and `up` (`[m, I]` f32 each) and
    /// [`CudaDevice::gated_act`] into `out` (`[m, I]` f32). With `fuse` (the model's forward
    /// passes TCS_GLU = 1; the self-check both values), SwiGLU, halves of I rows each (I a
    /// multiple of 4) and a split-K form taken (under the split-K defines: from QTC_SK_MIN
    /// tokens to where the tiled GEMM starts, its partials within their scratch), the
    /// split-K reduce computes `out` itself from the same sums (`linear_tcs_reduce_swiglu`: the
    /// same bits, one launch and the gate/up round trip less) and `gate` and `up` are left
    /// unwritten; returns whether it did. Errors: as the two calls.
    #[allow(clippy::too_many_arguments)]
    pub fn linear_gated(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        gate: &mut CudaSlice<f32>,
        up: &mut CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        act: Activation,
        split_canary: bool,
        fuse: bool,
    ) -> Result<bool> {
        if fuse && act == Activation::Silu {
            let mut epi = Epilogue::SwiGlu(&mut *out);
            if self.linear_split_epi(x, w, &mut [gate, up], split_canary, Some(&mut epi))? {
                return Ok(true);
            }
        } else {
            self.linear_split_epi(x, w, &mut [gate, up], split_canary, None)?;
        }
        self.gated_act(gate, up, out, act)?;
        Ok(false)
    }

    /// A Q|K|V matrix (`w`: the q rows, then k, then v) into `q` (`[m, nh, hd]` f32), `k` and
    /// `v` (`[m, nkv, hd]`), then [`CudaDevice::rope_qk_append`] with `ra`'s cache, positions
    /// and frequencies. With `fuse` (the model's forward passes TCS_ROPE = 1 where no q/k norm
    /// sits between; the self-check both values) and a split-K form taken, its reduce does the
    /// rotation and the append itself from the same sums
    /// ([`CudaDevice::reduce_rope_append`]: the same bits, one launch and the q/k/v round trip
    /// less); returns whether it did. Errors: as the two calls.
    pub fn linear_qkv_rope(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        [q, k, v]: [&mut CudaSlice<f32>; 3],
        ra: RopeAppend<'_>,
        split_canary: bool,
        fuse: bool,
    ) -> Result<bool> {
        if fuse {
            let mut epi = Epilogue::RopeAppend(RopeAppend {
                kc: &mut *ra.kc,
                vc: &mut *ra.vc,
                ..ra
            });
            let ys: &mut [&mut CudaSlice<f32>] = &mut [&mut *q, &mut *k, &mut *v];
            if self.linear_split_epi(x, w, ys, split_canary, Some(&mut epi))? {
                return Ok(true);
            }
        } else {
            self.linear_split_epi(x, w, &mut [&mut *q, &mut *k, &mut *v], split_canary, None)?;
        }
        self.rope_qk_append(
            q,
            k,
            v,
            ra.kc,
            ra.vc,
            ra.idx,
            ra.inv_freq,
            ra.heads,
            ra.style,
        )?;
        Ok(false)
    }

    /// [`CudaDevice::linear_split`], with `epi` passed to the tensor-core forms
    /// ([`CudaDevice::linear_tc`]); returns whether a split-K reduce took it (the outputs are
    /// then as [`CudaDevice::sk_reduce`] says).
    fn linear_split_epi(
        &self,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        split_canary: bool,
        epi: Option<&mut Epilogue<'_>>,
    ) -> Result<bool> {
        let (k, r) = (w.cols, w.rows);
        let m = x.len() / k.max(1);
        if m == 0 && x.is_empty() && ys.iter().all(|y| y.is_empty()) {
            return Ok(false);
        }
        let rows: Vec<usize> = ys.iter().map(|y| y.len() / m.max(1)).collect();
        check(
            k.is_multiple_of(32)
                && x.len() == m * k
                && (1..=3).contains(&ys.len())
                && rows.iter().sum::<usize>() == r
                && ys.iter().zip(&rows).all(|(y, &ri)| y.len() == m * ri),
            || {
                format!(
                    "linear {}: x {} outputs {:?} for m {m} k {k} r {r}",
                    w.dtype.name(),
                    x.len(),
                    ys.iter().map(|y| y.len()).collect::<Vec<_>>()
                )
            },
        )?;
        if m == 0 {
            return Ok(false);
        }
        if w.layout == WeightLayout::Tc {
            return self.linear_tc(x, w, ys, &rows, m, split_canary, epi);
        }
        if m > 1
            && w.layout == WeightLayout::Lanes
            && !split_canary
            && self.define("QLIN_INT", 0) == 1
            && self.define("QLIN_IMMA", 1) == 1
        {
            return self.linear_imma(x, w, ys, &rows, m).map(|_| false);
        }
        // M = 1 (decode) takes the one-token kernel: same per-output operations. A repacked
        // matrix whose x would not fit the one-token kernel's shared memory on this device
        // (ceil(k / 1024) chunks of 4,224 bytes) takes the tiled kernel instead, which computes
        // each row identically.
        // Shared memory per staged 1,024-element chunk of one token: f32 x (4 KiB) and its unit
        // sums, or with QLIN_INT = 1 three int8 digits per element and a 16-byte header per unit.
        let chunk_bytes = if self.define("QLIN_INT", 0) == 1 {
            super::linear_tc::XI_CHUNK_BYTES as usize
        } else {
            4096 + 128
        };
        let m1_smem = k.div_ceil(1024) * chunk_bytes;
        let one_token = m == 1 && (w.aux.is_none() || m1_smem <= self.info().max_smem_optin);
        // M > 1 with QLIN_MT = 1: the multi-token kernel with the one-token kernel's per-lane walk
        // (kernels/linear.cu linear_qr_mt_impl; off by default until measured on a device). The
        // split canary keeps the tiled kernel, which implements it.
        const MT_PHASE: usize = 2048;
        let mt_tokens = self.define("QLIN_MT_TOKENS", 8).max(1) as usize;
        let mt_smem = mt_tokens * (MT_PHASE / 1024) * chunk_bytes;
        let multi = m > 1
            && w.aux.is_some()
            && !split_canary
            && self.define("QLIN_MT", 0) == 1
            && mt_smem <= self.info().max_smem_optin;
        // K >= QLIN_M1_BIGK (default: never) takes the `_m1w` entry, with its own warps and
        // prefetch (speed only: the same per-row arithmetic).
        let wide = one_token && w.aux.is_some() && k as u32 >= self.define("QLIN_M1_BIGK", 1 << 30);
        let m1 = if wide {
            "_m1w"
        } else if one_token {
            "_m1"
        } else if multi {
            "_mt"
        } else {
            ""
        };
        let mut cfg = self.linear_grid(if one_token { 1 } else { m.max(2) }, r);
        let func = match (&w.aux, w.dtype) {
            (None, d) => format!("linear_{}{m1}", fmt_suffix(d)),
            (Some(_), DType::Q8_0) => format!("linear_q8_0_r{m1}"),
            (Some(_), DType::Q4_K) => format!("linear_q4_k_r{m1}"),
            (Some(_), d) => return Err(Error::Unsupported(format!("repacked {}", d.name()))),
        };
        if w.aux.is_some() {
            if one_token {
                // One-token kernel: every block stages all of x (ceil(k / 1024) swizzled chunks of
                // 4 KiB and their unit sums) once, then walks row groups of QLIN_M1_WARPS warps;
                // QLIN_M1_BLOCKS blocks per SM at most.
                let warps = if wide {
                    self.define("QLIN_M1_WARPS_BIGK", self.define("QLIN_M1_WARPS", 8))
                } else {
                    self.define("QLIN_M1_WARPS", 8)
                };
                let rows = self.define("LIN_ROWS_M1", 1);
                let groups = (r as u32).div_ceil(warps * rows);
                let per_sm = self.define("QLIN_M1_BLOCKS", 8);
                cfg.grid_dim.0 = groups.min(per_sm * self.info().sm_count.max(1) as u32);
                cfg.block_dim.0 = 32 * warps;
                cfg.shared_mem_bytes = m1_smem as u32;
            } else if multi {
                let warps = self.define("QLIN_M1_WARPS", 8);
                let rows = self.define("QLIN_MT_ROWS", 2);
                cfg.grid_dim = (
                    (r as u32).div_ceil(warps * rows),
                    (m as u32).div_ceil(mt_tokens as u32),
                    1,
                );
                cfg.block_dim = (32 * warps, 1, 1);
                cfg.shared_mem_bytes = mt_smem as u32;
            } else {
                // The token tile is capped at 8 (QLIN_TOKENS); each token stages one 1,024-element
                // chunk of x (4 KiB) and its 32 unit sums at a time.
                let tokens = self.define("LIN_TOKENS", 8).min(8);
                cfg.grid_dim.1 = (m as u32).div_ceil(tokens);
                cfg.shared_mem_bytes = tokens * chunk_bytes as u32;
            }
        }
        self.launch_linear("linear.cu", &func, cfg, x, w, ys, &rows, m, split_canary)?;
        Ok(false)
    }

    /// Launches a linear entry of any kernel file: (x, weights, headers, bias, LIN_OUT_PARAMS,
    /// split_canary), where a raw-layout matrix passes no header array and its row length in bytes
    /// before `split_canary`, and a repacked one passes its headers (null when it has none).
    /// Above 48 KiB of shared memory the function is granted the opt-in (K > 11,264 at m = 1, e.g.
    /// an 8B down projection). Errors: a shape past i32, a launch failure.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_linear(
        &self,
        file: &str,
        func: &str,
        cfg: LaunchConfig,
        x: &CudaSlice<f32>,
        w: &DevMatrix,
        ys: &mut [&mut CudaSlice<f32>],
        rows: &[usize],
        m: usize,
        split_canary: bool,
    ) -> Result<()> {
        let f = self.function(file, func)?;
        if cfg.shared_mem_bytes > 48 << 10 {
            self.grant_smem(func, &f, cfg.shared_mem_bytes)?;
        }
        let (mi, ki, ri) = (i32_of(m, "m")?, i32_of(w.cols, "k")?, i32_of(w.rows, "r")?);
        let r0 = i32_of(rows[0], "r0")?;
        let r1 = i32_of(rows.get(1).copied().unwrap_or(0), "r1")?;
        let raw = w.layout == WeightLayout::Raw;
        let row_bytes = w.row_bytes() as i64;
        let canary = i32::from(split_canary);
        let null = 0u64;
        let mut b = self.launcher(&f);
        b.arg(x).arg(&w.data);
        match (&w.aux, raw) {
            (_, true) => {}
            (Some(aux), false) => {
                b.arg(aux);
            }
            (None, false) => {
                b.arg(&null);
            }
        }
        push_bias_outs(&mut b, &w.bias, ys, &null);
        b.arg(&r0).arg(&r1).arg(&mi).arg(&ki).arg(&ri);
        if raw {
            b.arg(&row_bytes);
        }
        b.arg(&canary);
        // SAFETY: the argument list matches the entry's: LINEAR / LINEAR_HALF (raw layout, with
        // `row_bytes`), LINEAR_R, LINEAR_TC and LINEAR_IMMA (headers or null); shapes checked by
        // linear_split and at DevMatrix construction.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// The launch shape of every linear kernel for `m` tokens and `r` output rows: LIN_WARPS
    /// warps per block, each warp LIN_ROWS (LIN_ROWS_M1 at m = 1) rows of LIN_TOKENS (1 at
    /// m = 1) tokens. The defaults must match kernels/linear.cu's.
    fn linear_grid(&self, m: usize, r: usize) -> LaunchConfig {
        let warps = self.define("LIN_WARPS", 4);
        let (tokens, rows) = if m == 1 {
            (1, self.define("LIN_ROWS_M1", 1))
        } else {
            (self.define("LIN_TOKENS", 8), self.define("LIN_ROWS", 1))
        };
        LaunchConfig {
            grid_dim: (
                (r as u32).div_ceil(warps * rows),
                (m as u32).div_ceil(tokens),
                1,
            ),
            block_dim: (32 * warps, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// `out = act(gate) * up`, element-wise (SwiGLU or tanh-GELU gated). All `[len]` f32.
    pub fn gated_act(
        &self,
        gate: &CudaSlice<f32>,
        up: &CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
        act: Activation,
    ) -> Result<()> {
        let len = gate.len();
        check(up.len() == len && out.len() == len, || {
            "gated_act: shapes".into()
        })?;
        let func = match act {
            Activation::Silu => "swiglu_f32",
            Activation::GeluTanh => "gelu_tanh_gated_f32",
        };
        let f = self.function("act.cu", func)?;
        let cfg = LaunchConfig::for_num_elems(len as u32);
        let n = i32_of(len, "len")?;
        let mut b = self.launcher(&f);
        b.arg(gate).arg(up).arg(out).arg(&n);
        // SAFETY: signature matches; shapes checked above.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }
}

pub use super::attention::{AttnPath, KvIndex, ATTN_PART_BYTES};
