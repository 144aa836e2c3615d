//! `{{ field }}` templates (destinations.md §3, transforms.md §7): parsing against the fields a
//! template kind allows, and rendering with a lookup for the field values.

use std::fmt;

/// Which names a template may use (transforms.md TRF-34).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateFields {
    /// Address and key templates of destinations and routes: `topic`, `key`, `aggregateType`,
    /// `payload.<path>`, `data.<path>`.
    Destination,
    /// The relay topic of a push source: `source`, `eventType`.
    Source,
}

impl TemplateFields {
    /// The list printed after `use` in an unknown-placeholder error.
    pub fn allowed(self) -> &'static str {
        match self {
            Self::Destination => "topic, key, aggregateType, payload.<path>, data.<path>",
            Self::Source => "source, eventType",
        }
    }
}

/// One placeholder's field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateField {
    Topic,
    Key,
    AggregateType,
    Source,
    EventType,
    /// `payload.a.b` or `data.a.b`: object keys walked through the payload.
    Payload(Vec<String>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplatePart {
    Literal(String),
    Field(TemplateField),
}

/// A parsed template; it keeps its source text for messages such as DST-18.
#[derive(Clone, PartialEq, Eq)]
pub struct Template {
    text: String,
    parts: Vec<TemplatePart>,
}

/// Why a template does not parse (transforms.md TRF-39, config.md CFG-58, CFG-109).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("has an unclosed placeholder")]
    Unclosed,
    #[error("has an empty placeholder")]
    Empty,
    #[error("has a payload placeholder without a path")]
    PayloadWithoutPath,
    #[error("unknown placeholder {{{{ {name} }}}}; use {allowed}")]
    Unknown { name: String, allowed: &'static str },
}

impl Template {
    pub fn parse(text: &str, fields: TemplateFields) -> Result<Self, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(TemplatePart::Literal(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                return Err(TemplateError::Unclosed);
            };
            let name = after[..close].trim_matches([' ', '\t']);
            parts.push(TemplatePart::Field(parse_field(name, fields)?));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(TemplatePart::Literal(rest.to_owned()));
        }
        Ok(Self {
            text: text.to_owned(),
            parts,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn parts(&self) -> &[TemplatePart] {
        &self.parts
    }

    /// Whether one of the placeholders is `field`.
    pub fn uses(&self, field: &TemplateField) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, TemplatePart::Field(f) if f == field))
    }

    /// Whether the template has no placeholder at all.
    pub fn is_literal(&self) -> bool {
        self.parts
            .iter()
            .all(|p| matches!(p, TemplatePart::Literal(_)))
    }

    /// Renders the template. `value` gives a field's text, or `None` when the field is missing;
    /// a missing field renders as `missing` (empty for address templates, the route's
    /// `routingKeyMissingFieldDefault` for key templates, TRF-34).
    pub fn render(
        &self,
        missing: &str,
        value: impl Fn(&TemplateField) -> Option<String>,
    ) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                TemplatePart::Literal(text) => out.push_str(text),
                TemplatePart::Field(field) => match value(field) {
                    Some(text) => out.push_str(&text),
                    None => out.push_str(missing),
                },
            }
        }
        out
    }
}

/// The text of a payload field (TRF-32): a string as itself, a number or boolean as its JSON
/// text, an object or array as compact JSON; `null` and an absent key are missing. Only objects
/// are walked: there is no array index.
pub fn payload_field(payload: &serde_json::Value, path: &[String]) -> Option<String> {
    let mut current = payload;
    for segment in path {
        current = current.as_object()?.get(segment)?;
    }
    match current {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn parse_field(name: &str, fields: TemplateFields) -> Result<TemplateField, TemplateError> {
    if name.is_empty() {
        return Err(TemplateError::Empty);
    }
    let unknown = || TemplateError::Unknown {
        name: name.to_owned(),
        allowed: fields.allowed(),
    };
    let field = match name {
        "topic" => TemplateField::Topic,
        "key" => TemplateField::Key,
        "aggregateType" => TemplateField::AggregateType,
        "source" => TemplateField::Source,
        "eventType" => TemplateField::EventType,
        "payload" | "data" | "payload." | "data." => {
            if fields == TemplateFields::Destination {
                return Err(TemplateError::PayloadWithoutPath);
            }
            return Err(unknown());
        }
        _ => {
            let Some(path) = name
                .strip_prefix("payload.")
                .or_else(|| name.strip_prefix("data."))
            else {
                return Err(unknown());
            };
            let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
            let valid = segments.iter().all(|s| {
                !s.is_empty() && !s.chars().any(|c| c == '{' || c == '}' || c.is_whitespace())
            });
            if !valid {
                return Err(unknown());
            }
            TemplateField::Payload(segments)
        }
    };
    let allowed = match fields {
        TemplateFields::Destination => {
            !matches!(field, TemplateField::Source | TemplateField::EventType)
        }
        TemplateFields::Source => matches!(field, TemplateField::Source | TemplateField::EventType),
    };
    if allowed { Ok(field) } else { Err(unknown()) }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Template({:?})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dest(text: &str) -> Result<Template, TemplateError> {
        Template::parse(text, TemplateFields::Destination)
    }

    #[test]
    fn dst_12_spaces_inside_braces_are_optional() {
        let a = dest("{{topic}}").unwrap();
        let b = dest("{{ topic }}").unwrap();
        assert_eq!(a.parts(), b.parts());
        assert_eq!(a.parts(), &[TemplatePart::Field(TemplateField::Topic)]);
    }

    #[test]
    fn cfg_58_unknown_placeholder_names_the_allowed_fields() {
        assert_eq!(
            dest("events.{{ region }}").unwrap_err().to_string(),
            "unknown placeholder {{ region }}; use topic, key, aggregateType, payload.<path>, data.<path>"
        );
        // Names are case-sensitive.
        assert!(dest("{{ Topic }}").is_err());
        assert!(dest("{{ eventType }}").is_err());
    }

    #[test]
    fn cfg_109_source_templates_allow_source_and_event_type_only() {
        assert!(Template::parse("partner.{{ eventType }}", TemplateFields::Source).is_ok());
        assert!(Template::parse("{{source}}", TemplateFields::Source).is_ok());
        assert_eq!(
            Template::parse("{{ key }}", TemplateFields::Source)
                .unwrap_err()
                .to_string(),
            "unknown placeholder {{ key }}; use source, eventType"
        );
        assert!(Template::parse("{{ payload.a }}", TemplateFields::Source).is_err());
    }

    #[test]
    fn trf_39_unclosed_empty_and_pathless_placeholders() {
        assert_eq!(dest("a.{{ topic").unwrap_err(), TemplateError::Unclosed);
        assert_eq!(dest("a.{{  }}").unwrap_err(), TemplateError::Empty);
        assert_eq!(
            dest("{{ payload. }}").unwrap_err().to_string(),
            "has a payload placeholder without a path"
        );
        assert_eq!(
            dest("{{ data }}").unwrap_err(),
            TemplateError::PayloadWithoutPath
        );
    }

    #[test]
    fn trf_31_single_braces_and_lone_closers_are_literal() {
        let t = dest("a{b}c}}d").unwrap();
        assert!(t.is_literal());
        assert_eq!(t.render("", |_| None), "a{b}c}}d");
    }

    #[test]
    fn trf_35_render_replaces_missing_fields_one_by_one() {
        let t = dest("orders.{{ payload.region }}.{{ key }}").unwrap();
        let payload = json!({"region": "eu"});
        let rendered = t.render("unknown", |f| match f {
            TemplateField::Payload(path) => payload_field(&payload, path),
            _ => None,
        });
        assert_eq!(rendered, "orders.eu.unknown");
    }

    #[test]
    fn trf_32_payload_values_render_as_json_text() {
        let p = json!({"a": {"b": 42, "s": "x", "o": {"k": [1, 2]}, "n": null, "t": true}});
        let path = |s: &str| s.split('.').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(payload_field(&p, &path("a.b")).as_deref(), Some("42"));
        assert_eq!(payload_field(&p, &path("a.s")).as_deref(), Some("x"));
        assert_eq!(
            payload_field(&p, &path("a.o")).as_deref(),
            Some(r#"{"k":[1,2]}"#)
        );
        assert_eq!(payload_field(&p, &path("a.t")).as_deref(), Some("true"));
        assert_eq!(payload_field(&p, &path("a.n")), None);
        assert_eq!(payload_field(&p, &path("a.o.k.0")), None);
        assert_eq!(payload_field(&p, &path("missing")), None);
    }

    #[test]
    fn template_uses_reports_event_type() {
        let t = Template::parse("partner.{{ eventType }}", TemplateFields::Source).unwrap();
        assert!(t.uses(&TemplateField::EventType));
        assert!(!t.uses(&TemplateField::Source));
    }
}
