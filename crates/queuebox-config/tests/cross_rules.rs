//! The cross-key rules of config.md §15 (CFG-87..119, CFG-102 is start-up only), each with its
//! exact sentence, and CFG-26: a rule whose inputs are in error is skipped.

mod common;

use common::*;

const PULL_HTTP: &str = "    consumption: pull\n    idempotencyKeyHeader: X-Id\n";

#[test]
fn cfg_87_url_form_must_fit_the_type() {
    assert_eq!(
        errors("database:\n  url: sqlite://x.db\n"),
        [
            "- database.url: a sqlite URL does not fit database.type postgresql; set database.type: sqlite"
        ]
    );
    assert_eq!(
        errors("database:\n  url: https://db\n"),
        [
            "- database.url: is not a URL that database.type postgresql accepts; use postgres://, postgresql:// or jdbc:postgresql://"
        ]
    );
}

#[test]
fn cfg_88_sqlite_takes_no_credentials_or_pool() {
    assert_eq!(
        errors(
            "database:\n  type: sqlite\n  url: \"sqlite::memory:\"\n  username: a\n  password: b\n  poolSize: 2\n"
        ),
        [
            "- database.password: not used by type sqlite",
            "- database.poolSize: not used by type sqlite",
            "- database.username: not used by type sqlite",
        ]
    );
}

#[test]
fn cfg_89_renamed_column_with_migrate_true() {
    assert_eq!(
        errors(&with_db(
            "  outboxTableName: events\n  columnMapping:\n    outbox:\n      key: msg_key\n      topic: topic\n"
        )),
        [
            "- database.columnMapping.outbox.key: renames a column; set database.migrate: false and create the tables yourself",
            "- database.outboxTableName: renames a table; set database.migrate: false and create the tables yourself",
        ]
    );
    ok(&with_db(
        "  migrate: false\n  columnMapping:\n    outbox:\n      key: msg_key\n",
    ));
}

#[test]
fn cfg_89_a_renamed_column_from_a_variable_names_it() {
    assert_eq!(
        errors_with(DB, &[("QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_KEY", "k2")]),
        [
            "- database.columnMapping.outbox.key (QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_KEY): renames a column; set database.migrate: false and create the tables yourself"
        ]
    );
}

#[test]
fn cfg_90_table_names_differ_and_avoid_the_history_table() {
    assert_eq!(
        errors(&with_db("  migrate: false\n  inboxTableName: outbox\n")),
        ["- database.inboxTableName: the same name as database.outboxTableName"]
    );
    assert_eq!(
        errors(&with_db(
            "  migrate: false\n  outboxTableName: queuebox_schema_history\n"
        ))
        .len(),
        1
    );
}

#[test]
fn cfg_91_two_keys_of_one_table_map_to_one_column() {
    assert_eq!(
        errors(&with_db(
            "  migrate: false\n  columnMapping:\n    inbox:\n      source: event_type\n"
        )),
        [
            "- database.columnMapping.inbox.source: the same column as database.columnMapping.inbox.eventType"
        ]
    );
}

#[test]
fn cfg_92_notify_needs_postgresql() {
    assert_eq!(
        errors(
            "database:\n  type: sqlite\n  url: \"sqlite::memory:\"\noutbox:\n  capture:\n    mode: notify\n"
        ),
        ["- outbox.capture.mode: notify needs database.type postgresql"]
    );
}

#[test]
fn cfg_93_retry_max_at_least_base() {
    assert_eq!(
        errors(&with_db("outbox:\n  retryMaxDelayMs: 500\n")),
        ["- outbox.retryMaxDelayMs: must be at least outbox.retryBaseDelayMs (1000), got 500"]
    );
}

#[test]
fn cfg_94_destination_timeout_not_below_the_lease_is_a_warning() {
    assert_eq!(
        warnings(&with_db(
            "outbox:\n  claimTimeoutMs: 10000\ndestinations:\n  billing:\n    type: http\n    baseUrl: https://b.example.com\n    timeoutMs: 10000\n  fast:\n    type: http\n    baseUrl: https://f.example.com\n    timeoutMs: 9999\n"
        )),
        [
            "- destinations.billing.timeoutMs: not below outbox.claimTimeoutMs, so a slow publish can be delivered twice"
        ]
    );
}

#[test]
fn cfg_95_management_port_differs_from_http_port() {
    assert_eq!(
        errors(&with_db(
            "server:\n  httpPort: 8080\n  managementPort: 8080\n"
        )),
        ["- server.managementPort: the same port as server.httpPort"]
    );
}

#[test]
fn cfg_96_admin_needs_auth_unless_insecure() {
    assert_eq!(
        errors(&with_db("admin:\n  enabled: true\n")),
        [
            "- admin.auth: The admin API is enabled without authentication. Set admin.auth (bearer, api-key or hmac), set admin.insecure: true for a local test, or set admin.enabled: false."
        ]
    );
    assert_eq!(
        warnings(&with_db("admin:\n  enabled: true\n  insecure: true\n")),
        ["- admin.auth: The admin API runs without authentication."]
    );
}

#[test]
fn cfg_97_every_destination_needs_a_type() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  billing:\n    baseUrl: https://x\n"
        )),
        ["- destinations.billing: missing type; set one of http, kafka, log, nats, rabbitmq"]
    );
}

#[test]
fn cfg_98_broker_destinations_need_an_address() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  events:\n    type: kafka\n    bootstrapServers: k:9092\n  r:\n    type: rabbitmq\n    url: amqp://rabbit\n  n:\n    type: nats\n    servers: nats://n:4222\n"
        )),
        [
            "- destinations.events: set topic or topicFrom",
            "- destinations.n: set subject or subjectFrom",
            "- destinations.r: set exchange or exchangeFrom",
        ]
    );
}

#[test]
fn cfg_99_kafka_sasl_settings_follow_the_protocol() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  events:\n    type: kafka\n    bootstrapServers: k:9092\n    topic: t\n    saslUsername: u\n  s:\n    type: kafka\n    bootstrapServers: k:9092\n    topic: t\n    securityProtocol: SASL_SSL\n    saslMechanism: PLAIN\n"
        )),
        [
            "- destinations.events.saslUsername: applies only to SASL security protocols",
            "- destinations.s.saslPassword: required for securityProtocol SASL_SSL",
            "- destinations.s.saslUsername: required for securityProtocol SASL_SSL",
        ]
    );
}

#[test]
fn cfg_100_nats_credentials_come_together() {
    assert_eq!(
        errors(&with_db(
            "sources:\n  jobs:\n    type: nats\n    servers: nats://n:4222\n    stream: S\n    durable: D\n    consumption: pull\n    username: u\n    password: p\n    token: t\n"
        )),
        ["- sources.jobs.token: not together with username"]
    );
    assert_eq!(
        errors(&with_db(
            "destinations:\n  n:\n    type: nats\n    servers: nats://n:4222\n    subject: s\n    password: p\n"
        )),
        ["- destinations.n.password: needs username"]
    );
}

#[test]
fn cfg_101_base_url_rules() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  billing:\n    type: http\n    baseUrl: https://u:p@billing.example.com\n  dots:\n    type: http\n    baseUrl: https://x.example.com/a/../b\n  ftp:\n    type: http\n    baseUrl: ftp://x.example.com\n"
        )),
        [
            "- destinations.billing.baseUrl: must not contain user information",
            "- destinations.dots.baseUrl: must not contain a . or .. segment",
            "- destinations.ftp.baseUrl: must be an absolute http or https URL, got \"ftp://x.example.com\"",
        ]
    );
}

#[test]
fn cfg_103_route_destination_must_exist_with_suggestion() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  billing:\n    type: log\nroutes:\n  - topicPattern: a\n    destination: bililng\n"
        )),
        ["- routes[0].destination: no destination named \"bililng\"; did you mean billing?"]
    );
}

/// CFG-104 and destinations.md DST-22: a route key on a destination that is not rabbitmq or kafka
/// (here `log`) stops the start; the error names the route's path.
#[test]
fn cfg_104_routing_key_template_needs_rabbitmq_or_kafka() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  l:\n    type: log\nroutes:\n  - topicPattern: a\n    destination: l\n  - topicPattern: b\n    destination: l\n  - topicPattern: c\n    destination: l\n    routingKeyTemplate: \"{{ key }}\"\n"
        )),
        ["- routes[2].routingKeyTemplate: applies only to rabbitmq and kafka destinations"]
    );
}

#[test]
fn cfg_105_from_columns_are_checked() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  events:\n    type: kafka\n    bootstrapServers: k:9092\n    topicFrom: aggregateType\n"
        )),
        ["- destinations.events.topicFrom: must be aggregate_type, topic or key"]
    );
}

#[test]
fn cfg_106_http_source_needs_path_and_an_idempotency_key() {
    assert_eq!(
        errors(&with_db("sources:\n  stripe:\n    consumption: pull\n")),
        [
            "- sources.stripe: needs one of idempotencyKeyPath, idempotencyKeyHeader, idempotencyKeyExpression",
            "- sources.stripe.path: required for type http",
        ]
    );
}

#[test]
fn cfg_107_source_routes_collide() {
    assert_eq!(
        errors(&with_db(&format!(
            "sources:\n  a:\n    path: /orders\n{PULL_HTTP}  b:\n    path: /orders\n{PULL_HTTP}"
        ))),
        ["- sources.b.path: the same route as sources.a.path (/inbox/orders)"]
    );
    assert_eq!(
        errors(&with_db(&format!(
            "inbox:\n  basePath: /\nsources:\n  h:\n    path: /health\n{PULL_HTTP}"
        ))),
        ["- sources.h.path: the route /health is a fixed route of the data port"]
    );
    ok(&with_db(&format!(
        "server:\n  managementPort: 9090\ninbox:\n  basePath: /\nsources:\n  h:\n    path: /health\n{PULL_HTTP}"
    )));
}

#[test]
fn cfg_108_key_headers_must_be_kept_headers() {
    assert_eq!(
        errors(&with_db(
            "sources:\n  github:\n    path: /gh\n    consumption: pull\n    idempotencyKeyHeader: x-hub-signature-256\n    eventTypeHeader: Authorization\n    auth:\n      type: hmac\n      secret: s\n      headerName: X-Hub-Signature-256\n"
        )),
        [
            "- sources.github.eventTypeHeader: Authorization is a credential header, which QueueBox does not keep",
            "- sources.github.idempotencyKeyHeader: x-hub-signature-256 is the auth header, which QueueBox does not keep",
        ]
    );
}

#[test]
fn cfg_109_source_topic_placeholders() {
    assert_eq!(
        errors(&with_db(
            "sources:\n  orders:\n    path: /o\n    idempotencyKeyPath: $.id\n    topic: \"{{ key }}\"\n"
        )),
        ["- sources.orders.topic: unknown placeholder {{ key }}; use source, eventType"]
    );
    assert_eq!(
        errors(&with_db(
            "sources:\n  orders:\n    path: /o\n    idempotencyKeyPath: $.id\n    topic: \" \"\n"
        )),
        ["- sources.orders.topic: must not be blank"]
    );
}

#[test]
fn cfg_110_event_type_topic_needs_an_event_type_source() {
    assert_eq!(
        errors(&with_db(
            "sources:\n  stripe:\n    path: /s\n    idempotencyKeyPath: $.id\n"
        )),
        [
            "- sources.stripe.topic: uses {{ eventType }}, so set eventTypePath, eventTypeHeader or eventTypeExpression"
        ]
    );
    assert_eq!(
        errors(&with_db(
            "sources:\n  q:\n    type: rabbitmq\n    connectionUrl: amqp://r\n    queueName: q\n    topic: \"x.{{ eventType }}\"\n"
        )),
        [
            "- sources.q.topic: uses {{ eventType }}, so set eventTypePath, eventTypeExpression or eventTypeFromHeader"
        ]
    );
}

#[test]
fn cfg_111_a_fixed_push_topic_needs_a_route() {
    let yaml = "sources:\n  shipments:\n    type: rabbitmq\n    connectionUrl: amqp://r\n    queueName: q\n";
    assert_eq!(
        errors(&with_db(yaml)),
        [
            "- sources.shipments.topic: no route matches the topic shipments; add a route or set consumption: pull"
        ]
    );
    ok(&with_db(&format!(
        "{yaml}inbox:\n  relay:\n    enabled: false\n"
    )));
    ok(&with_db(&format!(
        "{yaml}destinations:\n  l:\n    type: log\nroutes:\n  - topicPattern: ship*\n    destination: l\n"
    )));
}

#[test]
fn cfg_112_topic_on_a_pull_source_is_unused() {
    assert_eq!(
        warnings(&with_db(
            "sources:\n  orders:\n    path: /o\n    idempotencyKeyPath: $.id\n    consumption: pull\n    topic: x\n"
        )),
        ["- sources.orders.topic: unused, because consumption is pull"]
    );
}

#[test]
fn cfg_113_scheduled_at_needs_an_initial_delay() {
    assert_eq!(
        errors(&with_db(&format!(
            "sources:\n  events:\n    path: /e\n{PULL_HTTP}    scheduledAtPath: $.at\n"
        ))),
        ["- sources.events.initialDelay: must be greater than 0s when scheduledAtPath is set"]
    );
    ok(&with_db(&format!(
        "sources:\n  events:\n    path: /e\n{PULL_HTTP}    scheduledAtPath: $.at\n    initialDelay: 5s\n"
    )));
}

#[test]
fn cfg_114_paths_name_their_position() {
    assert_eq!(
        errors(&with_db(&format!(
            "sources:\n  orders:\n    path: /o\n{PULL_HTTP}    aggregateIdPath: [$.a, $..id]\n    eventTypePath: []\n"
        ))),
        [
            "- sources.orders.aggregateIdPath[1]: not a definite path: $..id",
            "- sources.orders.eventTypePath: must not be empty",
        ]
    );
}

#[test]
fn cfg_115_timestamp_dot_body_needs_a_timestamp_header() {
    assert_eq!(
        errors(&with_db(&format!(
            "sources:\n  partner:\n    path: /p\n{PULL_HTTP}    auth:\n      type: hmac\n      secret: s\n      signaturePayloadFormat: timestamp-dot-body\n"
        ))),
        ["- sources.partner.auth.signaturePayloadFormat: TIMESTAMP_DOT_BODY needs timestampHeader"]
    );
}

#[test]
fn cfg_116_rate_limit_on_a_broker_source_is_a_warning() {
    assert_eq!(
        warnings(&with_db(
            "sources:\n  jobs:\n    type: nats\n    servers: nats://n:4222\n    stream: S\n    durable: D\n    consumption: pull\n    rateLimit:\n      requestsPerMinute: 60\n"
        )),
        ["- sources.jobs.rateLimit: ignored, because only http sources have a rate limit"]
    );
}

#[test]
fn cfg_117_inbox_retention_has_no_count_policy() {
    assert_eq!(
        errors(&with_db("retention:\n  inbox:\n    policy: COUNT\n")),
        ["- retention.inbox.policy: must be one of AGE, DISABLED, got \"COUNT\""]
    );
}

#[test]
fn cfg_118_policy_parameters() {
    assert_eq!(
        errors(&with_db(
            "retention:\n  enabled: true\n  outbox:\n    policy: AGE\n    maxCount: 5\n"
        )),
        [
            "- retention.outbox.maxAge: required for policy AGE",
            "- retention.outbox.maxCount: applies only to policy COUNT",
        ]
    );
}

#[test]
fn cfg_119_policy_without_enabled_is_a_warning() {
    assert_eq!(
        warnings(&with_db(
            "retention:\n  outbox:\n    policy: COUNT\n    maxCount: 5\n"
        )),
        ["- retention.outbox.policy: does nothing, because retention.enabled is false"]
    );
}

#[test]
fn cfg_26_a_rule_whose_input_is_in_error_is_skipped() {
    // retryBaseDelayMs is wrong itself, so CFG-93 does not add a second line.
    assert_eq!(
        errors(&with_db(
            "outbox:\n  retryBaseDelayMs: abc\n  retryMaxDelayMs: 500\n"
        )),
        ["- outbox.retryBaseDelayMs: expected a whole number, got \"abc\""]
    );
    // A destination in error does not also make its route's reference unknown.
    assert_eq!(
        errors(&with_db(
            "destinations:\n  d:\n    type: http\nroutes:\n  - topicPattern: a\n    destination: d\n"
        )),
        ["- destinations.d.baseUrl: required for type http"]
    );
    // The database type in error skips CFG-87 and CFG-92.
    assert_eq!(
        errors(
            "database:\n  type: postgres\n  url: sqlite://x\noutbox:\n  capture:\n    mode: notify\n"
        ),
        [
            "- database.type: must be one of postgresql, sqlserver, mysql, sqlite, got \"postgres\"; did you mean postgresql?"
        ]
    );
}

/// pull.md PULL-2 (configuration part): a pull source needs no topic, route or destination; the
/// same source as `push` is refused for want of a route (CFG-111).
#[test]
fn pull_2_a_pull_source_needs_no_topic_route_or_destination() {
    let source = "sources:\n  shipments:\n    type: rabbitmq\n    connectionUrl: amqp://r\n    queueName: q\n";
    ok(&with_db(&format!("{source}    consumption: pull\n")));
    assert_eq!(
        errors(&with_db(&format!("{source}    consumption: push\n"))),
        [
            "- sources.shipments.topic: no route matches the topic shipments; add a route or set consumption: pull"
        ]
    );
}
