//! Every example in docs/ and examples/ is loaded or executed, so the docs cannot rot
//! (quality.md, "Docs" tier). Conventions for doc authors:
//! - ```yaml: a complete configuration that loads; first line `# fragment` adds a database
//!   section when it has none; first line `# invalid` must fail, and a ```text block right
//!   after it must equal the error message.
//! - ```sh blocks made of `QUEUEBOX_*=value` lines: a whole configuration from variables.
//! - ```sql: PostgreSQL, run in document order per file on freshly migrated tables; `$n`
//!   parameters get sample values of their type.
//! - ```sqlite: SQLite, run in document order on a file `queuebox migrate` created; first line
//!   `-- fails with: <text>` must fail with an error that starts with that text.

mod support;

use std::path::{Path, PathBuf};

use support::markdown::{CodeBlock, code_blocks, doc_files, repo_root, split_sql};
use support::pg::TestSchema;
use support::process::Scratch;
use tokio_postgres::types::{ToSql, Type};

const FRAGMENT_DATABASE: &str = "database:\n  url: postgres://app@db.internal:5432/app\n";

/// Points every `file:<path>` secret at a file the test creates, and returns the variables that
/// the `${NAME}` placeholders need.
fn prepare_secrets(text: &str, scratch: &Path) -> (String, Vec<(String, String)>) {
    let mut out = String::new();
    let mut rest = text;
    let mut n = 0;
    while let Some(pos) = rest.find("file:") {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 5..];
        // `file: path` (with a space) is a YAML key such as a log destination's file, not a
        // secret reference.
        if after.starts_with(char::is_whitespace) {
            out.push_str("file:");
            rest = after;
            continue;
        }
        let end = after
            .find(|c: char| c.is_whitespace() || c == '\'' || c == '"')
            .unwrap_or(after.len());
        n += 1;
        let secret = scratch.join(format!("secret-{n}"));
        std::fs::write(&secret, "secret-value\n").unwrap();
        out.push_str(&format!("file:{}", secret.display()));
        rest = &after[end..];
    }
    out.push_str(rest);
    let mut env = Vec::new();
    let mut scan = out.as_str();
    while let Some(pos) = scan.find("${") {
        let after = &scan[pos + 2..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            env.push((name, "placeholder-value".to_owned()));
        }
        scan = after;
    }
    (out, env)
}

fn load_yaml(
    text: &str,
    scratch: &Path,
) -> Result<queuebox_config::Loaded, queuebox_config::LoadError> {
    let (text, env) = prepare_secrets(text, scratch);
    let file = scratch.join("config.yml");
    std::fs::write(&file, text).unwrap();
    queuebox_config::load(&queuebox_config::LoadOptions {
        config_path: Some(file),
        env,
        cwd: scratch.to_owned(),
        etc_path: scratch.join("no-etc.yml"),
    })
}

fn env_block(block: &CodeBlock) -> Option<Vec<(String, String)>> {
    let mut vars = Vec::new();
    for line in block.text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line.split_once('=')?;
        if !name.starts_with("QUEUEBOX_") {
            return None;
        }
        let value = value.trim_matches(|c| c == '\'' || c == '"');
        vars.push((name.to_owned(), value.to_owned()));
    }
    (!vars.is_empty()).then_some(vars)
}

#[test]
fn docs_every_configuration_block_loads() {
    let scratch = Scratch::new("yaml");
    let mut checked = 0;
    for file in doc_files() {
        let blocks = code_blocks(&file);
        for (index, block) in blocks.iter().enumerate() {
            match block.lang.as_str() {
                "yaml" | "yml" => {
                    checked += 1;
                    if block.first_line() == "# invalid" {
                        let err =
                            load_yaml(&block.text, scratch.path())
                                .err()
                                .unwrap_or_else(|| {
                                    panic!("{}: loads, but is marked invalid", block.place())
                                });
                        if let Some(next) = blocks.get(index + 1).filter(|b| b.lang == "text") {
                            assert_eq!(
                                err.to_string().trim_end(),
                                next.text.trim_end(),
                                "{}: the error shown differs from the real one",
                                block.place()
                            );
                        }
                        continue;
                    }
                    let mut text = block.text.clone();
                    if block.first_line() == "# fragment"
                        && !text.lines().any(|l| l.starts_with("database:"))
                    {
                        text.push_str(FRAGMENT_DATABASE);
                    }
                    if let Err(err) = load_yaml(&text, scratch.path()) {
                        panic!("{}: does not load:\n{err}", block.place());
                    }
                }
                "sh" | "bash" => {
                    let Some(env) = env_block(block) else {
                        continue;
                    };
                    checked += 1;
                    let env = env
                        .into_iter()
                        .map(|(k, v)| {
                            let (v, _) = prepare_secrets(&v, scratch.path());
                            (k, v)
                        })
                        .collect();
                    let loaded = queuebox_config::load(&queuebox_config::LoadOptions {
                        config_path: None,
                        env,
                        cwd: scratch.path().to_owned(),
                        etc_path: scratch.path().join("no-etc.yml"),
                    });
                    if let Err(err) = loaded {
                        panic!("{}: the variables do not load:\n{err}", block.place());
                    }
                }
                _ => {}
            }
        }
    }
    assert!(checked > 0, "no configuration block found in docs/");
}

#[test]
fn cfg_120_every_example_file_loads() {
    let scratch = Scratch::new("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        if let Err(err) = load_yaml(&text, scratch.path()) {
            panic!("{}: does not load:\n{err}", file.display());
        }
    }
}

/// The README's two commands: the first is `cargo run` at the workspace root, which must mean the
/// `queuebox` binary (the workspace's only default member; the bench crate has binaries too), with
/// a configuration under `examples/` that loads; the second is `scripts/test.sh`.
#[test]
fn readme_opens_with_the_run_and_test_commands_and_they_resolve() {
    let root = repo_root();
    let blocks = code_blocks(&root.join("README.md"));
    let first = blocks.first().expect("README.md has code blocks");
    assert_eq!(first.lang, "sh", "the README opens with the two commands");
    let commands: Vec<&str> = first
        .text
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands.len(), 2, "{commands:?}");
    let config = commands[0]
        .strip_prefix("cargo run --release -- run --config ")
        .unwrap_or_else(|| panic!("the run command: {}", commands[0]));
    assert!(config.starts_with("examples/"), "{config}");
    let scratch = Scratch::new("readme");
    let text = std::fs::read_to_string(root.join(config)).expect("the quickstart configuration");
    if let Err(err) = load_yaml(&text, scratch.path()) {
        panic!("{config}: does not load:\n{err}");
    }
    assert_eq!(commands[1], "scripts/test.sh");
    assert!(root.join("scripts/test.sh").is_file());

    let metadata = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(&root)
        .output()
        .expect("cargo metadata runs");
    assert!(metadata.status.success(), "{metadata:?}");
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout).unwrap();
    let defaults = metadata["workspace_default_members"]
        .as_array()
        .expect("workspace_default_members");
    assert_eq!(
        defaults.len(),
        1,
        "cargo run must pick one package: {defaults:?}"
    );
    let package = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == defaults[0])
        .expect("the default member is a package");
    let bins: Vec<&str> = package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        bins,
        ["queuebox"],
        "cargo run must pick the queuebox binary"
    );
}

/// Sample arguments for a prepared statement, by parameter type.
fn sample_params(types: &[Type]) -> Vec<Box<dyn ToSql + Sync + Send>> {
    types
        .iter()
        .enumerate()
        .map(|(i, ty)| -> Box<dyn ToSql + Sync + Send> {
            match *ty {
                Type::UUID => Box::new(uuid::Uuid::new_v4()),
                Type::TEXT | Type::VARCHAR | Type::BPCHAR => Box::new(format!("sample-{}", i + 1)),
                Type::INT4 => Box::new(1i32),
                Type::INT8 => Box::new(1i64),
                Type::BOOL => Box::new(true),
                Type::JSON | Type::JSONB => Box::new(serde_json::json!({"sample": i + 1})),
                Type::TIMESTAMPTZ => Box::new(std::time::SystemTime::now()),
                ref other => panic!("no sample value for a parameter of type {other}"),
            }
        })
        .collect()
}

fn migrate_schema(schema: &TestSchema, scratch: &Path) {
    let config = scratch.join("migrate.yml");
    std::fs::write(
        &config,
        format!("database:\n  url: \"{}\"\n", schema.queuebox_url()),
    )
    .unwrap();
    let output = support::process::queuebox(scratch)
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "queuebox migrate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn docs_every_sql_block_runs_on_postgresql() {
    let scratch = Scratch::new("sql");
    let mut ran = 0;
    for file in doc_files() {
        let blocks: Vec<CodeBlock> = code_blocks(&file)
            .into_iter()
            .filter(|b| b.lang == "sql")
            .collect();
        if blocks.is_empty() {
            continue;
        }
        let schema = TestSchema::create("docs").await;
        migrate_schema(&schema, scratch.path());
        for block in &blocks {
            for statement in split_sql(&block.text) {
                ran += 1;
                let client = schema.client();
                let result = if statement.contains("$1") {
                    match client.prepare(&statement).await {
                        Ok(prepared) => {
                            let params = sample_params(prepared.params());
                            let refs: Vec<&(dyn ToSql + Sync)> = params
                                .iter()
                                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                                .collect();
                            client.execute(&prepared, &refs).await.map(|_| ())
                        }
                        Err(err) => Err(err),
                    }
                } else {
                    client.batch_execute(&statement).await
                };
                if let Err(err) = result {
                    panic!("{}: statement failed: {err:?}\n{statement}", block.place());
                }
            }
        }
        schema.drop().await;
    }
    assert!(ran > 0, "no SQL statement found in docs/");
}

#[test]
fn split_sql_respects_quotes_comments_and_dollar_bodies() {
    let parts = split_sql(
        "-- a; comment\nSELECT ';';\nCREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1; END $$ LANGUAGE plpgsql;\nSELECT 2",
    );
    assert_eq!(parts.len(), 3, "{parts:?}");
    assert_eq!(parts[0], "SELECT ';'");
    assert!(parts[1].contains("RETURN 1; END"));
    assert_eq!(parts[2], "SELECT 2");
}

/// Runs one statement on SQLite to its end (a `RETURNING` statement returns rows).
fn run_sqlite(conn: &rusqlite::Connection, statement: &str) -> rusqlite::Result<()> {
    let mut prepared = conn.prepare(statement)?;
    let mut rows = prepared.query([])?;
    while rows.next()?.is_some() {}
    Ok(())
}

/// SCH-28..30 on SQLite: every `sqlite` block of docs/ runs on a file that `queuebox migrate`
/// created, as an application's connection runs it. A block that opens with
/// `-- fails with: <text>` must fail with an error that starts with that text, and change
/// nothing.
#[test]
fn docs_every_sqlite_block_runs_on_sqlite() {
    let scratch = Scratch::new("sqlite-docs");
    let config = scratch.write(
        "migrate.yml",
        "database:\n  type: sqlite\n  url: sqlite://docs.db\n",
    );
    let output = support::process::queuebox(scratch.path())
        .args(["migrate", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "queuebox migrate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let conn = rusqlite::Connection::open(scratch.path().join("docs.db")).unwrap();
    let count = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM outbox", [], |r| r.get(0))
            .unwrap()
    };
    let (mut ran, mut refused) = (0, 0);
    for file in doc_files() {
        for block in code_blocks(&file)
            .into_iter()
            .filter(|b| b.lang == "sqlite")
        {
            let expected = block
                .text
                .lines()
                .next()
                .and_then(|l| l.trim_start().strip_prefix("-- fails with: "))
                .map(str::to_owned);
            for statement in split_sql(&block.text) {
                let before = count(&conn);
                let result = run_sqlite(&conn, &statement);
                match (&expected, result) {
                    (None, Ok(())) => ran += 1,
                    (None, Err(err)) => {
                        panic!("{}: statement failed: {err}\n{statement}", block.place())
                    }
                    (Some(text), Err(err)) => {
                        assert!(
                            err.to_string().starts_with(text.as_str()),
                            "{}: failed with {err:?}, not {text:?}",
                            block.place()
                        );
                        assert_eq!(count(&conn), before, "{}: changed a row", block.place());
                        refused += 1;
                    }
                    (Some(text), Ok(())) => panic!(
                        "{}: should fail with {text:?} but ran:\n{statement}",
                        block.place()
                    ),
                }
            }
        }
    }
    assert!(ran > 0 && refused > 0, "ran {ran}, refused {refused}");
}
