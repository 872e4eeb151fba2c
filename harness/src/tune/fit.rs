//! The speculation constants' fit in `memra tune --what spec`: verify costs measured at a few
//! draft counts, fitted by least squares with the policy's bounds.

/// Draft counts whose verify cost `memra tune --what spec` measures (k + 1 rows each) to fit
/// `spec_verify_base` + k·`spec_row_cost`.
pub(super) const SPEC_FIT_DRAFTS: [usize; 4] = [1, 2, 4, 8];

/// Least-squares fit of verify costs `c` (decode rows) at draft counts `k` as base + k·row, with
/// row ≥ 0 and base ≥ 1 (a verify holds the decode row itself): `(base, row)`. Where the free
/// fit breaks a bound, the bound holds and the other is fitted alone: row = 0 gives base = the
/// mean cost; base = 1 gives row = Σ k (c − 1) / Σ k².
pub(super) fn fit_verify_cost(k: &[usize], c: &[f64]) -> (f64, f64) {
    let n = k.len().min(c.len()).max(1) as f64;
    let km = k.iter().map(|&x| x as f64).sum::<f64>() / n;
    let cm = c.iter().sum::<f64>() / n;
    let sxx: f64 = k.iter().map(|&x| (x as f64 - km).powi(2)).sum();
    let sxy: f64 = k
        .iter()
        .zip(c)
        .map(|(&x, &y)| (x as f64 - km) * (y - cm))
        .sum();
    let row = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    let base = cm - row * km;
    if base >= 1.0 {
        return (base, row);
    }
    let skk: f64 = k.iter().map(|&x| (x as f64).powi(2)).sum();
    let skc: f64 = k.iter().zip(c).map(|(&x, &y)| x as f64 * (y - 1.0)).sum();
    (1.0, if skk > 0.0 { (skc / skk).max(0.0) } else { 0.0 })
}

#[cfg(test)]
mod tests {
    use super::fit_verify_cost;

    #[test]
    fn verify_cost_fit_is_least_squares_with_its_bounds() {
        // Exactly linear: 1.5 + 0.1 k.
        let (b, r) = fit_verify_cost(&[1, 2, 4, 8], &[1.6, 1.7, 1.9, 2.3]);
        assert!((b - 1.5).abs() < 1e-9 && (r - 0.1).abs() < 1e-9, "{b} {r}");
        // Noisy: the least-squares line, not the two end points.
        // (k mean 3.75, c mean 2.15, Sxy 2.95, Sxx 28.75.)
        let (b, r) = fit_verify_cost(&[1, 2, 4, 8], &[2.0, 1.8, 2.2, 2.6]);
        assert!((r - 2.95 / 28.75).abs() < 1e-9, "{r}");
        assert!((b - (2.15 - 2.95 / 28.75 * 3.75)).abs() < 1e-9, "{b}");
        // Costs falling with k: no negative row cost (the base is then the mean); a base under
        // 1 is raised to 1.
        let (b, r) = fit_verify_cost(&[1, 2, 4, 8], &[1.3, 1.2, 1.1, 1.0]);
        assert!((b - 1.15).abs() < 1e-9 && r == 0.0, "{b} {r}");
        // (Σ k (c − 1) = −0.5 − 0.8 − 0.8 + 1.6 = −0.5 < 0: row 0 too; a steeper one is
        // refitted through base 1.)
        assert_eq!(
            fit_verify_cost(&[1, 2, 4, 8], &[0.5, 0.6, 0.8, 1.2]),
            (1.0, 0.0)
        );
        let (b, r) = fit_verify_cost(&[1, 2, 4, 8], &[0.9, 1.4, 2.2, 3.8]);
        let want = (-0.1 + 2.0 * 0.4 + 4.0 * 1.2 + 8.0 * 2.8) / 85.0;
        assert!(b == 1.0 && (r - want).abs() < 1e-9, "{b} {r} {want}");
    }
}
