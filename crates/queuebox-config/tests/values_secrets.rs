//! Placeholders (CFG-19, CFG-20), secrets and masking (CFG-21..23), value formats (CFG-24).

mod common;

use common::*;
use queuebox_config::{DatabaseTarget, InboundAuth, LoadError, load, mask_url};

#[test]
fn cfg_19_placeholders_expand_in_file_values_and_convert_afterwards() {
    let loaded = ok_with(
        &with_db(
            "server:\n  httpPort: ${PORT:-8080}\n  managementPort: ${MGMT}\ninbox:\n  basePath: /${PREFIX}\n",
        ),
        &[("MGMT", "9090"), ("PREFIX", "in")],
    );
    assert_eq!(loaded.config.server.http_port, 8080);
    assert_eq!(loaded.config.server.management_port, Some(9090));
    assert_eq!(loaded.config.inbox.base_path, "/in");
}

#[test]
fn cfg_19_double_dollar_is_literal_and_keys_are_never_expanded() {
    let loaded = ok(&with_db(
        "destinations:\n  d:\n    type: http\n    baseUrl: https://x.example.com\n    headers:\n      X-Literal: $${NOT_EXPANDED}\n",
    ));
    assert_eq!(
        loaded.config.destinations["d"].headers[0].1.expose(),
        "${NOT_EXPANDED}"
    );
    assert_eq!(
        errors(&with_db("outbox:\n  ${KEY}: 1\n")),
        ["- outbox.${KEY}: unknown key"]
    );
}

#[test]
fn cfg_20_unset_placeholder_without_fallback_stops_the_start() {
    assert_eq!(
        errors("database:\n  url: postgres://app@db/app\n  password: ${DB_PASSWORD}\n"),
        ["- database.password: ${DB_PASSWORD} is not set and has no fallback"]
    );
    let loaded = ok_with(
        "database:\n  url: postgres://app@db/app\n  password: ${DB_PASSWORD}\n",
        &[("DB_PASSWORD", "")],
    );
    let DatabaseTarget::Postgres(pg) = &loaded.config.database.target else {
        panic!()
    };
    assert_eq!(pg.password.expose(), "");
}

#[test]
fn cfg_21_file_secret_is_read_once_without_trailing_line_breaks() {
    let dir = TempDir::new();
    dir.write("secrets/token", "s3cr3t-token\r\n\n");
    let file = dir.write(
        "q.yml",
        "database:\n  url: postgres://app@db/app\nadmin:\n  enabled: true\n  auth:\n    type: bearer\n    token: file:secrets/token\n",
    );
    let loaded = load(&options(&dir, Some(file), &[])).unwrap();
    let Some(InboundAuth::Bearer { token }) = &loaded.config.admin.auth else {
        panic!()
    };
    assert_eq!(token.expose(), "s3cr3t-token");
}

#[test]
fn cfg_21_unreadable_secret_file_names_key_and_file_never_content() {
    assert_eq!(
        errors(
            "database:\n  url: postgres://app@db/app\n  password: file:/nonexistent/db-password\n"
        ),
        ["- database.password: cannot read /nonexistent/db-password: no such file"]
    );
}

#[test]
fn cfg_21_file_prefix_on_a_key_that_is_not_secret_has_no_meaning() {
    let loaded = ok(&with_db(
        "sources:\n  s:\n    path: /s\n    consumption: pull\n    idempotencyKeyHeader: X-Id\n    transform:\n      expression: file:/x\n",
    ));
    assert_eq!(
        loaded.config.sources["s"]
            .transform
            .as_ref()
            .unwrap()
            .expression,
        "file:/x"
    );
}

#[test]
fn cfg_22_secret_never_appears_in_errors_or_debug_output() {
    let dir = TempDir::new();
    dir.write("pw", "TOPSECRET-FILE");
    let yaml = concat!(
        "database:\n  url: postgres://app:TOPSECRET-URL@db/app\n  password: file:pw\n  poolSize: 0\n",
        "admin:\n  enabled: true\n  auth:\n    type: hmac\n    secret: TOPSECRET-HMAC\n",
        "    signaturePayloadFormat: TIMESTAMP_DOT_BODY\n",
        "destinations:\n  d:\n    type: http\n    baseUrl: https://user:TOPSECRET-BASE@x.example.com\n",
        "    headers:\n      X-Key: TOPSECRET-HEADER\n      Host: TOPSECRET-RESERVED\n",
        "  r:\n    type: rabbitmq\n    url: ftp://u:TOPSECRET-AMQP@r\n    exchange: e\n",
    );
    let file = dir.write("q.yml", yaml);
    let err = load(&options(&dir, Some(file), &[])).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("destinations.d.baseUrl: must not contain user information"),
        "{text}"
    );
    assert!(
        text.contains("destinations.r.url: must be an amqp:// or amqps:// URI with a host"),
        "{text}"
    );
    assert!(!text.contains("TOPSECRET"), "{text}");
    assert!(!format!("{err:?}").contains("TOPSECRET"));

    // A valid configuration's debug form shows no secret either.
    let file = dir.write(
        "ok.yml",
        concat!(
            "database:\n  url: postgres://app:TOPSECRET-URL@db/app\n  password: file:pw\n",
            "destinations:\n  d:\n    type: http\n    baseUrl: https://x.example.com\n",
            "    headers:\n      X-Key: TOPSECRET-HEADER\n",
        ),
    );
    let loaded = load(&options(&dir, Some(file), &[])).unwrap();
    let debug = format!("{:?}", loaded.config);
    assert!(!debug.contains("TOPSECRET"), "{debug}");
    assert!(debug.contains("postgres://app:***@db/app"));
}

#[test]
fn cfg_23_masked_url_and_mask_url() {
    let loaded = ok("database:\n  url: postgres://app:pw@db:5432/app\n");
    assert_eq!(
        loaded.config.database.masked_url,
        "postgres://app:***@db:5432/app"
    );
    assert_eq!(loaded.config.database.host_port, "db:5432");
    assert_eq!(
        mask_url("Server=db;User Id=app;Password=pw"),
        "Server=db;User Id=app;Password=***"
    );
    assert_eq!(
        mask_url("jdbc:sqlserver://db;user=app;password=pw"),
        "jdbc:sqlserver://db;user=app;password=***"
    );
}

#[test]
fn cfg_24_integer_formats() {
    assert_eq!(
        ok(&with_db("outbox:\n  batchSize: \"250\"\n"))
            .config
            .outbox
            .batch_size,
        250
    );
    assert_eq!(
        errors(&with_db(
            "outbox:\n  batchSize: 1.5\n  concurrency: 1e3\n  maxAttempts: 1_000\n"
        )),
        [
            "- outbox.batchSize: expected a whole number, got \"1.5\"",
            "- outbox.concurrency: expected a whole number, got \"1e3\"",
            "- outbox.maxAttempts: expected a whole number, got \"1_000\"",
        ]
    );
}

#[test]
fn cfg_24_durations_and_booleans() {
    assert_eq!(
        errors(&with_db(
            "retention:\n  enabled: yes\n  outbox:\n    policy: AGE\n    maxAge: 1h30m\n"
        )),
        [
            "- retention.enabled: expected true or false, got \"yes\"",
            "- retention.outbox.maxAge: expected a duration such as 30s, 5m, 1h or 7d, got \"1h30m\"",
        ]
    );
}

#[test]
fn cfg_24_enumeration_near_miss_gets_a_suggestion() {
    let lines = errors(&with_db(
        "destinations:\n  r:\n    type: rabbitmq\n    url: amqp://rabbit\n    exchange: e\n    exchangeType: Topic\n",
    ));
    assert_eq!(
        lines,
        [
            "- destinations.r.exchangeType: must be one of topic, direct, fanout, got \"Topic\"; did you mean topic?"
        ]
    );
}

#[test]
fn cfg_24_header_names_are_tokens() {
    let lines = errors(&with_db(
        "sources:\n  s:\n    path: /s\n    consumption: pull\n    idempotencyKeyHeader: \"X Id\"\n",
    ));
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("- sources.s.idempotencyKeyHeader: must be a header name"),
        "{lines:?}"
    );
}

#[test]
fn cfg_24_names_of_sources_and_destinations() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  _bad:\n    type: log\n  billing:\n    type: log\n  Billing:\n    type: log\n"
        )),
        [
            "- destinations.Billing: differs from destinations.billing only in letter case",
            "- destinations._bad: a name must be 1 to 64 letters, digits, _ or -, starting with a letter or digit",
        ]
    );
}

#[test]
fn cfg_24_sql_identifiers() {
    let lines = errors(&with_db("  migrate: false\n  outboxTableName: 1outbox\n"));
    assert_eq!(
        lines,
        [
            "- database.outboxTableName: must start with a letter or _ and hold only letters, digits and _, got \"1outbox\""
        ]
    );
}

#[test]
fn cfg_24_a_required_secret_must_not_be_empty() {
    assert_eq!(
        errors("database:\n  url: \"\"\n"),
        ["- database.url: must not be empty"]
    );
}

#[test]
fn cfg_24_strings_take_numbers_as_their_text() {
    let loaded = ok(&with_db("sources:\n  s:\n    path: /s\n    consumption: pull\n    idempotencyKeyHeader: X-Id\n    type: nats\n"
        .replace("    path: /s\n", "")
        .replace("    idempotencyKeyHeader: X-Id\n", "    servers: nats://n:4222\n    stream: 1.10\n    durable: 42\n")
        .as_str()));
    let queuebox_config::SourceKind::Nats(nats) = &loaded.config.sources["s"].kind else {
        panic!()
    };
    assert_eq!(nats.stream, "1.10");
    assert_eq!(nats.durable, "42");
}

#[test]
fn cfg_5_error_load_is_not_yaml_for_non_mapping_top_level() {
    let err = load_yaml("- a\n- b\n").unwrap_err();
    assert!(matches!(err, LoadError::NotYaml { .. }));
}

/// Issue 17 defect 6 (CFG-21, SEC-12): `file:` reads a regular file of at most 64 KiB. A device
/// (`/dev/zero` would fill the memory), a FIFO (it would block the start for ever) and a bigger
/// file are refused with the key, the file and the reason, and never the content.
#[test]
fn cfg_21_file_secret_is_a_regular_file_of_at_most_64_kib() {
    let started = std::time::Instant::now();
    assert_eq!(
        errors("database:\n  url: postgres://app@db/app\n  password: file:/dev/zero\n"),
        ["- database.password: cannot read /dev/zero: not a regular file"]
    );

    let dir = TempDir::new();
    dir.write("big", &"x".repeat(64 * 1024 + 1));
    // 64 KiB with its line break: the limit is on the file, before the break is trimmed.
    dir.write("fits", &format!("{}\n", "y".repeat(64 * 1024 - 1)));
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let yaml =
        |file: &str| format!("database:\n  url: postgres://app@db/app\n  password: file:{file}\n");
    let big = dir.path().join("big");
    let fits = dir.path().join("fits");
    assert_eq!(
        errors(&yaml(&big.display().to_string())),
        [format!(
            "- database.password: cannot read {}: larger than 65536 bytes",
            big.display()
        )]
    );
    assert_eq!(
        errors(&yaml(&fifo.display().to_string())),
        [format!(
            "- database.password: cannot read {}: not a regular file",
            fifo.display()
        )]
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "neither /dev/zero nor the FIFO is read: {:?}",
        started.elapsed()
    );
    let loaded = ok(&yaml(&fits.display().to_string()));
    let DatabaseTarget::Postgres(pg) = &loaded.config.database.target else {
        panic!()
    };
    assert_eq!(
        pg.password.expose().len(),
        64 * 1024 - 1,
        "a file of exactly 64 KiB is fine"
    );
}
