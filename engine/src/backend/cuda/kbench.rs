//! Kernel micro-benchmarks (device events, no model file): the linear kernels at the
//! Llama-3.1-8B shapes in the formats the speed targets name, so a kernel change can be judged
//! by its achieved bandwidth before a whole decode step is timed. Weights are random (never
//! zeros: they can run faster than real data) and rotate over enough copies to exceed the L2
//! cache, so every launch reads its weights from device memory.

use super::ops::DevMatrix;
use super::selfcheck::{random_weights, Rng};
use super::{drv, CudaDevice};
use crate::error::Result;
use crate::quant::DType;

/// One timed kernel configuration.
#[derive(Debug, Clone)]
pub struct KernelTiming {
    /// Kernel family and weight format (`linear bf16`).
    pub op: String,
    /// `[rows, cols]` of the weight matrix and its role in the 8B model.
    pub shape: String,
    /// Tokens per launch.
    pub m: usize,
    /// Microseconds per launch: median, min and max over the timed batches.
    pub us: [f64; 3],
    /// Bytes of weights one launch reads.
    pub bytes: usize,
}

impl KernelTiming {
    /// Achieved bandwidth at the median, GB/s (weight bytes only).
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 / self.us[0] / 1e3
    }
}

/// The Llama-3.1-8B linear shapes `[rows, cols]`, with the role of each; "qkv" and "gate+up" are
/// the fused matrices the CUDA backend runs (rows of Q, K, V and of gate, up concatenated).
pub const LLAMA_8B_LINEARS: [(usize, usize, &str); 6] = [
    (4096, 4096, "q/o"),
    (1024, 4096, "k/v"),
    (6144, 4096, "qkv"),
    (14336, 4096, "gate/up"),
    (28672, 4096, "gate+up"),
    (4096, 14336, "down"),
];

/// The Llama-3.1-8B output matrix (LM head) `[vocab, hidden]`: timed only when asked for (1 GB
/// in BF16), as `probe --bench-kernels --kernel-shapes lm-head`.
pub const LLAMA_8B_LM_HEAD: (usize, usize, &str) = (128256, 4096, "lm-head");

/// Times `linear` for each format in `dtypes`, shape in `shapes` and token count in `ms`:
/// `batches` timed batches of 20 launches each (after 3 warm-up launches), weights rotating over
/// copies totalling at least 256 MiB. Errors: out of device memory, a launch failure.
pub fn bench_linear(
    dev: &CudaDevice,
    dtypes: &[DType],
    shapes: &[(usize, usize, &str)],
    ms: &[usize],
    batches: usize,
) -> Result<Vec<KernelTiming>> {
    let mut rng = Rng(0x6b62_656e_6368);
    let mut out = Vec::new();
    for &dtype in dtypes {
        for &(rows, cols, role) in shapes {
            let raw = random_weights(&mut rng, dtype, rows, cols);
            let copies = (256usize << 20).div_ceil(raw.len()).max(2);
            let mats: Vec<DevMatrix> = (0..copies)
                .map(|_| DevMatrix::upload_repacked(dev, &raw, dtype, rows, cols, None))
                .collect::<Result<_>>()?;
            for &m in ms {
                let x = dev.upload(&rng.vec(m * cols, -1.0, 1.0))?;
                let mut y = dev.alloc::<f32>(m * rows)?;
                let us = time_launches(dev, batches, |i| {
                    dev.linear(&x, &mats[i % copies], &mut y, false)
                })?;
                out.push(KernelTiming {
                    op: format!("linear {}", dtype.name()),
                    shape: format!("[{rows}, {cols}] {role}"),
                    m,
                    us,
                    bytes: mats[0].data.len() + mats[0].aux.as_ref().map_or(0, |a| a.len()),
                });
            }
        }
    }
    Ok(out)
}

/// Times decode attention (split-parallel, on a fixed workspace as a captured CUDA graph runs it,
/// plus its combine) at the Llama-3.1-8B head shape (32 query heads, 8 KV heads, head_dim 128)
/// for each query-row count in `rows` (one sequence each) and KV depth in `depths` (positions
/// 0 ..= depth per row), on a paged cache of 16-position blocks in a random order, in the
/// device's KV format (f32, or f16 with `KV_F16 = 1`). Caches rotate over copies totalling at
/// least 256 MiB, as the 32 layers of a model do, so keys and values come from device memory.
/// `bytes` is the K and V one launch reads. `batches` timed batches of 20 launches after 3
/// warm-up launches. Errors: out of device memory, a launch failure.
pub fn bench_attention(
    dev: &CudaDevice,
    rows: &[usize],
    depths: &[usize],
    batches: usize,
) -> Result<Vec<KernelTiming>> {
    use super::attention::{AttnPath, KvIndex};
    let (nh, nkv, hd, bs) = (32usize, 8usize, 128usize, 16usize);
    let split = dev.define("ATTN_SPLIT", 256) as usize;
    let vb = dev.kv_value_bytes();
    let mut rng = Rng(0x6174_746e);
    let mut out = Vec::new();
    for &m in rows {
        for &depth in depths {
            let per_row = (depth + 1).div_ceil(bs);
            let nblocks = m * per_row;
            let floats = nblocks * bs * nkv * hd * vb / 4;
            let copies = (256usize << 20).div_ceil(floats * 8).max(2);
            // Random values in [-1, 1): f32, or pairs of f16 bit patterns with exponents -14..0.
            let fill = |rng: &mut Rng| -> Vec<f32> {
                if vb == 4 {
                    return rng.vec(floats, -1.0, 1.0);
                }
                (0..floats)
                    .map(|_| {
                        let mut h = || {
                            let r = rng.next_u64();
                            ((r & 0x83ff) | ((1 + (r >> 16) % 15) << 10)) as u32
                        };
                        f32::from_bits(h() | (h() << 16))
                    })
                    .collect()
            };
            let caches: Vec<_> = (0..copies)
                .map(|_| Ok((dev.upload(&fill(&mut rng))?, dev.upload(&fill(&mut rng))?)))
                .collect::<Result<_>>()?;
            let mut order: Vec<u32> = (0..nblocks as u32).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            let idx = KvIndex {
                pos: dev.upload(&vec![depth as u32; m])?,
                slots: dev.upload(&vec![0u32; m])?,
                row_tab: dev.upload(&(0..m).map(|r| (r * per_row) as u32).collect::<Vec<_>>())?,
                tables: dev.upload(&order)?,
                host_pos: vec![depth as u32; m],
                host_tab: (0..m).map(|r| (r * per_row) as u32).collect(),
            };
            let q = dev.upload(&rng.vec(m * nh * hd, -1.0, 1.0))?;
            let mut o = dev.alloc::<f32>(m * nh * hd)?;
            let nz = depth / split + 1;
            let mut part = dev.alloc::<f32>(m * nh * nz * (hd + 2))?;
            let scale = 1.0 / (hd as f32).sqrt();
            let run = |i: usize| {
                let (kc, vc) = &caches[i % copies];
                let path = AttnPath::Workspace {
                    part: &mut part,
                    nz,
                };
                dev.attention(
                    &q,
                    kc,
                    vc,
                    &mut o,
                    &idx,
                    (nh, nkv, hd),
                    bs,
                    None,
                    scale,
                    path,
                )
            };
            let us = time_launches(dev, batches, run)?;
            out.push(KernelTiming {
                op: format!("attn {}", if vb == 2 { "f16" } else { "f32" }),
                shape: format!("32/8x128 depth {depth}"),
                m,
                us,
                bytes: m * (depth + 1) * nkv * hd * vb * 2,
            });
        }
    }
    Ok(out)
}

/// Microseconds per call of `launch(i)` (i = 0, 1, ...: the call's index, for rotating over
/// copies): median, min and max over `batches` batches of 20 calls timed by device events, after
/// 3 warm-up calls. Errors: the launch's, or an event failure.
fn time_launches(
    dev: &CudaDevice,
    batches: usize,
    mut launch: impl FnMut(usize) -> Result<()>,
) -> Result<[f64; 3]> {
    for i in 0..3 {
        launch(i)?;
    }
    let mut times = Vec::with_capacity(batches);
    let ctx = dev.context();
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    for b in 0..batches.max(1) {
        let start = ctx.new_event(timing).map_err(drv)?;
        let end = ctx.new_event(timing).map_err(drv)?;
        start.record(dev.stream()).map_err(drv)?;
        for i in 0..20 {
            launch(b * 20 + i)?;
        }
        end.record(dev.stream()).map_err(drv)?;
        times.push(start.elapsed_ms(&end).map_err(drv)? as f64 * 1e3 / 20.0);
    }
    times.sort_by(f64::total_cmp);
    Ok([times[times.len() / 2], times[0], times[times.len() - 1]])
}

/// The timings as a table, with the fraction of `copy_gbps` each one reaches.
pub fn render(rows: &[KernelTiming], copy_gbps: f64) -> String {
    let mut s = format!(
        "{:<14} {:<24} {:>4} {:>9} {:>9} {:>9} {:>8} {:>6}\n",
        "kernel", "shape", "M", "µs", "min", "max", "GB/s", "of bw"
    );
    for r in rows {
        s += &format!(
            "{:<14} {:<24} {:>4} {:>9.2} {:>9.2} {:>9.2} {:>8.0} {:>5.0}%\n",
            r.op,
            r.shape,
            r.m,
            r.us[0],
            r.us[1],
            r.us[2],
            r.gbps(),
            100.0 * r.gbps() / copy_gbps
        );
    }
    s
}
