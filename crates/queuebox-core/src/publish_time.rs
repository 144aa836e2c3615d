//! Publish times (inbox.md INB-43): an ISO-8601 date-time with an offset or `Z`, or an integer
//! (a JSON number or decimal text) that counts seconds since 1970 below 100000000000 and
//! milliseconds from there on. Anything else is no publish time.

use serde_json::Value;

/// Below this an integer counts in seconds, from it on in milliseconds (INB-43).
const MILLIS_FROM: i64 = 100_000_000_000;

/// The publish time of a JSON value a path reached, in ms since 1970: a string by
/// [`publish_time_of_text`], a whole number as seconds or milliseconds; `None` for anything
/// else.
pub fn publish_time_of_value(value: &Value) -> Option<i64> {
    match value {
        Value::String(text) => publish_time_of_text(text),
        Value::Number(number) => whole_number(number).and_then(to_epoch_ms),
        _ => None,
    }
}

/// INB-43: decimal integer text or an ISO-8601 date-time with an offset or `Z`.
pub fn publish_time_of_text(text: &str) -> Option<i64> {
    let text = text.trim();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok().and_then(to_epoch_ms);
    }
    parse_iso8601(text)
}

/// A JSON number that is a whole number (`1790000000`, also `1790000000.0`).
fn whole_number(number: &serde_json::Number) -> Option<i64> {
    if let Some(value) = number.as_i64() {
        return Some(value);
    }
    let value = number.as_f64()?;
    // Whole and well inside i64, so the conversion is exact.
    (value.fract() == 0.0 && value.abs() < 9.0e18).then_some(value as i64)
}

fn to_epoch_ms(value: i64) -> Option<i64> {
    if value < MILLIS_FROM {
        value.checked_mul(1000)
    } else {
        Some(value)
    }
}

/// `YYYY-MM-DDTHH:MM[:SS[.fff…]]` followed by `Z` or `±HH:MM` (also `±HHMM`, `±HH`); `T` may
/// be lower case or a space. Milliseconds since 1970, UTC.
pub fn parse_iso8601(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        part.iter().all(u8::is_ascii_digit).then_some(())?;
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 16 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute) = (num(11..13)?, num(14..16)?);
    if b[13] != b':' || !(1..=12).contains(&month) || day < 1 || day > days_in(year, month) {
        return None;
    }
    let mut pos = 16;
    let mut second = 0;
    let mut millis = 0;
    if b.get(pos) == Some(&b':') {
        second = num(pos + 1..pos + 3)?;
        pos += 3;
        if matches!(b.get(pos), Some(b'.' | b',')) {
            let start = pos + 1;
            let mut end = start;
            while b.get(end).is_some_and(u8::is_ascii_digit) {
                end += 1;
            }
            if end == start {
                return None;
            }
            // Milliseconds are enough for a publish time; further digits are cut.
            let padded = format!("{:0<3}", &text[start..end.min(start + 3)]);
            millis = padded.parse().ok()?;
            pos = end;
        }
    }
    // A leap second (60) is accepted and counts as the next second.
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let offset_minutes = parse_offset(b.get(pos..)?)?;
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// `Z`, `±HH:MM`, `±HHMM` or `±HH`: minutes east of UTC.
fn parse_offset(rest: &[u8]) -> Option<i64> {
    let digit_pair = |pair: &[u8]| -> Option<i64> {
        pair.iter().all(u8::is_ascii_digit).then_some(())?;
        Some(i64::from(pair[0] - b'0') * 10 + i64::from(pair[1] - b'0'))
    };
    let (sign, digits) = match rest {
        [b'Z' | b'z'] => return Some(0),
        [b'+', digits @ ..] => (1, digits),
        [b'-', digits @ ..] => (-1, digits),
        _ => return None,
    };
    let (hours, minutes) = match digits {
        [h1, h2] => (digit_pair(&[*h1, *h2])?, 0),
        [h1, h2, b':', m1, m2] | [h1, h2, m1, m2] => {
            (digit_pair(&[*h1, *h2])?, digit_pair(&[*m1, *m2])?)
        }
        _ => return None,
    };
    (hours <= 23 && minutes <= 59).then_some(sign * (hours * 60 + minutes))
}

fn days_in(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inb_43_valid_publish_times() {
        let t = 1_790_000_000_000;
        assert_eq!(publish_time_of_text("1790000000000"), Some(t));
        assert_eq!(publish_time_of_text(" 1790000000 "), Some(t));
        assert_eq!(
            publish_time_of_text("99999999999"),
            Some(99_999_999_999_000)
        );
        assert_eq!(publish_time_of_text("100000000000"), Some(100_000_000_000));
        assert_eq!(
            publish_time_of_text("2026-09-21T10:00:00Z"),
            Some(1_789_984_800_000)
        );
        assert_eq!(
            publish_time_of_text("2026-09-21T12:00:00+02:00"),
            Some(1_789_984_800_000)
        );
        assert_eq!(
            publish_time_of_text("2026-09-21t05:30:00.5-0430"),
            Some(1_789_984_800_500)
        );
        assert_eq!(
            publish_time_of_text("2026-09-21 10:00Z"),
            Some(1_789_984_800_000)
        );
        assert_eq!(
            publish_time_of_text("1970-01-01T00:00:00.123456Z"),
            Some(123)
        );
        assert_eq!(
            publish_time_of_text("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
    }

    #[test]
    fn inb_43_invalid_publish_times() {
        for text in [
            "yesterday",
            "",
            "2026-09-21T10:00:00",
            "2026-09-21",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-09-21T24:00:00Z",
            "2026-09-21T10:00:00+2",
            "2026-09-21T10:00:00.Z",
            "1.5",
            "99999999999999999999",
        ] {
            assert_eq!(publish_time_of_text(text), None, "{text}");
        }
    }

    #[test]
    fn inb_43_json_numbers() {
        let n = |v: Value| match v {
            Value::Number(n) => whole_number(&n).and_then(to_epoch_ms),
            _ => unreachable!(),
        };
        assert_eq!(n(serde_json::json!(1_790_000_000)), Some(1_790_000_000_000));
        assert_eq!(
            n(serde_json::json!(1_790_000_000.0)),
            Some(1_790_000_000_000)
        );
        assert_eq!(n(serde_json::json!(1.5)), None);
    }
}
