//! Strict validation (CFG-25..30) and the keys, defaults and rules of §4..§14.

mod common;

use std::time::Duration;

use common::*;
use queuebox_config::{
    Address, AddressColumn, AutoOffsetReset, CaptureMode, DatabaseTarget, DeliveryMode,
    DestinationAuth, DestinationKind, ExchangeType, FilterTest, HmacAlgorithm, InboundAuth,
    InboxRetentionPolicy, LogFormat, LogLevel, NatsCredentials, OnError, OutboxRetentionPolicy,
    PgSslMode, SecurityProtocol, SignaturePayloadFormat, SourceKind,
};

#[test]
fn cfg_25_unknown_keys_at_every_level() {
    assert_eq!(
        errors(&with_db("extra: 1\nserver:\n  port: 1\n")),
        ["- extra: unknown key", "- server.port: unknown key"]
    );
}

#[test]
fn cfg_29_missing_type_of_an_auth_block_lists_its_kinds() {
    assert_eq!(
        errors(&with_db("admin:\n  enabled: true\n  auth:\n    token: t\n")),
        ["- admin.auth: missing type; set one of api-key, bearer, hmac"]
    );
    assert_eq!(
        errors(&with_db(
            "destinations:\n  d:\n    type: http\n    baseUrl: https://x.example.com\n    auth:\n      username: u\n"
        )),
        ["- destinations.d.auth: missing type; set one of basic, header, oauth2"]
    );
}

#[test]
fn cfg_29_required_with_kind_and_unknown_name_reference() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  billing:\n    type: http\nroutes:\n  - topicPattern: a\n    destination: bililng\n"
        )),
        [
            "- destinations.billing.baseUrl: required for type http",
            "- routes[0].destination: no destination named \"bililng\"; did you mean billing?",
        ]
    );
}

#[test]
fn cfg_29_wrong_types() {
    assert_eq!(
        errors(&with_db("outbox: 5\nroutes: x\nlog:\n  level: [a]\n")),
        [
            "- log.level: expected a string, got a list",
            "- outbox: expected a section, got \"5\"",
            "- routes: expected a list, got \"x\"",
        ]
    );
}

#[test]
fn cfg_30_no_suggestion_when_too_far() {
    assert_eq!(
        errors(&with_db("outbox:\n  zzzzzzzz: 1\n")),
        ["- outbox.zzzzzzzz: unknown key"]
    );
}

#[test]
fn cfg_35_server_ports() {
    let c = ok(DB).config;
    assert_eq!((c.server.http_port, c.server.management_port), (8080, None));
    assert_eq!(
        errors(&with_db("server:\n  httpPort: 70000\n")),
        ["- server.httpPort: must be between 0 and 65535, got 70000"]
    );
    assert_eq!(
        ok(&with_db("server:\n  httpPort: 0\n  managementPort: 0\n"))
            .config
            .server
            .http_port,
        0
    );
}

#[test]
fn server_max_connections_defaults_to_1024_and_is_at_least_1() {
    assert_eq!(ok(DB).config.server.max_connections, 1024);
    assert_eq!(
        ok(&with_db("server:\n  maxConnections: 64\n"))
            .config
            .server
            .max_connections,
        64
    );
    assert_eq!(
        errors(&with_db("server:\n  maxConnections: 0\n")),
        ["- server.maxConnections: must be between 1 and 1000000, got 0"]
    );
}

#[test]
fn cfg_37_database_defaults_and_postgres_target() {
    let c = ok("database:\n  url: jdbc:postgresql://db/app?user=app&password=pw&ApplicationName=qb&connectTimeout=7\n").config;
    assert_eq!(c.database.pool_size, 10);
    assert_eq!(c.database.connection_timeout_ms, 30_000);
    assert_eq!(c.database.startup_timeout_ms, 60_000);
    assert!(c.database.migrate);
    let DatabaseTarget::Postgres(pg) = &c.database.target else {
        panic!()
    };
    assert_eq!(
        (pg.host.as_str(), pg.port, pg.user.as_str()),
        ("db", 5432, "app")
    );
    assert_eq!(pg.password.expose(), "pw");
    assert_eq!(pg.application_name, "qb");
    assert_eq!(pg.connect_timeout_s, Some(7));
    assert_eq!(pg.sslmode, PgSslMode::Prefer);
    assert_eq!(
        c.database.masked_url,
        "jdbc:postgresql://db/app?user=app&password=***&ApplicationName=qb&connectTimeout=7"
    );
}

#[test]
fn cfg_37_username_and_password_keys_win_over_the_url() {
    let c = ok("database:\n  url: postgres://urluser:urlpw@db/app\n  username: keyuser\n  password: keypw\n").config;
    let DatabaseTarget::Postgres(pg) = &c.database.target else {
        panic!()
    };
    assert_eq!(
        (pg.user.as_str(), pg.password.expose()),
        ("keyuser", "keypw")
    );
}

#[test]
fn cfg_40_unknown_url_parameter_is_named() {
    assert_eq!(
        errors("database:\n  url: postgres://app@db/app?sslmode=require&foo=1\n"),
        ["- database.url: unknown parameter foo"]
    );
}

#[test]
fn cfg_41_a_user_is_required() {
    assert_eq!(
        errors("database:\n  url: postgres://db/app\n"),
        ["- database.username: required; set it here or in database.url"]
    );
    ok("database:\n  type: sqlserver\n  url: Server=db,1433;Database=q;User Id=app;Password=pw\n");
    ok("database:\n  type: mysql\n  url: jdbc:mariadb://db/q\n  username: app\n");
}

#[test]
fn cfg_44_column_mapping_keys() {
    assert_eq!(
        errors(&with_db(
            "  migrate: false\n  columnMapping:\n    outbox:\n      aggregate_type: x\n"
        )),
        [
            "- database.columnMapping.outbox.aggregate_type: unknown key; did you mean aggregateType?"
        ]
    );
}

#[test]
fn cfg_46_outbox_defaults() {
    let o = ok(DB).config.outbox;
    assert_eq!(
        (
            o.poll_interval_ms,
            o.batch_size,
            o.concurrency,
            o.retry_base_delay_ms,
            o.retry_max_delay_ms
        ),
        (100, 100, 8, 1000, 60_000)
    );
    assert_eq!(
        (
            o.max_attempts,
            o.claim_timeout_ms,
            o.pending_gauge_interval_ms,
            o.shutdown_timeout_ms
        ),
        (5, 300_000, 5000, 30_000)
    );
    assert_eq!(o.capture_mode, CaptureMode::Polling);
}

#[test]
fn out_13a_key_run_length_defaults_to_32_and_must_be_positive() {
    assert_eq!(ok(DB).config.outbox.key_run_length, 32);
    let one = ok(&with_db("outbox:\n  keyRunLength: 1\n"));
    assert_eq!(one.config.outbox.key_run_length, 1);
    let refused = errors(&with_db("outbox:\n  keyRunLength: 0\n"));
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with("- outbox.keyRunLength: "),
        "{refused:?}"
    );
}

#[test]
fn cfg_47_inbox_base_path_rules() {
    let i = ok(DB).config.inbox;
    assert_eq!(
        (i.base_path.as_str(), i.max_body_bytes),
        ("/inbox", 1_048_576)
    );
    ok(&with_db("inbox:\n  basePath: /\n"));
    assert_eq!(
        errors(&with_db("inbox:\n  basePath: /in/\n")),
        ["- inbox.basePath: must not end with /, got \"/in/\""]
    );
    assert_eq!(
        errors(&with_db("inbox:\n  basePath: in\n")),
        ["- inbox.basePath: must start with /, got \"in\""]
    );
}

#[test]
fn inbox_intake_bounds_default_and_rules() {
    // Issue 17 defects 5 and 7: the bytes held by HTTP requests and the storage wait.
    let i = ok(DB).config.inbox;
    assert_eq!(
        (i.max_pending_bytes, i.storage_wait_ms),
        (67_108_864, 10_000)
    );
    let i = ok(&with_db(
        "inbox:\n  maxPendingBytes: 2097152\n  storageWaitMs: 250\n",
    ))
    .config
    .inbox;
    assert_eq!((i.max_pending_bytes, i.storage_wait_ms), (2_097_152, 250));
    assert_eq!(
        errors(&with_db(
            "inbox:\n  maxBodyBytes: 1000\n  maxPendingBytes: 999\n"
        )),
        ["- inbox.maxPendingBytes: must be at least inbox.maxBodyBytes (1000), got 999"]
    );
    assert_eq!(
        errors(&with_db("inbox:\n  storageWaitMs: 0\n")),
        ["- inbox.storageWaitMs: must be greater than 0, got 0"]
    );
}

#[test]
fn cfg_48_relay_max_attempts_defaults_to_outbox_max_attempts() {
    let c = ok(&with_db("outbox:\n  maxAttempts: 9\n")).config;
    assert_eq!(c.inbox.relay.max_attempts, 9);
    assert!(c.inbox.relay.enabled);
    assert_eq!(
        (c.inbox.relay.batch_size, c.inbox.relay.claim_timeout_ms),
        (100, 300_000)
    );
}

#[test]
fn cfg_49_reserved_static_headers_stop_the_start() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  d:\n    type: kafka\n    bootstrapServers: k:9092\n    topic: t\n    headers:\n      X-Message-Id: x\n      Content-Type: ok-for-kafka\n"
        )),
        ["- destinations.d.headers.X-Message-Id: a reserved header name; only QueueBox sets it"]
    );
    assert_eq!(
        errors(&with_db(
            "destinations:\n  d:\n    type: http\n    baseUrl: https://x.example.com\n    headers:\n      content-type: x\n"
        )),
        ["- destinations.d.headers.content-type: a reserved header name; only QueueBox sets it"]
    );
}

#[test]
fn cfg_50_http_destination_and_auth_kinds() {
    let c = ok(&with_db(
        "destinations:\n  a:\n    type: http\n    baseUrl: https://a.example.com/base\n    auth:\n      type: basic\n      username: u\n      password: p\n  b:\n    type: http\n    baseUrl: http://b.example.com\n    path: /x/y\n    timeoutMs: 5000\n    auth:\n      type: header\n      headerValue: v\n",
    ))
    .config;
    let DestinationKind::Http(a) = &c.destinations["a"].kind else {
        panic!()
    };
    assert_eq!((a.path.as_str(), a.timeout_ms), ("/", 30_000));
    assert!(matches!(&a.auth, Some(DestinationAuth::Basic { username, .. }) if username == "u"));
    let DestinationKind::Http(b) = &c.destinations["b"].kind else {
        panic!()
    };
    match &b.auth {
        Some(DestinationAuth::Header {
            header_name,
            header_value,
        }) => {
            assert_eq!(header_name.as_str(), "Authorization");
            assert_eq!(header_value.expose(), "v");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        errors(&with_db(
            "destinations:\n  d:\n    type: http\n    baseUrl: https://x.example.com\n    path: /a/../b\n    auth:\n      type: oauth2\n      clientId: c\n"
        )),
        [
            "- destinations.d.auth.clientSecret: required for type oauth2",
            "- destinations.d.auth.tokenUrl: required for type oauth2",
            "- destinations.d.path: must not contain a . or .. segment",
        ]
    );
}

#[test]
fn cfg_51_rabbitmq_destination_defaults() {
    let c = ok(&with_db("destinations:\n  r:\n    type: rabbitmq\n    url: amqps://u:p@rabbit/vh\n    exchange: events.{{ aggregateType }}\n")).config;
    let DestinationKind::Rabbitmq(r) = &c.destinations["r"].kind else {
        panic!()
    };
    assert_eq!(r.exchange_type, ExchangeType::Topic);
    assert_eq!(r.delivery_mode, DeliveryMode::Persistent);
    assert_eq!(r.routing_key_template.as_str(), "{{ topic }}");
    assert_eq!(r.masked_url, "amqps://u:***@rabbit/vh");
    assert!(
        matches!(&r.exchange, Address::Template(t) if t.as_str() == "events.{{ aggregateType }}")
    );
}

#[test]
fn cfg_52_kafka_destination_and_from_column_wins() {
    let c = ok(&with_db("destinations:\n  k:\n    type: kafka\n    bootstrapServers: k1:9092, k2:9092\n    topic: t\n    topicFrom: aggregate_type\n")).config;
    let DestinationKind::Kafka(k) = &c.destinations["k"].kind else {
        panic!()
    };
    assert_eq!(k.bootstrap_servers, ["k1:9092", "k2:9092"]);
    assert!(matches!(
        k.topic,
        Address::Column(AddressColumn::AggregateType)
    ));
    assert_eq!(k.key_template.as_str(), "{{ key }}");
    assert_eq!(k.security.protocol, SecurityProtocol::Plaintext);
    assert_eq!(
        errors(&with_db(
            "destinations:\n  k:\n    type: kafka\n    bootstrapServers: k1\n    topic: t\n    timeoutMs: 500\n"
        )),
        [
            "- destinations.k.bootstrapServers: must be host:port entries separated by commas, got \"k1\"",
            "- destinations.k.timeoutMs: must be at least 2000, got 500",
        ]
    );
}

#[test]
fn cfg_53_nats_destination() {
    let c = ok(&with_db("destinations:\n  n:\n    type: nats\n    servers: nats://n1:4222,nats://n2:4222\n    subjectFrom: topic\n    token: t\n")).config;
    let DestinationKind::Nats(n) = &c.destinations["n"].kind else {
        panic!()
    };
    assert!(n.jet_stream);
    assert!(matches!(n.credentials, NatsCredentials::Token(_)));
    assert_eq!(n.servers.len(), 2);
}

#[test]
fn cfg_55_route_keys() {
    let c = ok(&with_db(
        "destinations:\n  r:\n    type: rabbitmq\n    url: amqp://rabbit\n    exchange: e\nroutes:\n  - topicPattern: order.*\n    destination: r\n    routingKeyTemplate: \"{{ payload.region }}\"\n    routingKeyMissingFieldDefault: unknown\n    transform:\n      expression: $\n",
    ))
    .config;
    let route = &c.routes[0];
    assert_eq!(route.routing_key_missing_field_default, "unknown");
    let t = route.transform.as_ref().unwrap();
    assert_eq!(
        (t.timeout_ms, t.max_depth, t.on_error),
        (100, 100, OnError::Fail)
    );
    assert_eq!(
        errors(&with_db(
            "destinations:\n  x:\n    type: log\nroutes:\n  - topicPattern: \"a.***\"\n    destination: x\n"
        )),
        [
            "- routes[0].topicPattern: must not contain ***; use * for one segment or ** for any number"
        ]
    );
}

#[test]
fn cfg_58_unknown_template_placeholder_names_the_key() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  events:\n    type: kafka\n    bootstrapServers: k:9092\n    topic: \"{{ region }}\"\n"
        )),
        [
            "- destinations.events.topic: unknown placeholder {{ region }}; use topic, key, aggregateType, payload.<path>, data.<path>"
        ]
    );
}

#[test]
fn cfg_62_63_http_and_admin_defaults() {
    let c = ok(DB).config;
    assert_eq!(
        (c.http.max_error_body_bytes, c.http.block_private_addresses),
        (2048, false)
    );
    assert!(!c.admin.enabled && !c.admin.insecure && c.admin.auth.is_none());
    assert_eq!(
        (c.admin.max_transform_timeout_ms, c.admin.max_payload_bytes),
        (1000, 65_536)
    );
}

#[test]
fn cfg_64_source_type_defaults_to_http_and_other_kind_keys_stop_the_start() {
    let c = ok(&with_db(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyHeader: X-Id\n    consumption: pull\n",
    ))
    .config;
    assert!(matches!(c.sources["s"].kind, SourceKind::Http(_)));
    assert_eq!(
        errors(&with_db(
            "sources:\n  s:\n    path: /s\n    idempotencyKeyHeader: X-Id\n    consumption: pull\n    groupId: g\n"
        )),
        ["- sources.s.groupId: unknown key for type http; type kafka takes it"]
    );
}

#[test]
fn cfg_65_broker_defaults() {
    let c = ok(&with_db(
        "sources:\n  q:\n    type: rabbitmq\n    connectionUrl: amqp://rabbit\n    queueName: q\n    consumption: pull\n",
    ))
    .config;
    let s = &c.sources["q"];
    assert_eq!(s.topic.as_str(), "{{ source }}");
    assert_eq!(s.idempotency_key_path[0].as_str(), "$.id");
    assert_eq!(s.initial_delay, Duration::ZERO);
    let SourceKind::Rabbitmq(r) = &s.kind else {
        panic!()
    };
    assert_eq!((r.prefetch_count, r.declare_queue), (10, false));
    assert_eq!(
        r.broker.attribute_headers.idempotency_key.as_str(),
        "x-idempotency-key"
    );
}

#[test]
fn cfg_73_hmac_defaults_follow_the_algorithm_and_timestamp_header() {
    let c = ok(&with_db(
        "sources:\n  p:\n    path: /p\n    consumption: pull\n    idempotencyKeyPath: $.id\n    auth:\n      type: hmac\n      secret: s\n      algorithm: HmacSHA512\n      timestampHeader: X-Ts\n",
    ))
    .config;
    let SourceKind::Http(h) = &c.sources["p"].kind else {
        panic!()
    };
    let Some(InboundAuth::Hmac(hmac)) = &h.auth else {
        panic!()
    };
    assert_eq!(hmac.algorithm, HmacAlgorithm::HmacSha512);
    assert_eq!(hmac.signature_prefix, "sha512=");
    assert_eq!(hmac.header_name.as_str(), "X-Signature");
    assert_eq!(
        hmac.payload_format,
        SignaturePayloadFormat::TimestampDotBody
    );
    assert_eq!(hmac.timestamp_tolerance_ms, 300_000);
}

#[test]
fn cfg_76_kafka_source_topics() {
    let c = ok(&with_db("sources:\n  k:\n    type: kafka\n    bootstrapServers: k:9092\n    topics: [a.b, c_d]\n    groupId: g\n    consumption: pull\n")).config;
    let SourceKind::Kafka(k) = &c.sources["k"].kind else {
        panic!()
    };
    assert_eq!(
        (k.auto_offset_reset, k.max_poll_records),
        (AutoOffsetReset::Earliest, 100)
    );
    assert_eq!(
        errors(&with_db(
            "sources:\n  k:\n    type: kafka\n    bootstrapServers: k:9092\n    topics: []\n    consumption: pull\n"
        )),
        [
            "- sources.k.groupId: required for type kafka",
            "- sources.k.topics: must not be empty"
        ]
    );
}

#[test]
fn cfg_77_nats_source() {
    let c = ok(&with_db("sources:\n  n:\n    type: nats\n    servers: nats://n:4222\n    stream: S\n    durable: D\n    username: u\n    password: p\n    consumption: pull\n")).config;
    let SourceKind::Nats(n) = &c.sources["n"].kind else {
        panic!()
    };
    assert_eq!((n.ack_wait_ms, n.batch_size), (30_000, 100));
    assert!(matches!(
        n.credentials,
        NatsCredentials::UserPassword { .. }
    ));
}

#[test]
fn cfg_78_filter_rules_need_exactly_one_test() {
    let base = "sources:\n  s:\n    path: /s\n    consumption: pull\n    idempotencyKeyHeader: X-Id\n    filter:\n      require:\n";
    assert_eq!(
        errors(&with_db(&format!(
            "{base}        - header: a\n        - header: b\n          equals: x\n          exists: true\n        - header: c\n          exists: false\n        - header: d\n          in: []\n"
        ))),
        [
            "- sources.s.filter.require[0]: has no test; set exactly one of equals, in, matches, exists",
            "- sources.s.filter.require[1]: has 2 tests (equals, exists); set exactly one of equals, in, matches, exists",
            "- sources.s.filter.require[2].exists: must be true; to drop messages that carry the header, use an exclude rule",
            "- sources.s.filter.require[3].in: must not be empty",
        ]
    );
    let c = ok(&with_db(&format!(
        "{base}        - header: x-env\n          matches: \"prod.*\"\n"
    )));
    assert!(matches!(
        c.config.sources["s"].filter.require[0].test,
        FilterTest::Matches(_)
    ));
}

#[test]
fn cfg_80_transform_block_rules() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  d:\n    type: log\n    transform:\n      expression: \"  \"\n      timeoutMs: 0\n      onError: fail\n"
        )),
        [
            "- destinations.d.transform.expression: must not be blank",
            "- destinations.d.transform.onError: must be one of Fail, Skip, Dead, got \"fail\"; did you mean Fail?",
            "- destinations.d.transform.timeoutMs: must be greater than 0, got 0",
        ]
    );
}

#[test]
fn cfg_83_retention_policies() {
    let c = ok(&with_db(
        "retention:\n  enabled: true\n  outbox:\n    policy: COUNT\n    maxCount: 500\n  inbox:\n    policy: AGE\n    maxAge: 30d\n",
    ))
    .config;
    assert_eq!(c.retention.outbox.policy, OutboxRetentionPolicy::Count(500));
    assert_eq!(
        c.retention.inbox.policy,
        InboxRetentionPolicy::Age(Duration::from_secs(30 * 86_400))
    );
    assert_eq!(
        c.retention.outbox.cleanup_interval,
        Duration::from_secs(3600)
    );
    assert_eq!(c.retention.inbox.batch_size, 1000);
    assert_eq!(
        errors(&with_db(
            "retention:\n  enabled: true\n  outbox:\n    policy: AGE\n    maxAge: 0s\n    batchSize: 100001\n"
        )),
        [
            "- retention.outbox.batchSize: must be between 1 and 100000, got 100001",
            "- retention.outbox.maxAge: must be greater than 0s, got 0s",
        ]
    );
}

#[test]
fn cfg_85_log_section() {
    let c = ok(&with_db("log:\n  format: text\n  level: debug\n")).config;
    assert_eq!(
        (c.log.format, c.log.level),
        (LogFormat::Text, LogLevel::Debug)
    );
    let d = ok(DB).config;
    assert_eq!(
        (d.log.format, d.log.level),
        (LogFormat::Json, LogLevel::Info)
    );
}
