//! Dequantizing dot products per weight type: `QuantMatrix::matmul_rows` (the per-thread kernel,
//! one thread) at a decode shape (1 token x 2048 x 2048) and a batched shape (8 tokens), the
//! engine's parallel `backend::cpu::matmul` at the decode shape (rayon pool: one thread per core),
//! and `dequantize_row` alone. Throughput: multiply-adds (elements) and weight bytes read.
//!
//! `cargo bench -p memra-engine --bench quant -- --quick` (filter: `-- matmul_1t/Q4_K`).

mod common;

use common::Rng;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::{bf16, f16};
use memra_engine::quant::{dequantize_row, quant_matrix, DType, QuantMatrix, Storage};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const ROWS: usize = 2048;
const COLS: usize = 2048;
const BATCH: usize = 8;

const TYPES: [DType; 10] = [
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

fn put_f16(b: &mut [u8], at: usize, v: f32) {
    b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// `n` elements of `dtype` with random quants and small finite scales (no NaN, no subnormal
/// products), so the timing is that of ordinary weights.
fn weights(dtype: DType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut b = vec![0u8; dtype.bytes_for(n).expect("whole blocks")];
    match dtype {
        DType::F32 => b
            .chunks_exact_mut(4)
            .for_each(|c| c.copy_from_slice(&(rng.sym() * 0.05).to_le_bytes())),
        DType::F16 => b
            .chunks_exact_mut(2)
            .for_each(|c| c.copy_from_slice(&f16::from_f32(rng.sym() * 0.05).to_le_bytes())),
        DType::BF16 => b
            .chunks_exact_mut(2)
            .for_each(|c| c.copy_from_slice(&bf16::from_f32(rng.sym() * 0.05).to_le_bytes())),
        _ => {
            b.iter_mut().for_each(|x| *x = rng.next_u64() as u8);
            let bb = dtype.block_bytes();
            for blk in b.chunks_exact_mut(bb) {
                let d = 0.002 + 0.004 * (rng.sym() + 1.0);
                match dtype {
                    // d (and m / dmin) are the leading f16s of the block.
                    DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => put_f16(blk, 0, d),
                    DType::Q4_1 | DType::Q4_K | DType::Q5_K => {
                        put_f16(blk, 0, d);
                        put_f16(blk, 2, d * 0.5);
                    }
                    // Q6_K: ql[128] qh[64] scales[16] then d.
                    DType::Q6_K => put_f16(blk, bb - 2, d),
                    _ => unreachable!(),
                }
            }
        }
    }
    b
}

fn matrix(dtype: DType) -> Arc<dyn QuantMatrix> {
    let mut rng = Rng::new(0x5eed ^ dtype.block_bytes() as u64);
    let data = Storage::Owned(Arc::new(weights(dtype, ROWS * COLS, &mut rng)));
    quant_matrix(dtype, ROWS, COLS, data).expect("valid matrix")
}

fn activations(t: usize) -> Vec<f32> {
    let mut rng = Rng::new(7);
    (0..t * COLS).map(|_| rng.normal()).collect()
}

fn quant(c: &mut Criterion) {
    let mats: Vec<_> = TYPES.iter().map(|&d| (d, matrix(d))).collect();
    let weight_bytes = |d: DType| (d.bytes_for(COLS).unwrap() * ROWS) as u64;

    for (name, t) in [("matmul_1t", 1), ("matmul_1t_batch8", BATCH)] {
        let mut g = c.benchmark_group(format!("{name}/{ROWS}x{COLS}"));
        g.warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3))
            .sample_size(20);
        let x = activations(t);
        let mut out = vec![0f32; t * ROWS];
        for (d, m) in &mats {
            g.throughput(Throughput::ElementsAndBytes {
                elements: (t * ROWS * COLS) as u64,
                bytes: weight_bytes(*d),
            });
            g.bench_function(BenchmarkId::from_parameter(d.name()), |b| {
                b.iter(|| m.matmul_rows(black_box(&x), 0..ROWS, &mut out));
                black_box(&out);
            });
        }
        g.finish();
    }

    let mut g = c.benchmark_group(format!(
        "matmul_pool{}/{ROWS}x{COLS}",
        rayon::current_num_threads()
    ));
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    let x = activations(1);
    for (d, m) in &mats {
        g.throughput(Throughput::ElementsAndBytes {
            elements: (ROWS * COLS) as u64,
            bytes: weight_bytes(*d),
        });
        g.bench_function(BenchmarkId::from_parameter(d.name()), |b| {
            b.iter(|| memra_engine::backend::cpu::matmul(m.as_ref(), black_box(&x), 1))
        });
    }
    g.finish();

    let mut g = c.benchmark_group(format!("dequantize_row/{ROWS}x{COLS}"));
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    let mut row = vec![0f32; COLS];
    for (d, m) in &mats {
        let rb = d.bytes_for(COLS).unwrap();
        g.throughput(Throughput::ElementsAndBytes {
            elements: (ROWS * COLS) as u64,
            bytes: weight_bytes(*d),
        });
        g.bench_function(BenchmarkId::from_parameter(d.name()), |b| {
            b.iter(|| {
                for r in m.raw().chunks_exact(rb) {
                    dequantize_row(*d, black_box(r), &mut row);
                }
                black_box(&row);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, quant);
criterion_main!(benches);
