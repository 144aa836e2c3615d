//! SQLite's time text form (schema.md SCH-3): UTC as `YYYY-MM-DDTHH:MM:SS.SSSZ`, 24 characters,
//! so that text order is time order. The statements compute every time with `strftime`; the
//! store only turns the texts it reads into `SystemTime` and the times of the admin filters
//! into texts.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn number(text: &str, from: usize, len: usize) -> Option<i64> {
    let part = text.get(from..from + len)?;
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// Milliseconds since 1970 of a time in the fixed form; `None` for any other text.
pub(crate) fn parse_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 24
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'.'
        || b[23] != b'Z'
    {
        return None;
    }
    let (year, month, day) = (
        number(text, 0, 4)?,
        number(text, 5, 2)?,
        number(text, 8, 2)?,
    );
    let (hour, minute, second) = (
        number(text, 11, 2)?,
        number(text, 14, 2)?,
        number(text, 17, 2)?,
    );
    let millis = number(text, 20, 3)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some((((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + millis)
}

/// The fixed form of a time in milliseconds since 1970.
pub(crate) fn format_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// A stored time as a `SystemTime`.
pub(crate) fn system_time(text: &str) -> Option<SystemTime> {
    let ms = parse_ms(text)?;
    let ms = u64::try_from(ms).ok()?;
    Some(UNIX_EPOCH + Duration::from_millis(ms))
}

fn micros_since_epoch(time: SystemTime) -> i128 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_micros()).unwrap_or(i128::MAX),
        Err(before) => -i128::try_from(before.duration().as_micros()).unwrap_or(i128::MAX),
    }
}

/// The text to compare `column > text` with, for a filter "after `time`": stored times are
/// whole milliseconds, so a stored `t` is after `time` exactly when it is after `time`
/// rounded down.
pub(crate) fn text_for_after(time: SystemTime) -> String {
    let ms = micros_since_epoch(time).div_euclid(1000);
    format_ms(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// The text to compare `column < text` with, for a filter "before `time`": rounded up, for the
/// same reason.
pub(crate) fn text_for_before(time: SystemTime) -> String {
    let micros = micros_since_epoch(time);
    let ms = micros.div_euclid(1000) + i128::from(micros.rem_euclid(1000) != 0);
    format_ms(i64::try_from(ms).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sch_3_fixed_form_round_trips() {
        for text in [
            "1970-01-01T00:00:00.000Z",
            "2024-02-29T23:59:59.999Z",
            "2026-12-02T01:55:35.123Z",
            "2000-03-01T00:00:00.001Z",
        ] {
            let ms = parse_ms(text).expect(text);
            assert_eq!(format_ms(ms), text);
        }
        assert_eq!(parse_ms("1970-01-01T00:00:01.500Z"), Some(1500));
        assert_eq!(parse_ms("2026-12-02 01:55:35.123"), None);
        assert_eq!(parse_ms("2026-12-02T01:55:35Z"), None);
        assert_eq!(parse_ms("2026-13-02T01:55:35.123Z"), None);
    }

    #[test]
    fn sch_3_text_order_is_time_order() {
        let times = [0_i64, 999, 1000, 86_399_999, 86_400_000, 1_700_000_000_123];
        let texts: Vec<String> = times.iter().map(|&t| format_ms(t)).collect();
        let mut sorted = texts.clone();
        sorted.sort();
        assert_eq!(texts, sorted);
    }

    #[test]
    fn filter_bounds_round_toward_the_stored_milliseconds() {
        let t = UNIX_EPOCH + Duration::from_micros(1_500_500);
        assert_eq!(text_for_after(t), "1970-01-01T00:00:01.500Z");
        assert_eq!(text_for_before(t), "1970-01-01T00:00:01.501Z");
        let whole = UNIX_EPOCH + Duration::from_millis(1500);
        assert_eq!(text_for_after(whole), text_for_before(whole));
    }
}
