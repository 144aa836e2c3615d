//! A running `queuebox run` process for end-to-end tests: started, watched through its JSON
//! log lines, probed over HTTP, signalled, and killed when the test ends.

use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver as Lines;
use std::time::{Duration, Instant};

use super::process::{Scratch, queuebox, stderr_lines};

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
        let scratch = Scratch::new(label);
        let file = scratch.write("queuebox.yml", config);
        let mut child = queuebox(scratch.path())
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
        service.port = started["http_port"]
            .as_u64()
            .expect("http_port on the start line") as u16;
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
        let code = self.child.wait().unwrap().code();
        self.drain_log();
        code
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
