//! The `queuebox migrate` procedure (schema.md SCH-47..57), written once for every database:
//! the order of its steps, its refusals and its log lines. A store supplies the database work
//! through [`MigrationBackend`] and [`MigrationSession`].

use async_trait::async_trait;
use queuebox_core::TableLayout;

use crate::error::StoreError;
use crate::versions::{
    BUNDLED_VERSIONS, BundledVersion, HIGHEST_VERSION, HistoryRow, MigrateReport, MigrateRequest,
};

/// What migration reads from the catalog before it writes anything (SCH-48).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationState {
    /// The default-named outbox table exists.
    pub outbox_exists: bool,
    /// The default-named inbox table exists.
    pub inbox_exists: bool,
    pub history_table_exists: bool,
    /// Every history row, ascending by version.
    pub history: Vec<HistoryRow>,
}

/// A store's way in to migration: takes the migration lock (SCH-47).
#[async_trait]
pub trait MigrationBackend: Send + Sync {
    /// Waits for the migration lock up to `database.startupTimeoutMs`; fails with
    /// [`StoreError::LockTimeout`] when the wait runs out. The session holds the lock.
    async fn lock(&self) -> Result<Box<dyn MigrationSession>, StoreError>;

    /// The default outbox and inbox names as the store quotes them, for the baseline refusal.
    fn quoted_default_tables(&self) -> (String, String);
}

/// The database work of one migration, done while the lock is held.
#[async_trait]
pub trait MigrationSession: Send {
    async fn read_state(&mut self) -> Result<MigrationState, StoreError>;

    /// Creates the history table; called only when it is missing (SCH-48).
    async fn create_history_table(&mut self) -> Result<(), StoreError>;

    /// Records these versions as `baseline` with `duration_ms` 0, in one transaction (SCH-56).
    async fn record_baseline(&mut self, versions: &[BundledVersion]) -> Result<(), StoreError>;

    /// Runs one version and inserts its history row (`applied`) in one transaction where the
    /// database allows it (SCH-46). Returns how long it ran, in ms. The error is the redacted
    /// database reason; the procedure turns it into [`StoreError::MigrationFailed`].
    async fn apply(&mut self, version: &BundledVersion) -> Result<u64, String>;

    /// The checksum of this store's text of a bundled version (SCH-23).
    fn checksum(&self, version: u32) -> String;

    /// Creates the notify objects when the trigger is missing (SCH-25); `true` when it created
    /// them. Stores without notify support return `Ok(false)`.
    async fn ensure_notify(&mut self) -> Result<bool, StoreError>;

    /// Releases the lock. Called once, after success and after failure alike (SCH-47). A
    /// failure to release must not hide the migration's own outcome, so it is not returned: the
    /// store makes sure the lock goes away with its connection.
    async fn release(self: Box<Self>);
}

/// Runs `queuebox migrate` (SCH-47..57) and logs its info and warn messages. The [error]
/// messages of SCH-57 are the returned error's text: the binary prints them in its failure
/// line, so they are not logged here as well.
///
/// The refusal of renamed names comes before the lock: it needs nothing from the database,
/// and it should not wait behind another process's migration to say so.
pub async fn run_migrate(
    backend: &dyn MigrationBackend,
    layout: &TableLayout,
    request: &MigrateRequest,
) -> Result<MigrateReport, StoreError> {
    let renamed = layout.renamed_keys();
    if !renamed.is_empty() {
        return Err(StoreError::RenamedNames { keys: renamed });
    }
    if let Some(n) = request.baseline
        && !(1..=HIGHEST_VERSION).contains(&n)
    {
        return Err(StoreError::BaselineOutOfRange {
            given: n,
            highest: HIGHEST_VERSION,
        });
    }
    let mut session = backend.lock().await?;
    let result = steps(&mut *session, backend, request).await;
    session.release().await;
    result
}

async fn steps(
    session: &mut dyn MigrationSession,
    backend: &dyn MigrationBackend,
    request: &MigrateRequest,
) -> Result<MigrateReport, StoreError> {
    let state = session.read_state().await?;
    let recorded_max = state.history.iter().map(|row| row.version).max();
    let tables_exist = state.outbox_exists || state.inbox_exists;
    let mut report = MigrateReport::default();

    if request.baseline.is_some() {
        if let Some(version) = recorded_max {
            return Err(StoreError::BaselineWithHistory { version });
        }
        if !tables_exist {
            let (outbox, inbox) = backend.quoted_default_tables();
            return Err(StoreError::BaselineWithoutTables { outbox, inbox });
        }
    } else if tables_exist && state.history.is_empty() {
        return Err(StoreError::TablesWithoutHistory);
    }

    if !state.history_table_exists {
        session.create_history_table().await?;
    }

    let mut recorded: Vec<u32> = state.history.iter().map(|row| row.version).collect();
    if let Some(n) = request.baseline {
        let versions: Vec<BundledVersion> = BUNDLED_VERSIONS
            .iter()
            .copied()
            .filter(|v| v.version <= n)
            .collect();
        session.record_baseline(&versions).await?;
        tracing::info!("Recorded versions 1 to {n} as applied by hand (baseline).");
        report.baselined = versions.iter().map(|v| v.version).collect();
        recorded.extend(&report.baselined);
    }

    report.checksum_mismatches = warn_checksum_mismatches(session, &state.history);

    for version in BUNDLED_VERSIONS {
        if recorded.contains(&version.version) {
            continue;
        }
        let ms = session
            .apply(version)
            .await
            .map_err(|reason| StoreError::MigrationFailed {
                version: version.version,
                description: version.description,
                reason,
            })?;
        tracing::info!(
            "Applied migration {} ({}) in {ms} ms.",
            version.version,
            version.description
        );
        report.applied.push(version.version);
        recorded.push(version.version);
    }

    report.database_version = recorded.iter().copied().max();
    if recorded_max.is_some_and(|m| m > HIGHEST_VERSION) {
        report.newer_version = recorded_max;
    }
    if !report.applied.is_empty() {
        let list: Vec<String> = report.applied.iter().map(u32::to_string).collect();
        tracing::info!(
            "Applied {} migration(s): {}",
            report.applied.len(),
            list.join(", ")
        );
    } else if let Some(m) = report.newer_version {
        tracing::warn!(
            "The database is at version {m}, newer than this QueueBox ({HIGHEST_VERSION}). Nothing to apply."
        );
    } else if request.baseline.is_none()
        && let Some(v) = report.database_version
    {
        tracing::info!("The database is at version {v}. Nothing to apply.");
    }

    if request.notify {
        report.notify_created = session.ensure_notify().await?;
    }
    Ok(report)
}

/// SCH-51: a recorded version whose checksum differs is logged, never run again.
fn warn_checksum_mismatches(session: &dyn MigrationSession, history: &[HistoryRow]) -> Vec<u32> {
    let mut mismatches = Vec::new();
    for row in history {
        let Some(bundled) = crate::versions::bundled(row.version) else {
            continue;
        };
        // Baseline rows carry the bundled checksum too (the column is NOT NULL), so every
        // kind is compared.
        if row.checksum.trim() != session.checksum(row.version) {
            tracing::warn!(
                "Migration {} ({}) differs from the one recorded in queuebox_schema_history. QueueBox does not run it again.",
                bundled.version,
                bundled.description
            );
            mismatches.push(row.version);
        }
    }
    mismatches
}
