//! Step 4 of redaction (PULL-68): credentials after a bare authorization scheme word, as in
//! `sent Bearer eyJ...`, when no `Authorization:` key precedes them.
//!
//! The rule is `\b(basic|bearer|digest|negotiate|token)([ \t]+)([A-Za-z0-9._~+/-]+=*)`, masked
//! only when the third group looks like a credential, so prose such as `the token bucket is
//! empty` stays whole.

use super::{REDACTED, is_word, scheme_word_at, skip_blanks};

/// From this length on, the third group is a credential even without a digit or `=`.
const CREDENTIAL_LENGTH: usize = 16;

/// Applies step 4 to the whole text.
pub(super) fn mask(text: &[char]) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len());
    let mut copied = 0;
    let mut at = 0;
    while at < text.len() {
        let Some((start, end)) = credential_after_scheme(text, at) else {
            at += 1;
            continue;
        };
        if looks_like_credential(&text[start..end]) {
            out.extend_from_slice(&text[copied..start]);
            out.extend(REDACTED.chars());
            copied = end;
            at = end;
        } else {
            // The third group may itself be a scheme word (`token Bearer abc1`).
            at = start;
        }
    }
    out.extend_from_slice(&text[copied..]);
    out
}

/// Matches the rule at `at`; returns the extent of the third group.
fn credential_after_scheme(text: &[char], at: usize) -> Option<(usize, usize)> {
    if at > 0 && is_word(text[at - 1]) {
        return None;
    }
    let word_end = at + scheme_word_at(text, at)?;
    let start = skip_blanks(text, word_end);
    if start == word_end {
        return None;
    }
    let mut end = start;
    while text.get(end).is_some_and(|&c| is_token_char(c)) {
        end += 1;
    }
    if end == start {
        return None;
    }
    while text.get(end) == Some(&'=') {
        end += 1;
    }
    Some((start, end))
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '+' | '/' | '-')
}

/// 16 characters or more, or an ASCII digit or `=` anywhere.
fn looks_like_credential(group: &[char]) -> bool {
    group.len() >= CREDENTIAL_LENGTH || group.iter().any(|&c| c.is_ascii_digit() || c == '=')
}

#[cfg(test)]
mod tests {
    fn redact(text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        super::mask(&chars).into_iter().collect()
    }

    #[test]
    fn pull_68_bare_bearer_masked() {
        assert_eq!(
            redact("sent Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2ln now"),
            "sent Bearer [REDACTED] now"
        );
    }

    #[test]
    fn pull_68_prose_words_stay() {
        for input in [
            "the token bucket is empty",
            "Digest authentication failed",
            "Token expired, please sign in",
            "basic auth disabled",
        ] {
            assert_eq!(redact(input), input);
        }
    }

    #[test]
    fn pull_68_sixteen_characters_is_a_credential_fifteen_is_not() {
        assert_eq!(redact("Bearer abcdefghijklmnop"), "Bearer [REDACTED]");
        assert_eq!(redact("Bearer abcdefghijklmno"), "Bearer abcdefghijklmno");
    }

    #[test]
    fn pull_68_digit_or_padding_is_a_credential() {
        assert_eq!(redact("Basic dXNlcg=="), "Basic [REDACTED]");
        assert_eq!(redact("NEGOTIATE a1"), "NEGOTIATE [REDACTED]");
    }

    #[test]
    fn pull_68_scan_resumes_at_third_group_when_not_masked() {
        assert_eq!(redact("token Bearer abc123"), "token Bearer [REDACTED]");
    }

    #[test]
    fn pull_68_scheme_word_needs_word_boundary_and_blank() {
        for input in [
            "my_token abc123",
            "xbearer abc123",
            "tokens abc123",
            "Bearer\nabc123",
        ] {
            assert_eq!(redact(input), input);
        }
        assert_eq!(redact("api-token abc123"), "api-token [REDACTED]");
    }

    #[test]
    fn pull_68_stops_at_characters_outside_the_token_alphabet() {
        assert_eq!(
            redact("image digest sha256:9f86d081"),
            "image digest [REDACTED]:9f86d081"
        );
    }
}
