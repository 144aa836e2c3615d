//! The list cursor (ADM-11): base64url (no padding) of the last row's `created_at` in
//! microseconds since the epoch, a `.`, and its id.

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use queuebox_store::ListCursor;
use uuid::Uuid;

pub fn encode(cursor: &ListCursor) -> String {
    let micros = cursor
        .created_at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    URL_SAFE_NO_PAD.encode(format!("{micros}.{}", cursor.id))
}

pub fn decode(text: &str) -> Option<ListCursor> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (micros, id) = text.split_once('.')?;
    if !micros.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: u64 = micros.parse().ok()?;
    Some(ListCursor {
        created_at: UNIX_EPOCH + Duration::from_micros(micros),
        id: Uuid::try_parse(id).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adm_11_a_cursor_round_trips_and_garbage_is_refused() {
        let cursor = ListCursor {
            created_at: UNIX_EPOCH + Duration::from_micros(1_764_000_000_123_456),
            id: Uuid::new_v4(),
        };
        assert_eq!(decode(&encode(&cursor)), Some(cursor));
        for bad in ["", "!!", "bm9wZQ", &URL_SAFE_NO_PAD.encode("12.not-a-uuid")] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
