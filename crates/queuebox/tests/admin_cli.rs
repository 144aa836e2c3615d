//! The operator commands end to end (docs/commands.md): `queuebox outbox list|show|replay|delete`
//! and `queuebox inbox list|show|requeue|delete` against the real PostgreSQL, with their
//! `--dry-run`, confirmation, output formats, progress bar and exit codes.

mod support;

use std::path::PathBuf;
use std::process::{Output, Stdio};

use serde_json::{Value, json};
use support::pg::TestSchema;
use support::process::{Scratch, queuebox};
use support::service::migrate;

struct Cli {
    scratch: Scratch,
    file: PathBuf,
}

impl Cli {
    fn new(schema: &TestSchema) -> Cli {
        let scratch = Scratch::new("admin-cli");
        let file = scratch.write(
            "queuebox.yml",
            &format!(
                "database:\n  url: \"{}\"\ndestinations:\n  hook:\n    type: http\n    baseUrl: http://127.0.0.1:9\nroutes:\n  - topicPattern: \"**\"\n    destination: hook\n",
                schema.queuebox_url()
            ),
        );
        Cli { scratch, file }
    }

    /// Runs with `stdin` as the answer to a prompt (closed when `None`).
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut command = queuebox(self.scratch.path());
        command
            .args(args)
            .arg("--config")
            .arg(&self.file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::piped());
        let mut child = command.spawn().unwrap();
        {
            use std::io::Write;
            let mut input = child.stdin.take().unwrap();
            if let Some(text) = stdin {
                let _ = input.write_all(text.as_bytes());
            }
        }
        child.wait_with_output().unwrap()
    }

    /// Runs under a pseudo-terminal (`script`), optionally piping stdout through `cat`.
    fn run_on_terminal(&self, args: &str, piped: bool) -> String {
        let bin = std::env::var_os("QUEUEBOX_TEST_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_queuebox").into());
        let mut line = format!("{} {args} --config {}", bin.display(), self.file.display());
        if piped {
            line.push_str(" | cat");
        }
        let output = std::process::Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .current_dir(self.scratch.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(output.status.success(), "{line}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_out(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(o)))
}

async fn exec(schema: &TestSchema, sql: &str) {
    schema.client().batch_execute(sql).await.unwrap();
}

async fn count(schema: &TestSchema, sql: &str) -> i64 {
    schema.client().query_one(sql, &[]).await.unwrap().get(0)
}

async fn setup(label: &str) -> (TestSchema, Cli) {
    let schema = TestSchema::create(label).await;
    migrate(&schema.queuebox_url());
    let cli = Cli::new(&schema);
    (schema, cli)
}

#[tokio::test(flavor = "multi_thread")]
async fn cli_outbox_list_and_show_in_table_and_json_with_exit_codes() {
    let (schema, cli) = setup("cli_list").await;
    exec(
        &schema,
        "INSERT INTO outbox (topic, payload, state, last_error) SELECT 'c.t', jsonb_build_object('n', i), 'dead', 'boom ' || i FROM generate_series(1, 3) i",
    )
    .await;
    let o = cli.run(
        &["outbox", "list", "--output", "json", "--limit", "2"],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let page = json_out(&o);
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["items"][0]["destination"], "hook");
    let cursor = page["nextCursor"].as_str().unwrap().to_owned();
    let o = cli.run(
        &["outbox", "list", "--output", "json", "--cursor", &cursor],
        None,
    );
    assert_eq!(json_out(&o)["items"].as_array().unwrap().len(), 1);
    assert_eq!(json_out(&o)["nextCursor"], Value::Null);
    let o = cli.run(&["outbox", "list", "--topic", "c.t"], None);
    let text = out(&o);
    assert!(text.starts_with("ID"), "{text}");
    assert!(
        text.contains("boom 3") && text.contains("(3 rows)"),
        "{text}"
    );
    let id = page["items"][0]["id"].as_str().unwrap().to_owned();
    let o = cli.run(&["outbox", "show", &id, "--output", "json"], None);
    let shown = json_out(&o);
    assert_eq!(shown["id"], id.as_str());
    assert!(shown["payload"]["n"].is_number());
    assert!(shown.get("claimToken").is_none());
    let o = cli.run(&["outbox", "show", &id], None);
    assert!(out(&o).contains(&format!("id: {id}")), "{}", out(&o));

    // Exit codes (docs/commands.md): 3 not found, 2 a bad value or flag.
    let o = cli.run(&["outbox", "show", &uuid::Uuid::new_v4().to_string()], None);
    assert_eq!(o.status.code(), Some(3));
    assert!(err(&o).contains("Message not found"));
    let o = cli.run(&["outbox", "show", "nope"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("Invalid id: nope"));
    let o = cli.run(&["outbox", "list", "--limit", "501"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("limit must be between 1 and 500"));
    let o = cli.run(&["outbox", "list", "--destination", "nowhere"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("Unknown destination: nowhere"));
    let o = cli.run(&["outbox", "list", "--frobnicate"], None);
    assert_eq!(o.status.code(), Some(2));
    let o = cli.run(&["outbox", "replay"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("A replay needs at least one filter."));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cli_replay_dry_run_changes_nothing_a_no_aborts_and_yes_replays() {
    let (schema, cli) = setup("cli_replay").await;
    exec(
        &schema,
        "INSERT INTO outbox (topic, payload, state, last_error, attempt) SELECT 'r.t', '{}', 'dead', 'boom', 5 FROM generate_series(1, 4);
         INSERT INTO outbox (topic, payload, state) SELECT 'r.t', '{}', 'sent' FROM generate_series(1, 2);
         INSERT INTO outbox (topic, payload, scheduled_at) VALUES ('r.t', '{}', now() + interval '1 hour');",
    )
    .await;
    let snapshot = "SELECT count(*) FROM outbox WHERE state = 'pending'";
    let o = cli.run(&["outbox", "replay", "--topic", "r.t", "--dry-run"], None);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o).trim(), "Would replay 6 outbox rows.");
    let o = cli.run(
        &[
            "outbox",
            "replay",
            "--topic",
            "r.t",
            "--dry-run",
            "--limit",
            "5",
            "--output",
            "json",
        ],
        None,
    );
    assert_eq!(json_out(&o), json!({"dryRun": true, "count": 5}));
    assert_eq!(
        count(&schema, snapshot).await,
        1,
        "--dry-run changes nothing"
    );
    // The prompt: "n", or no answer at all, aborts with exit 5.
    let o = cli.run(&["outbox", "replay", "--topic", "r.t"], Some("n\n"));
    assert_eq!(o.status.code(), Some(5));
    assert!(
        err(&o).contains("This will replay 6 outbox rows. Continue? [y/N]"),
        "{}",
        err(&o)
    );
    let o = cli.run(&["outbox", "replay", "--topic", "r.t"], None);
    assert_eq!(o.status.code(), Some(5));
    assert_eq!(count(&schema, snapshot).await, 1);
    // "y" replays; a limit takes the oldest first.
    let o = cli.run(
        &["outbox", "replay", "--topic", "r.t", "--limit", "2"],
        Some("y\n"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o).trim(), "Replayed 2 outbox rows.");
    let o = cli.run(
        &[
            "outbox", "replay", "--topic", "r.t", "--yes", "--output", "json",
        ],
        None,
    );
    assert_eq!(json_out(&o), json!({"moved": 4}));
    assert_eq!(count(&schema, snapshot).await, 7);
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM outbox WHERE attempt = 0 AND last_error IS NULL"
        )
        .await,
        7
    );
    // ADM-10: the change is logged with its count.
    assert!(err(&o).contains("admin replay: 4 rows"), "{}", err(&o));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cli_bulk_delete_is_guarded_by_state_and_the_bar_shows_only_on_a_terminal() {
    let (schema, cli) = setup("cli_delete").await;
    let insert_dead = "INSERT INTO outbox (topic, payload, state, last_error) SELECT 'd.t', '{}', 'dead', 'x' FROM generate_series(1, 1200)";
    exec(&schema, insert_dead).await;
    exec(&schema, "INSERT INTO outbox (topic, payload, scheduled_at) VALUES ('d.t', '{}', now() + interval '1 hour')").await;
    let pending: String = schema
        .client()
        .query_one("SELECT id::text FROM outbox WHERE state = 'pending'", &[])
        .await
        .unwrap()
        .get(0);
    // One row by id: 4 for a pending row.
    let o = cli.run(&["outbox", "delete", &pending], None);
    assert_eq!(o.status.code(), Some(4));
    assert!(err(&o).contains("Only sent or dead rows can be deleted."));
    let o = cli.run(&["outbox", "delete", "--topic", "d.t"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("A bulk delete needs state: sent or dead."));
    // On a terminal the bar is drawn on stderr; its text is `<n>/1200 rows`.
    let shown = cli.run_on_terminal("outbox delete --state dead --topic d.t --yes", false);
    assert!(shown.contains("/1200 rows"), "{shown}");
    assert!(shown.contains("Deleted 1200 outbox rows."), "{shown}");
    assert_eq!(count(&schema, "SELECT count(*) FROM outbox").await, 1);
    // With stdout piped, nothing of the bar appears, though stderr is still the terminal.
    exec(&schema, insert_dead).await;
    let piped = cli.run_on_terminal("outbox delete --state dead --yes", true);
    assert!(!piped.contains("/1200 rows"), "{piped}");
    assert!(piped.contains("Deleted 1200 outbox rows."), "{piped}");
    assert_eq!(
        count(&schema, "SELECT count(*) FROM outbox").await,
        1,
        "the pending row stays"
    );
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cli_inbox_list_show_requeue_and_delete() {
    let (schema, cli) = setup("cli_inbox").await;
    exec(
        &schema,
        "INSERT INTO inbox (source, idempotency_key, payload, state, consumption, attempt, last_error) VALUES
           ('jobs', 'a', '{\"a\":1}', 'dead', 'pull', 3, 'gave up'),
           ('jobs', 'b', '{}', 'dead', 'pull', 3, 'gave up'),
           ('hooks', 'c', '{}', 'dead', 'push', 1, 'no route'),
           ('jobs', 'd', '{}', 'processed', 'pull', 1, NULL);",
    )
    .await;
    let o = cli.run(
        &["inbox", "list", "--source", "jobs", "--output", "json"],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let items = json_out(&o)["items"].as_array().cloned().unwrap();
    assert_eq!(items.len(), 2);
    let id = items.iter().find(|i| i["idempotencyKey"] == "a").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let o = cli.run(&["inbox", "show", &id, "--output", "json"], None);
    assert_eq!(json_out(&o)["payload"], json!({"a": 1}));
    let o = cli.run(&["inbox", "list", "--consumption", "sideways"], None);
    assert_eq!(o.status.code(), Some(2));
    let o = cli.run(&["inbox", "requeue"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("A requeue needs at least one filter."));
    let o = cli.run(
        &["inbox", "requeue", "--consumption", "pull", "--dry-run"],
        None,
    );
    assert_eq!(out(&o).trim(), "Would requeue 2 inbox rows.");
    assert_eq!(
        count(&schema, "SELECT count(*) FROM inbox WHERE state = 'dead'").await,
        3
    );
    let o = cli.run(
        &[
            "inbox",
            "requeue",
            "--consumption",
            "pull",
            "--yes",
            "--output",
            "json",
        ],
        None,
    );
    assert_eq!(json_out(&o), json!({"requeued": 2}));
    assert_eq!(
        count(&schema, "SELECT count(*) FROM inbox WHERE state = 'pending' AND attempt = 0 AND last_error IS NULL").await,
        2
    );
    // Delete: one pending row refuses (4), the processed one goes; bulk by state.
    let o = cli.run(&["inbox", "delete", &id], None);
    assert_eq!(o.status.code(), Some(4));
    assert!(err(&o).contains("Only processed or dead rows can be deleted."));
    let o = cli.run(&["inbox", "delete", "--state", "processed", "--yes"], None);
    assert_eq!(out(&o).trim(), "Deleted 1 inbox rows.");
    let o = cli.run(
        &[
            "inbox", "delete", "--state", "dead", "--source", "hooks", "--yes",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox").await, 2);
    let o = cli.run(&["inbox", "delete", "--state", "dead", "--yes"], None);
    assert_eq!(out(&o).trim(), "No inbox rows match; nothing to delete.");
    schema.drop().await;
}
