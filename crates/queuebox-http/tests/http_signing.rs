//! Standard Webhooks signing of HTTP deliveries (destinations.md DST-31a), checked by a receiver
//! written with the reference library's verifier (`standardwebhooks` from PyPI, installed into
//! <repo>/.venv by scripts/pyenv.sh), and the headers' values against the outbox message.

mod support;

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuebox_core::{Outcome, Secret};
use queuebox_http::destination::{
    DestinationError, HttpDestination, HttpDestinationSettings, SharedHttp,
};
use support::{Receiver, message};
use url::Url;

const CURRENT: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NEXT: &str = "whsec_dGhlIG5leHQgc2VjcmV0IGtleQ==";

fn settings(base_url: Url, signing: &[&str]) -> HttpDestinationSettings {
    HttpDestinationSettings {
        name: "hooks".to_owned(),
        base_url,
        path: "/".to_owned(),
        timeout: Duration::from_secs(10),
        static_headers: vec![("webhook-id".to_owned(), Secret::new("overridden"))],
        auth: None,
        signing: signing.iter().map(|s| Secret::new(*s)).collect(),
        max_error_body_bytes: 2048,
    }
}

fn publisher(settings: HttpDestinationSettings) -> Result<HttpDestination, DestinationError> {
    HttpDestination::new(
        settings,
        &SharedHttp::new(queuebox_telemetry::Metrics::new("test")),
    )
}

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("QUEUEBOX_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python3");
    assert!(
        p.exists(),
        "{} is missing: run scripts/pyenv.sh (scripts/test.sh does)",
        p.display()
    );
    p
}

/// The reference-library receiver, knowing only `secret`; killed on drop.
struct PythonReceiver {
    child: Child,
    lines: BufReader<ChildStdout>,
    url: Url,
}

impl PythonReceiver {
    fn start(secret: &str) -> Self {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/verify_receiver.py");
        let mut child = Command::new(python())
            .arg(script)
            .arg(secret)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the Python receiver");
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut port = String::new();
        lines.read_line(&mut port).unwrap();
        let url = Url::parse(&format!("http://127.0.0.1:{}/hooks", port.trim())).unwrap();
        Self { child, lines, url }
    }

    fn verified(&mut self) -> String {
        let mut line = String::new();
        self.lines.read_line(&mut line).unwrap();
        line.trim_end().to_owned()
    }
}

impl Drop for PythonReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn dst_31a_the_reference_verifier_accepts_signed_deliveries() {
    let mut receiver = PythonReceiver::start(CURRENT);
    let signed = publisher(settings(receiver.url.clone(), &[CURRENT])).unwrap();
    let body = r#"{"orderId":"o-42","total":12.5}"#;
    let msg = message(body);
    assert_eq!(signed.publish_detailed(&msg).await.0, Outcome::Delivered);
    assert_eq!(receiver.verified(), format!("verified {} {body}", msg.id));
    // Rotation: signed with the next and the current secret, a receiver that knows either passes.
    let rotating = publisher(settings(receiver.url.clone(), &[NEXT, CURRENT])).unwrap();
    let msg = message("{}");
    assert_eq!(rotating.publish_detailed(&msg).await.0, Outcome::Delivered);
    assert_eq!(receiver.verified(), format!("verified {} {{}}", msg.id));
    // A receiver with another secret refuses: the delivery fails with its answer.
    let other = publisher(settings(receiver.url.clone(), &[NEXT])).unwrap();
    let Outcome::Failed { reason, .. } = other.publish_detailed(&message("{}")).await.0 else {
        panic!("delivered with the wrong secret")
    };
    assert!(reason.starts_with("HTTP 401"), "{reason}");
    // Unsigned deliveries are refused by the verifier too (nothing signs by default).
    let unsigned = publisher(settings(receiver.url.clone(), &[])).unwrap();
    let Outcome::Failed { reason, .. } = unsigned.publish_detailed(&message("{}")).await.0 else {
        panic!("an unsigned delivery passed the verifier")
    };
    assert!(reason.starts_with("HTTP 401"), "{reason}");
}

#[tokio::test]
async fn dst_31a_the_id_is_the_outbox_id_and_the_timestamp_is_the_attempts() {
    let receiver = Receiver::answering(200).await;
    let signed = publisher(settings(receiver.url("/"), &[CURRENT, NEXT])).unwrap();
    let mut msg = message("{\"a\":1}");
    for attempt in 0..2 {
        msg.attempt = attempt;
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert_eq!(signed.publish_detailed(&msg).await.0, Outcome::Delivered);
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let requests = receiver.requests();
        let seen = requests.last().unwrap();
        // The id is stable across attempts and wins over a static header of the same name.
        assert_eq!(seen.header("webhook-id"), Some(msg.id.to_string().as_str()));
        assert_eq!(seen.header_count("webhook-id"), 1);
        let timestamp: u64 = seen.header("webhook-timestamp").unwrap().parse().unwrap();
        assert!((before..=after).contains(&timestamp));
        let signature = seen.header("webhook-signature").unwrap();
        let entries: Vec<&str> = signature.split(' ').collect();
        assert_eq!(entries.len(), 2, "one signature per secret: {signature}");
        assert!(entries.iter().all(|e| e.starts_with("v1,")));
        if attempt == 0 {
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
    }
    let requests = receiver.requests();
    assert_ne!(
        requests[0].header("webhook-timestamp"),
        requests[1].header("webhook-timestamp"),
        "each attempt is signed at its own time"
    );
}

#[test]
fn dst_31a_a_secret_that_is_not_base64_stops_the_start() {
    let url = Url::parse("http://127.0.0.1:9/").unwrap();
    let Err(error) = publisher(settings(url, &["whsec_not base64!"])) else {
        panic!("built with a bad secret")
    };
    assert_eq!(
        error.to_string(),
        "destinations.hooks.signing.secret: not a Standard Webhooks secret (whsec_ followed by base64)"
    );
}
