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

mod expressions {
    //! Key expressions and the source transform in the pipeline (transforms.md §5, §6).

    use queuebox_telemetry::Metrics;
    use queuebox_transform::{Expression, Limits, Pool};

    use super::*;
    use crate::transform::{OnError, Stage, StageTransform};

    fn pool() -> Pool {
        Pool::new(1).unwrap()
    }

    fn key(attribute: &str, source: &str) -> Option<KeyExpression> {
        Some(KeyExpression {
            path: format!("sources.orders.{attribute}"),
            expression: Expression::compile(source, Limits::KEY_EXPRESSION).unwrap(),
        })
    }

    fn transform(source: &str, on_error: OnError) -> Option<StageTransform> {
        Some(
            StageTransform::compile(
                Stage::Source,
                "sources.orders.transform",
                source,
                Limits::KEY_EXPRESSION,
                on_error,
                pool(),
                Metrics::new("test"),
            )
            .unwrap(),
        )
    }

    fn with(protocol: IntakeProtocol, expressions: SourceExpressions) -> SourcePipeline {
        SourcePipeline::with_expressions(spec(protocol), expressions).unwrap()
    }

    /// TRF-26: on HTTP the header wins over the expression, the expression over the path; an
    /// object result (TRF-28) or a failing expression (TRF-29) falls through to the path.
    #[tokio::test]
    async fn trf_26_the_expression_step_sits_between_the_header_and_the_path() {
        let pipeline = with(
            IntakeProtocol::Http,
            SourceExpressions {
                idempotency_key: key("idempotencyKeyExpression", "'k-' & ref"),
                event_type: key("eventTypeExpression", "kind"),
                aggregate_id: key("aggregateIdExpression", "$number(agg) + 0"),
                pool: Some(pool()),
                ..SourceExpressions::default()
            },
        );
        let body = br#"{"id": "p", "ref": " r1 ", "type": "t-path", "kind": {"a": 1}, "orderId": "o-path", "agg": "x"}"#;
        let r = row(pipeline.admit(message(&[], body, Default::default())).await);
        assert_eq!(
            r.idempotency_key, "k- r1",
            "the expression's string, trimmed outside only"
        );
        assert_eq!(
            r.event_type.as_deref(),
            Some("t-path"),
            "an object falls through"
        );
        assert_eq!(
            r.aggregate_id.as_deref(),
            Some("o-path"),
            "a failure falls through"
        );
        let r = row(pipeline
            .admit(message(
                &[("Idempotency-Key", "h")],
                body,
                Default::default(),
            ))
            .await);
        assert_eq!(r.idempotency_key, "h", "the header comes first");
        // Only the expression: an HTTP source may have no path and no header (INB-4 rule 1).
        let mut rules = spec(IntakeProtocol::Http);
        rules.idempotency_key = AttributeSteps {
            header: None,
            paths: Vec::new(),
        };
        let only = SourcePipeline::with_expressions(
            rules,
            SourceExpressions {
                idempotency_key: key("idempotencyKeyExpression", "orderId"),
                pool: Some(pool()),
                ..SourceExpressions::default()
            },
        )
        .unwrap();
        let r = row(only
            .admit(message(&[], br#"{"orderId": 42}"#, Default::default()))
            .await);
        assert_eq!(
            r.idempotency_key, "42",
            "TRF-30: a whole number without a fraction"
        );
        let Admission::Settle(IntakeOutcome::Refused(Refusal::NoKey { tried })) = only
            .admit(message(&[], br#"{"items": [1, 2]}"#, Default::default()))
            .await
        else {
            panic!("an array is no value, and the chain ends: 400")
        };
        assert_eq!(tried, "expression sources.orders.idempotencyKeyExpression");
    }

    /// TRF-26: on a broker the aggregate id and event type try the expression first, before
    /// the path and the header.
    #[tokio::test]
    async fn trf_26_a_broker_reads_the_expression_before_the_path_and_the_header() {
        let pipeline = with(
            IntakeProtocol::Rabbitmq,
            SourceExpressions {
                event_type: key("eventTypeExpression", "'from-expr'"),
                pool: Some(pool()),
                ..SourceExpressions::default()
            },
        );
        let r = row(pipeline
            .admit(message(
                &[("x-event-type", "from-header")],
                br#"{"id": "1", "type": "from-path"}"#,
                amqp_id("m"),
            ))
            .await);
        assert_eq!(r.event_type.as_deref(), Some("from-expr"));
    }

    /// TRF-17, TRF-18 (broker source): `Fail` and `Dead` store the original payload as one
    /// `dead` row with `Transform failed: <reason>`, never `pending`; `Skip` stores it
    /// `pending`. A success stores the output.
    #[tokio::test]
    async fn trf_18_a_broker_transform_failure_stores_one_dead_row_with_the_original_payload() {
        let body = br#"{"id": "1", "n": 1}"#;
        for on_error in [OnError::Fail, OnError::Dead] {
            let pipeline = with(
                IntakeProtocol::Kafka,
                SourceExpressions {
                    transform: transform("n + 'x'", on_error),
                    ..SourceExpressions::default()
                },
            );
            let r = row(pipeline.admit(message(&[], body, amqp_id("k"))).await);
            assert_eq!(r.state, StoredState::Dead, "{on_error:?}");
            assert_eq!(r.payload, std::str::from_utf8(body).unwrap());
            let error = r.last_error.unwrap();
            assert!(error.starts_with("Transform failed: T2002: "), "{error}");
            assert_eq!(
                dead_row_rejection_reason(&r.payload, &error),
                "transform_failed"
            );
        }
        let skip = with(
            IntakeProtocol::Nats,
            SourceExpressions {
                transform: transform("n + 'x'", OnError::Skip),
                ..SourceExpressions::default()
            },
        );
        let r = row(skip.admit(message(&[], body, amqp_id("k"))).await);
        assert_eq!((r.state, r.last_error), (StoredState::Pending, None));
        assert_eq!(r.payload, std::str::from_utf8(body).unwrap());
        let ok = with(
            IntakeProtocol::Rabbitmq,
            SourceExpressions {
                transform: transform("{'m': n * 10, 'src': $source}", OnError::Fail),
                ..SourceExpressions::default()
            },
        );
        let r = row(ok.admit(message(&[], body, amqp_id("k"))).await);
        assert_eq!(r.state, StoredState::Pending);
        assert_eq!(
            serde_json::from_str::<Value>(&r.payload).unwrap(),
            serde_json::json!({"m": 10, "src": "orders"})
        );
    }

    fn dead_row_rejection_reason(payload: &str, error: &str) -> &'static str {
        let row = NewInboxRow {
            raw_body: None,
            id: Uuid::now_v7(),
            source: "orders".into(),
            idempotency_key: "1".into(),
            aggregate_id: None,
            event_type: None,
            payload: payload.into(),
            headers: "{}".into(),
            consumption: Consumption::Push,
            correlation_id: None,
            schedule: Schedule::AfterReceipt {
                delay: Duration::ZERO,
            },
            state: StoredState::Dead,
            last_error: Some(error.into()),
        };
        dead_row_rejection(&row).as_str()
    }
}
