//! The webhook sender presets of source auth (CFG-73a, inbox.md INB-20a..20f): the types, the
//! secret or secrets (rotation), the replay window where the format has a timestamp, the
//! idempotency key that defaults to the sender's delivery-id header (INB-31), and the headers
//! that can no longer carry a key because they carry the signature (CFG-108).

mod common;

use common::*;
use queuebox_config::{InboundAuth, SourceKind, WebhookPreset};

fn source(auth: &str, key: &str) -> String {
    with_db(&format!(
        "sources:\n  s:\n    path: /s\n    consumption: pull\n{key}    auth:\n{auth}"
    ))
}

fn http(yaml: &str) -> queuebox_config::HttpSource {
    let c = ok(yaml).config;
    let SourceKind::Http(h) = &c.sources["s"].kind else {
        panic!("an http source")
    };
    h.clone()
}

#[test]
fn cfg_73a_every_preset_needs_only_its_secret() {
    for (word, preset) in [
        ("stripe", WebhookPreset::Stripe),
        ("github", WebhookPreset::Github),
        ("standard-webhooks", WebhookPreset::StandardWebhooks),
        ("shopify", WebhookPreset::Shopify),
        ("slack", WebhookPreset::Slack),
    ] {
        let h = http(&source(
            &format!("      type: {word}\n      secret: s3cret\n"),
            "    idempotencyKeyPath: $.id\n",
        ));
        let Some(InboundAuth::Preset(p)) = &h.auth else {
            panic!("{word}: a preset")
        };
        assert_eq!(p.preset, preset);
        assert_eq!(p.secrets.len(), 1);
        assert_eq!(p.secrets[0].expose(), "s3cret");
        let window = if preset.has_timestamp() { 300_000 } else { 0 };
        assert_eq!(p.timestamp_tolerance_ms, window, "{word}");
    }
}

#[test]
fn cfg_73a_secret_rotation_takes_a_list_for_hmac_and_presets() {
    let h = http(&source(
        "      type: stripe\n      secret: [whsec_new, whsec_old]\n      timestampTolerance: 60000\n",
        "    idempotencyKeyPath: $.id\n",
    ));
    let Some(InboundAuth::Preset(p)) = &h.auth else {
        panic!()
    };
    let secrets: Vec<&str> = p.secrets.iter().map(|s| s.expose()).collect();
    assert_eq!(secrets, ["whsec_new", "whsec_old"]);
    assert_eq!(p.timestamp_tolerance_ms, 60_000);
    let h = http(&source(
        "      type: hmac\n      secret:\n        - a\n        - b\n",
        "    idempotencyKeyPath: $.id\n",
    ));
    let Some(InboundAuth::Hmac(hmac)) = &h.auth else {
        panic!()
    };
    assert_eq!(hmac.secrets.len(), 2);
}

#[test]
fn cfg_73a_bad_preset_blocks_are_refused_by_key_path() {
    let key = "    idempotencyKeyPath: $.id\n";
    let e = errors(&source("      type: github\n", key));
    assert!(
        e.iter()
            .any(|l| l.contains("sources.s.auth.secret") && l.contains("required for type github")),
        "{e:?}"
    );
    let e = errors(&source("      type: github\n      secret: []\n", key));
    assert!(e.iter().any(|l| l.contains("must not be empty")), "{e:?}");
    let e = errors(&source(
        "      type: stripe\n      secret: [a, \"\"]\n",
        key,
    ));
    assert!(
        e.iter().any(|l| l.contains("sources.s.auth.secret[1]")),
        "{e:?}"
    );
    // GitHub and Shopify sign no timestamp, so they have no replay window to set.
    let e = errors(&source(
        "      type: shopify\n      secret: s\n      timestampTolerance: 1000\n",
        key,
    ));
    assert!(
        e.iter()
            .any(|l| l.contains("sources.s.auth.timestampTolerance") && l.contains("unknown key")),
        "{e:?}"
    );
    let e = errors(&source(
        "      type: stripe\n      secret: s\n      headerName: X\n",
        key,
    ));
    assert!(
        e.iter().any(|l| l.contains("unknown key for type stripe")),
        "{e:?}"
    );
    let e = errors(&source("      type: strype\n      secret: s\n", key));
    assert!(e.iter().any(|l| l.contains("stripe")), "{e:?}");
}

#[test]
fn cfg_73a_admin_auth_takes_no_preset() {
    let e = errors(&with_db(
        "admin:\n  enabled: true\n  auth:\n    type: github\n    secret: s\n",
    ));
    assert!(e.iter().any(|l| l.contains("admin.auth.type")), "{e:?}");
}

/// INB-31: the key defaults to the sender's delivery id, unless a key step is configured.
#[test]
fn inb_31_the_key_defaults_to_the_delivery_id_header_of_the_preset() {
    let h = http(&source("      type: github\n      secret: s\n", ""));
    assert_eq!(
        h.idempotency_key_header.as_ref().map(|h| h.as_str()),
        Some("X-GitHub-Delivery")
    );
    let h = http(&source(
        "      type: standard-webhooks\n      secret: whsec_c2VjcmV0\n",
        "",
    ));
    assert_eq!(
        h.idempotency_key_header.as_ref().map(|h| h.as_str()),
        Some("webhook-id")
    );
    let h = http(&source(
        "      type: github\n      secret: s\n",
        "    idempotencyKeyPath: $.id\n",
    ));
    assert_eq!(h.idempotency_key_header, None);
    let h = http(&source("      type: shopify\n      secret: s\n", ""));
    assert_eq!(
        h.idempotency_key_header.as_ref().map(|h| h.as_str()),
        Some("X-Shopify-Event-Id")
    );
    // Stripe sends no delivery-id header: the key must still be configured.
    let e = errors(&source("      type: stripe\n      secret: s\n", ""));
    assert!(e.iter().any(|l| l.contains("needs one of")), "{e:?}");
}

/// CFG-108: the signature headers of a preset are never kept, so they cannot carry a key.
#[test]
fn cfg_108_a_preset_signature_header_cannot_carry_the_key() {
    let e = errors(&source(
        "      type: standard-webhooks\n      secret: whsec_c2VjcmV0\n",
        "    idempotencyKeyHeader: Svix-Signature\n",
    ));
    assert!(
        e.iter()
            .any(|l| l.contains("is the auth header, which QueueBox does not keep")),
        "{e:?}"
    );
}
