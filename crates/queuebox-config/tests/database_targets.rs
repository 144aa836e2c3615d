//! The typed connection target of each `database.type` (config.md CFG-39..43): every URL form
//! of SQLite and MySQL/MariaDB becomes its target, every refusal names its key, and no printed
//! form holds a password.

mod common;

use common::{TempDir, errors, ok, options};
use queuebox_config::{DatabaseTarget, MysqlSslMode, MysqlTarget, SqliteTarget, load};
use queuebox_core::Secret;

fn target(yaml: &str) -> DatabaseTarget {
    ok(yaml).config.database.target
}

fn mysql(yaml: &str) -> MysqlTarget {
    match target(yaml) {
        DatabaseTarget::Mysql(t) => t,
        other => panic!("expected a MySQL target, got {other:?}"),
    }
}

/// The SQLite target of `url`, loaded in a working directory of its own (CFG-7).
fn sqlite(url: &str) -> (SqliteTarget, std::path::PathBuf) {
    let dir = TempDir::new();
    let file = dir.write(
        "config.yml",
        &format!("database:\n  type: sqlite\n  url: \"{url}\"\n"),
    );
    let loaded = load(&options(&dir, Some(file), &[])).expect("valid");
    match loaded.config.database.target {
        DatabaseTarget::Sqlite(t) => (t, dir.path().to_owned()),
        other => panic!("expected a SQLite target, got {other:?}"),
    }
}

#[test]
fn cfg_42_sqlite_relative_file_resolves_against_the_working_directory() {
    let (t, cwd) = sqlite("sqlite://data/qb.db");
    assert_eq!(t, SqliteTarget::File(cwd.join("data/qb.db")));
    let (t, cwd) = sqlite("jdbc:sqlite:qb.db");
    assert_eq!(t, SqliteTarget::File(cwd.join("qb.db")));
}

#[test]
fn cfg_42_sqlite_absolute_file_stays_absolute() {
    let (t, _) = sqlite("sqlite:///var/lib/qb.db");
    assert_eq!(t, SqliteTarget::File("/var/lib/qb.db".into()));
}

#[test]
fn cfg_42_sqlite_memory_in_both_spellings() {
    assert_eq!(sqlite("sqlite::memory:").0, SqliteTarget::Memory);
    assert_eq!(sqlite("jdbc:sqlite::memory:").0, SqliteTarget::Memory);
}

#[test]
fn cfg_39_sqlite_url_errors_name_the_url_key() {
    assert_eq!(
        errors("database:\n  type: sqlite\n  url: \"sqlite://\"\n"),
        ["- database.url: has no file path"]
    );
    assert_eq!(
        errors("database:\n  type: sqlite\n  url: \"sqlite://qb.db?mode=ro\"\n"),
        ["- database.url: takes no parameters"]
    );
    assert_eq!(
        errors("database:\n  type: sqlite\n  url: \"sqlite::memory:x\"\n"),
        ["- database.url: has text after :memory:"]
    );
    assert_eq!(
        errors("database:\n  type: sqlite\n  url: \"mysql://a@db/q\"\n"),
        ["- database.url: a mysql URL does not fit database.type sqlite; set database.type: mysql"]
    );
}

#[test]
fn cfg_39_mysql_native_form_with_defaults() {
    let t = mysql("database:\n  type: mysql\n  url: mysql://app:pw@db/queue\n");
    assert_eq!(
        t,
        MysqlTarget {
            host: "db".into(),
            port: 3306,
            database: "queue".into(),
            user: "app".into(),
            password: Secret::new("pw"),
            ssl_mode: MysqlSslMode::Preferred,
            ssl_ca: None,
        }
    );
}

#[test]
fn cfg_39_mysql_and_mariadb_jdbc_forms_have_the_same_shape() {
    for scheme in ["jdbc:mysql", "jdbc:mariadb"] {
        let t = mysql(&format!(
            "database:\n  type: mysql\n  url: \"{scheme}://db:3307/q?user=app&password=p%40ss&sslMode=VERIFY_IDENTITY\"\n"
        ));
        assert_eq!((t.host.as_str(), t.port), ("db", 3307), "{scheme}");
        assert_eq!((t.database.as_str(), t.user.as_str()), ("q", "app"));
        assert_eq!(t.password.expose(), "p@ss");
        assert_eq!(t.ssl_mode, MysqlSslMode::VerifyIdentity);
    }
}

#[test]
fn cfg_40_mysql_ssl_parameters() {
    let t = mysql(
        "database:\n  type: mysql\n  url: \"mysql://app@db/q?ssl-mode=Verify_CA&ssl-ca=/etc/ca.pem\"\n",
    );
    assert_eq!(t.ssl_mode, MysqlSslMode::VerifyCa);
    assert_eq!(t.ssl_ca.as_deref(), Some("/etc/ca.pem"));
    for (mode, expected) in [
        ("disabled", MysqlSslMode::Disabled),
        ("preferred", MysqlSslMode::Preferred),
        ("REQUIRED", MysqlSslMode::Required),
    ] {
        let t = mysql(&format!(
            "database:\n  type: mysql\n  url: \"mysql://app@db/q?ssl-mode={mode}\"\n"
        ));
        assert_eq!(t.ssl_mode, expected, "{mode}");
    }
}

#[test]
fn cfg_41_mysql_username_and_password_keys_win_over_the_url() {
    let t = mysql(
        "database:\n  type: mysql\n  url: mysql://url-user:url-pw@db/q\n  username: key-user\n  password: key-pw\n",
    );
    assert_eq!(t.user, "key-user");
    assert_eq!(t.password.expose(), "key-pw");
}

#[test]
fn cfg_39_mysql_url_errors_name_the_url_key() {
    assert_eq!(
        errors("database:\n  type: mysql\n  url: mysql://app@db\n"),
        ["- database.url: has no database; write mysql://host:port/database"]
    );
    assert_eq!(
        errors("database:\n  type: mysql\n  url: \"mysql://app@db/q?ssl-mode=sometimes\"\n"),
        [
            "- database.url: ssl-mode must be one of disabled, preferred, required, verify_ca, verify_identity, got \"sometimes\""
        ]
    );
    assert_eq!(
        errors("database:\n  type: mysql\n  url: \"mysql://app@db/q?charset=utf8\"\n"),
        ["- database.url: unknown parameter charset"]
    );
    assert_eq!(
        errors("database:\n  type: mysql\n  url: mysql://db/q\n"),
        ["- database.username: required; set it here or in database.url"]
    );
}

#[test]
fn cfg_43_no_printed_form_of_a_mysql_or_sqlserver_database_holds_the_password() {
    for yaml in [
        "database:\n  type: mysql\n  url: \"jdbc:mariadb://db/q?user=app&password=s3cr3t-Pa55\"\n",
        "database:\n  type: mysql\n  url: mysql://app:s3cr3t-Pa55@db/q\n",
        "database:\n  type: sqlserver\n  url: Server=db,1433;Database=q;User Id=app;Password=s3cr3t-Pa55\n",
    ] {
        let database = ok(yaml).config.database;
        assert!(
            !database.masked_url.contains("s3cr3t"),
            "{}",
            database.masked_url
        );
        let debug = format!("{database:?}");
        assert!(!debug.contains("s3cr3t"), "{debug}");
    }
}

#[test]
fn cfg_39_sqlserver_stays_a_validated_url() {
    let url = "sqlserver://app:pw@db/q?encrypt=true";
    match target(&format!("database:\n  type: sqlserver\n  url: \"{url}\"\n")) {
        DatabaseTarget::Sqlserver { url: kept } => assert_eq!(kept.expose(), url),
        other => panic!("expected a SQL Server URL, got {other:?}"),
    }
}
