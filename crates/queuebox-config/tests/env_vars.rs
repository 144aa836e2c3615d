//! `QUEUEBOX_*` variables end to end (CFG-8..18).

mod common;

use common::*;
use queuebox_config::{CaptureMode, DestinationKind, FilterTest, SourceKind};

#[test]
fn cfg_8_table_examples_reach_their_keys() {
    let loaded = ok_with(
        "",
        &[
            ("QUEUEBOX_DATABASE_URL", "postgres://app@db/app"),
            ("QUEUEBOX_DATABASE_MIGRATE", "false"),
            ("QUEUEBOX_OUTBOX_POLLINTERVALMS", "250"),
            ("QUEUEBOX_OUTBOX_CAPTURE_MODE", "notify"),
            ("QUEUEBOX_ROUTES_0_TOPICPATTERN", "order.*"),
            ("QUEUEBOX_ROUTES_0_DESTINATION", "my_api"),
            ("QUEUEBOX_SOURCES_ORDERS_TYPE", "kafka"),
            ("QUEUEBOX_SOURCES_ORDERS_BOOTSTRAPSERVERS", "k:9092"),
            ("QUEUEBOX_SOURCES_ORDERS_GROUPID", "g"),
            ("QUEUEBOX_SOURCES_ORDERS_TOPIC", "order.created"),
            ("QUEUEBOX_SOURCES_ORDERS_TOPICS_0", "orders"),
            ("QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_HEADER", "x-a"),
            ("QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_EXISTS", "true"),
            (
                "QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_1_HEADER",
                "x-tenant",
            ),
            ("QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_1_IN_0", "t1"),
            ("QUEUEBOX_DESTINATIONS_MY__API_TYPE", "http"),
            (
                "QUEUEBOX_DESTINATIONS_MY__API_BASEURL",
                "https://api.example.com",
            ),
            ("QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_KEY", "msg_key"),
        ],
    );
    let c = &loaded.config;
    assert_eq!(c.outbox.poll_interval_ms, 250);
    assert_eq!(c.outbox.capture_mode, CaptureMode::Notify);
    assert_eq!(c.routes[0].topic_pattern.as_str(), "order.*");
    let SourceKind::Kafka(kafka) = &c.sources["orders"].kind else {
        panic!("kafka")
    };
    assert_eq!(kafka.topics, ["orders"]);
    match &c.sources["orders"].filter.require[1].test {
        FilterTest::In(values) => assert_eq!(values, &["t1"]),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.destinations["my_api"].kind,
        DestinationKind::Http(_)
    ));
    assert_eq!(c.database.layout.outbox.key.as_str(), "msg_key");
}

#[test]
fn cfg_9_underscores_in_a_camel_case_key_name_an_unknown_path() {
    assert_eq!(
        errors_with(DB, &[("QUEUEBOX_OUTBOX_POLL_INTERVAL_MS", "5")]),
        [
            "- QUEUEBOX_OUTBOX_POLL_INTERVAL_MS: unknown variable; did you mean QUEUEBOX_OUTBOX_POLLINTERVALMS?"
        ]
    );
}

#[test]
fn cfg_10_positions_must_run_from_zero() {
    let lines = errors_with(
        &with_db("destinations:\n  d:\n    type: log\n"),
        &[
            ("QUEUEBOX_ROUTES_1_TOPICPATTERN", "a"),
            ("QUEUEBOX_ROUTES_1_DESTINATION", "d"),
        ],
    );
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("- routes[1] (QUEUEBOX_ROUTES_1_DESTINATION): "),
        "{lines:?}"
    );
}

#[test]
fn cfg_11_a_list_key_without_position_is_a_list_of_one() {
    let loaded = ok_with(
        &with_db("sources:\n  orders:\n    path: /orders\n    consumption: pull\n"),
        &[("QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH", "$.id")],
    );
    let paths = &loaded.config.sources["orders"].idempotency_key_path;
    assert_eq!(paths.len(), 1);
    assert_eq!(paths[0].as_str(), "$.id");
}

#[test]
fn cfg_12_names_match_existing_entries_and_new_ones_are_lower_case() {
    let loaded = ok_with(
        &with_db("destinations:\n  Billing:\n    type: log\n"),
        &[
            ("QUEUEBOX_DESTINATIONS_BILLING_FILE", "billing.log"),
            ("QUEUEBOX_DESTINATIONS_AUDIT_TYPE", "log"),
        ],
    );
    let names: Vec<&String> = loaded.config.destinations.keys().collect();
    assert_eq!(names, ["Billing", "audit"]);
    let DestinationKind::Log(log) = &loaded.config.destinations["Billing"].kind else {
        panic!("log")
    };
    assert!(log.file.as_ref().unwrap().ends_with("billing.log"));
}

#[test]
fn cfg_13_free_form_map_keys_are_lower_case() {
    let loaded = ok_with(
        &with_db("destinations:\n  api:\n    type: http\n    baseUrl: https://api.example.com\n"),
        &[("QUEUEBOX_DESTINATIONS_API_HEADERS_X__TENANT", "t1")],
    );
    let headers = &loaded.config.destinations["api"].headers;
    assert_eq!(headers[0].0.as_str(), "x_tenant");
    assert_eq!(headers[0].1.expose(), "t1");
}

#[test]
fn cfg_14_variable_wins_and_merges_into_the_file_section() {
    let loaded = ok_with(
        &with_db("outbox:\n  batchSize: 5\n  concurrency: 3\n"),
        &[("QUEUEBOX_OUTBOX_BATCHSIZE", "50")],
    );
    assert_eq!(loaded.config.outbox.batch_size, 50);
    assert_eq!(loaded.config.outbox.concurrency, 3);
}

#[test]
fn cfg_14_list_from_variables_replaces_the_file_list() {
    let loaded = ok_with(
        &with_db(
            "destinations:\n  a:\n    type: log\n  b:\n    type: log\nroutes:\n  - topicPattern: x\n    destination: a\n  - topicPattern: y\n    destination: a\n",
        ),
        &[
            ("QUEUEBOX_ROUTES_0_TOPICPATTERN", "z"),
            ("QUEUEBOX_ROUTES_0_DESTINATION", "b"),
        ],
    );
    assert_eq!(loaded.config.routes.len(), 1);
    assert_eq!(loaded.config.routes[0].destination, "b");
}

#[test]
fn cfg_14_a_variable_that_sets_a_section_stops_the_start() {
    assert_eq!(
        errors_with(DB, &[("QUEUEBOX_OUTBOX", "1")]),
        ["- outbox (QUEUEBOX_OUTBOX): expected a section"]
    );
}

#[test]
fn cfg_15_variable_values_convert_and_expand_file_secrets_not_placeholders() {
    let dir = TempDir::new();
    let secret = dir.write("pw", "from-file\n");
    let secret_ref = format!("file:{}", secret.display());
    let loaded = ok_with(
        DB,
        &[
            ("QUEUEBOX_DATABASE_PASSWORD", &secret_ref),
            ("QUEUEBOX_DATABASE_MIGRATE", "FALSE"),
        ],
    );
    let queuebox_config::DatabaseTarget::Postgres(pg) = &loaded.config.database.target else {
        panic!("postgres")
    };
    assert_eq!(pg.password.expose(), "from-file");
    assert!(!loaded.config.database.migrate);
    let lines = errors_with(DB, &[("QUEUEBOX_INBOX_BASEPATH", "/${X}"), ("X", "y")]);
    assert!(
        lines[0].starts_with("- inbox.basePath (QUEUEBOX_INBOX_BASEPATH): "),
        "{lines:?}"
    );
}

#[test]
fn cfg_16_non_setting_variables_are_ignored() {
    ok_with(
        DB,
        &[
            ("QUEUEBOX_CONFIG_FILE", ""),
            ("QUEUEBOX_TEST_DATABASE", "x"),
            ("QUEUEBOX_DB_SERVICE_HOST", "10.0.0.1"),
            ("QUEUEBOX_SERVICE_PORT_HTTP", "8080"),
            ("QUEUEBOX_PORT", "tcp://10.0.0.2:8080"),
            ("QUEUEBOX_PORT_8080_TCP_ADDR", "10.0.0.2"),
        ],
    );
}

#[test]
fn cfg_17_unknown_variables_stop_the_start_with_suggestions() {
    assert_eq!(
        errors_with(
            DB,
            &[
                ("QUEUEBOX_OUTBOX_BATCHSZIE", "1"),
                ("QUEUEBOX_LOGG_LEVEL", "info"),
                ("QUEUEBOX_WHATEVER", "1")
            ]
        ),
        [
            "- QUEUEBOX_LOGG_LEVEL: unknown variable; did you mean QUEUEBOX_LOG_LEVEL?",
            "- QUEUEBOX_OUTBOX_BATCHSZIE: unknown variable; did you mean QUEUEBOX_OUTBOX_BATCHSIZE?",
            "- QUEUEBOX_WHATEVER: unknown variable",
        ]
    );
}

#[test]
fn cfg_18_an_error_about_a_variable_value_names_the_variable() {
    assert_eq!(
        errors_with(DB, &[("QUEUEBOX_OUTBOX_BATCHSIZE", "0")]),
        ["- outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE): must be greater than 0, got 0"]
    );
    assert_eq!(
        errors_with(DB, &[("QUEUEBOX_DATABASE_MIGRATE", "yes")]),
        ["- database.migrate (QUEUEBOX_DATABASE_MIGRATE): expected true or false, got \"yes\""]
    );
}

#[test]
fn cfg_25_a_variable_key_of_another_type_is_reported_with_the_variable() {
    assert_eq!(
        errors_with(
            &with_db("destinations:\n  d:\n    type: log\n"),
            &[("QUEUEBOX_DESTINATIONS_D_BASEURL", "https://x")]
        ),
        [
            "- destinations.d.baseUrl (QUEUEBOX_DESTINATIONS_D_BASEURL): unknown key for type log; type http takes it"
        ]
    );
}

#[test]
fn cfg_18_a_block_made_by_variables_names_the_variable() {
    assert_eq!(
        errors_with(
            DB,
            &[(
                "QUEUEBOX_DESTINATIONS_BILLING_BASEURL",
                "https://b.example.com"
            )]
        ),
        [
            "- destinations.billing (QUEUEBOX_DESTINATIONS_BILLING_BASEURL): missing type; set one of http, kafka, log, nats, rabbitmq"
        ]
    );
}
