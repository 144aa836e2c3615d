//! Helpers of the NATS tests: the shared JetStream server (or `QUEUEBOX_TEST_NATS_URL`), streams
//! named for one test and deleted after it, the standard client nats-py that creates, reads and
//! publishes (`nats_client.py`), a private `nats-server` that a test may stop and start, and
//! configurations loaded through the real configuration loader.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use queuebox_config::{Config, LoadOptions, load};

pub mod child;
pub mod intake;

use child::run_with_deadline;

pub fn shared_url() -> String {
    std::env::var("QUEUEBOX_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

/// A name no other test or run uses: `<label>_<pid>_<n>`, upper case (stream names).
pub fn unique(label: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "QBT_{}_{}_{}",
        label.to_ascii_uppercase(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The standard client's script; these helpers are shared by more than one crate's tests.
fn script() -> PathBuf {
    repo_root().join("crates/queuebox-nats/tests/support/nats_client.py")
}

fn python() -> PathBuf {
    if let Ok(path) = std::env::var("QUEUEBOX_TEST_PYTHON") {
        return path.into();
    }
    let venv = repo_root().join(".venv/bin/python3");
    assert!(
        venv.exists(),
        "the test clients are not installed: run scripts/pyenv.sh (nats-py of scripts/test-requirements.txt)"
    );
    venv
}

/// How long one command of the standard client may take. Each of its requests is bounded by
/// nats-py's own timeouts (5 s) and the script gives its `close` 5 s; a client that still runs
/// after this is killed, so a hang in the client fails the test instead of stalling the suite.
const CLIENT_LIMIT: Duration = Duration::from_secs(180);

/// Runs one command of the standard client against `url`; its JSON lines.
pub fn py(url: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec![url];
    all.extend_from_slice(args);
    let mut command = Command::new(python());
    command.arg(script()).args(&all);
    run_with_deadline(command, b"", CLIENT_LIMIT)
        .expect_success(&format!("nats_client.py {args:?}"))
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// One message for the standard client to publish.
pub struct Publish {
    pub subject: String,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

/// Publishes with the standard client (JetStream, one acknowledged publish after the other).
pub fn py_publish(url: &str, messages: &[Publish]) {
    let dir = std::env::temp_dir().join(unique("pub"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("messages.jsonl");
    let mut text = String::new();
    for Publish {
        subject,
        body,
        headers,
    } in messages
    {
        let headers: serde_json::Map<String, serde_json::Value> = headers
            .iter()
            .map(|(n, v)| (n.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let line = match std::str::from_utf8(body) {
            Ok(text) => serde_json::json!({"subject": subject, "data": text, "headers": headers}),
            Err(_) => serde_json::json!({
                "subject": subject,
                "data_b64": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, body),
                "headers": headers,
            }),
        };
        text.push_str(&line.to_string());
        text.push('\n');
    }
    std::fs::write(&file, text).unwrap();
    let answer = py(url, &["publish", file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(answer[0]["published"], messages.len());
}

/// A stream of its own for one test, on `url`, deleted when dropped.
pub struct TestStream {
    pub url: String,
    pub name: String,
    /// The subject prefix the stream captures: `<prefix>.>`.
    pub prefix: String,
}

impl TestStream {
    pub fn create(url: &str, label: &str) -> TestStream {
        Self::create_with(url, label, &[])
    }

    pub fn create_with(url: &str, label: &str, extra: &[&str]) -> TestStream {
        let name = unique(label);
        let prefix = name.to_ascii_lowercase();
        let subjects = format!("{prefix}.>");
        let mut args = vec!["create-stream", name.as_str(), subjects.as_str()];
        args.extend_from_slice(extra);
        py(url, &args);
        TestStream {
            url: url.to_owned(),
            name,
            prefix,
        }
    }

    pub fn subject(&self, tail: &str) -> String {
        format!("{}.{tail}", self.prefix)
    }

    /// Every stored message, in stream order, as nats-py reads it.
    pub fn messages(&self) -> Vec<serde_json::Value> {
        py(&self.url, &["read-stream", &self.name])
    }
}

impl Drop for TestStream {
    fn drop(&mut self) {
        let mut command = Command::new(python());
        command
            .arg(script())
            .args([&self.url, "delete-stream", &self.name]);
        let _ = run_with_deadline(command, b"", CLIENT_LIMIT);
    }
}

/// A `nats-server -js` of this test alone, on a free port with its own store directory, so the
/// test may stop and start it; the shared server is never touched.
pub struct PrivateNats {
    pub port: u16,
    /// The server's name, which its greeting carries (see [`PrivateNats::resume`]).
    name: String,
    dir: PathBuf,
    child: Option<Child>,
}

impl PrivateNats {
    pub fn start() -> PrivateNats {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let name = unique("natsd").to_ascii_lowercase();
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = PrivateNats {
            port,
            name,
            dir,
            child: None,
        };
        server.resume();
        server
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server again on the same port and store (its streams survive).
    ///
    /// Ready means the server answering on the port is this one: its greeting (`INFO`) names
    /// it. While the server was stopped another process may have taken the free port; then
    /// this server cannot listen, and the test fails here instead of talking to a stranger.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "the private server runs already");
        let child = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "--server_name", &self.name, "-p"])
            .arg(self.port.to_string())
            .arg("-sd")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server is installed (scripts/services.sh)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!(
                    "the private nats-server on port {} exited at start ({status}): is the port taken?",
                    self.port
                );
            }
            if self.greets_as_itself() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the private nats-server did not answer on port {} as itself",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the server on the port greets with this server's name.
    fn greets_as_itself(&self) -> bool {
        use std::io::{BufRead, BufReader};
        let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut greeting = String::new();
        let _ = BufReader::new(stream).read_line(&mut greeting);
        greeting.starts_with("INFO ")
            && greeting.contains(&format!("\"server_name\":\"{}\"", self.name))
    }

    /// Stops the server hard (SIGKILL), as an outage does.
    pub fn halt(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        self.halt();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Loads a configuration text through the real loader (strict checks included), with no
/// environment. A `database` section is added when the text has none.
pub fn config(yaml: &str) -> Config {
    let dir = std::env::temp_dir().join(unique("cfg").to_ascii_lowercase());
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
