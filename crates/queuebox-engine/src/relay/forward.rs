//! The pure part of one forward (inbox.md RLY-9..11): the rendered topic and its validity, the
//! outbox row with the identity headers, and the fields every log line about the row carries
//! (INB-76, OPS-32/34).

use queuebox_core::template::{Template, TemplateField};
use queuebox_store::{ForwardedRow, RelayRow};
use uuid::Uuid;

/// RLY-9 step 1 / the outbox `topic` column: at most this many characters.
const MAX_TOPIC_CHARS: usize = 255;

/// RLY-11: the identity headers, replaced whatever letter case a sender used.
const INBOX_ID: &str = "x-inbox-id";
const SOURCE: &str = "x-source";
const IDEMPOTENCY_KEY: &str = "x-idempotency-key";
const CORRELATION_ID: &str = "X-Correlation-Id";

/// The identity of one relayed row in log lines. Holds no payload and no header value other
/// than the correlation id, which OPS-34 asks for (OPS-35).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayLog {
    pub inbox_id: Uuid,
    pub source: String,
    pub correlation_id: String,
    /// Set once the outbox row exists (OPS-32: a relay line then carries both ids).
    pub message_id: Option<Uuid>,
}

impl RelayLog {
    /// The row's correlation id, else its inbox id, so every line can be found by one value.
    pub fn of(row: &RelayRow) -> Self {
        Self {
            inbox_id: row.claim.id.0,
            source: row.source.clone(),
            correlation_id: row
                .correlation_id
                .clone()
                .filter(|c| !c.trim().is_empty())
                .unwrap_or_else(|| row.claim.id.to_string()),
            message_id: None,
        }
    }
}

/// Logs one event about one relayed row with the INB-76 fields. The level must be a
/// `tracing::Level` constant; further `field = value` pairs and the message follow the row.
macro_rules! relay_event {
    ($level:expr, $row:expr, $($rest:tt)+) => {{
        let row: &$crate::relay::forward::RelayLog = &$row;
        ::tracing::event!(
            $level,
            source = %row.source,
            correlationId = %row.correlation_id,
            inboxId = %row.inbox_id,
            messageId = row.message_id.as_ref().map(::tracing::field::display),
            $($rest)+
        )
    }};
}
pub(crate) use relay_event;

/// RLY-9 step 1: `{{ source }}` is the row's source, `{{ eventType }}` its event type or the
/// empty string. `Err` holds the `last_error` text of an empty, blank or too long result.
pub fn render_topic(
    template: &Template,
    source: &str,
    event_type: Option<&str>,
) -> Result<String, String> {
    let topic = template.render("", |field| match field {
        TemplateField::Source => Some(source.to_owned()),
        TemplateField::EventType => event_type.map(str::to_owned),
        // Source templates allow no other field (CFG-109); render any as missing.
        _ => None,
    });
    if topic.trim().is_empty() || topic.chars().count() > MAX_TOPIC_CHARS {
        return Err(format!(
            "The topic template '{}' rendered an invalid topic '{topic}'.",
            template.as_str()
        ));
    }
    Ok(topic)
}

/// Why the stored headers cannot be relayed. QueueBox stores an object (`ck_inbox_headers`), so
/// this is a row changed by hand; the forward fails (RLY-12) and the row keeps its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("The inbox headers column is not a JSON object.")]
pub struct HeadersNotObject;

/// RLY-11: the stored headers without any header named like an identity header (any letter
/// case), then the identity headers. Other headers and their JSON values travel unchanged.
pub fn identity_headers(row: &RelayRow) -> Result<String, HeadersNotObject> {
    let parsed: serde_json::Value =
        serde_json::from_str(&row.headers).map_err(|_| HeadersNotObject)?;
    let serde_json::Value::Object(mut headers) = parsed else {
        return Err(HeadersNotObject);
    };
    headers.retain(|name, _| {
        ![INBOX_ID, SOURCE, IDEMPOTENCY_KEY, CORRELATION_ID]
            .iter()
            .any(|identity| name.eq_ignore_ascii_case(identity))
    });
    let text = |value: &str| serde_json::Value::String(value.to_owned());
    headers.insert(
        INBOX_ID.into(),
        text(&row.claim.id.0.hyphenated().to_string()),
    );
    headers.insert(SOURCE.into(), text(&row.source));
    headers.insert(IDEMPOTENCY_KEY.into(), text(&row.idempotency_key));
    if let Some(correlation) = &row.correlation_id {
        headers.insert(CORRELATION_ID.into(), text(correlation));
    }
    Ok(serde_json::Value::Object(headers).to_string())
}

/// RLY-10: the outbox row for a claimed inbox row whose topic rendered as `topic`.
pub fn forwarded_row(
    row: &RelayRow,
    topic: String,
    max_attempts: i32,
) -> Result<ForwardedRow, HeadersNotObject> {
    Ok(ForwardedRow {
        // v7: time-ordered, like every id QueueBox generates (SCH-7).
        id: Uuid::now_v7(),
        topic,
        key: row.aggregate_id.clone(),
        payload: row.payload.clone(),
        headers: identity_headers(row)?,
        max_attempts,
    })
}

#[cfg(test)]
mod tests {
    use queuebox_core::template::TemplateFields;
    use queuebox_store::Claim;

    use super::*;
    use queuebox_store::{ClaimToken, RowId};

    fn relay_row(headers: &str, correlation: Option<&str>) -> RelayRow {
        RelayRow {
            claim: Claim {
                id: RowId(Uuid::parse_str("0190A5C0-0000-7000-8000-00000000000A").unwrap()),
                token: ClaimToken(Uuid::new_v4()),
            },
            source: "partner".into(),
            idempotency_key: "evt-1".into(),
            aggregate_id: Some("order-7".into()),
            event_type: Some("order.paid".into()),
            payload: r#"{"amount":10}"#.into(),
            headers: headers.into(),
            correlation_id: correlation.map(str::to_owned),
        }
    }

    fn object(text: &str) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::from_str(text).unwrap() {
            serde_json::Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn rly_11_identity_headers_replace_names_in_any_case_and_keep_the_others() {
        let row = relay_row(
            r#"{"X-INBOX-ID":"forged","X-Source":"forged","x-idempotency-KEY":"forged","x-correlation-id":"forged","X-Tenant":"acme","x-count":3}"#,
            Some("corr-1"),
        );
        let headers = object(&identity_headers(&row).unwrap());
        let mut names: Vec<&str> = headers.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "X-Correlation-Id",
                "X-Tenant",
                "x-count",
                "x-idempotency-key",
                "x-inbox-id",
                "x-source"
            ]
        );
        assert_eq!(
            headers["x-inbox-id"],
            "0190a5c0-0000-7000-8000-00000000000a"
        );
        assert_eq!(headers["x-source"], "partner");
        assert_eq!(headers["x-idempotency-key"], "evt-1");
        assert_eq!(headers["X-Correlation-Id"], "corr-1");
        assert_eq!(headers["X-Tenant"], "acme");
        assert_eq!(headers["x-count"], 3, "a JSON value travels unchanged");
    }

    #[test]
    fn rly_11_a_sender_correlation_header_is_dropped_when_the_row_has_none() {
        let row = relay_row(r#"{"X-Correlation-ID":"forged"}"#, None);
        let headers = object(&identity_headers(&row).unwrap());
        assert!(
            !headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("x-correlation-id"))
        );
        assert_eq!(headers.len(), 3);
    }

    #[test]
    fn rly_12_headers_that_are_not_an_object_fail_the_forward() {
        assert_eq!(
            identity_headers(&relay_row("[1]", None)),
            Err(HeadersNotObject)
        );
        assert_eq!(
            identity_headers(&relay_row("{", None)),
            Err(HeadersNotObject)
        );
    }

    #[test]
    fn rly_10_the_outbox_row_keeps_key_payload_and_gets_a_v7_id_and_max_attempts() {
        let row = relay_row("{}", None);
        let out = forwarded_row(&row, "partner.order.paid".into(), 7).unwrap();
        assert_eq!(out.id.get_version_num(), 7);
        assert_ne!(out.id, row.claim.id.0);
        assert_eq!(out.key.as_deref(), Some("order-7"));
        assert_eq!(out.payload, row.payload);
        assert_eq!(out.max_attempts, 7);
        assert_eq!(out.topic, "partner.order.paid");
    }

    fn template(text: &str) -> Template {
        Template::parse(text, TemplateFields::Source).unwrap()
    }

    #[test]
    fn rly_9_topic_renders_source_and_event_type_with_optional_spaces() {
        let t = template("{{source}}.{{ eventType }}");
        assert_eq!(
            render_topic(&t, "partner", Some("order.paid")).as_deref(),
            Ok("partner.order.paid")
        );
    }

    #[test]
    fn rly_9_an_empty_blank_or_too_long_topic_is_invalid_with_the_spec_text() {
        let t = template("{{ eventType }}");
        assert_eq!(
            render_topic(&t, "partner", None),
            Err("The topic template '{{ eventType }}' rendered an invalid topic ''.".into())
        );
        assert_eq!(
            render_topic(&t, "partner", Some("  ")),
            Err("The topic template '{{ eventType }}' rendered an invalid topic '  '.".into())
        );
        let long = "é".repeat(256);
        let err = render_topic(&t, "partner", Some(&long)).unwrap_err();
        assert!(err.ends_with(&format!("rendered an invalid topic '{long}'.")));
        let just_fits = "é".repeat(255);
        assert_eq!(
            render_topic(&t, "partner", Some(&just_fits)).as_deref(),
            Ok(just_fits.as_str()),
            "the limit counts characters, not bytes"
        );
    }

    #[test]
    fn ops_34_the_log_correlation_id_is_the_row_s_else_its_inbox_id() {
        let with = RelayLog::of(&relay_row("{}", Some("corr-1")));
        assert_eq!(with.correlation_id, "corr-1");
        let without = RelayLog::of(&relay_row("{}", None));
        assert_eq!(without.correlation_id, without.inbox_id.to_string());
        assert_eq!(without.message_id, None);
    }
}
