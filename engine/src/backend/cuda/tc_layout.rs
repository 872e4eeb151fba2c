//! The weight layout of the tensor-core linear kernels (`kernels/linear_tc.cu`'s module docs):
//! raw BF16, GGUF Q8_0 and GGUF Q4_K matrices repacked into tiles of 16 rows by units of 32
//! columns, each lane's A fragments of the PTX ISA's m16n8k16 MMA together, at upload
//! ([`super::ops::DevMatrix::upload_repacked`] with QTC = 1).

use super::linear_tc::TC_TILE_ROWS;
use crate::quant::DType;

/// Index in a tile's per-unit lane block of element `(row_in_tile, k_in_unit)`, as
/// `(lane, slot)`: lane `4g + t` holds, for k-half `h` (k 16h..16h+16), the pairs (row g, k 2t),
/// (row g+8, k 2t), (row g, k 2t+8), (row g+8, k 2t+8), two elements each, slots `8h .. 8h+8`
/// (the A fragment order of the PTX ISA's m16n8k16 MMA).
fn tc_position(row: usize, k: usize) -> (usize, usize) {
    let (h, kk) = (k / 16, k % 16);
    let (g, hi_row) = (row % 8, row / 8);
    let (t, odd, hi_k) = ((kk % 8) / 2, kk % 2, kk / 8);
    let reg = hi_row + 2 * hi_k;
    (4 * g + t, 8 * h + 2 * reg + odd)
}

/// Repacks `rows x cols` raw BF16, GGUF Q8_0 or GGUF Q4_K bytes into the tensor-core layout
/// (module docs of `kernels/linear_tc.cu`): quants `[tiles][cols/32][32 lanes][16 values]` (bf16
/// or int8; Q4_K: 16 nibbles in 8 bytes, see [`q4_k_code_bit`]), for Q8_0 the scales
/// `[tiles][cols/32][8]` u32 (f16 of row g | f16 of row g+8 << 16), for Q4_K the 6-bit scale and
/// min words `[tiles][cols/32][8]` u32 (sc, m of row g, then of row g+8, a byte each) followed by
/// `[tiles][cols/256][8]` pairs of u32 (f16 d | f16 dmin << 16 of row g, then of row g+8). The
/// last tile is padded with zero rows. `None` for other formats or a shape that does not fit.
pub fn repack_tc(raw: &[u8], dtype: DType, rows: usize, cols: usize) -> Option<(Vec<u8>, Vec<u8>)> {
    if !cols.is_multiple_of(32) || dtype.bytes_for(cols).map(|b| b * rows) != Some(raw.len()) {
        return None;
    }
    let (tiles, units) = (rows.div_ceil(TC_TILE_ROWS), cols / 32);
    match dtype {
        DType::BF16 => {
            let mut q = vec![0u8; tiles * units * 32 * 32];
            for r in 0..rows {
                let (tile, rt) = (r / TC_TILE_ROWS, r % TC_TILE_ROWS);
                for k in 0..cols {
                    let (u, (lane, slot)) = (k / 32, tc_position(rt, k % 32));
                    let at = ((tile * units + u) * 32 + lane) * 32 + 2 * slot;
                    q[at..at + 2].copy_from_slice(&raw[2 * (r * cols + k)..][..2]);
                }
            }
            Some((q, Vec::new()))
        }
        DType::Q8_0 => {
            let mut q = vec![0u8; tiles * units * 32 * 16];
            let mut s = vec![0u8; tiles * units * 8 * 4];
            for r in 0..rows {
                let (tile, rt) = (r / TC_TILE_ROWS, r % TC_TILE_ROWS);
                for u in 0..units {
                    let block = &raw[(r * units + u) * 34..][..34];
                    let tu = tile * units + u;
                    let at = (tu * 8 + rt % 8) * 4 + 2 * (rt / 8);
                    s[at..at + 2].copy_from_slice(&block[..2]);
                    for (k, &b) in block[2..].iter().enumerate() {
                        let (lane, slot) = tc_position(rt, k);
                        q[(tu * 32 + lane) * 16 + slot] = b;
                    }
                }
            }
            Some((q, s))
        }
        DType::Q4_K => {
            let (blocks, bb) = (cols / 256, DType::Q4_K.block_bytes());
            let mut q = vec![0u8; tiles * units * 32 * 8];
            let words = tiles * units * 8 * 4;
            let mut s = vec![0u8; words + tiles * blocks * 8 * 8];
            for r in 0..rows {
                let (tile, rt) = (r / TC_TILE_ROWS, r % TC_TILE_ROWS);
                for b in 0..blocks {
                    let block = &raw[(r * blocks + b) * bb..][..bb];
                    // d | dmin << 16 of row rt: pair word rt / 8 of lane group rt % 8.
                    let at = words + ((tile * blocks + b) * 8 + rt % 8) * 8 + 4 * (rt / 8);
                    s[at..at + 4].copy_from_slice(&block[..4]);
                    let (sc, mn) = crate::quant::k_scale_min(&block[4..16]);
                    for j in 0..8 {
                        let tu = tile * units + 8 * b + j;
                        let at = (tu * 8 + rt % 8) * 4 + 2 * (rt / 8);
                        s[at] = sc[j];
                        s[at + 1] = mn[j];
                        // Sub-block j: nibble j % 2 of bytes 32 (j / 2) .. of the codes.
                        for e in 0..32 {
                            let code = (block[16 + 32 * (j / 2) + e] >> (4 * (j % 2))) & 0x0f;
                            let (lane, slot) = tc_position(rt, e);
                            let bit = q4_k_code_bit(slot);
                            q[(tu * 32 + lane) * 8 + bit / 8] |= code << (bit % 8);
                        }
                    }
                }
            }
            Some((q, s))
        }
        _ => None,
    }
}

/// Bit offset, in a lane's 8 bytes of a Q4_K (tile, unit), of the nibble of fragment slot
/// `slot` (0..16): u32 word h = slot / 8 (the k-half), bits 4r for slot 8h + 2r and 16 + 4r for
/// slot 8h + 2r + 1, so one mask of the word shifted by 4r gives register r's bf16 pair
/// (kernels/common.cuh `q4x16_to_bf16_frags`).
fn q4_k_code_bit(slot: usize) -> usize {
    let (h, r, odd) = (slot / 8, (slot % 8) / 2, slot % 2);
    32 * h + 16 * odd + 4 * r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (row, k) of a tile-unit lands on its own (lane, slot), and the fragment rules hold.
    #[test]
    fn tc_positions_cover_the_tile_once() {
        let mut seen = [[false; 16]; 32];
        for row in 0..16 {
            for k in 0..32 {
                let (lane, slot) = tc_position(row, k);
                assert!(!seen[lane][slot], "row {row} k {k} collides");
                seen[lane][slot] = true;
                // Lane 4g + t: rows g, g + 8; the pair's first element sits at an even slot.
                assert_eq!(lane / 4, row % 8);
                assert_eq!(slot % 2, k % 2);
                assert_eq!(lane % 4, (k % 8) / 2);
            }
        }
        assert!(seen.iter().all(|l| l.iter().all(|&s| s)));
    }

    /// Q8_0: each row's scale lands in its tile's word (row % 8), half (row / 8); padding is zero.
    #[test]
    fn q8_0_repack_places_scales_and_quants() {
        let (rows, cols) = (18, 64);
        let mut raw = Vec::new();
        for r in 0..rows {
            for u in 0..cols / 32 {
                raw.extend_from_slice(&((r * 10 + u) as u16).to_le_bytes());
                raw.extend((0..32).map(|k| (r + k + u) as u8));
            }
        }
        let (q, s) = repack_tc(&raw, DType::Q8_0, rows, cols).expect("q8_0 repacks");
        assert_eq!(q.len(), 2 * 2 * 32 * 16);
        assert_eq!(s.len(), 2 * 2 * 8 * 4);
        let scale = |tile: usize, u: usize, row: usize| {
            let at = ((tile * 2 + u) * 8 + row % 8) * 4 + 2 * (row / 8);
            u16::from_le_bytes([s[at], s[at + 1]])
        };
        assert_eq!(scale(0, 1, 9), 91);
        assert_eq!(scale(1, 0, 1), 170);
        assert_eq!(scale(1, 1, 5), 0, "padding row");
        let (lane, slot) = tc_position(9, 17);
        assert_eq!(q[(32 + lane) * 16 + slot], (9 + 17 + 1) as u8);
        let (lane, slot) = tc_position(1, 5);
        assert_eq!(q[(2 * 32 + lane) * 16 + slot], (17 + 5) as u8);
        assert!(repack_tc(&raw[1..], DType::Q8_0, rows, cols).is_none());
    }

    /// Q4_K: reading the repacked layout as the kernel does (the lane's two words, register r of
    /// k-half h from bits 4r and 16 + 4r of word h; the scale word of lane group g; the d pair of
    /// the unit's super-block) gives every weight `(d sc) q - (dmin m)` bit for bit as the GGUF
    /// dequantizer does, padding rows zero.
    #[test]
    fn q4_k_repack_reads_back_as_the_gguf_weights() {
        use super::super::selfcheck::{random_weights, Rng};
        let (rows, cols) = (19, 512);
        let raw = random_weights(&mut Rng(7), DType::Q4_K, rows, cols);
        let (q, s) = repack_tc(&raw, DType::Q4_K, rows, cols).expect("q4_k repacks");
        let (tiles, units) = (2, cols / 32);
        assert_eq!(q.len(), tiles * units * 32 * 8);
        let words = tiles * units * 8 * 4;
        assert_eq!(s.len(), words + tiles * (cols / 256) * 8 * 8);
        let u32_at =
            |b: &[u8], i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
        let f16 = |bits: u32| half::f16::from_bits(bits as u16).to_f32();
        let mut want = vec![0f32; cols];
        for r in 0..tiles * 16 {
            if r < rows {
                let row = &raw[r * cols / 256 * 144..][..cols / 256 * 144];
                crate::quant::dequantize_row(DType::Q4_K, row, &mut want);
            }
            let (tile, g, hi) = (r / 16, r % 8, (r % 16) / 8);
            for (k, &w) in want.iter().enumerate() {
                let (u, e) = (k / 32, k % 32);
                let tu = tile * units + u;
                let (lane, slot) = tc_position(r % 16, e);
                assert_eq!(lane / 4, g);
                let (h, reg, odd) = (slot / 8, (slot % 8) / 2, slot % 2);
                let word = u32_at(&q, (tu * 32 + lane) * 2 + h);
                let code = ((word >> (4 * reg)) >> (16 * odd)) & 0xf;
                let sw = u32_at(&s, tu * 8 + g) >> (16 * hi);
                let dw = u32_at(
                    &s[words..],
                    ((tile * (cols / 256) + u / 8) * 8 + g) * 2 + hi,
                );
                let dsc = f16(dw & 0xffff) * (sw & 0xff) as f32;
                let dmm = f16(dw >> 16) * ((sw >> 8) & 0xff) as f32;
                let got = dsc * code as f32 - dmm;
                let exp = if r < rows { w } else { 0.0 };
                assert_eq!(
                    got.to_bits(),
                    exp.to_bits(),
                    "row {r} k {k}: {got} vs {exp}"
                );
            }
        }
        assert!(repack_tc(&raw[1..], DType::Q4_K, rows, cols).is_none());
    }
}
