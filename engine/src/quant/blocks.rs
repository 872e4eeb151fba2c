//! Per-format dequantization of whole rows. Arithmetic is f32 with the operation order of the
//! `gguf` package's `quants.py` (e.g. Q4_K: `(d * sc) * q - (dmin * m)`), so results are bit-exact
//! with it.

use super::{DType, QK_K};
use half::{bf16, f16};

#[inline]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Dequantizes `out.len()` elements from `src` (exactly `dtype.bytes_for(out.len())` bytes).
///
/// Panics if `out.len()` is not a whole number of blocks or `src` is too short; callers validate
/// shapes when a tensor is loaded.
#[inline(always)]
pub fn dequantize_row(dtype: DType, src: &[u8], out: &mut [f32]) {
    let be = dtype.block_elems();
    let bb = dtype.block_bytes();
    assert!(out.len().is_multiple_of(be) && src.len() >= out.len() / be * bb);
    match dtype {
        DType::F32 => {
            for (o, c) in out.iter_mut().zip(src.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        DType::F16 => {
            for (o, c) in out.iter_mut().zip(src.chunks_exact(2)) {
                *o = f16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        DType::BF16 => {
            for (o, c) in out.iter_mut().zip(src.chunks_exact(2)) {
                *o = bf16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        _ => {
            for (o, b) in out.chunks_exact_mut(be).zip(src.chunks_exact(bb)) {
                dequantize_block(dtype, b, o);
            }
        }
    }
}

/// One block of a quantized type.
#[inline(always)]
fn dequantize_block(dtype: DType, b: &[u8], o: &mut [f32]) {
    match dtype {
        DType::Q4_0 => {
            let d = f16_at(b, 0);
            let qs = &b[2..18];
            for i in 0..16 {
                o[i] = d * ((qs[i] & 0x0F) as i8 - 8) as f32;
                o[i + 16] = d * ((qs[i] >> 4) as i8 - 8) as f32;
            }
        }
        DType::Q4_1 => {
            let d = f16_at(b, 0);
            let m = f16_at(b, 2);
            let qs = &b[4..20];
            for i in 0..16 {
                o[i] = d * (qs[i] & 0x0F) as f32 + m;
                o[i + 16] = d * (qs[i] >> 4) as f32 + m;
            }
        }
        DType::Q5_0 => {
            let d = f16_at(b, 0);
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            let qs = &b[6..22];
            for i in 0..16 {
                let lo = (qs[i] & 0x0F) | ((((qh >> i) & 1) as u8) << 4);
                let hi = (qs[i] >> 4) | ((((qh >> (i + 16)) & 1) as u8) << 4);
                o[i] = d * (lo as i8 - 16) as f32;
                o[i + 16] = d * (hi as i8 - 16) as f32;
            }
        }
        DType::Q8_0 => {
            let d = f16_at(b, 0);
            for i in 0..32 {
                o[i] = (b[2 + i] as i8) as f32 * d;
            }
        }
        DType::Q4_K | DType::Q5_K => {
            let d = f16_at(b, 0);
            let dmin = f16_at(b, 2);
            let (sc, mn) = k_scale_min(&b[4..16]);
            let (qh, qs) = if dtype == DType::Q5_K {
                (&b[16..48], &b[48..176])
            } else {
                (&b[0..0], &b[16..144])
            };
            // 8 sub-blocks of 32; sub-block j uses nibble (j % 2) of bytes qs[32*(j/2) ..].
            for j in 0..8 {
                let dl = d * sc[j] as f32;
                let ml = dmin * mn[j] as f32;
                let q = &qs[32 * (j / 2)..32 * (j / 2) + 32];
                let shift = 4 * (j % 2);
                for i in 0..32 {
                    let mut v = (q[i] >> shift) & 0x0F;
                    if !qh.is_empty() {
                        v |= ((qh[i] >> j) & 1) << 4;
                    }
                    o[32 * j + i] = dl * v as f32 - ml;
                }
            }
        }
        DType::Q6_K => {
            let ql = &b[0..128];
            let qh = &b[128..192];
            let scales = &b[192..208];
            let d = f16_at(b, 208);
            for e in 0..QK_K {
                let half = e / 128;
                let j = e % 128;
                let l = j / 32;
                let i = j % 32;
                let lo = (ql[half * 64 + (l % 2) * 32 + i] >> (4 * (l / 2))) & 0x0F;
                let hi = (qh[half * 32 + i] >> (2 * l)) & 0x03;
                let q = (lo | (hi << 4)) as i8 - 32;
                let dl = d * (scales[e / 16] as i8) as f32;
                o[e] = dl * q as f32;
            }
        }
        DType::F32 | DType::F16 | DType::BF16 => {
            unreachable!("plain types are handled per element")
        }
    }
}

/// Unpacks the 12-byte 6-bit scale/min table of Q4_K and Q5_K into 8 scales and 8 mins.
#[inline]
fn k_scale_min(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 0x3F;
        mn[j] = s[j + 4] & 0x3F;
        sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 2) & 0x30);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30);
    }
    (sc, mn)
}
