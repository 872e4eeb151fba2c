//! Per-format dequantization of whole rows. Arithmetic is f32 with the operation order of the
//! `gguf` package's `quants.py` (e.g. Q4_K: `(d * sc) * q - (dmin * m)`), so results are bit-exact
//! with it.

use super::DType;
use half::{bf16, f16};

#[inline(always)]
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
        // Two passes per block: integer unpacking into a byte array, then one int→float
        // conversion and scale per element. Both loops vectorize; the float arithmetic per
        // element is unchanged.
        DType::Q4_0 => {
            let d = f16_at(b, 0);
            let q = nibbles(b[2..18].try_into().expect("block size"));
            let o: &mut [f32; 32] = o.try_into().expect("32");
            for i in 0..32 {
                o[i] = d * (q[i] as i8 - 8) as f32;
            }
        }
        DType::Q4_1 => {
            let d = f16_at(b, 0);
            let m = f16_at(b, 2);
            let q = nibbles(b[4..20].try_into().expect("block size"));
            let o: &mut [f32; 32] = o.try_into().expect("32");
            for i in 0..32 {
                o[i] = d * q[i] as f32 + m;
            }
        }
        DType::Q5_0 => {
            let d = f16_at(b, 0);
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            let mut q = nibbles(b[6..22].try_into().expect("block size"));
            for (i, v) in q.iter_mut().enumerate() {
                *v |= (((qh >> i) & 1) as u8) << 4;
            }
            let o: &mut [f32; 32] = o.try_into().expect("32");
            for i in 0..32 {
                o[i] = d * (q[i] as i8 - 16) as f32;
            }
        }
        DType::Q8_0 => {
            let d = f16_at(b, 0);
            let qs: &[u8; 32] = b[2..34].try_into().expect("block size");
            let o: &mut [f32; 32] = o.try_into().expect("32");
            for i in 0..32 {
                o[i] = (qs[i] as i8) as f32 * d;
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
                let q: &[u8; 32] = qs[32 * (j / 2)..32 * (j / 2) + 32].try_into().expect("32");
                let shift = 4 * (j % 2);
                let out: &mut [f32; 32] = (&mut o[32 * j..32 * j + 32]).try_into().expect("32");
                let mut v = [0u8; 32];
                for i in 0..32 {
                    v[i] = (q[i] >> shift) & 0x0F;
                }
                if !qh.is_empty() {
                    let qh: &[u8; 32] = qh.try_into().expect("32");
                    for i in 0..32 {
                        v[i] |= ((qh[i] >> j) & 1) << 4;
                    }
                }
                for i in 0..32 {
                    out[i] = dl * v[i] as f32 - ml;
                }
            }
        }
        DType::Q6_K => {
            let ql = &b[0..128];
            let qh = &b[128..192];
            let scales = &b[192..208];
            let d = f16_at(b, 208);
            // Element e = 128*half + 32*l + i: low nibble or high nibble (l / 2) of
            // ql[64*half + 32*(l % 2) + i], two high bits from qh[32*half + i] >> 2l.
            for half in 0..2 {
                let qlh: &[u8; 64] = ql[64 * half..64 * half + 64].try_into().expect("64");
                let qhh: &[u8; 32] = qh[32 * half..32 * half + 32].try_into().expect("32");
                for l in 0..4 {
                    let base = 128 * half + 32 * l;
                    let out: &mut [f32; 32] = (&mut o[base..base + 32]).try_into().expect("32");
                    let d0 = d * (scales[base / 16] as i8) as f32;
                    let d1 = d * (scales[base / 16 + 1] as i8) as f32;
                    let mut q = [0i8; 32];
                    for i in 0..32 {
                        let lo = (qlh[(l % 2) * 32 + i] >> (4 * (l / 2))) & 0x0F;
                        let hi = (qhh[i] >> (2 * l)) & 0x03;
                        q[i] = (lo | (hi << 4)) as i8 - 32;
                    }
                    for i in 0..16 {
                        out[i] = d0 * q[i] as f32;
                    }
                    for i in 16..32 {
                        out[i] = d1 * q[i] as f32;
                    }
                }
            }
        }
        DType::F32 | DType::F16 | DType::BF16 => {
            unreachable!("plain types are handled per element")
        }
    }
}

/// Low nibbles of 16 bytes, then their high nibbles: the 32 quants of a Q4_0/Q4_1/Q5_0 block.
#[inline(always)]
fn nibbles(qs: &[u8; 16]) -> [u8; 32] {
    let mut q = [0u8; 32];
    for i in 0..16 {
        q[i] = qs[i] & 0x0F;
        q[i + 16] = qs[i] >> 4;
    }
    q
}

/// Unpacks the 12-byte 6-bit scale/min table of Q4_K and Q5_K (bytes 4..16 of a block) into 8
/// scales and 8 mins, one per 32-element sub-block (ggml's `get_scale_min_k4`).
#[inline]
pub fn k_scale_min(s: &[u8]) -> ([u8; 8], [u8; 8]) {
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

/// Quantizes `src` (f32, a multiple of 32 elements) to GGUF Q8_0 blocks in `dst`
/// (`src.len() / 32 * 34` bytes): per 32 elements, `d = max|x| / 127` stored as f16, then
/// `q = round(x / d)` as i8 (half away from zero; 0 when the block is all zeros). The reference
/// algorithm of ggml's `quantize_row_q8_0_ref` (it rounds with the f32 `d` and stores an f16 one),
/// so a value comes back within `d / 2 + 127·|d − f16(d)|`, under 0.57·d. Panics on lengths that do not match, as [`dequantize_row`] does.
pub fn quantize_row_q8_0(src: &[f32], dst: &mut [u8]) {
    assert!(src.len().is_multiple_of(32) && dst.len() == src.len() / 32 * 34);
    for (x, b) in src.chunks_exact(32).zip(dst.chunks_exact_mut(34)) {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        b[..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
        for (q, v) in b[2..].iter_mut().zip(x) {
            *q = ((v * id).round() as i32).clamp(-127, 127) as i8 as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Q8_0 round trip: every value within d/2 of itself (d as stored), zeros exact, the block's
    /// largest value exactly ±127·d.
    #[test]
    fn q8_0_quantize_round_trips_within_half_a_step() {
        let mut src: Vec<f32> = (0..96)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
            .collect();
        src[32..64].fill(0.0);
        let mut q = vec![0u8; 3 * 34];
        quantize_row_q8_0(&src, &mut q);
        let mut back = vec![0f32; 96];
        dequantize_row(DType::Q8_0, &q, &mut back);
        for (blk, (s, b)) in src.chunks(32).zip(back.chunks(32)).enumerate() {
            let d = f16::from_le_bytes([q[blk * 34], q[blk * 34 + 1]]).to_f32();
            for (x, y) in s.iter().zip(b) {
                assert!(
                    (x - y).abs() <= d * (0.5 + 127.0 / 2048.0),
                    "block {blk}: {x} -> {y} (d {d})"
                );
            }
            let amax = s.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            assert!(
                q[blk * 34 + 2..blk * 34 + 34]
                    .iter()
                    .any(|&v| (v as i8).abs() == 127)
                    || amax == 0.0
            );
        }
        assert!(back[32..64].iter().all(|&v| v == 0.0));
        assert_eq!(&q[34..36], &[0, 0]);
    }
}
