//! Reads the cases of JSONata's test suite (`test-suite/TESTSUITE.md` gives the format).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Map, Value};

/// One case: `<group>/<file>` (with `#<i>` for a file that holds a list of cases).
#[derive(Debug, Clone)]
pub struct Case {
    pub group: String,
    pub id: String,
    pub expr: String,
    /// `None` is JSONata's *undefined* input.
    pub input: Option<Value>,
    pub bindings: Map<String, Value>,
    pub timelimit: Option<u64>,
    pub depth: Option<usize>,
    pub unordered: bool,
    pub expected: Expected,
}

#[derive(Debug, Clone)]
pub enum Expected {
    Value(Value),
    Undefined,
    /// The JSONata error code, such as `T2001`.
    Error(String),
    /// The case file is not JSON that serde_json reads (a lone UTF-16 surrogate escape such
    /// as `"\ud800"`, which JavaScript accepts): counted as failed for every engine, because a
    /// QueueBox payload is read by serde_json too.
    Unreadable(String),
}

pub fn load(dir: &Path) -> anyhow::Result<Vec<Case>> {
    let mut datasets: HashMap<String, Value> = HashMap::new();
    for entry in std::fs::read_dir(dir.join("datasets"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            datasets.insert(name, read_json(&path)?);
        }
    }
    let mut groups: Vec<_> = std::fs::read_dir(dir.join("groups"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    groups.sort();
    let mut cases = Vec::new();
    for group_dir in groups {
        let group = group_dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut files: Vec<_> = std::fs::read_dir(&group_dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        for file in files {
            let stem = file
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let parsed = match read_json(&file) {
                Ok(v) => v,
                Err(e) => {
                    cases.push(Case {
                        group: group.clone(),
                        id: format!("{group}/{stem}"),
                        expr: String::new(),
                        input: None,
                        bindings: Map::new(),
                        timelimit: None,
                        depth: None,
                        unordered: false,
                        expected: Expected::Unreadable(format!("{e:#}")),
                    });
                    continue;
                }
            };
            let list = match parsed {
                Value::Array(items) => items
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| (format!("{stem}#{i}"), c))
                    .collect(),
                one => vec![(stem, one)],
            };
            for (name, raw) in list {
                let id = format!("{group}/{name}");
                let case = parse_case(&group, id.clone(), &raw, &group_dir, &datasets)
                    .with_context(|| format!("case {id}"))?;
                cases.push(case);
            }
        }
    }
    if cases.is_empty() {
        bail!("no cases under {}", dir.display());
    }
    Ok(cases)
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn parse_case(
    group: &str,
    id: String,
    raw: &Value,
    group_dir: &Path,
    datasets: &HashMap<String, Value>,
) -> anyhow::Result<Case> {
    let expr = match (raw.get("expr"), raw.get("expr-file")) {
        (Some(Value::String(e)), _) => e.clone(),
        (_, Some(Value::String(file))) => std::fs::read_to_string(group_dir.join(file))?,
        _ => bail!("no expr or expr-file"),
    };
    let input = match (raw.get("data"), raw.get("dataset")) {
        (Some(data), _) => Some(data.clone()),
        (None, Some(Value::String(name))) => Some(
            datasets
                .get(name)
                .with_context(|| format!("no dataset {name}"))?
                .clone(),
        ),
        _ => None,
    };
    let bindings = match raw.get("bindings") {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    let expected = if let Some(code) = raw.get("code").and_then(Value::as_str) {
        Expected::Error(code.to_owned())
    } else if let Some(code) = raw
        .get("error")
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
    {
        Expected::Error(code.to_owned())
    } else if raw.get("undefinedResult").and_then(Value::as_bool) == Some(true) {
        Expected::Undefined
    } else if let Some(result) = raw.get("result") {
        Expected::Value(result.clone())
    } else {
        bail!("no result, undefinedResult, code or error");
    };
    Ok(Case {
        group: group.to_owned(),
        id,
        expr,
        input,
        bindings,
        timelimit: raw.get("timelimit").and_then(Value::as_u64),
        depth: raw.get("depth").and_then(Value::as_u64).map(|d| d as usize),
        unordered: raw
            .get("unordered")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        expected,
    })
}
