//! Kernel self-checks in the style of llm.c's `dev/cuda`: for each kernel, random inputs, the CPU
//! reference (engine/src/backend/cpu/ops.rs, engine/src/quant/), the GPU kernel, the largest
//! |GPU − CPU| against a tolerance stated per op, and — the Level A contract — whether a row's
//! GPU output is bit-identical when the same row is computed in passes of different M.

use super::{drv, CudaDevice};
use crate::backend::cpu::ops::{gated_activation, rms_norm_rows, Rope};
use crate::error::Result;
use crate::models::{Activation, RopeStyle};
use crate::quant::{dequantize_row, quant_matrix, DType, Storage};
use half::{bf16, f16};
use std::sync::Arc;

/// One line of the self-check table.
#[derive(Debug, Clone)]
pub struct CheckRow {
    /// Kernel and variant (`linear_q8_0`).
    pub op: String,
    /// The shapes tried.
    pub case: String,
    /// Largest |GPU − CPU| over every output element of the largest pass.
    pub max_abs_diff: f32,
    /// The tolerance, as a formula.
    pub tolerance: String,
    /// Every element within the tolerance.
    pub within: bool,
    /// Rows bit-identical across the passes of different M (`None` when M plays no part).
    pub batch_identical: Option<bool>,
}

impl CheckRow {
    /// Within tolerance and, where checked, bit-identical across M.
    pub fn passed(&self) -> bool {
        self.within && self.batch_identical != Some(false)
    }
}

/// Deterministic inputs (splitmix64), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }
    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Random weights `[rows, cols]` of `dtype` as raw bytes (F32, F16, BF16, Q8_0).
fn random_weights(rng: &mut Rng, dtype: DType, rows: usize, cols: usize) -> Vec<u8> {
    let n = rows * cols;
    match dtype {
        DType::F32 => rng
            .vec(n, -1.0, 1.0)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::F16 => (0..n)
            .flat_map(|_| f16::from_f32(rng.uniform(-1.0, 1.0)).to_le_bytes())
            .collect(),
        DType::BF16 => (0..n)
            .flat_map(|_| bf16::from_f32(rng.uniform(-1.0, 1.0)).to_le_bytes())
            .collect(),
        DType::Q8_0 => {
            let mut v = Vec::with_capacity(n / 32 * 34);
            for _ in 0..n / 32 {
                v.extend(f16::from_f32(rng.uniform(0.002, 0.02)).to_le_bytes());
                v.extend((0..32).map(|_| rng.next_u64() as u8));
            }
            v
        }
        d => unreachable!("no random weights for {}", d.name()),
    }
}

/// Largest |a − b| and whether every element is within `atol + rtol·scale[i]`.
fn compare(gpu: &[f32], cpu: &[f32], scale: &[f32], atol: f32, rtol: f32) -> (f32, bool) {
    let mut max = 0f32;
    let mut ok = gpu.len() == cpu.len();
    for ((&g, &c), &s) in gpu.iter().zip(cpu).zip(scale) {
        let d = (g - c).abs();
        if d.is_nan() || d > atol + rtol * s {
            ok = false;
        }
        if d.is_nan() {
            max = f32::NAN;
        } else if !max.is_nan() {
            max = max.max(d);
        }
    }
    (max, ok)
}

/// Whether the first `m * row` values of every pass equal the largest pass bit for bit.
fn same_bits(passes: &[(usize, Vec<f32>)], row: usize) -> bool {
    let full = &passes.last().expect("passes").1;
    passes.iter().all(|(m, out)| {
        out[..m * row]
            .iter()
            .zip(&full[..m * row])
            .all(|(a, b)| a.to_bits() == b.to_bits())
    })
}

/// Runs every kernel's check on `dev`. Errors only when a kernel cannot be compiled or launched;
/// numerical failures are rows with `passed() == false`.
pub fn run_all(dev: &CudaDevice) -> Result<Vec<CheckRow>> {
    let mut rng = Rng(0x006d_656d_7261);
    let mut rows = Vec::new();
    rows.extend(check_norm(dev, &mut rng)?);
    rows.extend(check_embed(dev, &mut rng)?);
    rows.extend(check_rope(dev, &mut rng)?);
    rows.extend(check_linear(dev, &mut rng)?);
    rows.extend(check_act(dev, &mut rng)?);
    Ok(rows)
}

fn check_norm(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (n, ms, eps) = (1000usize, [1usize, 5, 64], 1e-6f32);
    let mmax = *ms.last().expect("ms");
    let x = rng.vec(mmax * n, -2.0, 2.0);
    let res = rng.vec(mmax * n, -2.0, 2.0);
    let w = rng.vec(n, 0.5, 1.5);
    let h: Vec<f32> = x.iter().zip(&res).map(|(a, b)| a + b).collect();
    let cpu = rms_norm_rows(&h, &w, eps);
    let wd = s.clone_htod(&w).map_err(drv)?;
    let mut passes = Vec::new();
    let mut res_gpu = Vec::new();
    for &m in &ms {
        let xd = s.clone_htod(&x[..m * n]).map_err(drv)?;
        let mut rd = s.clone_htod(&res[..m * n]).map_err(drv)?;
        let mut od = s.alloc_zeros::<f32>(m * n).map_err(drv)?;
        dev.rms_norm_residual(&xd, Some(&mut rd), &wd, &mut od, m, eps)?;
        passes.push((m, s.clone_dtoh(&od).map_err(drv)?));
        res_gpu = s.clone_dtoh(&rd).map_err(drv)?;
    }
    let ones = vec![1f32; cpu.len()];
    let (d, ok) = compare(&passes.last().expect("pass").1, &cpu, &ones, 1e-5, 0.0);
    let res_exact = res_gpu
        .iter()
        .zip(&h)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    Ok(vec![CheckRow {
        op: "rms_norm_residual_f32".into(),
        case: format!("n={n} M={ms:?}"),
        max_abs_diff: d,
        tolerance: "1e-5 abs; residual bit-exact".into(),
        within: ok && res_exact,
        batch_identical: Some(same_bits(&passes, n)),
    }])
}

fn check_embed(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (vocab, n, tokens) = (64usize, 512usize, 16usize);
    let ids: Vec<u32> = (0..tokens)
        .map(|_| (rng.next_u64() % vocab as u64) as u32)
        .collect();
    let idd = s.clone_htod(&ids).map_err(drv)?;
    let mut out = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::Q8_0] {
        let table = random_weights(rng, dtype, vocab, n);
        let row = dtype.bytes_for(n).expect("whole blocks");
        let mut cpu = vec![0f32; tokens * n];
        for (o, &id) in cpu.chunks_mut(n).zip(&ids) {
            dequantize_row(dtype, &table[id as usize * row..][..row], o);
        }
        let td = s.clone_htod(&table).map_err(drv)?;
        let mut od = s.alloc_zeros::<f32>(tokens * n).map_err(drv)?;
        dev.embed(&td, dtype, n, &idd, &mut od)?;
        let gpu = s.clone_dtoh(&od).map_err(drv)?;
        let exact = gpu
            .iter()
            .zip(&cpu)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        let (d, _) = compare(&gpu, &cpu, &cpu, 0.0, 0.0);
        out.push(CheckRow {
            op: format!("embed_{}", dtype.name().to_lowercase()),
            case: format!("vocab={vocab} n={n} tokens={tokens}"),
            max_abs_diff: d,
            tolerance: "bit-exact".into(),
            within: exact,
            batch_identical: None,
        });
    }
    Ok(out)
}

fn check_rope(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (tokens, heads, hd, base) = (7usize, 4usize, 128usize, 10000f32);
    let pos: Vec<u32> = (0..tokens)
        .map(|_| (rng.next_u64() % 8192) as u32)
        .collect();
    let x = rng.vec(tokens * heads * hd, -1.0, 1.0);
    // The same expression as the CPU's Rope::new, so the angles match bit for bit.
    let inv: Vec<f32> = (0..hd / 2)
        .map(|i| 1.0 / base.powf((2 * i) as f32 / hd as f32))
        .collect();
    let mut out = Vec::new();
    for style in [RopeStyle::Neox, RopeStyle::Interleaved] {
        let rope = Rope::new(hd, base, style);
        let mut cpu = x.clone();
        for (t, tok) in cpu.chunks_mut(heads * hd).enumerate() {
            tok.chunks_mut(hd)
                .for_each(|h| rope.apply(h, pos[t] as usize));
        }
        let mut xd = s.clone_htod(&x).map_err(drv)?;
        let pd = s.clone_htod(&pos).map_err(drv)?;
        let fd = s.clone_htod(&inv).map_err(drv)?;
        dev.rope(&mut xd, &pd, &fd, heads, style)?;
        let gpu = s.clone_dtoh(&xd).map_err(drv)?;
        let ones = vec![1f32; gpu.len()];
        let (d, ok) = compare(&gpu, &cpu, &ones, 1e-5, 0.0);
        out.push(CheckRow {
            op: format!("rope_f32 {style:?}"),
            case: format!("tokens={tokens} heads={heads} head_dim={hd} pos<8192"),
            max_abs_diff: d,
            tolerance: "1e-5 abs".into(),
            within: ok,
            batch_identical: None,
        });
    }
    Ok(out)
}

fn check_linear(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let ms = [1usize, 3, 8, 9, 33];
    let mmax = *ms.last().expect("ms");
    let mut out = Vec::new();
    for (dtype, k, r) in [
        (DType::BF16, 1024usize, 96usize),
        (DType::BF16, 576, 70),
        (DType::Q8_0, 1024, 96),
        (DType::Q8_0, 1536, 33),
    ] {
        let wb = random_weights(rng, dtype, r, k);
        let x = rng.vec(mmax * k, -1.0, 1.0);
        let wm = quant_matrix(dtype, r, k, Storage::Owned(Arc::new(wb.clone())))
            .map_err(crate::error::Error::InvalidArgument)?;
        let mut cpu = vec![0f32; mmax * r];
        wm.matmul_rows(&x, 0..r, &mut cpu);
        // Scale of each output: Σ|w·x|, the magnitude f32 rounding is relative to.
        let mut scale = vec![0f32; mmax * r];
        let mut wrow = vec![0f32; k];
        for j in 0..r {
            wm.row_into(j, &mut wrow);
            for t in 0..mmax {
                scale[t * r + j] = wrow
                    .iter()
                    .zip(&x[t * k..][..k])
                    .map(|(a, b)| (a * b).abs())
                    .sum();
            }
        }
        let wd = s.clone_htod(&wb).map_err(drv)?;
        let mut passes = Vec::new();
        for &m in &ms {
            let xd = s.clone_htod(&x[..m * k]).map_err(drv)?;
            let mut yd = s.alloc_zeros::<f32>(m * r).map_err(drv)?;
            dev.linear(&xd, &wd, dtype, &mut yd, k, r)?;
            passes.push((m, s.clone_dtoh(&yd).map_err(drv)?));
        }
        let (d, ok) = compare(&passes.last().expect("pass").1, &cpu, &scale, 0.0, 1e-5);
        out.push(CheckRow {
            op: format!("linear_{}", dtype.name().to_lowercase()),
            case: format!("K={k} R={r} M={ms:?}"),
            max_abs_diff: d,
            tolerance: "1e-5·Σ|w·x|".into(),
            within: ok,
            batch_identical: Some(same_bits(&passes, r)),
        });
    }
    Ok(out)
}

fn check_act(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let len = 100_000usize;
    let gate = rng.vec(len, -8.0, 8.0);
    let up = rng.vec(len, -2.0, 2.0);
    let gd = s.clone_htod(&gate).map_err(drv)?;
    let ud = s.clone_htod(&up).map_err(drv)?;
    let mut out = Vec::new();
    for act in [Activation::Silu, Activation::GeluTanh] {
        let cpu = gated_activation(&gate, &up, act);
        let mut od = s.alloc_zeros::<f32>(len).map_err(drv)?;
        dev.gated_act(&gd, &ud, &mut od, act)?;
        let gpu = s.clone_dtoh(&od).map_err(drv)?;
        let mag: Vec<f32> = cpu.iter().map(|v| v.abs()).collect();
        let (d, ok) = compare(&gpu, &cpu, &mag, 1e-6, 1e-5);
        out.push(CheckRow {
            op: match act {
                Activation::Silu => "swiglu_f32".into(),
                Activation::GeluTanh => "gelu_tanh_gated_f32".into(),
            },
            case: format!("len={len} gate∈[-8,8) up∈[-2,2)"),
            max_abs_diff: d,
            tolerance: "1e-6 + 1e-5·|ref|".into(),
            within: ok,
            batch_identical: None,
        });
    }
    Ok(out)
}

/// The table as text, one line per check, ending with a PASS/FAIL summary line.
pub fn render(rows: &[CheckRow]) -> String {
    let mut s = format!(
        "{:<22} {:<42} {:>10} {:<30} {:<5} {}\n",
        "kernel", "case", "max|Δ|", "tolerance", "ok", "bit-identical across M"
    );
    for r in rows {
        let ident = match r.batch_identical {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "n/a",
        };
        s += &format!(
            "{:<22} {:<42} {:>10.3e} {:<30} {:<5} {}\n",
            r.op,
            r.case,
            r.max_abs_diff,
            r.tolerance,
            if r.passed() { "ok" } else { "FAIL" },
            ident
        );
    }
    let bad = rows.iter().filter(|r| !r.passed()).count();
    s += &if bad == 0 {
        format!("self-check: PASS ({} checks)\n", rows.len())
    } else {
        format!("self-check: FAIL ({bad} of {} checks)\n", rows.len())
    };
    s
}
