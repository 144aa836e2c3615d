//! Step 3 of redaction (PULL-67): the user information of URLs (`amqp://user:pw@host` becomes
//! `amqp://***@host`), including passwords that hold `@`, `/` or whitespace.
//!
//! The checks need look-around, so they are coded by hand. The "next `/`", "next `:`" and "last
//! `@`" questions are answered from tables built once per text, so a text full of schemes is still
//! scanned in linear time (PULL-69).

use super::{MASKED_USERINFO, is_space};

/// A scheme is a letter and at most 31 more scheme characters before the `:`.
const MAX_SCHEME: usize = 32;
/// How far past the first whitespace a password with whitespace is looked for.
const WINDOW: usize = 200;

/// Applies step 3 to the whole text.
pub(super) fn mask(text: &[char]) -> Vec<char> {
    let index = Index::new(text);
    let mut out = Vec::with_capacity(text.len());
    let mut copied = 0;
    // A scheme must start at or after `resume`.
    let mut resume = 0;
    let mut colon = 0;
    while colon + 1 < text.len() {
        if text[colon] != ':' || text[colon + 1] != '/' || !scheme_ends_at(text, colon, resume) {
            colon += 1;
            continue;
        }
        // `/{1,2}` is greedy: a second slash belongs to the scheme.
        let slashes = if text.get(colon + 2) == Some(&'/') {
            2
        } else {
            1
        };
        let rest = colon + 1 + slashes;
        match userinfo_end(text, &index, rest) {
            Some(at) => {
                out.extend_from_slice(&text[copied..rest]);
                out.extend(MASKED_USERINFO.chars());
                copied = at;
                resume = at + 1;
            }
            None => resume = rest,
        }
        colon = resume;
    }
    out.extend_from_slice(&text[copied..]);
    out
}

/// Whether `[A-Za-z][A-Za-z0-9+.-]{0,31}` can end just before the `:` at `colon`, starting at or
/// after `resume`: some letter must lie in the run of scheme characters within 32 places before
/// the colon. Where the scheme starts does not change the output.
fn scheme_ends_at(text: &[char], colon: usize, resume: usize) -> bool {
    let lowest = resume.max(colon.saturating_sub(MAX_SCHEME));
    text[lowest..colon]
        .iter()
        .rev()
        .take_while(|&&c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
        .any(|c| c.is_ascii_alphabetic())
}

/// Where the user information after the slashes (at `rest`, the start of `R`) ends: the position
/// of the `@` that stays after `***`, or `None` when nothing is user information.
fn userinfo_end(text: &[char], index: &Index, rest: usize) -> Option<usize> {
    // L: R up to its first whitespace.
    let l_end = index.next_space[rest];
    let first_path = index.next_path[rest];
    let first_colon = index.next_colon[rest];
    if let Some(at) = index.last_at_before(l_end).filter(|&at| at >= rest) {
        // U: L up to its last `@`.
        let userinfo = at > rest
            && (first_path >= at
                || (first_colon < first_path && !index.is_port(first_colon + 1, first_path)));
        return userinfo.then_some(at);
    }
    let host_and_password =
        first_colon < l_end && first_path >= l_end && !index.is_port(first_colon + 1, l_end);
    if !host_and_password {
        return None;
    }
    // The password may hold whitespace: look for its `@` in the window after L.
    let window_end = text.len().min(l_end + WINDOW);
    let cut = window_cut(text, l_end, window_end);
    (l_end..cut)
        .rev()
        .find(|&i| text[i] == '@' && i + 1 < cut && !is_space(text[i + 1]))
}

/// The window ends at its first CR, LF, `, `, `/`, `?` or `#` (both characters of `, ` inside the
/// window).
fn window_cut(text: &[char], start: usize, end: usize) -> usize {
    (start..end)
        .find(|&i| {
            matches!(text[i], '\r' | '\n' | '/' | '?' | '#')
                || (text[i] == ',' && i + 1 < end && text[i + 1] == ' ')
        })
        .unwrap_or(end)
}

/// For each position, where the next character of a kind is (the text's length when none is).
struct Index {
    next_space: Vec<usize>,
    /// The next `/`, `?` or `#`.
    next_path: Vec<usize>,
    next_colon: Vec<usize>,
    next_non_digit: Vec<usize>,
    /// `last_at[i]`: the last `@` before position `i`.
    last_at: Vec<Option<usize>>,
}

impl Index {
    fn new(text: &[char]) -> Self {
        let next = |wanted: fn(char) -> bool| {
            let mut table = vec![text.len(); text.len() + 1];
            for i in (0..text.len()).rev() {
                table[i] = if wanted(text[i]) { i } else { table[i + 1] };
            }
            table
        };
        let mut last_at = vec![None; text.len() + 1];
        for (i, &c) in text.iter().enumerate() {
            last_at[i + 1] = if c == '@' { Some(i) } else { last_at[i] };
        }
        Self {
            next_space: next(is_space),
            next_path: next(|c| matches!(c, '/' | '?' | '#')),
            next_colon: next(|c| c == ':'),
            next_non_digit: next(|c| !c.is_ascii_digit()),
            last_at,
        }
    }

    fn last_at_before(&self, end: usize) -> Option<usize> {
        self.last_at[end]
    }

    /// A port is one or more ASCII digits: the whole of `from..to`.
    fn is_port(&self, from: usize, to: usize) -> bool {
        from < to && self.next_non_digit[from] >= to
    }
}

#[cfg(test)]
mod tests {
    fn redact(text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        super::mask(&chars).into_iter().collect()
    }

    #[test]
    fn pull_67_single_slash_scheme_masked() {
        assert_eq!(
            redact("bad uri amqp:/user:pw@rabbit"),
            "bad uri amqp:/***@rabbit"
        );
    }

    #[test]
    fn pull_67_triple_slash_is_not_user_information() {
        assert_eq!(redact("file:///tmp/a:b@c"), "file:///tmp/a:b@c");
    }

    #[test]
    fn pull_67_last_at_ends_user_information() {
        assert_eq!(
            redact("amqp://user:pa@ss/word@broker:5672/vhost"),
            "amqp://***@broker:5672/vhost"
        );
    }

    #[test]
    fn pull_67_user_without_password_is_masked() {
        assert_eq!(
            redact("ssh://git@github.com/a.git"),
            "ssh://***@github.com/a.git"
        );
    }

    #[test]
    fn pull_67_port_before_path_keeps_at_in_path() {
        for input in [
            "https://api.example.com:8443/users/me@example.com",
            "https://api.example.com/users/me@example.com",
            "http://@host",
        ] {
            assert_eq!(redact(input), input);
        }
    }

    #[test]
    fn pull_67_password_of_digits_then_slash_is_taken_for_a_port() {
        // A known, accepted limit of the rule.
        assert_eq!(redact("amqp://svc:123/x@rabbit"), "amqp://svc:123/x@rabbit");
    }

    #[test]
    fn pull_67_whitespace_in_password_found_in_window() {
        assert_eq!(
            redact("amqp://user:a b@c d@rabbit:5672/vh"),
            "amqp://***@rabbit:5672/vh"
        );
    }

    #[test]
    fn pull_67_window_is_200_characters_after_l() {
        let inside = format!("amqp://guest:pw {}@host", "x".repeat(197));
        assert_eq!(redact(&inside), "amqp://***@host");
        // The `@` is the 200th character of the window, with its host outside it.
        let outside = format!("amqp://guest:pw {}@host", "x".repeat(198));
        assert_eq!(redact(&outside), outside);
    }

    #[test]
    fn pull_67_window_cut_at_comma_space_and_line_break() {
        for input in [
            "amqp://rabbit:vhost failed, ask ops@example.com",
            "amqp://rabbit:vhost failed\nask ops@example.com",
            "amqp://rabbit:vhost failed ask/ops@example.com",
        ] {
            assert_eq!(redact(input), input);
        }
    }

    #[test]
    fn pull_67_window_at_must_be_followed_by_non_whitespace() {
        let input = "amqp://guest:pass word@ rabbit";
        assert_eq!(redact(input), input);
    }

    #[test]
    fn pull_67_host_port_then_email_unchanged() {
        let input = "amqp://rabbit:5672 refused the connection for nate@example.com";
        assert_eq!(redact(input), input);
    }

    #[test]
    fn pull_67_scanning_resumes_after_masked_at() {
        assert_eq!(
            redact("a redis://:p@h1:6379 b redis://:q@h2 c"),
            "a redis://***@h1:6379 b redis://***@h2 c"
        );
    }

    #[test]
    fn pull_67_scheme_chars_and_length() {
        assert_eq!(
            redact("postgresql+psycopg2://app:pw@db/orders"),
            "postgresql+psycopg2://***@db/orders"
        );
        // Past 32 characters the scheme is its last 32; the output is the same.
        let long = format!("{}://u:p@h", "s".repeat(40));
        assert_eq!(redact(&long), format!("{}://***@h", "s".repeat(40)));
        assert_eq!(redact("1://u:p@h"), "1://u:p@h");
    }
}
