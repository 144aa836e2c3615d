//! UTC times as text: SQLite's fixed form `YYYY-MM-DDTHH:MM:SS.SSSZ` (PULL-6, schema.md SCH-3),
//! read from claimed rows and written when a time is bound on SQLite.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (also with a space for `T`, and without the `Z`, as
/// MySQL prints a `DATETIME(6)` in UTC). `None` for any other text.
pub(crate) fn parse_utc(text: &str) -> Option<SystemTime> {
    let t = text.strip_suffix('Z').unwrap_or(text);
    let b = t.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let s = t.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut nanos = 0u64;
    if b.len() > 19 {
        let frac = t.get(20..)?;
        if b[19] != b'.' || frac.is_empty() || frac.len() > 9 {
            return None;
        }
        nanos = num(20..b.len())? * 10u64.pow(9 - frac.len() as u32);
    }
    let days = days_from_civil(year as i64, month as i64, day as i64);
    let secs = u64::try_from(days).ok()? * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_nanos(nanos))
}

/// Formats a time in the fixed form, milliseconds truncated.
#[cfg(any(feature = "sqlite", feature = "mysql", test))]
pub(crate) fn format_utc(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(any(feature = "sqlite", feature = "mysql", test))]
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_form_round_trips() {
        let text = "2026-02-28T23:59:59.123Z";
        let t = parse_utc(text).unwrap();
        assert_eq!(format_utc(t), text);
        assert_eq!(
            parse_utc("1970-01-01T00:00:01.500Z"),
            Some(UNIX_EPOCH + Duration::from_millis(1_500))
        );
        assert_eq!(
            parse_utc("2000-03-01 00:00:00.000001"),
            Some(UNIX_EPOCH + Duration::from_secs(951_868_800) + Duration::from_micros(1))
        );
    }

    #[test]
    fn other_texts_are_refused() {
        for bad in [
            "",
            "2026-13-01T00:00:00.000Z",
            "2026-01-01",
            "x026-01-01T00:00:00Z",
            "2026-01-01T00:00:00,1Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }
}
