//! Finding and reading the file (CFG-1..7), the error message (CFG-28), `check` exit codes
//! (CFG-32) and the examples of config.md §16 (CFG-120).

mod common;

use common::*;
use queuebox_config::{
    DatabaseTarget, DatabaseType, DestinationKind, LoadError, PgSslMode, SourceKind,
    format_warnings, load,
};

const MINIMAL: &str = "database:\n  url: postgres://app@db:5432/app\n";

#[test]
fn cfg_1_config_flag_wins_over_variable_and_local_file() {
    let dir = TempDir::new();
    let flag = dir.write("flag.yml", MINIMAL);
    let named = dir.write("named.yml", "database:\n  url: postgres://named@db/app\n");
    dir.write(
        "queuebox.yml",
        "database:\n  url: postgres://local@db/app\n",
    );
    let named_text = named.display().to_string();
    let loaded = load(&options(
        &dir,
        Some(flag.clone()),
        &[("QUEUEBOX_CONFIG_FILE", &named_text)],
    ))
    .unwrap();
    assert_eq!(loaded.file.as_deref(), Some(flag.as_path()));
    let loaded = load(&options(
        &dir,
        None,
        &[("QUEUEBOX_CONFIG_FILE", &named_text)],
    ))
    .unwrap();
    assert_eq!(loaded.file.as_deref(), Some(named.as_path()));
}

#[test]
fn cfg_1_empty_variable_falls_through_to_local_then_etc() {
    let dir = TempDir::new();
    let etc = dir.write(
        "etc-queuebox.yml",
        "database:\n  url: postgres://etc@db/app\n",
    );
    let loaded = load(&options(&dir, None, &[("QUEUEBOX_CONFIG_FILE", "")])).unwrap();
    assert_eq!(loaded.file.as_deref(), Some(etc.as_path()));
    let local = dir.write("queuebox.yml", MINIMAL);
    let loaded = load(&options(&dir, None, &[])).unwrap();
    assert_eq!(loaded.file.as_deref(), Some(local.as_path()));
}

#[test]
fn cfg_2_named_file_that_is_missing_does_not_fall_back() {
    let dir = TempDir::new();
    dir.write("queuebox.yml", MINIMAL);
    let err = load(&options(&dir, Some("missing.yml".into()), &[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "QueueBox could not read the configuration file missing.yml: no such file"
    );
    assert_eq!(err.check_exit_code(), 2);
    let err = load(&options(
        &dir,
        None,
        &[("QUEUEBOX_CONFIG_FILE", "gone.yml")],
    ))
    .unwrap_err();
    assert!(matches!(err, LoadError::Unreadable { .. }));
}

#[test]
fn cfg_3_no_file_and_no_variable_is_not_found() {
    let dir = TempDir::new();
    let err = load(&options(
        &dir,
        None,
        &[("QUEUEBOX_TEST_X", "1"), ("HOME", "/root")],
    ))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "QueueBox found no configuration. It looked for --config, QUEUEBOX_CONFIG_FILE, ./queuebox.yml and /etc/queuebox/queuebox.yml, and no QUEUEBOX_ variable sets a key."
    );
    assert_eq!(err.check_exit_code(), 2);
}

#[test]
fn cfg_3_variables_alone_build_a_configuration() {
    let dir = TempDir::new();
    let loaded = load(&options(
        &dir,
        None,
        &[
            (
                "QUEUEBOX_DATABASE_URL",
                "postgres://queuebox@db.internal:5432/app?sslmode=require",
            ),
            ("QUEUEBOX_OUTBOX_CONCURRENCY", "16"),
            ("QUEUEBOX_OUTBOX_CAPTURE_MODE", "notify"),
        ],
    ))
    .unwrap();
    assert_eq!(loaded.file, None);
    assert_eq!(loaded.config.outbox.concurrency, 16);
    assert_eq!(loaded.config.database.host_port, "db.internal:5432");
}

#[test]
fn cfg_5_syntax_error_names_line_and_column() {
    let err = load_yaml("database:\n  url: x\n   bad: [1\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("QueueBox could not read the configuration file ")
            && text.contains(": YAML syntax error at line "),
        "{text}"
    );
    assert!(text.contains(", column "), "{text}");
    assert_eq!(err.check_exit_code(), 2);
}

#[test]
fn cfg_5_more_than_one_document_is_not_yaml() {
    let err =
        load_yaml("database:\n  url: postgres://a@b/c\n---\nlog:\n  level: info\n").unwrap_err();
    assert!(matches!(err, LoadError::NotYaml { .. }));
    assert!(
        err.to_string()
            .ends_with(": one YAML document expected, found 2"),
        "{err}"
    );
}

#[test]
fn cfg_5_invalid_utf8_is_unreadable() {
    let dir = TempDir::new();
    let path = dir.path().join("bad.yml");
    std::fs::write(&path, b"database:\n  url: \xff\xfe\n").unwrap();
    let err = load(&options(&dir, Some(path), &[])).unwrap_err();
    assert!(matches!(err, LoadError::Unreadable { .. }), "{err}");
    assert!(err.to_string().ends_with(": the file is not valid UTF-8"));
}

#[test]
fn cfg_5_duplicate_key_is_invalid() {
    assert_eq!(
        errors("database:\n  url: postgres://a@b/c\n  poolSize: 1\n  poolSize: 2\n"),
        ["- database.poolSize: duplicate key"]
    );
}

#[test]
fn cfg_5_empty_file_reports_every_required_key() {
    assert_eq!(errors(""), ["- database.url: required"]);
}

#[test]
fn cfg_5_null_value_takes_the_default() {
    let loaded = ok(&with_db("outbox:\n  batchSize:\n  concurrency: ~\n"));
    assert_eq!(loaded.config.outbox.batch_size, 100);
    assert_eq!(loaded.config.outbox.concurrency, 8);
}

#[test]
fn cfg_5_anchors_and_aliases_are_allowed() {
    let loaded = ok(&with_db(
        "destinations:\n  a: &log\n    type: log\n  b: *log\nroutes:\n  - topicPattern: '**'\n    destination: a\n",
    ));
    assert_eq!(loaded.config.destinations.len(), 2);
}

#[test]
fn cfg_5_merge_key_is_an_unknown_key() {
    assert_eq!(
        errors(&with_db("base: &b\n  batchSize: 5\noutbox:\n  <<: *b\n")),
        ["- base: unknown key", "- outbox.<<: unknown key"]
    );
}

#[test]
fn cfg_6_key_names_are_exact_camel_case() {
    assert_eq!(
        errors(&with_db(
            "outbox:\n  batch_size: 1\n  BatchSize: 2\n  batch-size: 3\n"
        )),
        [
            "- outbox.BatchSize: unknown key; did you mean batchSize?",
            "- outbox.batch-size: unknown key; did you mean batchSize?",
            "- outbox.batch_size: unknown key; did you mean batchSize?",
        ]
    );
}

#[test]
fn cfg_7_relative_paths_resolve_against_the_working_directory() {
    let dir = TempDir::new();
    let file = dir.write(
        "config.yml",
        "database:\n  type: sqlite\n  url: sqlite://data/qb.db\ndestinations:\n  out:\n    type: log\n    file: logs/out.jsonl\n",
    );
    let loaded = load(&options(&dir, Some(file), &[])).unwrap();
    assert_eq!(
        loaded.config.database.host_port,
        dir.path().join("data/qb.db").display().to_string()
    );
    let DestinationKind::Log(log) = &loaded.config.destinations["out"].kind else {
        panic!("log destination")
    };
    assert_eq!(
        log.file.as_deref(),
        Some(dir.path().join("logs/out.jsonl").as_path())
    );
}

#[test]
fn cfg_28_three_mistakes_listed_in_one_error() {
    let err = load_yaml(
        "outbox:\n  batchSzie: 10\ndatabase:\n  url: postgres://app@db/app\ndestinations:\n  orders:\n    type: rabbitmq\n    url: amqp://rabbit\n    exchange: orders\n    baseUrl: https://x\n  billing:\n    baseUrl: https://billing\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "The configuration has 3 errors. Fix each one and start QueueBox again.\n\
         - destinations.billing: missing type; set one of http, kafka, log, nats, rabbitmq\n\
         - destinations.orders.baseUrl: unknown key for type rabbitmq; type http takes it\n\
         - outbox.batchSzie: unknown key; did you mean batchSize?"
    );
    assert_eq!(err.check_exit_code(), 1);
}

#[test]
fn cfg_28_one_error_has_the_singular_first_line() {
    let err = load_yaml(&with_db("outbox:\n  batchSize: 0\n")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "The configuration has 1 error. Fix it and start QueueBox again.\n- outbox.batchSize: must be greater than 0, got 0"
    );
}

#[test]
fn cfg_28_key_errors_by_path_then_unknown_variables_by_name() {
    let lines = errors_with(
        &with_db(
            "routes:\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n  - {}\n",
        ),
        &[("QUEUEBOX_ZZZ", "1"), ("QUEUEBOX_AAA", "1")],
    );
    let tenth = lines
        .iter()
        .position(|l| l.starts_with("- routes[10].destination"))
        .unwrap();
    let second = lines
        .iter()
        .position(|l| l.starts_with("- routes[2].destination"))
        .unwrap();
    assert!(second < tenth, "{lines:#?}");
    assert_eq!(lines[lines.len() - 2], "- QUEUEBOX_AAA: unknown variable");
    assert_eq!(lines[lines.len() - 1], "- QUEUEBOX_ZZZ: unknown variable");
}

#[test]
fn cfg_28_quoted_values_are_cut_to_64_characters() {
    let long = "x".repeat(80);
    let lines = errors(&with_db(&format!("log:\n  level: {long}\n")));
    assert_eq!(
        lines,
        [format!(
            "- log.level: must be one of error, warn, info, debug, trace, got \"{}…\"",
            "x".repeat(64)
        )]
    );
}

#[test]
fn cfg_32_warnings_block() {
    let loaded = ok(&with_db(
        "retention:\n  outbox:\n    policy: AGE\n    maxAge: 7d\n",
    ));
    assert_eq!(
        format_warnings(&loaded.warnings),
        "The configuration has 1 warning.\n- retention.outbox.policy: does nothing, because retention.enabled is false\n"
    );
}

#[test]
fn cfg_34_database_alone_is_a_valid_configuration() {
    let loaded = ok(MINIMAL);
    assert!(loaded.config.destinations.is_empty());
    assert!(loaded.config.routes.is_empty());
    assert!(loaded.config.sources.is_empty());
    assert!(loaded.warnings.is_empty());
}

const QUICKSTART: &str = r#"
database:
  type: sqlite
  url: sqlite://queuebox-quickstart.db

sources:
  orders:
    type: http
    path: /orders                 # POST /inbox/orders
    idempotencyKeyPath: $.id
    eventTypePath: $.type         # topic defaults to {{ eventType }}
    aggregateIdPath: $.orderId    # keeps each order's messages in order

destinations:
  console:
    type: log

routes:
  - topicPattern: "**"
    destination: console
"#;

#[test]
fn cfg_120_quickstart_example_loads() {
    let loaded = ok(QUICKSTART);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let c = &loaded.config;
    assert_eq!(c.database.db_type, DatabaseType::Sqlite);
    let SourceKind::Http(http) = &c.sources["orders"].kind else {
        panic!("http source")
    };
    assert_eq!(http.route, "/inbox/orders");
    assert_eq!(c.sources["orders"].topic.as_str(), "{{ eventType }}");
}

#[test]
fn cfg_120_quickstart_file_in_examples_loads() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yml"
    ))
    .expect("examples/quickstart.yml");
    ok(&text);
}

const PRODUCTION: &str = include_str!("data/production.yml");

#[test]
fn cfg_120_production_example_loads_with_its_files_and_variables() {
    let dir = TempDir::new();
    let secrets = dir.path().join("secrets");
    dir.write("secrets/db-password", "db-pw\n");
    dir.write("secrets/billing-client-secret", "client-secret\r\n");
    dir.write("secrets/partner-signing-secret", "signing-secret");
    let yaml = PRODUCTION.replace("/run/secrets", &secrets.display().to_string());
    let file = dir.write("queuebox.yml", &yaml);
    let loaded = load(&options(
        &dir,
        Some(file),
        &[
            ("ADMIN_TOKEN", "admin-token"),
            ("RABBIT_PASSWORD", "rabbit-pw"),
        ],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let c = &loaded.config;
    let DatabaseTarget::Postgres(pg) = &c.database.target else {
        panic!("postgres")
    };
    assert_eq!(pg.password.expose(), "db-pw");
    assert_eq!(pg.sslmode, PgSslMode::Require);
    assert_eq!(pg.user, "queuebox");
    assert_eq!(c.database.pool_size, 20);
    assert_eq!(c.inbox.relay.max_attempts, 10);
    assert_eq!(c.routes.len(), 2);
    let SourceKind::Rabbitmq(rabbit) = &c.sources["shipments"].kind else {
        panic!("rabbitmq source")
    };
    assert_eq!(
        rabbit.connection_url.expose(),
        "amqp://queuebox:rabbit-pw@rabbit:5672/%2f"
    );
    assert_eq!(rabbit.masked_url, "amqp://queuebox:***@rabbit:5672/%2f");
    let DestinationKind::Http(billing) = &c.destinations["billing"].kind else {
        panic!("http destination")
    };
    match &billing.auth {
        Some(queuebox_config::DestinationAuth::Oauth2 { client_secret, .. }) => {
            assert_eq!(client_secret.expose(), "client-secret")
        }
        other => panic!("oauth2 expected, got {other:?}"),
    }
}

#[test]
fn cfg_120_production_example_from_examples_dir_matches_the_spec() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/production.yml"
    ))
    .expect("examples/production.yml");
    let dir = TempDir::new();
    let secrets = dir.path().join("secrets");
    for name in [
        "db-password",
        "billing-client-secret",
        "partner-signing-secret",
    ] {
        dir.write(&format!("secrets/{name}"), "x");
    }
    let file = dir.write(
        "p.yml",
        &text.replace("/run/secrets", &secrets.display().to_string()),
    );
    load(&options(
        &dir,
        Some(file),
        &[("ADMIN_TOKEN", "t"), ("RABBIT_PASSWORD", "p")],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
}
