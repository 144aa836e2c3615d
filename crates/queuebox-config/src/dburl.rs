//! `database.url` forms (CFG-39, CFG-40): which type a URL belongs to, and its parts, with the
//! `jdbc:` spellings translated to the native ones. Messages never quote the URL: it is a secret.

use std::collections::BTreeMap;

use percent_encoding::percent_decode_str;

use queuebox_core::database::DatabaseType;

/// The parts of a database URL, parameters under their native names.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct DbUrl {
    pub host: String,
    pub port: u16,
    pub database: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub params: BTreeMap<String, String>,
    /// SQLite: the file path as written, or `:memory:`.
    pub sqlite: Option<String>,
}

/// The type whose forms `url` uses, if any (for CFG-87).
pub(crate) fn form_type(url: &str) -> Option<DatabaseType> {
    let lower = url.trim_start().to_ascii_lowercase();
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| lower.starts_with(p));
    if starts(&["postgres://", "postgresql://", "jdbc:postgresql:"]) {
        Some(DatabaseType::Postgresql)
    } else if starts(&["sqlserver://", "jdbc:sqlserver:"]) {
        Some(DatabaseType::Sqlserver)
    } else if starts(&["mysql://", "jdbc:mysql:", "jdbc:mariadb:"]) {
        Some(DatabaseType::Mysql)
    } else if starts(&["sqlite:", "jdbc:sqlite:"]) {
        Some(DatabaseType::Sqlite)
    } else if !lower.contains("://") && lower.contains('=') {
        Some(DatabaseType::Sqlserver)
    } else {
        None
    }
}

/// The forms a type accepts, for the message about a URL of no known form.
pub(crate) fn accepted_forms(ty: DatabaseType) -> &'static str {
    match ty {
        DatabaseType::Postgresql => "postgres://, postgresql:// or jdbc:postgresql://",
        DatabaseType::Sqlserver => {
            "sqlserver://, jdbc:sqlserver:// or an ADO.NET connection string"
        }
        DatabaseType::Mysql => "mysql://, jdbc:mysql:// or jdbc:mariadb://",
        DatabaseType::Sqlite => "sqlite://PATH, sqlite::memory: or jdbc:sqlite:",
    }
}

/// Parses a URL already known to be of `ty`'s forms.
pub(crate) fn parse(url: &str, ty: DatabaseType) -> Result<DbUrl, String> {
    let url = url.trim();
    match ty {
        DatabaseType::Postgresql => parse_postgres(url),
        DatabaseType::Sqlserver => parse_sqlserver(url),
        DatabaseType::Mysql => parse_mysql(url),
        DatabaseType::Sqlite => parse_sqlite(url),
    }
}

fn decode(text: &str) -> Result<String, String> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| "has user information that is not valid percent-encoded UTF-8".to_owned())
}

/// The authority, path and query of a `scheme://` URL, parsed by the `url` crate.
fn parse_authority_url(
    text: &str,
    default_port: u16,
) -> Result<(DbUrl, Vec<(String, String)>), String> {
    if let Some(authority) = text.split("://").nth(1) {
        let end = authority.find(['/', '?', ';']).unwrap_or(authority.len());
        if authority[..end].contains('\\') {
            return Err(
                "names an instance (host\\instance), which is not supported; give the port"
                    .to_owned(),
            );
        }
    }
    let parsed = url::Url::parse(text).map_err(|e| format!("is not a valid URL: {e}"))?;
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or("has no host")?
        .to_owned();
    let user = Some(decode(parsed.username())?).filter(|u| !u.is_empty());
    let password = parsed.password().map(decode).transpose()?;
    let database = Some(decode(parsed.path().trim_start_matches('/'))?).filter(|d| !d.is_empty());
    let query = parsed
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    Ok((
        DbUrl {
            host,
            port: parsed.port().unwrap_or(default_port),
            database,
            user,
            password,
            ..DbUrl::default()
        },
        query,
    ))
}

/// Takes `user` and `password` parameters into the parts; the authority's values give way.
fn apply_credentials(db: &mut DbUrl, key: &str, value: &str) -> bool {
    match key {
        "user" => db.user = Some(value.to_owned()),
        "password" => db.password = Some(value.to_owned()),
        _ => return false,
    }
    true
}

fn parse_postgres(text: &str) -> Result<DbUrl, String> {
    let (jdbc, native) = match strip_ci(text, "jdbc:") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mut db, query) = parse_authority_url(native, 5432)?;
    for (key, value) in query {
        let native_key = match (jdbc, key.as_str()) {
            (true, "ApplicationName") => "application_name",
            (true, "connectTimeout") => "connect_timeout",
            (true, "currentSchema") => {
                db.params
                    .insert("options".to_owned(), format!("-c search_path={value}"));
                continue;
            }
            (_, k) => k,
        };
        if apply_credentials(&mut db, native_key, &value) {
            continue;
        }
        match native_key {
            "sslmode" => {
                const MODES: [&str; 5] =
                    ["disable", "prefer", "require", "verify-ca", "verify-full"];
                if !MODES.contains(&value.as_str()) {
                    return Err(format!(
                        "sslmode must be one of {}, got {}",
                        MODES.join(", "),
                        crate::diag::quote(&value)
                    ));
                }
            }
            "connect_timeout" => {
                if value.parse::<u32>().is_err() {
                    return Err(format!(
                        "connect_timeout must be a whole number of seconds, got {}",
                        crate::diag::quote(&value)
                    ));
                }
            }
            "sslrootcert" | "application_name" | "options" => {}
            other => return Err(format!("unknown parameter {other}")),
        }
        db.params.insert(native_key.to_owned(), value);
    }
    Ok(db)
}

fn parse_sqlserver(text: &str) -> Result<DbUrl, String> {
    if let Some(rest) = strip_ci(text, "jdbc:sqlserver://") {
        let mut parts = rest.split(';');
        let address = parts.next().unwrap_or_default();
        let mut db = sqlserver_address(address, ':')?;
        for part in parts.filter(|p| !p.trim().is_empty()) {
            let (key, value) = part.split_once('=').ok_or("has a property without =")?;
            sqlserver_param(&mut db, &key.to_ascii_lowercase(), value)?;
        }
        return Ok(db);
    }
    if strip_ci(text, "sqlserver://").is_some() {
        let (mut db, query) = parse_authority_url(text, 1433)?;
        for (key, value) in query {
            sqlserver_param(&mut db, &key.to_ascii_lowercase(), &value)?;
        }
        return Ok(db);
    }
    // ADO.NET: keys without regard to case and spaces.
    let mut db = DbUrl::default();
    let mut server = None;
    for part in text.split(';').filter(|p| !p.trim().is_empty()) {
        let (key, value) = part.split_once('=').ok_or("has an entry without =")?;
        let key: String = key
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        let value = value.trim();
        match key.as_str() {
            "server" | "datasource" => server = Some(value.to_owned()),
            "database" | "initialcatalog" => db.database = Some(value.to_owned()),
            "userid" | "uid" => db.user = Some(value.to_owned()),
            "password" | "pwd" => db.password = Some(value.to_owned()),
            "encrypt" => sqlserver_param(&mut db, "encrypt", value)?,
            "trustservercertificate" => sqlserver_param(&mut db, "trustservercertificate", value)?,
            "applicationname" => sqlserver_param(&mut db, "applicationname", value)?,
            _ => return Err(format!("unknown connection string key {}", key_name(part))),
        }
    }
    let server = server.ok_or("has no Server")?;
    let server = server.strip_prefix("tcp:").unwrap_or(&server);
    let address = sqlserver_address(server, ',')?;
    Ok(DbUrl {
        host: address.host,
        port: address.port,
        ..db
    })
}

fn key_name(part: &str) -> String {
    part.split('=').next().unwrap_or_default().trim().to_owned()
}

fn sqlserver_address(address: &str, port_separator: char) -> Result<DbUrl, String> {
    if address.contains('\\') {
        return Err(
            "names an instance (host\\instance), which is not supported; give the port".to_owned(),
        );
    }
    let (host, port) = match address.rsplit_once(port_separator) {
        Some((h, p)) => (
            h,
            p.trim()
                .parse::<u16>()
                .map_err(|_| "has an invalid port".to_owned())?,
        ),
        None => (address, 1433),
    };
    if host.trim().is_empty() {
        return Err("has no host".to_owned());
    }
    Ok(DbUrl {
        host: host.trim().to_owned(),
        port,
        ..DbUrl::default()
    })
}

/// A SQL Server parameter by its lower-cased name (native and `jdbc:` spellings).
fn sqlserver_param(db: &mut DbUrl, key: &str, value: &str) -> Result<(), String> {
    let boolean = |name: &str| {
        if value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false") {
            Ok(())
        } else {
            Err(format!(
                "{name} must be true or false, got {}",
                crate::diag::quote(value)
            ))
        }
    };
    match key {
        "user" => db.user = Some(value.to_owned()),
        "password" => db.password = Some(value.to_owned()),
        "database" | "databasename" => db.database = Some(value.to_owned()),
        "encrypt" => {
            boolean("encrypt")?;
            db.params
                .insert("encrypt".to_owned(), value.to_ascii_lowercase());
        }
        "trustservercertificate" => {
            boolean("trustServerCertificate")?;
            db.params.insert(
                "trustServerCertificate".to_owned(),
                value.to_ascii_lowercase(),
            );
        }
        "applicationname" => {
            db.params
                .insert("applicationName".to_owned(), value.to_owned());
        }
        _ => return Err(format!("unknown parameter {key}")),
    }
    Ok(())
}

fn parse_mysql(text: &str) -> Result<DbUrl, String> {
    let native = strip_ci(text, "jdbc:").unwrap_or(text);
    let (mut db, query) = parse_authority_url(native, 3306)?;
    if db.database.is_none() {
        return Err("has no database; write mysql://host:port/database".to_owned());
    }
    for (key, value) in query {
        if apply_credentials(&mut db, &key, &value) {
            continue;
        }
        match key.as_str() {
            "ssl-mode" | "sslMode" => {
                const MODES: [&str; 5] = [
                    "disabled",
                    "preferred",
                    "required",
                    "verify_ca",
                    "verify_identity",
                ];
                let lower = value.to_ascii_lowercase();
                if !MODES.contains(&lower.as_str()) {
                    return Err(format!(
                        "ssl-mode must be one of {}, got {}",
                        MODES.join(", "),
                        crate::diag::quote(&value)
                    ));
                }
                db.params.insert("ssl-mode".to_owned(), lower);
            }
            "ssl-ca" => {
                db.params.insert("ssl-ca".to_owned(), value);
            }
            other => return Err(format!("unknown parameter {other}")),
        }
    }
    Ok(db)
}

fn parse_sqlite(text: &str) -> Result<DbUrl, String> {
    let path = if let Some(rest) = strip_ci(text, "jdbc:sqlite:") {
        rest
    } else if let Some(rest) = strip_ci(text, "sqlite::memory:") {
        if !rest.is_empty() {
            return Err("has text after :memory:".to_owned());
        }
        ":memory:"
    } else if let Some(rest) = strip_ci(text, "sqlite://") {
        rest
    } else {
        return Err(format!(
            "must be one of the forms {}",
            accepted_forms(DatabaseType::Sqlite)
        ));
    };
    if path.is_empty() {
        return Err("has no file path".to_owned());
    }
    if path.contains('?') {
        return Err("takes no parameters".to_owned());
    }
    if path != ":memory:" && text.len() > "sqlite::memory:".len() && path.starts_with(":memory:") {
        return Err("has text after :memory:".to_owned());
    }
    Ok(DbUrl {
        sqlite: Some(path.to_owned()),
        ..DbUrl::default()
    })
}

fn strip_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use DatabaseType::*;

    #[test]
    fn cfg_39_forms_belong_to_types() {
        assert_eq!(form_type("postgres://a@b/c"), Some(Postgresql));
        assert_eq!(form_type("postgresql://a@b/c"), Some(Postgresql));
        assert_eq!(form_type("jdbc:postgresql://b/c"), Some(Postgresql));
        assert_eq!(form_type("sqlserver://b"), Some(Sqlserver));
        assert_eq!(form_type("jdbc:sqlserver://b;user=a"), Some(Sqlserver));
        assert_eq!(
            form_type("Server=db;User Id=app;Password=x"),
            Some(Sqlserver)
        );
        assert_eq!(form_type("mysql://a@b/c"), Some(Mysql));
        assert_eq!(form_type("jdbc:mariadb://a@b/c"), Some(Mysql));
        assert_eq!(form_type("sqlite://x.db"), Some(Sqlite));
        assert_eq!(form_type("sqlite::memory:"), Some(Sqlite));
        assert_eq!(form_type("jdbc:sqlite:x.db"), Some(Sqlite));
        assert_eq!(form_type("http://x"), None);
    }

    #[test]
    fn cfg_39_postgres_native_with_percent_encoded_credentials() {
        let db = parse(
            "postgres://app:p%40ss@db:6543/orders?sslmode=require",
            Postgresql,
        )
        .unwrap();
        assert_eq!(db.host, "db");
        assert_eq!(db.port, 6543);
        assert_eq!(db.database.as_deref(), Some("orders"));
        assert_eq!(db.user.as_deref(), Some("app"));
        assert_eq!(db.password.as_deref(), Some("p@ss"));
        assert_eq!(
            db.params.get("sslmode").map(String::as_str),
            Some("require")
        );
        assert_eq!(parse("postgres://db", Postgresql).unwrap().port, 5432);
    }

    #[test]
    fn cfg_40_postgres_jdbc_spellings_are_translated() {
        let db = parse(
            "jdbc:postgresql://db/app?user=app&password=pw&ApplicationName=x&connectTimeout=5&currentSchema=s",
            Postgresql,
        )
        .unwrap();
        assert_eq!(db.user.as_deref(), Some("app"));
        assert_eq!(db.password.as_deref(), Some("pw"));
        assert_eq!(
            db.params.get("application_name").map(String::as_str),
            Some("x")
        );
        assert_eq!(
            db.params.get("connect_timeout").map(String::as_str),
            Some("5")
        );
        assert_eq!(
            db.params.get("options").map(String::as_str),
            Some("-c search_path=s")
        );
    }

    #[test]
    fn cfg_40_unknown_parameters_are_named() {
        assert_eq!(
            parse("postgres://a@db/app?foo=1", Postgresql).unwrap_err(),
            "unknown parameter foo"
        );
        assert!(parse("postgres://a@db/app?sslmode=maybe", Postgresql).is_err());
        assert_eq!(
            parse("mysql://a@db/app?bar=1", Mysql).unwrap_err(),
            "unknown parameter bar"
        );
        assert!(parse("jdbc:sqlserver://db;nope=1", Sqlserver).is_err());
    }

    #[test]
    fn cfg_39_sqlserver_forms() {
        let db = parse(
            "jdbc:sqlserver://db:1500;user=app;password=pw;databaseName=q;encrypt=false",
            Sqlserver,
        )
        .unwrap();
        assert_eq!((db.host.as_str(), db.port), ("db", 1500));
        assert_eq!(db.database.as_deref(), Some("q"));
        assert_eq!(db.user.as_deref(), Some("app"));
        let ado = parse("Server=db,1444;Database=q;User Id=app;Password=pw;Encrypt=true;TrustServerCertificate=false", Sqlserver).unwrap();
        assert_eq!((ado.host.as_str(), ado.port), ("db", 1444));
        assert_eq!(ado.user.as_deref(), Some("app"));
        let ado = parse("Data Source=db;Initial Catalog=q;UID=app;PWD=pw", Sqlserver).unwrap();
        assert_eq!(ado.port, 1433);
        assert!(parse("Server=db\\inst;UID=a", Sqlserver).is_err());
        let native = parse("sqlserver://app:pw@db/q?encrypt=true", Sqlserver).unwrap();
        assert_eq!(native.database.as_deref(), Some("q"));
    }

    #[test]
    fn cfg_39_mysql_and_sqlite_forms() {
        let db = parse("jdbc:mysql://app@db/q?sslMode=REQUIRED", Mysql).unwrap();
        assert_eq!(db.port, 3306);
        assert_eq!(
            db.params.get("ssl-mode").map(String::as_str),
            Some("required")
        );
        assert!(parse("mysql://app@db", Mysql).is_err());
        assert_eq!(
            parse("sqlite://data/qb.db", Sqlite)
                .unwrap()
                .sqlite
                .as_deref(),
            Some("data/qb.db")
        );
        assert_eq!(
            parse("sqlite:///var/lib/qb.db", Sqlite)
                .unwrap()
                .sqlite
                .as_deref(),
            Some("/var/lib/qb.db")
        );
        assert_eq!(
            parse("sqlite::memory:", Sqlite).unwrap().sqlite.as_deref(),
            Some(":memory:")
        );
        assert_eq!(
            parse("jdbc:sqlite::memory:", Sqlite)
                .unwrap()
                .sqlite
                .as_deref(),
            Some(":memory:")
        );
        assert_eq!(
            parse("jdbc:sqlite:qb.db", Sqlite)
                .unwrap()
                .sqlite
                .as_deref(),
            Some("qb.db")
        );
        assert!(parse("sqlite://", Sqlite).is_err());
    }
}
