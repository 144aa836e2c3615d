//! The route without the server: its log lines (INB-30, INB-39, INB-76) name the source, the
//! correlation id and the rule or steps, and never a header value, a credential or a payload.

use std::io::Write;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::body::Body;
use axum::http::Request;
use queuebox_config::{
    Consumption, Filter, FilterRule, FilterTest, HeaderName, HttpSource, InboundAuth, Source,
    SourceKind,
};
use queuebox_core::Secret;
use queuebox_core::jsonpath::JsonPath;
use queuebox_core::template::{Template, TemplateFields};
use queuebox_engine::intake::InboxIntake;
use queuebox_engine::intake::writer::{IntakeWriter, WriterSettings};
use queuebox_engine::pipeline::SourcePipeline;
use queuebox_store::{InsertOutcome, IntakeStore, NewInboxRow, StoreError};
use queuebox_telemetry::Metrics;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::*;

/// An inbox table that takes every row as new.
struct AcceptAll;

#[async_trait]
impl IntakeStore for AcceptAll {
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError> {
        Ok(rows
            .iter()
            .map(|row| InsertOutcome::Stored(row.id))
            .collect())
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn source() -> Source {
    let header = |n: &str| HeaderName::parse(n).unwrap();
    Source {
        name: "hooks".into(),
        kind: SourceKind::Http(HttpSource {
            path: "/hooks".into(),
            route: "/inbox/hooks".into(),
            idempotency_key_header: Some(header("X-Key")),
            aggregate_id_header: None,
            event_type_header: None,
            auth: Some(InboundAuth::Bearer {
                token: Secret::new("sekret-token"),
            }),
        }),
        consumption: Consumption::Push,
        topic: Template::parse("{{ source }}", TemplateFields::Source).unwrap(),
        idempotency_key_path: vec![JsonPath::parse("$.id").unwrap()],
        idempotency_key_expression: None,
        aggregate_id_path: vec![],
        aggregate_id_expression: None,
        event_type_path: vec![],
        event_type_expression: None,
        initial_delay: std::time::Duration::ZERO,
        scheduled_at_header: None,
        scheduled_at_path: vec![],
        transform: None,
        filter: Filter {
            require: vec![FilterRule {
                header: header("X-Tenant"),
                test: FilterTest::Equals("acme".into()),
            }],
            exclude: vec![],
        },
        rate_limit: None,
    }
}

async fn call(router: &axum::Router, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut request = Request::post("/inbox/hooks");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Body::from(body.to_owned())).unwrap();
    router
        .clone()
        .oneshot(request)
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn inb_76_log_lines_name_source_and_correlation_never_values() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let route = HttpSourceRoute::from_config(&source()).unwrap();
    let metrics = Metrics::new("0.0.0-dev");
    let writer = IntakeWriter::new(
        Arc::new(AcceptAll),
        WriterSettings::default(),
        metrics.clone(),
        Arc::new(tokio::sync::Notify::new()),
    );
    let pipeline = SourcePipeline::new(source().inbox_rules()).unwrap();
    let intake = InboxIntake::new(vec![pipeline], writer.handle(), metrics);
    let stop = CancellationToken::new();
    let _writer = stop.clone().drop_guard();
    tokio::spawn(writer.run(stop));
    let routes = source_routes(vec![route], HttpSourceSettings::new(1024), Arc::new(intake));
    let router = routes.router;
    let auth = ("authorization", "Bearer sekret-token");
    assert_eq!(
        call(&router, &[("authorization", "Bearer wrong-guess")], "{}").await,
        401
    );
    let tenant = ("x-tenant", "other-tenant");
    assert_eq!(
        call(&router, &[auth, tenant, ("x-correlation-id", "c-1")], "{}").await,
        202
    );
    let acme = ("x-tenant", "acme");
    let body = r#"{"secretPayload":"p-value"}"#;
    assert_eq!(
        call(&router, &[auth, acme, ("x-correlation-id", "c-2")], body).await,
        400
    );
    let body = r#"{"id":"p-value"}"#;
    assert_eq!(
        call(&router, &[auth, acme, ("x-correlation-id", "c-3")], body).await,
        202
    );

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = |needle: &str| {
        logs.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{logs}"))
            .to_owned()
    };
    let filtered = line("Filtered out by require[0] (X-Tenant equals)");
    assert!(filtered.contains("source=\"hooks\"") && filtered.contains("correlationId=\"c-1\""));
    let no_key = line("No idempotency key found; tried header X-Key, path $.id");
    assert!(no_key.contains("WARN") && no_key.contains("correlationId=\"c-2\""));
    let stored = line("Inbox message stored");
    assert!(stored.contains("inboxId=") && stored.contains("correlationId=\"c-3\""));
    line("Authentication failed: Invalid bearer token");
    for secret in [
        "sekret-token",
        "wrong-guess",
        "other-tenant",
        "p-value",
        "acme",
    ] {
        assert!(!logs.contains(secret), "{secret:?} leaked into\n{logs}");
    }
}
