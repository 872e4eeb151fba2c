//! Calendar dates of Unix times, for provenance fields and board conditions.

/// YYYY-MM-DD (UTC) of `secs` seconds since the Unix epoch (Howard Hinnant's `civil_from_days`,
/// "chrono-compatible low-level date algorithms").
pub fn utc_date(secs: i64) -> String {
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Today's date, UTC.
pub fn today_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    utc_date(secs)
}

#[cfg(test)]
mod tests {
    use super::utc_date;

    #[test]
    fn dates_of_known_times() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_428_800), "2026-12-05");
        assert_eq!(utc_date(-86_400), "1969-12-31");
    }
}
