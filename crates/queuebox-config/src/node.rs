//! The untyped configuration tree: YAML parsed into ordered nodes that keep every mapping entry
//! (so duplicates can be reported) and each scalar's original text, plus which variable, if
//! any, supplied a node.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{DuplicateKeyPolicy, MergeKeyPolicy, MessageFormatter, NonFiniteFloatPolicy};

/// How a scalar was written; it decides which conversions apply (CFG-24, CFG-15).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ScalarKind {
    /// A YAML string: placeholders are expanded (CFG-19).
    Str,
    /// A YAML integer, with its value.
    Int(i128),
    /// A YAML float: never a whole number for QueueBox.
    Float,
    /// A YAML boolean.
    Bool(bool),
    /// The text of an environment variable (CFG-15): no placeholders, booleans in any case.
    Env,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    Null,
    Scalar {
        text: String,
        kind: ScalarKind,
    },
    Seq(Vec<Node>),
    /// Entries in file order, duplicates included.
    Map(Vec<(String, Node)>),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub kind: Kind,
    /// The variable that supplied this node (CFG-18).
    pub var: Option<String>,
}

impl Node {
    pub fn new(kind: Kind) -> Self {
        Self { kind, var: None }
    }

    pub fn env(text: &str, var: &str) -> Self {
        Self {
            kind: Kind::Scalar {
                text: text.to_owned(),
                kind: ScalarKind::Env,
            },
            var: Some(var.to_owned()),
        }
    }

    pub fn empty_map() -> Self {
        Self::new(Kind::Map(Vec::new()))
    }

    /// `got "<value>"` / `got a list` / `got a section` for wrong-type messages.
    pub fn got(&self) -> String {
        match &self.kind {
            Kind::Null => "got nothing".to_owned(),
            Kind::Scalar { text, .. } => format!("got {}", crate::diag::quote(text)),
            Kind::Seq(_) => "got a list".to_owned(),
            Kind::Map(_) => "got a section".to_owned(),
        }
    }
}

/// Why a text is not one YAML document holding a mapping (CFG-5).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum YamlError {
    Syntax {
        line: u64,
        column: u64,
        detail: String,
    },
    Documents(usize),
    NotMapping,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax {
                line,
                column,
                detail,
            } => write!(
                f,
                "YAML syntax error at line {line}, column {column}: {detail}"
            ),
            Self::Documents(n) => write!(f, "one YAML document expected, found {n}"),
            Self::NotMapping => f.write_str("the top level must be a mapping"),
        }
    }
}

/// Parses the file text. An empty file is an empty mapping; `<<` stays an ordinary key so the
/// reader reports it as unknown; duplicate keys pass through so the reader can name them.
pub(crate) fn parse_yaml(text: &str) -> Result<Node, YamlError> {
    let options = serde_saphyr::options! {
        duplicate_keys: DuplicateKeyPolicy::PassThrough,
        merge_keys: MergeKeyPolicy::AsOrdinary,
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        non_finite_float_policy: NonFiniteFloatPolicy::AsString,
    };
    let docs: Vec<serde_saphyr::Spanned<Raw>> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(|err| {
            let (line, column) = err
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((0, 0));
            let detail = serde_saphyr::UserMessageFormatter
                .format_message(&err)
                .replace(['\n', '\r'], " ");
            YamlError::Syntax {
                line,
                column,
                detail,
            }
        })?;
    match docs.len() {
        0 => Ok(Node::empty_map()),
        1 => {
            let root = docs
                .into_iter()
                .next()
                .map(|d| convert(d, text))
                .unwrap_or_else(Node::empty_map);
            match root.kind {
                Kind::Map(_) => Ok(root),
                Kind::Null => Ok(Node::empty_map()),
                _ => Err(YamlError::NotMapping),
            }
        }
        n => Err(YamlError::Documents(n)),
    }
}

/// The tree as serde-saphyr delivers it, with the span of every node.
enum Raw {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<serde_saphyr::Spanned<Raw>>),
    Map(Vec<(String, serde_saphyr::Spanned<Raw>)>),
}

/// Converts the raw tree, taking the original spelling of numbers and booleans from the source
/// text so messages and string keys see `1e3` or `0x1F` as written.
fn convert(raw: serde_saphyr::Spanned<Raw>, source: &str) -> Node {
    let original = || {
        let span = raw.defined.span();
        let start = usize::try_from(span.byte_offset()?).ok()?;
        let len = usize::try_from(span.byte_len()?).ok()?;
        source
            .get(start..start.checked_add(len)?)
            .map(str::to_owned)
    };
    let kind = match raw.value {
        Raw::Null => Kind::Null,
        Raw::Bool(b) => Kind::Scalar {
            text: original().unwrap_or_else(|| b.to_string()),
            kind: ScalarKind::Bool(b),
        },
        Raw::Int(i) => Kind::Scalar {
            text: original().unwrap_or_else(|| i.to_string()),
            kind: ScalarKind::Int(i),
        },
        Raw::Float(f) => Kind::Scalar {
            text: original().unwrap_or_else(|| format!("{f:?}")),
            kind: ScalarKind::Float,
        },
        Raw::Str(s) => Kind::Scalar {
            text: s,
            kind: ScalarKind::Str,
        },
        Raw::Seq(items) => Kind::Seq(items.into_iter().map(|i| convert(i, source)).collect()),
        Raw::Map(entries) => Kind::Map(
            entries
                .into_iter()
                .map(|(k, v)| (k, convert(v, source)))
                .collect(),
        ),
    };
    Node::new(kind)
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        Raw::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(i128::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::Int(i128::from(v)))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Raw, E> {
        Ok(i128::try_from(v).map_or(Raw::Float(v as f64), Raw::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Raw::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Raw::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(node: &Node) -> &[(String, Node)] {
        match &node.kind {
            Kind::Map(e) => e,
            _ => panic!("not a map"),
        }
    }

    fn text_of(node: &Node) -> &str {
        match &node.kind {
            Kind::Scalar { text, .. } => text,
            _ => panic!("not a scalar"),
        }
    }

    #[test]
    fn cfg_5_scalars_keep_their_spelling() {
        let root = parse_yaml("a: 1e3\nb: 0x1F\nc: 1_000\nd: yes\ne: 1.50\nf: ~\ng:\n").unwrap();
        let e = entries(&root);
        assert_eq!(text_of(&e[0].1), "1e3");
        assert!(matches!(
            e[1].1.kind,
            Kind::Scalar {
                kind: ScalarKind::Int(31),
                ..
            }
        ));
        assert_eq!(text_of(&e[2].1), "1_000");
        assert_eq!(text_of(&e[3].1), "yes");
        assert_eq!(text_of(&e[4].1), "1.50");
        assert_eq!(e[5].1.kind, Kind::Null);
        assert_eq!(e[6].1.kind, Kind::Null);
    }

    #[test]
    fn cfg_5_duplicates_and_merge_keys_are_kept_as_entries() {
        let root = parse_yaml("a: 1\na: 2\n<<: {b: 1}\n").unwrap();
        let keys: Vec<&str> = entries(&root).iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "a", "<<"]);
    }

    #[test]
    fn cfg_5_aliases_are_expanded() {
        let root = parse_yaml("x: &a {p: 1}\ny: *a\n").unwrap();
        let e = entries(&root);
        assert_eq!(e[0].1, e[1].1);
    }

    #[test]
    fn cfg_5_syntax_error_has_line_and_column() {
        let err = parse_yaml("a: 1\n  b: 2\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("YAML syntax error at line 2, column 4: "),
            "{text}"
        );
    }

    #[test]
    fn cfg_5_several_documents_and_non_mappings() {
        assert_eq!(
            parse_yaml("a: 1\n---\nb: 2\n---\nc: 3\n")
                .unwrap_err()
                .to_string(),
            "one YAML document expected, found 3"
        );
        assert_eq!(parse_yaml("- 1\n").unwrap_err(), YamlError::NotMapping);
        assert_eq!(parse_yaml("").unwrap(), Node::empty_map());
        assert_eq!(parse_yaml("# only a comment\n").unwrap(), Node::empty_map());
    }
}
