//! The target URL of an HTTP destination: `baseUrl` joined with `path` (DST-23), and the
//! start-time rules of both keys.

use url::Url;

use super::DestinationError;

/// Checks an absolute `http`/`https` URL with a host and no user information (the rules of
/// `baseUrl` and `tokenUrl`). The error never repeats the URL: it could carry a password.
pub(crate) fn check_base(
    destination: &str,
    key: &'static str,
    url: &Url,
) -> Result<(), DestinationError> {
    let reason = if !matches!(url.scheme(), "http" | "https") {
        Some("must be an http or https URL")
    } else if url.host_str().is_none_or(str::is_empty) {
        Some("must have a host")
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("must not contain user information")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(DestinationError::InvalidUrl {
            destination: destination.to_owned(),
            key,
            reason: reason.to_owned(),
        }),
        None => Ok(()),
    }
}

/// DST-23: with no non-empty segment in `path`, `baseUrl` as configured; otherwise the path
/// of `baseUrl` without one trailing `/`, then `/` and the non-empty segments joined by `/`.
/// The query of `baseUrl` is kept. `set_path` percent-encodes what a path cannot carry and
/// leaves existing `%XX` escapes alone.
pub(crate) fn join(destination: &str, base: &Url, path: &str) -> Result<Url, DestinationError> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if let Some(dot) = segments.iter().find(|s| matches!(**s, "." | "..")) {
        return Err(DestinationError::DotSegment {
            destination: destination.to_owned(),
            segment: (*dot).to_owned(),
        });
    }
    if segments.is_empty() {
        return Ok(base.clone());
    }
    let base_path = base.path();
    let base_path = base_path.strip_suffix('/').unwrap_or(base_path);
    let mut url = base.clone();
    url.set_path(&format!("{base_path}/{}", segments.join("/")));
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(base: &str, path: &str) -> String {
        join("d", &Url::parse(base).unwrap(), path)
            .unwrap()
            .to_string()
    }

    #[test]
    fn dst_23_the_join_table() {
        // Row 1: `Url` always serializes an empty path as `/`; the request line is the same.
        assert_eq!(
            joined("https://api.example.com", "/"),
            "https://api.example.com/"
        );
        assert_eq!(
            joined("https://api.example.com/v1", "/orders"),
            "https://api.example.com/v1/orders"
        );
        assert_eq!(
            joined("https://api.example.com/v1/", "orders/"),
            "https://api.example.com/v1/orders"
        );
        assert_eq!(
            joined("https://api.example.com/v1", "//orders//new"),
            "https://api.example.com/v1/orders/new"
        );
    }

    #[test]
    fn dst_23_empty_path_keeps_base_exactly() {
        assert_eq!(joined("https://h/v1/", ""), "https://h/v1/");
        assert_eq!(joined("https://h/v1/", "///"), "https://h/v1/");
    }

    #[test]
    fn dst_23_query_is_kept() {
        assert_eq!(
            joined("https://h/v1?tenant=a", "/orders"),
            "https://h/v1/orders?tenant=a"
        );
    }

    #[test]
    fn dst_23_characters_a_path_cannot_carry_are_percent_encoded() {
        assert_eq!(
            joined("https://h", "/a b/c?d#e"),
            "https://h/a%20b/c%3Fd%23e"
        );
        assert_eq!(
            joined("https://h", "/already%20encoded"),
            "https://h/already%20encoded"
        );
    }

    #[test]
    fn cfg_50_dot_segments_are_refused() {
        let err = join("d", &Url::parse("https://h").unwrap(), "/a/../b").unwrap_err();
        assert!(err.to_string().contains("'..'"), "{err}");
    }

    #[test]
    fn cfg_50_base_url_rules() {
        let check = |u: &str| check_base("d", "baseUrl", &Url::parse(u).unwrap());
        assert!(check("https://h/v1").is_ok());
        assert!(check("ftp://h").is_err());
        let err = check("https://user:hunter2@h").unwrap_err();
        assert!(!err.to_string().contains("hunter2"));
    }
}
