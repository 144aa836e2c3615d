//! QueueBox on SQLite as a process (issue 12): the README's first command as a new user runs it,
//! with no database server reachable; a `kill -9` in the middle of a drain; and several
//! processes writing one file.

mod support;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use support::markdown::{code_blocks, repo_root};
use support::process::{Scratch, queuebox, stderr_lines};
use support::service::http_post;

/// Reads a child's stdout on a thread, one line at a time.
fn stdout_lines(stdout: std::process::ChildStdout) -> Receiver<String> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// A `queuebox run` process whose standard output (the `log` destination) and log lines the
/// test reads.
struct Running {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
    /// Every log line read so far (JSON objects).
    log: Vec<serde_json::Value>,
    /// Every standard output line read so far.
    printed: Vec<String>,
}

impl Running {
    /// Starts `queuebox run --config <config>` in `dir` with these extra variables.
    fn start(dir: &Path, config: &Path, env: &[(&str, &str)]) -> Running {
        let mut command = queuebox(dir);
        command
            .args(["run", "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("start queuebox");
        let out = stdout_lines(child.stdout.take().unwrap());
        let err = stderr_lines(child.stderr.take().unwrap());
        Running {
            child,
            out,
            err,
            log: Vec::new(),
            printed: Vec::new(),
        }
    }

    fn pump(&mut self) {
        while let Ok(line) = self.err.try_recv() {
            if let Ok(value) = serde_json::from_str(&line) {
                self.log.push(value);
            }
        }
        while let Ok(line) = self.out.try_recv() {
            self.printed.push(line);
        }
    }

    fn messages(&self) -> Vec<String> {
        self.log
            .iter()
            .filter_map(|l| l["message"].as_str().map(str::to_owned))
            .collect()
    }

    /// Waits until `done` holds for what was read so far; panics with the log after `limit`.
    fn wait_until(&mut self, limit: Duration, what: &str, done: impl Fn(&Running) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            self.pump();
            if done(self) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.pump();
                panic!(
                    "queuebox exited ({status}) before {what}; log: {:#?}",
                    self.messages()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {limit:?}; log: {:#?}",
                self.messages()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for `QueueBox started` and returns the data port it printed.
    fn started(&mut self) -> u16 {
        self.wait_until(Duration::from_secs(60), "start", |r| {
            r.log.iter().any(|l| l["message"] == "QueueBox started")
        });
        let line = self
            .log
            .iter()
            .find(|l| l["message"] == "QueueBox started")
            .expect("start line");
        line["httpPort"].as_u64().expect("httpPort") as u16
    }

    fn kill_hard(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn stop(mut self) -> Option<i32> {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every PostgreSQL setting a process could fall back on, pointed at a port nobody listens on,
/// so a test proves QueueBox needs no database server.
const NO_POSTGRES: &[(&str, &str)] = &[
    ("PGHOST", "127.0.0.1"),
    ("PGPORT", "1"),
    ("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none"),
    ("QUEUEBOX_TEST_PG_URL", "postgres://nobody@127.0.0.1:1/none"),
];

/// The webhook of the README's console block: the path of its `curl` and its body.
fn readme_webhook() -> (String, String) {
    let blocks = code_blocks(&repo_root().join("README.md"));
    let console = blocks
        .iter()
        .find(|b| b.lang == "console" && b.text.contains("curl"))
        .expect("the README shows the webhook in a console block");
    let curl = console
        .text
        .lines()
        .find_map(|l| l.strip_prefix("$ curl"))
        .expect("a $ curl line");
    let url = curl
        .split_whitespace()
        .find(|w| w.starts_with("localhost:"))
        .expect("the curl URL");
    let path = url.find('/').map(|i| url[i..].to_owned()).expect("a path");
    let body = curl
        .split_once("-d '")
        .and_then(|(_, rest)| rest.rsplit_once('\''))
        .map(|(body, _)| body.to_owned())
        .expect("the -d body");
    (path, body)
}

/// Issue 12, CFG-42, CFG-120: the README's first command on a machine with no database server.
/// A new user's fresh folder, `examples/quickstart.yml`, no PostgreSQL reachable; the README's
/// webhook goes in and the `log` destination prints its delivery line. The database file is
/// created on first start; a second start on it finds nothing to apply.
#[test]
fn readme_first_command_runs_the_whole_path_on_sqlite_with_no_server() {
    let home = Scratch::new("quickstart");
    let config = repo_root().join("examples/quickstart.yml");
    let mut env: Vec<(&str, &str)> = NO_POSTGRES.to_vec();
    // Port 8080 may be taken on a shared machine; everything else is the file as shipped.
    env.extend([
        ("QUEUEBOX_SERVER_HTTPPORT", "0"),
        ("QUEUEBOX_SERVER_MANAGEMENTPORT", "0"),
    ]);
    let mut run = Running::start(home.path(), &config, &env);
    let port = run.started();
    let file: PathBuf = home.path().join("queuebox-quickstart.db");
    assert!(
        file.is_file(),
        "the database file is created on first start"
    );

    let (path, body) = readme_webhook();
    let answer = http_post(
        port,
        &path,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(answer.status, 202, "{answer:?}");
    assert!(answer.json()["messageId"].is_string(), "{answer:?}");

    let sent: serde_json::Value = serde_json::from_str(&body).expect("the README body is JSON");
    run.wait_until(Duration::from_secs(30), "delivery line", |r| {
        r.printed.iter().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| {
                v.to_string().contains(sent["id"].as_str().unwrap_or("?")) || v["payload"] == sent
            })
        })
    });
    assert_eq!(run.stop(), Some(0), "a clean stop");

    // A second start on the same file: migrated already, nothing to apply.
    let mut again = Running::start(home.path(), &config, &env);
    again.started();
    assert!(
        again
            .messages()
            .iter()
            .any(|m| m.starts_with("The database is at version 2. Nothing to apply.")),
        "{:#?}",
        again.messages()
    );
    again.kill_hard();
}

/// SCH-54/59 on SQLite: `queuebox migrate` creates the file and applies both versions; a second
/// run applies nothing and exits 0; `sqlite::memory:` migrates too (a fresh database each time).
#[test]
fn sch_59_migrate_twice_on_a_sqlite_file() {
    let home = Scratch::new("sqlite-migrate");
    let config = home.write(
        "queuebox.yml",
        "database:\n  type: sqlite\n  url: sqlite://data.db\n",
    );
    let first = queuebox(home.path())
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let log = support::process::log_messages(&support::process::stderr(&first));
    assert_eq!(first.status.code(), Some(0), "{log:#?}");
    assert!(
        log.iter().any(|m| m == "Applied 2 migration(s): 1, 2"),
        "{log:#?}"
    );
    assert!(home.path().join("data.db").is_file());
    let second = queuebox(home.path())
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let log = support::process::log_messages(&support::process::stderr(&second));
    assert_eq!(second.status.code(), Some(0), "{log:#?}");
    assert!(
        log.iter()
            .any(|m| m == "The database is at version 2. Nothing to apply."),
        "{log:#?}"
    );

    let memory = home.write(
        "memory.yml",
        "database:\n  type: sqlite\n  url: \"sqlite::memory:\"\n",
    );
    let output = queuebox(home.path())
        .args(["migrate", "--config"])
        .arg(&memory)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::process::stderr(&output)
    );
}

/// CFG-42: the folder of a `sqlite://` file must exist; QueueBox does not create folders, and
/// says which file it could not open.
#[test]
fn cfg_42_a_missing_folder_stops_the_start_with_the_file_named() {
    let home = Scratch::new("sqlite-nofolder");
    let config = home.write(
        "queuebox.yml",
        "database:\n  type: sqlite\n  url: sqlite://missing/qb.db\n  startupTimeoutMs: 300\n",
    );
    let output = queuebox(home.path())
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let err = support::process::stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.contains("QueueBox could not connect to the database. Reason: ")
            && err.contains("missing/qb.db did not answer within"),
        "{err}"
    );
    assert!(!home.path().join("missing").exists());
}
