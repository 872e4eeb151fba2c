//! Launch wrappers for the kernels of `kernels/*.cu`: shapes are checked here, grids derived from
//! the tuned constants, and every launch goes on the device's stream. Activations are f32.

use super::{drv, CudaDevice};
use crate::error::{Error, Result};
use crate::models::{Activation, RopeStyle};
use crate::quant::DType;
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(what()))
    }
}

fn i32_of(v: usize, what: &str) -> Result<i32> {
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
        let mut b = self.stream().launch_builder(&f);
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
        unsafe { b.launch(cfg) }.map_err(drv)?;
        Ok(())
    }

    /// Embedding gather: `out[t, :] = table[ids[t], :]` as f32.
    /// `table`: `[vocab, n]` of `dtype` (F32, F16, BF16 or Q8_0), raw little-endian bytes;
    /// `ids`: `[tokens]`; `out`: `[tokens, n]` f32.
    pub fn embed(
        &self,
        table: &CudaSlice<u8>,
        dtype: DType,
        n: usize,
        ids: &CudaSlice<u32>,
        out: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let func = match dtype {
            DType::F32 => "embed_f32",
            DType::F16 => "embed_f16",
            DType::BF16 => "embed_bf16",
            DType::Q8_0 => "embed_q8_0",
            d => return Err(Error::Unsupported(format!("CUDA embed of {}", d.name()))),
        };
        let row = dtype
            .bytes_for(n)
            .ok_or_else(|| Error::InvalidArgument(format!("embed: n {n} for {}", dtype.name())))?;
        let tokens = ids.len();
        check(
            table.len().is_multiple_of(row) && out.len() == tokens * n,
            || format!("embed: table {} / out {} for n {n}", table.len(), out.len()),
        )?;
        let f = self.function("embed.cu", func)?;
        let threads = 256u32;
        let cfg = LaunchConfig {
            grid_dim: (tokens as u32, (n as u32).div_ceil(threads), 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let n = i32_of(n, "n")?;
        let mut b = self.stream().launch_builder(&f);
        b.arg(table).arg(ids).arg(out).arg(&n);
        // SAFETY: signature matches; ids must be < vocab (the caller's tokenizer guarantees it).
        unsafe { b.launch(cfg) }.map_err(drv)?;
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
        let mut b = self.stream().launch_builder(&f);
        b.arg(x)
            .arg(pos)
            .arg(inv_freq)
            .arg(&heads)
            .arg(&hd)
            .arg(&interleaved);
        // SAFETY: signature matches; shapes checked above.
        unsafe { b.launch(cfg) }.map_err(drv)?;
        Ok(())
    }

    /// `y = x Wᵀ`. `x`: `[m, k]` f32 (`m = x.len() / k` tokens); `w`: `[r, k]` of `dtype` (BF16 with k % 8 == 0, or Q8_0
    /// with k % 32 == 0), raw bytes; `y`: `[m, r]` f32. One fixed reduction order per output
    /// element, whatever `m` (kernels/linear.cu).
    pub fn linear(
        &self,
        x: &CudaSlice<f32>,
        w: &CudaSlice<u8>,
        dtype: DType,
        y: &mut CudaSlice<f32>,
        k: usize,
        r: usize,
    ) -> Result<()> {
        let (func, align) = match dtype {
            DType::BF16 => ("linear_bf16", 8),
            DType::Q8_0 => ("linear_q8_0", 32),
            d => return Err(Error::Unsupported(format!("CUDA linear of {}", d.name()))),
        };
        let row = dtype.bytes_for(k).unwrap_or(usize::MAX);
        let m = x.len() / k.max(1);
        check(
            k.is_multiple_of(align) && x.len() == m * k && y.len() == m * r && w.len() == r * row,
            || {
                format!(
                    "linear {}: x {} w {} y {} for m {m} k {k} r {r}",
                    dtype.name(),
                    x.len(),
                    w.len(),
                    y.len()
                )
            },
        )?;
        let f = self.function("linear.cu", func)?;
        let warps = self.define("LIN_WARPS", 4);
        let tokens = self.define("LIN_TOKENS", 8);
        let cfg = LaunchConfig {
            grid_dim: ((r as u32).div_ceil(warps), (m as u32).div_ceil(tokens), 1),
            block_dim: (32 * warps, 1, 1),
            shared_mem_bytes: 0,
        };
        let (mi, ki, ri) = (i32_of(m, "m")?, i32_of(k, "k")?, i32_of(r, "r")?);
        let mut b = self.stream().launch_builder(&f);
        b.arg(x).arg(w).arg(y).arg(&mi).arg(&ki).arg(&ri);
        // SAFETY: signature matches; shapes and alignment checked above.
        unsafe { b.launch(cfg) }.map_err(drv)?;
        Ok(())
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
        let mut b = self.stream().launch_builder(&f);
        b.arg(gate).arg(up).arg(out).arg(&n);
        // SAFETY: signature matches; shapes checked above.
        unsafe { b.launch(cfg) }.map_err(drv)?;
        Ok(())
    }
}
