//! Helpers of the RabbitMQ tests: the shared broker of scripts/services.sh (5672, guest/guest),
//! names of their own per test, and the standard client (Python's pika, pinned in
//! scripts/test-requirements.txt) that declares, publishes, reads back and deletes.

#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The shared broker; override with `QUEUEBOX_TEST_AMQP_URL`.
pub fn amqp_url() -> String {
    std::env::var("QUEUEBOX_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// A name no other test uses: `qb_amqp_<label>_<uuid>`.
pub fn unique(label: &str) -> String {
    format!("qb_amqp_{label}_{}", uuid::Uuid::new_v4().simple())
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python of the git-ignored .venv (scripts/pyenv.sh), or `QUEUEBOX_TEST_PYTHON`.
pub fn python() -> PathBuf {
    if let Ok(path) = std::env::var("QUEUEBOX_TEST_PYTHON") {
        return PathBuf::from(path);
    }
    let path = workspace().join(".venv/bin/python3");
    assert!(
        path.exists(),
        "{} is missing: run scripts/pyenv.sh (it installs pika)",
        path.display()
    );
    path
}

/// Runs one pika_client.py command against `url`; panics with its stderr when it fails.
pub fn pika_at(url: &str, args: &[&str], stdin: &str) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/pika_client.py");
    let mut child = Command::new(python())
        .arg(script)
        .arg(url)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the pika client");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "pika_client {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn pika(args: &[&str], stdin: &str) -> String {
    pika_at(&amqp_url(), args, stdin)
}

/// Declares a durable exchange and a queue bound to it with `key`.
pub fn bound_queue(exchange: &str, kind: &str, queue: &str, key: &str) {
    let spec = serde_json::json!({
        "exchanges": [{"name": exchange, "type": kind}],
        "queues": [{"name": queue, "bind": [{"exchange": exchange, "key": key}]}],
    });
    pika(&["declare"], &spec.to_string());
}

pub fn declare_queue(queue: &str) {
    let spec = serde_json::json!({"queues": [{"name": queue}]});
    pika(&["declare"], &spec.to_string());
}

/// Reads up to `most` messages of `queue` (waiting up to `wait_s` for each), acking them.
pub fn get(queue: &str, most: usize, wait_s: f64) -> Vec<serde_json::Value> {
    pika(&["get", queue, &most.to_string(), &wait_s.to_string()], "")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// (messages ready, consumers) of `queue`.
pub fn count(queue: &str) -> (u64, u64) {
    let out: serde_json::Value = serde_json::from_str(&pika(&["count", queue], "")).unwrap();
    (
        out["messages"].as_u64().unwrap(),
        out["consumers"].as_u64().unwrap(),
    )
}

/// Publishes each message (JSON objects of pika_client.py's `publish`) with confirms.
pub fn publish(messages: &[serde_json::Value]) {
    let lines: Vec<String> = messages.iter().map(|m| m.to_string()).collect();
    pika(&["publish"], &lines.join("\n"));
}

/// Deletes what a test declared; run at its end.
pub fn delete(queues: &[&str], exchanges: &[&str]) {
    let spec = serde_json::json!({"queues": queues, "exchanges": exchanges});
    pika(&["delete"], &spec.to_string());
}
