//! The configuration side of the outbox and destination requirements, one test per id
//! (outbox.md OUT-2, OUT-3; destinations.md DST-1, DST-5), through `queuebox_config::load`.

mod common;

use common::*;
use queuebox_config::{LoadError, load};

/// OUT-2: `capture.mode: notify` on another database stops the start; on PostgreSQL it loads.
#[test]
fn out_2_notify_needs_postgresql() {
    for db in [
        "database:\n  type: sqlite\n  url: \"sqlite::memory:\"\n",
        "database:\n  type: mysql\n  url: mysql://app@db:3306/app\n",
        "database:\n  type: sqlserver\n  url: \"Server=db;Database=app;User Id=app\"\n",
    ] {
        let lines = errors(&format!("{db}outbox:\n  capture:\n    mode: notify\n"));
        assert!(
            lines
                .iter()
                .any(|l| l == "- outbox.capture.mode: notify needs database.type postgresql"),
            "{db}: {lines:?}"
        );
    }
    let loaded = ok(&with_db("outbox:\n  capture:\n    mode: notify\n"));
    assert!(loaded.warnings.is_empty());
    // The same database without notify loads: the refusal is about the mode, not the database.
    ok(
        "database:\n  type: sqlite\n  url: \"sqlite::memory:\"\noutbox:\n  capture:\n    mode: polling\n",
    );
}

/// OUT-2: `retryMaxDelayMs` below `retryBaseDelayMs` stops the start; equal is allowed.
#[test]
fn out_2_retry_max_delay_below_the_base_delay_stops_the_start() {
    let err = load_yaml(&with_db(
        "outbox:\n  retryBaseDelayMs: 2000\n  retryMaxDelayMs: 1999\n",
    ))
    .unwrap_err();
    assert!(matches!(err, LoadError::Invalid(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "The configuration has 1 error. Fix it and start QueueBox again.\n\
         - outbox.retryMaxDelayMs: must be at least outbox.retryBaseDelayMs (2000), got 1999"
    );
    let loaded = ok(&with_db(
        "outbox:\n  retryBaseDelayMs: 2000\n  retryMaxDelayMs: 2000\n",
    ));
    assert_eq!(loaded.config.outbox.retry_base_delay_ms, 2000);
    assert_eq!(loaded.config.outbox.retry_max_delay_ms, 2000);
}

/// OUT-3: one warning per destination whose `timeoutMs` (set or default) is not below
/// `claimTimeoutMs`; a destination below it, or one without a timeout, gets none; the start
/// goes on.
#[test]
fn out_3_one_warning_per_destination_whose_timeout_is_not_below_the_lease() {
    let yaml = with_db(concat!(
        "outbox:\n  claimTimeoutMs: 20000\n",
        "destinations:\n",
        "  equal:\n    type: http\n    baseUrl: https://a.example.com\n    timeoutMs: 20000\n",
        "  above:\n    type: http\n    baseUrl: https://b.example.com\n    timeoutMs: 25000\n",
        "  below:\n    type: http\n    baseUrl: https://c.example.com\n    timeoutMs: 19999\n",
        "  defaulted:\n    type: http\n    baseUrl: https://d.example.com\n",
        "  console:\n    type: log\n",
    ));
    let lines = warnings(&yaml);
    let about = |name: &str| {
        lines
            .iter()
            .filter(|l| l.starts_with(&format!("- destinations.{name}.")))
            .count()
    };
    let line = |name: &str| {
        format!(
            "- destinations.{name}.timeoutMs: not below outbox.claimTimeoutMs, so a slow publish can be delivered twice"
        )
    };
    assert!(lines.contains(&line("equal")), "{lines:?}");
    assert!(lines.contains(&line("above")), "{lines:?}");
    // The default timeoutMs of an HTTP destination is 30000 (destinations.md §4.1).
    assert!(lines.contains(&line("defaulted")), "{lines:?}");
    assert_eq!(
        (about("equal"), about("above"), about("defaulted")),
        (1, 1, 1),
        "one warning each: {lines:?}"
    );
    assert_eq!(about("below"), 0, "{lines:?}");
    assert_eq!(about("console"), 0, "{lines:?}");
    assert_eq!(lines.len(), 3, "{lines:?}");

    // With the defaults (300000 ms lease, 30000 ms HTTP timeout) there is no warning.
    assert!(
        warnings(&with_db(
            "destinations:\n  d:\n    type: http\n    baseUrl: https://d.example.com\n"
        ))
        .is_empty()
    );
}

/// DST-1: `type` is required on every destination, and the error lists the types.
#[test]
fn dst_1_type_is_required_on_every_destination() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  billing:\n    baseUrl: https://billing.example.com\n  console:\n    type: log\n"
        )),
        ["- destinations.billing: missing type; set one of http, kafka, log, nats, rabbitmq"]
    );
}

/// DST-1: a key of another destination type stops the start, naming the path and the type
/// that takes the key.
#[test]
fn dst_1_a_key_of_another_type_names_the_path_and_the_type_that_takes_it() {
    assert_eq!(
        errors(&with_db(
            "destinations:\n  orders:\n    type: rabbitmq\n    url: amqp://rabbit\n    exchange: orders\n    baseUrl: https://x.example.com\n"
        )),
        ["- destinations.orders.baseUrl: unknown key for type rabbitmq; type http takes it"]
    );
    assert_eq!(
        errors(&with_db(
            "destinations:\n  hook:\n    type: http\n    baseUrl: https://x.example.com\n    exchange: orders\n"
        )),
        ["- destinations.hook.exchange: unknown key for type http; type rabbitmq takes it"]
    );
    assert_eq!(
        errors(&with_db(
            "destinations:\n  console:\n    type: log\n    bootstrapServers: k:9092\n"
        )),
        ["- destinations.console.bootstrapServers: unknown key for type log; type kafka takes it"]
    );
}

/// DST-5: the secrets of every destination kind (`password`, `token`, `clientSecret`,
/// `headerValue`, `saslPassword`, the password inside an AMQP URL) never appear in an error or
/// in the printed (debug) configuration; a printed secret shows as `***`.
#[test]
fn dst_5_destination_secrets_never_appear_in_errors_or_the_printed_configuration() {
    let destinations = concat!(
        "destinations:\n",
        "  basic:\n    type: http\n    baseUrl: https://a.example.com\n",
        "    auth:\n      type: basic\n      username: u\n      password: SECRET-BASIC-PW\n",
        "  header:\n    type: http\n    baseUrl: https://b.example.com\n",
        "    auth:\n      type: header\n      headerName: X-Api-Key\n      headerValue: SECRET-HEADER-VALUE\n",
        "  oauth:\n    type: http\n    baseUrl: https://c.example.com\n",
        "    auth:\n      type: oauth2\n      clientId: qb\n      clientSecret: SECRET-CLIENT\n",
        "      tokenUrl: https://auth.example.com/token\n",
        "  rabbit:\n    type: rabbitmq\n    url: amqp://queuebox:SECRET-AMQP@rabbit:5672/%2f\n    exchange: e\n",
        "  kafka:\n    type: kafka\n    bootstrapServers: k:9092\n    topic: t\n",
        "    securityProtocol: SASL_SSL\n    saslMechanism: PLAIN\n    saslUsername: u\n",
        "    saslPassword: SECRET-SASL\n",
        "  natsToken:\n    type: nats\n    servers: nats://n:4222\n    subject: s\n    token: SECRET-NATS-TOKEN\n",
        "  natsUser:\n    type: nats\n    servers: nats://n:4222\n    subject: s\n",
        "    username: u\n    password: SECRET-NATS-PW\n",
    );
    let loaded = ok(&with_db(destinations));
    let printed = format!("{:?}", loaded.config);
    assert!(!printed.contains("SECRET"), "{printed}");
    assert!(printed.contains("***"), "{printed}");
    assert!(
        printed.contains("amqp://queuebox:***@rabbit:5672/%2f"),
        "the AMQP URL prints with its password masked: {printed}"
    );
    // The values are still there for the one place that sends them.
    let rabbit = format!("{:?}", loaded.config.destinations["rabbit"]);
    assert!(!rabbit.contains("SECRET"), "{rabbit}");

    // An invalid configuration that touches every secret-bearing block prints none of them.
    let broken = format!(
        "{}{destinations}{}",
        DB,
        concat!(
            "  badRabbit:\n    type: rabbitmq\n    url: amqp://queuebox:SECRET-AMQP2@\n    exchange: e\n",
            "  badBasic:\n    type: http\n    baseUrl: https://d.example.com\n",
            "    auth:\n      type: basic\n      password: SECRET-BASIC2\n      passwrd: SECRET-TYPO\n",
            "  badSasl:\n    type: kafka\n    bootstrapServers: k:9092\n    topic: t\n",
            "    securityProtocol: SASL_SSL\n    saslPassword: SECRET-SASL2\n",
            "  badNats:\n    type: nats\n    servers: nats://n:4222\n    subject: s\n",
            "    username: u\n    token: SECRET-NATS2\n",
        )
    );
    let dir = TempDir::new();
    let file = dir.write("q.yml", &broken);
    let err = load(&options(&dir, Some(file), &[])).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("destinations.badRabbit.url") && text.contains("destinations.badBasic"),
        "the errors name the keys: {text}"
    );
    assert!(text.contains("destinations.badSasl"), "{text}");
    assert!(text.contains("destinations.badNats"), "{text}");
    assert!(!text.contains("SECRET"), "{text}");
    assert!(!format!("{err:?}").contains("SECRET"));
}
