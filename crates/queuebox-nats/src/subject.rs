//! The subject of one publish: the destination's address (a template, or a `*From` column)
//! rendered for the row (DST-17..20), then checked as NATS needs it (DST-44).

use queuebox_config::Address;
use queuebox_core::OutgoingMessage;
use queuebox_core::template::{TemplateField, payload_field};

/// The subject for `message`, or the failure text the publish ends with.
pub(crate) fn subject_for(
    destination: &str,
    address: &Address,
    message: &OutgoingMessage,
) -> Result<String, String> {
    let subject = match address {
        Address::Template(template) => {
            // The payload is parsed only when a placeholder reads it (DST-15: the row as
            // stored, before any transform).
            let payload = template
                .parts()
                .iter()
                .any(|part| {
                    matches!(
                        part,
                        queuebox_core::template::TemplatePart::Field(TemplateField::Payload(_))
                    )
                })
                .then(|| serde_json::from_str::<serde_json::Value>(message.template_payload()).ok())
                .flatten();
            // DST-14: a missing value renders empty in an address template.
            let rendered = template.render("", |field| match field {
                TemplateField::Topic => Some(message.topic.clone()),
                TemplateField::Key => message.key.clone().filter(|k| !k.is_empty()),
                TemplateField::AggregateType => {
                    message.aggregate_type.clone().filter(|a| !a.is_empty())
                }
                TemplateField::Payload(path) => payload
                    .as_ref()
                    .and_then(|value| payload_field(value, path)),
                // Not destination fields: the template parser refused them at start.
                TemplateField::Source | TemplateField::EventType => None,
            });
            if rendered.is_empty() {
                return Err(format!(
                    "Destination '{destination}' rendered an empty subject from template '{template}'. QueueBox does not publish the message."
                ));
            }
            rendered
        }
        Address::Column(column) => {
            let value = match column {
                queuebox_config::AddressColumn::Topic => Some(message.topic.clone()),
                queuebox_config::AddressColumn::Key => message.key.clone(),
                queuebox_config::AddressColumn::AggregateType => message.aggregate_type.clone(),
            };
            match value.filter(|v| !v.is_empty()) {
                Some(value) => value,
                None => {
                    return Err(format!(
                        "Destination '{destination}' read an empty subject from column '{}'. QueueBox does not publish the message.",
                        column.as_str()
                    ));
                }
            }
        }
    };
    if is_valid_subject(&subject) {
        Ok(subject)
    } else {
        Err(format!(
            "Destination '{destination}' rendered an invalid subject '{}'. QueueBox does not publish the message.",
            subject.escape_debug()
        ))
    }
}

/// DST-44: no whitespace, no empty token (`a..b`, a leading or trailing `.`), no wildcard token
/// (`*`, `>`). A publish subject names one subject; it never matches several.
pub(crate) fn is_valid_subject(subject: &str) -> bool {
    !subject.chars().any(char::is_whitespace)
        && subject
            .split('.')
            .all(|token| !token.is_empty() && token != "*" && token != ">")
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::template::{Template, TemplateFields};
    use uuid::Uuid;

    fn message() -> OutgoingMessage {
        OutgoingMessage {
            id: Uuid::nil(),
            topic: "order.created".into(),
            key: Some("o-1".into()),
            aggregate_type: None,
            attempt: 0,
            headers: vec![],
            payload: r#"{"region":"eu","n":{"x":1}}"#.into(),
            stored_payload: None,
        }
    }

    fn template(text: &str) -> Address {
        Address::Template(Template::parse(text, TemplateFields::Destination).unwrap())
    }

    #[test]
    fn dst_17_templates_render_row_fields_and_payload_paths() {
        let subject = subject_for(
            "events",
            &template("orders.{{ payload.region }}.{{ topic }}.{{key}}"),
            &message(),
        );
        assert_eq!(subject.as_deref(), Ok("orders.eu.order.created.o-1"));
    }

    /// TRF-33: each name renders its row value; `key` and `aggregateType` are missing when
    /// NULL or empty; `payload.…` and `data.…` read the stored payload, not a transform's output
    /// (TRF-8).
    #[test]
    fn trf_33_each_name_renders_its_row_value_and_payload_reads_the_stored_row() {
        let mut row = message();
        row.aggregate_type = Some("order".into());
        row.payload = r#"{"region":"us"}"#.into();
        row.stored_payload = Some(r#"{"region":"eu","n":{"x":1}}"#.into());
        let rendered =
            |text: &str, row: &OutgoingMessage| subject_for("events", &template(text), row);
        assert_eq!(
            rendered(
                "{{topic}}.{{ key }}.{{ aggregateType }}.{{ payload.region }}.{{ data.n.x }}",
                &row
            )
            .as_deref(),
            Ok("order.created.o-1.order.eu.1")
        );
        row.key = Some(String::new());
        row.aggregate_type = None;
        assert_eq!(
            rendered("a{{ key }}{{ aggregateType }}", &row).as_deref(),
            Ok("a"),
            "an empty key and a NULL aggregate type are missing"
        );
        row.stored_payload = None;
        assert_eq!(
            rendered("{{ payload.region }}", &row).as_deref(),
            Ok("us"),
            "without a transform the payload is the stored one"
        );
    }

    #[test]
    fn dst_18_an_empty_rendered_subject_fails_with_its_template() {
        let err = subject_for("events", &template("{{ aggregateType }}"), &message()).unwrap_err();
        assert_eq!(
            err,
            "Destination 'events' rendered an empty subject from template '{{ aggregateType }}'. QueueBox does not publish the message."
        );
    }

    #[test]
    fn dst_20_a_column_is_used_verbatim_and_an_empty_one_fails() {
        let topic = Address::Column(queuebox_config::AddressColumn::Topic);
        assert_eq!(
            subject_for("events", &topic, &message()).as_deref(),
            Ok("order.created")
        );
        let aggregate = Address::Column(queuebox_config::AddressColumn::AggregateType);
        assert_eq!(
            subject_for("events", &aggregate, &message()).unwrap_err(),
            "Destination 'events' read an empty subject from column 'aggregate_type'. QueueBox does not publish the message."
        );
    }

    #[test]
    fn dst_44_whitespace_empty_tokens_and_wildcards_are_invalid() {
        for bad in [
            "a b", "a..b", ".a", "a.", "a.*", "a.>", ">", "a\tb", "a.b\n",
        ] {
            assert!(!is_valid_subject(bad), "{bad:?}");
        }
        for good in ["a", "a.b.c", "orders.eu-1", "a*b.c>d"] {
            assert!(is_valid_subject(good), "{good:?}");
        }
        let err = subject_for("events", &template("orders.{{ payload.n }}"), &message());
        // A payload object renders as compact JSON, which here holds no space: valid.
        assert_eq!(err.as_deref(), Ok(r#"orders.{"x":1}"#));
        let mut spaced = message();
        spaced.topic = "order created".into();
        assert_eq!(
            subject_for("events", &template("{{ topic }}"), &spaced).unwrap_err(),
            "Destination 'events' rendered an invalid subject 'order created'. QueueBox does not publish the message."
        );
    }
}
