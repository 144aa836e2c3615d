//! TRF-42: the golden cases of `tests/golden/cases.json` (expression, input, variables, expected
//! output or failure) pin the behaviour of every JSONata construct the documentation and
//! examples use, so that an engine change that alters a result fails here. Every expression
//! printed in docs/ is one of the cases.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use queuebox_transform::{Expression, Limits, Pool, Variables};
use serde_json::{Map, Value};

fn cases() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/cases.json");
    serde_json::from_str::<Value>(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn variables(spec: Option<&Value>) -> Variables {
    let Some(spec) = spec else {
        return Variables::none();
    };
    let text = |key: &str| spec[key].as_str().unwrap_or_default().to_owned();
    match spec["stage"].as_str() {
        Some("source") => Variables::source_stage(
            &text("source"),
            spec["headers"]
                .as_object()
                .cloned()
                .unwrap_or_else(Map::new),
            &text("idempotencyKey"),
            spec["eventType"].as_str(),
        ),
        Some("outbox") => Variables::outbox_stage(
            &text("messageId"),
            &text("topic"),
            spec["attempt"].as_u64().unwrap_or(0) as u32,
        ),
        other => panic!("unknown stage {other:?}"),
    }
}

#[tokio::test]
async fn trf_42_every_golden_case_gives_its_expected_result() {
    let pool = Pool::new(2).unwrap();
    let limits = Limits {
        timeout: Duration::from_millis(2_000),
        max_depth: 100,
    };
    let mut failures = Vec::new();
    let all = cases();
    for case in &all {
        let name = case["name"].as_str().unwrap();
        let expression = Expression::compile(case["expression"].as_str().unwrap(), limits)
            .unwrap_or_else(|e| panic!("{name}: does not compile: {e}"));
        let got = pool
            .evaluate(
                &expression,
                case["input"].clone(),
                variables(case.get("variables")),
            )
            .await;
        let expected = &case["expected"];
        let ok = match (&got, expected.get("failure")) {
            (Err(failure), Some(Value::String(reason))) => &failure.reason() == reason,
            (Ok(value), None) => numbers_equal(value, expected),
            _ => false,
        };
        if !ok {
            failures.push(format!("{name}: expected {expected}, got {got:?}"));
        }
    }
    assert!(all.len() >= 40, "the golden file lost cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// JSON equality where `7` and `7.0` are the same number (JSONata has one number type).
fn numbers_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| numbers_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| numbers_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Whitespace never changes a golden match: runs collapse to one space, and none is kept just
/// inside brackets, so a block scalar in YAML matches its one-line case.
fn normalize(expression: &str) -> String {
    let collapsed = expression.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    let chars: Vec<char> = collapsed.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1).copied();
            if matches!(prev, Some('{' | '[' | '(')) || matches!(next, Some('}' | ']' | ')')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The expressions of `expression:` and `*Expression:` keys in the YAML blocks of `text`
/// (single-quoted, double-quoted, plain or `|` block scalars).
fn doc_expressions(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let key_end = trimmed
            .find(": ")
            .or_else(|| trimmed.strip_suffix(':').map(|k| k.len()));
        let is_key = key_end.is_some_and(|end| {
            let key = &trimmed[..end];
            key == "expression" || (key.ends_with("Expression") && !key.contains(' '))
        });
        if !is_key {
            i += 1;
            continue;
        }
        let end = key_end.unwrap();
        let value = trimmed[end + 1..].trim();
        if value == "|" || value == ">" || value == "|-" || value == ">-" {
            let indent = line.len() - trimmed.len();
            let mut block = Vec::new();
            i += 1;
            while i < lines.len() {
                let l = lines[i];
                if !l.trim().is_empty() && l.len() - l.trim_start().len() <= indent {
                    break;
                }
                block.push(l.trim());
                i += 1;
            }
            found.push(block.join("\n"));
            continue;
        }
        let unquoted = if let Some(v) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\''))
        {
            v.replace("''", "'")
        } else if let Some(v) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            v.replace("\\\"", "\"")
        } else {
            value.to_owned()
        };
        found.push(unquoted);
        i += 1;
    }
    found
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn trf_42_every_expression_printed_in_the_docs_is_a_golden_case() {
    let golden: BTreeSet<String> = cases()
        .iter()
        .map(|c| normalize(c["expression"].as_str().unwrap()))
        .collect();
    let mut checked = 0;
    let mut missing = Vec::new();
    let docs = repo_root().join("docs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.push(repo_root().join("README.md"));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for expression in doc_expressions(&text) {
            // A deliberately broken example (a `# invalid` block) is not a case; every other
            // block is loaded by docs_examples.rs, whose loader compiles its expressions.
            if queuebox_transform::check(&expression).is_err() {
                continue;
            }
            checked += 1;
            if !golden.contains(&normalize(&expression)) {
                missing.push(format!("{}: {expression}", file.display()));
            }
        }
    }
    assert!(checked >= 5, "found only {checked} expressions in docs/");
    assert!(
        missing.is_empty(),
        "not golden cases:\n{}",
        missing.join("\n")
    );
}

#[test]
fn golden_normalize_ignores_layout_only() {
    assert_eq!(
        normalize("{\n  \"a\": x,\n  \"b\": y\n}"),
        "{\"a\": x, \"b\": y}"
    );
    assert_ne!(normalize("a + b"), normalize("a+b"));
    let yaml = "x:\n  expression: |\n    {\n      \"a\": 1\n    }\n  other: 1\n  idempotencyKeyExpression: 'a & ''b'''\n";
    assert_eq!(
        doc_expressions(yaml),
        vec!["{\n\"a\": 1\n}".to_owned(), "a & 'b'".to_owned()]
    );
}

/// Whether an expression uses a construct.
type Uses = fn(&str) -> bool;

/// TRF-2: the golden tests pin the behaviour of every construct the documentation and examples
/// use, the list of TRF-42: each construct has at least one case with an expected JSON result
/// (not a failure), so an engine change that alters what it gives fails
/// `trf_42_every_golden_case_gives_its_expected_result`.
#[test]
fn trf_2_every_construct_of_trf_42_is_pinned_by_a_golden_result() {
    let pinned: Vec<String> = cases()
        .iter()
        .filter(|c| c["expected"].get("failure").is_none())
        .map(|c| c["expression"].as_str().unwrap().to_owned())
        .collect();
    let constructs: &[(&str, Uses)] = &[
        ("paths", |e| e.contains('.') && !e.contains('$')),
        ("predicates", |e| {
            e.contains("[") && (e.contains('>') || e.contains('<') || e.contains('='))
        }),
        ("object constructor", |e| e.starts_with('{')),
        ("array constructor", |e| e.starts_with('[')),
        ("$sum", |e| e.contains("$sum(")),
        ("$count", |e| e.contains("$count(")),
        ("$map", |e| e.contains("$map(")),
        ("$filter", |e| e.contains("$filter(")),
        ("$merge", |e| e.contains("$merge(")),
        ("$lookup", |e| e.contains("$lookup(")),
        ("$split", |e| e.contains("$split(")),
        ("$string", |e| e.contains("$string(")),
        ("$uppercase", |e| e.contains("$uppercase(")),
        ("$now", |e| e.contains("$now()")),
        ("the ternary operator", |e| {
            e.contains(" ? ") && e.contains(" : ")
        }),
        ("the ~> chain", |e| e.contains("~> $")),
        ("the transform operator", |e| e.contains("~> |")),
        ("lambdas", |e| e.contains("function(")),
        ("variable binding", |e| e.contains(":=")),
    ];
    let unpinned: Vec<&str> = constructs
        .iter()
        .filter(|(_, uses)| !pinned.iter().any(|e| uses(e)))
        .map(|(name, _)| *name)
        .collect();
    assert!(unpinned.is_empty(), "no golden result pins: {unpinned:?}");
}
