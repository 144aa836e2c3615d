//! Issue 14, "the first hour": what a new user sees from the binary when something is wrong at
//! start (a database that cannot be used, a configuration error under `run`, a part this build
//! cannot run, a port in use) and the command-line conveniences (`--version`, `help`,
//! `completions`). Every case runs the real `queuebox` binary.

mod support;

use std::time::{Duration, Instant};

use support::process::{Scratch, log_messages, queuebox, stderr, stdout};

/// `queuebox migrate` on this `database` block (no port, so tests run side by side); its exit
/// code, how long it took, and its log messages.
fn migrate(label: &str, database: &str) -> (Option<i32>, Duration, Vec<String>) {
    let scratch = Scratch::new(label);
    let file = scratch.write("q.yml", &format!("database:\n{database}"));
    let started = Instant::now();
    let output = queuebox(scratch.path())
        .args(["migrate", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    (
        output.status.code(),
        started.elapsed(),
        log_messages(&stderr(&output)),
    )
}

/// A PostgreSQL URL on the test server with another user or database.
fn pg_url(user: &str, database: &str) -> String {
    let base = url::Url::parse(&support::pg::server_url()).unwrap();
    format!(
        "postgres://{user}@{}:{}/{database}?sslmode=disable",
        base.host_str().unwrap(),
        base.port().unwrap_or(5432)
    )
}

/// Item 1: a permanent refusal stops the start at once (well inside the 60 s limit), with the
/// server's reason and the fix.
#[test]
fn issue_14_1_permanent_database_refusals_stop_at_once_with_the_fix() {
    let unique = format!("qb_fh_{}", std::process::id());
    let mysql = url::Url::parse(&support::mysql::server_url()).unwrap();
    let mysql_at = format!(
        "{}:{}",
        mysql.host_str().unwrap(),
        mysql.port().unwrap_or(3306)
    );
    let garbage = Scratch::new("fh-notdb");
    let not_a_database = garbage.write("qb.db", &"not a database ".repeat(300));
    let cases = [
        (
            format!("  url: \"{}\"\n", pg_url("postgres", &unique)),
            format!(
                "database \"{unique}\" does not exist (SQLSTATE 3D000). Create the database (createdb {unique}), or fix the database name in database.url."
            ),
        ),
        (
            format!("  url: \"{}\"\n", pg_url(&unique, "test")),
            format!(
                "role \"{unique}\" does not exist (SQLSTATE 28000). Create the role (createuser {unique}), or set database.username (or the user in database.url) to one that exists."
            ),
        ),
        (
            format!(
                "  type: mysql\n  url: \"mysql://{}@{mysql_at}/{unique}\"\n",
                mysql.username()
            ),
            format!(
                "Unknown database '{unique}' (MySQL error 1049). Create the database (CREATE DATABASE `{unique}`), or fix its name in database.url."
            ),
        ),
        (
            format!("  type: mysql\n  url: \"mysql://{unique}@{mysql_at}/test\"\n"),
            ". Check the user and password (database.username, database.password, or the ones in database.url)".to_owned(),
        ),
        (
            format!(
                "  type: sqlite\n  url: \"sqlite://{}\"\n",
                not_a_database.display()
            ),
            format!(
                "file is not a database (SQLite error 26). {} is not a QueueBox SQLite database",
                not_a_database.display()
            ),
        ),
    ];
    for (database, expected) in cases {
        let (code, took, messages) = migrate("fh-refused", &database);
        assert_eq!(code, Some(1), "{database}: {messages:?}");
        assert!(took < Duration::from_secs(10), "{database}: took {took:?}");
        let last = messages.last().expect("a failure line");
        assert!(
            last.starts_with("QueueBox could not connect to the database. Reason: ")
                && last.contains(&expected),
            "{database}: {last}"
        );
        assert!(
            !messages
                .iter()
                .any(|m| m.starts_with("Waiting for the database")),
            "{messages:?}"
        );
    }
}

/// Item 1: an unreachable database is waited for until `startupTimeoutMs`, with a warn line at
/// the first failure and every few seconds after: what it waits for, how long so far, the key.
#[test]
fn issue_14_1_an_unreachable_database_is_waited_for_with_warn_lines() {
    let (code, took, messages) = migrate(
        "fh-waiting",
        "  url: \"postgres://app@127.0.0.1:1/app?sslmode=disable\"\n  startupTimeoutMs: 8000\n",
    );
    assert_eq!(code, Some(1));
    assert!(took >= Duration::from_millis(7900), "{took:?}");
    let waiting: Vec<&String> = messages
        .iter()
        .filter(|m| m.starts_with("Waiting for the database at 127.0.0.1:1 ("))
        .collect();
    assert_eq!(waiting.len(), 2, "{messages:?}");
    assert!(
        waiting[0]
            .ends_with("): 0 s so far; the start gives up after 8 s (database.startupTimeoutMs)."),
        "{}",
        waiting[0]
    );
    assert!(waiting[1].contains("): 7 s so far;"), "{}", waiting[1]);
    assert!(
        messages
            .last()
            .unwrap()
            .starts_with("QueueBox could not connect to the database. Reason: 127.0.0.1:1 did not answer within 8000 ms"),
        "{messages:?}"
    );
}

/// Item 2: `run` prints the report `check` prints, byte for byte, as text on stderr, whatever
/// `log.format` is, and exits 1.
#[test]
fn issue_14_2_run_prints_the_configuration_report_as_check_does() {
    let scratch = Scratch::new("fh-run-report");
    let file = scratch.write(
        "q.yml",
        "database:\n  url: postgres://app@127.0.0.1:1/app\noutbox:\n  batchSzie: 10\n  concurrency: 0\nlog:\n  format: json\n",
    );
    let check = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    for format in ["json", "text"] {
        let run = queuebox(scratch.path())
            .args(["run", "--config"])
            .arg(&file)
            .env("QUEUEBOX_LOG_FORMAT", format)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(1), "{format}");
        assert_eq!(stderr(&run), stderr(&check), "{format}");
        assert!(stdout(&run).is_empty());
    }
    let text = stderr(&check);
    assert!(
        text.starts_with("The configuration has 2 errors. Fix each one and start QueueBox again.\n- outbox.batchSzie: unknown key; did you mean batchSize?\n"),
        "{text}"
    );
}

/// Item 3: what `run` refuses before it touches the network, `check` refuses with the same
/// line and exit 1. `database.type: sqlserver` has no store in this build.
#[test]
fn issue_14_3_check_refuses_what_run_refuses() {
    let scratch = Scratch::new("fh-check-run");
    let file = scratch.write(
        "q.yml",
        "database:\n  type: sqlserver\n  url: sqlserver://127.0.0.1:1\n  username: sa\n",
    );
    let check = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let expected = "QueueBox could not connect to the database. Reason: database.type sqlserver has no store in this build of QueueBox; use postgresql, sqlite or mysql";
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    assert_eq!(stderr(&check), format!("{expected}\n"));
    assert!(stdout(&check).is_empty(), "{}", stdout(&check));
    let run = queuebox(scratch.path())
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(log_messages(&stderr(&run)), [expected]);
}

/// Item 3: a destination that cannot be built (a header it reserves) is found by `check` too.
#[test]
fn issue_14_3_check_builds_the_destinations() {
    let scratch = Scratch::new("fh-check-build");
    let file = scratch.write(
        "q.yml",
        "database:\n  url: postgres://app@127.0.0.1:1/app\ndestinations:\n  audit:\n    type: log\n    file: audit.jsonl\n",
    );
    let check = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    assert!(
        !scratch.path().join("audit.jsonl").exists(),
        "check opens no file"
    );
}

/// Item 4: the ports are bound before the database is waited for; a port in use ends the start
/// at once and names the key that sets it.
#[test]
fn issue_14_4_a_port_in_use_is_named_before_any_database_wait() {
    let holder = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    for (key, yaml) in [
        ("server.httpPort", format!("server:\n  httpPort: {port}\n")),
        (
            "server.managementPort",
            format!("server:\n  httpPort: 0\n  managementPort: {port}\n"),
        ),
    ] {
        let scratch = Scratch::new("fh-port");
        // Port 1 never answers: a start that waited for it would take 30 s.
        let file = scratch.write(
            "q.yml",
            &format!(
                "{yaml}database:\n  url: postgres://app@127.0.0.1:1/app?sslmode=disable\n  startupTimeoutMs: 30000\n"
            ),
        );
        let started = Instant::now();
        let output = queuebox(scratch.path())
            .args(["run", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "{key}");
        assert_eq!(output.status.code(), Some(1));
        let messages = log_messages(&stderr(&output));
        let last = messages.last().expect("a failure line");
        assert!(
            last.starts_with(&format!(
                "QueueBox could not listen on port {port}. Reason: "
            )),
            "{last}"
        );
        assert!(
            last.ends_with(&format!(
                "Set {key} to a free port, or stop the process that holds this one."
            )),
            "{last}"
        );
    }
    drop(holder);
}

/// Item 5: `--version`, `help`, `help <command>` and `completions <shell>`.
#[test]
fn issue_14_5_version_help_and_completions() {
    let scratch = Scratch::new("fh-cli");
    let run = |args: &[&str]| queuebox(scratch.path()).args(args).output().unwrap();
    let version = format!("queuebox {}\n", env!("CARGO_PKG_VERSION"));
    for args in [&["--version"][..], &["-V"], &["version"]] {
        let output = run(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert_eq!(stdout(&output), version, "{args:?}");
    }
    let help = run(&["help"]);
    assert_eq!(help.status.code(), Some(0));
    for command in [
        "run",
        "check",
        "migrate",
        "version",
        "completions",
        "config",
    ] {
        assert!(
            stdout(&help).contains(&format!("\n  {command} ")),
            "{command}: {}",
            stdout(&help)
        );
    }
    let migrate = run(&["help", "migrate"]);
    assert_eq!(migrate.status.code(), Some(0));
    assert!(stdout(&migrate).contains("--baseline <VERSION>"));
    assert_eq!(stdout(&run(&["migrate", "--help"])), stdout(&migrate));
    for (shell, marker) in [
        ("bash", "complete -F _queuebox"),
        ("zsh", "#compdef queuebox"),
        ("fish", "complete -c queuebox"),
    ] {
        let output = run(&["completions", shell]);
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = stdout(&output);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("migrate"), "{shell}");
    }
    let wrong = run(&["completions", "tcsh"]);
    assert_eq!(wrong.status.code(), Some(2));
    assert!(stderr(&wrong).starts_with("Unknown arguments: tcsh\nUsage: queuebox"));
}

/// Items 6 and 8 on the quickstart's shape (SQLite, an `http` source whose relay topic is
/// `{{ eventType }}` from `$.type`, a `log` destination): a webhook without `type` is refused
/// with 400 naming the missing field and the source, and no row is stored; a webhook with it is
/// answered with its `inboxId`, and the delivery line names both ids.
#[test]
fn issue_14_6_8_push_topic_checked_at_receipt_and_both_ids_named() {
    let home = Scratch::new("fh-push");
    let db = home.path().join("qb.db");
    let deliveries = home.path().join("deliveries.jsonl");
    let config = format!(
        "server:\n  httpPort: 0\ndatabase:\n  type: sqlite\n  url: sqlite://{}\ninbox:\n  relay:\n    pollIntervalMs: 100\noutbox:\n  pollIntervalMs: 100\nsources:\n  orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\ndestinations:\n  console:\n    type: log\n    file: {}\nroutes:\n  - topicPattern: \"**\"\n    destination: console\n",
        db.display(),
        deliveries.display()
    );
    let mut service = support::service::Service::start("fh-push-run", &config);
    let refused = support::service::http_post(
        service.port,
        "/inbox/orders",
        &[("Content-Type", "application/json")],
        br#"{"id": "evt_0", "orderId": "o-1"}"#,
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        refused.json(),
        serde_json::json!({"error": "The message has no event type (tried path $.type), and the relay topic '{{ eventType }}' of source orders needs it. Nothing was stored."})
    );
    let stored = support::service::http_post(
        service.port,
        "/inbox/orders",
        &[("Content-Type", "application/json")],
        br#"{"id": "evt_1", "type": "order.created", "orderId": "o-1"}"#,
    );
    assert_eq!(stored.status, 202, "{}", stored.body);
    let answer = stored.json();
    let inbox_id = answer["inboxId"].as_str().expect("inboxId").to_owned();
    assert_eq!(
        answer["messageId"],
        inbox_id.as_str(),
        "the spec's field stays"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let line = loop {
        if let Some(line) = std::fs::read_to_string(&deliveries)
            .ok()
            .and_then(|text| text.lines().next().map(str::to_owned))
        {
            break line;
        }
        assert!(Instant::now() < deadline, "no delivery line");
        std::thread::sleep(Duration::from_millis(100));
    };
    let delivery: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(delivery["inboxId"], inbox_id.as_str(), "{line}");
    assert_eq!(delivery["outboxId"], delivery["messageId"], "{line}");
    assert_ne!(delivery["outboxId"], inbox_id.as_str(), "{line}");
    assert_eq!(delivery["headers"]["x-inbox-id"], inbox_id.as_str());
    service.drain_log();
    assert_eq!(service.stop(), Some(0));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let keys: Vec<String> = conn
        .prepare("SELECT idempotency_key FROM inbox ORDER BY idempotency_key")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(keys, ["evt_1"], "the refused webhook left no row");
}

/// Item 7: after `queuebox migrate`, the application's INSERT of an outbox row with an empty
/// topic is refused by the database itself, on every store, naming `ck_outbox_topic`; a topic
/// that is not empty is still taken.
#[tokio::test]
async fn issue_14_7_an_empty_outbox_topic_is_refused_by_the_insert() {
    use mysql_async::prelude::Queryable as _;
    let empty = "INSERT INTO outbox (topic, payload) VALUES ('', '{}')";
    let fine = "INSERT INTO outbox (topic, payload) VALUES ('order.created', '{}')";

    let schema = support::pg::TestSchema::create("fh_topic").await;
    support::service::migrate(&schema.queuebox_url());
    let err = schema.client().batch_execute(empty).await.unwrap_err();
    let db = err.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "23514", "{db:?}");
    assert_eq!(db.constraint(), Some("ck_outbox_topic"));
    schema.client().batch_execute(fine).await.unwrap();
    schema.drop().await;

    let mysql = support::mysql::TestDatabase::create("fh_topic").await;
    support::service::migrate_database(&format!(
        "database:\n  type: mysql\n  url: \"{}\"\n",
        mysql.queuebox_url()
    ));
    let mut conn = mysql.conn().await;
    let err = conn.query_drop(empty).await.unwrap_err();
    assert!(err.to_string().contains("ck_outbox_topic"), "{err}");
    conn.query_drop(fine).await.unwrap();
    drop(conn);
    mysql.drop().await;

    let home = Scratch::new("fh-topic-sqlite");
    let file = home.path().join("qb.db");
    support::service::migrate_database(&format!(
        "database:\n  type: sqlite\n  url: \"sqlite://{}\"\n",
        file.display()
    ));
    let conn = rusqlite::Connection::open(&file).unwrap();
    let err = conn.execute(empty, []).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ck_outbox_topic: the outbox topic must not be empty"
    );
    conn.execute(fine, []).unwrap();
    let err = conn
        .execute("UPDATE outbox SET topic = ''", [])
        .unwrap_err();
    assert!(err.to_string().contains("ck_outbox_topic"), "{err}");
}

/// A PostgreSQL server of this test's own (initdb into a temp folder, its own port) that asks
/// for a password (scram-sha-256) and has TLS off: the shared server trusts every login on
/// loopback and speaks TLS, so neither refusal below can be seen there. Stopped on drop.
struct PasswordServer {
    dir: std::path::PathBuf,
    port: u16,
}

impl PasswordServer {
    const PASSWORD: &'static str = "right-password";

    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("qb-fh-pg-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("pw"), Self::PASSWORD).unwrap();
        // initdb refuses to run as root: the server runs as the postgres user.
        let as_postgres = |program: &str, args: &[&str]| {
            let status = std::process::Command::new("runuser")
                .args(["-u", "postgres", "--", program])
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "{program} {args:?}: {status}");
        };
        std::process::Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .unwrap();
        let data = dir.join("data");
        let pwfile = dir.join("pw");
        as_postgres(
            "/usr/lib/postgresql/15/bin/initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                &format!("--pwfile={}", pwfile.display()),
            ],
        );
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c ssl=off",
            dir.display()
        );
        as_postgres(
            "/usr/lib/postgresql/15/bin/pg_ctl",
            &["-D", data.to_str().unwrap(), "-o", &options, "-w", "start"],
        );
        Self { dir, port }
    }

    fn url(&self, password: &str, sslmode: &str) -> String {
        format!(
            "postgres://postgres:{password}@127.0.0.1:{}/postgres?sslmode={sslmode}",
            self.port
        )
    }
}

impl Drop for PasswordServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--", "/usr/lib/postgresql/15/bin/pg_ctl"])
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Item 1, the two refusals the shared server cannot show: a wrong password, and TLS asked of a
/// server without it. Each stops the start at once with the reason and the fix; the right
/// password without TLS migrates, so the server itself was fine.
#[test]
fn issue_14_1_a_wrong_password_and_refused_tls_stop_at_once() {
    let server = PasswordServer::start();
    let cases = [
        (
            server.url("wrong-password", "disable"),
            "Check the password: database.password, or the password in database.url.",
        ),
        (
            server.url(PasswordServer::PASSWORD, "require"),
            "Enable TLS on the server, or set sslmode=prefer or sslmode=disable in database.url.",
        ),
    ];
    for (url, fix) in cases {
        let (code, took, messages) = migrate("fh-refused-auth", &format!("  url: \"{url}\"\n"));
        assert_eq!(code, Some(1), "{url}: {messages:?}");
        assert!(took < Duration::from_secs(10), "{url}: took {took:?}");
        let last = messages.last().expect("a failure line");
        assert!(
            last.starts_with("QueueBox could not connect to the database. Reason: ")
                && last.ends_with(fix),
            "{url}: {last}"
        );
        assert!(
            !last.contains(PasswordServer::PASSWORD) && !last.contains("wrong-password"),
            "no password in the line: {last}"
        );
    }
    let right = server.url(PasswordServer::PASSWORD, "disable");
    let (code, _, messages) = migrate("fh-right-auth", &format!("  url: \"{right}\"\n"));
    assert_eq!(code, Some(0), "{messages:?}");
}
