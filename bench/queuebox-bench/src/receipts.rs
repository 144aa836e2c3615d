//! The receiver's records: one line per request, `message_id,received_us`, where
//! `received_us` is the wall clock in microseconds since the Unix epoch when the request's
//! headers arrived. The driver parses the file back and joins it with the outbox rows.

use std::fmt::Write as _;

use uuid::Uuid;

/// The first line of every records file.
pub const HEADER: &str = "message_id,received_us";

/// One request as the receiver saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    pub id: Uuid,
    pub received_us: i64,
}

/// The CSV text of `records` (id as the request carried it, time in µs).
pub fn to_csv(records: &[(String, i64)]) -> String {
    let mut out = String::with_capacity(HEADER.len() + 1 + records.len() * 54);
    out.push_str(HEADER);
    out.push('\n');
    for (id, at) in records {
        // A header value never holds a comma or a line break that matters here; drop them so
        // one odd request cannot shift the columns.
        let clean: String = id
            .chars()
            .filter(|c| !matches!(c, ',' | '\n' | '\r'))
            .collect();
        let _ = writeln!(out, "{clean},{at}");
    }
    out
}

/// Parses a records file. Lines whose id is not a UUID (a request without `X-Message-Id`)
/// are counted in the second value, not returned.
pub fn parse_csv(text: &str) -> Result<(Vec<Receipt>, usize), String> {
    let mut lines = text.lines();
    match lines.next() {
        Some(HEADER) => {}
        other => {
            return Err(format!(
                "the records file starts with {other:?}, not {HEADER}"
            ));
        }
    }
    let mut receipts = Vec::new();
    let mut unnamed = 0;
    for (n, line) in lines.enumerate() {
        if line.is_empty() {
            continue;
        }
        let (id, at) = line
            .rsplit_once(',')
            .ok_or_else(|| format!("line {}: no comma in {line:?}", n + 2))?;
        let received_us = at
            .parse::<i64>()
            .map_err(|e| format!("line {}: time {at:?}: {e}", n + 2))?;
        match Uuid::parse_str(id) {
            Ok(id) => receipts.push(Receipt { id, received_us }),
            Err(_) => unnamed += 1,
        }
    }
    Ok((receipts, unnamed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_ids_and_times() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let text = to_csv(&[
            (a.to_string(), 10),
            (b.to_string(), 20),
            (String::new(), 30),
        ]);
        let (receipts, unnamed) = parse_csv(&text).unwrap();
        assert_eq!(
            receipts,
            vec![
                Receipt {
                    id: a,
                    received_us: 10
                },
                Receipt {
                    id: b,
                    received_us: 20
                },
            ]
        );
        assert_eq!(unnamed, 1, "a request without an id is counted, not joined");
    }

    #[test]
    fn a_wrong_header_or_time_is_an_error() {
        assert!(parse_csv("id,at\n").is_err());
        assert!(parse_csv(&format!("{HEADER}\nabc,notanumber\n")).is_err());
        assert!(parse_csv("").is_err());
    }

    #[test]
    fn commas_in_an_id_cannot_shift_columns() {
        let text = to_csv(&[("a,b".to_owned(), 5)]);
        assert_eq!(text.lines().nth(1), Some("ab,5"));
    }
}
