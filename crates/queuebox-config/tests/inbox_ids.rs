//! The configuration side of the inbox and retention requirements, one test per id (inbox.md
//! INB-4; operations.md RET-1), through `queuebox_config::load`.

mod common;

use std::time::Duration;

use common::*;
use queuebox_config::{InboxRetentionPolicy, LoadError, OutboxRetentionPolicy};

/// A pull `http` source `s` with a key header, ready for one more key.
const S: &str = "sources:\n  s:\n    path: /s\n    consumption: pull\n";

/// Loads `S` + `rest` and returns the error lines.
fn source_errors(rest: &str) -> Vec<String> {
    errors(&with_db(&format!("{S}{rest}")))
}

/// INB-4: each check at start stops the start and names every offending key path (the
/// numbers are the items of INB-4 that apply to `http` sources; item 4, expressions, is the
/// binary's, see `crates/queuebox/tests/inbox_ids.rs`).
#[test]
fn inb_4_every_check_at_start_names_the_offending_key_path() {
    // 1. No idempotency key: the error names the three keys.
    assert_eq!(
        source_errors(""),
        [
            "- sources.s: needs one of idempotencyKeyPath, idempotencyKeyHeader, idempotencyKeyExpression"
        ]
    );
    // 2. Header keys and filter headers: blank, credential headers in any letter case, and the
    // auth header of the source.
    assert_eq!(
        source_errors("    idempotencyKeyHeader: \" \"\n"),
        ["- sources.s.idempotencyKeyHeader: must not be blank"]
    );
    assert_eq!(
        source_errors(
            "    idempotencyKeyHeader: COOKIE\n    aggregateIdHeader: proxy-authorization\n    eventTypeHeader: AuThOrIzAtIoN\n    scheduledAtHeader: Cookie\n    initialDelay: 5s\n    filter:\n      exclude:\n        - header: authorization\n          exists: true\n"
        ),
        [
            "- sources.s.aggregateIdHeader: proxy-authorization is a credential header, which QueueBox does not keep",
            "- sources.s.eventTypeHeader: AuThOrIzAtIoN is a credential header, which QueueBox does not keep",
            "- sources.s.filter.exclude[0].header: authorization is a credential header, which QueueBox does not keep",
            "- sources.s.idempotencyKeyHeader: COOKIE is a credential header, which QueueBox does not keep",
            "- sources.s.scheduledAtHeader: Cookie is a credential header, which QueueBox does not keep",
        ]
    );
    assert_eq!(
        source_errors(
            "    idempotencyKeyHeader: x-api-key\n    filter:\n      require:\n        - header: X-API-KEY\n          exists: true\n    auth:\n      type: api-key\n      key: k\n      headerName: X-Api-Key\n"
        ),
        [
            "- sources.s.filter.require[0].header: X-API-KEY is the auth header, which QueueBox does not keep",
            "- sources.s.idempotencyKeyHeader: x-api-key is the auth header, which QueueBox does not keep",
        ]
    );
    // The default header names of the auth types count too, and a blank filter header.
    assert_eq!(
        source_errors(
            "    idempotencyKeyHeader: x-signature\n    auth:\n      type: hmac\n      secret: s\n"
        ),
        [
            "- sources.s.idempotencyKeyHeader: x-signature is the auth header, which QueueBox does not keep"
        ]
    );
    assert_eq!(
        source_errors(
            "    idempotencyKeyHeader: X-API-KEY\n    auth:\n      type: api-key\n      key: k\n"
        ),
        [
            "- sources.s.idempotencyKeyHeader: X-API-KEY is the auth header, which QueueBox does not keep"
        ]
    );
    assert_eq!(
        source_errors(
            "    idempotencyKeyHeader: X-Id\n    filter:\n      require:\n        - header: \"  \"\n          exists: true\n"
        ),
        ["- sources.s.filter.require[0].header: must not be blank"]
    );
    // 3. Paths that are not definite, and an empty list.
    assert_eq!(
        source_errors(
            "    idempotencyKeyPath: \"$.a[*]\"\n    aggregateIdPath: \"$.a[?(@.x)]\"\n    eventTypePath: \"$.a[0:2]\"\n    scheduledAtPath: [$.t, \"$['a','b']\", $..t]\n    initialDelay: 5s\n"
        ),
        [
            "- sources.s.aggregateIdPath: not a definite path: $.a[?(@.x)]",
            "- sources.s.eventTypePath: not a definite path: $.a[0:2]",
            "- sources.s.idempotencyKeyPath: not a definite path: $.a[*]",
            "- sources.s.scheduledAtPath[1]: not a definite path: $['a','b']",
            "- sources.s.scheduledAtPath[2]: not a definite path: $..t",
        ]
    );
    assert_eq!(
        source_errors("    idempotencyKeyPath: []\n"),
        ["- sources.s.idempotencyKeyPath: must not be empty"]
    );
    // 5. Topic placeholders, and a blank push topic.
    let push = "sources:\n  s:\n    path: /s\n    idempotencyKeyHeader: X-Id\n";
    assert_eq!(
        errors(&with_db(&format!("{push}    topic: \"a.{{{{ key }}}}\"\n"))),
        ["- sources.s.topic: unknown placeholder {{ key }}; use source, eventType"]
    );
    assert_eq!(
        errors(&with_db(&format!("{push}    topic: \"  \"\n"))),
        ["- sources.s.topic: must not be blank"]
    );
    // 6. The default `{{ eventType }}` topic with no event type declared.
    assert_eq!(
        errors(&with_db(push)),
        [
            "- sources.s.topic: uses {{ eventType }}, so set eventTypePath, eventTypeHeader or eventTypeExpression"
        ]
    );
    // 7. initialDelay without a suffix, or negative.
    for delay in ["\"30\"", "-5s"] {
        let lines = source_errors(&format!(
            "    idempotencyKeyHeader: X-Id\n    initialDelay: {delay}\n"
        ));
        assert_eq!(lines.len(), 1, "{delay}: {lines:?}");
        assert!(
            lines[0].starts_with("- sources.s.initialDelay: expected a duration"),
            "{delay}: {lines:?}"
        );
    }
    // 8. A publish time without a delay, or with 0s: the error names both keys.
    for (key, delay) in [
        ("scheduledAtHeader: X-At", ""),
        ("scheduledAtPath: $.at", "    initialDelay: 0s\n"),
    ] {
        let name = key.split(':').next().unwrap();
        assert_eq!(
            source_errors(&format!(
                "    idempotencyKeyHeader: X-Id\n    {key}\n{delay}"
            )),
            [format!(
                "- sources.s.initialDelay: must be greater than 0s when {name} is set"
            )]
        );
    }
    // 9. Filter rules: no test, two tests, exists: false, an empty in list, a blank glob.
    assert_eq!(
        source_errors(
            "    idempotencyKeyHeader: X-Id\n    filter:\n      require:\n        - header: X-A\n        - header: X-B\n          exists: true\n          equals: x\n      exclude:\n        - header: X-C\n          exists: false\n        - header: X-D\n          in: []\n        - header: X-E\n          matches: \" \"\n"
        ),
        [
            "- sources.s.filter.exclude[0].exists: must be true; to drop messages that carry the header, use an exclude rule",
            "- sources.s.filter.exclude[1].in: must not be empty",
            "- sources.s.filter.exclude[2].matches: must not be blank",
            "- sources.s.filter.require[0]: has no test; set exactly one of equals, in, matches, exists",
            "- sources.s.filter.require[1]: has 2 tests (equals, exists); set exactly one of equals, in, matches, exists",
        ]
    );
    // 10. Auth without a type, TIMESTAMP_DOT_BODY without a timestamp header, an unknown
    // algorithm.
    assert_eq!(
        source_errors("    idempotencyKeyHeader: X-Id\n    auth:\n      secret: s\n"),
        [
            "- sources.s.auth: missing type; set one of api-key, bearer, github, hmac, shopify, slack, standard-webhooks, stripe"
        ]
    );
    assert_eq!(
        source_errors(
            "    idempotencyKeyHeader: X-Id\n    auth:\n      type: hmac\n      secret: s\n      signaturePayloadFormat: TIMESTAMP_DOT_BODY\n      algorithm: HmacMD5\n"
        ),
        [
            "- sources.s.auth.algorithm: must be one of HmacSHA256, HmacSHA512, HmacSHA1, got \"HmacMD5\"",
            "- sources.s.auth.signaturePayloadFormat: TIMESTAMP_DOT_BODY needs timestampHeader",
        ]
    );
    // 11. Two sources on one route; fixed routes of the data port.
    let pull = "    consumption: pull\n    idempotencyKeyHeader: X-Id\n";
    assert_eq!(
        errors(&with_db(&format!(
            "sources:\n  a:\n    path: /x\n{pull}  b:\n    path: /x\n{pull}"
        ))),
        ["- sources.b.path: the same route as sources.a.path (/inbox/x)"]
    );
    for path in [
        "/metrics",
        "/health",
        "/health/live",
        "/health/ready",
        "/admin/x",
    ] {
        assert_eq!(
            errors(&with_db(&format!(
                "inbox:\n  basePath: /\nsources:\n  s:\n    path: {path}\n{pull}"
            ))),
            [format!(
                "- sources.s.path: the route {path} is a fixed route of the data port"
            )],
            "{path}"
        );
        // With a management port, those routes are not on the data port: the route is free.
        ok(&with_db(&format!(
            "server:\n  managementPort: 9090\ninbox:\n  basePath: /\nsources:\n  s:\n    path: {path}\n{pull}"
        )));
    }
    let root = errors(&with_db(&format!(
        "inbox:\n  basePath: /\nsources:\n  s:\n    path: /\n{pull}"
    )));
    assert_eq!(root.len(), 1, "{root:?}");
    assert!(root[0].starts_with("- sources.s.path: "), "{root:?}");
    // Every problem of one file is listed at once: the start names each offending path.
    let err = load_yaml(&with_db(&format!(
        "{S}    idempotencyKeyHeader: Cookie\n    initialDelay: \"30\"\n"
    )))
    .unwrap_err();
    assert!(matches!(err, LoadError::Invalid(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("The configuration has 2 errors."),
        "{err}"
    );
}

/// RET-1: retention is off by default, each table `DISABLED`, `cleanupInterval` 1h and
/// `batchSize` 1000; `COUNT` on the inbox stops the start and names `retention.inbox.policy`.
#[test]
fn ret_1_retention_is_off_by_default_and_count_is_refused_for_the_inbox() {
    let defaults = ok(DB).config.retention;
    assert!(!defaults.enabled);
    assert_eq!(defaults.outbox.policy, OutboxRetentionPolicy::Disabled);
    assert_eq!(defaults.inbox.policy, InboxRetentionPolicy::Disabled);
    for (interval, batch) in [
        (defaults.outbox.cleanup_interval, defaults.outbox.batch_size),
        (defaults.inbox.cleanup_interval, defaults.inbox.batch_size),
    ] {
        assert_eq!(interval, Duration::from_secs(3_600));
        assert_eq!(batch, 1_000);
    }
    // Enabled with no table block: still nothing to delete.
    let enabled = ok(&with_db("retention:\n  enabled: true\n"))
        .config
        .retention;
    assert!(enabled.enabled);
    assert_eq!(enabled.outbox.policy, OutboxRetentionPolicy::Disabled);
    assert_eq!(enabled.inbox.policy, InboxRetentionPolicy::Disabled);
    // COUNT is an outbox policy only.
    for enabled in ["true", "false"] {
        let lines = errors(&with_db(&format!(
            "retention:\n  enabled: {enabled}\n  inbox:\n    policy: COUNT\n"
        )));
        assert_eq!(
            lines,
            ["- retention.inbox.policy: must be one of AGE, DISABLED, got \"COUNT\""],
            "enabled: {enabled}"
        );
    }
    let outbox = ok(&with_db(
        "retention:\n  enabled: true\n  outbox:\n    policy: COUNT\n    maxCount: 5\n",
    ))
    .config
    .retention;
    assert_eq!(outbox.outbox.policy, OutboxRetentionPolicy::Count(5));
}
