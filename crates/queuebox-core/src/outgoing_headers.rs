//! The headers a destination sends, shared by every destination kind: the names only QueueBox
//! sets (DST-8) and the merge of the four groups by their precedence (DST-9), with the row
//! headers a protocol cannot carry left out and reported (DST-10). Each connector adds its own
//! reserved names and its own rule of what it can carry.

use std::collections::HashSet;

use crate::Secret;

/// Reserved for every destination kind (DST-8): only QueueBox sets them.
pub const RESERVED_COMMON: &[&str] = &["x-message-id", "x-topic", "x-attempt", "x-message-key"];

/// Whether `name` is reserved (any letter case): one of [`RESERVED_COMMON`] or of the
/// connector's own `extra` names.
pub fn is_reserved(name: &str, extra: &[&str]) -> bool {
    RESERVED_COMMON
        .iter()
        .chain(extra)
        .any(|reserved| reserved.eq_ignore_ascii_case(name))
}

/// The four groups of DST-9, highest first.
pub struct Groups<'a> {
    /// Set by QueueBox from the row; always wins.
    pub standard: Vec<(String, String)>,
    pub row: &'a [(String, String)],
    pub auth: Option<(&'a str, &'a str)>,
    pub statics: &'a [(String, Secret)],
}

/// The headers to send, in order, each name once; plus the row headers that were left out.
#[derive(Debug, Default, PartialEq)]
pub struct Assembled {
    pub headers: Vec<(String, String)>,
    pub reserved_dropped: Vec<String>,
    pub uncarriable_dropped: Vec<String>,
}

impl Assembled {
    pub fn contains(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }
}

/// Merges the groups by DST-9: per name (any letter case) the highest group wins and its
/// spelling is kept. Row headers with a reserved name, or that the protocol cannot carry
/// (`can_carry`), are dropped and reported. Static and auth headers were checked at start.
pub fn assemble(
    groups: Groups<'_>,
    reserved_extra: &[&str],
    can_carry: impl Fn(&str, &str) -> bool,
) -> Assembled {
    let mut out = Assembled::default();
    let mut seen: HashSet<String> = HashSet::new();
    let mut push = |out: &mut Assembled, name: &str, value: &str| {
        if seen.insert(name.to_ascii_lowercase()) {
            out.headers.push((name.to_owned(), value.to_owned()));
        }
    };
    for (name, value) in &groups.standard {
        push(&mut out, name, value);
    }
    for (name, value) in groups.row {
        if is_reserved(name, reserved_extra) {
            out.reserved_dropped.push(name.clone());
        } else if !can_carry(name, value) {
            out.uncarriable_dropped.push(name.clone());
        } else {
            push(&mut out, name, value);
        }
    }
    if let Some((name, value)) = groups.auth {
        push(&mut out, name, value);
    }
    for (name, value) in groups.statics {
        push(&mut out, name, value.expose());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dst_9_standard_wins_then_row_then_static_each_name_once() {
        let row = vec![
            ("X-Topic".to_owned(), "forged".to_owned()),
            ("x-a".to_owned(), "row".to_owned()),
        ];
        let statics = vec![
            ("X-A".to_owned(), Secret::new("static")),
            ("x-b".to_owned(), Secret::new("b")),
        ];
        let assembled = assemble(
            Groups {
                standard: vec![("x-topic".to_owned(), "orders".to_owned())],
                row: &row,
                auth: None,
                statics: &statics,
            },
            &[],
            |_, _| true,
        );
        let expected: Vec<(String, String)> = [("x-topic", "orders"), ("x-a", "row"), ("x-b", "b")]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(assembled.headers, expected);
        assert_eq!(assembled.reserved_dropped, vec!["X-Topic"]);
    }
}
