//! The contract fixtures that the client suites (Rust, Go, TypeScript) create their inbox table
//! from must be the table QueueBox's own migrations create, or a client could pass its cases on a
//! table no user has. For SQLite and MySQL the fixture is the store's inbox migration, byte for
//! byte, once its `{name}` placeholders are rendered with the default names. (The PostgreSQL
//! fixture is different on purpose: it creates the table in its own schema and names its
//! constraints after the mapped table name, for PULL-C13.)

use std::fs;
use std::path::PathBuf;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = repository().join(relative);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `{inbox}` → `inbox`, `{source}` → `source`, …: the default names of every placeholder. A
/// JSON literal such as `'{}'` is no placeholder and stays.
fn with_default_names(text: &str) -> String {
    let mut rendered = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        rendered.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if close > 0
                    && after[..close]
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_') =>
            {
                rendered.push_str(&after[..close]);
                rest = &after[close + 1..];
            }
            _ => {
                rendered.push('{');
                rest = after;
            }
        }
    }
    rendered.push_str(rest);
    rendered
}

/// The fixture's inbox part: from the migration's own first line to the application table.
fn inbox_part(fixture: &str) -> &str {
    let start = fixture
        .find("-- Version 2: create inbox")
        .expect("the fixture holds version 2 of the migrations");
    let end = fixture
        .find("-- Application table")
        .expect("the fixture ends with the application table of the cases");
    fixture[start..end].trim()
}

fn assert_fixture_is_migration(dialect: &str, migration: &str) {
    let fixture = with_default_names(&read(&format!("clients/contract/fixtures/{dialect}.sql")));
    let migration_text = read(migration);
    assert_eq!(
        inbox_part(&fixture),
        migration_text.trim(),
        "clients/contract/fixtures/{dialect}.sql no longer creates the inbox table of {migration}"
    );
}

#[test]
fn the_sqlite_fixture_is_the_sqlite_stores_inbox_migration() {
    assert_fixture_is_migration(
        "sqlite",
        "crates/queuebox-store-sqlite/migrations/0002_create_inbox.sql",
    );
}

#[test]
fn the_mysql_fixture_is_the_mysql_stores_inbox_migration() {
    assert_fixture_is_migration(
        "mysql",
        "crates/queuebox-store-mysql/migrations/0002_create_inbox.sql",
    );
}

/// The fixture's version 4 part (after the application table): the statements that add
/// `raw_body` (storeRawBody, issue 15), comment lines left out.
fn version_4_statements(text: &str) -> String {
    let start = text
        .find("-- Version 4: add inbox raw_body")
        .expect("the text holds version 4 of the migrations");
    text[start..]
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_fixture_adds_the_raw_body_column_of_version_4() {
    let sqlite = with_default_names(&read("clients/contract/fixtures/sqlite.sql"));
    assert_eq!(
        version_4_statements(&sqlite),
        version_4_statements(&read(
            "crates/queuebox-store-sqlite/migrations/0004_add_inbox_raw_body.sql"
        )),
    );
    let mysql = with_default_names(&read("clients/contract/fixtures/mysql.sql"));
    let column = "ALTER TABLE inbox ADD COLUMN raw_body LONGBLOB NULL";
    assert!(version_4_statements(&mysql).contains(column));
    assert!(
        read("crates/queuebox-store-mysql/migrations/0004_add_inbox_raw_body.sql").contains(column)
    );
    let postgres = with_default_names(&read("clients/contract/fixtures/postgresql.sql"));
    assert!(version_4_statements(&postgres).contains("ADD COLUMN IF NOT EXISTS raw_body BYTEA"));
    assert!(
        read("crates/queuebox-store-postgres/migrations/0004_add_inbox_raw_body.sql")
            .contains("ADD COLUMN IF NOT EXISTS raw_body BYTEA")
    );
}
