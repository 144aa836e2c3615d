//! Topic globs (config.md CFG-57): `*` and `**` patterns matched against a whole topic.

use std::fmt;

/// A validated topic glob. `*` matches one or more characters other than `.`, `**` one or more
/// characters of any kind; every other character matches itself. The whole topic must match.
#[derive(Clone, PartialEq, Eq)]
pub struct TopicGlob {
    text: String,
    tokens: Vec<Token>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Char(char),
    /// `*`: one or more characters other than `.`.
    Star,
    /// `**`: one or more characters of any kind.
    DoubleStar,
}

/// Why a text is not a topic glob.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("must not be empty")]
    Empty,
    #[error("must not contain ***; use * for one segment or ** for any number")]
    TripleStar,
}

impl TopicGlob {
    pub fn parse(text: &str) -> Result<Self, GlobError> {
        if text.is_empty() {
            return Err(GlobError::Empty);
        }
        if text.contains("***") {
            return Err(GlobError::TripleStar);
        }
        let mut tokens = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '*' {
                if chars.peek() == Some(&'*') {
                    chars.next();
                    tokens.push(Token::DoubleStar);
                } else {
                    tokens.push(Token::Star);
                }
            } else {
                tokens.push(Token::Char(c));
            }
        }
        Ok(Self {
            text: text.to_owned(),
            tokens,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the glob matches the whole of `topic`. Dynamic programming over (token, position)
    /// keeps this linear in the product of the lengths, so no pattern can make it explode.
    pub fn matches(&self, topic: &str) -> bool {
        let chars: Vec<char> = topic.chars().collect();
        let n = chars.len();
        // reach[j]: the tokens seen so far can match exactly chars[..j].
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        for token in &self.tokens {
            let mut next = vec![false; n + 1];
            match token {
                Token::Char(expected) => {
                    for (j, c) in chars.iter().enumerate() {
                        if reach[j] && c == expected {
                            next[j + 1] = true;
                        }
                    }
                }
                Token::Star => {
                    // A star that starts at a reachable position covers every later character
                    // of the same dot-free run.
                    let mut open = false;
                    for (j, c) in chars.iter().enumerate() {
                        if *c == '.' {
                            open = false;
                            continue;
                        }
                        open |= reach[j];
                        if open {
                            next[j + 1] = true;
                        }
                    }
                }
                Token::DoubleStar => {
                    if let Some(first) = reach.iter().position(|r| *r) {
                        for slot in next.iter_mut().skip(first + 1) {
                            *slot = true;
                        }
                    }
                }
            }
            reach = next;
        }
        reach[n]
    }
}

impl fmt::Display for TopicGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for TopicGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TopicGlob({:?})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(text: &str) -> TopicGlob {
        TopicGlob::parse(text).expect("valid glob")
    }

    #[test]
    fn cfg_57_single_star_matches_one_segment() {
        let g = glob("order.*");
        assert!(g.matches("order.created"));
        assert!(!g.matches("order"));
        assert!(!g.matches("order."));
        assert!(!g.matches("order.item.added"));
    }

    #[test]
    fn cfg_57_double_star_matches_across_dots() {
        let g = glob("order.**");
        assert!(g.matches("order.created"));
        assert!(g.matches("order.item.added"));
        assert!(!g.matches("order"));
        assert!(!g.matches("order."));
    }

    #[test]
    fn cfg_57_double_star_alone_matches_every_non_empty_topic() {
        let g = glob("**");
        assert!(g.matches("a"));
        assert!(g.matches("invoice.paid.v2"));
        assert!(!g.matches(""));
    }

    #[test]
    fn cfg_57_literal_characters_match_themselves_whole_topic() {
        let g = glob("shipment.updated");
        assert!(g.matches("shipment.updated"));
        assert!(!g.matches("shipment.updated.v2"));
        assert!(!g.matches("xshipment.updated"));
        let g = glob("invoice.**");
        assert!(g.matches("invoice.paid"));
        assert!(!g.matches("invoices.paid"));
        let g = glob("*.created");
        assert!(g.matches("order.created"));
        assert!(!g.matches("a.b.created"));
    }

    #[test]
    fn cfg_57_triple_star_and_empty_are_errors() {
        assert_eq!(TopicGlob::parse(""), Err(GlobError::Empty));
        assert_eq!(TopicGlob::parse("a.***"), Err(GlobError::TripleStar));
        assert_eq!(TopicGlob::parse("****"), Err(GlobError::TripleStar));
    }

    #[test]
    fn cfg_57_many_stars_stay_fast() {
        let g = glob("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b");
        assert!(!g.matches(&"a".repeat(2000)));
    }
}
