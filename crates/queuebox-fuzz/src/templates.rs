//! JSONPath key extraction (`idempotencyKeyPath` and friends run on a sender's JSON) and the
//! `{{ field }}` templates (rendered with a row's payload).

use queuebox_core::jsonpath::JsonPath;
use queuebox_core::template::{Template, TemplateField, TemplateFields, payload_field};

/// `<path>\n<json>`: the path is parsed; a path that parses is shown and parsed again to the
/// same path, and is looked up in the JSON document when there is one.
pub fn jsonpath(data: &[u8]) {
    let (path, document) = crate::split(data, b"\n");
    let Ok(path) = std::str::from_utf8(path) else {
        return;
    };
    let Ok(parsed) = JsonPath::parse(path) else {
        return;
    };
    let shown = parsed.to_string();
    let again = JsonPath::parse(&shown)
        .unwrap_or_else(|err| panic!("{path:?} is shown as {shown:?}, which fails: {err}"));
    assert_eq!(again.steps(), parsed.steps(), "{path:?} shown as {shown:?}");
    if let Ok(document) = serde_json::from_slice::<serde_json::Value>(document) {
        let _ = parsed.get(&document);
    }
}

/// `<template>\n<json payload>`: parsed for both kinds of template and rendered with the
/// payload's fields; a template that parses renders every literal part unchanged.
pub fn template(data: &[u8]) {
    let (text, payload) = crate::split(data, b"\n");
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let payload = serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
    for fields in [TemplateFields::Destination, TemplateFields::Source] {
        let Ok(template) = Template::parse(text, fields) else {
            continue;
        };
        let rendered = template.render("", |field| match field {
            TemplateField::Payload(path) => payload_field(&payload, path),
            _ => Some("x".to_owned()),
        });
        if template.is_literal() {
            assert_eq!(rendered, text, "a literal template renders as itself");
        }
    }
}
