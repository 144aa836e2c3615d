//! Reading `database` (config.md §6) into `DatabaseConfig`, with the database rules
//! CFG-41 and CFG-87..91.

use std::path::Path;

use queuebox_core::{InboxColumns, OutboxColumns, Secret, SqlIdentifier, TableLayout};

use crate::dburl::{self, DbUrl};
use crate::mask::mask_url;
use crate::node::Node;
use crate::read::{Cx, Sec};
use crate::values::{self as v, Range};
use queuebox_core::database::{
    DatabaseConfig, DatabaseTarget, DatabaseType, MysqlSslMode, MysqlTarget, PgSslMode,
    PostgresTarget, SqliteTarget,
};

const KEYS: &[&str] = &[
    "type",
    "url",
    "username",
    "password",
    "poolSize",
    "connectionTimeoutMs",
    "startupTimeoutMs",
    "migrate",
    "outboxTableName",
    "inboxTableName",
    "columnMapping",
];

const TYPES: &[(&str, DatabaseType)] = &[
    ("postgresql", DatabaseType::Postgresql),
    ("sqlserver", DatabaseType::Sqlserver),
    ("mysql", DatabaseType::Mysql),
    ("sqlite", DatabaseType::Sqlite),
];

pub(crate) fn read_database(cx: &mut Cx<'_>, node: Option<&Node>) -> DatabaseConfig {
    let mut s = Sec::open(cx, "database", node);
    let p = |k: &str| format!("database.{k}");
    let db_type = s
        .node("type")
        .and_then(|n| {
            v::enumeration(
                cx,
                &p("type"),
                n,
                TYPES,
                &["postgresql", "sqlserver", "mysql", "sqlite"],
            )
        })
        .unwrap_or(DatabaseType::Postgresql);
    let url = match s.node("url") {
        Some(n) => v::required_secret(cx, &p("url"), n),
        None => {
            cx.error(&p("url"), "required");
            None
        }
    };
    let username = s
        .node("username")
        .and_then(|n| v::string(cx, &p("username"), n));
    let password = s
        .node("password")
        .and_then(|n| v::secret(cx, &p("password"), n));
    let pool_size = s
        .node("poolSize")
        .map(|n| v::uint(cx, &p("poolSize"), n, Range::Between(1, 1000)));
    let connection_timeout_ms = s
        .node("connectionTimeoutMs")
        .and_then(|n| v::ms(cx, &p("connectionTimeoutMs"), n, Range::Positive))
        .unwrap_or(30_000);
    let startup_timeout_ms = s
        .node("startupTimeoutMs")
        .and_then(|n| v::ms(cx, &p("startupTimeoutMs"), n, Range::Positive))
        .unwrap_or(60_000);
    let migrate = s
        .node("migrate")
        .and_then(|n| v::boolean(cx, &p("migrate"), n))
        .unwrap_or(true);
    let layout = read_layout(cx, &mut s);
    let present = |s: &Sec<'_>, k: &str| s.has(k);
    let (has_user, has_password) = (present(&s, "username"), present(&s, "password"));
    s.finish(cx, KEYS);

    // CFG-88: keys sqlite does not use.
    if db_type == DatabaseType::Sqlite && !cx.is_bad(&p("type")) {
        for (key, set) in [
            ("username", has_user),
            ("password", has_password),
            ("poolSize", pool_size.is_some()),
        ] {
            if set {
                cx.error(&p(key), "not used by type sqlite");
            }
        }
    }
    check_layout(cx, &layout, migrate);

    let masked_url = url
        .as_ref()
        .map(|u| mask_url(u.expose()))
        .unwrap_or_default();
    let mut config = DatabaseConfig {
        db_type,
        // Stands in until the URL parses; a section with an error yields no `Config` at all.
        target: DatabaseTarget::Sqlserver {
            url: url.clone().unwrap_or_default(),
        },
        masked_url,
        host_port: String::new(),
        pool_size: pool_size.flatten().unwrap_or(10),
        connection_timeout_ms,
        startup_timeout_ms,
        migrate,
        layout,
    };
    let Some(url) = url else { return config };
    if cx.is_bad(&p("type")) {
        return config;
    }
    let Some(parts) = parse_url(cx, url.expose(), db_type) else {
        return config;
    };
    // CFG-41: a user from the key or the URL.
    let user = username.clone().or_else(|| parts.user.clone());
    if db_type != DatabaseType::Sqlite && user.is_none() && !cx.is_bad(&p("username")) {
        cx.error(&p("username"), "required; set it here or in database.url");
    }
    config.host_port = match &parts.sqlite {
        Some(path) if path == ":memory:" => path.clone(),
        Some(path) => cx.cwd.join(path).display().to_string(),
        None => format!("{}:{}", parts.host, parts.port),
    };
    let password = password.or_else(|| {
        parts
            .password
            .clone()
            .map(|pw| crate::values::remembered(Secret::new(pw)))
    });
    config.target = match db_type {
        DatabaseType::Postgresql => {
            DatabaseTarget::Postgres(postgres_target(parts, user, password))
        }
        DatabaseType::Mysql => DatabaseTarget::Mysql(mysql_target(parts, user, password)),
        DatabaseType::Sqlite => DatabaseTarget::Sqlite(sqlite_target(&parts, cx.cwd)),
        DatabaseType::Sqlserver => DatabaseTarget::Sqlserver { url },
    };
    config
}

/// The MySQL parts; `dburl` has checked the mode and that a database is named.
fn mysql_target(parts: DbUrl, user: Option<String>, password: Option<Secret>) -> MysqlTarget {
    let ssl_mode = match parts.params.get("ssl-mode").map(String::as_str) {
        Some("disabled") => MysqlSslMode::Disabled,
        Some("required") => MysqlSslMode::Required,
        Some("verify_ca") => MysqlSslMode::VerifyCa,
        Some("verify_identity") => MysqlSslMode::VerifyIdentity,
        _ => MysqlSslMode::Preferred,
    };
    MysqlTarget {
        host: parts.host,
        port: parts.port,
        database: parts.database.unwrap_or_default(),
        user: user.unwrap_or_default(),
        password: password.unwrap_or_default(),
        ssl_mode,
        ssl_ca: parts.params.get("ssl-ca").cloned(),
    }
}

/// CFG-42 and CFG-7: `:memory:`, or the file resolved against the working directory.
fn sqlite_target(parts: &DbUrl, cwd: &Path) -> SqliteTarget {
    match parts.sqlite.as_deref() {
        Some(":memory:") | None => SqliteTarget::Memory,
        Some(path) => SqliteTarget::File(cwd.join(path)),
    }
}

fn parse_url(cx: &mut Cx<'_>, url: &str, db_type: DatabaseType) -> Option<DbUrl> {
    match dburl::form_type(url) {
        // CFG-87.
        Some(form) if form != db_type => {
            cx.error(
                "database.url",
                format!(
                    "a {form} URL does not fit database.type {ty}; set database.type: {form}",
                    form = form.as_str(),
                    ty = db_type.as_str()
                ),
            );
            None
        }
        Some(_) => match dburl::parse(url, db_type) {
            Ok(parts) => Some(parts),
            Err(reason) => {
                cx.error("database.url", reason);
                None
            }
        },
        None => {
            cx.error(
                "database.url",
                format!(
                    "is not a URL that database.type {} accepts; use {}",
                    db_type.as_str(),
                    dburl::accepted_forms(db_type)
                ),
            );
            None
        }
    }
}

fn postgres_target(parts: DbUrl, user: Option<String>, password: Option<Secret>) -> PostgresTarget {
    let sslmode = match parts.params.get("sslmode").map(String::as_str) {
        Some("disable") => PgSslMode::Disable,
        Some("require") => PgSslMode::Require,
        Some("verify-ca") => PgSslMode::VerifyCa,
        Some("verify-full") => PgSslMode::VerifyFull,
        _ => PgSslMode::Prefer,
    };
    PostgresTarget {
        host: parts.host,
        port: parts.port,
        database: parts.database,
        user: user.unwrap_or_default(),
        password: password.unwrap_or_default(),
        sslmode,
        sslrootcert: parts.params.get("sslrootcert").cloned(),
        application_name: parts
            .params
            .get("application_name")
            .cloned()
            .unwrap_or_else(|| "queuebox".to_owned()),
        connect_timeout_s: parts
            .params
            .get("connect_timeout")
            .and_then(|t| t.parse().ok()),
        options: parts.params.get("options").cloned(),
    }
}

fn read_layout(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> TableLayout {
    let mut layout = TableLayout::default();
    let ident = |cx: &mut Cx<'_>, s: &mut Sec<'_>, key: &str| {
        let path = s.at(key);
        s.node(key).and_then(|n| v::identifier(cx, &path, n))
    };
    if let Some(id) = ident(cx, s, "outboxTableName") {
        layout.outbox_table = id;
    }
    if let Some(id) = ident(cx, s, "inboxTableName") {
        layout.inbox_table = id;
    }
    let mapping_node = s.node("columnMapping");
    let mut mapping = Sec::open(cx, "database.columnMapping", mapping_node);
    let outbox_node = mapping.node("outbox");
    let mut outbox = Sec::open(cx, "database.columnMapping.outbox", outbox_node);
    for key in OutboxColumns::KEYS {
        if let Some(id) = ident(cx, &mut outbox, key) {
            layout.outbox.set(key, id);
        }
    }
    outbox.finish(cx, OutboxColumns::KEYS);
    let inbox_node = mapping.node("inbox");
    let mut inbox = Sec::open(cx, "database.columnMapping.inbox", inbox_node);
    for key in InboxColumns::KEYS {
        if let Some(id) = ident(cx, &mut inbox, key) {
            layout.inbox.set(key, id);
        }
    }
    inbox.finish(cx, InboxColumns::KEYS);
    mapping.finish(cx, &["outbox", "inbox"]);
    layout
}

/// CFG-89, CFG-90, CFG-91.
fn check_layout(cx: &mut Cx<'_>, layout: &TableLayout, migrate: bool) {
    if migrate && !cx.is_bad("database.migrate") {
        for key in layout.renamed_keys() {
            let what = if key.ends_with("TableName") {
                "table"
            } else {
                "column"
            };
            cx.error(
                &key,
                format!(
                    "renames a {what}; set database.migrate: false and create the tables yourself"
                ),
            );
        }
    }
    let (outbox, inbox) = ("database.outboxTableName", "database.inboxTableName");
    if !cx.any_bad(&[outbox, inbox]) {
        if layout.inbox_table == layout.outbox_table {
            cx.error(inbox, "the same name as database.outboxTableName");
        }
        for (path, name) in [(outbox, &layout.outbox_table), (inbox, &layout.inbox_table)] {
            if name.as_str() == "queuebox_schema_history" {
                cx.error(
                    path,
                    "the name of QueueBox's migration history table; choose another name",
                );
            }
        }
    }
    check_columns(cx, "outbox", &layout.outbox.entries());
    check_columns(cx, "inbox", &layout.inbox.entries());
}

/// CFG-91: the key that was renamed onto another column is reported against the other.
fn check_columns(cx: &mut Cx<'_>, table: &str, entries: &[(&str, &str, &SqlIdentifier)]) {
    let path = |key: &str| format!("database.columnMapping.{table}.{key}");
    for (i, (key, default, column)) in entries.iter().enumerate() {
        for (j, (other, other_default, other_column)) in entries.iter().enumerate() {
            if i == j || column != other_column || cx.any_bad(&[&path(key), &path(other)]) {
                continue;
            }
            let renamed = column.as_str() != *default;
            let other_renamed = other_column.as_str() != *other_default;
            // Report once per pair: the renamed key, or the later one when both are renamed.
            if renamed && (!other_renamed || i > j) {
                cx.error(&path(key), format!("the same column as {}", path(other)));
            }
        }
    }
}
