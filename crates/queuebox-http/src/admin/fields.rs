//! The fields of one admin request, from its query string or its JSON body (ADM-6): every
//! field is named before any is read, so an unknown one is refused before it could widen an
//! operation; lists are repeated or comma-separated in a query and JSON arrays in a body.

use std::time::SystemTime;

use serde_json::Value;

use super::error::AdminError;
use super::time::parse_rfc3339;

#[derive(Debug)]
enum Raw {
    /// Every value of a repeated query parameter, in order.
    Query(Vec<String>),
    Json(Value),
}

/// The fields of one request, in the order they arrived.
#[derive(Debug, Default)]
pub struct Fields {
    fields: Vec<(String, Raw)>,
}

impl Fields {
    /// A query string (without the `?`), percent- and plus-decoded.
    pub fn from_query(query: Option<&str>) -> Self {
        let mut fields: Vec<(String, Raw)> = Vec::new();
        for (name, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match fields.iter_mut().find(|(n, _)| *n == name) {
                Some((_, Raw::Query(values))) => values.push(value.into_owned()),
                _ => fields.push((name.into_owned(), Raw::Query(vec![value.into_owned()]))),
            }
        }
        Self { fields }
    }

    /// A body that must be one JSON object, whatever the `Content-Type`.
    pub fn from_body(body: &[u8]) -> Result<Self, AdminError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|err| AdminError::invalid(format!("the body is not JSON ({err})")))?;
        Self::from_json(value)
    }

    pub fn from_json(value: Value) -> Result<Self, AdminError> {
        let Value::Object(map) = value else {
            return Err(AdminError::invalid("the body must be a JSON object"));
        };
        Ok(Self {
            fields: map.into_iter().map(|(k, v)| (k, Raw::Json(v))).collect(),
        })
    }

    /// ADM-6: the first field that is not in `known`.
    pub fn only(&self, known: &[&str]) -> Result<(), AdminError> {
        match self
            .fields
            .iter()
            .find(|(n, _)| !known.contains(&n.as_str()))
        {
            Some((name, _)) => Err(AdminError::bad_request(format!("Unknown field: {name}"))),
            None => Ok(()),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.fields.iter().any(|(n, _)| n == name)
    }

    fn raw(&self, name: &str) -> Option<&Raw> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, r)| r)
    }

    /// A JSON value as given (bodies only; a query value is a string).
    pub fn value(&self, name: &str) -> Option<Value> {
        match self.raw(name)? {
            Raw::Json(v) => Some(v.clone()),
            Raw::Query(values) => values.last().cloned().map(Value::String),
        }
    }

    pub fn string(&self, name: &str) -> Result<Option<String>, AdminError> {
        match self.raw(name) {
            None => Ok(None),
            Some(Raw::Query(values)) if values.len() == 1 => Ok(values.first().cloned()),
            Some(Raw::Query(_)) => Err(AdminError::invalid(format!("{name} is given twice"))),
            Some(Raw::Json(Value::String(s))) => Ok(Some(s.clone())),
            Some(Raw::Json(Value::Null)) => Ok(None),
            Some(Raw::Json(_)) => Err(AdminError::invalid(format!("{name} must be a string"))),
        }
    }

    /// A list: repeated and/or comma-separated in a query, an array of strings in a body.
    pub fn list(&self, name: &str) -> Result<Option<Vec<String>>, AdminError> {
        match self.raw(name) {
            None => Ok(None),
            Some(Raw::Query(values)) => Ok(Some(
                values
                    .iter()
                    .flat_map(|v| v.split(','))
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
                    .collect(),
            )),
            Some(Raw::Json(Value::Null)) => Ok(None),
            Some(Raw::Json(Value::Array(items))) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(AdminError::invalid(format!(
                        "{name} must be a list of strings"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(Raw::Json(_)) => Err(AdminError::invalid(format!(
                "{name} must be a list of strings"
            ))),
        }
    }

    /// A whole number; `None` when absent.
    pub fn integer(&self, name: &str) -> Result<Option<i64>, AdminError> {
        let not_a_number = || AdminError::invalid(format!("{name} must be a whole number"));
        match self.raw(name) {
            None => Ok(None),
            Some(Raw::Query(values)) => match values.as_slice() {
                [one] => one.trim().parse().map(Some).map_err(|_| not_a_number()),
                _ => Err(AdminError::invalid(format!("{name} is given twice"))),
            },
            Some(Raw::Json(Value::Null)) => Ok(None),
            Some(Raw::Json(Value::Number(n))) => n.as_i64().map(Some).ok_or_else(not_a_number),
            Some(Raw::Json(_)) => Err(not_a_number()),
        }
    }

    /// ADM-7: an RFC 3339 instant with an offset.
    pub fn instant(&self, name: &str) -> Result<Option<SystemTime>, AdminError> {
        match self.string(name)? {
            None => Ok(None),
            Some(text) => parse_rfc3339(&text).map(Some).ok_or_else(|| {
                AdminError::invalid(format!(
                    "{name} must be an RFC 3339 instant with an offset, such as 2026-11-30T18:00:00Z"
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adm_6_lists_repeat_or_split_on_commas_and_unknown_fields_are_named() {
        let fields = Fields::from_query(Some("topics=a&topics=b,c&limit=5&x%20y=1"));
        assert_eq!(
            fields.list("topics").unwrap(),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(fields.integer("limit").unwrap(), Some(5));
        let err = fields.only(&["topics", "limit"]).unwrap_err();
        assert_eq!(err.message, "Unknown field: x y");
        let body = Fields::from_body(br#"{"topics":["a"],"limt":3}"#).unwrap();
        assert_eq!(
            body.only(&["topics", "limit"]).unwrap_err().message,
            "Unknown field: limt"
        );
        assert!(Fields::from_body(b"[1]").is_err());
        assert!(Fields::from_body(b"{").is_err());
    }
}
