//! Reading the merged tree: the error collector, section readers that notice unknown and
//! duplicate keys (CFG-25, CFG-5), and the key-type-independent plumbing every value needs.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::diag::Diagnostic;
use crate::node::{Kind, Node, ScalarKind};
use crate::placeholder::expand;
use crate::suggest::did_you_mean;

/// Everything one load collects: errors, warnings, which paths are in error (so cross-key
/// rules can skip them, CFG-26) and which variable supplied which path (CFG-18).
pub(crate) struct Cx<'a> {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    bad: HashSet<String>,
    origins: HashMap<String, String>,
    env: HashMap<&'a str, &'a str>,
    pub cwd: &'a Path,
}

impl<'a> Cx<'a> {
    pub fn new(env: &'a [(String, String)], cwd: &'a Path) -> Self {
        Self {
            errors: Vec::new(),
            warnings: Vec::new(),
            bad: HashSet::new(),
            origins: HashMap::new(),
            env: env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
            cwd,
        }
    }

    pub fn env_var(&self, name: &str) -> Option<String> {
        self.env.get(name).map(|v| (*v).to_owned())
    }

    /// An error at `path`; the variable is the one recorded for the path, if any.
    pub fn error(&mut self, path: &str, message: impl Into<String>) {
        let variable = self.origins.get(path).cloned();
        self.push_error(path, variable, message.into());
    }

    /// An error about `node`'s value at `path`, naming the node's variable.
    pub fn error_at(&mut self, path: &str, node: &Node, message: impl Into<String>) {
        self.push_error(path, node.var.clone(), message.into());
    }

    fn push_error(&mut self, path: &str, variable: Option<String>, message: String) {
        self.bad.insert(path.to_owned());
        self.errors.push(Diagnostic {
            path: path.to_owned(),
            variable,
            message,
        });
    }

    pub fn warn(&mut self, path: &str, message: impl Into<String>) {
        let variable = self.origins.get(path).cloned();
        self.warnings.push(Diagnostic {
            path: path.to_owned(),
            variable,
            message: message.into(),
        });
    }

    /// Marks `path` in error without a line of its own (its cause was reported elsewhere).
    pub fn mark_bad(&mut self, path: &str) {
        self.bad.insert(path.to_owned());
    }

    /// Whether `path`, or anything below it, is in error.
    pub fn is_bad(&self, path: &str) -> bool {
        self.bad.iter().any(|b| {
            b == path
                || (b.starts_with(path)
                    && matches!(b.as_bytes().get(path.len()), Some(b'.') | Some(b'[')))
        })
    }

    pub fn any_bad(&self, paths: &[&str]) -> bool {
        paths.iter().any(|p| self.is_bad(p))
    }

    fn note_origin(&mut self, path: &str, node: &Node) {
        if let Some(var) = &node.var {
            self.origins.insert(path.to_owned(), var.clone());
        }
    }
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A mapping being read. Each key a reader asks for is marked; whatever is left at `finish`
/// is an unknown key.
pub(crate) struct Sec<'n> {
    pub path: String,
    entries: &'n [(String, Node)],
    taken: Vec<bool>,
}

impl<'n> Sec<'n> {
    /// Opens the section at `path`. A missing or null node is an empty section; any other
    /// non-mapping is a wrong type.
    pub fn open(cx: &mut Cx<'_>, path: &str, node: Option<&'n Node>) -> Self {
        let entries: &'n [(String, Node)] = match node.map(|n| (&n.kind, n)) {
            Some((Kind::Map(entries), _)) => entries,
            Some((Kind::Null, _)) | None => &[],
            Some((_, n)) => {
                cx.error_at(path, n, format!("expected a section, {}", n.got()));
                &[]
            }
        };
        if let Some(n) = node {
            cx.note_origin(path, n);
        }
        let mut taken = vec![false; entries.len()];
        let mut seen = HashSet::new();
        for (i, (key, value)) in entries.iter().enumerate() {
            if !seen.insert(key.as_str()) {
                cx.error_at(&join(path, key), value, "duplicate key");
                taken[i] = true;
            }
        }
        Self {
            path: path.to_owned(),
            entries,
            taken,
        }
    }

    pub fn at(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The key's node, marking it read. A null value counts as not set (CFG-5).
    pub fn node(&mut self, key: &str) -> Option<&'n Node> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        self.taken[i] = true;
        let node = &self.entries[i].1;
        (node.kind != Kind::Null).then_some(node)
    }

    /// Whether the key is set (not null), without marking it read.
    pub fn has(&self, key: &str) -> bool {
        self.entries
            .iter()
            .any(|(k, v)| k == key && v.kind != Kind::Null)
    }

    /// Every entry not read yet, marking them read; null values count as not set. For
    /// free-form maps and name maps.
    pub fn all(&mut self) -> Vec<(&'n str, &'n Node)> {
        let mut out = Vec::new();
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if !self.taken[i] {
                self.taken[i] = true;
                if v.kind != Kind::Null {
                    out.push((k.as_str(), v));
                }
            }
        }
        out
    }

    /// Reports the keys nobody asked for, with a suggestion among `known` (CFG-25, CFG-30).
    pub fn finish(self, cx: &mut Cx<'_>, known: &[&str]) {
        self.finish_typed(cx, None, known, &[]);
    }

    /// Like `finish` for a block with a `type`: a key that another type takes is reported as
    /// `unknown key for type <t>; type <other> takes it` (CFG-29).
    pub fn finish_typed(
        self,
        cx: &mut Cx<'_>,
        this_type: Option<&str>,
        known: &[&str],
        others: &[(&str, &[&str])],
    ) {
        for (i, (key, value)) in self.entries.iter().enumerate() {
            if self.taken[i] {
                continue;
            }
            let path = join(&self.path, key);
            let owners: Vec<&str> = others
                .iter()
                .filter(|(t, keys)| Some(*t) != this_type && keys.contains(&key.as_str()))
                .map(|(t, _)| *t)
                .collect();
            let message = match (this_type, owners.as_slice()) {
                (Some(t), [one]) => format!("unknown key for type {t}; type {one} takes it"),
                (Some(t), [_, ..]) => {
                    let mut sorted = owners.clone();
                    sorted.sort_unstable();
                    format!(
                        "unknown key for type {t}; types {} take it",
                        sorted.join(", ")
                    )
                }
                _ => format!("unknown key{}", did_you_mean(key, known.iter().copied())),
            };
            cx.error_at(&path, value, message);
        }
    }
}

/// The text of a scalar, with placeholders expanded in file strings (CFG-19). `None` when the
/// node is not a scalar or the expansion failed; both are reported.
pub(crate) fn scalar_text(
    cx: &mut Cx<'_>,
    path: &str,
    node: &Node,
    expected: &str,
) -> Option<String> {
    cx.note_origin(path, node);
    match &node.kind {
        Kind::Scalar {
            text,
            kind: ScalarKind::Str,
        } => match expand(text, |name| cx.env_var(name)) {
            Ok(expanded) => Some(expanded),
            Err(err) => {
                cx.error_at(path, node, err.to_string());
                None
            }
        },
        Kind::Scalar { text, .. } => Some(text.clone()),
        _ => {
            cx.error_at(path, node, format!("expected {expected}, {}", node.got()));
            None
        }
    }
}

/// A list node's items; a wrong type is reported.
pub(crate) fn list_items<'n>(cx: &mut Cx<'_>, path: &str, node: &'n Node) -> Option<&'n [Node]> {
    cx.note_origin(path, node);
    match &node.kind {
        Kind::Seq(items) => Some(items),
        _ => {
            cx.error_at(path, node, format!("expected a list, {}", node.got()));
            None
        }
    }
}

/// Reads an optional key with `f`, falling back to `default` when unset or in error.
macro_rules! get {
    ($cx:expr, $s:expr, $key:literal, $default:expr, |$p:ident, $n:ident| $read:expr) => {{
        let $p = $s.at($key);
        match $s.node($key) {
            Some($n) => $read.unwrap_or($default),
            None => $default,
        }
    }};
}
pub(crate) use get;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::parse_yaml;

    #[test]
    fn cfg_5_duplicate_key_is_reported_with_its_path() {
        let root = parse_yaml("outbox:\n  batchSize: 1\n  batchSize: 2\n").unwrap();
        let env = Vec::new();
        let cwd = std::path::PathBuf::from(".");
        let mut cx = Cx::new(&env, &cwd);
        let mut top = Sec::open(&mut cx, "", Some(&root));
        let outbox = top.node("outbox");
        let mut sec = Sec::open(&mut cx, "outbox", outbox);
        assert!(sec.node("batchSize").is_some());
        sec.finish(&mut cx, &["batchSize"]);
        top.finish(&mut cx, &["outbox"]);
        assert_eq!(cx.errors.len(), 1);
        assert_eq!(
            cx.errors[0].to_string(),
            "- outbox.batchSize: duplicate key"
        );
    }

    #[test]
    fn cfg_29_key_of_several_other_types() {
        let root = parse_yaml("servers: x\n").unwrap();
        let env = Vec::new();
        let cwd = std::path::PathBuf::from(".");
        let mut cx = Cx::new(&env, &cwd);
        let sec = Sec::open(&mut cx, "destinations.a", Some(&root));
        sec.finish_typed(
            &mut cx,
            Some("http"),
            &["baseUrl"],
            &[("nats", &["servers"]), ("kafka", &["servers"])],
        );
        assert_eq!(
            cx.errors[0].message,
            "unknown key for type http; types kafka, nats take it"
        );
        assert!(cx.is_bad("destinations.a"));
        assert!(!cx.is_bad("destinations.ab"));
    }
}
