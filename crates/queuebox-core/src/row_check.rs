//! The checks on a claimed outbox row before it is routed (outbox.md OUT-7): the payload must be
//! JSON and `headers` a JSON object, whose values become header text.

/// Why a claimed row goes `dead` without a delivery. `Display` is the exact `last_error` text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowCheckError {
    #[error("The payload is not valid JSON.")]
    PayloadNotJson,
    #[error("The headers column is not a JSON object.")]
    HeadersNotObject,
}

/// Checks the payload text and turns the `headers` text into name/value pairs, in stored order:
/// a string is used as is, a number or boolean becomes its JSON text, an object or list its
/// compact JSON text, and `null` is dropped.
pub fn check_row(payload: &str, headers: &str) -> Result<Vec<(String, String)>, RowCheckError> {
    if serde_json::from_str::<serde::de::IgnoredAny>(payload).is_err() {
        return Err(RowCheckError::PayloadNotJson);
    }
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(headers)
    else {
        return Err(RowCheckError::HeadersNotObject);
    };
    Ok(map
        .into_iter()
        .filter_map(|(name, value)| {
            let text = match value {
                serde_json::Value::Null => return None,
                serde_json::Value::String(text) => text,
                other => other.to_string(),
            };
            Some((name, text))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_7_header_values_become_text() {
        let headers = check_row(
            r#"{"a":1}"#,
            r#"{"x-s":"v","x-n":42,"x-b":true,"x-null":null,"x-o":{"k": [1, 2]}}"#,
        )
        .unwrap();
        let find = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(find("x-s"), Some("v"));
        assert_eq!(find("x-n"), Some("42"));
        assert_eq!(find("x-b"), Some("true"));
        assert_eq!(find("x-null"), None);
        assert_eq!(find("x-o"), Some(r#"{"k":[1,2]}"#));
    }

    #[test]
    fn out_7_invalid_payload_or_headers_have_their_reason() {
        assert_eq!(
            check_row("{not json", "{}"),
            Err(RowCheckError::PayloadNotJson)
        );
        assert_eq!(check_row("{}", "[1]"), Err(RowCheckError::HeadersNotObject));
        assert_eq!(
            RowCheckError::PayloadNotJson.to_string(),
            "The payload is not valid JSON."
        );
        assert_eq!(
            RowCheckError::HeadersNotObject.to_string(),
            "The headers column is not a JSON object."
        );
    }
}
