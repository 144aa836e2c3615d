//! The Grafana dashboard and the Prometheus alert rules of docs/operations/ (issue 13 part 4)
//! name only metrics QueueBox exports: every `queuebox_*` name they use is a family of the
//! catalogue, and every one present from the start is in a real scrape of the binary; the rules
//! pass `promtool check rules` (Debian's `prometheus` package).

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use queuebox_telemetry::{MetricType, Presence, catalogue};
use support::pg::TestSchema;
use support::service::Service;

fn docs(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/operations")
        .join(file)
}

/// Every `queuebox_…` word of the text (comments too: a name in a comment must exist as well).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("queuebox_") {
        let word: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + word.len()..];
        names.insert(word);
    }
    names
}

/// The family of a sample name: a summary's `_sum` and `_count` belong to it.
fn family(name: &str) -> Option<&'static queuebox_telemetry::FamilySpec> {
    catalogue().iter().find(|spec| {
        spec.name == name
            || (spec.metric_type == MetricType::Summary
                && [format!("{}_sum", spec.name), format!("{}_count", spec.name)]
                    .iter()
                    .any(|n| n == name))
    })
}

fn used_names() -> BTreeSet<String> {
    let dashboard = std::fs::read_to_string(docs("queuebox-dashboard.json")).expect("dashboard");
    let parsed: serde_json::Value =
        serde_json::from_str(&dashboard).expect("the dashboard is JSON");
    let panels = parsed["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8, "a dashboard with its panels");
    let mut exprs = String::new();
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            exprs.push_str(target["expr"].as_str().expect("an expr"));
            exprs.push('\n');
        }
    }
    let rules = std::fs::read_to_string(docs("queuebox-alerts.yml")).expect("rules");
    let mut names = metric_names(&exprs);
    names.extend(metric_names(&rules));
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_and_alert_rules_use_only_exported_metrics() {
    let names = used_names();
    for wanted in [
        "queuebox_outbox_messages_dead",
        "queuebox_outbox_oldest_pending_created_age_seconds",
        "queuebox_claims_lost_total",
        "queuebox_gauge_last_refresh_timestamp",
    ] {
        assert!(names.contains(wanted), "the alerts use {wanted}");
    }
    let schema = TestSchema::create("monitoring").await;
    let cfg = format!(
        "database:\n  url: \"{}\"\nserver:\n  httpPort: 0\n",
        schema.queuebox_url()
    );
    let service = Service::start("monitoring", &cfg);
    let (status, scrape) = service.get("/metrics");
    assert_eq!(status, 200);
    let scraped = metric_names(&scrape);
    for name in &names {
        let spec = family(name).unwrap_or_else(|| {
            panic!("{name} is used by docs/operations/ but QueueBox exports no such family")
        });
        if spec.presence == Presence::AtStart {
            assert!(
                scraped.contains(name),
                "{name} is present at start, but not in the scrape"
            );
        }
    }
    drop(service);
    schema.drop().await;
}

#[test]
fn alert_rules_pass_promtool() {
    let output = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(docs("queuebox-alerts.yml"))
        .output()
        .expect("promtool runs (Debian: apt-get install prometheus; scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("SUCCESS: 8 rules found"), "{text}");
}
