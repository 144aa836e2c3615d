//! `bench/mysql.sh`: QueueBox on MariaDB (the MySQL store) beside floors of the store's own
//! statements measured in the same run, and beside the same workload on the local PostgreSQL
//! (issue 19). Phases, in this order:
//!
//! 1. outbox floor (MariaDB): 100,000 keyless rows; the store's own claim (100) + mark sent
//!    (`OutboxStore::claim` + `finish`, the statements of `queries/outbox/`) in a loop with no
//!    delivery, until none is left;
//! 2. outbox drain (MariaDB): `queuebox run` with a `log` destination writing to /dev/null; idle
//!    RSS 3 s after start; 100,000 rows inserted in one transaction; time until every row is
//!    `sent` (the count read every 100 ms); peak RSS;
//! 3. the same drain on PostgreSQL (a fresh schema);
//! 4. the outbox floor again;
//! 5. intake floor (MariaDB): the store's own inbox insert (`IntakeStore::insert_batch`, the
//!    statements of `queries/inbox/insert.sql` and `stored.sql`) with one row at a time, one
//!    after the other, for `--seconds`;
//! 6. HTTP intake (MariaDB): `queuebox run` with one `http` pull source; wrk (`-t2 -c64`,
//!    `bench/inbox-intake.lua`) for `--seconds`; rows stored ÷ wrk's run time;
//! 7. the same intake on PostgreSQL;
//! 8. the intake floor again.
//!
//! Every MariaDB phase has a database of its own, dropped at the end. It prints a markdown
//! section for docs/benchmarks.md.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use queuebox_bench::load_config_file;
use queuebox_bench::procfs;
use queuebox_store::{
    Consumption, IntakeStore, NewInboxRow, OutboxStore, Schedule, StoredState, TerminalWrite,
};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    queuebox: PathBuf,
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/test")]
    pg_url: String,
    /// The MariaDB (or MySQL) server: a `mysql://` URL without a database.
    #[arg(long, default_value = "mysql://root@127.0.0.1:3306")]
    mysql_url: String,
    #[arg(long, default_value_t = 100_000)]
    rows: i64,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long)]
    lua: PathBuf,
    #[arg(long)]
    work: PathBuf,
}

struct Drain {
    seconds: f64,
    idle_kb: u64,
    peak_kb: u64,
}

struct Intake {
    stored: i64,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
    peak_kb: u64,
    non_2xx: String,
}

fn database_yaml(db: &Db) -> String {
    match db {
        Db::Mysql { url, database } => {
            format!("database:\n  type: mysql\n  url: \"{url}/{database}\"\n")
        }
        Db::Postgres { url, schema } => {
            format!("database:\n  url: \"{url}?options=-c%20search_path%3D{schema}\"\n")
        }
    }
}

enum Db {
    Mysql { url: String, database: String },
    Postgres { url: String, schema: String },
}

/// Host and port of a `mysql://user@host:port` URL, for the `mariadb` client.
fn mysql_host_port(url: &str) -> (String, String, String) {
    let rest = url.trim_start_matches("mysql://");
    let (user, host) = rest.split_once('@').unwrap_or(("root", rest));
    let (host, port) = host.split_once(':').unwrap_or((host, "3306"));
    (
        user.to_owned(),
        host.to_owned(),
        port.trim_end_matches('/').to_owned(),
    )
}

/// Runs `sql` with the `mariadb` client (the database `database`, or none); its output.
fn mariadb(url: &str, database: Option<&str>, sql: &str) -> Result<String> {
    let (user, host, port) = mysql_host_port(url);
    let mut command = Command::new("mariadb");
    command.args(["-h", &host, "-P", &port, "-u", &user, "-N", "-B"]);
    if let Some(database) = database {
        command.args(["-D", database]);
    }
    let out = command.args(["-e", sql]).output()?;
    if !out.status.success() {
        bail!("mariadb failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn migrate(args: &Args, dir: &Path, db: &Db) -> Result<()> {
    let config = dir.join("migrate.yml");
    std::fs::write(&config, database_yaml(db))?;
    let out = Command::new(&args.queuebox)
        .args(["migrate", "--config"])
        .arg(&config)
        .current_dir(dir)
        .output()?;
    if !out.status.success() {
        bail!("migrate failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

fn psql(url: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql")
        .args([url, "-qAtX", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()?;
    if !out.status.success() {
        bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn pg_schema_url(url: &str, schema: &str) -> String {
    format!("{url}?options=-c%20search_path%3D{schema}")
}

/// Inserts `rows` keyless outbox rows in one transaction, then `ANALYZE` (as bench/outbox.sh
/// does on PostgreSQL, whose planner otherwise still sees an empty table).
fn insert_outbox(db: &Db, rows: i64) -> Result<()> {
    match db {
        Db::Mysql { url, database } => {
            mariadb(
                url,
                Some(database),
                &format!(
                    "SET SESSION max_recursive_iterations = {rows} + 1;
                     START TRANSACTION;
                     INSERT INTO outbox (topic, payload)
                       WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
                       SELECT 'bench.drain', JSON_OBJECT('n', i) FROM n;
                     COMMIT;
                     ANALYZE TABLE outbox;"
                ),
            )?;
        }
        Db::Postgres { url, schema } => {
            psql(
                &pg_schema_url(url, schema),
                &format!(
                    "BEGIN; INSERT INTO outbox (topic, payload) SELECT 'bench.drain', jsonb_build_object('n', i) FROM generate_series(1, {rows}) i; ANALYZE outbox; COMMIT;"
                ),
            )?;
        }
    }
    Ok(())
}

fn count(db: &Db, sql: &str) -> Result<i64> {
    match db {
        Db::Mysql { url, database } => Ok(mariadb(url, Some(database), sql)?.parse()?),
        Db::Postgres { url, schema } => Ok(psql(&pg_schema_url(url, schema), sql)?.parse()?),
    }
}

fn start(args: &Args, dir: &Path, yaml: &str) -> Result<Child> {
    let config = dir.join("run.yml");
    std::fs::write(&config, yaml)?;
    let log = std::fs::File::create(dir.join("queuebox.log"))?;
    let child = Command::new(&args.queuebox)
        .args(["run", "--config"])
        .arg(&config)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    // Wait for the start line.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(dir.join("queuebox.log")).unwrap_or_default();
        if text.contains("QueueBox started") {
            return Ok(child);
        }
        if Instant::now() > deadline {
            bail!("queuebox did not start: {text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

fn drain(args: &Args, dir: &Path, db: &Db) -> Result<Drain> {
    std::fs::create_dir_all(dir)?;
    migrate(args, dir, db)?;
    let yaml = format!(
        "{}server:\n  httpPort: 0\n  managementPort: 0\n\
         destinations:\n  out:\n    type: log\n    file: /dev/null\n\
         routes:\n  - topicPattern: \"**\"\n    destination: out\n",
        database_yaml(db)
    );
    let child = start(args, dir, &yaml)?;
    std::thread::sleep(Duration::from_secs(3));
    let idle = procfs::memory(child.id())?;
    insert_outbox(db, args.rows)?;
    let started = Instant::now();
    loop {
        let sent = count(db, "SELECT count(*) FROM outbox WHERE state = 'sent'")?;
        if sent >= args.rows {
            break;
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("the drain did not end within 600 s ({sent} sent)");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let seconds = started.elapsed().as_secs_f64();
    let peak = procfs::memory(child.id())?;
    stop(child);
    Ok(Drain {
        seconds,
        idle_kb: idle.rss_kb,
        peak_kb: peak.peak_kb,
    })
}

/// A database of its own on the MariaDB server, created now and dropped by `drop_mysql`.
fn new_mysql(args: &Args, name: &str) -> Result<Db> {
    let database = format!("qb_mysql_bench_{}_{name}", std::process::id());
    mariadb(
        &args.mysql_url,
        None,
        &format!("DROP DATABASE IF EXISTS {database}; CREATE DATABASE {database}"),
    )?;
    Ok(Db::Mysql {
        url: args.mysql_url.clone(),
        database,
    })
}

fn drop_mysql(args: &Args, db: &Db) -> Result<()> {
    if let Db::Mysql { database, .. } = db {
        mariadb(
            &args.mysql_url,
            None,
            &format!("DROP DATABASE IF EXISTS {database}"),
        )?;
    }
    Ok(())
}

/// The MySQL store, connected as QueueBox connects it, from the same `database` block.
async fn mysql_store(dir: &Path, db: &Db) -> Result<queuebox_store_mysql::MysqlStore> {
    let file = dir.join("store.yml");
    std::fs::write(&file, database_yaml(db))?;
    let config = load_config_file(&file, dir)?;
    Ok(queuebox_store_mysql::MysqlStore::connect(&config.database).await?)
}

/// The store's own claim + mark sent in a loop, no delivery: rows per second.
fn outbox_floor(args: &Args, dir: &Path, name: &str) -> Result<f64> {
    std::fs::create_dir_all(dir)?;
    let db = new_mysql(args, name)?;
    migrate(args, dir, &db)?;
    insert_outbox(&db, args.rows)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let rate = runtime.block_on(async {
        let store = mysql_store(dir, &db).await?;
        let started = Instant::now();
        let mut done = 0;
        loop {
            let rows = store.claim(100, Duration::from_secs(60)).await?;
            if rows.is_empty() {
                break;
            }
            let writes: Vec<TerminalWrite> = rows
                .iter()
                .map(|r| TerminalWrite::Sent { claim: r.claim })
                .collect();
            done += store.finish(&writes).await?.len();
        }
        anyhow::ensure!(done as i64 == args.rows, "the floor marked {done} rows");
        anyhow::Ok(done as f64 / started.elapsed().as_secs_f64())
    });
    drop_mysql(args, &db)?;
    rate
}

/// The store's own insert with one row at a time, one after the other, for `seconds`: rows
/// per second.
fn intake_floor(args: &Args, dir: &Path, name: &str) -> Result<f64> {
    std::fs::create_dir_all(dir)?;
    let db = new_mysql(args, name)?;
    migrate(args, dir, &db)?;
    let body = format!(
        "{{\"id\":\"x\",\"type\":\"bench.webhook\",\"data\":{{\"seq\":1,\"customer\":\"c1\",\"amount\":1234,\"currency\":\"EUR\",\"note\":\"{}\"}}}}",
        "x".repeat(80)
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let rate = runtime.block_on(async {
        let store = mysql_store(dir, &db).await?;
        let started = Instant::now();
        let mut n: u64 = 0;
        while started.elapsed() < Duration::from_secs(args.seconds) {
            n += 1;
            let row = NewInboxRow {
                id: uuid::Uuid::now_v7(),
                source: "hooks".to_owned(),
                idempotency_key: format!("k{n}"),
                aggregate_id: None,
                event_type: None,
                payload: body.clone(),
                headers: "{\"content-type\":\"application/json\"}".to_owned(),
                consumption: Consumption::Pull,
                correlation_id: Some(uuid::Uuid::new_v4().to_string()),
                schedule: Schedule::AfterReceipt {
                    delay: Duration::ZERO,
                },
                state: StoredState::Pending,
                last_error: None,
                raw_body: None,
            };
            store.insert_batch(std::slice::from_ref(&row)).await?;
        }
        anyhow::Ok(n as f64 / started.elapsed().as_secs_f64())
    });
    drop_mysql(args, &db)?;
    rate
}

fn wrk_field(line: &str, name: &str) -> f64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn intake(args: &Args, dir: &Path, db: &Db) -> Result<Intake> {
    std::fs::create_dir_all(dir)?;
    migrate(args, dir, db)?;
    let yaml = format!(
        "{}server:\n  httpPort: 0\n  managementPort: 0\n\
         sources:\n  hooks:\n    type: http\n    path: /hooks\n    idempotencyKeyPath: $.id\n    consumption: pull\n",
        database_yaml(db)
    );
    let child = start(args, dir, &yaml)?;
    let text = std::fs::read_to_string(dir.join("queuebox.log"))?;
    let port = text
        .lines()
        .find(|l| l.contains("QueueBox started"))
        .and_then(|l| l.split("\"httpPort\":").nth(1))
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse::<u16>().ok())
        .context("httpPort")?;
    let out = Command::new("wrk")
        .args(["-t", "2", "-c", "64", "-d"])
        .arg(format!("{}s", args.seconds))
        .arg("-s")
        .arg(&args.lua)
        .arg(format!("http://127.0.0.1:{port}/inbox/hooks"))
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("wrk-result"))
        .context("wrk-result line")?
        .to_owned();
    let non_2xx = text
        .lines()
        .find(|l| l.contains("Non-2xx"))
        .map_or_else(|| "0".to_owned(), |l| l.trim().to_owned());
    std::thread::sleep(Duration::from_millis(500));
    let peak = procfs::memory(child.id())?;
    stop(child);
    let stored = count(db, "SELECT count(*) FROM inbox")?;
    Ok(Intake {
        stored,
        seconds: wrk_field(&line, "duration_us") / 1e6,
        p50_ms: wrk_field(&line, "p50_us") / 1000.0,
        p99_ms: wrk_field(&line, "p99_us") / 1000.0,
        peak_kb: peak.peak_kb,
        non_2xx,
    })
}

/// MB with one decimal, cut (docs/benchmarks.md: figures are cut, never rounded up).
fn mb(kb: u64) -> String {
    format!("{:.1}", cut(kb as f64 / 1024.0, 1)) + " MB"
}

/// `x` cut to `decimals` places.
fn cut(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).floor() / scale
}

fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.work)?;
    let pid = std::process::id();
    let load_before = procfs::loadavg();
    let machine = procfs::machine();

    let floor1 = outbox_floor(&args, &args.work.join("floor1"), "floor1")?;
    let mysql_db = new_mysql(&args, "drain")?;
    let mysql_drain = drain(&args, &args.work.join("drain-mysql"), &mysql_db);
    drop_mysql(&args, &mysql_db)?;
    let mysql_drain = mysql_drain?;
    let schema = format!("qb_mysql_bench_{pid}_drain");
    psql(&args.pg_url, &format!("CREATE SCHEMA {schema}"))?;
    let pg_drain = drain(
        &args,
        &args.work.join("drain-pg"),
        &Db::Postgres {
            url: args.pg_url.clone(),
            schema: schema.clone(),
        },
    );
    psql(&args.pg_url, &format!("DROP SCHEMA {schema} CASCADE"))?;
    let pg_drain = pg_drain?;
    let floor2 = outbox_floor(&args, &args.work.join("floor2"), "floor2")?;
    let load_mid = procfs::loadavg();

    let ifloor1 = intake_floor(&args, &args.work.join("ifloor1"), "ifloor1")?;
    let mysql_idb = new_mysql(&args, "intake")?;
    let mysql_intake = intake(&args, &args.work.join("intake-mysql"), &mysql_idb);
    drop_mysql(&args, &mysql_idb)?;
    let mysql_intake = mysql_intake?;
    let ischema = format!("qb_mysql_bench_{pid}_intake");
    psql(&args.pg_url, &format!("CREATE SCHEMA {ischema}"))?;
    let pg_intake = intake(
        &args,
        &args.work.join("intake-pg"),
        &Db::Postgres {
            url: args.pg_url.clone(),
            schema: ischema.clone(),
        },
    );
    psql(&args.pg_url, &format!("DROP SCHEMA {ischema} CASCADE"))?;
    let pg_intake = pg_intake?;
    let ifloor2 = intake_floor(&args, &args.work.join("ifloor2"), "ifloor2")?;
    let load_after = procfs::loadavg();
    let version = mariadb(&args.mysql_url, None, "SELECT VERSION()")?;

    let rows = args.rows;
    let floor = floor1.max(floor2);
    let ifloor = ifloor1.max(ifloor2);
    let rate = |d: &Drain| rows as f64 / d.seconds;
    let irate = |i: &Intake| i.stored as f64 / i.seconds;
    println!("## MySQL/MariaDB: outbox drain and HTTP intake beside PostgreSQL\n");
    println!(
        "Measured by `bench/mysql.sh` on {} cores, {} of memory, {}, against MariaDB {version} and PostgreSQL on the same machine (127.0.0.1, untuned); load average (1, 5, 15 min) before {load_before}, between the parts {load_mid}, after {load_after}. The machine is shared with other builds, so the figures are lower bounds and move between runs.\n",
        machine.cores,
        mb(machine.mem_total_kb),
        machine.cpu_model
    );
    println!("### Outbox drain of {rows} rows\n");
    println!("| | MariaDB (local) | PostgreSQL (local) |");
    println!("|---|---|---|");
    println!(
        "| drain time | {:.2} s | {:.2} s |",
        cut(mysql_drain.seconds, 2),
        cut(pg_drain.seconds, 2)
    );
    println!(
        "| rows/s | {:.0} | {:.0} |",
        cut(rate(&mysql_drain), 0),
        cut(rate(&pg_drain), 0)
    );
    println!(
        "| MariaDB floor: the store's claim (100) + mark sent in a loop, no delivery | {:.0} rows/s (runs {:.0} and {:.0}) | |",
        cut(floor, 0),
        cut(floor1, 0),
        cut(floor2, 0)
    );
    println!(
        "| drain ÷ floor | {:.0} % | |",
        cut(100.0 * rate(&mysql_drain) / floor, 0)
    );
    println!(
        "| idle RSS (3 s after start) | {} | {} |",
        mb(mysql_drain.idle_kb),
        mb(pg_drain.idle_kb)
    );
    println!(
        "| peak RSS (VmHWM) | {} | {} |\n",
        mb(mysql_drain.peak_kb),
        mb(pg_drain.peak_kb)
    );
    println!(
        "Keyless rows inserted in one transaction (with `ANALYZE outbox`) after QueueBox started; `log` destination writing to /dev/null; every setting at its default (`outbox.batchSize`, `pollIntervalMs`). Drain time: from the insert's commit until the count of `sent` rows (read every 100 ms) reached {rows}.\n"
    );
    println!("### HTTP intake, wrk -t2 -c64 for {} s\n", args.seconds);
    println!("| | MariaDB (local) | PostgreSQL (local) |");
    println!("|---|---|---|");
    println!(
        "| rows stored / s | {:.0} | {:.0} |",
        cut(irate(&mysql_intake), 0),
        cut(irate(&pg_intake), 0)
    );
    println!(
        "| p50 / p99 latency | {:.1} ms / {:.1} ms | {:.1} ms / {:.1} ms |",
        cut(mysql_intake.p50_ms, 1),
        cut(mysql_intake.p99_ms, 1),
        cut(pg_intake.p50_ms, 1),
        cut(pg_intake.p99_ms, 1)
    );
    println!(
        "| non-2xx answers (wrk) | {} | {} |",
        mysql_intake.non_2xx, pg_intake.non_2xx
    );
    println!(
        "| MariaDB floor: the store's own inbox insert, one row at a time, one after the other | {:.0} rows/s (runs {:.0} and {:.0}) | |",
        cut(ifloor, 0),
        cut(ifloor1, 0),
        cut(ifloor2, 0)
    );
    println!(
        "| intake ÷ floor | {:.0} % | |",
        cut(100.0 * irate(&mysql_intake) / ifloor, 0)
    );
    println!(
        "| peak RSS (VmHWM) | {} | {} |\n",
        mb(mysql_intake.peak_kb),
        mb(pg_intake.peak_kb)
    );
    println!(
        "One `http` source with `consumption: pull` (so the relay has nothing to take), `bench/inbox-intake.lua` bodies (unique ids, about 200 bytes). Rows stored / s = rows in the inbox after the run ÷ wrk's run time."
    );
    Ok(())
}
