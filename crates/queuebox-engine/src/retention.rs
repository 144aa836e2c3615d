//! Retention (operations.md §7, RET-1..12, CFG-83/84): each enabled table is cleaned when the
//! start completes and then `cleanupInterval` after each run ends; a run repeats one bounded
//! DELETE until it removes fewer than `batchSize` rows, and a shutdown ends it between two
//! DELETEs (OPS-26 phase 7).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use queuebox_core::redact::redact;
use queuebox_store::{RetentionRule, RetentionStore};
use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::repeat::RepeatLog;
use queuebox_telemetry::{Metrics, Table};

/// The retention of one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableRetention {
    pub rule: RetentionRule,
    /// The pause between the end of one run and the start of the next (RET-7).
    pub cleanup_interval: Duration,
    /// The most rows one DELETE removes (RET-6).
    pub batch: u32,
}

/// Which tables retention cleans; `None` is a disabled table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionSettings {
    /// `OutboxOlderThan` or `OutboxKeepNewest`.
    pub outbox: Option<TableRetention>,
    /// `InboxOlderThan`.
    pub inbox: Option<TableRetention>,
}

impl RetentionSettings {
    pub fn is_enabled(&self) -> bool {
        self.outbox.is_some() || self.inbox.is_some()
    }
}

/// Readiness of retention (OPS-18 `retention`): whether its `run` is going. A failing DELETE
/// does not change it (RET-9).
#[derive(Clone, Debug, Default)]
pub struct RetentionHealth {
    running: Arc<AtomicBool>,
}

impl RetentionHealth {
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }
}

/// Sets the health flag for the life of `run`, whichever way it ends.
struct Running(RetentionHealth);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Relaxed);
    }
}

/// The retention task of one replica (RET-8: every replica runs one; concurrent runs are safe
/// because each DELETE re-checks its conditions).
pub struct Retention {
    store: Arc<dyn RetentionStore>,
    settings: RetentionSettings,
    metrics: Metrics,
    health: RetentionHealth,
}

impl Retention {
    pub fn new(
        store: Arc<dyn RetentionStore>,
        settings: RetentionSettings,
        metrics: Metrics,
    ) -> Self {
        Self {
            store,
            settings,
            metrics,
            health: RetentionHealth::default(),
        }
    }

    pub fn health(&self) -> RetentionHealth {
        self.health.clone()
    }

    /// Cleans the enabled tables, each on its own schedule, until `cancel`; a run in progress
    /// stops after its current DELETE. Failures never end it (RET-9).
    pub async fn run(self, cancel: CancellationToken) -> Result<(), EngineError> {
        let outbox = self.settings.outbox.map(|t| (Table::Outbox, t));
        let inbox = self.settings.inbox.map(|t| (Table::Inbox, t));
        for (table, retention) in outbox.iter().chain(&inbox) {
            check(*table, retention)?;
        }
        self.health.running.store(true, Ordering::Relaxed);
        let _running = Running(self.health.clone());
        let cleaner = |slot: Option<(Table, TableRetention)>| {
            let cancel = cancel.clone();
            let this = &self;
            async move {
                if let Some((table, retention)) = slot {
                    this.clean(table, retention, cancel).await;
                }
            }
        };
        // One future per table in this task: their schedules are independent (RET-7) and a
        // table never overlaps itself, without a task that could outlive `run`.
        tokio::join!(cleaner(outbox), cleaner(inbox));
        tracing::info!("Retention stopped.");
        Ok(())
    }

    /// RET-7: a run at once, then one `cleanupInterval` after each run ends.
    async fn clean(&self, table: Table, retention: TableRetention, cancel: CancellationToken) {
        let mut failures = RepeatLog::default();
        loop {
            self.run_once(table, &retention, &cancel, &mut failures)
                .await;
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(retention.cleanup_interval) => {}
            }
        }
    }

    /// One run (RET-6, RET-9, RET-10): DELETEs of at most `batch` rows until one removes fewer;
    /// `cancel` is looked at between two DELETEs, never during one.
    async fn run_once(
        &self,
        table: Table,
        retention: &TableRetention,
        cancel: &CancellationToken,
        failures: &mut RepeatLog,
    ) {
        let started = Instant::now();
        let mut deleted: u64 = 0;
        let mut failed = false;
        while !cancel.is_cancelled() {
            match self
                .store
                .retention_delete(retention.rule, retention.batch)
                .await
            {
                Ok(n) => {
                    deleted += n;
                    self.metrics.cleanup_messages_deleted(table).inc_by(n);
                    if n < u64::from(retention.batch) {
                        break;
                    }
                }
                Err(err) => {
                    failed = true;
                    if let Some(repeats) = failures.failure(Instant::now()) {
                        tracing::warn!(
                            table = %table,
                            error = %redact(&err.to_string()),
                            repeats,
                            deleted,
                            "Retention could not delete old messages. QueueBox tries again at the next cleanup interval."
                        );
                    }
                    break;
                }
            }
        }
        self.metrics
            .cleanup_duration(table)
            .observe_duration(started.elapsed());
        self.metrics.set_cleanup_last_run(table, SystemTime::now());
        if !failed && let Some(repeats) = failures.success() {
            tracing::info!(table = %table, repeats, "Retention deletes old messages again.");
        }
        if deleted > 0 {
            tracing::info!(table = %table, count = deleted, "Retention deleted old messages.");
        } else if !failed {
            tracing::debug!(table = %table, "Retention found no old messages to delete.");
        }
    }
}

/// Settings a table cannot be cleaned with; the configuration refuses them first (CFG-83).
fn check(table: Table, retention: &TableRetention) -> Result<(), EngineError> {
    let bad = |setting, value: String| {
        Err(EngineError::BadSetting {
            owner: "retention",
            setting,
            value,
        })
    };
    let (batch, interval, policy) = match table {
        Table::Outbox => (
            "retention.outbox.batchSize",
            "retention.outbox.cleanupInterval",
            "retention.outbox.policy",
        ),
        Table::Inbox => (
            "retention.inbox.batchSize",
            "retention.inbox.cleanupInterval",
            "retention.inbox.policy",
        ),
    };
    if retention.batch == 0 {
        return bad(batch, "0".into());
    }
    if retention.cleanup_interval.is_zero() {
        return bad(interval, "0".into());
    }
    let fits = match retention.rule {
        RetentionRule::OutboxOlderThan(_) | RetentionRule::OutboxKeepNewest(_) => {
            table == Table::Outbox
        }
        RetentionRule::InboxOlderThan(_) => table == Table::Inbox,
    };
    if !fits {
        return bad(policy, format!("{:?}", retention.rule));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
