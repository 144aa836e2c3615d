//! Reading SQLite values into the store's types: UUIDs stored as lower-case text (SCH-3),
//! times in the fixed text form, and the JSON arrays that carry a batch into one statement.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use queuebox_store::{Claim, ClaimToken, RowId};
use rusqlite::Row;
use rusqlite::types::Type;
use uuid::Uuid;

use crate::time;

fn conversion(index: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, Type::Text, what.into())
}

pub(crate) fn uuid(row: &Row<'_>, index: usize) -> rusqlite::Result<Uuid> {
    let text: String = row.get(index)?;
    Uuid::parse_str(&text).map_err(|e| conversion(index, format!("not a UUID ({e}): {text}")))
}

pub(crate) fn time_at(row: &Row<'_>, index: usize) -> rusqlite::Result<SystemTime> {
    let text: String = row.get(index)?;
    time::system_time(&text)
        .ok_or_else(|| conversion(index, format!("not a time in the fixed form: {text}")))
}

pub(crate) fn opt_time_at(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<SystemTime>> {
    let text: Option<String> = row.get(index)?;
    text.map(|t| {
        time::system_time(&t)
            .ok_or_else(|| conversion(index, format!("not a time in the fixed form: {t}")))
    })
    .transpose()
}

/// Milliseconds of a duration for a `printf('%+.3f seconds', ms / 1000.0)` modifier.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The claims of a fenced batch as one JSON array of `{"id", "token"}`.
pub(crate) fn claims_json(claims: &[Claim]) -> String {
    serde_json::Value::Array(
        claims
            .iter()
            .map(|c| serde_json::json!({"id": c.id.0.to_string(), "token": c.token.0.to_string()}))
            .collect(),
    )
    .to_string()
}

/// Splits a batch so that no part names one row twice. A fenced UPDATE ... FROM uses one
/// joined input per row, and after the write the token it matched is gone, so the answer
/// (the row ids) tells which claim was written only when each id appears once. The engine
/// never sends an id twice; a stale claim beside the live one of the same row still gets the
/// right answer this way.
pub(crate) fn unique_id_parts<T: Clone>(items: &[T], claim: impl Fn(&T) -> Claim) -> Vec<Vec<T>> {
    let mut parts: Vec<Vec<T>> = Vec::new();
    let mut ids: Vec<HashSet<Uuid>> = Vec::new();
    let mut seen = HashSet::new();
    for item in items {
        let c = claim(item);
        if !seen.insert(c) {
            continue; // the same claim twice: its first write is kept
        }
        let place = ids.iter().position(|set| !set.contains(&c.id.0));
        let place = place.unwrap_or_else(|| {
            ids.push(HashSet::new());
            parts.push(Vec::new());
            ids.len() - 1
        });
        ids[place].insert(c.id.0);
        parts[place].push(item.clone());
    }
    parts
}

/// The claims of `part` whose ids the fenced write returned.
pub(crate) fn written(part: &[Claim], returned: &[Uuid]) -> Vec<Claim> {
    let by_id: HashMap<Uuid, Claim> = part.iter().map(|c| (c.id.0, *c)).collect();
    returned
        .iter()
        .filter_map(|id| by_id.get(id).copied())
        .collect()
}

pub(crate) fn claim(id: Uuid, token: Uuid) -> Claim {
    Claim {
        id: RowId(id),
        token: ClaimToken(token),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_named_twice_goes_to_a_second_part() {
        let a = claim(Uuid::new_v4(), Uuid::new_v4());
        let a_stale = claim(a.id.0, Uuid::new_v4());
        let b = claim(Uuid::new_v4(), Uuid::new_v4());
        let parts = unique_id_parts(&[a, b, a_stale, a], |c| *c);
        assert_eq!(parts, vec![vec![a, b], vec![a_stale]]);
    }
}
