//! Values between Rust and the statements: ids as lower-case hyphenated text (SCH-3), times
//! as microseconds since 1970 in UTC (the files convert with TIMESTAMPADD / TIMESTAMPDIFF, so
//! no date type crosses the wire), durations as milliseconds, batches as one JSON array, and
//! reading a column of a returned row.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mysql_async::prelude::FromValue;
use mysql_async::{Row, Value};
use queuebox_store::{Claim, StoreAction, StoreError};
use uuid::Uuid;

/// Milliseconds of a duration; past `i64::MAX` saturates, and MySQL refuses the interval.
pub(crate) fn millis(duration: Duration) -> Value {
    Value::Int(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
}

/// An id as the text the CHAR(36) columns hold.
pub(crate) fn id(id: Uuid) -> Value {
    Value::from(id.hyphenated().to_string())
}

/// A time as microseconds since 1970 (UTC); before 1970 is negative.
pub(crate) fn micros(at: SystemTime) -> i64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// The time of a microsecond count.
pub(crate) fn time_of(us: i64) -> SystemTime {
    let magnitude = Duration::from_micros(us.unsigned_abs());
    if us >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// An optional text as a value (NULL for `None`).
pub(crate) fn text(value: Option<&str>) -> Value {
    value.map_or(Value::NULL, Value::from)
}

/// A JSON array text as a value.
pub(crate) fn json(value: &serde_json::Value) -> Value {
    Value::from(value.to_string())
}

/// `[{"id", "token"}]` of some claims.
pub(crate) fn claims_json(claims: &[Claim]) -> serde_json::Value {
    serde_json::Value::Array(
        claims
            .iter()
            .map(|c| {
                serde_json::json!({
                    "id": c.id.0.hyphenated().to_string(),
                    "token": c.token.0.hyphenated().to_string(),
                })
            })
            .collect(),
    )
}

/// `["id", ...]` of some ids.
pub(crate) fn ids_json<'a>(ids: impl IntoIterator<Item = &'a Uuid>) -> serde_json::Value {
    serde_json::Value::Array(
        ids.into_iter()
            .map(|id| serde_json::Value::from(id.hyphenated().to_string()))
            .collect(),
    )
}

/// An optional list filter as JSON (NULL when absent).
pub(crate) fn list<T: AsRef<str>>(items: Option<&[T]>) -> Value {
    match items {
        None => Value::NULL,
        Some(items) => json(&serde_json::Value::Array(
            items
                .iter()
                .map(|s| serde_json::Value::from(s.as_ref()))
                .collect(),
        )),
    }
}

/// Reading the columns of one returned row, for one operation.
pub(crate) struct Reader<'a> {
    pub(crate) row: &'a Row,
    pub(crate) during: &'static str,
}

impl Reader<'_> {
    fn bad(&self, what: String) -> StoreError {
        StoreError::Database {
            action: StoreAction::UseDatabase,
            during: self.during,
            reason: what,
        }
    }

    /// Column `i` as `T` (an `Option` for a nullable column).
    pub(crate) fn get<T: FromValue>(&self, i: usize) -> Result<T, StoreError> {
        match self.row.get_opt::<T, usize>(i) {
            Some(Ok(value)) => Ok(value),
            Some(Err(err)) => Err(self.bad(format!("column {i} has an unexpected value: {err}"))),
            None => Err(self.bad(format!("the answer has no column {i}"))),
        }
    }

    pub(crate) fn uuid(&self, i: usize) -> Result<Uuid, StoreError> {
        let text: String = self.get(i)?;
        Uuid::parse_str(&text).map_err(|e| self.bad(format!("column {i} is not a UUID: {e}")))
    }

    pub(crate) fn time(&self, i: usize) -> Result<SystemTime, StoreError> {
        Ok(time_of(self.get::<i64>(i)?))
    }

    pub(crate) fn opt_time(&self, i: usize) -> Result<Option<SystemTime>, StoreError> {
        Ok(self.get::<Option<i64>>(i)?.map(time_of))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_through_microseconds() {
        let at = UNIX_EPOCH + Duration::from_micros(1_790_000_000_123_456);
        assert_eq!(time_of(micros(at)), at);
        let before = UNIX_EPOCH - Duration::from_micros(5);
        assert_eq!(micros(before), -5);
        assert_eq!(time_of(-5), before);
    }

    #[test]
    fn millis_saturates() {
        assert_eq!(millis(Duration::from_millis(300_000)), Value::Int(300_000));
        assert_eq!(millis(Duration::MAX), Value::Int(i64::MAX));
    }
}
