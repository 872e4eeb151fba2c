//! Kernel self-checks in the style of llm.c's `dev/cuda`: for each kernel, random inputs, the CPU
//! reference (engine/src/backend/cpu/ops.rs, engine/src/quant/), the GPU kernel, the largest
//! |GPU − CPU| against a tolerance stated per op, and — the Level A contract — whether a row's
//! GPU output is bit-identical when the same row is computed in passes of different M.

use super::linear_tc::one_token_wt;
use super::ops::{AttnPath, DevMatrix, KvIndex, WeightLayout};
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

/// Every weight format the kernels read.
const ALL_DTYPES: [DType; 10] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q8_0,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
];

/// Deterministic inputs (splitmix64), so a failure reproduces.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    pub(crate) fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub(crate) fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Random weights `[rows, cols]` of `dtype` as raw bytes (any format; quantized blocks get
/// random codes and scales in [0.002, 0.02)).
pub(crate) fn random_weights(rng: &mut Rng, dtype: DType, rows: usize, cols: usize) -> Vec<u8> {
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
        d => {
            // Random quant codes with sane f16 scales (and mins) written over the scale fields.
            let (be, bb) = (d.block_elems(), d.block_bytes());
            let scales: &[usize] = match d {
                DType::Q4_1 | DType::Q4_K | DType::Q5_K => &[0, 2],
                DType::Q6_K => &[208],
                _ => &[0],
            };
            let mut v = Vec::with_capacity(n / be * bb);
            for _ in 0..n / be {
                let start = v.len();
                v.extend((0..bb).map(|_| rng.next_u64() as u8));
                for &o in scales {
                    let sc = f16::from_f32(rng.uniform(0.002, 0.02)).to_le_bytes();
                    v[start + o..start + o + 2].copy_from_slice(&sc);
                }
            }
            v
        }
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

/// Runs every kernel's check on `dev`. Errors only when a kernel cannot be compiled or launched; numerical failures are rows with `passed() == false`.
pub fn run_all(dev: &CudaDevice) -> Result<Vec<CheckRow>> {
    let mut rng = Rng(0x006d_656d_7261);
    let mut rows = Vec::new();
    rows.extend(check_norm(dev, &mut rng)?);
    rows.extend(check_embed(dev, &mut rng)?);
    rows.extend(check_rope(dev, &mut rng)?);
    rows.extend(check_linear(dev, &mut rng)?);
    rows.extend(check_act(dev, &mut rng)?);
    rows.extend(super::selfcheck_gated::check_gated(dev, &mut rng)?);
    rows.extend(super::selfcheck_gated::check_qkv_rope(dev, &mut rng)?);
    rows.extend(check_attention(dev, &mut rng)?);
    rows.extend(super::selfcheck_sample::check_sample(dev, &mut rng)?);
    Ok(rows)
}

fn check_norm(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (ms, eps) = ([1usize, 5, 64], 1e-6f32);
    let mmax = *ms.last().expect("ms");
    let mut rows = Vec::new();
    // n = 1000: the element-strided path; n = 4096: rows kept in registers as float4.
    for n in [1000usize, 4096] {
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
        rows.push(CheckRow {
            op: "rms_norm_residual_f32".into(),
            case: format!("n={n} M={ms:?}"),
            max_abs_diff: d,
            tolerance: "1e-5 abs; residual bit-exact".into(),
            within: ok && res_exact,
            batch_identical: Some(same_bits(&passes, n)),
        });
    }
    Ok(rows)
}

fn check_embed(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    let (vocab, n, tokens) = (64usize, 512usize, 16usize);
    let ids: Vec<u32> = (0..tokens)
        .map(|_| (rng.next_u64() % vocab as u64) as u32)
        .collect();
    let idd = s.clone_htod(&ids).map_err(drv)?;
    let mut out = Vec::new();
    for dtype in ALL_DTYPES {
        let table = random_weights(rng, dtype, vocab, n);
        let row = dtype.bytes_for(n).expect("whole blocks");
        let mut cpu = vec![0f32; tokens * n];
        for (o, &id) in cpu.chunks_mut(n).zip(&ids) {
            dequantize_row(dtype, &table[id as usize * row..][..row], o);
        }
        let td = DevMatrix::upload(dev, &table, dtype, vocab, n, None)?;
        let mut od = s.alloc_zeros::<f32>(tokens * n).map_err(drv)?;
        dev.embed(&td, &idd, &mut od, None)?;
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
        // The fused rope + KV append (heads/2 KV heads here) against rope_f32 then kv_append_f32:
        // q, the cache's K and V rows bit for bit.
        let nkv = heads / 2;
        let kx = rng.vec(tokens * nkv * hd, -1.0, 1.0);
        let vx = rng.vec(tokens * nkv * hd, -1.0, 1.0);
        let slots: Vec<u32> = (0..tokens as u32).map(|t| (t * 5 + 3) % 64).collect();
        let idx = KvIndex {
            pos: pd.clone(),
            slots: s.clone_htod(&slots).map_err(drv)?,
            row_tab: s.clone_htod(&vec![0u32; tokens]).map_err(drv)?,
            tables: s.clone_htod(&[0u32]).map_err(drv)?,
            host_pos: pos.clone(),
            host_tab: vec![0; tokens],
        };
        let vd = s.clone_htod(&vx).map_err(drv)?;
        let cache = 64 * nkv * hd;
        let (mut kc1, mut vc1) = (
            s.alloc_zeros::<f32>(cache).map_err(drv)?,
            s.alloc_zeros::<f32>(cache).map_err(drv)?,
        );
        let (mut kc2, mut vc2) = (
            s.alloc_zeros::<f32>(cache).map_err(drv)?,
            s.alloc_zeros::<f32>(cache).map_err(drv)?,
        );
        let mut kd1 = s.clone_htod(&kx).map_err(drv)?;
        dev.rope(&mut kd1, &pd, &fd, nkv, style)?;
        dev.kv_append(&kd1, &vd, &mut kc1, &mut vc1, &idx.slots, nkv * hd)?;
        let mut qd2 = s.clone_htod(&x).map_err(drv)?;
        let mut kd2 = s.clone_htod(&kx).map_err(drv)?;
        dev.rope_qk_append(
            &mut qd2,
            &mut kd2,
            &vd,
            &mut kc2,
            &mut vc2,
            &idx,
            &fd,
            (heads, nkv),
            style,
        )?;
        let bits = |a: &cudarc::driver::CudaSlice<f32>,
                    b: &cudarc::driver::CudaSlice<f32>|
         -> Result<bool> {
            let (a, b) = (s.clone_dtoh(a).map_err(drv)?, s.clone_dtoh(b).map_err(drv)?);
            Ok(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()))
        };
        let fused = bits(&xd, &qd2)? && bits(&kc1, &kc2)? && bits(&vc1, &vc2)?;
        out.push(CheckRow {
            op: format!("rope_f32(+qk_append) {style:?}"),
            case: format!("tokens={tokens} heads={heads} kv={nkv} head_dim={hd} pos<8192"),
            max_abs_diff: d,
            tolerance: "1e-5 abs; fused bit-equal".into(),
            within: ok,
            batch_identical: Some(fused),
        });
    }
    Ok(out)
}

fn check_linear(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let s = dev.stream();
    // 9, 32: the split-K form's token widths; 130 (past QTC_GEMM_MIN's default, 64) and 2 past a
    // later `gemm_min` up to 1,024 (the H200's 256): the tiled form, whole blocks and a partial.
    let big = dev.define("QTC_BIG_ROWS", 16384).max(1) as usize;
    let mut ms = vec![1usize, 3, 8, 9, 32, 33, 130];
    let past_gemm = [dev.gemm_min(1) + 2, dev.gemm_min(big) + 2];
    ms.extend(past_gemm.into_iter().filter(|&g| g > 130 && g <= 1026));
    ms.sort_unstable();
    ms.dedup();
    let mmax = *ms.last().expect("ms");
    let mut out = Vec::new();
    // Beyond the common shapes: K past one 1,024-element chunk and not a multiple of it (Q4_K),
    // and a K whose one-token staging (12 chunks, 50 KiB) needs the shared-memory opt-in; Q4_K at
    // an 8B down projection's K (14 chunks) and at K = 256 (one super-block); odd counts of
    // 32-element units (17, 33), which end the wgmma GEMM's last group of TCW_UPB = 2 (or 4)
    // units past K (of 3 units: 33 is a multiple, 17 is not).
    let mut cases = vec![
        (DType::BF16, 576usize, 70usize),
        (DType::BF16, 544, 40),
        (DType::Q8_0, 1056, 24),
        (DType::Q8_0, 1536, 33),
        (DType::Q4_K, 2560, 40),
        (DType::Q8_0, 12288, 8),
        (DType::Q4_K, 14336, 24),
        (DType::Q4_K, 256, 48),
    ];
    cases.extend(ALL_DTYPES.iter().map(|&d| (d, 1024usize, 96usize)));
    // QTC_SPLIT_BIG / QTC_GEMM_MIN_BIG: matrices of QTC_BIG_ROWS rows or more take their own slice
    // count / GEMM start; one such matrix (and its fused form, three times as tall) a format.
    let big_own = dev.define("QTC_SPLIT_BIG", 0) > 0 || dev.define("QTC_GEMM_MIN_BIG", 0) > 0;
    let q4_tc = super::linear_tc::tc_enabled(dev, DType::Q4_K);
    if dev.define("QTC", 0) == 1 && big_own {
        cases.extend([(DType::BF16, 256usize, big), (DType::Q8_0, 256, big)]);
        if q4_tc {
            cases.push((DType::Q4_K, 256, big));
        }
    }
    // QTC_WT_ALT: a matrix whose M = 1 rows take the `_alt` entries on this device
    // ([`one_token_wt`]), checked bit for bit against the other token counts. It and its fused
    // form (three times as tall) stay below QTC_BIG_ROWS: a fused form past it takes the `_big`
    // slices, another K order, and the fused-equals-unfused check would fail for that reason
    // alone (run 103: 6,336 rows, fused 19,008).
    let (wt, alt) = (dev.define("QTC_WT", 2).max(1), dev.define("QTC_WT_ALT", 0));
    let sms = dev.info().sm_count.max(1) as u32;
    if dev.define("QTC", 0) == 1 && alt > 0 && alt != wt {
        let tiles = (1..=alt.max(wt) * sms)
            .rev()
            .find(|&t| one_token_wt(t, sms, wt, alt) == alt && (3 * 16 * t as usize) < big);
        if let Some(t) = tiles {
            cases.extend([
                (DType::BF16, 256usize, 16 * t as usize),
                (DType::Q8_0, 256, 16 * t as usize),
            ]);
            if q4_tc {
                cases.push((DType::Q4_K, 256, 16 * t as usize));
            }
        }
    }
    for (dtype, k, r) in cases {
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
        let wd = DevMatrix::upload(dev, &wb, dtype, r, k, None)?;
        let wr = DevMatrix::upload_repacked(dev, &wb, dtype, r, k, None)?;
        // The matrix fused three times with itself and a bias (as Q|K|V are at upload): each
        // third must come out with the bits of the unfused matrix plus the bias (one f32 add).
        let thrice: Vec<u8> = wb.iter().chain(&wb).chain(&wb).copied().collect();
        let b = rng.vec(r, -1.0, 1.0);
        let b3: Vec<f32> = b.iter().chain(&b).chain(&b).copied().collect();
        let wf = DevMatrix::upload_repacked(dev, &thrice, dtype, 3 * r, k, Some(&b3))?;
        // QLIN_FACTOR = 1 (the default) rounds the repacked kernels differently from the raw
        // layout's: then they are checked against the CPU and across M on their own, and the
        // fused matrix against them.
        // The tensor-core layout (QTC = 1) rounds its own way too.
        let repacked = wr.layout != WeightLayout::Raw;
        let factor = wr.layout == WeightLayout::Tc
            || (repacked && (dev.define("QLIN_FACTOR", 1) != 0 || dev.define("QLIN_INT", 0) == 1));
        // The tensor-core kernels round x to QTC_XSPLIT bf16 parts (kernels/linear_tc.cu): with
        // p < 3 parts the residual of each x is below 2^(-8p)·|x| (8 significant bits a part), so
        // the bound on the repacked rows grows by 2^(-8p)·Σ|w·x|; three parts carry x exactly.
        let xsplit = dev.define("QTC_XSPLIT", 3).clamp(1, 3) as i32;
        let rep_rtol = match wr.layout {
            WeightLayout::Tc if xsplit < 3 => 1e-5 + 2f32.powi(-8 * xsplit),
            _ => 1e-5,
        };
        let tag = match wr.layout {
            WeightLayout::Raw => "",
            WeightLayout::Lanes => "_r",
            WeightLayout::Tc => "_tc",
        };
        let mut passes = Vec::new();
        let mut rep_passes = Vec::new();
        let mut repacked_same = true;
        let mut fused_same = true;
        for &m in &ms {
            let xd = s.clone_htod(&x[..m * k]).map_err(drv)?;
            let mut yd = s.alloc_zeros::<f32>(m * r).map_err(drv)?;
            dev.linear(&xd, &wd, &mut yd, false)?;
            let raw = s.clone_dtoh(&yd).map_err(drv)?;
            let mut fused_ref = raw.clone();
            if repacked {
                dev.linear(&xd, &wr, &mut yd, false)?;
                let rep = s.clone_dtoh(&yd).map_err(drv)?;
                if factor {
                    fused_ref = rep.clone();
                } else {
                    repacked_same &= rep
                        .iter()
                        .zip(&raw)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                }
                rep_passes.push((m, rep));
            }
            let mut ya = s.alloc_zeros::<f32>(m * r).map_err(drv)?;
            let mut yb = s.alloc_zeros::<f32>(m * r).map_err(drv)?;
            let mut yc = s.alloc_zeros::<f32>(m * r).map_err(drv)?;
            dev.linear_split(&xd, &wf, &mut [&mut ya, &mut yb, &mut yc], false)?;
            for y in [&ya, &yb, &yc] {
                fused_same &= s
                    .clone_dtoh(y)
                    .map_err(drv)?
                    .iter()
                    .zip(&fused_ref)
                    .enumerate()
                    .all(|(i, (a, v))| a.to_bits() == (v + b[i % r]).to_bits());
            }
            passes.push((m, raw));
        }
        let (d, ok) = compare(&passes.last().expect("pass").1, &cpu, &scale, 0.0, 1e-5);
        let (d, ok) = match rep_passes.last() {
            Some((_, rep)) if factor => {
                repacked_same = same_bits(&rep_passes, r);
                let (d2, ok2) = compare(rep, &cpu, &scale, 0.0, rep_rtol);
                (d.max(d2), ok && ok2)
            }
            _ => (d, ok),
        };
        out.push(CheckRow {
            op: format!(
                "linear_{}{}",
                dtype.name().to_lowercase(),
                if repacked {
                    format!("(+{tag})")
                } else {
                    String::new()
                }
            ),
            case: format!("K={k} R={r} M={ms:?}"),
            max_abs_diff: d,
            tolerance: if repacked && factor {
                format!(
                    "1e-5·Σ|w·x| (raw), {rep_rtol:.3e}·Σ|w·x| ({tag}); {tag} rows M-independent; \
                     fused+bias = {tag} bits"
                )
            } else if repacked {
                "1e-5·Σ|w·x|; _r, fused+bias bit-equal".into()
            } else {
                "1e-5·Σ|w·x|; fused+bias bit-equal".into()
            },
            within: ok && repacked_same && fused_same,
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

/// Paged attention against the CPU's `attend`: a scattered block table, GQA, a sliding window,
/// positions spanning several KV splits; and the same query row computed alone and beside others.
fn check_attention(dev: &CudaDevice, rng: &mut Rng) -> Result<Vec<CheckRow>> {
    let mut out = Vec::new();
    for (hd, nh, nkv, window) in [
        (64usize, 8usize, 2usize, None),
        (128, 4, 4, None),
        (256, 4, 1, Some(300)),
        // Groups of 5 and 8 query heads: a block's heads start past 0 and the last is partial
        // for 4 heads a block (the wide entries).
        (64, 10, 2, None),
        (128, 8, 1, Some(500)),
        // Groups of 5 at head_dim 128: attn_tile_f32's (ATTN_TILE) second head block is partial.
        (128, 10, 2, None),
    ] {
        let (bs, len) = (16usize, 2_320usize);
        let nblocks = len.div_ceil(bs) + 3;
        // A shuffled block table.
        let mut table: Vec<u32> = (0..nblocks as u32).collect();
        for i in (1..table.len()).rev() {
            table.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let width = nkv * hd;
        let mut kc = rng.vec(nblocks * bs * width, -1.0, 1.0);
        let mut vc = rng.vec(nblocks * bs * width, -1.0, 1.0);
        let (kc_dev, vc_dev) = (kv_cache_image(dev, &mut kc), kv_cache_image(dev, &mut vc));
        // Query rows at these positions (one sequence).
        // The last row reaches 9 splits of 256: attn_combine_f32's batch of 8 and one more.
        let positions = [0usize, 5, 255, 256, 257, 258, 511, 699, 2_303];
        let q = rng.vec(positions.len() * nh * hd, -1.0, 1.0);
        let scale = 1.0 / (hd as f32).sqrt();
        let mut cpu = vec![0f32; q.len()];
        for (ri, &p) in positions.iter().enumerate() {
            for head in 0..nh {
                let kvh = head / (nh / nkv);
                let lo = window.map_or(0, |w| (p + 1).saturating_sub(w));
                let at = |pp: usize| {
                    let sl = (table[pp / bs] as usize * bs + pp % bs) * width + kvh * hd;
                    (&kc[sl..sl + hd], &vc[sl..sl + hd])
                };
                let o = (ri * nh + head) * hd;
                crate::backend::cpu::ops::attend(
                    &q[o..o + hd],
                    lo..p + 1,
                    at,
                    scale,
                    &mut cpu[o..o + hd],
                );
            }
        }
        let s = dev.stream();
        let kd = s.clone_htod(&kc_dev).map_err(drv)?;
        let vd = s.clone_htod(&vc_dev).map_err(drv)?;
        // path 0: one block walks the splits; 1: split-parallel; 2: split-parallel into a
        // workspace on a grid of 3 more splits than any row needs (as a CUDA graph runs it);
        // 3 and 5: paths 0 and 2 on the `_wide` entries (ATTN_HEADS_WIDE heads a block, compiled
        // when ATTN_WIDE_ROWS or ATTN_WIDE_SPLITS > 0); 6: attn_rows_f32 (compiled when
        // ATTN_ROWS > 0; blocks of ATTN_ROWS_Q rows of scattered positions and windows).
        let run = |rows: &[usize], path: u8| -> Result<Vec<f32>> {
            let qs: Vec<f32> = rows
                .iter()
                .flat_map(|&r| q[r * nh * hd..(r + 1) * nh * hd].iter().copied())
                .collect();
            let idx = KvIndex {
                pos: s
                    .clone_htod(
                        &rows
                            .iter()
                            .map(|&r| positions[r] as u32)
                            .collect::<Vec<_>>(),
                    )
                    .map_err(drv)?,
                slots: s.clone_htod(&vec![0u32; rows.len()]).map_err(drv)?,
                row_tab: s.clone_htod(&vec![0u32; rows.len()]).map_err(drv)?,
                tables: s.clone_htod(&table).map_err(drv)?,
                host_pos: rows.iter().map(|&r| positions[r] as u32).collect(),
                host_tab: vec![0; rows.len()],
            };
            let qd = s.clone_htod(&qs).map_err(drv)?;
            let mut od = s.alloc_zeros::<f32>(qs.len()).map_err(drv)?;
            let split = dev.define("ATTN_SPLIT", 256) as usize;
            let nz = 3 + rows
                .iter()
                .map(|&r| positions[r] / split + 1)
                .max()
                .unwrap_or(1);
            let mut part = s
                .alloc_zeros::<f32>(rows.len() * nh * nz * (hd + 2))
                .map_err(drv)?;
            let (wide, path) = ((3..6).contains(&path), if path == 6 { 6 } else { path % 3 });
            let path = match path {
                6 => AttnPath::Rows,
                0 => AttnPath::Walk,
                1 => AttnPath::Split,
                _ => AttnPath::Workspace {
                    part: &mut part,
                    nz,
                },
            };
            let args = ((nh, nkv, hd), bs, window, scale);
            dev.attention_as(&qd, &kd, &vd, &mut od, &idx, args, path, wide)?;
            s.clone_dtoh(&od).map_err(drv)
        };
        let all: Vec<usize> = (0..positions.len()).collect();
        // All rows through the one-block path; the last row alone through the split-parallel
        // one, with and without a workspace; all rows through the workspace; all rows through
        // the wide entries, walking and into the workspace; all rows through the rows entry.
        let gpu = run(&all, 0)?;
        let last = &gpu[(positions.len() - 1) * nh * hd..];
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        let ident = same(&run(&[positions.len() - 1], 1)?, last)
            && same(&run(&[positions.len() - 1], 2)?, last)
            && same(&run(&all, 2)?, &gpu)
            && (!dev.attn_wide_compiled()
                || (same(&run(&all, 3)?, &gpu) && same(&run(&all, 5)?, &gpu)))
            && (dev.define("ATTN_ROWS", 0) == 0 || same(&run(&all, 6)?, &gpu));
        let ones = vec![1f32; cpu.len()];
        let (d, ok) = compare(&gpu, &cpu, &ones, 1e-5, 0.0);
        out.push(CheckRow {
            op: "attn_paged+split_f32".into(),
            case: format!("hd={hd} nh={nh} nkv={nkv} win={window:?} pos≤2303"),
            max_abs_diff: d,
            tolerance: "1e-5 abs".into(),
            within: ok,
            batch_identical: Some(ident),
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

/// A KV cache's contents as the device stores them (kernels/common.cuh `kv_t`): `vals` as
/// f32, or with `KV_F16 = 1` each value rounded to f16 (nearest-even, as `__float2half_rn`; the
/// rounded values are written back into `vals` for the CPU reference) and packed two to a word,
/// the even element in the low half.
fn kv_cache_image(dev: &CudaDevice, vals: &mut [f32]) -> Vec<f32> {
    if dev.kv_value_bytes() == 4 {
        return vals.to_vec();
    }
    let bits: Vec<u16> = vals
        .iter_mut()
        .map(|v| {
            let h = half::f16::from_f32(*v);
            *v = h.to_f32();
            h.to_bits()
        })
        .collect();
    bits.chunks(2)
        .map(|p| {
            f32::from_bits(u32::from(p[0]) | (u32::from(p.get(1).copied().unwrap_or(0)) << 16))
        })
        .collect()
}
