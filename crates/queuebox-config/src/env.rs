//! `QUEUEBOX_*` variables (CFG-8..18): which ones are settings, the path each one names, and
//! merging their values into the file's tree before it is read.

use std::collections::{BTreeMap, HashSet};

use crate::diag::Diagnostic;
use crate::node::{Kind, Node};
use crate::schema::{ROOT, Shape};
use crate::suggest::suggest;

const PREFIX: &str = "QUEUEBOX_";

/// What the variables did to the tree.
pub(crate) struct EnvOutcome {
    /// Errors about keys (gaps, `expected a section`), reported with their paths.
    pub key_errors: Vec<Diagnostic>,
    /// Unknown variables (CFG-17).
    pub var_errors: Vec<Diagnostic>,
    /// Whether any variable is meant as a setting (for CFG-3).
    pub any_setting: bool,
}

/// CFG-16: variables that are not settings.
pub(crate) fn is_ignored(name: &str, value: &str) -> bool {
    if name == "QUEUEBOX_CONFIG_FILE" || name.starts_with("QUEUEBOX_TEST_") {
        return true;
    }
    if name.ends_with("_SERVICE_HOST") || name.ends_with("_SERVICE_PORT") {
        return true;
    }
    if let Some(pos) = name.rfind("_SERVICE_PORT_")
        && pos + "_SERVICE_PORT_".len() < name.len()
    {
        return true;
    }
    if name.ends_with("_PORT") {
        let v = value.to_ascii_lowercase();
        if ["tcp://", "udp://", "sctp://"]
            .iter()
            .any(|p| v.starts_with(p))
        {
            return true;
        }
    }
    // `_PORT_<number>_<TCP|UDP|SCTP>`, optionally followed by `_PROTO`, `_PORT` or `_ADDR`.
    let parts: Vec<&str> = name.split('_').collect();
    let protocol_at = |i: usize| {
        i >= 2
            && matches!(parts[i], "TCP" | "UDP" | "SCTP")
            && !parts[i - 1].is_empty()
            && parts[i - 1].chars().all(|c| c.is_ascii_digit())
            && parts[i - 2] == "PORT"
    };
    let n = parts.len();
    (n >= 1 && protocol_at(n - 1))
        || (n >= 2 && matches!(parts[n - 1], "PROTO" | "PORT" | "ADDR") && protocol_at(n - 2))
}

/// Splits a variable name after the prefix into segments: `__` is a literal `_` (CFG-8).
/// Returns (segments, raw spellings) so suggestions can be written back as variable names.
fn segments(rest: &str) -> (Vec<String>, Vec<String>) {
    let mut segs = Vec::new();
    let mut raws = Vec::new();
    let mut seg = String::new();
    let mut raw = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '_' {
            if chars.peek() == Some(&'_') {
                chars.next();
                seg.push('_');
                raw.push_str("__");
            } else {
                segs.push(std::mem::take(&mut seg));
                raws.push(std::mem::take(&mut raw));
            }
        } else {
            seg.push(c);
            raw.push(c);
        }
    }
    segs.push(seg);
    raws.push(raw);
    (segs, raws)
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Step {
    Key(String),
    Pos(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Value,
    ListOfOne,
    Section,
}

fn path_of(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Pos(n) => out.push_str(&format!("[{n}]")),
        }
    }
    out
}

fn map_entries(node: Option<&Node>) -> &[(String, Node)] {
    match node.map(|n| &n.kind) {
        Some(Kind::Map(entries)) => entries,
        _ => &[],
    }
}

fn child<'a>(node: Option<&'a Node>, key: &str) -> Option<&'a Node> {
    map_entries(node)
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn position(segment: &str) -> Option<usize> {
    if segment.is_empty() || !segment.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    segment.parse().ok()
}

/// Where resolution failed: the segment index and the section shape it was tried against.
struct Failure {
    at: usize,
    section: Option<&'static Shape>,
}

/// Maps segments to a path, consulting the file's tree for existing names (CFG-12).
fn resolve(root: &Node, segs: &[String]) -> Result<(Vec<Step>, End), Failure> {
    let mut shape: &'static Shape = &ROOT;
    let mut node = Some(root);
    let mut steps = Vec::new();
    let mut i = 0;
    loop {
        let seg = segs.get(i);
        let fail = |section| Failure { at: i, section };
        match shape {
            Shape::Leaf => {
                return if seg.is_none() {
                    Ok((steps, End::Value))
                } else {
                    Err(fail(None))
                };
            }
            Shape::LeafList => match seg {
                None => return Ok((steps, End::ListOfOne)),
                Some(s) if i + 1 == segs.len() => {
                    let n = position(s).ok_or(fail(None))?;
                    steps.push(Step::Pos(n));
                    return Ok((steps, End::Value));
                }
                Some(_) => return Err(fail(None)),
            },
            Shape::Section(_) | Shape::Keys(_) => {
                let Some(s) = seg else {
                    return Ok((steps, End::Section));
                };
                let (key, sub) = shape.field(s).ok_or(fail(Some(shape)))?;
                node = child(node, key);
                steps.push(Step::Key(key.to_owned()));
                shape = sub;
            }
            Shape::List(sub) => {
                let Some(s) = seg else {
                    return Ok((steps, End::Section));
                };
                let n = position(s).ok_or(fail(None))?;
                steps.push(Step::Pos(n));
                // The variables replace the file's list (CFG-14), so nothing below is looked up.
                node = None;
                shape = sub;
            }
            Shape::Names(sub) => {
                let Some(s) = seg else {
                    return Ok((steps, End::Section));
                };
                if s.is_empty() {
                    return Err(fail(None));
                }
                let existing = map_entries(node)
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(s))
                    .map(|(k, _)| k.clone());
                let name = existing.unwrap_or_else(|| s.to_lowercase());
                node = child(node, &name);
                steps.push(Step::Key(name));
                shape = sub;
            }
            Shape::FreeMap => match seg {
                None => return Ok((steps, End::Section)),
                Some(s) if i + 1 == segs.len() && !s.is_empty() => {
                    steps.push(Step::Key(s.to_lowercase()));
                    return Ok((steps, End::Value));
                }
                Some(_) => return Err(fail(None)),
            },
        }
        i += 1;
    }
}

/// CFG-17: the nearest known variable, with the joined-segments rule first.
fn suggestion(root: &Node, segs: &[String], raws: &[String], failure: &Failure) -> Option<String> {
    let section = failure.section?;
    let at = failure.at;
    let name_with = |key: &str, rest_from: usize| {
        let mut parts: Vec<String> = raws[..at].to_vec();
        parts.push(key.to_uppercase());
        parts.extend(raws[rest_from..].iter().cloned());
        format!("{PREFIX}{}", parts.join("_"))
    };
    let joined: String = segs[at..].concat();
    if let Some((key, _)) = section.field(&joined) {
        return Some(name_with(key, segs.len()));
    }
    let keys = section.keys();
    let key = suggest(&segs[at], keys.iter().copied())?;
    let mut fixed = segs.to_vec();
    fixed[at] = key.to_owned();
    resolve(root, &fixed)
        .ok()
        .filter(|(_, end)| *end != End::Section)
        .map(|_| name_with(key, at + 1))
}

struct Target {
    var: String,
    value: String,
    steps: Vec<Step>,
    end: End,
}

/// Merges every setting variable into `root` (CFG-14) and reports what cannot be applied.
pub(crate) fn merge(root: &mut Node, env: &[(String, String)]) -> EnvOutcome {
    let mut outcome = EnvOutcome {
        key_errors: Vec::new(),
        var_errors: Vec::new(),
        any_setting: false,
    };
    let mut vars: Vec<&(String, String)> = env
        .iter()
        .filter(|(name, value)| name.starts_with(PREFIX) && !is_ignored(name, value))
        .collect();
    vars.sort();
    vars.dedup_by(|a, b| a.0 == b.0);
    let mut targets = Vec::new();
    for (name, value) in vars {
        outcome.any_setting = true;
        let (segs, raws) = segments(&name[PREFIX.len()..]);
        match resolve(root, &segs) {
            Ok((steps, End::Section)) => outcome.key_errors.push(Diagnostic {
                path: path_of(&steps),
                variable: Some(name.clone()),
                message: "expected a section".to_owned(),
            }),
            Ok((steps, end)) => targets.push(Target {
                var: name.clone(),
                value: value.clone(),
                steps,
                end,
            }),
            Err(failure) => {
                let hint = suggestion(root, &segs, &raws, &failure)
                    .map(|s| format!("; did you mean {s}?"))
                    .unwrap_or_default();
                outcome.var_errors.push(Diagnostic {
                    path: name.clone(),
                    variable: None,
                    message: format!("unknown variable{hint}"),
                });
            }
        }
    }
    let rejected = check_gaps(&targets, &mut outcome.key_errors);
    let mut cleared = HashSet::new();
    for (i, target) in targets.iter().enumerate() {
        if !rejected.contains(&i) {
            apply(root, target, &mut cleared);
        }
    }
    outcome
}

/// CFG-10: positions of one list must run from 0 without a gap. Returns the targets that sit
/// at or after a gap; the error names the first variable after the gap.
fn check_gaps(targets: &[Target], errors: &mut Vec<Diagnostic>) -> HashSet<usize> {
    // list prefix -> position -> targets using it
    let mut lists: BTreeMap<Vec<Step>, BTreeMap<usize, Vec<usize>>> = BTreeMap::new();
    for (i, t) in targets.iter().enumerate() {
        for (at, step) in t.steps.iter().enumerate() {
            if let Step::Pos(n) = step {
                lists
                    .entry(t.steps[..at].to_vec())
                    .or_default()
                    .entry(*n)
                    .or_default()
                    .push(i);
            }
        }
    }
    let mut rejected = HashSet::new();
    for (prefix, positions) in &lists {
        let gap = positions.keys().enumerate().find(|(i, n)| *i != **n);
        let Some((missing, _)) = gap else { continue };
        let after: Vec<usize> = positions
            .range(missing..)
            .flat_map(|(_, ts)| ts.iter().copied())
            .collect();
        if let Some(first) = after
            .iter()
            .min_by(|a, b| targets[**a].var.cmp(&targets[**b].var))
        {
            let t = &targets[*first];
            let first_after = positions
                .range(missing..)
                .next()
                .map_or(missing, |(n, _)| *n);
            let mut path = prefix.clone();
            path.push(Step::Pos(first_after));
            errors.push(Diagnostic {
                path: path_of(&path),
                variable: Some(t.var.clone()),
                message: format!(
                    "list positions set by variables must run from 0 without a gap; position {missing} is not set"
                ),
            });
        }
        rejected.extend(after);
    }
    rejected
}

fn apply(root: &mut Node, target: &Target, cleared: &mut HashSet<Vec<Step>>) {
    let mut node = root;
    for (at, step) in target.steps.iter().enumerate() {
        node = match step {
            Step::Key(key) => {
                if !matches!(node.kind, Kind::Map(_)) {
                    *node = Node {
                        kind: Kind::Map(Vec::new()),
                        var: Some(target.var.clone()),
                    };
                }
                let Kind::Map(entries) = &mut node.kind else {
                    return;
                };
                let index = match entries.iter().position(|(k, _)| k == key) {
                    Some(i) => i,
                    None => {
                        entries.push((key.clone(), Node::new(Kind::Null)));
                        entries.len() - 1
                    }
                };
                &mut entries[index].1
            }
            Step::Pos(n) => {
                if cleared.insert(target.steps[..at].to_vec()) || !matches!(node.kind, Kind::Seq(_))
                {
                    *node = Node {
                        kind: Kind::Seq(Vec::new()),
                        var: Some(target.var.clone()),
                    };
                }
                let Kind::Seq(items) = &mut node.kind else {
                    return;
                };
                while items.len() <= *n {
                    items.push(Node::new(Kind::Null));
                }
                &mut items[*n]
            }
        };
    }
    *node = match target.end {
        End::ListOfOne => Node {
            kind: Kind::Seq(vec![Node::env(&target.value, &target.var)]),
            var: Some(target.var.clone()),
        },
        _ => Node::env(&target.value, &target.var),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::parse_yaml;

    fn paths_of(vars: &[&str]) -> Vec<String> {
        let root = Node::empty_map();
        vars.iter()
            .map(|v| {
                let (segs, _) = segments(&v[PREFIX.len()..]);
                match resolve(&root, &segs) {
                    Ok((steps, _)) => path_of(&steps),
                    Err(_) => "<unknown>".to_owned(),
                }
            })
            .collect()
    }

    #[test]
    fn cfg_8_variable_names_map_to_paths() {
        assert_eq!(
            paths_of(&[
                "QUEUEBOX_DATABASE_URL",
                "QUEUEBOX_OUTBOX_POLLINTERVALMS",
                "QUEUEBOX_OUTBOX_CAPTURE_MODE",
                "QUEUEBOX_ROUTES_0_TOPICPATTERN",
                "QUEUEBOX_SOURCES_ORDERS_TOPICS_0",
                "QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_1_IN_0",
                "QUEUEBOX_DESTINATIONS_MY__API_BASEURL",
                "QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_KEY",
            ]),
            [
                "database.url",
                "outbox.pollIntervalMs",
                "outbox.capture.mode",
                "routes[0].topicPattern",
                "sources.orders.topics[0]",
                "sources.orders.filter.require[1].in[0]",
                "destinations.my_api.baseUrl",
                "database.columnMapping.outbox.key",
            ]
        );
    }

    #[test]
    fn cfg_9_underscored_camel_case_is_an_unknown_path() {
        assert_eq!(
            paths_of(&["QUEUEBOX_OUTBOX_POLL_INTERVAL_MS"]),
            ["<unknown>"]
        );
    }

    #[test]
    fn cfg_12_names_match_existing_entries_without_case() {
        let root = parse_yaml("sources:\n  Orders:\n    path: /o\n").unwrap();
        let (segs, _) = segments("SOURCES_ORDERS_PATH");
        let (steps, _) = resolve(&root, &segs).ok().unwrap();
        assert_eq!(path_of(&steps), "sources.Orders.path");
    }

    #[test]
    fn cfg_16_service_link_variables_are_ignored() {
        for (name, value) in [
            ("QUEUEBOX_CONFIG_FILE", "x"),
            ("QUEUEBOX_TEST_ANYTHING", "x"),
            ("QUEUEBOX_DB_SERVICE_HOST", "10.0.0.1"),
            ("QUEUEBOX_SERVICE_PORT", "8080"),
            ("QUEUEBOX_SERVICE_PORT_HTTP", "8080"),
            ("QUEUEBOX_PORT", "tcp://10.0.0.2:8080"),
            ("QUEUEBOX_PORT_8080_TCP", "tcp://10.0.0.2:8080"),
            ("QUEUEBOX_PORT_8080_TCP_PROTO", "tcp"),
            ("QUEUEBOX_PORT_8080_UDP_PORT", "8080"),
            ("QUEUEBOX_PORT_53_SCTP_ADDR", "10.0.0.2"),
        ] {
            assert!(is_ignored(name, value), "{name}");
        }
        assert!(!is_ignored("QUEUEBOX_PORT", "8080"));
        assert!(!is_ignored("QUEUEBOX_DATABASE_URL", "tcp://x"));
        assert!(!is_ignored("QUEUEBOX_PORT_8080_HTTP", "x"));
    }

    fn merged(yaml: &str, env: &[(&str, &str)]) -> (Node, EnvOutcome) {
        let mut root = parse_yaml(yaml).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let outcome = merge(&mut root, &env);
        (root, outcome)
    }

    #[test]
    fn cfg_17_joined_segments_suggest_the_camel_case_key() {
        let (_, out) = merged("", &[("QUEUEBOX_OUTBOX_POLL_INTERVAL_MS", "5")]);
        assert_eq!(
            out.var_errors[0].to_string(),
            "- QUEUEBOX_OUTBOX_POLL_INTERVAL_MS: unknown variable; did you mean QUEUEBOX_OUTBOX_POLLINTERVALMS?"
        );
        let (_, out) = merged("", &[("QUEUEBOX_OUTBOX_BATCHSZIE", "5")]);
        assert_eq!(
            out.var_errors[0].message,
            "unknown variable; did you mean QUEUEBOX_OUTBOX_BATCHSIZE?"
        );
        let (_, out) = merged("", &[("QUEUEBOX_NOTHING_LIKE_IT", "5")]);
        assert_eq!(out.var_errors[0].message, "unknown variable");
    }

    #[test]
    fn cfg_14_variables_set_a_section_error() {
        let (_, out) = merged("", &[("QUEUEBOX_OUTBOX", "1")]);
        assert_eq!(
            out.key_errors[0].to_string(),
            "- outbox (QUEUEBOX_OUTBOX): expected a section"
        );
    }

    #[test]
    fn cfg_14_list_from_variables_replaces_the_file_list() {
        let (root, out) = merged(
            "routes:\n  - topicPattern: a\n    destination: x\n  - topicPattern: b\n    destination: y\n",
            &[("QUEUEBOX_ROUTES_0_TOPICPATTERN", "c")],
        );
        assert!(out.key_errors.is_empty());
        let Kind::Map(entries) = &root.kind else {
            panic!()
        };
        let Kind::Seq(routes) = &entries[0].1.kind else {
            panic!()
        };
        assert_eq!(routes.len(), 1);
        assert_eq!(
            map_entries(Some(&routes[0])).len(),
            1,
            "only the variable's key is left"
        );
    }

    #[test]
    fn cfg_10_a_gap_names_the_first_variable_after_it() {
        let (_, out) = merged(
            "",
            &[
                ("QUEUEBOX_ROUTES_0_TOPICPATTERN", "a"),
                ("QUEUEBOX_ROUTES_2_TOPICPATTERN", "b"),
                ("QUEUEBOX_ROUTES_3_TOPICPATTERN", "c"),
            ],
        );
        assert_eq!(out.key_errors.len(), 1);
        assert_eq!(out.key_errors[0].path, "routes[2]");
        assert_eq!(
            out.key_errors[0].variable.as_deref(),
            Some("QUEUEBOX_ROUTES_2_TOPICPATTERN")
        );
    }

    #[test]
    fn cfg_11_a_list_key_without_position_is_a_list_of_one() {
        let (root, _) = merged(
            "",
            &[("QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH", "$.id")],
        );
        let sources = child(Some(&root), "sources");
        let orders = child(sources, "orders");
        let path = child(orders, "idempotencyKeyPath").unwrap();
        assert!(matches!(&path.kind, Kind::Seq(items) if items.len() == 1));
    }

    #[test]
    fn cfg_13_free_map_keys_are_lower_case() {
        let (root, _) = merged("", &[("QUEUEBOX_DESTINATIONS_API_HEADERS_X__TENANT", "t1")]);
        let d = child(child(Some(&root), "destinations"), "api");
        assert!(child(child(d, "headers"), "x_tenant").is_some());
    }

    #[test]
    fn cfg_14_variable_merges_into_a_file_map_and_wins() {
        let (root, _) = merged(
            "outbox:\n  batchSize: 5\n  concurrency: 3\n",
            &[("QUEUEBOX_OUTBOX_BATCHSIZE", "9")],
        );
        let outbox = child(Some(&root), "outbox").unwrap();
        assert_eq!(map_entries(Some(outbox)).len(), 2);
        let batch = child(Some(outbox), "batchSize").unwrap();
        assert_eq!(batch, &Node::env("9", "QUEUEBOX_OUTBOX_BATCHSIZE"));
    }
}
