//! Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random
//! numbers: as easy as 1, 2, 3", SC 2011; constants from Random123). A draw is a pure function
//! of (seed, sequence, position), so it does not depend on batch composition, on thread
//! scheduling, or on whether the position was reached by speculation.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

#[inline]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// Philox4x32 with 10 rounds: four 32-bit outputs for a 128-bit counter and 64-bit key.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for _ in 0..10 {
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    c
}

/// 24 random bits for (seed, sequence, position): the top 24 bits of Philox's first output word
/// for counter (position, sequence, 0) and key seed. The sampler's draw uses them as an integer.
pub fn draw24(seed: u64, sequence: u32, position: u64) -> u32 {
    let out = philox4x32_10(
        [position as u32, (position >> 32) as u32, sequence, 0],
        [seed as u32, (seed >> 32) as u32],
    );
    out[0] >> 8
}

/// [`draw24`] as a uniform f32 in [0, 1).
pub fn uniform(seed: u64, sequence: u32, position: u64) -> f32 {
    draw24(seed, sequence, position) as f32 * (1.0 / (1u32 << 24) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vectors from Random123's `kat_vectors` for philox4x32_10.
    #[test]
    fn philox_known_answers() {
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniform_is_in_range_and_keyed() {
        let a = uniform(7, 0, 5);
        assert!((0.0..1.0).contains(&a));
        assert_eq!(a, uniform(7, 0, 5));
        assert_ne!(a, uniform(7, 1, 5));
        assert_ne!(a, uniform(7, 0, 6));
        assert_ne!(a, uniform(8, 0, 5));
    }
}
