//! Tests of the registry and its exposition against operations.md §5, named by requirement.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::render::{escape_help, escape_label_value, float};
use super::*;

/// A clock the test moves by hand.
#[derive(Debug)]
struct ManualClock {
    base: Instant,
    offset: Mutex<Duration>,
}

impl ManualClock {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            offset: Mutex::new(Duration::ZERO),
        })
    }

    fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + *self.offset.lock().unwrap()
    }
}

fn manual_metrics() -> (Metrics, Arc<ManualClock>) {
    let clock = ManualClock::new();
    let metrics = Metrics::with_clock("1.4.0", clock.clone());
    (metrics, clock)
}

/// One sample line: family-level name, full sample name, labels and the value text.
#[derive(Debug)]
struct Line {
    name: String,
    labels: BTreeMap<String, String>,
    value: String,
}

/// Parses a sample line of the text format, undoing label-value escapes.
fn parse_sample(line: &str) -> Line {
    let name_end = line.find(['{', ' ']).expect("a sample has a value");
    let name = line[..name_end].to_owned();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let (mut key, mut value, mut in_value, mut escaped) =
            (String::new(), String::new(), false, false);
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match (in_value, escaped, c) {
                (true, true, 'n') => (value.push('\n'), escaped = false).1,
                (true, true, other) => (value.push(other), escaped = false).1,
                (true, false, '\\') => escaped = true,
                (true, false, '"') => {
                    labels.insert(std::mem::take(&mut key), std::mem::take(&mut value));
                    in_value = false;
                }
                (true, false, other) => value.push(other),
                (false, _, '=') => {
                    assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{line}");
                    in_value = true;
                }
                (false, _, ',') => {}
                (false, _, '}') => {
                    end = Some(i);
                    break;
                }
                (false, _, other) => key.push(other),
            }
        }
        rest = &inner[end.expect("closed label block") + 1..];
    }
    let value = rest
        .strip_prefix(' ')
        .expect("one space before the value")
        .to_owned();
    assert!(!value.contains(' '), "no timestamp, one value: {line}");
    Line {
        name,
        labels,
        value,
    }
}

/// The family a sample line belongs to (summaries add `_sum` and `_count`).
fn family_of(sample_name: &str) -> &str {
    if catalogue().iter().any(|s| s.name == sample_name) {
        return sample_name;
    }
    sample_name
        .strip_suffix("_sum")
        .or_else(|| sample_name.strip_suffix("_count"))
        .unwrap_or(sample_name)
}

fn samples(text: &str) -> Vec<Line> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(parse_sample)
        .collect()
}

fn value_of(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<String> {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples(text)
        .into_iter()
        .find(|l| l.name == name && l.labels == wanted)
        .map(|l| l.value)
}

/// Moves every family, so a scrape shows the whole catalogue.
fn exercise_everything(m: &Metrics) {
    for s in OutboxStatus::ALL {
        m.outbox_messages(*s).inc();
    }
    m.set_outbox_pending(3, 1.5);
    m.set_inbox_oldest_pending_age(2.0);
    m.outbox_reclaimed().inc();
    m.claims_lost(Table::Outbox).inc();
    m.outbox_process_errors().inc();
    m.outbox_processing_duration().observe(0.25);
    m.publish_duration(DestinationType::Http).observe(0.1);
    m.destination_messages("billing", PublishOutcome::Success)
        .inc();
    m.queue_depth("billing").set(2.0);
    m.circuit_state("billing").set(1.0);
    m.destination_held("billing", HeldReason::CircuitOpen).inc();
    m.http_publish_responses(503).inc();
    m.transform_failures(TransformStrategy::Skip).inc();
    m.inbox_messages(InboxStatus::New).inc();
    m.inbox_relay_errors().inc();
    m.inbox_rejections(RejectionReason::StorageFailed).inc();
    m.inbox_filtered("orders").inc();
    m.cleanup_messages_deleted(Table::Outbox).inc_by(10);
    m.cleanup_duration(Table::Inbox)
        .observe_duration(Duration::from_millis(30));
    m.set_cleanup_last_run(Table::Outbox, SystemTime::now());
    m.set_db_pool(DbPoolStatus {
        active: 2,
        idle: 3,
        max: 10,
        pending: 1,
    });
    m.db_pool_acquire_timeouts().inc();
    m.db_pool_acquire_duration().observe(0.001);
    m.db_pool_usage_duration().observe(0.02);
    m.set_outbox_backlog(40.0, 2);
    m.set_inbox_backlog(5, 12.0, 1);
    m.inbox_source_pending("orders").set(5.0);
    m.gauge_refresh_failures(Table::Inbox).inc();
    m.gauges_refreshed(Table::Outbox, SystemTime::now());
    m.webhook_refusals("orders", RefusalReason::Unauthorized)
        .inc();
    m.inbox_held_bytes().add(1024.0);
    m.http_connections(Port::Data).inc();
}

#[test]
fn met_1_content_type_is_text_format_0_0_4() {
    assert_eq!(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
}

#[test]
fn met_2_registry_holds_exactly_the_catalogue_in_order() {
    let (m, _) = manual_metrics();
    let names: Vec<_> = m.inner.families().iter().map(|f| f.spec().name).collect();
    let expected: Vec<_> = catalogue().iter().map(|s| s.name).collect();
    assert_eq!(names, expected);
}

#[test]
fn met_3_counters_end_in_total() {
    let (m, _) = manual_metrics();
    exercise_everything(&m);
    let text = m.render();
    for spec in catalogue() {
        let is_counter = spec.metric_type == MetricType::Counter;
        assert_eq!(is_counter, spec.name.ends_with("_total"), "{}", spec.name);
    }
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut words = line.split(' ').skip(2);
        let (name, kind) = (words.next().unwrap(), words.next().unwrap());
        if kind == "counter" {
            assert!(name.ends_with("_total"), "{line}");
        }
    }
    for line in samples(&text) {
        let spec = catalogue().iter().find(|s| s.name == family_of(&line.name));
        if spec.unwrap().metric_type == MetricType::Counter {
            assert!(line.name.ends_with("_total"), "{}", line.name);
        }
    }
}

#[test]
fn met_3_every_sample_follows_the_help_and_type_of_its_family() {
    let (m, _) = manual_metrics();
    exercise_everything(&m);
    let text = m.render();
    let mut current: Option<(&str, bool, bool)> = None;
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            let spec = catalogue().iter().find(|s| s.name == name).unwrap();
            assert_eq!(help, escape_help(spec.help));
            assert!(seen.insert(name.to_owned()), "{name} described twice");
            current = Some((name, true, false));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            let spec = catalogue().iter().find(|s| s.name == name).unwrap();
            assert_eq!(kind, spec.metric_type.as_str());
            assert_eq!(
                current,
                Some((name, true, false)),
                "TYPE right after HELP: {line}"
            );
            current = Some((name, true, true));
        } else {
            let sample = parse_sample(line);
            let (family, help, kind) = current.expect("a sample before any HELP");
            assert_eq!(family_of(&sample.name), family, "{line}");
            assert!(help && kind, "{line}");
        }
    }
    assert_eq!(seen.len(), catalogue().len());
}

#[test]
fn met_4_summary_exposes_quantiles_sum_and_count() {
    let (m, _) = manual_metrics();
    for i in 1..=100 {
        m.publish_duration(DestinationType::Kafka)
            .observe(f64::from(i) / 100.0);
    }
    let text = m.render();
    let name = OUTBOX_PUBLISH_DURATION_SECONDS;
    let q = |q: &str| {
        value_of(
            &text,
            name,
            &[("destination_type", "kafka"), ("quantile", q)],
        )
    };
    assert_eq!(q("0.5").as_deref(), Some("0.5"));
    assert_eq!(q("0.95").as_deref(), Some("0.95"));
    assert_eq!(q("0.99").as_deref(), Some("0.99"));
    let labels = [("destination_type", "kafka")];
    assert_eq!(
        value_of(&text, &format!("{name}_sum"), &labels).as_deref(),
        Some("50.5")
    );
    assert_eq!(
        value_of(&text, &format!("{name}_count"), &labels).as_deref(),
        Some("100")
    );
    // Other destination types were never used: no series for them.
    assert!(
        value_of(
            &text,
            &format!("{name}_count"),
            &[("destination_type", "http")]
        )
        .is_none()
    );
}

#[test]
fn met_4_summary_window_forgets_old_samples() {
    let (m, clock) = manual_metrics();
    let summary = m.outbox_processing_duration();
    summary.observe(100.0);
    clock.advance(Duration::from_secs(61));
    summary.observe(1.0);
    let text = m.render();
    let name = OUTBOX_PROCESSING_DURATION_SECONDS;
    for q in ["0.5", "0.95", "0.99"] {
        assert_eq!(
            value_of(&text, name, &[("quantile", q)]).as_deref(),
            Some("1"),
            "{q}"
        );
    }
    // Sum and count stay over the process lifetime.
    assert_eq!(
        value_of(&text, &format!("{name}_sum"), &[]).as_deref(),
        Some("101")
    );
    assert_eq!(
        value_of(&text, &format!("{name}_count"), &[]).as_deref(),
        Some("2")
    );

    clock.advance(Duration::from_secs(60));
    let text = m.render();
    assert_eq!(
        value_of(&text, name, &[("quantile", "0.5")]).as_deref(),
        Some("NaN")
    );
    assert_eq!(
        value_of(&text, &format!("{name}_count"), &[]).as_deref(),
        Some("2")
    );
}

#[test]
fn met_5_http_status_maps_to_class() {
    let cases = [
        (0, "other"),
        (99, "other"),
        (100, "1xx"),
        (199, "1xx"),
        (200, "2xx"),
        (204, "2xx"),
        (302, "3xx"),
        (404, "4xx"),
        (429, "4xx"),
        (500, "5xx"),
        (599, "5xx"),
        (600, "other"),
        (999, "other"),
    ];
    for (status, class) in cases {
        assert_eq!(StatusClass::of(status).as_str(), class, "{status}");
    }
    let (m, _) = manual_metrics();
    m.http_publish_responses(503).inc();
    m.http_publish_responses(502).inc();
    let text = m.render();
    let name = HTTP_PUBLISH_RESPONSES_TOTAL;
    assert_eq!(
        value_of(&text, name, &[("status_class", "5xx")]).as_deref(),
        Some("2")
    );
    assert!(!text.contains("503"), "a raw status is never a label value");
}

#[test]
fn met_5_label_values_are_escaped() {
    assert_eq!(escape_label_value(r#"a"b\c"#), r#"a\"b\\c"#);
    assert_eq!(escape_label_value("x\ny"), r"x\ny");
    let (m, _) = manual_metrics();
    m.destination_messages("we\"ird\\name\n", PublishOutcome::Failure)
        .inc();
    let text = m.render();
    assert!(
        text.contains(r#"{destination="we\"ird\\name\n",outcome="failure"} 1"#),
        "{text}"
    );
    let name = OUTBOX_DESTINATION_MESSAGES_TOTAL;
    let labels = [("destination", "we\"ird\\name\n"), ("outcome", "failure")];
    assert_eq!(value_of(&text, name, &labels).as_deref(), Some("1"));
}

#[test]
fn met_7_at_start_families_render_zero_before_use() {
    let (m, _) = manual_metrics();
    let text = m.render();
    for (name, label, values) in [
        (
            OUTBOX_MESSAGES_TOTAL,
            "status",
            &["sent", "failed", "dead"][..],
        ),
        (CLAIMS_LOST_TOTAL, "component", &["outbox", "inbox"]),
        (
            INBOX_MESSAGES_TOTAL,
            "status",
            &["new", "forwarded", "duplicate"],
        ),
        (DB_POOL_CONNECTIONS, "state", &["active", "idle"]),
    ] {
        for value in values {
            assert_eq!(
                value_of(&text, name, &[(label, value)]).as_deref(),
                Some("0")
            );
        }
    }
    assert!(text.contains("\nqueuebox_outbox_messages_total{status=\"sent\"} 0\n"));
    for spec in catalogue() {
        let described = text.contains(&format!("# TYPE {} ", spec.name));
        assert_eq!(
            described,
            spec.presence == Presence::AtStart,
            "{}",
            spec.name
        );
        if spec.presence == Presence::AtStart && spec.labels.is_empty() {
            let expected = if spec.name == INFO { "1" } else { "0" };
            assert_eq!(value_of(&text, spec.name, &[]).as_deref(), Some(expected));
        }
    }
    assert_eq!(
        value_of(&text, INFO, &[("version", "1.4.0")]).as_deref(),
        Some("1")
    );
}

#[test]
fn met_7_first_use_series_appear_on_first_movement_not_on_lookup() {
    let (m, _) = manual_metrics();
    let success = m.destination_messages_handle("billing", PublishOutcome::Success);
    let depth = m.queue_depth("billing");
    let _ = m.inbox_filtered("orders");
    let _ = m.publish_duration(DestinationType::Nats);
    let text = m.render();
    assert!(
        !text.contains("billing"),
        "a destination never published to has no sample"
    );
    assert!(!text.contains(OUTBOX_QUEUE_DEPTH));
    assert!(!text.contains(INBOX_FILTERED_TOTAL));
    assert!(!text.contains(OUTBOX_PUBLISH_DURATION_SECONDS));

    success.inc();
    depth.inc();
    depth.inc();
    depth.dec();
    let text = m.render();
    let name = OUTBOX_DESTINATION_MESSAGES_TOTAL;
    let ok = [("destination", "billing"), ("outcome", "success")];
    assert_eq!(value_of(&text, name, &ok).as_deref(), Some("1"));
    let failed = [("destination", "billing"), ("outcome", "failure")];
    assert!(value_of(&text, name, &failed).is_none());
    let depth_labels = [("destination", "billing")];
    assert_eq!(
        value_of(&text, OUTBOX_QUEUE_DEPTH, &depth_labels).as_deref(),
        Some("1")
    );
}

#[test]
fn met_8_catalogue_matches_the_spec_table() {
    // operations.md §5.2, copied by hand: (name, type, label names).
    let expected: &[(&str, &str, &[&str])] = &[
        ("queuebox_info", "gauge", &["version"]),
        ("queuebox_uptime_seconds", "gauge", &[]),
        ("queuebox_outbox_messages_total", "counter", &["status"]),
        ("queuebox_outbox_messages_pending", "gauge", &[]),
        ("queuebox_outbox_oldest_pending_age_seconds", "gauge", &[]),
        ("queuebox_inbox_oldest_pending_age_seconds", "gauge", &[]),
        ("queuebox_outbox_messages_reclaimed_total", "counter", &[]),
        ("queuebox_claims_lost_total", "counter", &["component"]),
        ("queuebox_outbox_process_errors_total", "counter", &[]),
        (
            "queuebox_outbox_processing_duration_seconds",
            "summary",
            &[],
        ),
        (
            "queuebox_outbox_publish_duration_seconds",
            "summary",
            &["destination_type"],
        ),
        (
            "queuebox_outbox_destination_messages_total",
            "counter",
            &["destination", "outcome"],
        ),
        ("queuebox_outbox_queue_depth", "gauge", &["destination"]),
        (
            "queuebox_outbox_destination_circuit_state",
            "gauge",
            &["destination"],
        ),
        (
            "queuebox_outbox_destination_held_total",
            "counter",
            &["destination", "reason"],
        ),
        (
            "queuebox_http_publish_responses_total",
            "counter",
            &["status_class"],
        ),
        (
            "queuebox_transform_failures_total",
            "counter",
            &["strategy"],
        ),
        ("queuebox_inbox_messages_total", "counter", &["status"]),
        ("queuebox_inbox_relay_errors_total", "counter", &[]),
        ("queuebox_inbox_rejections_total", "counter", &["reason"]),
        ("queuebox_inbox_filtered_total", "counter", &["source"]),
        (
            "queuebox_cleanup_messages_deleted_total",
            "counter",
            &["table"],
        ),
        ("queuebox_cleanup_duration_seconds", "summary", &["table"]),
        ("queuebox_cleanup_last_run_timestamp", "gauge", &["table"]),
        ("queuebox_db_pool_connections", "gauge", &["state"]),
        ("queuebox_db_pool_connections_max", "gauge", &[]),
        ("queuebox_db_pool_pending", "gauge", &[]),
        ("queuebox_db_pool_acquire_timeouts_total", "counter", &[]),
        ("queuebox_db_pool_acquire_duration_seconds", "summary", &[]),
        ("queuebox_db_pool_usage_duration_seconds", "summary", &[]),
        // Beyond §5.2: the operator gauges of issues 13 and 14 (docs/metrics.md lists them).
        (
            "queuebox_outbox_oldest_pending_created_age_seconds",
            "gauge",
            &[],
        ),
        ("queuebox_outbox_messages_dead", "gauge", &[]),
        ("queuebox_inbox_messages_pending", "gauge", &[]),
        (
            "queuebox_inbox_source_messages_pending",
            "gauge",
            &["source"],
        ),
        (
            "queuebox_inbox_oldest_pending_created_age_seconds",
            "gauge",
            &[],
        ),
        ("queuebox_inbox_messages_dead", "gauge", &[]),
        (
            "queuebox_gauge_refresh_failures_total",
            "counter",
            &["component"],
        ),
        (
            "queuebox_gauge_last_refresh_timestamp",
            "gauge",
            &["component"],
        ),
        (
            "queuebox_inbox_webhook_refusals_total",
            "counter",
            &["source", "reason"],
        ),
        ("queuebox_inbox_held_bytes", "gauge", &[]),
        ("queuebox_http_connections", "gauge", &["port"]),
    ];
    let actual: Vec<(&str, &str, &[&str])> = catalogue()
        .iter()
        .map(|s| (s.name, s.metric_type.as_str(), s.labels))
        .collect();
    assert_eq!(actual, expected);

    // And a scrape of an instance that moved everything shows exactly these, both directions.
    let (m, _) = manual_metrics();
    exercise_everything(&m);
    let mut rendered: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in samples(&m.render()) {
        let labels = line.labels.into_keys().filter(|k| k != "quantile");
        rendered
            .entry(family_of(&line.name).to_owned())
            .or_default()
            .extend(labels);
    }
    let wanted: BTreeMap<String, BTreeSet<String>> = expected
        .iter()
        .map(|(n, _, l)| ((*n).to_owned(), l.iter().map(|s| (*s).to_owned()).collect()))
        .collect();
    assert_eq!(rendered, wanted);
}

#[test]
fn met_8_label_value_sets_match_the_spec_table() {
    fn words<E: Copy>(all: &[E], as_str: fn(E) -> &'static str) -> Vec<&'static str> {
        all.iter().map(|v| as_str(*v)).collect()
    }
    assert_eq!(
        words(OutboxStatus::ALL, OutboxStatus::as_str),
        ["sent", "failed", "dead"]
    );
    assert_eq!(
        words(DestinationType::ALL, DestinationType::as_str),
        ["http", "rabbitmq", "kafka", "nats", "log"]
    );
    assert_eq!(
        words(PublishOutcome::ALL, PublishOutcome::as_str),
        ["success", "failure"]
    );
    assert_eq!(
        words(StatusClass::ALL, StatusClass::as_str),
        ["1xx", "2xx", "3xx", "4xx", "5xx", "other"]
    );
    assert_eq!(
        words(TransformStrategy::ALL, TransformStrategy::as_str),
        ["fail", "skip", "dead"]
    );
    assert_eq!(
        words(InboxStatus::ALL, InboxStatus::as_str),
        ["new", "forwarded", "duplicate"]
    );
    assert_eq!(
        words(RejectionReason::ALL, RejectionReason::as_str),
        ["extraction_failed", "transform_failed", "storage_failed"]
    );
    assert_eq!(
        words(RefusalReason::ALL, RefusalReason::as_str),
        [
            "unauthorized",
            "too_large",
            "rate_limited",
            "unreadable_body",
            "invalid_json",
            "json_limit",
            "no_key",
            "invalid_topic",
            "transform_failed",
            "data_rejected",
            "storage_failed",
            "shutting_down",
            "overloaded",
            "storage_timeout"
        ]
    );
    assert_eq!(
        words(HeldReason::ALL, HeldReason::as_str),
        ["rate_limit", "circuit_open"]
    );
    assert_eq!(words(Table::ALL, Table::as_str), ["outbox", "inbox"]);
    assert_eq!(words(PoolState::ALL, PoolState::as_str), ["active", "idle"]);
}

#[test]
fn uptime_is_computed_at_render_time_from_creation() {
    let (m, clock) = manual_metrics();
    assert_eq!(
        value_of(&m.render(), UPTIME_SECONDS, &[]).as_deref(),
        Some("0")
    );
    clock.advance(Duration::from_millis(42_500));
    assert_eq!(
        value_of(&m.render(), UPTIME_SECONDS, &[]).as_deref(),
        Some("42.5")
    );
}

#[test]
fn gauges_and_timestamps_render_as_set() {
    let (m, _) = manual_metrics();
    m.set_outbox_pending(12, 3.25);
    m.set_db_pool(DbPoolStatus {
        active: 4,
        idle: 6,
        max: 10,
        pending: 2,
    });
    let ended = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    m.set_cleanup_last_run(Table::Inbox, ended);
    let text = m.render();
    assert_eq!(
        value_of(&text, OUTBOX_MESSAGES_PENDING, &[]).as_deref(),
        Some("12")
    );
    let age = value_of(&text, OUTBOX_OLDEST_PENDING_AGE_SECONDS, &[]);
    assert_eq!(age.as_deref(), Some("3.25"));
    let active = value_of(&text, DB_POOL_CONNECTIONS, &[("state", "active")]);
    assert_eq!(active.as_deref(), Some("4"));
    assert_eq!(
        value_of(&text, DB_POOL_CONNECTIONS_MAX, &[]).as_deref(),
        Some("10")
    );
    assert_eq!(value_of(&text, DB_POOL_PENDING, &[]).as_deref(), Some("2"));
    let last_run = value_of(&text, CLEANUP_LAST_RUN_TIMESTAMP, &[("table", "inbox")]);
    assert_eq!(last_run.as_deref(), Some("1700000000"));
    assert!(value_of(&text, CLEANUP_LAST_RUN_TIMESTAMP, &[("table", "outbox")]).is_none());
}

#[test]
fn floats_are_spelled_as_prometheus_parses_them() {
    assert_eq!(float(0.0), "0");
    assert_eq!(float(1.0), "1");
    assert_eq!(float(0.25), "0.25");
    assert_eq!(float(f64::NAN), "NaN");
    assert_eq!(float(f64::INFINITY), "+Inf");
    assert_eq!(float(f64::NEG_INFINITY), "-Inf");
    assert_eq!(float(1e300), "1e300");
    assert_eq!(float(1.5e-7), "1.5e-7");
    assert_eq!(float(1_700_000_000.5), "1700000000.5");
}

#[test]
fn help_text_escapes_backslash_and_newline_only() {
    assert_eq!(escape_help("a\\b\n\"c\""), "a\\\\b\\n\"c\"");
}

#[test]
fn clones_share_series_and_counters_are_exact_under_contention() {
    let (m, _) = manual_metrics();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                let handle = m.destination_messages_handle("billing", PublishOutcome::Success);
                for _ in 0..10_000 {
                    handle.inc();
                    m.outbox_messages(OutboxStatus::Sent).inc();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(m.outbox_messages(OutboxStatus::Sent).get(), 40_000);
    let handle = m.destination_messages("billing", PublishOutcome::Success);
    assert_eq!(handle.get(), 40_000);
}
