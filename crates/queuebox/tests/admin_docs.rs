//! docs/admin.md runs: the configuration of its `# admin example` block starts a real
//! `queuebox run` on PostgreSQL, and every `# admin-api` curl block runs against it with
//! bash and curl, answering 2xx with a JSON body (the `hmac` blocks against the same service
//! with the page's HMAC fragment as `admin`).

mod support;

use support::markdown::{code_blocks, repo_root};
use support::pg::TestSchema;
use support::receiver::{Receiver, Reply};
use support::service::Service;

const TOKEN: &str = "docs-admin-token";
const HMAC_SECRET: &str = "docs-hmac-secret";

#[tokio::test(flavor = "multi_thread")]
async fn docs_admin_every_curl_example_runs_against_the_documented_configuration() {
    let blocks = code_blocks(&repo_root().join("docs/admin.md"));
    let example = blocks
        .iter()
        .find(|b| b.first_line() == "# admin example")
        .expect("docs/admin.md has its # admin example block");
    let hmac_fragment = blocks
        .iter()
        .find(|b| b.lang == "yaml" && b.text.contains("type: hmac"))
        .expect("docs/admin.md shows the HMAC configuration");
    let schema = TestSchema::create("docs_admin").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let config = example
        .text
        .replace(
            "url: postgres://app@db.internal:5432/app",
            &format!("url: \"{}\"", schema.queuebox_url()),
        )
        .replace("httpPort: 8080", "httpPort: 0")
        .replace("https://hooks.example.com", &receiver.url())
        .replace("${ADMIN_TOKEN}", TOKEN);
    assert!(config.contains(TOKEN) && !config.contains("db.internal"));
    let bearer = Service::start("docs-admin", &config);
    let admin_at = config.find("admin:").unwrap();
    let hmac_admin = &hmac_fragment.text[hmac_fragment.text.find("admin:").unwrap()..];
    let hmac_config = format!("{}{}", &config[..admin_at], hmac_admin)
        .replace("${ADMIN_HMAC_SECRET}", HMAC_SECRET);
    let hmac = Service::start("docs-admin-hmac", &hmac_config);

    // A dead row for the examples that name one; it is scheduled later after the replay, so
    // the answers do not depend on the delivery.
    let outbox_id: String = schema
        .client()
        .query_one(
            "INSERT INTO outbox (topic, payload, state, last_error) VALUES ('orders.cancelled', '{\"id\":1}', 'dead', 'HTTP 500') RETURNING id::text",
            &[],
        )
        .await
        .unwrap()
        .get(0);

    let mut ran = 0;
    for block in blocks.iter().filter(|b| b.lang == "sh") {
        let service = match block.first_line() {
            "# admin-api" => &bearer,
            "# admin-api hmac" => &hmac,
            _ => continue,
        };
        ran += 1;
        let output = std::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", &block.text])
            .env("QB", format!("http://127.0.0.1:{}", service.port))
            .env("ADMIN_TOKEN", TOKEN)
            .env("ADMIN_HMAC_SECRET", HMAC_SECRET)
            .env("OUTBOX_ID", &outbox_id)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{}: failed: {stdout} {}",
            block.place(),
            String::from_utf8_lossy(&output.stderr)
        );
        let answer: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {stdout}", block.place()));
        assert!(answer.is_object(), "{}: {answer}", block.place());
        assert!(answer.get("error").is_none(), "{}: {answer}", block.place());
    }
    assert!(ran >= 8, "the curl examples of docs/admin.md ran ({ran})");
    assert_eq!(bearer.stop(), Some(0));
    assert_eq!(hmac.stop(), Some(0));
    schema.drop().await;
}
