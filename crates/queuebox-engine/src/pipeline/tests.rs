//! The pipeline driven with messages of every protocol, no connector involved.

use queuebox_core::filter::{FilterRule, FilterTest};
use queuebox_core::intake::ProtocolAttributes;
use queuebox_core::jsonpath::JsonPath;
use queuebox_core::{HeaderName, ReceivedHeaders};

use super::*;

fn spec(protocol: IntakeProtocol) -> SourceRules {
    let broker = protocol.is_broker();
    let header = |name: &str| Some(HeaderName::parse(name).unwrap());
    let path = |p: &str| vec![JsonPath::parse(p).unwrap()];
    SourceRules {
        source: SourceName::new("orders"),
        protocol,
        consumption: Consumption::Push,
        filter: Filter::default(),
        idempotency_key: AttributeSteps {
            header: header(if broker {
                "x-idempotency-key"
            } else {
                "Idempotency-Key"
            }),
            paths: path("$.id"),
        },
        aggregate_id: AttributeSteps {
            header: header("x-aggregate-id"),
            paths: path("$.orderId"),
        },
        event_type: AttributeSteps {
            header: header("x-event-type"),
            paths: path("$.type"),
        },
        initial_delay: Duration::ZERO,
        scheduled_at_header: None,
        scheduled_at_path: Vec::new(),
    }
}

fn message(headers: &[(&str, &str)], body: &[u8], protocol: ProtocolAttributes) -> ReceivedMessage {
    ReceivedMessage {
        source: SourceName::new("orders"),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect::<ReceivedHeaders>(),
        body: body.to_vec(),
        protocol,
    }
}

fn row(admission: Admission) -> NewInboxRow {
    match admission {
        Admission::Store(row) => row,
        Admission::Settle(outcome) => panic!("expected a row, got {outcome:?}"),
    }
}

fn amqp_id(id: &str) -> ProtocolAttributes {
    ProtocolAttributes {
        message_id: Some(id.to_owned()),
        ..ProtocolAttributes::default()
    }
}

#[tokio::test]
async fn inb_31_a_broker_key_comes_from_the_header_then_the_path_then_the_protocol_id_then_the_digest()
 {
    let pipeline = SourcePipeline::new(spec(IntakeProtocol::Rabbitmq)).unwrap();
    let key = |headers: &[(&str, &str)], body: &[u8], id: Option<&str>| {
        let received = message(headers, body, id.map(amqp_id).unwrap_or_default());
        let pipeline = &pipeline;
        async move { row(pipeline.admit(received).await).idempotency_key }
    };
    let body = br#"{"id":"from-path"}"#;
    assert_eq!(
        key(&[("X-Idempotency-Key", "from-header")], body, Some("m1")).await,
        "from-header",
        "the header is found in any letter case"
    );
    assert_eq!(key(&[], body, Some("m1")).await, "from-path");
    assert_eq!(key(&[], br#"{"other":1}"#, Some(" m1 ")).await, "m1");
    assert_eq!(
        key(&[], br#"{"other":1}"#, None).await,
        "sha256:8b0bb7512fb6d1595c87b3604b48935021ab88233ea853246f5c244600a40929",
        "INB-36: sha256 over the body bytes"
    );
}

#[tokio::test]
async fn inb_31_broker_aggregate_and_event_type_read_the_body_before_the_header_and_kafka_falls_back_to_the_record_key()
 {
    let kafka = SourcePipeline::new(spec(IntakeProtocol::Kafka)).unwrap();
    let headers = [("x-aggregate-id", "agg-h"), ("x-event-type", "type-h")];
    let stored = row(kafka
        .admit(message(
            &headers,
            br#"{"id":"1","orderId":"agg-b","type":"type-b"}"#,
            amqp_id("record-key"),
        ))
        .await);
    assert_eq!(stored.aggregate_id.as_deref(), Some("agg-b"));
    assert_eq!(stored.event_type.as_deref(), Some("type-b"));
    let stored = row(kafka
        .admit(message(&headers, br#"{"id":"1"}"#, amqp_id("record-key")))
        .await);
    assert_eq!(stored.aggregate_id.as_deref(), Some("agg-h"));
    assert_eq!(stored.event_type.as_deref(), Some("type-h"));
    let stored = row(kafka
        .admit(message(&[], br#"{"id":"1"}"#, amqp_id("record-key")))
        .await);
    assert_eq!(stored.aggregate_id.as_deref(), Some("record-key"));
    let nats = SourcePipeline::new(spec(IntakeProtocol::Nats)).unwrap();
    let stored = row(nats
        .admit(message(&[], br#"{"id":"1"}"#, amqp_id("msg-id")))
        .await);
    assert_eq!(
        stored.aggregate_id, None,
        "only Kafka has the record-key step"
    );
}

#[tokio::test]
async fn inb_56_a_broker_body_that_is_not_json_is_one_dead_row_with_the_raw_text() {
    let pipeline = SourcePipeline::new(spec(IntakeProtocol::Nats)).unwrap();
    for body in [&b"not json \xff"[..], b""] {
        let stored = row(pipeline
            .admit(message(&[("x-event-type", "t")], body, amqp_id("n-1")))
            .await);
        assert_eq!(stored.state, StoredState::Dead);
        assert_eq!(stored.last_error.as_deref(), Some(NOT_JSON_ERROR));
        let raw = String::from_utf8_lossy(body);
        assert_eq!(
            stored.payload,
            serde_json::json!({ "raw": raw }).to_string()
        );
        assert_eq!(
            stored.idempotency_key, "n-1",
            "the protocol id needs no JSON"
        );
        assert_eq!(
            stored.event_type.as_deref(),
            Some("t"),
            "the header step needs no JSON"
        );
        assert_eq!(
            stored.schedule,
            Schedule::AfterReceipt {
                delay: Duration::ZERO
            },
            "INB-45: due at once"
        );
    }
}

#[tokio::test]
async fn inb_10_an_http_body_that_is_not_json_or_has_no_key_is_refused() {
    let pipeline = SourcePipeline::new(spec(IntakeProtocol::Http)).unwrap();
    assert_eq!(
        pipeline
            .admit(message(&[], b"", ProtocolAttributes::default()))
            .await,
        Admission::Settle(IntakeOutcome::Refused(Refusal::InvalidJson))
    );
    assert_eq!(
        pipeline
            .admit(message(&[], br#"{"other":1}"#, amqp_id("ignored")))
            .await,
        Admission::Settle(IntakeOutcome::Refused(Refusal::NoKey {
            tried: "header Idempotency-Key, path $.id".into()
        }))
    );
}

#[tokio::test]
async fn inb_30_a_filtered_message_settles_before_its_body_is_read() {
    let mut spec = spec(IntakeProtocol::Rabbitmq);
    spec.filter.require.push(FilterRule {
        header: HeaderName::parse("x-tenant").unwrap(),
        test: FilterTest::Equals("acme".into()),
    });
    let pipeline = SourcePipeline::new(spec).unwrap();
    let Admission::Settle(IntakeOutcome::Filtered { rule }) = pipeline
        .admit(message(
            &[("x-tenant", "other")],
            b"not json",
            Default::default(),
        ))
        .await
    else {
        panic!("expected filtered");
    };
    assert_eq!(rule.0, "require[0] (x-tenant equals)");
    let passed = row(pipeline
        .admit(message(&[("X-Tenant", "acme")], b"{}", Default::default()))
        .await);
    assert_eq!(passed.state, StoredState::Pending);
}

#[tokio::test]
async fn inb_27_the_correlation_header_wins_over_the_protocol_property() {
    let pipeline = SourcePipeline::new(spec(IntakeProtocol::Rabbitmq)).unwrap();
    let protocol = ProtocolAttributes {
        correlation_id: Some("amqp-corr".into()),
        ..Default::default()
    };
    let stored = row(pipeline.admit(message(&[], b"{}", protocol.clone())).await);
    assert_eq!(stored.correlation_id.as_deref(), Some("amqp-corr"));
    let stored = row(pipeline
        .admit(message(&[("X-Correlation-Id", "hdr")], b"{}", protocol))
        .await);
    assert_eq!(stored.correlation_id.as_deref(), Some("hdr"));
}

#[tokio::test]
async fn inb_51_the_payload_is_the_body_text_as_received_and_the_row_is_pending() {
    let pipeline = SourcePipeline::new(spec(IntakeProtocol::Http)).unwrap();
    let body = br#"{ "id" : 12345678901234567890, "type":"order.created" }"#;
    let stored = row(pipeline.admit(message(&[], body, Default::default())).await);
    assert_eq!(stored.payload.as_bytes(), body);
    assert_eq!(stored.idempotency_key, "12345678901234567890");
    assert_eq!(stored.state, StoredState::Pending);
    assert_eq!(stored.last_error, None);
    assert_eq!(stored.consumption, Consumption::Push);
}

#[test]
fn inb_4_an_http_source_without_a_key_step_cannot_be_built() {
    let mut spec = spec(IntakeProtocol::Http);
    spec.idempotency_key = AttributeSteps::default();
    assert_eq!(
        SourcePipeline::new(spec).unwrap_err(),
        PipelineError::NoKeyStep(SourceName::new("orders"))
    );
}
