//! A standard client run by a test as a child process, with a deadline: a client that hangs is
//! killed and the test fails with what it printed, instead of stalling the suite until
//! nextest's own limit. Shared by the NATS, Kafka and RabbitMQ test support.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a child ended: its exit status (`None` when it was killed at the deadline), everything
/// it wrote, and the deadline it had.
pub struct Finished {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub limit: Duration,
}

impl Finished {
    /// Its standard output when it exited with success; otherwise the test fails, saying
    /// whether it was killed or failed, with both of its outputs.
    pub fn expect_success(self, what: &str) -> String {
        let Some(status) = self.status else {
            panic!(
                "{what} did not finish within {}s and was killed; stdout: {}; stderr: {}",
                self.limit.as_secs(),
                self.stdout,
                self.stderr
            );
        };
        assert!(status.success(), "{what} failed: {}", self.stderr);
        self.stdout
    }
}

/// Runs `command` with `stdin` as its standard input, killed once it has run for `limit`.
pub fn run_with_deadline(mut command: Command, stdin: &[u8], limit: Duration) -> Finished {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("start {command:?}: {err}"));
    // The input is written and both outputs are read on threads, so a full pipe never blocks
    // the child or the test; the input closes when its thread ends.
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    Finished {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        limit,
    }
}
