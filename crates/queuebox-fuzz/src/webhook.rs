//! The HTTP intake: a whole request to a webhook route (the signature and key headers of every
//! authentication type and sender preset, the body cap, the JSON body, the key chain), and the
//! intake pipeline on a raw body (the JSON parse and the JSONPath extraction of the key, the
//! aggregate id and the event type).

use std::collections::HashMap;
use std::sync::OnceLock;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Request};
use queuebox_config::{Config, LoadOptions, SourceKind, load};
use queuebox_core::headers::ReceivedHeaders;
use queuebox_core::intake::{Intake, IntakeOutcome, PendingOutcome, ProtocolAttributes};
use queuebox_core::{ReceivedMessage, SourceName};
use queuebox_engine::pipeline::{Admission, SourcePipeline};
use queuebox_http::source::{HttpSourceRoute, HttpSourceSettings, source_routes};
use tower::Service;

/// One source per authentication type and preset, with the key chain's variants.
const SOURCES: &str = r#"
database:
  url: "postgres://fuzz@127.0.0.1:1/fuzz"
inbox:
  maxBodyBytes: 65536
sources:
  plain:
    path: /plain
    idempotencyKeyPath: $.id
    aggregateIdPath: $.order.id
    eventTypePath: $.type
    topic: "t.{{ eventType }}"
    filter:
      require:
        - header: X-Kind
          in: [order, refund]
      exclude:
        - header: X-Test
          exists: true
  byheader:
    path: /byheader
    idempotencyKeyHeader: X-Key
    consumption: pull
  bearer:
    path: /bearer
    idempotencyKeyPath: $.id
    consumption: pull
    auth: { type: bearer, token: sekret-token }
  apikey:
    path: /apikey
    idempotencyKeyPath: $.id
    consumption: pull
    auth: { type: api-key, key: sekret-key }
  hmac:
    path: /hmac
    idempotencyKeyPath: $.id
    consumption: pull
    auth: { type: hmac, secret: s3cret, timestampHeader: X-Timestamp }
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    consumption: pull
    auth: { type: stripe, secret: [whsec_one, whsec_two] }
  github:
    path: /github
    consumption: pull
    auth: { type: github, secret: gh-secret }
  standard:
    path: /standard
    consumption: pull
    auth: { type: standard-webhooks, secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw }
  shopify:
    path: /shopify
    consumption: pull
    auth: { type: shopify, secret: shop-secret }
  slack:
    path: /slack
    idempotencyKeyPath: $.event_id
    consumption: pull
    auth: { type: slack, secret: slack-secret }
"#;

/// Runs every source's pipeline and answers without a database: a row to store is "new".
struct Pipelines(HashMap<SourceName, SourcePipeline>);

#[async_trait]
impl Intake for Pipelines {
    async fn enqueue(&self, message: ReceivedMessage) -> PendingOutcome {
        let Some(pipeline) = self.0.get(&message.source) else {
            panic!("a message for an unknown source {}", message.source);
        };
        PendingOutcome::ready(match pipeline.admit(message).await {
            Admission::Store(row) => IntakeOutcome::New {
                id: row.id,
                state: row.state,
            },
            Admission::Settle(outcome) => outcome,
        })
    }
}

struct Fixture {
    runtime: tokio::runtime::Runtime,
    router: Router,
    paths: Vec<String>,
    pipelines: Vec<(SourceName, SourcePipeline)>,
}

fn fixture_config() -> Config {
    let dir = std::env::temp_dir().join(format!("queuebox-fuzz-sources-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let file = dir.join("queuebox.yml");
    std::fs::write(&file, SOURCES).expect("the fixture configuration is written");
    let options = LoadOptions {
        config_path: Some(file),
        env: Vec::new(),
        not_utf8: Vec::new(),
        cwd: dir,
        etc_path: "/nonexistent/queuebox-fuzz/queuebox.yml".into(),
    };
    load(&options)
        .unwrap_or_else(|err| panic!("the fixture configuration loads: {err}"))
        .config
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let config = fixture_config();
        let pipeline = |source: &queuebox_config::Source| {
            SourcePipeline::new(source.inbox_rules()).expect("a runnable source")
        };
        let routes: Vec<HttpSourceRoute> = config
            .sources
            .values()
            .filter(|s| matches!(s.kind, SourceKind::Http(_)))
            .map(|s| HttpSourceRoute::from_config(s).expect("a route"))
            .collect();
        let intake = Pipelines(
            config
                .sources
                .values()
                .map(pipeline)
                .map(|p| (p.source().clone(), p))
                .collect(),
        );
        let pipelines = config
            .sources
            .values()
            .map(pipeline)
            .map(|p| (p.source().clone(), p))
            .collect();
        let routes = source_routes(
            routes,
            HttpSourceSettings::of_inbox(&config.inbox, queuebox_telemetry::Metrics::new("fuzz")),
            std::sync::Arc::new(intake),
        );
        let paths = routes.paths().to_vec();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        Fixture {
            runtime,
            router: routes.into_router(),
            paths,
            pipelines,
        }
    })
}

/// `<route byte><header lines "Name: value">\n\n<body>`: one POST to the route the first byte
/// picks. Header lines that are not a valid header are left out (a client cannot send them).
pub fn webhook_request(data: &[u8]) {
    let fixture = fixture();
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let path = &fixture.paths[usize::from(pick) % fixture.paths.len()];
    let (head, body) = crate::split(rest, b"\n\n");
    let mut request = Request::post(path.as_str())
        .body(Body::from(body.to_vec()))
        .expect("a request");
    for line in head.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let value = line[colon + 1..].trim_ascii();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(value),
        ) {
            request.headers_mut().append(name, value);
        }
    }
    let mut router = fixture.router.clone();
    let response = fixture
        .runtime
        .block_on(router.call(request))
        .expect("the router is infallible");
    let status = response.status().as_u16();
    assert!(
        matches!(status, 200 | 202 | 400 | 401 | 413 | 422 | 429 | 503),
        "status {status} is not one of INB-10's"
    );
}

/// The raw bytes as the body of every source's pipeline.
pub fn intake_body(data: &[u8]) {
    let fixture = fixture();
    for (source, pipeline) in &fixture.pipelines {
        let message = ReceivedMessage {
            source: source.clone(),
            headers: ReceivedHeaders::new(),
            body: data.to_vec(),
            protocol: ProtocolAttributes::default(),
        };
        let _ = fixture.runtime.block_on(pipeline.admit(message));
    }
}
