//! `queuebox outbox list|show|replay|delete` and `queuebox inbox list|show|requeue|delete`:
//! the admin API's operations for an operator at a terminal, straight on the database with the
//! service's own configuration file (docs/commands.md). The flags become the API's request
//! fields and pass through the same parsing, so both apply one set of rules (ADM-6..13). A bulk
//! change counts its rows first (`--dry-run` stops there), asks for confirmation unless
//! `--yes`, and then runs in chunks of at most 500 rows (ADM-9) with a progress bar that only a
//! terminal sees.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use queuebox_config::{CaptureMode, Config};
use queuebox_http::admin::fields::Fields;
use queuebox_http::admin::filters::{
    AdminRouting, InboxQuery, OUTBOX_FILTERS, OutboxQuery, REPLAY_FILTERS, bulk_limit, page,
};
use queuebox_http::admin::{AdminError, render};
use queuebox_store::{
    DeleteOutcome, FinishedInboxState, FinishedOutboxState, InboxFilter, InboxState,
    OPERATOR_CHUNK, OperatorStore, OutboxFilter, OutboxState, PageRequest, SchemaNeeds, Store,
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::commands::{fail, load, runtime, store_error};
use crate::logging;
use crate::startup::{self, StartError};
use crate::wiring;

/// Exit codes (docs/commands.md).
pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_NOT_FOUND: u8 = 3;
pub const EXIT_CONFLICT: u8 = 4;
pub const EXIT_ABORTED: u8 = 5;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    #[default]
    Table,
    Json,
}

/// The outbox filters of ADM-13 as flags; lists repeat or take commas.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct OutboxFlags {
    /// Only these ids (repeat the flag or separate with commas; at most 1000).
    #[arg(long = "id", value_name = "UUID")]
    pub ids: Vec<String>,
    /// Only rows of this topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// Only rows of these topics (at most 100).
    #[arg(long = "topics", value_name = "TOPIC")]
    pub topics: Vec<String>,
    /// Only rows whose topic routes to this destination.
    #[arg(long)]
    pub destination: Option<String>,
    /// Rows created strictly after this RFC 3339 instant.
    #[arg(long, value_name = "INSTANT")]
    pub created_after: Option<String>,
    /// Rows created strictly before this RFC 3339 instant.
    #[arg(long, value_name = "INSTANT")]
    pub created_before: Option<String>,
}

/// The filters replay does not take (ADM-13).
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct OutboxMoreFlags {
    /// Only rows with this message key.
    #[arg(long)]
    pub key: Option<String>,
    /// Only rows whose last error contains this text (literal, case-sensitive).
    #[arg(long, value_name = "TEXT")]
    pub error_contains: Option<String>,
}

/// The inbox filters of ADM-21.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct InboxFlags {
    #[arg(long = "id", value_name = "UUID")]
    pub ids: Vec<String>,
    #[arg(long)]
    pub source: Option<String>,
    #[arg(long = "sources", value_name = "SOURCE")]
    pub sources: Vec<String>,
    /// push or pull.
    #[arg(long)]
    pub consumption: Option<String>,
    #[arg(long)]
    pub event_type: Option<String>,
    #[arg(long)]
    pub aggregate_id: Option<String>,
    #[arg(long)]
    pub idempotency_key: Option<String>,
    #[arg(long, value_name = "INSTANT")]
    pub created_after: Option<String>,
    #[arg(long, value_name = "INSTANT")]
    pub created_before: Option<String>,
    #[arg(long, value_name = "TEXT")]
    pub error_contains: Option<String>,
}

/// What a bulk change does before it changes anything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct BulkFlags {
    /// At most this many rows, oldest first (default: every matching row).
    #[arg(long)]
    pub limit: Option<i64>,
    /// Print how many rows would change, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[arg(long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct ListFlags {
    /// pending, processing, sent/processed or dead (default dead).
    #[arg(long)]
    pub state: Option<String>,
    /// Rows per page, 1..500 (default 50).
    #[arg(long)]
    pub limit: Option<i64>,
    /// The nextCursor of the previous page.
    #[arg(long)]
    pub cursor: Option<String>,
    #[arg(long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
pub enum OutboxCommand {
    /// List outbox rows, newest first (ADM-17).
    List {
        #[command(flatten)]
        filters: OutboxFlags,
        #[command(flatten)]
        more: OutboxMoreFlags,
        #[command(flatten)]
        list: ListFlags,
    },
    /// Show one outbox row with its payload and headers (ADM-18).
    Show {
        id: String,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Return sent and dead rows to pending, keeping their ids (ADM-15).
    Replay {
        #[command(flatten)]
        filters: OutboxFlags,
        #[command(flatten)]
        bulk: BulkFlags,
    },
    /// Delete one row by id, or every matching row of --state sent|dead (ADM-19, ADM-20).
    Delete {
        /// One row; without it, --state and the filters choose the rows.
        id: Option<String>,
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        filters: OutboxFlags,
        #[command(flatten)]
        more: OutboxMoreFlags,
        #[command(flatten)]
        bulk: BulkFlags,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
pub enum InboxCommand {
    /// List inbox rows, newest first (ADM-21).
    List {
        #[command(flatten)]
        filters: InboxFlags,
        #[command(flatten)]
        list: ListFlags,
    },
    /// Show one inbox row with its payload and headers (ADM-22).
    Show {
        id: String,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Return dead rows to pending (ADM-25).
    Requeue {
        #[command(flatten)]
        filters: InboxFlags,
        #[command(flatten)]
        bulk: BulkFlags,
    },
    /// Delete one row by id, or every matching row of --state processed|dead (ADM-23, ADM-24).
    Delete {
        id: Option<String>,
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        filters: InboxFlags,
        #[command(flatten)]
        bulk: BulkFlags,
    },
}

/// A failure of one command, with its exit code.
struct Failed {
    code: u8,
    text: Option<String>,
}

impl From<AdminError> for Failed {
    fn from(err: AdminError) -> Self {
        let code = match err.status.as_u16() {
            404 => EXIT_NOT_FOUND,
            409 => EXIT_CONFLICT,
            400..=499 => EXIT_USAGE,
            _ => EXIT_FAILED,
        };
        Failed {
            code,
            text: Some(err.message),
        }
    }
}

impl From<StartError> for Failed {
    fn from(err: StartError) -> Self {
        Failed {
            code: fail(&err),
            text: None,
        }
    }
}

fn store_failed(err: queuebox_store::StoreError) -> Failed {
    Failed::from(store_error(err))
}

pub fn outbox(config: Option<PathBuf>, command: OutboxCommand) -> u8 {
    with_store(config, async move |store, routing| {
        run_outbox(&*store, &routing, command).await
    })
}

pub fn inbox(config: Option<PathBuf>, command: InboxCommand) -> u8 {
    with_store(config, async move |store, _| {
        run_inbox(&*store, command).await
    })
}

/// Loads the configuration, connects, checks the schema, runs `body`, closes the pool.
fn with_store(
    config: Option<PathBuf>,
    body: impl AsyncFnOnce(Arc<dyn Store>, AdminRouting) -> Result<(), Failed>,
) -> u8 {
    let env = startup::environment();
    let log = logging::init(&env);
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&err),
    };
    let result = runtime.block_on(async move {
        let config: Config = load(config, env, &log)?;
        let store = wiring::connect_store(&config).await?;
        // The operator commands insert nothing, so a missing raw_body does not concern them.
        let notify = config.outbox.capture_mode == CaptureMode::Notify;
        store
            .check_schema(&SchemaNeeds::notify(notify))
            .await
            .map_err(store_failed)?;
        let routing = AdminRouting::from_config(&config);
        let result = body(store.clone(), routing).await;
        store.close().await;
        result
    });
    match result {
        Ok(()) => EXIT_OK,
        Err(failed) => {
            if let Some(text) = failed.text {
                eprintln!("{text}");
            }
            failed.code
        }
    }
}

/// The request fields the flags stand for (the API's JSON body).
struct Body(Map<String, Value>);

impl Body {
    fn new() -> Self {
        Body(Map::new())
    }

    fn text(&mut self, name: &str, value: &Option<String>) {
        if let Some(v) = value {
            self.0.insert(name.to_owned(), json!(v));
        }
    }

    fn list(&mut self, name: &str, values: &[String]) {
        if !values.is_empty() {
            let items: Vec<Value> = values
                .iter()
                .flat_map(|v| v.split(','))
                .map(|v| json!(v.trim()))
                .collect();
            self.0.insert(name.to_owned(), Value::Array(items));
        }
    }

    fn int(&mut self, name: &str, value: Option<i64>) {
        if let Some(v) = value {
            self.0.insert(name.to_owned(), json!(v));
        }
    }

    fn outbox(mut self, f: &OutboxFlags, more: Option<&OutboxMoreFlags>) -> Self {
        self.list("ids", &f.ids);
        self.text("topic", &f.topic);
        self.list("topics", &f.topics);
        self.text("destination", &f.destination);
        self.text("createdAfter", &f.created_after);
        self.text("createdBefore", &f.created_before);
        if let Some(more) = more {
            self.text("key", &more.key);
            self.text("errorContains", &more.error_contains);
        }
        self
    }

    fn inbox(mut self, f: &InboxFlags) -> Self {
        self.list("ids", &f.ids);
        self.text("source", &f.source);
        self.list("sources", &f.sources);
        self.text("consumption", &f.consumption);
        self.text("eventType", &f.event_type);
        self.text("aggregateId", &f.aggregate_id);
        self.text("idempotencyKey", &f.idempotency_key);
        self.text("createdAfter", &f.created_after);
        self.text("createdBefore", &f.created_before);
        self.text("errorContains", &f.error_contains);
        self
    }

    fn fields(self) -> Fields {
        Fields::from_json(Value::Object(self.0)).unwrap_or_default()
    }
}

fn parse_id(text: &str) -> Result<Uuid, Failed> {
    Uuid::try_parse(text).map_err(|_| Failed {
        code: EXIT_USAGE,
        text: Some(format!("Invalid id: {text}")),
    })
}

fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

async fn run_outbox(
    store: &dyn Store,
    routing: &AdminRouting,
    command: OutboxCommand,
) -> Result<(), Failed> {
    match command {
        OutboxCommand::List {
            filters,
            more,
            list,
        } => {
            let mut body = Body::new().outbox(&filters, Some(&more));
            body.text("state", &list.state);
            body.int("limit", list.limit);
            body.text("cursor", &list.cursor);
            let fields = body.fields();
            let state = match list.state.as_deref() {
                None => OutboxState::Dead,
                Some(t) => OutboxState::parse(t).ok_or_else(|| {
                    Failed::from(AdminError::invalid(format!(
                        "state must be pending, processing, sent or dead, got {t}"
                    )))
                })?,
            };
            let query = OutboxQuery::read(&fields, OUTBOX_FILTERS)?;
            let page_request = page(&fields)?;
            let filter = query.resolve(routing, store).await?;
            let found = store
                .list_outbox(state, &filter, page_request)
                .await
                .map_err(store_failed)?;
            let value = render::page(&found, |s| render::outbox_item(s, routing));
            match list.output {
                Output::Json => print_json(&value),
                Output::Table => print_table(
                    &value,
                    &[
                        ("ID", "id"),
                        ("TOPIC", "topic"),
                        ("STATE", "state"),
                        ("ATTEMPT", "attempt"),
                        ("DESTINATION", "destination"),
                        ("CREATED", "createdAt"),
                        ("LAST ERROR", "lastError"),
                    ],
                ),
            }
            Ok(())
        }
        OutboxCommand::Show { id, output } => {
            let id = parse_id(&id)?;
            let found = store.show_outbox(id).await.map_err(store_failed)?;
            let Some(message) = found else {
                return Err(AdminError::not_found().into());
            };
            print_one(&render::outbox_show(&message, routing), output);
            Ok(())
        }
        OutboxCommand::Replay { filters, bulk } => {
            let fields = Body::new().outbox(&filters, None).fields();
            let query = OutboxQuery::read(&fields, REPLAY_FILTERS)?;
            let limit = bulk_limit(&with_limit(bulk.limit))?;
            if !query.has_replay_filter() {
                return Err(AdminError::bad_request(
                    "A replay needs at least one filter. Give --id, --topic, --topics, --destination, --created-after or --created-before.",
                )
                .into());
            }
            let filter = query.resolve(routing, store).await?;
            let matching = count_outbox(
                store,
                &[OutboxState::Sent, OutboxState::Dead],
                &filter,
                limit,
            )
            .await?;
            bulk_change(
                &bulk,
                matching,
                "replay",
                "outbox rows",
                "moved",
                &query.describe(),
                limit,
                async |chunk| store.replay_outbox(&filter, Some(chunk)).await,
            )
            .await
        }
        OutboxCommand::Delete {
            id: Some(id),
            state,
            filters,
            more,
            bulk,
        } => {
            if state.is_some()
                || filters != OutboxFlags::default()
                || more != OutboxMoreFlags::default()
                || bulk.limit.is_some()
            {
                return Err(usage(
                    "delete takes an id or --state with filters, not both",
                ));
            }
            let id = parse_id(&id)?;
            if bulk.dry_run {
                let found = store.show_outbox(id).await.map_err(store_failed)?;
                let n = u64::from(found.is_some_and(|m| {
                    matches!(m.summary.state, OutboxState::Sent | OutboxState::Dead)
                }));
                return report_dry_run(&bulk, n, "delete", "outbox rows");
            }
            let outcome = store.delete_outbox_row(id).await.map_err(store_failed)?;
            finish_single_delete(outcome, &bulk, "outbox", "sent or dead")
        }
        OutboxCommand::Delete {
            id: None,
            state,
            filters,
            more,
            bulk,
        } => {
            let fields = Body::new().outbox(&filters, Some(&more)).fields();
            let (finished, states) = match state.as_deref() {
                Some("sent") => (FinishedOutboxState::Sent, [OutboxState::Sent]),
                Some("dead") => (FinishedOutboxState::Dead, [OutboxState::Dead]),
                _ => {
                    return Err(usage(
                        "A bulk delete needs state: sent or dead. Give --state sent or --state dead, or one id.",
                    ));
                }
            };
            let query = OutboxQuery::read(&fields, OUTBOX_FILTERS)?;
            let limit = bulk_limit(&with_limit(bulk.limit))?;
            let filter = query.resolve(routing, store).await?;
            let matching = count_outbox(store, &states, &filter, limit).await?;
            let describe = format!("state: {}; {}", states[0].as_str(), query.describe());
            bulk_change(
                &bulk,
                matching,
                "delete",
                "outbox rows",
                "deleted",
                &describe,
                limit,
                async |chunk| {
                    store
                        .delete_outbox_rows(finished, &filter, Some(chunk))
                        .await
                },
            )
            .await
        }
    }
}

async fn run_inbox(store: &dyn Store, command: InboxCommand) -> Result<(), Failed> {
    match command {
        InboxCommand::List { filters, list } => {
            let mut body = Body::new().inbox(&filters);
            body.int("limit", list.limit);
            body.text("cursor", &list.cursor);
            let fields = body.fields();
            let state = match list.state.as_deref() {
                None => InboxState::Dead,
                Some(t) => InboxState::parse(t).ok_or_else(|| {
                    Failed::from(AdminError::invalid(format!(
                        "state must be pending, processing, processed or dead, got {t}"
                    )))
                })?,
            };
            let query = InboxQuery::read(&fields)?;
            let page_request = page(&fields)?;
            let found = store
                .list_inbox(state, &query.filter(), page_request)
                .await
                .map_err(store_failed)?;
            let value = render::page(&found, render::inbox_item);
            match list.output {
                Output::Json => print_json(&value),
                Output::Table => print_table(
                    &value,
                    &[
                        ("ID", "id"),
                        ("SOURCE", "source"),
                        ("KEY", "idempotencyKey"),
                        ("STATE", "state"),
                        ("CONSUMPTION", "consumption"),
                        ("ATTEMPT", "attempt"),
                        ("CREATED", "createdAt"),
                        ("LAST ERROR", "lastError"),
                    ],
                ),
            }
            Ok(())
        }
        InboxCommand::Show { id, output } => {
            let id = parse_id(&id)?;
            let found = store.show_inbox(id).await.map_err(store_failed)?;
            let Some(message) = found else {
                return Err(AdminError::not_found().into());
            };
            print_one(&render::inbox_show(&message), output);
            Ok(())
        }
        InboxCommand::Requeue { filters, bulk } => {
            let fields = Body::new().inbox(&filters).fields();
            let query = InboxQuery::read(&fields)?;
            let limit = bulk_limit(&with_limit(bulk.limit))?;
            if query.is_empty() {
                return Err(usage(
                    "A requeue needs at least one filter. Give --source, --id or another filter.",
                ));
            }
            let filter = query.filter();
            let matching = count_inbox(store, &[InboxState::Dead], &filter, limit).await?;
            bulk_change(
                &bulk,
                matching,
                "requeue",
                "inbox rows",
                "requeued",
                &query.describe(),
                limit,
                async |chunk| store.requeue_inbox(&filter, Some(chunk)).await,
            )
            .await
        }
        InboxCommand::Delete {
            id: Some(id),
            state,
            filters,
            bulk,
        } => {
            if state.is_some() || filters != InboxFlags::default() || bulk.limit.is_some() {
                return Err(usage(
                    "delete takes an id or --state with filters, not both",
                ));
            }
            let id = parse_id(&id)?;
            if bulk.dry_run {
                let found = store.show_inbox(id).await.map_err(store_failed)?;
                let n = u64::from(found.is_some_and(|m| {
                    matches!(m.summary.state, InboxState::Processed | InboxState::Dead)
                }));
                return report_dry_run(&bulk, n, "delete", "inbox rows");
            }
            let outcome = store.delete_inbox_row(id).await.map_err(store_failed)?;
            finish_single_delete(outcome, &bulk, "inbox", "processed or dead")
        }
        InboxCommand::Delete {
            id: None,
            state,
            filters,
            bulk,
        } => {
            let fields = Body::new().inbox(&filters).fields();
            let (finished, states) = match state.as_deref() {
                Some("processed") => (FinishedInboxState::Processed, [InboxState::Processed]),
                Some("dead") => (FinishedInboxState::Dead, [InboxState::Dead]),
                _ => {
                    return Err(usage(
                        "A bulk delete needs state: processed or dead. Give --state processed or --state dead, or one id.",
                    ));
                }
            };
            let query = InboxQuery::read(&fields)?;
            let limit = bulk_limit(&with_limit(bulk.limit))?;
            let filter = query.filter();
            let matching = count_inbox(store, &states, &filter, limit).await?;
            let describe = format!("state: {}; {}", states[0].as_str(), query.describe());
            bulk_change(
                &bulk,
                matching,
                "delete",
                "inbox rows",
                "deleted",
                &describe,
                limit,
                async |chunk| {
                    store
                        .delete_inbox_rows(finished, &filter, Some(chunk))
                        .await
                },
            )
            .await
        }
    }
}

/// `delete ID` of either table, once the store answered: the log line and the report, or the
/// exit code of a missing row (3) or of one whose state forbids it (4).
fn finish_single_delete(
    outcome: DeleteOutcome,
    bulk: &BulkFlags,
    table: &str,
    deletable_states: &str,
) -> Result<(), Failed> {
    match outcome {
        DeleteOutcome::Deleted => {
            log_change(&format!("{table} delete"), "ids: 1 ids", None, 1);
            report_done(bulk, "deleted", 1, &format!("Deleted 1 {table} row."));
            Ok(())
        }
        DeleteOutcome::NotFound => Err(AdminError::not_found().into()),
        DeleteOutcome::NotDeletable => Err(Failed {
            code: EXIT_CONFLICT,
            text: Some(format!("Only {deletable_states} rows can be deleted.")),
        }),
    }
}

fn usage(text: &str) -> Failed {
    Failed {
        code: EXIT_USAGE,
        text: Some(text.to_owned()),
    }
}

fn with_limit(limit: Option<i64>) -> Fields {
    let mut body = Body::new();
    body.int("limit", limit);
    body.fields()
}

/// The rows a bulk change would take now: every page of the list, at most `limit`.
async fn count_outbox(
    store: &dyn OperatorStore,
    states: &[OutboxState],
    filter: &OutboxFilter,
    limit: Option<u64>,
) -> Result<u64, Failed> {
    let mut total = 0u64;
    for state in states {
        let mut after = None;
        loop {
            let page = store
                .list_outbox(
                    *state,
                    filter,
                    PageRequest {
                        after,
                        limit: OPERATOR_CHUNK,
                    },
                )
                .await
                .map_err(store_failed)?;
            total += page.items.len() as u64;
            if limit.is_some_and(|l| total >= l) {
                return Ok(limit.unwrap_or(total));
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    Ok(total)
}

async fn count_inbox(
    store: &dyn OperatorStore,
    states: &[InboxState],
    filter: &InboxFilter,
    limit: Option<u64>,
) -> Result<u64, Failed> {
    let mut total = 0u64;
    for state in states {
        let mut after = None;
        loop {
            let page = store
                .list_inbox(
                    *state,
                    filter,
                    PageRequest {
                        after,
                        limit: OPERATOR_CHUNK,
                    },
                )
                .await
                .map_err(store_failed)?;
            total += page.items.len() as u64;
            if limit.is_some_and(|l| total >= l) {
                return Ok(limit.unwrap_or(total));
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
    }
    Ok(total)
}

fn report_dry_run(bulk: &BulkFlags, n: u64, verb: &str, what: &str) -> Result<(), Failed> {
    match bulk.output {
        Output::Json => print_json(&json!({"dryRun": true, "count": n})),
        Output::Table => println!("Would {verb} {n} {what}."),
    }
    Ok(())
}

fn report_done(bulk: &BulkFlags, field: &str, n: u64, text: &str) {
    match bulk.output {
        Output::Json => print_json(&json!({ field: n })),
        Output::Table => println!("{text}"),
    }
}

/// ADM-10, as the API logs it; the CLI has no credential, so `auth` is `cli`.
fn log_change(operation: &str, filter: &str, limit: Option<u64>, count: u64) {
    tracing::info!(
        operation,
        filter,
        limit = limit.map_or_else(|| "none".to_owned(), |l| l.to_string()),
        count,
        auth = "cli",
        "admin {operation}: {count} rows"
    );
}

/// A counted, confirmed, chunked change. The run never takes more rows than were counted
/// (or `--limit`), so rows that a replay sends back to `pending` and the poller delivers
/// again within the run are not taken a second time.
#[allow(clippy::too_many_arguments)]
async fn bulk_change(
    bulk: &BulkFlags,
    matching: u64,
    verb: &str,
    what: &str,
    field: &str,
    describe: &str,
    limit: Option<u64>,
    mut chunk: impl AsyncFnMut(u64) -> Result<u64, queuebox_store::StoreError>,
) -> Result<(), Failed> {
    if bulk.dry_run {
        return report_dry_run(bulk, matching, verb, what);
    }
    if matching == 0 {
        report_done(
            bulk,
            field,
            0,
            &format!("No {what} match; nothing to {verb}."),
        );
        return Ok(());
    }
    if !bulk.yes
        && !confirm(&format!(
            "This will {verb} {matching} {what}. Continue? [y/N] "
        ))
    {
        return Err(Failed {
            code: EXIT_ABORTED,
            text: Some("Aborted; nothing changed.".into()),
        });
    }
    let bar = progress(matching);
    let mut done = 0u64;
    while done < matching {
        let size = (matching - done).min(u64::from(OPERATOR_CHUNK));
        let changed = chunk(size).await.map_err(store_failed)?;
        done += changed;
        bar.inc(changed);
        if changed < size {
            break;
        }
    }
    bar.finish_and_clear();
    log_change(verb, describe, limit, done);
    let past = match verb {
        "replay" => "Replayed",
        "requeue" => "Requeued",
        _ => "Deleted",
    };
    report_done(bulk, field, done, &format!("{past} {done} {what}."));
    Ok(())
}

/// Asks on stderr and reads one line from stdin; anything but y/yes is no, and so is a closed
/// stdin.
fn confirm(question: &str) -> bool {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => false,
        Ok(_) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
    }
}

/// A bar on stderr only when both stdout and stderr are terminals: piped or captured output
/// gets no bar at all.
fn progress(total: u64) -> ProgressBar {
    if !(std::io::stdout().is_terminal() && std::io::stderr().is_terminal()) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} rows") {
        bar.set_style(style);
    }
    bar.tick();
    bar
}

fn cell(value: &Value) -> String {
    let text = match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let text = text.replace(['\n', '\t'], " ");
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(59).collect::<String>())
    } else {
        text
    }
}

fn print_table(page: &Value, columns: &[(&str, &str)]) {
    let items = page["items"].as_array().cloned().unwrap_or_default();
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| columns.iter().map(|(_, f)| cell(&item[*f])).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (h, _))| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([h.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(columns.iter().map(|(h, _)| (*h).to_owned()).collect());
    for row in rows {
        line(row);
    }
    match page["nextCursor"].as_str() {
        Some(cursor) => println!("More rows: --cursor {cursor}"),
        None => println!("({} rows)", items.len()),
    }
}

fn print_one(value: &Value, output: Output) {
    match output {
        Output::Json => print_json(value),
        Output::Table => {
            if let Value::Object(map) = value {
                for (name, v) in map {
                    match v {
                        Value::Object(_) | Value::Array(_) => {
                            println!(
                                "{name}: {}",
                                serde_json::to_string_pretty(v).unwrap_or_default()
                            );
                        }
                        other => println!("{name}: {}", cell_full(other)),
                    }
                }
            }
        }
    }
}

fn cell_full(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
