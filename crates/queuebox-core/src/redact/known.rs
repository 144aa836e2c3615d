//! Step 0 of the server's redaction (operations.md SEC-5; issue 17 defect 4): the values of the
//! configuration's own secrets (auth tokens, passwords, `headers` values of a destination, every
//! `file:` secret) are masked wherever they occur in a text, in the forms a receiver or a client
//! library may echo them: as written, JSON-escaped, percent-encoded (`%20` or `+` for a space)
//! and Base64 (standard and URL-safe, with or without padding).
//!
//! The pattern rules of PULL-65 cannot know a value that sits under no key (`X-Static-Secret`
//! echoed in an error body), so the configuration registers each value once at load
//! ([`remember_secret`]); [`super::redact`] masks them before its pattern steps. The process
//! holds one set: the configuration is loaded once per process.

use std::collections::BTreeSet;
use std::sync::{PoisonError, RwLock};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use super::REDACTED;

/// A value shorter than this many characters is not masked: `1`, `on` or `v2` as a header value
/// would otherwise mask every digit and word of a text, and is no secret anyway.
pub const MIN_SECRET_CHARS: usize = 4;

/// Every form of every remembered value, longest first, so a longer form (a JSON-escaped value
/// with the raw value inside it) is masked whole.
static FORMS: RwLock<BTreeSet<Form>> = RwLock::new(BTreeSet::new());

/// One text to mask, ordered longest first and then by content.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Form(std::cmp::Reverse<usize>, String);

/// Remembers a configured secret so that every later [`super::redact`] masks it. Values shorter
/// than [`MIN_SECRET_CHARS`] are ignored; remembering a value twice is harmless.
pub fn remember_secret(value: &str) {
    if value.chars().count() < MIN_SECRET_CHARS {
        return;
    }
    let mut forms = FORMS.write().unwrap_or_else(PoisonError::into_inner);
    for form in forms_of(value) {
        if form.chars().count() >= MIN_SECRET_CHARS {
            forms.insert(Form(std::cmp::Reverse(form.len()), form));
        }
    }
}

/// The forms a value may be echoed in.
fn forms_of(value: &str) -> Vec<String> {
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json
        .strip_prefix('"')
        .and_then(|j| j.strip_suffix('"'))
        .unwrap_or(value)
        .to_owned();
    // serde_json leaves `/` alone; many JSON writers escape it.
    let json_slash = json.replace('/', "\\/");
    let percent = utf8_percent_encode(value, NON_ALPHANUMERIC).to_string();
    let form_encoded = percent.replace("%20", "+");
    let bytes = value.as_bytes();
    vec![
        value.to_owned(),
        json,
        json_slash,
        percent,
        form_encoded,
        STANDARD.encode(bytes),
        STANDARD_NO_PAD.encode(bytes),
        URL_SAFE.encode(bytes),
        URL_SAFE_NO_PAD.encode(bytes),
    ]
}

/// Whether any secret is remembered (the common case of a test or a configuration without one
/// costs nothing then).
fn any() -> bool {
    !FORMS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .is_empty()
}

/// Masks every remembered form in `text`. With `cut_at_end`, the text was cut from a longer one
/// (an error body read up to `maxErrorBodyBytes`), so a trailing start of a form (at least
/// [`MIN_SECRET_CHARS`] characters of it) is masked too.
pub(super) fn mask(text: &[char], cut_at_end: bool) -> Vec<char> {
    if !any() {
        return text.to_vec();
    }
    let forms = FORMS.read().unwrap_or_else(PoisonError::into_inner);
    let mut out: String = text.iter().collect();
    for Form(_, form) in forms.iter() {
        if out.contains(form.as_str()) {
            out = out.replace(form.as_str(), REDACTED);
        }
    }
    if cut_at_end {
        out = mask_cut_tail(out, forms.iter().map(|f| f.1.as_str()));
    }
    out.chars().collect()
}

/// Masks the longest end of `text` that is the start of a form, if it has at least
/// [`MIN_SECRET_CHARS`] characters.
fn mask_cut_tail<'a>(text: String, forms: impl Iterator<Item = &'a str>) -> String {
    let mut cut_at = None;
    for form in forms {
        // The longest proper prefix of `form` that ends `text`.
        let mut ends: Vec<usize> = form.char_indices().map(|(i, _)| i).skip(1).collect();
        ends.reverse();
        for end in ends {
            let prefix = &form[..end];
            if prefix.chars().count() < MIN_SECRET_CHARS {
                break;
            }
            if text.ends_with(prefix) {
                let at = text.len() - prefix.len();
                cut_at = Some(cut_at.map_or(at, |c: usize| c.min(at)));
                break;
            }
        }
    }
    match cut_at {
        Some(at) => format!("{}{REDACTED}", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    fn text(c: Vec<char>) -> String {
        c.into_iter().collect()
    }

    #[test]
    fn forms_cover_raw_json_percent_and_base64() {
        let forms = forms_of("a/b c\"d");
        assert!(forms.contains(&"a/b c\\\"d".to_owned()), "{forms:?}");
        assert!(forms.contains(&"a\\/b c\\\"d".to_owned()), "{forms:?}");
        assert!(forms.contains(&"a%2Fb%20c%22d".to_owned()), "{forms:?}");
        assert!(forms.contains(&"a%2Fb+c%22d".to_owned()), "{forms:?}");
        assert!(forms.contains(&STANDARD.encode("a/b c\"d")), "{forms:?}");
    }

    #[test]
    fn a_cut_text_loses_the_start_of_a_secret_at_its_end() {
        let tail = mask_cut_tail("error: s3cr3t-val".into(), ["s3cr3t-value-1"].into_iter());
        assert_eq!(tail, "error: [REDACTED]");
        let short = mask_cut_tail("error: s3c".into(), ["s3cr3t-value-1"].into_iter());
        assert_eq!(short, "error: s3c", "fewer than 4 characters say nothing");
    }

    // The set is per process; nextest runs each test in a process of its own, and this is the
    // only test of the crate's unit tests that remembers a value.
    #[test]
    fn remembered_values_are_masked_in_every_form_and_short_ones_are_not() {
        remember_secret("on");
        remember_secret("St4tic/Secret+Value=1");
        let masked = text(mask(
            &chars("raw St4tic/Secret+Value=1, pct St4tic%2FSecret%2BValue%3D1, on"),
            false,
        ));
        assert_eq!(masked, "raw [REDACTED], pct [REDACTED], on");
        let b64 = STANDARD.encode("St4tic/Secret+Value=1");
        assert_eq!(
            text(mask(&chars(&format!("echo {b64}")), false)),
            "echo [REDACTED]"
        );
    }
}
