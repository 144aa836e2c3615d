//! A running `queuebox run` process for end-to-end tests: started, watched through its JSON
//! log lines, probed over HTTP, signalled, and killed when the test ends.

use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver as Lines;
use std::time::{Duration, Instant};

use super::process::{Scratch, queuebox, stderr_lines};

/// How long a test waits for `queuebox` to exit: its own shutdown is bounded by OPS-29 (50 s
/// plus `outbox.shutdownTimeoutMs`, 30 s by default), so a process still running after this is
/// a fault to report, not a wait to extend.
const EXIT_LIMIT: Duration = Duration::from_secs(120);

pub struct Service {
    child: Child,
    lines: Lines<String>,
    /// Every log line read so far (JSON objects).
    pub log: Vec<serde_json::Value>,
    pub port: u16,
    _scratch: Scratch,
}

impl Service {
    /// Starts `queuebox run` with this configuration and waits for `QueueBox started`.
    pub fn start(label: &str, config: &str) -> Service {
        Self::start_env(label, config, &[])
    }

    /// [`Service::start`] with more environment variables for the process.
    pub fn start_env(label: &str, config: &str, env: &[(&str, &str)]) -> Service {
        let scratch = Scratch::new(label);
        let file = scratch.write("queuebox.yml", config);
        let mut command = queuebox(scratch.path());
        command.envs(env.iter().copied());
        let mut child = command
            .args(["run", "--config"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = stderr_lines(child.stderr.take().unwrap());
        let mut service = Service {
            child,
            lines,
            log: Vec::new(),
            port: 0,
            _scratch: scratch,
        };
        service.wait_for_log(Duration::from_secs(30), "QueueBox started");
        let started = service
            .log
            .iter()
            .find(|l| l["message"] == "QueueBox started")
            .cloned()
            .unwrap();
        service.port = started["httpPort"]
            .as_u64()
            .expect("httpPort on the start line") as u16;
        service
    }

    fn pump(&mut self, wait: Duration) -> bool {
        match self.lines.recv_timeout(wait) {
            Ok(line) => {
                if let Ok(value) = serde_json::from_str(&line) {
                    self.log.push(value);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Waits until a log line's message contains `text`.
    pub fn wait_for_log(&mut self, limit: Duration, text: &str) {
        let deadline = Instant::now() + limit;
        while !self.has_log(text) {
            let now = Instant::now();
            assert!(
                now < deadline,
                "no log line with {text:?}; log so far: {:#?}",
                self.log
                    .iter()
                    .map(|l| l["message"].clone())
                    .collect::<Vec<_>>()
            );
            self.pump((deadline - now).min(Duration::from_millis(200)));
        }
    }

    pub fn has_log(&self, text: &str) -> bool {
        self.log
            .iter()
            .any(|l| l["message"].as_str().is_some_and(|m| m.contains(text)))
    }

    /// Reads what the process logged meanwhile.
    pub fn drain_log(&mut self) {
        while self.pump(Duration::from_millis(1)) {}
    }

    /// Every line logged so far, as JSON text, for a failing test's message.
    pub fn log_lines(&mut self) -> Vec<String> {
        self.drain_log();
        self.log.iter().map(|l| l.to_string()).collect()
    }

    /// `GET path` on the data port: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.port, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name} failed");
    }

    /// SIGTERM, then the exit code.
    pub fn stop(mut self) -> Option<i32> {
        self.signal("TERM");
        self.exit_code()
    }

    /// Waits for the process to exit by itself (after a signal sent earlier).
    pub fn wait(mut self) -> Option<i32> {
        self.exit_code()
    }

    /// The exit code, waited for at most [`EXIT_LIMIT`]. A process still running then is
    /// killed and the test fails with the end of its log, instead of waiting for ever.
    fn exit_code(&mut self) -> Option<i32> {
        let deadline = Instant::now() + EXIT_LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.drain_log();
                return status.code();
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.drain_log();
                let messages: Vec<_> = self.log.iter().map(|l| l["message"].clone()).collect();
                let tail = &messages[messages.len().saturating_sub(40)..];
                panic!(
                    "queuebox did not exit within {}s and was killed; the last log lines: {tail:#?}",
                    EXIT_LIMIT.as_secs()
                );
            }
            // Reading the log meanwhile is the wait; once stderr has closed, `pump` returns at
            // once, so the loop sleeps instead.
            if !self.pump(Duration::from_millis(50)) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// The exit status when the process has exited by itself (a crash), else `None`.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// `kill -9`: no shutdown at all.
    pub fn kill_hard(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The value of one sample of `/metrics`, e.g. `queuebox_claims_lost_total{component="outbox"}`.
    pub fn metric(&self, sample: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics");
        body.lines()
            .find_map(|line| line.strip_prefix(sample)?.trim().parse().ok())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// An HTTP answer as the tests read it.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// `POST path` with these headers and body, on a fresh connection.
pub fn http_post(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse_answer(&raw)
}

fn parse_answer(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// `queuebox migrate` against this database URL, so a test can write rows before it starts a
/// service.
pub fn migrate(database_url: &str) {
    migrate_database(&format!("database:\n  url: \"{database_url}\"\n"));
}

/// `queuebox migrate` with this `database:` section (for a `type` other than PostgreSQL).
pub fn migrate_database(database_yaml: &str) {
    let scratch = Scratch::new("migrate");
    let file = scratch.write("queuebox.yml", database_yaml);
    let output = queuebox(scratch.path())
        .args(["migrate", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "queuebox migrate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
