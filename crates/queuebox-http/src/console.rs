//! The web console (issue 13 part 3): three static files embedded in the binary, served under
//! `/admin/console` next to the admin API and only when it is on. The files hold no data; every
//! number the page shows comes from the admin API's JSON routes, which check the admin
//! authentication on each call (a browser cannot add a header to a navigation, so the page asks
//! for the credential and sends it with every `fetch`).

use axum::Router;
use axum::body::Body;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::http::{HeaderValue, Response, StatusCode};
use axum::routing::get;

const INDEX: &str = include_str!("../console/index.html");
const APP: &str = include_str!("../console/app.js");
const STYLE: &str = include_str!("../console/style.css");

/// Only this origin's files and API; no inline script; no framing.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn asset(content_type: &'static str, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    response
}

/// `GET /admin/console` (the page), `/admin/console/app.js` and `/admin/console/style.css`.
/// Merge into the operational routes together with the admin API's routes.
pub fn console_routes() -> Router {
    Router::new()
        .route(
            "/admin/console",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/admin/console/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/admin/console/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP) }),
        )
        .route(
            "/admin/console/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files() {
        assert!(INDEX.contains(r#"src="/admin/console/app.js""#));
        assert!(INDEX.contains(r#"href="/admin/console/style.css""#));
        assert!(!INDEX.contains("<script>"), "no inline script (CSP)");
        assert!(!APP.contains("http://") && !APP.contains("https://"));
        assert!(INDEX.contains(r#"name="viewport""#), "readable on a phone");
    }
}
