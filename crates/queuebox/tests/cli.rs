//! The `queuebox` binary as a process: commands, exit codes, start-up failures, migrations and
//! signals (operations.md OPS-1, OPS-23..26; config.md CFG-2/3/32/33; schema.md SCH-54..59).

mod support;

use std::time::{Duration, Instant};

use support::pg::TestSchema;
use support::process::{Scratch, log_messages, queuebox, stderr, stdout};

fn pg_config(schema: &TestSchema, extra: &str) -> String {
    format!(
        "database:\n  url: \"{}\"\n  startupTimeoutMs: 5000\n{extra}",
        schema.queuebox_url()
    )
}

#[test]
fn ops_1_version_prints_name_and_version() {
    let scratch = Scratch::new("version");
    let output = queuebox(scratch.path()).arg("version").output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        format!("queuebox {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn ops_1_unknown_argument_is_a_usage_error() {
    let scratch = Scratch::new("usage");
    let output = queuebox(scratch.path())
        .args(["check", "--verbose"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).starts_with("Unknown arguments: --verbose\nUsage: queuebox"));
}

#[test]
fn cfg_32_check_accepts_a_valid_file() {
    let scratch = Scratch::new("check-ok");
    let file = scratch.write("q.yml", "database:\n  url: postgres://app@db:5432/app\n");
    let output = queuebox(scratch.path())
        .arg("check")
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "The configuration is valid.\n");
}

#[test]
fn cfg_28_check_lists_three_mistakes_in_one_error() {
    let scratch = Scratch::new("check-three");
    let file = scratch.write(
        "q.yml",
        "database:\n  url: postgres://app@db:5432/app\noutbox:\n  batchSzie: 10\n  concurrency: 0\nlog:\n  level: loud\n",
    );
    let output = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "The configuration has 3 errors. Fix each one and start QueueBox again."
    );
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[1].starts_with("- log.level: must be one of"),
        "{text}"
    );
    assert_eq!(
        lines[2],
        "- outbox.batchSzie: unknown key; did you mean batchSize?"
    );
    assert!(
        lines[3].starts_with("- outbox.concurrency: must be"),
        "{text}"
    );
}

#[test]
fn cfg_2_missing_config_file_exits_2_without_fallback() {
    let scratch = Scratch::new("check-missing");
    // A ./queuebox.yml exists, but --config names another file: no fallback (CFG-2).
    scratch.write("queuebox.yml", "database:\n  url: postgres://app@db/app\n");
    let output = queuebox(scratch.path())
        .args(["check", "--config", "nope.yml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with("QueueBox could not read the configuration file nope.yml: "),
        "{}",
        stderr(&output)
    );
}

#[test]
fn cfg_3_no_configuration_anywhere_exits_2() {
    let scratch = Scratch::new("check-none");
    let output = queuebox(scratch.path()).arg("check").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output).trim_end(),
        "QueueBox found no configuration. It looked for --config, QUEUEBOX_CONFIG_FILE, ./queuebox.yml and /etc/queuebox/queuebox.yml, and no QUEUEBOX_ variable sets a key."
    );
}

#[test]
fn cfg_1_check_finds_queuebox_yml_and_the_variable() {
    let scratch = Scratch::new("check-lookup");
    scratch.write("queuebox.yml", "database:\n  url: postgres://app@db/app\n");
    let output = queuebox(scratch.path()).arg("check").output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let other = scratch.write(
        "other.yml",
        "database:\n  url: postgres://app@db/app\n  poolSize: 0\n",
    );
    let output = queuebox(scratch.path())
        .arg("check")
        .env("QUEUEBOX_CONFIG_FILE", &other)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "QUEUEBOX_CONFIG_FILE wins over ./queuebox.yml"
    );
}

#[test]
fn cfg_33_run_with_an_invalid_config_exits_1_before_any_connection() {
    let scratch = Scratch::new("run-invalid");
    // Port 1 never answers: reaching the database would take startupTimeoutMs (60 s).
    let file = scratch.write(
        "q.yml",
        "database:\n  url: postgres://app:hunter2@127.0.0.1:1/app\noutbox:\n  batchSize: -1\n",
    );
    let started = Instant::now();
    let output = queuebox(scratch.path())
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(10));
    // Issue 14 item 2: the report `check` prints, as text, not a JSON line.
    let text = stderr(&output);
    assert!(log_messages(&text).is_empty(), "{text}");
    assert!(
        text.starts_with("The configuration has 1 error. Fix it and start QueueBox again.\n"),
        "{text}"
    );
    assert!(text.contains("\n- outbox.batchSize: must be"), "{text}");
    assert!(!text.contains("hunter2"));
}

#[test]
fn ops_23_database_down_is_retried_then_one_clear_line() {
    let scratch = Scratch::new("run-down");
    let file = scratch.write(
        "q.yml",
        "server:\n  httpPort: 0\ndatabase:\n  url: postgres://app:hunter2@127.0.0.1:1/app?sslmode=disable\n  startupTimeoutMs: 1500\n",
    );
    let started = Instant::now();
    let output = queuebox(scratch.path())
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        waited >= Duration::from_millis(1400),
        "gave up after {waited:?}"
    );
    let messages = log_messages(&stderr(&output));
    let last = messages.last().expect("a failure line");
    assert!(
        last.starts_with("QueueBox could not connect to the database. Reason: 127.0.0.1:1 did not answer within 1500 ms"),
        "{last}"
    );
    assert!(!stderr(&output).contains("hunter2"));
}

#[tokio::test]
async fn sch_59_migrate_creates_the_tables_and_a_second_run_applies_nothing() {
    let schema = TestSchema::create("cli_migrate").await;
    let scratch = Scratch::new("migrate");
    let file = scratch.write("q.yml", &pg_config(&schema, ""));
    let first = queuebox(scratch.path())
        .args(["migrate", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let messages = log_messages(&stderr(&first));
    assert!(
        messages
            .iter()
            .any(|m| m == "Applied 3 migration(s): 1, 2, 3"),
        "{messages:?}"
    );
    let tables: i64 = schema
        .client()
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('outbox', 'inbox', 'queuebox_schema_history')",
            &[&schema.name],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 3);
    let second = queuebox(scratch.path())
        .args(["migrate", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let messages = log_messages(&stderr(&second));
    assert!(
        messages
            .iter()
            .any(|m| m == "The database is at version 3. Nothing to apply."),
        "{messages:?}"
    );
    schema.drop().await;
}

#[tokio::test]
async fn sch_57_bad_baseline_value_is_a_usage_error() {
    let scratch = Scratch::new("baseline-bad");
    let output = queuebox(scratch.path())
        .args(["migrate", "--baseline", "7"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "--baseline needs a whole number from 1 to 3, got \"7\".\nUsage: queuebox migrate [--config PATH] [--baseline VERSION]\n"
    );
}

#[tokio::test]
async fn sch_56_baseline_records_hand_made_tables_then_applies_the_rest() {
    let schema = TestSchema::create("cli_baseline").await;
    let scratch = Scratch::new("baseline");
    schema
        .client()
        .batch_execute(include_str!(
            "../../queuebox-store-postgres/migrations/0001_create_outbox.sql"
        ))
        .await
        .unwrap();
    let file = scratch.write("q.yml", &pg_config(&schema, ""));
    // Without --baseline, tables without a history are refused (SCH-53).
    let refused = queuebox(scratch.path())
        .args(["migrate", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        log_messages(&stderr(&refused))
            .iter()
            .any(|m| m.contains("QueueBox tables exist without a migration history."))
    );
    let output = queuebox(scratch.path())
        .args(["migrate", "--baseline", "1", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let rows = schema
        .client()
        .query(
            "SELECT version, kind FROM queuebox_schema_history ORDER BY version",
            &[],
        )
        .await
        .unwrap();
    let history: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        history,
        vec![
            (1, "baseline".to_owned()),
            (2, "applied".to_owned()),
            (3, "applied".to_owned())
        ]
    );
    schema.drop().await;
}

#[tokio::test]
async fn ops_26_run_starts_and_shuts_down_cleanly_on_sigterm() {
    let schema = TestSchema::create("cli_run").await;
    let scratch = Scratch::new("run");
    let file = scratch.write("q.yml", &pg_config(&schema, "server:\n  httpPort: 0\n"));
    let child = queuebox(scratch.path())
        .args(["run", "--config"])
        .arg(&file)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let pid = child.id();
    let lines = support::process::stderr_lines(child.stderr.take().unwrap());
    let mut messages = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !messages.iter().any(|m| m == "QueueBox started") {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .expect("QueueBox did not start in time");
        messages.extend(log_messages(&line));
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    messages.extend(lines.iter().flat_map(|line| log_messages(&line)));
    assert_eq!(exit.code(), Some(0), "{messages:?}");
    for expected in [
        "QueueBox started",
        "Shutting down QueueBox...",
        "Shutdown complete",
    ] {
        assert!(
            messages.iter().any(|m| m == expected),
            "missing {expected:?} in {messages:?}"
        );
    }
    schema.drop().await;
}

#[test]
fn cfg_102_dst_32_a_private_destination_address_stops_the_start() {
    let scratch = Scratch::new("private");
    let file = scratch.write(
        "q.yml",
        "database:\n  url: postgres://app@127.0.0.1:1/app\nhttp:\n  blockPrivateAddresses: true\ndestinations:\n  billing:\n    type: http\n    baseUrl: http://127.0.0.1:9000\nroutes:\n  - topicPattern: \"**\"\n    destination: billing\n",
    );
    // `check` opens no connection and resolves nothing (CFG-27): valid.
    let output = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let started = Instant::now();
    let output = queuebox(scratch.path())
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused before the database"
    );
    let messages = log_messages(&stderr(&output));
    let last = messages.last().unwrap();
    assert!(
        last.starts_with("QueueBox could not check the destination addresses. Reason:")
            && last.contains("destinations.billing.baseUrl")
            && last.contains("127.0.0.1"),
        "{last}"
    );
}

/// Issue 17 defect 7 (CFG-14): a `QUEUEBOX_` variable whose value or name is not valid UTF-8
/// is refused like an unknown variable, not left out in silence.
#[test]
fn cfg_14_a_queuebox_variable_that_is_not_utf8_is_refused() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;
    let scratch = Scratch::new("check-not-utf8");
    scratch.write("queuebox.yml", "database:\n  url: postgres://app@db/app\n");
    let output = queuebox(scratch.path())
        .arg("check")
        .env("QUEUEBOX_DATABASE_POOLSIZE", OsStr::from_bytes(b"1\xff"))
        .env(OsStr::from_bytes(b"QUEUEBOX_\xffX"), "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(
        text.contains(
            "- QUEUEBOX_DATABASE_POOLSIZE: not valid UTF-8; QueueBox reads variables as UTF-8 text"
        ),
        "{text}"
    );
    assert!(
        text.contains("- QUEUEBOX_\u{fffd}X: not valid UTF-8"),
        "{text}"
    );
    assert!(text.contains("2 errors"), "{text}");
}
