//! Redaction of error text (pull.md §11, operations.md SEC-5): the one `redact` function that the
//! server applies to everything it logs or stores, and the error-chain text it is applied to.
//!
//! The rules are coded by hand over the bounded text as a slice of code points: positions and
//! lengths in the specification count code points, and indexing a `[char]` can never split one.
//! Every pattern of pull.md §11.2 is matched with bounded work per position, so a call is linear
//! in the bounded length (PULL-69).

mod auth_scheme;
mod key_value;
mod known;
mod userinfo;

pub use known::{MIN_SECRET_CHARS, remember_secret};

use std::error::Error;

/// Step 1 keeps this many characters (2000 + a 512 margin, so a secret that starts inside the
/// kept text is matched whole).
pub const INPUT_BOUND: usize = 2512;
/// The longest text `redact` returns, in characters.
pub const MAX_LENGTH: usize = 2000;
/// Appended by step 5 to a text cut to fit [`MAX_LENGTH`].
pub const TRUNCATION_MARKER: &str = "...[truncated]";

/// What a masked value becomes (PULL-66, PULL-68).
const REDACTED: &str = "[REDACTED]";
/// What masked URL user information becomes (PULL-67).
const MASKED_USERINFO: &str = "***";
/// The error text keeps at most this many levels of the cause chain (PULL-63).
const MAX_ERROR_LEVELS: usize = 5;
const CAUSE_SEPARATOR: &str = " | caused by ";
/// The scheme words of PULL-66 and PULL-68, lower case.
const SCHEME_WORDS: [&str; 5] = ["basic", "bearer", "digest", "negotiate", "token"];

/// Redacts secrets from `text` with the five steps of PULL-65. Every implementation (server and
/// clients) must give the same output for every input; `clients/contract/redaction-corpus.json`
/// is the judge.
///
/// The server first masks the configuration's own secrets ([`remember_secret`]), which the
/// clients do not know; with none remembered the output is the corpus's.
pub fn redact(text: &str) -> String {
    redact_inner(text, false)
}

/// [`redact`] for a text that was cut from a longer one (the first `maxErrorBodyBytes` of an
/// error body): a remembered secret whose start ends the text is masked too.
pub fn redact_cut(text: &str) -> String {
    redact_inner(text, true)
}

fn redact_inner(text: &str, cut_at_end: bool) -> String {
    // Step 1 before anything else: `take` stops reading at the bound, so a 10 MB text costs what
    // a 2512-character one does (PULL-C31).
    let bounded: Vec<char> = text.chars().take(INPUT_BOUND).collect();
    // A text longer than the bound was cut here as well.
    let cut_at_end = cut_at_end || bounded.len() == INPUT_BOUND;
    let bounded = known::mask(&bounded, cut_at_end);
    let text = key_value::mask(&bounded);
    let text = userinfo::mask(&text);
    let text = auth_scheme::mask(&text);
    truncate(text)
}

/// The error text of PULL-63: the `Display` of each level of the `source()` chain, at most five
/// levels, joined by ` | caused by `. The walk stops at a cause already seen, so a cyclic chain
/// ends.
pub fn error_text(err: &(dyn Error + 'static)) -> String {
    let mut levels: Vec<&(dyn Error + 'static)> = Vec::with_capacity(MAX_ERROR_LEVELS);
    let mut next = Some(err);
    while let Some(level) = next {
        if levels.len() == MAX_ERROR_LEVELS || levels.iter().any(|&seen| same_object(seen, level)) {
            break;
        }
        levels.push(level);
        next = level.source();
    }
    levels
        .iter()
        .map(|level| level.to_string())
        .collect::<Vec<_>>()
        .join(CAUSE_SEPARATOR)
}

/// [`error_text`] passed through [`redact`]: the text that may reach a log line, `last_error` or
/// an HTTP response (SEC-5).
pub fn redacted_error_text(err: &(dyn Error + 'static)) -> String {
    redact(&error_text(err))
}

/// Whether two levels of a chain are the same object. The address alone is not enough: a newtype
/// error that returns its only field as `source()` shares its address with that field, and the
/// cause would be lost. Comparing the vtable too tells the two apart; a duplicated vtable can only
/// make a real cycle go unnoticed, and the five-level cap still ends the walk.
fn same_object(a: &(dyn Error + 'static), b: &(dyn Error + 'static)) -> bool {
    std::ptr::eq(a, b)
}

/// Step 5: cut a text longer than [`MAX_LENGTH`] so that, with the marker, it is exactly
/// [`MAX_LENGTH`] characters long.
fn truncate(text: Vec<char>) -> String {
    if text.len() <= MAX_LENGTH {
        return text.into_iter().collect();
    }
    let kept = MAX_LENGTH - TRUNCATION_MARKER.chars().count();
    let mut out: String = text.into_iter().take(kept).collect();
    out.push_str(TRUNCATION_MARKER);
    out
}

/// A word character of PULL-64: ASCII only, so `ſ` or `K` never join a key.
fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whitespace of PULL-64: space, tab, CR, LF, form feed and vertical tab; nothing else.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n' | '\x0B' | '\x0C')
}

/// Space or tab, the only whitespace allowed around a separator and after a scheme word.
fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Whether `word` (ASCII, lower case) occurs at `at`, compared ASCII case-insensitively: a
/// non-ASCII character never equals an ASCII letter, whatever its Unicode case folding says.
fn word_at(text: &[char], at: usize, word: &str) -> bool {
    let Some(rest) = text.get(at..) else {
        return false;
    };
    word.len() <= rest.len()
        && word
            .chars()
            .zip(rest)
            .all(|(expected, actual)| actual.to_ascii_lowercase() == expected)
}

/// The length of the scheme word (`Basic`, `Bearer`, ...) at `at`, if there is one.
fn scheme_word_at(text: &[char], at: usize) -> Option<usize> {
    SCHEME_WORDS
        .iter()
        .find(|word| word_at(text, at, word))
        .map(|word| word.len())
}

/// Skips spaces and tabs from `at`; returns the first position that is neither.
fn skip_blanks(text: &[char], mut at: usize) -> usize {
    while text.get(at).is_some_and(|&c| is_blank(c)) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    #[test]
    fn pull_65_steps_run_in_order_on_one_text() {
        let input = "connect postgres://app:pw@db failed, password=hunter2, sent Bearer abc123";
        assert_eq!(
            redact(input),
            "connect postgres://***@db failed, password=[REDACTED], sent Bearer [REDACTED]"
        );
    }

    #[test]
    fn pull_65_bound_keeps_first_2512_characters_before_any_rule() {
        // The closing quote lies past the bound, so the quoted value runs to the end of the text.
        let input = format!("{{\"password\":\"{}\"}}", "x".repeat(3000));
        assert_eq!(redact(&input), "{\"password\":\"[REDACTED]");
    }

    #[test]
    fn pull_65_truncate_counts_code_points_not_bytes_or_utf16_units() {
        let fits = "😀".repeat(MAX_LENGTH);
        assert_eq!(redact(&fits), fits);
        let long = "é".repeat(MAX_LENGTH + 1);
        let out = redact(&long);
        assert_eq!(out.chars().count(), MAX_LENGTH);
        assert_eq!(out, format!("{}{TRUNCATION_MARKER}", "é".repeat(1986)));
    }

    #[test]
    fn pull_65_redaction_that_shrinks_the_text_avoids_truncation() {
        let input = format!("{} password={}", "a".repeat(1980), "s".repeat(600));
        assert_eq!(
            redact(&input),
            format!("{} password=[REDACTED]", "a".repeat(1980))
        );
    }

    #[test]
    fn pull_64_empty_and_plain_text_unchanged() {
        assert_eq!(redact(""), "");
        assert_eq!(redact("HTTP 404: Not Found"), "HTTP 404: Not Found");
    }

    /// An error whose `source()` is the next link of a chain held in a vector.
    #[derive(Debug)]
    struct Link {
        text: String,
        next: Option<Box<Link>>,
    }

    impl fmt::Display for Link {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.text)
        }
    }

    impl Error for Link {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.next
                .as_deref()
                .map(|next| next as &(dyn Error + 'static))
        }
    }

    fn chain(texts: &[&str]) -> Link {
        let mut next = None;
        for text in texts.iter().rev() {
            next = Some(Box::new(Link {
                text: (*text).to_owned(),
                next,
            }));
        }
        *next.expect("at least one level")
    }

    #[test]
    fn pull_63_joins_each_level_with_caused_by() {
        let err = chain(&["publish failed", "connection reset", "os error 104"]);
        assert_eq!(
            error_text(&err),
            "publish failed | caused by connection reset | caused by os error 104"
        );
    }

    #[test]
    fn pull_63_keeps_at_most_five_levels() {
        let err = chain(&["l1", "l2", "l3", "l4", "l5", "l6", "l7"]);
        assert_eq!(
            error_text(&err),
            "l1 | caused by l2 | caused by l3 | caused by l4 | caused by l5"
        );
    }

    #[test]
    fn pull_63_single_level_has_no_separator() {
        assert_eq!(error_text(&chain(&["only"])), "only");
    }

    /// An error that names itself as its own cause.
    #[derive(Debug)]
    struct SelfCause;

    impl fmt::Display for SelfCause {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("loop")
        }
    }

    impl Error for SelfCause {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self)
        }
    }

    #[test]
    fn pull_63_stops_at_a_cause_already_seen() {
        assert_eq!(error_text(&SelfCause), "loop");
    }

    /// A newtype error: its source lives at its own address.
    #[derive(Debug)]
    struct Wrapper(Link);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("wrapper")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn pull_63_newtype_cause_at_same_address_is_not_taken_for_a_cycle() {
        let err = Wrapper(chain(&["inner"]));
        assert_eq!(error_text(&err), "wrapper | caused by inner");
    }

    #[test]
    fn sec_5_redacted_error_text_masks_secrets_in_causes() {
        let err = chain(&["start failed", "connect to amqp://svc:pw@rabbit refused"]);
        assert_eq!(
            redacted_error_text(&err),
            "start failed | caused by connect to amqp://***@rabbit refused"
        );
    }

    /// A small deterministic generator (xorshift), so the property test needs no extra crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            usize::try_from(self.next() % n as u64).unwrap_or(0)
        }
    }

    const PIECES: &[&str] = &[
        "password",
        "PGPASSWORD",
        "api_key",
        "x-api-key",
        "secret.key",
        "token",
        "Token ",
        "Bearer ",
        "basic\t",
        "digest",
        "authorization",
        "cookie",
        "passwd",
        "credentials",
        "=",
        "==",
        ":",
        "::",
        ": ",
        " = ",
        "\"",
        "'",
        "\\",
        "@",
        "://",
        ":/",
        "/",
        "?",
        "#",
        ",",
        ", ",
        ";",
        "&",
        "{",
        "}",
        "[",
        "]",
        " ",
        "\t",
        "\n",
        "\r",
        "\x0B",
        "abc",
        "12345",
        "dXNl==",
        "amqp",
        "host",
        ":5672",
        "é",
        "ſ",
        "\u{212A}",
        "ı",
        "İ",
        "😀",
        "ü",
        "_",
        "-",
        ".",
    ];

    fn random_text(rng: &mut Rng) -> String {
        // Mostly short texts, now and then one past the bound.
        let pieces = if rng.below(10) == 0 {
            1500
        } else {
            rng.below(60)
        };
        (0..pieces)
            .map(|_| PIECES[rng.below(PIECES.len())])
            .collect()
    }

    #[test]
    fn pull_65_random_texts_never_panic_and_stay_within_max_length() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..3000 {
            let input = random_text(&mut rng);
            let out = redact(&input);
            let len = out.chars().count();
            assert!(len <= MAX_LENGTH, "{len} characters for {input:?}");
            let bounded: String = input.chars().take(INPUT_BOUND).collect();
            assert_eq!(
                out,
                redact(&bounded),
                "bound changed the output of {input:?}"
            );
        }
    }
}
