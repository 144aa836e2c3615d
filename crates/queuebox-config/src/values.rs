//! Value conversions of CFG-24: integers, milliseconds, durations, booleans, enumerations,
//! secrets, header names, JSONPath lists, templates, globs, names and SQL identifiers.

use std::time::Duration;

use queuebox_core::glob::TopicGlob;
use queuebox_core::jsonpath::JsonPath;
use queuebox_core::template::{Template, TemplateFields};
use queuebox_core::{Secret, SqlIdentifier};

use crate::diag::quote;
use crate::model::HeaderName;
use crate::node::{Kind, Node, ScalarKind};
use crate::placeholder::read_secret_file;
use crate::read::{Cx, index, list_items, scalar_text};
use crate::suggest::did_you_mean;

/// The allowed range of an integer key.
#[derive(Clone, Copy)]
pub(crate) enum Range {
    /// > 0.
    Positive,
    Between(i64, i64),
    AtLeast(i64),
}

const I32_MAX: i64 = i32::MAX as i64;

/// An integer (CFG-24): a YAML integer, or text that is exactly a whole number.
pub(crate) fn int(cx: &mut Cx<'_>, path: &str, node: &Node, range: Range) -> Option<i64> {
    let value: i128 = match &node.kind {
        Kind::Scalar {
            kind: ScalarKind::Int(v),
            ..
        } => {
            scalar_text(cx, path, node, "a whole number")?;
            *v
        }
        Kind::Scalar {
            kind: ScalarKind::Str | ScalarKind::Env,
            ..
        } => {
            let text = scalar_text(cx, path, node, "a whole number")?;
            match parse_whole(&text) {
                Some(v) => v,
                None => {
                    cx.error_at(
                        path,
                        node,
                        format!("expected a whole number, got {}", quote(&text)),
                    );
                    return None;
                }
            }
        }
        _ => {
            cx.error_at(
                path,
                node,
                format!("expected a whole number, {}", node.got()),
            );
            return None;
        }
    };
    let (min, max, rule) = match range {
        Range::Positive => (1, I32_MAX, "must be greater than 0".to_owned()),
        Range::Between(a, b) => (a, b, format!("must be between {a} and {b}")),
        Range::AtLeast(a) => (a, I32_MAX, format!("must be at least {a}")),
    };
    if value < i128::from(min) {
        cx.error_at(path, node, format!("{rule}, got {value}"));
        return None;
    }
    if value > i128::from(max) {
        let rule = match range {
            Range::Between(..) => rule,
            _ => format!("must be at most {max}"),
        };
        cx.error_at(path, node, format!("{rule}, got {value}"));
        return None;
    }
    i64::try_from(value).ok()
}

/// Digits with an optional leading `-`; nothing else (`1.5`, `1e3`, `1_000`, ` 1` are not).
fn parse_whole(text: &str) -> Option<i128> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || digits.len() > 30 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

pub(crate) fn uint(cx: &mut Cx<'_>, path: &str, node: &Node, range: Range) -> Option<u32> {
    int(cx, path, node, range).and_then(|v| u32::try_from(v).ok())
}

pub(crate) fn ms(cx: &mut Cx<'_>, path: &str, node: &Node, range: Range) -> Option<u64> {
    int(cx, path, node, range).and_then(|v| u64::try_from(v).ok())
}

/// `true` or `false`; from a variable in any letter case (CFG-15, CFG-24).
pub(crate) fn boolean(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<bool> {
    if let Kind::Scalar {
        kind: ScalarKind::Bool(b),
        ..
    } = node.kind
    {
        scalar_text(cx, path, node, "true or false")?;
        return Some(b);
    }
    let text = scalar_text(cx, path, node, "true or false")?;
    let from_env = matches!(
        node.kind,
        Kind::Scalar {
            kind: ScalarKind::Env,
            ..
        }
    );
    let word = if from_env {
        text.to_ascii_lowercase()
    } else {
        text.clone()
    };
    match word.as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => {
            cx.error_at(
                path,
                node,
                format!("expected true or false, got {}", quote(&text)),
            );
            None
        }
    }
}

/// A whole number and one unit of `s`, `m`, `h`, `d` (CFG-24).
pub(crate) fn duration(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Duration> {
    const EXPECTED: &str = "a duration such as 30s, 5m, 1h or 7d";
    let text = scalar_text(cx, path, node, EXPECTED)?;
    let parsed = text.char_indices().last().and_then(|(i, unit)| {
        let number = &text[..i];
        let factor = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
        if number.is_empty() || number.len() > 15 || !number.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        number.parse::<u64>().ok()?.checked_mul(factor)
    });
    match parsed {
        Some(secs) => Some(Duration::from_secs(secs)),
        None => {
            cx.error_at(
                path,
                node,
                format!("expected {EXPECTED}, got {}", quote(&text)),
            );
            None
        }
    }
}

/// Any scalar as text (CFG-24: numbers and booleans are taken as their text).
pub(crate) fn string(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<String> {
    scalar_text(cx, path, node, "a string")
}

/// A string that must not be blank.
pub(crate) fn non_blank(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<String> {
    let text = string(cx, path, node)?;
    if text.trim().is_empty() {
        cx.error_at(path, node, "must not be blank");
        return None;
    }
    Some(text)
}

/// One of `words` (exact spelling); `listed` are the words the message names.
pub(crate) fn enumeration<T: Copy>(
    cx: &mut Cx<'_>,
    path: &str,
    node: &Node,
    words: &[(&str, T)],
    listed: &[&str],
) -> Option<T> {
    let text = scalar_text(cx, path, node, "a string")?;
    if let Some((_, value)) = words.iter().find(|(w, _)| *w == text) {
        return Some(*value);
    }
    let message = format!(
        "must be one of {}, got {}{}",
        listed.join(", "),
        quote(&text),
        did_you_mean(&text, listed.iter().copied())
    );
    cx.error_at(path, node, message);
    None
}

/// A secret: the literal value or `file:<path>` (CFG-21). Its value is never quoted.
pub(crate) fn secret(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Secret> {
    let text = match &node.kind {
        Kind::Seq(_) | Kind::Map(_) => {
            cx.error_at(path, node, format!("expected a string, {}", node.got()));
            return None;
        }
        _ => scalar_text(cx, path, node, "a string")?,
    };
    match text.strip_prefix("file:") {
        Some(file) => match read_secret_file(file, cx.cwd) {
            Ok(content) => Some(Secret::new(content)),
            Err(reason) => {
                cx.error_at(path, node, format!("cannot read {file}: {reason}"));
                None
            }
        },
        None => Some(Secret::new(text)),
    }
}

/// A required secret must not be empty (CFG-24).
pub(crate) fn required_secret(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Secret> {
    let value = secret(cx, path, node)?;
    if value.is_empty() {
        cx.error_at(path, node, "must not be empty");
        return None;
    }
    Some(value)
}

/// An RFC 9110 token.
pub(crate) fn header_name(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<HeaderName> {
    let text = string(cx, path, node)?;
    match crate::model::parse_header_name(&text) {
        Ok(name) => Some(name),
        Err(message) => {
            cx.error_at(path, node, message);
            None
        }
    }
}

pub(crate) fn jsonpath(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<JsonPath> {
    let text = string(cx, path, node)?;
    match JsonPath::parse(&text) {
        Ok(p) => Some(p),
        Err(err) => {
            cx.error_at(path, node, err.to_string());
            None
        }
    }
}

/// A JSONPath or a non-empty list of them (CFG-24, CFG-114).
pub(crate) fn path_list(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Vec<JsonPath>> {
    match &node.kind {
        Kind::Seq(items) => {
            if items.is_empty() {
                cx.error_at(path, node, "must not be empty");
                return None;
            }
            let parsed: Vec<Option<JsonPath>> = items
                .iter()
                .enumerate()
                .map(|(i, item)| jsonpath(cx, &index(path, i), item))
                .collect();
            parsed.into_iter().collect()
        }
        Kind::Map(_) => {
            cx.error_at(path, node, format!("expected a string, {}", node.got()));
            None
        }
        _ => jsonpath(cx, path, node).map(|p| vec![p]),
    }
}

/// A list of strings (`topics`, `in`).
pub(crate) fn string_list(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Vec<String>> {
    let items = list_items(cx, path, node)?;
    let parsed: Vec<Option<String>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| string(cx, &index(path, i), item))
        .collect();
    parsed.into_iter().collect()
}

pub(crate) fn template(
    cx: &mut Cx<'_>,
    path: &str,
    node: &Node,
    fields: TemplateFields,
) -> Option<Template> {
    let text = string(cx, path, node)?;
    match Template::parse(&text, fields) {
        Ok(t) => Some(t),
        Err(err) => {
            cx.error_at(path, node, err.to_string());
            None
        }
    }
}

pub(crate) fn glob(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<TopicGlob> {
    let text = string(cx, path, node)?;
    match TopicGlob::parse(&text) {
        Ok(g) => Some(g),
        Err(err) => {
            cx.error_at(path, node, err.to_string());
            None
        }
    }
}

pub(crate) fn identifier(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<SqlIdentifier> {
    let text = string(cx, path, node)?;
    match SqlIdentifier::parse(&text) {
        Ok(id) => Some(id),
        Err(err) => {
            cx.error_at(path, node, format!("{err}, got {}", quote(&text)));
            None
        }
    }
}

/// A JSONata expression: not blank, and it compiles with the engine that runs it (CFG-114,
/// TRF-39), so `check` catches a bad one before a deploy.
pub(crate) fn expression(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<String> {
    let text = non_blank(cx, path, node)?;
    if let Err(reason) = queuebox_transform::check(&text) {
        cx.error_at(path, node, format!("does not compile: {reason}"));
        return None;
    }
    Some(text)
}

/// The name of a source or destination (CFG-24).
pub(crate) fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    first_ok
        && name.chars().count() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::parse_yaml;

    fn with_value<T>(yaml: &str, f: impl FnOnce(&mut Cx<'_>, &Node) -> T) -> (T, Vec<String>) {
        let root = parse_yaml(&format!("v: {yaml}\n")).unwrap();
        let Kind::Map(entries) = &root.kind else {
            panic!("map")
        };
        let env = vec![("PORT".to_owned(), "9000".to_owned())];
        let cwd = std::path::PathBuf::from(".");
        let mut cx = Cx::new(&env, &cwd);
        let out = f(&mut cx, &entries[0].1);
        let errors = cx.errors.iter().map(|d| d.message.clone()).collect();
        (out, errors)
    }

    #[test]
    fn cfg_24_integers_from_numbers_and_exact_text() {
        let int_of = |y: &str| with_value(y, |cx, n| int(cx, "v", n, Range::Positive));
        assert_eq!(int_of("100").0, Some(100));
        assert_eq!(int_of("\"100\"").0, Some(100));
        assert_eq!(int_of("${PORT:-8080}").0, Some(9000));
        for bad in ["1.5", "1e3", "1_000", "abc", "\" 1\""] {
            let (v, errors) = int_of(bad);
            assert_eq!(v, None, "{bad}");
            assert!(
                errors[0].starts_with("expected a whole number, got "),
                "{errors:?}"
            );
        }
        assert_eq!(int_of("1e3").1, ["expected a whole number, got \"1e3\""]);
        assert_eq!(int_of("0").1, ["must be greater than 0, got 0"]);
        assert_eq!(
            int_of("3000000000").1,
            ["must be at most 2147483647, got 3000000000"]
        );
        let (_, errors) = with_value("70000", |cx, n| int(cx, "v", n, Range::Between(1, 65535)));
        assert_eq!(errors, ["must be between 1 and 65535, got 70000"]);
    }

    #[test]
    fn cfg_24_durations() {
        let d = |y: &str| with_value(y, |cx, n| duration(cx, "v", n));
        assert_eq!(d("30s").0, Some(Duration::from_secs(30)));
        assert_eq!(d("5m").0, Some(Duration::from_secs(300)));
        assert_eq!(d("1h").0, Some(Duration::from_secs(3600)));
        assert_eq!(d("7d").0, Some(Duration::from_secs(604_800)));
        assert_eq!(d("0s").0, Some(Duration::ZERO));
        for bad in ["30", "-5s", "1.5h", "1h30m", "500ms", "5S", "s"] {
            let (v, errors) = d(bad);
            assert_eq!(v, None, "{bad}");
            assert_eq!(
                errors,
                [format!(
                    "expected a duration such as 30s, 5m, 1h or 7d, got \"{bad}\""
                )]
            );
        }
    }

    #[test]
    fn cfg_24_booleans_in_the_file() {
        let b = |y: &str| with_value(y, |cx, n| boolean(cx, "v", n));
        assert_eq!(b("true").0, Some(true));
        assert_eq!(b("\"false\"").0, Some(false));
        assert_eq!(b("yes").1, ["expected true or false, got \"yes\""]);
        assert_eq!(b("on").0, None);
        assert_eq!(b("1").0, None);
        assert_eq!(b("\"TRUE\"").0, None);
    }

    #[test]
    fn cfg_15_booleans_from_variables_in_any_case() {
        let env = Vec::new();
        let cwd = std::path::PathBuf::from(".");
        let mut cx = Cx::new(&env, &cwd);
        assert_eq!(
            boolean(&mut cx, "v", &Node::env("TRUE", "QUEUEBOX_X")),
            Some(true)
        );
        assert_eq!(
            boolean(&mut cx, "v", &Node::env("False", "QUEUEBOX_X")),
            Some(false)
        );
        assert_eq!(boolean(&mut cx, "v", &Node::env("yes", "QUEUEBOX_X")), None);
        // Placeholders are not expanded in variable values.
        assert_eq!(
            string(&mut cx, "v", &Node::env("${HOME}", "QUEUEBOX_X")).as_deref(),
            Some("${HOME}")
        );
    }

    #[test]
    fn cfg_24_enumeration_with_suggestion() {
        let words = [("topic", 1), ("direct", 2), ("fanout", 3)];
        let (v, errors) = with_value("Topic", |cx, n| {
            enumeration(cx, "v", n, &words, &["topic", "direct", "fanout"])
        });
        assert_eq!(v, None);
        assert_eq!(
            errors,
            ["must be one of topic, direct, fanout, got \"Topic\"; did you mean topic?"]
        );
    }

    #[test]
    fn cfg_24_strings_take_numbers_as_their_text() {
        assert_eq!(
            with_value("1.10", |cx, n| string(cx, "v", n)).0.as_deref(),
            Some("1.10")
        );
        assert_eq!(
            with_value("true", |cx, n| string(cx, "v", n)).0.as_deref(),
            Some("true")
        );
        assert_eq!(
            with_value("[a]", |cx, n| string(cx, "v", n)).1,
            ["expected a string, got a list"]
        );
    }

    #[test]
    fn cfg_114_path_list_positions_name_the_bad_entry() {
        let (v, errors) = with_value("[$.a, $..id]", |cx, n| {
            let r = path_list(cx, "sources.orders.aggregateIdPath", n);
            (r, cx.errors[0].path.clone())
        });
        assert_eq!(v.0, None);
        assert_eq!(v.1, "sources.orders.aggregateIdPath[1]");
        assert_eq!(errors, ["not a definite path: $..id"]);
        assert_eq!(
            with_value("[]", |cx, n| path_list(cx, "p", n)).1,
            ["must not be empty"]
        );
        assert_eq!(
            with_value("$.id", |cx, n| path_list(cx, "p", n))
                .0
                .map(|v| v.len()),
            Some(1)
        );
    }

    #[test]
    fn cfg_24_names() {
        assert!(valid_name("orders"));
        assert!(valid_name("billing_api"));
        assert!(valid_name("9-a"));
        assert!(!valid_name("_x"));
        assert!(!valid_name(""));
        assert!(!valid_name("a.b"));
        assert!(!valid_name(&"a".repeat(65)));
        assert!(valid_name(&"a".repeat(64)));
    }
}
