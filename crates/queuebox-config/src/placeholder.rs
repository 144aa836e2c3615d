//! `${NAME}` placeholders in file values (CFG-19, CFG-20), and `file:` secrets (CFG-21).

use std::path::Path;

/// Why a placeholder could not be expanded. The messages follow CFG-20.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlaceholderError {
    #[error("${{{0}}} is not set and has no fallback")]
    Unset(String),
    #[error("has a ${{ that starts no placeholder; write $${{ for a literal ${{")]
    Malformed,
}

/// Expands every placeholder of one file value. `$${` is a literal `${`; a fallback is the
/// literal text up to the next `}`; an empty variable without a fallback is the empty text.
pub(crate) fn expand(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, PlaceholderError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
            continue;
        }
        let Some(body_start) = after.strip_prefix("${") else {
            out.push('$');
            rest = &after[1..];
            continue;
        };
        let close = body_start.find('}').ok_or(PlaceholderError::Malformed)?;
        let body = &body_start[..close];
        let (name, fallback) = match body.find(":-") {
            Some(i) => (&body[..i], Some(&body[i + 2..])),
            None => (body, None),
        };
        if !is_name(name) {
            return Err(PlaceholderError::Malformed);
        }
        let value = lookup(name);
        match (value, fallback) {
            (Some(v), Some(f)) if v.is_empty() => out.push_str(f),
            (Some(v), _) => out.push_str(&v),
            (None, Some(f)) => out.push_str(f),
            (None, None) => return Err(PlaceholderError::Unset(name.to_owned())),
        }
        rest = &body_start[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `NAME` is a letter or `_`, then letters, digits and `_`.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The largest `file:` secret, in bytes (SEC-12): far more than any key or certificate needs.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// Reads a `file:` secret: the content without its trailing line breaks. The error text is a
/// reason only; it never carries the file's content (CFG-21). Only a regular file of at most
/// [`MAX_SECRET_FILE_BYTES`] is read (SEC-12): a device such as `/dev/zero` never ends, and
/// opening a FIFO waits for a writer that may never come. The type is checked before the open
/// (which would block on a FIFO) and again on the open file, and the read stops one byte past
/// the limit whatever the size said, so a file that changes meanwhile cannot get around it.
pub(crate) fn read_secret_file(file: &str, cwd: &Path) -> Result<String, String> {
    use std::io::Read as _;
    const NOT_REGULAR: &str = "not a regular file";
    let too_big = || format!("larger than {MAX_SECRET_FILE_BYTES} bytes");
    let path = cwd.join(file);
    let meta = std::fs::metadata(&path).map_err(|e| io_reason(&e))?;
    if meta.is_dir() {
        return Err("it is a directory".to_owned());
    }
    if !meta.is_file() {
        return Err(NOT_REGULAR.to_owned());
    }
    if meta.len() > MAX_SECRET_FILE_BYTES {
        return Err(too_big());
    }
    let opened = std::fs::File::open(&path).map_err(|e| io_reason(&e))?;
    if !opened.metadata().map_err(|e| io_reason(&e))?.is_file() {
        return Err(NOT_REGULAR.to_owned());
    }
    let mut bytes = Vec::new();
    opened
        .take(MAX_SECRET_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_reason(&e))?;
    if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(too_big());
    }
    let text = String::from_utf8(bytes).map_err(|_| "the file is not valid UTF-8".to_owned())?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

/// A short reason for an I/O error, without the OS error number noise.
pub(crate) fn io_reason(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_owned(),
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "API_HOST" => Some("api.example.com".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn cfg_19_placeholders_expand_with_text_around_them() {
        assert_eq!(
            expand("https://${API_HOST}/v1", env).unwrap(),
            "https://api.example.com/v1"
        );
        assert_eq!(
            expand("${A:-x}-${API_HOST}", env).unwrap(),
            "x-api.example.com"
        );
    }

    #[test]
    fn cfg_19_fallback_applies_when_unset_or_empty() {
        assert_eq!(expand("${PORT:-8080}", env).unwrap(), "8080");
        assert_eq!(expand("${EMPTY:-dflt}", env).unwrap(), "dflt");
        assert_eq!(expand("${API_HOST:-dflt}", env).unwrap(), "api.example.com");
        // The fallback is literal up to the next `}`: no nesting.
        assert_eq!(expand("${X:-${Y}", env).unwrap(), "${Y");
    }

    #[test]
    fn cfg_19_double_dollar_is_a_literal() {
        assert_eq!(expand("$${API_HOST}", env).unwrap(), "${API_HOST}");
        assert_eq!(expand("cost $5 $$", env).unwrap(), "cost $5 $$");
    }

    #[test]
    fn cfg_20_unset_without_fallback_is_an_error_and_empty_is_empty() {
        assert_eq!(
            expand("${DB_PASSWORD}", env).unwrap_err().to_string(),
            "${DB_PASSWORD} is not set and has no fallback"
        );
        assert_eq!(expand("a${EMPTY}b", env).unwrap(), "ab");
        assert_eq!(
            expand("${1X}", env).unwrap_err(),
            PlaceholderError::Malformed
        );
        assert_eq!(
            expand("${OPEN", env).unwrap_err(),
            PlaceholderError::Malformed
        );
    }
}
