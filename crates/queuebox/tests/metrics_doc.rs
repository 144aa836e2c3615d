//! docs/metrics.md stays true (operations.md MET-2, MET-7, MET-8): its catalogue table equals
//! the engine's `catalogue()` in both directions, and a scrape of the real binary shows only
//! documented families, with every "at start" family of the page present.

// Only the two helpers this test needs, so it does not depend on the other helpers' modules.
#[allow(dead_code)]
#[path = "support/pg.rs"]
mod pg;
#[allow(dead_code)]
#[path = "support/process.rs"]
mod process;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use pg::TestSchema;
use process::{Scratch, log_messages, queuebox, stderr_lines};
use queuebox_telemetry::{Presence, catalogue};

/// One row of the catalogue table of docs/metrics.md.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct DocFamily {
    name: String,
    metric_type: String,
    labels: Vec<String>,
    at_start: bool,
}

/// The text between backticks, in order: `` `a`, `b` `` gives `["a", "b"]`.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_owned())
        .collect()
}

/// The cells of one Markdown table row, trimmed. Cells hold no `|` on this page.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_owned()).collect()
}

/// Parses the table whose header is `| Metric | Type | Labels | Label values | Meaning | Present |`.
fn documented_families() -> Vec<DocFamily> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md");
    let text = std::fs::read_to_string(&path).expect("docs/metrics.md is readable");
    let mut lines = text.lines();
    let header = [
        "Metric",
        "Type",
        "Labels",
        "Label values",
        "Meaning",
        "Present",
    ];
    lines
        .by_ref()
        .find(|line| line.starts_with('|') && cells(line) == header)
        .expect("docs/metrics.md has the catalogue table");
    let separator = lines.next().expect("the table has a separator line");
    assert!(separator.starts_with("|---"), "{separator}");
    let mut families = Vec::new();
    for line in lines {
        if !line.starts_with('|') {
            break;
        }
        let row = cells(line);
        assert_eq!(
            row.len(),
            header.len(),
            "a catalogue row with 6 cells: {line}"
        );
        let name = backticked(&row[0]);
        assert_eq!(name.len(), 1, "one metric name per row: {line}");
        let at_start = match row[5].as_str() {
            "at start" => true,
            "first use" => false,
            other => panic!("Present must be `at start` or `first use`, got {other:?}: {line}"),
        };
        let labels = backticked(&row[2]);
        assert!(
            !labels.is_empty() || row[2] == "—",
            "Labels: names in backticks, or — for none: {line}"
        );
        families.push(DocFamily {
            name: name[0].clone(),
            metric_type: row[1].clone(),
            labels,
            at_start,
        });
    }
    families
}

fn code_families() -> Vec<DocFamily> {
    catalogue()
        .iter()
        .map(|spec| DocFamily {
            name: spec.name.to_owned(),
            metric_type: spec.metric_type.as_str().to_owned(),
            labels: spec.labels.iter().map(|l| (*l).to_owned()).collect(),
            at_start: spec.presence == Presence::AtStart,
        })
        .collect()
}

#[test]
fn met_8_the_metrics_page_lists_exactly_the_catalogue() {
    let documented = documented_families();
    let names: BTreeSet<&str> = documented.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names.len(), documented.len(), "a family listed twice");
    let as_set = |families: Vec<DocFamily>| -> BTreeSet<DocFamily> {
        families
            .into_iter()
            .map(|mut f| {
                f.labels.sort();
                f
            })
            .collect()
    };
    let documented = as_set(documented);
    let code = as_set(code_families());
    let missing: Vec<_> = code.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/metrics.md and catalogue() differ (name, type, labels, presence).\n\
         In the code, not (so) on the page: {missing:#?}\n\
         On the page, not (so) in the code: {extra:#?}"
    );
}

/// The family a sample line belongs to: summaries add `_sum` and `_count` to their name.
fn family_of<'a>(sample: &'a str, documented: &BTreeMap<String, DocFamily>) -> &'a str {
    if documented.contains_key(sample) {
        return sample;
    }
    for suffix in ["_sum", "_count"] {
        if let Some(base) = sample.strip_suffix(suffix)
            && documented
                .get(base)
                .is_some_and(|f| f.metric_type == "summary")
        {
            return base;
        }
    }
    sample
}

/// Label names of one sample line: `name{a="x",b="y"} 1` gives `["a", "b"]`.
fn sample_labels(line: &str) -> (String, BTreeSet<String>) {
    let Some((name, rest)) = line.split_once('{') else {
        let name = line.split_whitespace().next().unwrap_or_default();
        return (name.to_owned(), BTreeSet::new());
    };
    let block = &rest[..rest.rfind('}').expect("a closed label block")];
    let mut labels = BTreeSet::new();
    let mut in_value = false;
    let mut escaped = false;
    let mut current = String::new();
    for c in block.chars() {
        if in_value {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_value = false,
                _ => {}
            }
        } else if c == '=' {
            labels.insert(std::mem::take(&mut current));
        } else if c == '"' {
            in_value = true;
        } else if c != ',' {
            current.push(c);
        }
    }
    (name.to_owned(), labels)
}

/// One HTTP/1.1 GET on a fresh connection: (status, content type, body).
fn get(port: u16, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to QueueBox");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let raw = String::from_utf8(raw).expect("a UTF-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete response");
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let content_type = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default();
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (status, content_type, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size.trim(), 16).expect("a hex chunk size");
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
}

/// Kills the process when the test fails before its own SIGTERM, so no QueueBox outlives it.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits for a log message that `accept` recognizes, collecting every message meanwhile.
fn wait_for<T>(
    lines: &Receiver<String>,
    seen: &mut Vec<String>,
    what: &str,
    accept: impl Fn(&str) -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no {what} within 30 s; log so far: {seen:#?}"));
        for message in log_messages(&line) {
            let found = accept(&message);
            seen.push(message);
            if let Some(found) = found {
                return found;
            }
        }
    }
}

#[tokio::test]
async fn met_7_a_scrape_of_the_binary_shows_only_documented_families() {
    let documented: BTreeMap<String, DocFamily> = documented_families()
        .into_iter()
        .map(|f| (f.name.clone(), f))
        .collect();
    let schema = TestSchema::create("metrics_doc").await;
    let scratch = Scratch::new("metrics-doc");
    let config = scratch.write(
        "queuebox.yml",
        &format!(
            "database:\n  url: \"{}\"\n  startupTimeoutMs: 5000\nserver:\n  httpPort: 0\n",
            schema.queuebox_url()
        ),
    );
    let mut child = Running(
        queuebox(scratch.path())
            .args(["run", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start queuebox"),
    );
    let lines = stderr_lines(child.0.stderr.take().unwrap());
    let mut seen = Vec::new();
    let port: u16 = wait_for(&lines, &mut seen, "data port line", |message| {
        let address = message
            .strip_prefix("Listening on ")?
            .strip_suffix(" (data port)")?;
        address.rsplit_once(':')?.1.parse().ok()
    });
    wait_for(&lines, &mut seen, "`QueueBox started`", |message| {
        (message == "QueueBox started").then_some(())
    });

    let (status, content_type, body) = get(port, "/metrics");
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");

    let mut scraped: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE <name> <type>");
            let family = documented
                .get(name)
                .unwrap_or_else(|| panic!("{name} is exported but not in docs/metrics.md"));
            assert_eq!(family.metric_type, kind, "the type of {name}");
            scraped.entry(name.to_owned()).or_default();
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (sample, mut labels) = sample_labels(line);
        let family = family_of(&sample, &documented);
        let doc = documented
            .get(family)
            .unwrap_or_else(|| panic!("{line}: {family} is not in docs/metrics.md"));
        if doc.metric_type == "summary" && sample == family {
            assert!(labels.remove("quantile"), "{line}: a summary quantile");
        }
        let expected: BTreeSet<String> = doc.labels.iter().cloned().collect();
        assert_eq!(labels, expected, "{line}: the labels of {family}");
        scraped.entry(family.to_owned()).or_default().insert(sample);
    }
    for family in documented.values().filter(|f| f.at_start) {
        let samples = scraped.get(&family.name);
        assert!(
            samples.is_some_and(|s| !s.is_empty()),
            "{} is documented as present at start, but the first scrape has no sample of it",
            family.name
        );
    }

    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let exit = child.0.wait().expect("wait for queuebox");
    seen.extend(lines.iter().flat_map(|line| log_messages(&line)));
    assert_eq!(exit.code(), Some(0), "{seen:#?}");
    assert!(
        seen.iter().any(|m| m == "Shutdown complete"),
        "no `Shutdown complete` in {seen:#?}"
    );
    schema.drop().await;
}
