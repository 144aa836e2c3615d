//! The processes a phase runs: the receiver, `queuebox run` and `queuebox migrate`. Every child
//! is killed when its handle is dropped, so an error or an interrupt leaves nothing running;
//! the normal end is a SIGTERM and a wait.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::procfs::{self, Memory};
use crate::receipts::{self, Receipt};

/// Opens `path` for a child's standard error.
fn log_file(path: &Path) -> anyhow::Result<Stdio> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(Stdio::from(file))
}

/// The last lines of a log, for an error message.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

async fn sigterm(pid: u32) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await?;
    if !status.success() {
        bail!("kill -TERM {pid} failed: {status}");
    }
    Ok(())
}

/// SIGTERM, then wait up to `limit` for the exit.
async fn terminate(child: &mut Child, limit: Duration) -> anyhow::Result<()> {
    if let Some(pid) = child.id() {
        sigterm(pid).await?;
    }
    match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => {
            status?;
            Ok(())
        }
        Err(_) => bail!("the process did not exit within {limit:?} of SIGTERM"),
    }
}

/// `qb-receiver` on 127.0.0.1 and a port the system chose.
pub struct Receiver {
    child: Child,
    pub port: u16,
    out: PathBuf,
    log: PathBuf,
}

impl Receiver {
    pub async fn start(bin_dir: &Path, work: &Path, name: &str) -> anyhow::Result<Self> {
        let out = work.join(format!("{name}-receipts.csv"));
        let log = work.join(format!("{name}-receiver.log"));
        let mut child = Command::new(bin_dir.join("qb-receiver"))
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file(&log)?)
            .kill_on_drop(true)
            .spawn()
            .context("starting qb-receiver")?;
        let stdout = child.stdout.take().context("qb-receiver stdout")?;
        let mut line = String::new();
        tokio::time::timeout(
            Duration::from_secs(10),
            BufReader::new(stdout).read_line(&mut line),
        )
        .await
        .context("qb-receiver did not print its port")??;
        let port = line
            .trim()
            .strip_prefix("port=")
            .and_then(|p| p.parse().ok())
            .with_context(|| format!("qb-receiver printed {line:?}, not port=N"))?;
        Ok(Self {
            child,
            port,
            out,
            log,
        })
    }

    /// Requests recorded so far (`GET /count`).
    pub async fn count(&self) -> anyhow::Result<u64> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).await?;
        stream
            .write_all(b"GET /count HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        let body = answer.rsplit("\r\n\r\n").next().unwrap_or_default();
        body.trim()
            .parse()
            .with_context(|| format!("qb-receiver answered {answer:?}"))
    }

    /// Stops it and reads its records.
    pub async fn finish(mut self) -> anyhow::Result<Vec<Receipt>> {
        terminate(&mut self.child, Duration::from_secs(30))
            .await
            .with_context(|| format!("stopping qb-receiver; its log:\n{}", tail(&self.log)))?;
        let text = std::fs::read_to_string(&self.out)
            .with_context(|| format!("reading {}", self.out.display()))?;
        let (receipts, unnamed) = receipts::parse_csv(&text).map_err(anyhow::Error::msg)?;
        if unnamed > 0 {
            eprintln!("qb-bench: {unnamed} requests carried no X-Message-Id");
        }
        Ok(receipts)
    }
}

/// `queuebox migrate --config <config>`.
pub async fn migrate(queuebox: &Path, config: &Path, log: &Path) -> anyhow::Result<()> {
    let status = Command::new(queuebox)
        .arg("migrate")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file(log)?)
        .kill_on_drop(true)
        .status()
        .await
        .context("running queuebox migrate")?;
    if !status.success() {
        bail!("queuebox migrate failed ({status}):\n{}", tail(log));
    }
    Ok(())
}

/// A running `queuebox run`.
pub struct QueueBox {
    child: Child,
    pub pid: u32,
    log: PathBuf,
}

impl QueueBox {
    /// Starts it and waits for its `QueueBox started` line.
    pub async fn start(queuebox: &Path, config: &Path, log: &Path) -> anyhow::Result<Self> {
        let mut child = Command::new(queuebox)
            .arg("run")
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(log)?)
            .kill_on_drop(true)
            .spawn()
            .context("starting queuebox run")?;
        let pid = child.id().context("queuebox has no pid")?;
        for _ in 0..600 {
            if let Some(status) = child.try_wait()? {
                bail!("queuebox exited at start ({status}):\n{}", tail(log));
            }
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.contains("QueueBox started") {
                return Ok(Self {
                    child,
                    pid,
                    log: log.to_owned(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "queuebox did not log `QueueBox started` within 60 s:\n{}",
            tail(log)
        )
    }

    pub fn memory(&self) -> anyhow::Result<Memory> {
        Ok(procfs::memory(self.pid)?)
    }

    pub fn cpu_seconds(&self) -> f64 {
        procfs::cpu_seconds(self.pid).unwrap_or(f64::NAN)
    }

    /// SIGTERM and wait for the clean shutdown.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        terminate(&mut self.child, Duration::from_secs(60))
            .await
            .with_context(|| format!("stopping queuebox; its log:\n{}", tail(&self.log)))
    }

    /// Warnings and errors it logged so far (the count of lines with those levels).
    pub fn complaints(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"level\":\"WARN\"") || l.contains("\"level\":\"ERROR\""))
            .count()
    }
}
