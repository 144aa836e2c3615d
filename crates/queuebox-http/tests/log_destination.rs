//! The `log` destination writing real files (destinations.md §9, `log` row; DST-50..53).

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use queuebox_core::Secret;
use queuebox_core::{Destination, DestinationType, Outcome};
use queuebox_http::destination::{DestinationError, LogDestination, LogDestinationSettings};
use support::message;

/// A fresh directory per test, so tests run in parallel; removed when the test ends.
struct TempDir(PathBuf);

impl TempDir {
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(test: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("queuebox-log-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

fn settings(file: Option<PathBuf>) -> LogDestinationSettings {
    LogDestinationSettings {
        name: "console".to_owned(),
        file,
        static_headers: Vec::new(),
    }
}

fn lines(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The line without its `deliveredAt` value, which is checked on its own.
fn split_delivered_at(line: &str) -> (&str, &str) {
    let at = line
        .find(",\"deliveredAt\":\"")
        .expect("deliveredAt member");
    (&line[..at], &line[at + 16..line.len() - 2])
}

#[tokio::test]
async fn dst_50_one_json_line_with_the_members_in_order() {
    let dir = temp_dir("order");
    let path = dir.join("deliveries.jsonl");
    let publisher = LogDestination::open(settings(Some(path.clone()))).unwrap();
    assert_eq!(publisher.kind(), DestinationType::Log);
    let mut msg = message("{\n  \"id\": \"o-42\",\n  \"a\": [1, 2]\n}");
    msg.aggregate_type = None;
    msg.attempt = 2;
    assert_eq!(publisher.publish(&msg).await, Outcome::Delivered);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.ends_with("}\n") && text.matches('\n').count() == 1,
        "{text:?}"
    );
    let (head, delivered_at) = split_delivered_at(text.trim_end());
    let id = msg.id.to_string();
    assert_eq!(
        head,
        format!(
            r#"{{"kind":"delivery","destination":"console","messageId":"{id}","outboxId":"{id}","inboxId":null,"topic":"order.created","key":"o-42","aggregateType":null,"attempt":2,"headers":{{"x-message-id":"{id}","x-topic":"order.created","x-attempt":"2","x-message-key":"o-42"}},"payload":{{"id":"o-42","a":[1,2]}}"#
        )
    );
    // 2026-11-30T12:00:00.123Z
    let bytes = delivered_at.as_bytes();
    assert_eq!(delivered_at.len(), 24, "{delivered_at}");
    assert_eq!(
        (bytes[4], bytes[10], bytes[19], bytes[23]),
        (b'-', b'T', b'.', b'Z')
    );
    let parsed: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(parsed["deliveredAt"], delivered_at);
}

#[tokio::test]
async fn dst_50_headers_follow_precedence_and_key_null_when_empty() {
    let dir = temp_dir("headers");
    let path = dir.join("out.jsonl");
    let mut settings = settings(Some(path.clone()));
    settings.static_headers = vec![
        ("X-Static".to_owned(), Secret::new("s")),
        ("x-tenant".to_owned(), Secret::new("static")),
    ];
    let publisher = LogDestination::open(settings).unwrap();
    let mut msg = message("[1]");
    msg.key = Some(String::new());
    msg.headers = vec![
        ("X-Tenant".to_owned(), "row".to_owned()),
        ("X-MESSAGE-ID".to_owned(), "forged".to_owned()),
        ("Content-Type".to_owned(), "text/plain".to_owned()),
    ];
    assert_eq!(publisher.publish(&msg).await, Outcome::Delivered);
    let line = &lines(&path)[0];
    let id = msg.id.to_string();
    assert!(
        line.contains(r#""key":null,"aggregateType":"Order""#),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            r#""headers":{{"x-message-id":"{id}","x-topic":"order.created","x-attempt":"0","X-Tenant":"row","Content-Type":"text/plain","X-Static":"s"}}"#
        )),
        "{line}"
    );
    assert!(line.contains(r#""payload":[1]"#), "{line}");
}

#[tokio::test]
async fn dst_52_the_file_is_appended_to_never_truncated() {
    let dir = temp_dir("append");
    let path = dir.join("out.jsonl");
    std::fs::write(&path, "earlier line\n").unwrap();
    let publisher = LogDestination::open(settings(Some(path.clone()))).unwrap();
    publisher.publish(&message("{}")).await;
    publisher.publish(&message("{}")).await;
    drop(publisher);
    let again = LogDestination::open(settings(Some(path.clone()))).unwrap();
    again.publish(&message("{}")).await;
    let lines = lines(&path);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0], "earlier line");
}

#[tokio::test]
async fn dst_52_a_missing_parent_directory_stops_the_start() {
    let dir = temp_dir("missing");
    let path = dir.join("no-such-dir").join("out.jsonl");
    let err = LogDestination::open(settings(Some(path)))
        .err()
        .expect("start must fail");
    assert!(matches!(err, DestinationError::LogFile { .. }));
    assert!(
        err.to_string()
            .starts_with("destinations.console.file: cannot open"),
        "{err}"
    );
}

#[tokio::test]
async fn dst_53_a_failed_write_fails_the_delivery() {
    // /dev/full accepts the open and refuses every write with ENOSPC.
    let publisher = LogDestination::open(settings(Some(PathBuf::from("/dev/full")))).unwrap();
    let outcome = publisher.publish(&message("{}")).await;
    match outcome {
        Outcome::Failed {
            reason,
            retry_after,
        } => {
            assert!(
                reason.starts_with("Write to /dev/full failed: "),
                "{reason}"
            );
            assert_eq!(retry_after, None);
        }
        Outcome::Delivered => panic!("a write to /dev/full must fail"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dst_51_lines_of_concurrent_deliveries_never_interleave() {
    let dir = temp_dir("concurrent");
    let path = dir.join("out.jsonl");
    let publisher = Arc::new(LogDestination::open(settings(Some(path.clone()))).unwrap());
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(20_000));
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let publisher = Arc::clone(&publisher);
            let payload = big.clone();
            tokio::spawn(async move { publisher.publish(&message(&payload)).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), Outcome::Delivered);
    }
    let lines = lines(&path);
    assert_eq!(lines.len(), 40);
    for line in lines {
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["kind"], "delivery");
    }
}

#[tokio::test]
async fn dst_50_standard_output_is_the_default() {
    let publisher = LogDestination::open(settings(None)).unwrap();
    assert_eq!(
        publisher.publish(&message("{\"to\":\"stdout\"}")).await,
        Outcome::Delivered
    );
}

#[tokio::test]
async fn dst_8_a_reserved_static_header_stops_the_start() {
    let mut settings = settings(None);
    settings.static_headers = vec![("X-Attempt".to_owned(), Secret::new("9"))];
    let err = LogDestination::open(settings)
        .err()
        .expect("start must fail");
    assert!(
        matches!(err, DestinationError::ReservedHeader { .. }),
        "{err}"
    );
}
