//! Unit tests of the scheduler's per-sequence state.

use super::*;

/// The acceptance estimate starts at its prior (1.0), falls towards 0 when nothing is
/// accepted (below the 0.1 built-in floor within 12 verifies, so such a sequence pauses), and
/// tracks a steady per-token rate.
#[test]
fn acceptance_estimate_leaves_its_prior() {
    let mut s = Seq::new(1, 0, vec![1, 2, 3], 3);
    assert_eq!(s.acceptance(), 1.0);
    s.record_verify(0, 0);
    assert_eq!(s.acceptance(), 1.0, "an empty draft is no evidence");
    let mut n = 0;
    while s.acceptance() >= 0.1 {
        s.record_verify(4, 0);
        n += 1;
        assert!(
            n <= 12,
            "still {} after {n} rejected verifies",
            s.acceptance()
        );
    }
    // Then 3 of every 4 positions tried accepted (3 accepted, then a rejection).
    for _ in 0..60 {
        s.record_verify(4, 3);
    }
    assert!((s.acceptance() - 0.75).abs() < 1e-3, "{}", s.acceptance());
}
