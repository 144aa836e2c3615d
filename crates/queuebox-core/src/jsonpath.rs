//! Definite JSONPaths (config.md CFG-24): `$` followed by `.name`, `['name']`, `["name"]` or
//! `[n]` steps, each reaching at most one value.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonPathStep {
    Key(String),
    Index(usize),
}

/// A parsed definite JSONPath.
#[derive(Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    steps: Vec<JsonPathStep>,
}

/// Why a text is not a definite JSONPath.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPathError {
    /// `..`, `*`, filters, slices, unions and negative positions can reach several values.
    #[error("not a definite path: {0}")]
    NotDefinite(String),
    #[error("not a JSONPath: {0}; write $ followed by .name, ['name'] or [n] steps")]
    Invalid(String),
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<Self, JsonPathError> {
        let not_definite = || JsonPathError::NotDefinite(text.to_owned());
        let invalid = || JsonPathError::Invalid(text.to_owned());
        let Some(mut rest) = text.strip_prefix('$') else {
            return Err(invalid());
        };
        let mut steps = Vec::new();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('.') {
                if after.starts_with('.') {
                    return Err(not_definite());
                }
                let end = after.find(['.', '[']).unwrap_or(after.len());
                let name = &after[..end];
                if name == "*" {
                    return Err(not_definite());
                }
                if name.is_empty() || !name.chars().all(is_name_char) {
                    return Err(invalid());
                }
                steps.push(JsonPathStep::Key(name.to_owned()));
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let (step, remaining) = parse_bracket(after).ok_or_else(|| {
                    if after.starts_with(['*', '?', ':', '-'])
                        || after
                            .split(']')
                            .next()
                            .is_some_and(|s| s.contains([',', ':']))
                    {
                        not_definite()
                    } else {
                        invalid()
                    }
                })?;
                steps.push(step);
                rest = remaining;
            } else {
                return Err(invalid());
            }
        }
        Ok(Self {
            text: text.to_owned(),
            steps,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn steps(&self) -> &[JsonPathStep] {
        &self.steps
    }

    /// The one value the path reaches, if any.
    pub fn get<'v>(&self, value: &'v serde_json::Value) -> Option<&'v serde_json::Value> {
        let mut current = value;
        for step in &self.steps {
            current = match step {
                JsonPathStep::Key(key) => current.as_object()?.get(key)?,
                JsonPathStep::Index(i) => current.as_array()?.get(*i)?,
            };
        }
        Some(current)
    }
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '$'
}

/// Parses the inside of `[...]` up to and including `]`: a quoted name or a position.
fn parse_bracket(after: &str) -> Option<(JsonPathStep, &str)> {
    if let Some(quote) = after.chars().next().filter(|c| *c == '\'' || *c == '"') {
        let body = &after[1..];
        let close = body.find(quote)?;
        let name = &body[..close];
        let remaining = body[close + 1..].strip_prefix(']')?;
        return Some((JsonPathStep::Key(name.to_owned()), remaining));
    }
    let close = after.find(']')?;
    let digits = &after[..close];
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let index = digits.parse::<usize>().ok()?;
    Some((JsonPathStep::Index(index), &after[close + 1..]))
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonPath({:?})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cfg_24_definite_steps_parse() {
        let p = JsonPath::parse("$.a['b c'][\"d\"][2].e_f").unwrap();
        assert_eq!(
            p.steps(),
            &[
                JsonPathStep::Key("a".into()),
                JsonPathStep::Key("b c".into()),
                JsonPathStep::Key("d".into()),
                JsonPathStep::Index(2),
                JsonPathStep::Key("e_f".into()),
            ]
        );
        assert!(JsonPath::parse("$").unwrap().steps().is_empty());
    }

    #[test]
    fn cfg_114_descendant_wildcard_filter_slice_union_are_not_definite() {
        assert_eq!(
            JsonPath::parse("$..id").unwrap_err().to_string(),
            "not a definite path: $..id"
        );
        for text in [
            "$.*",
            "$[*]",
            "$[?(@.a)]",
            "$[0:2]",
            "$[0,1]",
            "$['a','b']",
            "$[-1]",
        ] {
            assert!(
                matches!(JsonPath::parse(text), Err(JsonPathError::NotDefinite(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn cfg_24_malformed_paths_are_errors() {
        for text in ["id", "", "$.", "$[", "$['a'", "$.a b", "$x"] {
            assert!(JsonPath::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn jsonpath_get_reaches_one_value() {
        let v = json!({"a": {"list": [10, {"id": "x"}]}, "b c": 1});
        assert_eq!(
            JsonPath::parse("$.a.list[1].id").unwrap().get(&v),
            Some(&json!("x"))
        );
        assert_eq!(
            JsonPath::parse("$['b c']").unwrap().get(&v),
            Some(&json!(1))
        );
        assert_eq!(JsonPath::parse("$.a.list[5]").unwrap().get(&v), None);
        assert_eq!(JsonPath::parse("$.a.list.id").unwrap().get(&v), None);
        assert_eq!(JsonPath::parse("$").unwrap().get(&v), Some(&v));
    }
}
