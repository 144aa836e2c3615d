//! Inbound authentication of an HTTP source over real HTTP (inbox.md INB-14..20): bearer,
//! api-key and hmac, every 401 message, both HMAC payload formats with each algorithm and
//! prefix, seconds and milliseconds timestamps, and the order of the HMAC checks.

mod source_support;

use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use queuebox_config::{
    FilterRule, FilterTest, HmacAlgorithm, HmacAuth, InboundAuth, SignaturePayloadFormat,
};
use queuebox_core::Secret;
use source_support::*;

const BODY: &str = "{ \"id\" : \"m-1\" }\n";

fn error(text: &str) -> (u16, String) {
    (401, format!(r#"{{"error":"{text}"}}"#))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn hex_hmac(algorithm: HmacAlgorithm, key: &str, signed: &[u8]) -> String {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &str, signed: &[u8]) -> String {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key.as_bytes()).unwrap();
        mac.update(signed);
        hex::encode(mac.finalize().into_bytes())
    }
    match algorithm {
        HmacAlgorithm::HmacSha256 => run::<Hmac<sha2::Sha256>>(key, signed),
        HmacAlgorithm::HmacSha512 => run::<Hmac<sha2::Sha512>>(key, signed),
        HmacAlgorithm::HmacSha1 => run::<Hmac<sha1::Sha1>>(key, signed),
    }
}

fn hmac_auth(algorithm: HmacAlgorithm, prefix: &str, timestamp: bool) -> HmacAuth {
    HmacAuth {
        secrets: vec![Secret::new("whsec_test")],
        header_name: header("X-Signature"),
        algorithm,
        signature_prefix: prefix.to_owned(),
        timestamp_header: timestamp.then(|| header("X-Timestamp")),
        timestamp_tolerance_ms: 300_000,
        payload_format: if timestamp {
            SignaturePayloadFormat::TimestampDotBody
        } else {
            SignaturePayloadFormat::Body
        },
    }
}

async fn serve_with(auth: InboundAuth) -> Harness {
    serve(vec![with_auth(source("s"), auth)]).await
}

#[tokio::test]
async fn inb_15_bearer_token_any_case_scheme() {
    let h = serve_with(InboundAuth::Bearer {
        token: Secret::new("t0k3n"),
    })
    .await;
    let missing = post("/inbox/s", BODY).send(h.addr).await;
    assert_eq!(missing.answer(), error("Missing Authorization header"));
    for wrong in [
        "Basic t0k3n",
        "Bearer t0k3",
        "Bearer t0k3nX",
        "Bearert0k3n",
        "t0k3n",
        "",
    ] {
        let reply = post("/inbox/s", BODY)
            .header("Authorization", wrong)
            .send(h.addr)
            .await;
        assert_eq!(reply.answer(), error("Invalid bearer token"), "{wrong:?}");
    }
    for (i, good) in [
        "Bearer t0k3n",
        "bearer   t0k3n  ",
        "BEARER\tt0k3n",
        "bEaReR t0k3n",
    ]
    .iter()
    .enumerate()
    {
        let reply = post("/inbox/s", &format!(r#"{{"id":"{i}"}}"#))
            .header("authorization", good)
            .send(h.addr)
            .await;
        assert_eq!(reply.status, 202, "{good:?}");
    }
}

#[tokio::test]
async fn inb_16_api_key_header_in_any_case() {
    let h = serve_with(InboundAuth::ApiKey {
        key: Secret::new("k-123"),
        header_name: header("X-API-Key"),
    })
    .await;
    let missing = post("/inbox/s", BODY).send(h.addr).await;
    assert_eq!(missing.answer(), error("Missing X-API-Key header"));
    let wrong = post("/inbox/s", BODY)
        .header("X-API-Key", "k-124")
        .send(h.addr)
        .await;
    assert_eq!(wrong.answer(), error("Invalid API key"));
    // Values compare exactly, letter case included.
    let upper = post("/inbox/s", BODY)
        .header("X-API-Key", "K-123")
        .send(h.addr)
        .await;
    assert_eq!(upper.answer(), error("Invalid API key"));
    for (i, name) in ["x-api-key", "X-API-KEY", "X-Api-Key"].iter().enumerate() {
        let reply = post("/inbox/s", &format!(r#"{{"id":"{i}"}}"#))
            .header(name, " k-123 ")
            .send(h.addr)
            .await;
        assert_eq!(reply.status, 202, "{name}");
    }
}

#[tokio::test]
async fn inb_17_hmac_body_with_each_algorithm_and_prefix() {
    for (algorithm, prefix) in [
        (HmacAlgorithm::HmacSha256, "sha256="),
        (HmacAlgorithm::HmacSha512, "sha512="),
        (HmacAlgorithm::HmacSha1, "sha1="),
        (HmacAlgorithm::HmacSha256, ""),
        (HmacAlgorithm::HmacSha1, "v1,"),
    ] {
        let h = serve_with(InboundAuth::Hmac(hmac_auth(algorithm, prefix, false))).await;
        let signature = format!(
            "{prefix}{}",
            hex_hmac(algorithm, "whsec_test", BODY.as_bytes())
        );
        let good = post("/inbox/s", BODY)
            .header("x-signature", format!(" {signature} "))
            .send(h.addr)
            .await;
        assert_eq!(good.status, 202, "{algorithm:?} {prefix:?}");
        let stored = h.sink.only_row();
        assert_eq!(
            stored.payload, BODY,
            "the raw body was signed and is stored"
        );

        let other_body = BODY.replace("m-1", "m-2");
        let replayed = post("/inbox/s", &other_body)
            .header("X-Signature", &signature)
            .send(h.addr)
            .await;
        assert_eq!(replayed.answer(), error("Invalid signature"));
        let upper = post("/inbox/s", BODY)
            .header("X-Signature", signature.to_ascii_uppercase())
            .send(h.addr)
            .await;
        assert_eq!(
            upper.answer(),
            error("Invalid signature"),
            "hex is lower case"
        );
        let unprefixed = hex_hmac(algorithm, "whsec_test", BODY.as_bytes());
        if !prefix.is_empty() {
            let reply = post("/inbox/s", BODY)
                .header("X-Signature", &unprefixed)
                .send(h.addr)
                .await;
            assert_eq!(reply.answer(), error("Invalid signature"));
        }
    }
}

#[tokio::test]
async fn inb_18_hmac_timestamp_dot_body_in_seconds_and_milliseconds() {
    for algorithm in [
        HmacAlgorithm::HmacSha256,
        HmacAlgorithm::HmacSha512,
        HmacAlgorithm::HmacSha1,
    ] {
        let auth = hmac_auth(algorithm, "", true);
        let h = serve_with(InboundAuth::Hmac(auth)).await;
        let now = now_ms();
        for (i, timestamp) in [(now / 1000).to_string(), now.to_string()]
            .iter()
            .enumerate()
        {
            let body = format!(r#"{{"id":"{i}"}}"#);
            let signed = format!("{timestamp}.{body}");
            let signature = hex_hmac(algorithm, "whsec_test", signed.as_bytes());
            let reply = post("/inbox/s", &body)
                .header("X-Signature", &signature)
                .header("X-Timestamp", timestamp)
                .send(h.addr)
                .await;
            assert_eq!(reply.status, 202, "{algorithm:?} {timestamp}");
            // The body alone is not what this format signs.
            let body_only = hex_hmac(algorithm, "whsec_test", body.as_bytes());
            let reply = post("/inbox/s", &body)
                .header("X-Signature", &body_only)
                .header("X-Timestamp", timestamp)
                .send(h.addr)
                .await;
            assert_eq!(reply.answer(), error("Invalid signature"));
        }
    }
}

#[tokio::test]
async fn inb_19_stale_or_future_timestamp_is_expired_with_either_format() {
    for format in [
        SignaturePayloadFormat::Body,
        SignaturePayloadFormat::TimestampDotBody,
    ] {
        let mut auth = hmac_auth(HmacAlgorithm::HmacSha256, "sha256=", true);
        auth.payload_format = format;
        let h = serve_with(InboundAuth::Hmac(auth)).await;
        let now = now_ms();
        for timestamp in [now - 301_000, now + 301_000, (now - 301_000) / 1000] {
            let signed = match format {
                SignaturePayloadFormat::Body => BODY.to_owned(),
                SignaturePayloadFormat::TimestampDotBody => format!("{timestamp}.{BODY}"),
            };
            let signature = format!(
                "sha256={}",
                hex_hmac(HmacAlgorithm::HmacSha256, "whsec_test", signed.as_bytes())
            );
            let reply = post("/inbox/s", BODY)
                .header("X-Signature", &signature)
                .header("X-Timestamp", timestamp.to_string())
                .send(h.addr)
                .await;
            assert_eq!(
                reply.answer(),
                error("Request timestamp expired"),
                "{format:?}"
            );
        }
        // Within the tolerance, BODY signs the body only.
        if format == SignaturePayloadFormat::Body {
            let signature = format!(
                "sha256={}",
                hex_hmac(HmacAlgorithm::HmacSha256, "whsec_test", BODY.as_bytes())
            );
            let reply = post("/inbox/s", BODY)
                .header("X-Signature", &signature)
                .header("X-Timestamp", (now - 200_000).to_string())
                .send(h.addr)
                .await;
            assert_eq!(reply.status, 202);
        }
    }
}

#[tokio::test]
async fn inb_20_hmac_checks_fail_in_order() {
    let h = serve_with(InboundAuth::Hmac(hmac_auth(
        HmacAlgorithm::HmacSha256,
        "sha256=",
        true,
    )))
    .await;
    let stale = (now_ms() - 600_000).to_string();
    let fresh = now_ms().to_string();
    let cases: [(Vec<(&str, &str)>, &str); 6] = [
        // 1: no signature header, even with every other fault.
        (vec![("X-Timestamp", "abc")], "Missing X-Signature header"),
        (vec![], "Missing X-Signature header"),
        // 2: no timestamp header.
        (
            vec![("X-Signature", "sha256=00")],
            "Missing timestamp header",
        ),
        // 3: not an integer.
        (
            vec![("X-Signature", "sha256=00"), ("X-Timestamp", "1.5")],
            "Invalid timestamp format",
        ),
        // 4: outside the tolerance.
        (
            vec![("X-Signature", "sha256=00"), ("X-Timestamp", &stale)],
            "Request timestamp expired",
        ),
        // 5: only then the signature.
        (
            vec![("X-Signature", "sha256=00"), ("X-Timestamp", &fresh)],
            "Invalid signature",
        ),
    ];
    for (headers, message) in cases {
        let mut request = post("/inbox/s", BODY);
        for (name, value) in &headers {
            request = request.header(name, value);
        }
        assert_eq!(
            request.send(h.addr).await.answer(),
            error(message),
            "{headers:?}"
        );
    }
    assert!(h.sink.rows().is_empty());
}

#[tokio::test]
async fn inb_14_auth_runs_before_the_filter_and_no_auth_accepts_all() {
    let mut s = with_auth(
        source("s"),
        InboundAuth::Bearer {
            token: Secret::new("t"),
        },
    );
    s.filter.require = vec![FilterRule {
        header: header("X-Tenant"),
        test: FilterTest::Exists,
    }];
    let h = serve(vec![s, source("open")]).await;
    let reply = post("/inbox/s", BODY).send(h.addr).await;
    assert_eq!(reply.answer(), error("Missing Authorization header"));
    assert_eq!(h.metrics.inbox_filtered("s").get(), 0);
    let open = post("/inbox/open", BODY)
        .header("Authorization", "Bearer anything")
        .send(h.addr)
        .await;
    assert_eq!(open.status, 202);
}
