//! A key expression's result as a candidate value of its chain (TRF-28): strings trimmed,
//! numbers as decimal text without a fraction when whole, booleans as words; anything else is no
//! value and the chain goes on.

use serde_json::Value;

/// Longest value, in characters (TRF-28; INB-37 counts UTF-16 code units).
const MAX_UTF16_UNITS: usize = 255;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyCandidate {
    Value(String),
    /// No value: the chain continues.
    None,
    /// Longer than 255 characters: no value, with a warn line naming the step.
    TooLong,
}

pub fn key_value(result: &Value) -> KeyCandidate {
    let text = match result {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => number_text(n),
        Value::Bool(b) => b.to_string(),
        Value::Null | Value::Array(_) | Value::Object(_) => return KeyCandidate::None,
    };
    if text.is_empty() {
        KeyCandidate::None
    } else if text.encode_utf16().count() > MAX_UTF16_UNITS {
        KeyCandidate::TooLong
    } else {
        KeyCandidate::Value(text)
    }
}

/// `2.0` → `2`, `1e3` → `1000`; other numbers in their shortest round-trip form.
fn number_text(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{f:.0}")
    } else {
        f.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trf_28_key_results_normalize() {
        assert_eq!(key_value(&json!("  a1 ")), KeyCandidate::Value("a1".into()));
        assert_eq!(key_value(&json!("   ")), KeyCandidate::None);
        assert_eq!(key_value(&json!(2.0)), KeyCandidate::Value("2".into()));
        assert_eq!(key_value(&json!(1e3)), KeyCandidate::Value("1000".into()));
        assert_eq!(key_value(&json!(42)), KeyCandidate::Value("42".into()));
        assert_eq!(key_value(&json!(1.5)), KeyCandidate::Value("1.5".into()));
        assert_eq!(key_value(&json!(true)), KeyCandidate::Value("true".into()));
        assert_eq!(key_value(&json!({"a": 1})), KeyCandidate::None);
        assert_eq!(key_value(&json!([1, 2])), KeyCandidate::None);
        assert_eq!(key_value(&json!(null)), KeyCandidate::None);
        assert_eq!(key_value(&json!("x".repeat(256))), KeyCandidate::TooLong);
        assert_eq!(
            key_value(&json!("x".repeat(255))),
            KeyCandidate::Value("x".repeat(255))
        );
    }
}
