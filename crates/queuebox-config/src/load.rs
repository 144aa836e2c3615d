//! `load`: finds the file (CFG-1..4), parses it (CFG-5), merges the variables (CFG-8..18),
//! reads every section and runs the cross-key rules, reporting every error at once (CFG-26).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::diag::{Diagnostic, Diagnostics, LoadError, sort_warnings};
use crate::env;
use crate::model::Config;
use crate::node::{Node, parse_yaml};
use crate::parse_database::read_database;
use crate::parse_retention::read_retention;
use crate::parse_route::read_routes;
use crate::parse_sections::{
    read_admin, read_http, read_inbox, read_log, read_outbox, read_server,
};
use crate::placeholder::io_reason;
use crate::read::{Cx, Sec, join};
use crate::rules;
use crate::values::valid_name;
use queuebox_core::database::DatabaseType;

/// Where the configuration comes from. `load` reads nothing of the real process: the binary
/// passes its environment and working directory, tests pass their own.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// `--config PATH`.
    pub config_path: Option<PathBuf>,
    /// A snapshot of the process environment.
    pub env: Vec<(String, String)>,
    /// The names (made readable) of `QUEUEBOX_` variables whose name or value is not valid
    /// UTF-8. They cannot be read, so they are refused like unknown ones instead of being left
    /// out in silence.
    pub not_utf8: Vec<String>,
    /// The working directory: `./queuebox.yml` and relative paths (CFG-7) resolve against it.
    pub cwd: PathBuf,
    /// Normally `/etc/queuebox/queuebox.yml`.
    pub etc_path: PathBuf,
}

/// A valid configuration, its warnings (CFG-31) and the file it came from, if any.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<Diagnostic>,
    pub file: Option<PathBuf>,
}

const TOP_KEYS: &[&str] = &[
    "server",
    "database",
    "outbox",
    "inbox",
    "http",
    "admin",
    "destinations",
    "routes",
    "sources",
    "retention",
    "log",
];

pub fn load(opts: &LoadOptions) -> Result<Loaded, LoadError> {
    let file = locate(opts)?;
    let mut root = match &file {
        Some(found) => parse_yaml(&found.text).map_err(|err| LoadError::NotYaml {
            path: found.shown.clone(),
            detail: err.to_string(),
        })?,
        None => Node::empty_map(),
    };
    let mut merged = env::merge(&mut root, &opts.env);
    for name in &opts.not_utf8 {
        merged.any_setting = true;
        merged.var_errors.push(Diagnostic {
            path: name.clone(),
            variable: None,
            message: "not valid UTF-8; QueueBox reads variables as UTF-8 text".to_owned(),
        });
    }
    if file.is_none() && !merged.any_setting {
        return Err(LoadError::NotFound);
    }
    let mut cx = Cx::new(&opts.env, &opts.cwd);
    for error in merged.key_errors {
        cx.mark_bad(&error.path);
        cx.errors.push(error);
    }
    let config = read_config(&mut cx, &root);
    if !cx.errors.is_empty() || !merged.var_errors.is_empty() {
        return Err(LoadError::Invalid(Diagnostics::sorted(
            cx.errors,
            merged.var_errors,
        )));
    }
    let mut warnings = cx.warnings;
    sort_warnings(&mut warnings);
    Ok(Loaded {
        config,
        warnings,
        file: file.map(|f| f.resolved),
    })
}

struct Found {
    /// The path as the operator named it, for messages.
    shown: PathBuf,
    resolved: PathBuf,
    text: String,
}

/// CFG-1, CFG-2: the first place that is set; a named file must be readable.
fn locate(opts: &LoadOptions) -> Result<Option<Found>, LoadError> {
    let from_env = opts
        .env
        .iter()
        .find(|(k, v)| k == "QUEUEBOX_CONFIG_FILE" && !v.is_empty())
        .map(|(_, v)| PathBuf::from(v));
    if let Some(named) = opts.config_path.clone().or(from_env) {
        let resolved = opts.cwd.join(&named);
        return read_file(named, resolved).map(Some);
    }
    let local = opts.cwd.join("queuebox.yml");
    for candidate in [local, opts.etc_path.clone()] {
        if candidate.exists() {
            return read_file(candidate.clone(), candidate).map(Some);
        }
    }
    Ok(None)
}

fn read_file(shown: PathBuf, resolved: PathBuf) -> Result<Found, LoadError> {
    let unreadable = |reason: String| LoadError::Unreadable {
        path: shown.clone(),
        reason,
    };
    let bytes = std::fs::read(&resolved).map_err(|e| unreadable(io_reason(&e)))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| unreadable("the file is not valid UTF-8".to_owned()))?;
    Ok(Found {
        shown,
        resolved,
        text,
    })
}

fn read_config(cx: &mut Cx<'_>, root: &Node) -> Config {
    let mut top = Sec::open(cx, "", Some(root));
    let server = read_server(cx, top.node("server"));
    let database = read_database(cx, top.node("database"));
    let is_postgres =
        (!cx.is_bad("database.type")).then_some(database.db_type == DatabaseType::Postgresql);
    let outbox = read_outbox(cx, top.node("outbox"), is_postgres);
    let inbox = read_inbox(cx, top.node("inbox"), outbox.max_attempts);
    let http = read_http(cx, top.node("http"));
    let admin = read_admin(cx, top.node("admin"));

    let destination_nodes = read_names(cx, "destinations", top.node("destinations"));
    let declared: Vec<String> = destination_nodes.iter().map(|(n, _)| n.clone()).collect();
    let mut destinations = BTreeMap::new();
    for (name, node) in destination_nodes {
        let path = join("destinations", &name);
        if let Some(d) = crate::parse_destination::read_destination(cx, &name, &path, node) {
            destinations.insert(name, d);
        }
    }
    let route_drafts = read_routes(cx, top.node("routes"));
    let mut sources = BTreeMap::new();
    for (name, node) in read_names(cx, "sources", top.node("sources")) {
        let path = join("sources", &name);
        if let Some(s) = crate::parse_source::read_source(cx, &name, &path, node, &inbox.base_path)
        {
            sources.insert(name, s);
        }
    }
    let retention = read_retention(cx, top.node("retention"));
    let log = read_log(cx, top.node("log"));
    top.finish(cx, TOP_KEYS);

    rules::check_routes(cx, &route_drafts, &declared, &destinations);
    rules::check_timeouts(cx, &outbox, &destinations);
    rules::check_source_routes(cx, &server, &sources);
    rules::check_relay_topics(cx, &inbox, &route_drafts, &sources);

    Config {
        server,
        database,
        outbox,
        inbox,
        http,
        admin,
        destinations,
        routes: route_drafts.into_iter().filter_map(|r| r.build()).collect(),
        sources,
        retention,
        log,
    }
}

/// A map of source or destination names (CFG-24): valid names only, and no two that differ
/// only in letter case.
fn read_names<'n>(cx: &mut Cx<'_>, path: &str, node: Option<&'n Node>) -> Vec<(String, &'n Node)> {
    let mut s = Sec::open(cx, path, node);
    let mut out: Vec<(String, &'n Node)> = Vec::new();
    for (name, value) in s.all() {
        let p = join(path, name);
        if !valid_name(name) {
            cx.error_at(
                &p,
                value,
                "a name must be 1 to 64 letters, digits, _ or -, starting with a letter or digit",
            );
            continue;
        }
        if let Some((other, _)) = out.iter().find(|(o, _)| o.eq_ignore_ascii_case(name)) {
            let message = format!("differs from {} only in letter case", join(path, other));
            cx.error_at(&p, value, message);
            continue;
        }
        out.push((name.to_owned(), value));
    }
    out
}
