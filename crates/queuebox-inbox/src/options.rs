//! Worker options, their defaults and validation (pull.md §9, PULL-25, PULL-56/57).

use std::sync::Arc;
use std::time::Duration;

use crate::retry::{DefaultRetryPolicy, RetryPolicy};

/// The largest lease or delay a statement binds, in milliseconds (PULL-15).
pub const MAX_MS: u64 = 2_147_483_647;

/// The database family whose SQL the worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL 14 or later.
    Postgresql,
    /// Not rendered by this version: building a worker with it fails.
    SqlServer,
    /// MySQL 8.0.13+ or MariaDB 10.6+ (pull.md §5.3).
    Mysql,
    /// SQLite 3.38+ (pull.md §5.4): batch and concurrency 1, no renewal (PULL-28).
    Sqlite,
}

impl Dialect {
    /// Parses the neutral dialect name, with the exact message of PULL-56 on failure.
    pub fn parse(name: &str) -> Result<Self, OptionsError> {
        match name {
            "postgresql" => Ok(Self::Postgresql),
            "sqlserver" => Ok(Self::SqlServer),
            "mysql" => Ok(Self::Mysql),
            "sqlite" => Ok(Self::Sqlite),
            other => Err(OptionsError(format!(
                "The dialect {other} is unknown. Use postgresql, sqlserver, mysql or sqlite."
            ))),
        }
    }
}

/// A validation failure; its text is the exact message of PULL-56 / PULL-25.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OptionsError(pub String);

/// Table and column names of the inbox (PULL-5); every one can be remapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    pub table: String,
    pub id: String,
    pub source: String,
    pub consumption: String,
    pub state: String,
    pub idempotency_key: String,
    pub aggregate_id: String,
    pub event_type: String,
    pub payload: String,
    pub headers: String,
    pub correlation_id: String,
    pub attempt: String,
    pub scheduled_at: String,
    pub created_at: String,
    pub claim_token: String,
    pub claimed_at: String,
    pub lease_expires_at: String,
    pub processed_at: String,
    pub last_error: String,
}

impl Default for Schema {
    fn default() -> Self {
        Self::with_names(|n| n.to_owned(), "inbox")
    }
}

impl Schema {
    /// Builds a schema whose table is `table` and whose columns are `name(default)`; handy for a
    /// uniform prefix.
    pub fn with_names(name: impl Fn(&str) -> String, table: &str) -> Self {
        Self {
            table: table.to_owned(),
            id: name("id"),
            source: name("source"),
            consumption: name("consumption"),
            state: name("state"),
            idempotency_key: name("idempotency_key"),
            aggregate_id: name("aggregate_id"),
            event_type: name("event_type"),
            payload: name("payload"),
            headers: name("headers"),
            correlation_id: name("correlation_id"),
            attempt: name("attempt"),
            scheduled_at: name("scheduled_at"),
            created_at: name("created_at"),
            claim_token: name("claim_token"),
            claimed_at: name("claimed_at"),
            lease_expires_at: name("lease_expires_at"),
            processed_at: name("processed_at"),
            last_error: name("last_error"),
        }
    }

    /// The placeholder name (the default name, as written in the contract SQL) and the mapped name.
    pub fn pairs(&self) -> [(&'static str, &str); 19] {
        [
            ("inbox", &self.table),
            ("id", &self.id),
            ("source", &self.source),
            ("consumption", &self.consumption),
            ("state", &self.state),
            ("idempotency_key", &self.idempotency_key),
            ("aggregate_id", &self.aggregate_id),
            ("event_type", &self.event_type),
            ("payload", &self.payload),
            ("headers", &self.headers),
            ("correlation_id", &self.correlation_id),
            ("attempt", &self.attempt),
            ("scheduled_at", &self.scheduled_at),
            ("created_at", &self.created_at),
            ("claim_token", &self.claim_token),
            ("claimed_at", &self.claimed_at),
            ("lease_expires_at", &self.lease_expires_at),
            ("processed_at", &self.processed_at),
            ("last_error", &self.last_error),
        ]
    }

    fn validate(&self) -> Result<(), OptionsError> {
        for (_, name) in self.pairs() {
            if !is_plain_identifier(name) {
                return Err(OptionsError(format!(
                    "The schema name {name} is not a plain SQL identifier."
                )));
            }
        }
        Ok(())
    }
}

/// `^[A-Za-z_][A-Za-z0-9_]{0,62}$` (PULL-25), so a name can be quoted without escaping.
pub fn is_plain_identifier(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// The options of PULL-56. Build with [`WorkerOptions::new`] and adjust the public fields.
#[derive(Clone)]
pub struct WorkerOptions {
    pub source: String,
    pub batch_size: u32,
    pub lease: Duration,
    pub max_concurrency: u32,
    pub poll_interval: Duration,
    /// A `Duration` cannot be negative, so the "must not be negative" rule holds by type.
    pub shutdown_grace: Duration,
    pub dialect: Dialect,
    pub schema: Schema,
    pub retry_policy: Arc<dyn RetryPolicy>,
}

impl std::fmt::Debug for WorkerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerOptions")
            .field("source", &self.source)
            .field("batch_size", &self.batch_size)
            .field("lease", &self.lease)
            .field("max_concurrency", &self.max_concurrency)
            .field("poll_interval", &self.poll_interval)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("dialect", &self.dialect)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl WorkerOptions {
    /// The defaults of PULL-56 for `source`.
    pub fn new(source: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            batch_size: 10,
            lease: Duration::from_millis(30_000),
            max_concurrency: 1,
            poll_interval: Duration::from_millis(1_000),
            shutdown_grace: Duration::from_millis(30_000),
            dialect: Dialect::Postgresql,
            schema: Schema::default(),
            retry_policy: Arc::new(DefaultRetryPolicy::default()),
        }
    }

    /// Checks every rule in the order of PULL-56 and reports the first failure (PULL-57).
    pub fn validate(&self) -> Result<(), OptionsError> {
        let fail = |m: &str| Err(OptionsError(m.to_owned()));
        if self.source.trim().is_empty() || self.source.chars().count() > 255 {
            return fail("The source is mandatory.");
        }
        if !(1..=500).contains(&self.batch_size) {
            return fail("The batch size must be between 1 and 500.");
        }
        let lease_ms = self.lease.as_millis();
        if !(3..=u128::from(MAX_MS)).contains(&lease_ms) {
            return fail("The lease must be between 3 ms and 2147483647 ms.");
        }
        if self.max_concurrency < 1 {
            return fail("The maximum concurrency must be at least 1.");
        }
        if self.poll_interval.is_zero() {
            return fail("The poll interval must be greater than 0.");
        }
        self.schema.validate()
    }

    pub(crate) fn lease_ms(&self) -> i64 {
        clamp_ms(self.lease)
    }

    /// The batch the claim asks for: 1 on SQLite, whose single write lock would make a second
    /// claimed row wait for the first row's handler (PULL-28).
    pub(crate) fn effective_batch(&self) -> u32 {
        match self.dialect {
            Dialect::Sqlite => 1,
            _ => self.batch_size,
        }
    }

    /// `min(maxConcurrency, batchSize)` (PULL-56); 1 on SQLite (PULL-28).
    pub(crate) fn effective_concurrency(&self) -> usize {
        self.max_concurrency.min(self.effective_batch()) as usize
    }
}

/// Whole milliseconds clamped to `[0, 2147483647]` (PULL-15).
pub(crate) fn clamp_ms(d: Duration) -> i64 {
    d.as_millis().min(u128::from(MAX_MS)) as i64
}

/// `min(max(3 × batch, 50), 500)` (PULL-14).
pub(crate) fn cand_limit(batch: u32) -> i64 {
    i64::from(batch).saturating_mul(3).clamp(50, 500)
}
