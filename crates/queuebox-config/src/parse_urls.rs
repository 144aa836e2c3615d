//! URL checks shared by destinations and sources: `baseUrl` and `tokenUrl` (CFG-101), AMQP
//! URIs (CFG-51, CFG-75) and dot segments in paths. URLs may carry passwords, so messages show
//! them masked or not at all.

use queuebox_core::Secret;

use crate::diag::quote;
use crate::mask::mask_url;
use crate::node::Node;
use crate::read::Cx;
use crate::values as v;

/// Whether a path has a `.` or `..` segment, percent-encoded dots included.
pub(crate) fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}

/// `baseUrl` and `tokenUrl` (CFG-50, CFG-101): absolute http or https, a host, no user
/// information, no dot segment. The URL is shown masked, as it may carry a password.
pub(crate) fn check_http_url(text: &str) -> Result<url::Url, String> {
    let not_absolute = || {
        format!(
            "must be an absolute http or https URL, got {}",
            quote(&mask_url(text))
        )
    };
    let url = url::Url::parse(text).map_err(|_| not_absolute())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(not_absolute());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not contain user information".to_owned());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must have a host".to_owned());
    }
    // The parsed URL has its dot segments resolved already, so the text is checked.
    let after_scheme = text.split_once("://").map_or("", |(_, rest)| rest);
    let path = after_scheme
        .find('/')
        .map_or("", |i| &after_scheme[i..])
        .split(['?', '#'])
        .next()
        .unwrap_or_default();
    if has_dot_segment(path) {
        return Err("must not contain a . or .. segment".to_owned());
    }
    Ok(url)
}

pub(crate) fn http_url(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<url::Url> {
    let text = v::string(cx, path, node)?;
    check_http_url(&text)
        .map_err(|message| cx.error_at(path, node, message))
        .ok()
}
/// An `amqp://` or `amqps://` URI (CFG-51, CFG-75); a secret, so never quoted.
pub(crate) fn amqp_url(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Secret> {
    let url = v::required_secret(cx, path, node)?;
    let valid = url::Url::parse(url.expose()).is_ok_and(|u| {
        matches!(u.scheme(), "amqp" | "amqps") && u.host_str().is_some_and(|h| !h.is_empty())
    });
    if !valid {
        cx.error_at(path, node, "must be an amqp:// or amqps:// URI with a host");
        return None;
    }
    Some(url)
}
