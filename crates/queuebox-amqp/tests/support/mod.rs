//! Helpers of the RabbitMQ tests: the shared broker of scripts/services.sh (5672, guest/guest),
//! names of their own per test, and the standard client (Python's pika, pinned in
//! scripts/test-requirements.txt) that declares, publishes, reads back and deletes.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// The NATS support's file: a test binary that loads this support beside another one holds
// its own copy of it in each, which is harmless.
#[path = "../../../queuebox-nats/tests/support/child.rs"]
#[allow(clippy::duplicate_mod)]
mod child;

use child::run_with_deadline;

/// How long one command of the standard client may take (the longest, publishing the 10,000
/// messages of a crash test, takes seconds); a client still running after this is killed, so
/// a hang in it fails the test instead of stalling the suite.
const CLIENT_LIMIT: Duration = Duration::from_secs(180);

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
    let script = workspace().join("crates/queuebox-amqp/tests/support/pika_client.py");
    let mut command = Command::new(python());
    command.arg(script).arg(url).args(args);
    run_with_deadline(command, stdin.as_bytes(), CLIENT_LIMIT)
        .expect_success(&format!("pika_client {args:?}"))
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

/// A free TCP port on loopback (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A RabbitMQ node of the test's own, on free ports in a temporary directory, that the test may
/// stop and start again (never the machine's shared one). Its data survives a restart, so a
/// durable queue and its persistent messages do too. Dropped: stopped and removed.
pub struct PrivateBroker {
    pub port: u16,
    dist_port: u16,
    node: String,
    dir: PathBuf,
    child: Option<Child>,
}

/// A self-signed certificate authority and a server certificate it signed for `localhost` and
/// `127.0.0.1`, made with the `openssl` command in `dir`: `ca.pem`, `server.pem`, `server.key`.
pub fn tls_material(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=queuebox test CA",
        ],
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    ];
    for args in steps {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl PrivateBroker {
    pub fn start() -> PrivateBroker {
        Self::start_with("")
    }

    /// A private node that also listens with TLS on `tls_port`, with the certificates of
    /// [`tls_material`] in `certs` (no client certificate asked).
    pub fn start_tls(certs: &Path, tls_port: u16) -> PrivateBroker {
        let d = certs.display();
        Self::start_with(&format!(
            "listeners.ssl.default = 127.0.0.1:{tls_port}\n\
             ssl_options.cacertfile = {d}/ca.pem\n\
             ssl_options.certfile = {d}/server.pem\n\
             ssl_options.keyfile = {d}/server.key\n\
             ssl_options.verify = verify_none\n\
             ssl_options.fail_if_no_peer_cert = false\n"
        ))
    }

    fn start_with(extra_conf: &str) -> PrivateBroker {
        let port = free_port();
        let mut dist_port = free_port();
        while dist_port == port {
            dist_port = free_port();
        }
        let node = format!("qbtest{}x{port}@localhost", std::process::id());
        let dir = std::env::temp_dir().join(format!("qb-rabbitmq-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        // Its own listener, no plugins (the management plugin would want the shared node's
        // port), an empty env file instead of the machine's (which names the shared node).
        std::fs::write(
            dir.join("rabbitmq.conf"),
            format!("listeners.tcp.local = 127.0.0.1:{port}\nloopback_users = none\n{extra_conf}"),
        )
        .unwrap();
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        std::fs::write(dir.join("env.conf"), "").unwrap();
        let mut broker = PrivateBroker {
            port,
            dist_port,
            node,
            dir,
            child: None,
        };
        broker.start_again();
        broker
    }

    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    fn env(&self, command: &mut Command) {
        let d = &self.dir;
        command
            .current_dir(d)
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq.conf"))
            .env("RABBITMQ_CONF_ENV_FILE", d.join("env.conf"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("enabled_plugins"))
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("ERL_EPMD_ADDRESS", "127.0.0.1");
    }

    /// Starts the node (again) and waits until it takes connections.
    pub fn start_again(&mut self) {
        let mut command = Command::new("/usr/lib/rabbitmq/bin/rabbitmq-server");
        self.env(&mut command);
        let out = std::fs::File::create(self.dir.join("server.out")).unwrap();
        let child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start a private RabbitMQ node");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the private RabbitMQ node did not start; see {}",
                self.dir.join("server.out").display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops the node with `rabbitmqctl -n NODE stop` and waits for its process to end.
    pub fn stop(&mut self) {
        let mut command = Command::new("/usr/lib/rabbitmq/bin/rabbitmqctl");
        self.env(&mut command);
        let _ = command
            .args(["-n", &self.node, "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while child.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
