//! Reading a source's `filter` (CFG-78) and checking HTTP paths (CFG-47, CFG-72).

use crate::model_source::{Filter, FilterRule, FilterTest};
use crate::node::Node;
use crate::read::{Cx, Sec, index, list_items};
use crate::values as v;

const TESTS: &str = "equals, in, matches, exists";

/// `filter.require` and `filter.exclude` at `path`.
pub(crate) fn read_filter(cx: &mut Cx<'_>, path: &str, node: Option<&Node>) -> Filter {
    let mut s = Sec::open(cx, path, node);
    let require_node = s.node("require");
    let require = read_rules(cx, &s.at("require"), require_node);
    let exclude_node = s.node("exclude");
    let exclude = read_rules(cx, &s.at("exclude"), exclude_node);
    s.finish(cx, &["require", "exclude"]);
    Filter { require, exclude }
}

fn read_rules(cx: &mut Cx<'_>, path: &str, node: Option<&Node>) -> Vec<FilterRule> {
    let Some(items) = node.and_then(|n| list_items(cx, path, n)) else {
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| read_rule(cx, &index(path, i), item))
        .collect()
}

fn read_rule(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<FilterRule> {
    let mut s = Sec::open(cx, path, Some(node));
    let header = match s.node("header") {
        Some(n) => v::header_name(cx, &s.at("header"), n),
        None => {
            cx.error(&s.at("header"), "required");
            None
        }
    };
    let present: Vec<&str> = ["equals", "in", "matches", "exists"]
        .into_iter()
        .filter(|k| s.has(k))
        .collect();
    let equals = s
        .node("equals")
        .and_then(|n| v::string(cx, &s.at("equals"), n));
    let within = s.node("in").and_then(|n| {
        let p = s.at("in");
        let values = v::string_list(cx, &p, n)?;
        if values.is_empty() {
            cx.error_at(&p, n, "must not be empty");
            return None;
        }
        Some(values)
    });
    let matches = s.node("matches").and_then(|n| {
        let p = s.at("matches");
        let text = v::string(cx, &p, n)?;
        if text.trim().is_empty() {
            cx.error_at(&p, n, "must not be blank");
            return None;
        }
        v::glob(cx, &p, n)
    });
    let exists = s.node("exists").and_then(|n| {
        let p = s.at("exists");
        let value = v::boolean(cx, &p, n)?;
        if !value {
            cx.error_at(
                &p,
                n,
                "must be true; to drop messages that carry the header, use an exclude rule",
            );
            return None;
        }
        Some(())
    });
    s.finish(cx, &["header", "equals", "in", "matches", "exists"]);
    match present.len() {
        0 => {
            cx.error(path, format!("has no test; set exactly one of {TESTS}"));
            return None;
        }
        1 => {}
        n => {
            cx.error(
                path,
                format!(
                    "has {n} tests ({}); set exactly one of {TESTS}",
                    present.join(", ")
                ),
            );
            return None;
        }
    }
    let test = if let Some(value) = equals {
        FilterTest::Equals(value)
    } else if let Some(values) = within {
        FilterTest::In(values)
    } else if let Some(glob) = matches {
        FilterTest::Matches(glob)
    } else {
        exists.map(|()| FilterTest::Exists)?
    };
    Some(FilterRule {
        header: header?,
        test,
    })
}

/// A source `path` (CFG-72): starts with `/`, segments of letters, digits, `-`, `_`, `.` and
/// `~`, no `.` or `..` segment, no `/` at the end.
pub(crate) fn check_source_path(text: &str) -> Result<(), String> {
    let Some(rest) = text.strip_prefix('/') else {
        return Err(format!(
            "must start with /, got {}",
            crate::diag::quote(text)
        ));
    };
    if rest.is_empty() || rest.ends_with('/') {
        return Err(format!(
            "must not end with /, got {}",
            crate::diag::quote(text)
        ));
    }
    for segment in rest.split('/') {
        if segment.is_empty() {
            return Err(format!(
                "must not contain an empty segment, got {}",
                crate::diag::quote(text)
            ));
        }
        if segment == "." || segment == ".." {
            return Err("must not contain a . or .. segment".to_owned());
        }
        if !segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
        {
            return Err(format!(
                "may hold only letters, digits, -, _, . and ~ between slashes, got {}",
                crate::diag::quote(text)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_72_source_paths() {
        assert!(check_source_path("/orders").is_ok());
        assert!(check_source_path("/a/b-c_d.e~f").is_ok());
        assert!(check_source_path("orders").is_err());
        assert!(check_source_path("/orders/").is_err());
        assert!(check_source_path("/").is_err());
        assert!(check_source_path("/a//b").is_err());
        assert_eq!(
            check_source_path("/a/../b").unwrap_err(),
            "must not contain a . or .. segment"
        );
        assert!(check_source_path("/a b").is_err());
    }
}
