//! The HTTP destination against real receivers on 127.0.0.1 (destinations.md §9, HTTP rows).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use queuebox_core::Secret;
use queuebox_core::{Destination, DestinationType, Outcome};
use queuebox_http::destination::{
    DestinationError, HttpAuth, HttpDestination, HttpDestinationSettings, SharedHttp,
};
use support::{Receiver, Reply, message};
use url::Url;

fn settings(base_url: Url) -> HttpDestinationSettings {
    HttpDestinationSettings {
        name: "orders".to_owned(),
        base_url,
        path: "/".to_owned(),
        timeout: Duration::from_secs(5),
        static_headers: Vec::new(),
        auth: None,
        signing: Vec::new(),
        max_error_body_bytes: 2048,
    }
}

fn publisher(settings: HttpDestinationSettings) -> HttpDestination {
    HttpDestination::new(
        settings,
        &SharedHttp::new(queuebox_telemetry::Metrics::new("test")),
    )
    .unwrap()
}

fn failure(outcome: &Outcome) -> (&str, Option<Duration>) {
    match outcome {
        Outcome::Failed {
            reason,
            retry_after,
        } => (reason.as_str(), *retry_after),
        Outcome::Delivered => panic!("expected a failure, got Delivered"),
    }
}

#[tokio::test]
async fn dst_25_200_and_202_are_delivered() {
    for status in [200, 202] {
        let receiver =
            Receiver::start(move |_, _| Reply::status(status).body("{\"ignored\":true}")).await;
        let publisher = publisher(settings(receiver.url("/")));
        let (outcome, seen) = publisher.publish_detailed(&message("{}")).await;
        assert_eq!(outcome, Outcome::Delivered, "{status}");
        assert_eq!(seen, Some(status));
        assert_eq!(publisher.kind(), DestinationType::Http);
    }
}

#[tokio::test]
async fn dst_28_400_500_503_fail_with_their_code_and_standard_phrase() {
    for (status, text) in [
        (400, "HTTP 400: Bad Request - nope"),
        (500, "HTTP 500: Internal Server Error - nope"),
        (503, "HTTP 503: Service Unavailable - nope"),
    ] {
        let receiver = Receiver::start(move |_, _| Reply::status(status).body("nope")).await;
        let (outcome, seen) = publisher(settings(receiver.url("/")))
            .publish_detailed(&message("{}"))
            .await;
        assert_eq!(failure(&outcome), (text, None));
        assert_eq!(seen, Some(status));
    }
}

#[tokio::test]
async fn dst_25_redirect_fails_and_location_gets_nothing() {
    let location = Receiver::answering(200).await;
    let target = location.url("/elsewhere").to_string();
    let receiver =
        Receiver::start(move |_, _| Reply::status(302).header("Location", &target)).await;
    let (outcome, seen) = publisher(settings(receiver.url("/")))
        .publish_detailed(&message("{}"))
        .await;
    assert_eq!(failure(&outcome).0, "HTTP 302: Found");
    assert_eq!(seen, Some(302));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(location.requests().is_empty());
}

#[tokio::test]
async fn dst_25_interim_1xx_is_not_final() {
    let receiver = Receiver::start(|_, _| {
        let mut reply = Reply::status(500);
        reply.interim = Some(100);
        reply
    })
    .await;
    let (outcome, seen) = publisher(settings(receiver.url("/")))
        .publish_detailed(&message("{}"))
        .await;
    assert_eq!(failure(&outcome).0, "HTTP 500: Internal Server Error");
    assert_eq!(seen, Some(500));
}

#[tokio::test]
async fn dst_24_one_post_with_the_payload_as_body() {
    let receiver = Receiver::answering(200).await;
    let payload = r#"{"id": "o-42", "total": 12.5}"#;
    publisher(settings(receiver.url("/")))
        .publish(&message(payload))
        .await;
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].body, payload);
    assert_eq!(
        requests[0].header("content-length"),
        Some(payload.len().to_string().as_str())
    );
}

#[tokio::test]
async fn dst_11_standard_headers_are_sent() {
    let receiver = Receiver::answering(200).await;
    let mut msg = message("{}");
    msg.attempt = 3;
    publisher(settings(receiver.url("/"))).publish(&msg).await;
    let request = &receiver.requests()[0];
    assert_eq!(
        request.header("x-message-id"),
        Some(msg.id.to_string().as_str())
    );
    assert_eq!(request.header("x-topic"), Some("order.created"));
    assert_eq!(request.header("x-attempt"), Some("3"));
    assert_eq!(request.header("x-message-key"), Some("o-42"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    let agent = format!("queuebox/{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(request.header("user-agent"), Some(agent.as_str()));
    assert_eq!(request.header_count("authorization"), 0);
}

#[tokio::test]
async fn dst_11_message_key_absent_without_a_key() {
    let receiver = Receiver::answering(200).await;
    let publisher = publisher(settings(receiver.url("/")));
    for key in [None, Some(String::new())] {
        let mut msg = message("{}");
        msg.key = key;
        assert_eq!(publisher.publish(&msg).await, Outcome::Delivered);
    }
    for request in receiver.requests() {
        assert_eq!(request.header_count("x-message-key"), 0);
    }
}

#[tokio::test]
async fn dst_9_static_header_sent_row_wins_and_reserved_row_headers_dropped() {
    let receiver = Receiver::answering(200).await;
    let mut settings = settings(receiver.url("/"));
    settings.static_headers = vec![
        ("X-Static".to_owned(), Secret::new("s")),
        ("X-Tenant".to_owned(), Secret::new("static")),
    ];
    let mut msg = message("{}");
    msg.headers = vec![
        ("x-tenant".to_owned(), "row".to_owned()),
        ("X-Message-Id".to_owned(), "forged".to_owned()),
        ("Content-Length".to_owned(), "9999".to_owned()),
        ("Host".to_owned(), "evil.example".to_owned()),
    ];
    assert_eq!(publisher(settings).publish(&msg).await, Outcome::Delivered);
    let request = &receiver.requests()[0];
    assert_eq!(request.header("x-static"), Some("s"));
    assert_eq!(request.header("x-tenant"), Some("row"));
    assert_eq!(request.header_count("x-tenant"), 1);
    assert_eq!(
        request.header("x-message-id"),
        Some(msg.id.to_string().as_str())
    );
    assert_eq!(request.header_count("x-message-id"), 1);
    assert_eq!(request.header("content-length"), Some("2"));
    assert_eq!(request.header_count("content-length"), 1);
    assert_eq!(
        request.header("host"),
        Some(receiver.addr.to_string().as_str())
    );
}

#[tokio::test]
async fn dst_11_a_row_or_static_user_agent_replaces_the_default() {
    let receiver = Receiver::answering(200).await;
    let mut with_static = settings(receiver.url("/"));
    with_static.static_headers = vec![("User-Agent".to_owned(), Secret::new("static-agent"))];
    let publisher = publisher(with_static);
    publisher.publish(&message("{}")).await;
    let mut msg = message("{}");
    msg.headers = vec![("user-agent".to_owned(), "row-agent".to_owned())];
    publisher.publish(&msg).await;
    let requests = receiver.requests();
    assert_eq!(requests[0].header("user-agent"), Some("static-agent"));
    assert_eq!(requests[1].header("user-agent"), Some("row-agent"));
    assert_eq!(requests[1].header_count("user-agent"), 1);
}

#[tokio::test]
async fn dst_10_row_headers_http_cannot_carry_are_dropped_and_the_message_delivered() {
    let receiver = Receiver::answering(200).await;
    let mut msg = message("{}");
    msg.headers = vec![
        ("bad name".to_owned(), "v".to_owned()),
        ("X-Split".to_owned(), "a\r\nX-Injected: 1".to_owned()),
        ("X-Utf8".to_owned(), "café".to_owned()),
    ];
    assert_eq!(
        publisher(settings(receiver.url("/"))).publish(&msg).await,
        Outcome::Delivered
    );
    let request = &receiver.requests()[0];
    assert_eq!(request.header_count("x-split"), 0);
    assert_eq!(request.header_count("x-injected"), 0);
    assert_eq!(request.header_count("bad name"), 0);
    assert!(request.header("x-utf8").is_some());
}

#[tokio::test]
async fn dst_23_url_joins_reach_the_receiver() {
    let receiver = Receiver::answering(200).await;
    for (base, path, target) in [
        ("/", "/", "/"),
        ("/v1", "/orders", "/v1/orders"),
        ("/v1/", "orders/", "/v1/orders"),
        ("/v1", "//orders//new", "/v1/orders/new"),
        ("/v1?tenant=a", "/orders", "/v1/orders?tenant=a"),
    ] {
        let mut settings = settings(receiver.url(base));
        settings.path = path.to_owned();
        publisher(settings).publish(&message("{}")).await;
        assert_eq!(
            receiver.requests().last().unwrap().target,
            target,
            "{base} + {path}"
        );
    }
}

#[tokio::test]
async fn dst_26_slow_receiver_fails_with_the_timeout_text() {
    let receiver = Receiver::start(|_, _| Reply::status(200).delay(Duration::from_secs(3))).await;
    let mut settings = settings(receiver.url("/"));
    settings.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let (outcome, seen) = publisher(settings).publish_detailed(&message("{}")).await;
    assert_eq!(failure(&outcome).0, "Request timeout after 300ms");
    assert_eq!(seen, None);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn dst_26_an_error_body_that_stalls_is_bounded_by_the_timeout() {
    let receiver = Receiver::start(|_, _| {
        let mut reply = Reply::status(500).body("partial");
        reply.content_length = Some(1_000);
        reply.hold = Duration::from_secs(3);
        reply
    })
    .await;
    let mut settings = settings(receiver.url("/"));
    settings.timeout = Duration::from_millis(300);
    let (outcome, seen) = publisher(settings).publish_detailed(&message("{}")).await;
    assert_eq!(failure(&outcome).0, "Request timeout after 300ms");
    assert_eq!(seen, Some(500));
}

#[tokio::test]
async fn dst_28_error_body_is_redacted() {
    let receiver =
        Receiver::start(|_, _| Reply::status(500).body("db login failed: password=hunter2")).await;
    let outcome = publisher(settings(receiver.url("/")))
        .publish(&message("{}"))
        .await;
    let (text, _) = failure(&outcome);
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.starts_with("HTTP 500: Internal Server Error - db login failed: password"),
        "{text}"
    );
}

#[tokio::test]
async fn dst_28_long_body_is_cut_to_max_error_body_bytes() {
    let receiver = Receiver::start(|_, _| Reply::status(500).body("y".repeat(10_000))).await;
    let mut settings = settings(receiver.url("/"));
    settings.max_error_body_bytes = 100;
    let outcome = publisher(settings).publish(&message("{}")).await;
    let (text, _) = failure(&outcome);
    assert_eq!(text.len(), 100);
    assert!(text.starts_with("HTTP 500: Internal Server Error - yyy"));
}

#[tokio::test]
async fn dst_28_reads_no_more_than_max_error_body_bytes() {
    // The body announces 10 MB, sends 4 KB and stalls: reading it all would time out.
    let receiver = Receiver::start(|_, _| {
        let mut reply = Reply::status(500).body("z".repeat(4096));
        reply.content_length = Some(10_000_000);
        reply.hold = Duration::from_secs(5);
        reply
    })
    .await;
    let mut settings = settings(receiver.url("/"));
    settings.max_error_body_bytes = 64;
    let started = Instant::now();
    let outcome = publisher(settings).publish(&message("{}")).await;
    assert!(
        failure(&outcome)
            .0
            .starts_with("HTTP 500: Internal Server Error - zz")
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn dst_27_retry_after_on_429_and_503_only() {
    for (status, value, expected) in [
        (429, "7", Some(Duration::from_secs(7))),
        (503, "120", Some(Duration::from_secs(120))),
        (503, "Wed, 21 Oct 2015 07:28:00 GMT", Some(Duration::ZERO)),
        (503, "later", None),
        (500, "7", None),
    ] {
        let receiver =
            Receiver::start(move |_, _| Reply::status(status).header("Retry-After", value)).await;
        let outcome = publisher(settings(receiver.url("/")))
            .publish(&message("{}"))
            .await;
        assert_eq!(failure(&outcome).1, expected, "{status} {value}");
    }
}

#[tokio::test]
async fn dst_28_connection_error_is_publish_failed_with_no_status() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
    let (outcome, seen) = publisher(settings(url))
        .publish_detailed(&message("{}"))
        .await;
    let (text, _) = failure(&outcome);
    assert!(text.starts_with("Publish failed: "), "{text}");
    assert_eq!(seen, None);
}

/// A TCP server that writes `greeting` on every connection and then keeps it open.
async fn raw_server(greeting: &'static [u8]) -> std::net::SocketAddr {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = stream.write_all(greeting).await;
                tokio::time::sleep(Duration::from_secs(10)).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn dst_29_a_tls_error_is_publish_failed() {
    let addr = raw_server(b"HTTP/1.1 200 OK\r\n\r\n").await;
    let url = Url::parse(&format!("https://{addr}/")).unwrap();
    let (outcome, seen) = publisher(settings(url))
        .publish_detailed(&message("{}"))
        .await;
    let (text, _) = failure(&outcome);
    assert!(text.starts_with("Publish failed: "), "{text}");
    assert_eq!(seen, None);
}

#[tokio::test]
async fn dst_26_connection_setup_with_tls_is_bounded_by_half_the_timeout() {
    // The server accepts and never answers the TLS handshake.
    let addr = raw_server(b"").await;
    let mut settings = settings(Url::parse(&format!("https://{addr}/")).unwrap());
    settings.timeout = Duration::from_millis(2000);
    let started = Instant::now();
    let (outcome, seen) = publisher(settings).publish_detailed(&message("{}")).await;
    let elapsed = started.elapsed();
    assert_eq!(failure(&outcome).0, "Request timeout after 2000ms");
    assert_eq!(seen, None);
    assert!(
        elapsed >= Duration::from_millis(950) && elapsed < Duration::from_millis(1800),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn dst_31_basic_auth() {
    let receiver = Receiver::answering(200).await;
    let mut settings = settings(receiver.url("/"));
    settings.auth = Some(HttpAuth::Basic {
        username: "user".to_owned(),
        password: Secret::new("pa:ss"),
    });
    publisher(settings).publish(&message("{}")).await;
    // base64("user:pa:ss")
    assert_eq!(
        receiver.requests()[0].header("authorization"),
        Some("Basic dXNlcjpwYTpzcw==")
    );
}

#[tokio::test]
async fn dst_31_header_auth_and_a_row_header_of_that_name_wins() {
    let receiver = Receiver::answering(200).await;
    let mut settings = settings(receiver.url("/"));
    settings.auth = Some(HttpAuth::Header {
        name: "X-Api-Key".to_owned(),
        value: Secret::new("k-1"),
    });
    settings.static_headers = vec![("x-api-key".to_owned(), Secret::new("static"))];
    let publisher = publisher(settings);
    publisher.publish(&message("{}")).await;
    let mut msg = message("{}");
    msg.headers = vec![("X-API-KEY".to_owned(), "row".to_owned())];
    publisher.publish(&msg).await;
    let requests = receiver.requests();
    assert_eq!(requests[0].header("x-api-key"), Some("k-1"));
    assert_eq!(requests[1].header("x-api-key"), Some("row"));
    assert_eq!(requests[1].header_count("x-api-key"), 1);
}

#[tokio::test]
async fn dst_8_31_start_errors_name_the_key_and_never_the_secret() {
    let base = Url::parse("http://127.0.0.1:1/").unwrap();
    let with = |f: &dyn Fn(&mut HttpDestinationSettings)| {
        let mut s = settings(base.clone());
        f(&mut s);
        let err = HttpDestination::new(
            s,
            &SharedHttp::new(queuebox_telemetry::Metrics::new("test")),
        )
        .err()
        .expect("start must fail");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
        err
    };
    let err =
        with(&|s| s.static_headers = vec![("Content-Type".to_owned(), Secret::new("hunter2"))]);
    assert!(
        matches!(err, DestinationError::ReservedHeader { .. }),
        "{err}"
    );
    let err = with(&|s| s.static_headers = vec![("X-A".to_owned(), Secret::new("hunter2\n"))]);
    assert!(
        matches!(err, DestinationError::InvalidHeader { .. }),
        "{err}"
    );
    let err = with(&|s| {
        s.auth = Some(HttpAuth::Header {
            name: "X-Topic".to_owned(),
            value: Secret::new("hunter2"),
        })
    });
    assert!(
        err.to_string()
            .starts_with("destinations.orders.auth.headerName:"),
        "{err}"
    );
    let err = with(&|s| {
        s.auth = Some(HttpAuth::Basic {
            username: "a:b".to_owned(),
            password: Secret::new("hunter2"),
        })
    });
    assert_eq!(
        err.to_string(),
        "destinations.orders.auth.username: must not contain ':'"
    );
    let err = with(&|s| {
        s.auth = Some(HttpAuth::OAuth2 {
            client_id: "c".to_owned(),
            client_secret: Secret::new("hunter2"),
            token_url: Url::parse("http://127.0.0.1:1/token").unwrap(),
            scope: None,
            extra_params: vec![("client_secret".to_owned(), "x".to_owned())],
        })
    });
    assert!(
        matches!(err, DestinationError::ReservedOAuth2Param { .. }),
        "{err}"
    );
    let err = with(&|s| s.path = "/a/../b".to_owned());
    assert!(matches!(err, DestinationError::DotSegment { .. }), "{err}");
}

// ---- OAuth2 (DST-30) ----

/// A token server that hands out `tok-1`, `tok-2`, … with `expires_in`, counting requests.
async fn token_server(expires_in: u64) -> (Receiver, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&count);
    let receiver = Receiver::start(move |_, _| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::status(200)
            .header("Content-Type", "application/json")
            .body(format!(
                r#"{{"access_token":"tok-{n}","token_type":"Bearer","expires_in":{expires_in}}}"#
            ))
            // Slow enough that concurrent publishes overlap with the request in flight.
            .delay(Duration::from_millis(100))
    })
    .await;
    (receiver, count)
}

fn oauth2(base: Url, token_url: Url) -> HttpDestinationSettings {
    let mut settings = settings(base);
    settings.auth = Some(HttpAuth::OAuth2 {
        client_id: "queuebox".to_owned(),
        client_secret: Secret::new("s3cret&=x"),
        token_url,
        scope: Some("orders.write".to_owned()),
        extra_params: vec![("audience".to_owned(), "https://api".to_owned())],
    });
    settings
}

#[tokio::test]
async fn dst_30_one_token_request_for_many_publishes() {
    let (tokens, count) = token_server(3600).await;
    let receiver = Receiver::answering(200).await;
    let publisher = Arc::new(publisher(oauth2(receiver.url("/"), tokens.url("/token"))));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let publisher = Arc::clone(&publisher);
        tasks.push(tokio::spawn(async move {
            publisher.publish(&message("{}")).await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), Outcome::Delivered);
    }
    assert_eq!(publisher.publish(&message("{}")).await, Outcome::Delivered);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    for request in receiver.requests() {
        assert_eq!(request.header("authorization"), Some("Bearer tok-1"));
    }
    let token_request = &tokens.requests()[0];
    assert_eq!(token_request.method, "POST");
    assert_eq!(
        token_request.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(token_request.header("accept"), Some("application/json"));
    assert_eq!(
        token_request.body,
        "grant_type=client_credentials&client_id=queuebox&client_secret=s3cret%26%3Dx\
         &scope=orders.write&audience=https%3A%2F%2Fapi"
    );
}

#[tokio::test]
async fn dst_30_destinations_with_the_same_four_values_share_one_token() {
    let (tokens, count) = token_server(3600).await;
    let receiver = Receiver::answering(200).await;
    let shared = SharedHttp::new(queuebox_telemetry::Metrics::new("test"));
    let first =
        HttpDestination::new(oauth2(receiver.url("/a"), tokens.url("/token")), &shared).unwrap();
    let second =
        HttpDestination::new(oauth2(receiver.url("/b"), tokens.url("/token")), &shared).unwrap();
    assert_eq!(first.publish(&message("{}")).await, Outcome::Delivered);
    assert_eq!(second.publish(&message("{}")).await, Outcome::Delivered);
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn dst_30_new_token_after_expiry_minus_30_seconds() {
    // expires_in 31: reusable for 1 s only.
    let (tokens, count) = token_server(31).await;
    let receiver = Receiver::answering(200).await;
    let publisher = publisher(oauth2(receiver.url("/"), tokens.url("/token")));
    publisher.publish(&message("{}")).await;
    publisher.publish(&message("{}")).await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    publisher.publish(&message("{}")).await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let sent: Vec<_> = receiver
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap().to_owned())
        .collect();
    assert_eq!(sent, ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"]);
}

#[tokio::test]
async fn dst_30_a_token_with_expires_in_30_is_never_reused() {
    let (tokens, count) = token_server(30).await;
    let receiver = Receiver::answering(200).await;
    let publisher = publisher(oauth2(receiver.url("/"), tokens.url("/token")));
    publisher.publish(&message("{}")).await;
    publisher.publish(&message("{}")).await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn dst_30_a_401_drops_the_token_and_the_next_attempt_gets_a_new_one() {
    let (tokens, count) = token_server(3600).await;
    let receiver =
        Receiver::start(|_, index| Reply::status(if index == 0 { 401 } else { 200 })).await;
    let publisher = publisher(oauth2(receiver.url("/"), tokens.url("/token")));
    let first = publisher.publish(&message("{}")).await;
    assert_eq!(failure(&first).0, "HTTP 401: Unauthorized");
    assert_eq!(publisher.publish(&message("{}")).await, Outcome::Delivered);
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(
        receiver.requests()[1].header("authorization"),
        Some("Bearer tok-2")
    );
}

#[tokio::test]
async fn dst_30_token_failure_fails_the_publish_and_sends_nothing() {
    let tokens = Receiver::start(|_, _| {
        Reply::status(400).body(r#"{"error":"invalid_client","client_secret":"hunter2"}"#)
    })
    .await;
    let receiver = Receiver::answering(200).await;
    let (outcome, seen) = publisher(oauth2(receiver.url("/"), tokens.url("/token")))
        .publish_detailed(&message("{}"))
        .await;
    let (text, _) = failure(&outcome);
    assert!(
        text.starts_with("OAuth2 token request failed: HTTP 400 - "),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    assert_eq!(seen, None);
    assert!(receiver.requests().is_empty());
}

#[tokio::test]
async fn dst_30_token_request_follows_no_redirect_and_rejects_a_bad_response() {
    let elsewhere = Receiver::answering(200).await;
    let to = elsewhere.url("/token").to_string();
    let redirecting = Receiver::start(move |_, _| Reply::status(307).header("Location", &to)).await;
    let receiver = Receiver::answering(200).await;
    let outcome = publisher(oauth2(receiver.url("/"), redirecting.url("/token")))
        .publish(&message("{}"))
        .await;
    assert_eq!(failure(&outcome).0, "OAuth2 token request failed: HTTP 307");
    assert!(elsewhere.requests().is_empty());

    let no_token =
        Receiver::start(|_, _| Reply::status(200).body(r#"{"token_type":"Bearer"}"#)).await;
    let outcome = publisher(oauth2(receiver.url("/"), no_token.url("/token")))
        .publish(&message("{}"))
        .await;
    assert_eq!(
        failure(&outcome).0,
        "OAuth2 token request failed: the response has no access_token"
    );
    assert!(receiver.requests().is_empty());
}

#[tokio::test]
async fn dst_30_token_request_is_bounded_by_the_timeout() {
    let tokens = Receiver::start(|_, _| Reply::status(200).delay(Duration::from_secs(3))).await;
    let receiver = Receiver::answering(200).await;
    let mut settings = oauth2(receiver.url("/"), tokens.url("/token"));
    settings.timeout = Duration::from_millis(300);
    let outcome = publisher(settings).publish(&message("{}")).await;
    assert_eq!(
        failure(&outcome).0,
        "OAuth2 token request failed: timeout after 300ms"
    );
}

#[tokio::test]
async fn dst_30_waiters_share_a_failed_token_request() {
    let count = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&count);
    let tokens = Receiver::start(move |_, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        Reply::status(500).delay(Duration::from_millis(200))
    })
    .await;
    let receiver = Receiver::answering(200).await;
    let publisher = Arc::new(publisher(oauth2(receiver.url("/"), tokens.url("/token"))));
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let publisher = Arc::clone(&publisher);
            tokio::spawn(async move { publisher.publish(&message("{}")).await })
        })
        .collect();
    for task in tasks {
        let outcome = task.await.unwrap();
        assert_eq!(failure(&outcome).0, "OAuth2 token request failed: HTTP 500");
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
}
