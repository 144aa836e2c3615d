//! `storeRawBody: true` end to end (issue 15 item 4): the real binary on PostgreSQL stores the
//! body bytes exactly as received in `inbox.raw_body`, beside the payload (still JSONB), and
//! keeps the signature header, so Stripe's own library (`stripe` from PyPI, in the venv of
//! scripts/pyenv.sh) verifies the stored message again from the row alone. A source without it
//! stores no raw body and withholds the signature header as before (INB-21).

mod support;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use support::pg::TestSchema;
use support::service::{Service, http_post};

const SECRET: &str = "whsec_test_raw_body_secret";

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

fn run_python(script: &str, input: serde_json::Value) -> serde_json::Value {
    let mut child = Command::new(python())
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The Stripe-Signature header Stripe's library makes for `body` now.
fn stripe_signature(body: &str) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../queuebox-http/tests/python/sign_webhook.py");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let headers = run_python(
        script.to_str().unwrap(),
        serde_json::json!({"preset": "stripe", "secret": SECRET, "body": body, "timestamp": now, "id": "x"}),
    );
    headers["Stripe-Signature"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn stripe_verifies_a_stored_row_again_from_its_raw_body() {
    let schema = TestSchema::create("raw_body").await;
    let config = format!(
        r#"database:
  url: "{db}"
  startupTimeoutMs: 10000
server:
  httpPort: 0
sources:
  stripe:
    path: /stripe
    consumption: pull
    idempotencyKeyPath: $.id
    storeRawBody: true
    auth:
      type: stripe
      secret: {SECRET}
  plain:
    path: /plain
    consumption: pull
    idempotencyKeyPath: $.id
    auth:
      type: stripe
      secret: {SECRET}
"#,
        db = schema.queuebox_url()
    );
    let service = Service::start("raw-body", &config);
    // Spacing and key order PostgreSQL's JSONB does not keep, and a non-ASCII character: the
    // payload column cannot give these bytes back, the raw body must.
    let body =
        "{ \"type\" : \"charge.succeeded\",\n  \"id\": \"evt_raw_1\", \"note\": \"caf\u{e9}\" }";
    let signature = stripe_signature(body);
    for path in ["/inbox/stripe", "/inbox/plain"] {
        let answer = http_post(
            service.port,
            path,
            &[
                ("Content-Type", "application/json"),
                ("Stripe-Signature", &signature),
            ],
            body.as_bytes(),
        );
        assert!(answer.status / 100 == 2, "{path}: {answer:?}");
    }

    let row = schema
        .client()
        .query_one(
            "SELECT raw_body, payload::text, headers ->> 'stripe-signature', jsonb_typeof(payload)
             FROM inbox WHERE source = 'stripe'",
            &[],
        )
        .await
        .unwrap();
    let raw: Vec<u8> = row.get(0);
    let payload: String = row.get(1);
    let stored_signature: Option<String> = row.get(2);
    assert_eq!(raw, body.as_bytes(), "the bytes exactly as received");
    assert_ne!(payload, body, "the payload is normalized JSONB");
    assert_eq!(
        row.get::<_, String>(3),
        "object",
        "the payload keeps its type"
    );
    let stored_signature = stored_signature.expect("the signature header is kept with the body");
    assert_eq!(stored_signature, signature);

    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/reverify_stripe.py");
    let script = script.to_str().unwrap();
    let verified = run_python(
        script,
        serde_json::json!({"raw_body_hex": hex, "signature": stored_signature, "secret": SECRET}),
    );
    assert_eq!(verified["verified"], true, "{verified}");
    assert_eq!(verified["id"], "evt_raw_1");
    // The normalized payload is not what Stripe signed: verifying it fails, which is why the
    // raw body is kept.
    let payload_hex: String = payload.bytes().map(|b| format!("{b:02x}")).collect();
    let refused = run_python(
        script,
        serde_json::json!({"raw_body_hex": payload_hex, "signature": stored_signature, "secret": SECRET}),
    );
    assert_eq!(refused["verified"], false, "{refused}");

    let plain = schema
        .client()
        .query_one(
            "SELECT raw_body IS NULL, headers ? 'stripe-signature' FROM inbox WHERE source = 'plain'",
            &[],
        )
        .await
        .unwrap();
    assert!(plain.get::<_, bool>(0), "no raw body without storeRawBody");
    assert!(
        !plain.get::<_, bool>(1),
        "the signature stays withheld (INB-21)"
    );
    service.stop();
    schema.drop().await;
}
