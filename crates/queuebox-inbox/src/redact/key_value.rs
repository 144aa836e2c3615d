//! Step 2 of redaction (PULL-66): the value after a secret-looking key such as `password=`,
//! `"client_secret":` or `Authorization:`.
//!
//! The specification states the rule as the regular expression
//! `\b(?P<key>[A-Za-z0-9_]{0,64}?(?:K))\b(?P<sep>["']?[ \t]*(?::+|=+)[ \t]*)`. A key ends with
//! a letter followed by a non-word character, and no key holds a character that can start `sep`,
//! so matches never overlap and each is found from its end: at every word end, try `sep`, then
//! try each key backwards. The match starting leftmost is also the one ending leftmost, so
//! scanning the ends left to right gives the regex's leftmost-first order.

use super::{REDACTED, is_space, is_word, scheme_word_at, skip_blanks, word_at};

/// The keys of PULL-66 in the listed order, split where the specification allows an optional
/// `-`, `_` or `.`.
const KEYS: [&[&str]; 14] = [
    &["authorization"],
    &["api", "key"],
    &["access", "key"],
    &["secret", "key"],
    &["private", "key"],
    &["cookie"],
    &["token"],
    &["secret"],
    &["password"],
    &["passwd"],
    &["pwd"],
    &["passphrase"],
    &["credentials"],
    &["credential"],
];

/// The longest run of word characters allowed before a key; it keeps the scan linear.
const MAX_PREFIX: usize = 64;

/// Applies step 2 to the whole text.
pub(super) fn mask(text: &[char]) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len());
    let mut copied = 0;
    // A match must start at or after `resume` (after the previous value or separator).
    let mut resume = 0;
    let mut end = 1;
    while end < text.len() {
        let found = is_key_end(text, end)
            .then(|| separator(text, end))
            .flatten()
            .filter(|_| key_ends_at(text, end, resume));
        let Some((value_start, colon)) = found else {
            end += 1;
            continue;
        };
        match value(text, value_start, colon) {
            Some((value_end, replacement)) => {
                out.extend_from_slice(&text[copied..value_start]);
                out.extend(replacement.chars());
                copied = value_end;
                resume = value_end;
            }
            None => resume = value_start,
        }
        // A key starts at or after `resume` and is at least one character long.
        end = resume + 1;
    }
    out.extend_from_slice(&text[copied..]);
    out
}

/// A key ends with a letter, on a word boundary.
fn is_key_end(text: &[char], end: usize) -> bool {
    text[end - 1].is_ascii_alphabetic() && !is_word(text[end])
}

/// Matches `sep` at `at`: an optional closing quote, spaces or tabs, one or more `:` or one or
/// more `=`, spaces or tabs. Returns where the value starts and whether `sep` holds a `:`.
fn separator(text: &[char], at: usize) -> Option<(usize, bool)> {
    let mut i = at;
    if matches!(text.get(i), Some('"' | '\'')) {
        i += 1;
    }
    i = skip_blanks(text, i);
    let mark = *text.get(i).filter(|&&c| c == ':' || c == '=')?;
    while text.get(i) == Some(&mark) {
        i += 1;
    }
    Some((skip_blanks(text, i), mark == ':'))
}

/// Whether some key of [`KEYS`] ends at `end` with an allowed prefix that starts at or after
/// `resume`.
fn key_ends_at(text: &[char], end: usize, resume: usize) -> bool {
    KEYS.iter().any(|parts| {
        key_starts(text, end, parts)
            .into_iter()
            .flatten()
            .any(|start| prefix_allows(text, start, resume))
    })
}

/// The positions where `parts` (one or two parts, with an optional `-`, `_` or `.` between them)
/// can start so as to end exactly at `end`.
fn key_starts(text: &[char], end: usize, parts: &[&str]) -> [Option<usize>; 2] {
    let Some((last, first)) = parts.split_last() else {
        return [None, None];
    };
    let Some(last_start) = end
        .checked_sub(last.len())
        .filter(|&s| word_at(text, s, last))
    else {
        return [None, None];
    };
    let Some(first) = first.first() else {
        return [Some(last_start), None];
    };
    let joined = last_start
        .checked_sub(first.len())
        .filter(|&s| word_at(text, s, first));
    let separated = last_start
        .checked_sub(1)
        .filter(|&s| matches!(text[s], '-' | '_' | '.'))
        .and_then(|s| s.checked_sub(first.len()))
        .filter(|&s| word_at(text, s, first));
    [joined, separated]
}

/// The regex starts on a word boundary, so the prefix is the whole run of word characters before
/// the key; it may be at most [`MAX_PREFIX`] long and must not reach back before `resume`.
fn prefix_allows(text: &[char], key_start: usize, resume: usize) -> bool {
    let run = text[..key_start]
        .iter()
        .rev()
        .take(MAX_PREFIX + 1)
        .take_while(|&&c| is_word(c))
        .count();
    run <= MAX_PREFIX && key_start - run >= resume
}

/// The extent of the value at `start` and its replacement, or `None` when nothing is replaced
/// (end of text, a `{` or `[`, or an empty value).
fn value(text: &[char], start: usize, colon: bool) -> Option<(usize, String)> {
    let first = *text.get(start)?;
    match first {
        '"' | '\'' => {
            let close = closing_quote(text, start + 1, first);
            let (end, closing) = match close {
                Some(close) => (close + 1, first.to_string()),
                None => (text.len(), String::new()),
            };
            Some((end, format!("{first}{REDACTED}{closing}")))
        }
        // The structure is not masked as a whole; its own keys are matched on their own.
        '{' | '[' => None,
        _ => {
            let mut i = start;
            if let Some(len) = scheme_word_at(text, start) {
                let after = skip_blanks(text, start + len);
                if after > start + len {
                    i = after;
                }
            }
            while text.get(i).is_some_and(|&c| !ends_value(c, colon)) {
                i += 1;
            }
            (i > start).then(|| (i, REDACTED.to_owned()))
        }
    }
}

/// The next `quote` from `from` that no backslash escapes.
fn closing_quote(text: &[char], from: usize, quote: char) -> Option<usize> {
    let mut i = from;
    while let Some(&c) = text.get(i) {
        if c == quote {
            return Some(i);
        }
        // A backslash escapes the next character, whatever it is.
        i += if c == '\\' { 2 } else { 1 };
    }
    None
}

/// Where an unquoted value stops. A `:` value runs through spaces (`password: my secret pass`);
/// an `=` value stops at whitespace, so the words after `password=x` survive.
fn ends_value(c: char, colon: bool) -> bool {
    matches!(c, ',' | ';' | '}' | ']' | '&' | '"')
        || if colon {
            c == '\r' || c == '\n'
        } else {
            is_space(c)
        }
}

#[cfg(test)]
mod tests {
    fn redact(text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        super::mask(&chars).into_iter().collect()
    }

    #[test]
    fn pull_66_prefix_of_64_word_characters_matches() {
        let input = format!("{}password=x1", "a".repeat(64));
        assert_eq!(
            redact(&input),
            format!("{}password=[REDACTED]", "a".repeat(64))
        );
    }

    #[test]
    fn pull_66_prefix_of_65_word_characters_does_not_match() {
        let input = format!("{}password=x1", "a".repeat(65));
        assert_eq!(redact(&input), input);
    }

    #[test]
    fn pull_66_key_separators_dash_underscore_dot_or_none() {
        for key in [
            "api-key",
            "api_key",
            "api.key",
            "apikey",
            "APIKEY",
            "Secret.Key",
        ] {
            assert_eq!(
                redact(&format!("{key}=v1 x")),
                format!("{key}=[REDACTED] x"),
                "{key}"
            );
        }
        assert_eq!(redact("api--key=v1"), "api--key=v1");
    }

    #[test]
    fn pull_66_key_must_end_on_word_boundary() {
        for input in ["passwordless=true", "tokens=5", "secretary=Jane", "pwd2=x"] {
            assert_eq!(redact(input), input);
        }
    }

    #[test]
    fn pull_66_separator_styles() {
        assert_eq!(redact("password = a b"), "password = [REDACTED] b");
        assert_eq!(redact("password : a b"), "password : [REDACTED]");
        assert_eq!(redact("token::a1 b"), "token::[REDACTED]");
        assert_eq!(redact("passwd==a1 b"), "passwd==[REDACTED] b");
        assert_eq!(redact("pwd\t=\tx\ty"), "pwd\t=\t[REDACTED]\ty");
        assert_eq!(redact("{'password': 'a b'}"), "{'password': '[REDACTED]'}");
        assert_eq!(redact("password:=x"), "password:[REDACTED]");
    }

    #[test]
    fn pull_66_quoted_value_honours_backslash_escapes() {
        assert_eq!(
            redact(r#"{"secret":"a\\","next":"b"}"#),
            r#"{"secret":"[REDACTED]","next":"b"}"#
        );
        assert_eq!(redact(r#"password="a\"b" c"#), r#"password="[REDACTED]" c"#);
        assert_eq!(redact(r#"password="abc\"#), r#"password="[REDACTED]"#);
    }

    #[test]
    fn pull_66_unterminated_quote_runs_to_end() {
        assert_eq!(redact("password='abc def"), "password='[REDACTED]");
    }

    #[test]
    fn pull_66_brace_or_bracket_value_is_not_masked_whole() {
        assert_eq!(
            redact(r#"{"credentials":[{"token":"t-1"}]}"#),
            r#"{"credentials":[{"token":"[REDACTED]"}]}"#
        );
    }

    #[test]
    fn pull_66_scheme_word_belongs_to_an_equals_value() {
        assert_eq!(
            redact("authorization=Bearer abc def"),
            "authorization=[REDACTED] def"
        );
        assert_eq!(
            redact("authorization=Bearerabc def"),
            "authorization=[REDACTED] def"
        );
        assert_eq!(
            redact("authorization: Basic a b, c"),
            "authorization: [REDACTED], c"
        );
    }

    #[test]
    fn pull_66_empty_values_unchanged() {
        for input in [
            "password=&user=bob",
            "password=",
            "password: \nnext",
            "token= ;",
        ] {
            assert_eq!(redact(input), input);
        }
    }

    #[test]
    fn pull_66_colon_value_stops_at_line_break_but_not_tab() {
        assert_eq!(
            redact("password: a\tb\r\nuser: x"),
            "password: [REDACTED]\r\nuser: x"
        );
    }

    #[test]
    fn pull_66_unicode_lookalikes_never_match() {
        for input in [
            "paſſword=x",
            "api_\u{212A}ey=x",
            "authorızation: x",
            "AUTHORİZATION=x",
        ] {
            assert_eq!(redact(input), input);
        }
    }

    #[test]
    fn pull_66_scanning_resumes_after_the_value() {
        assert_eq!(
            redact("password=a,token=b;secret: c & pwd='d'"),
            "password=[REDACTED],token=[REDACTED];secret: [REDACTED]& pwd='[REDACTED]'"
        );
    }
}
