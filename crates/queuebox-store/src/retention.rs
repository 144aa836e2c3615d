//! `RetentionStore`: the retention deletes of both tables (operations.md §7, RET-*), in
//! bounded batches so no delete holds its locks for long.

use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;

/// Which rows one retention DELETE may remove (RET-*, CFG-83). Never `pending`/`processing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetentionRule {
    /// Outbox `sent`/`dead` rows whose `updated_at` is older than this.
    OutboxOlderThan(Duration),
    /// Outbox: keep the newest `n` `sent` rows and, separately, the newest `n` `dead` rows.
    OutboxKeepNewest(u32),
    /// Inbox `processed`/`dead` rows whose `created_at` is older than this.
    InboxOlderThan(Duration),
}

/// The retention side of a store.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// One bounded delete of at most `batch` rows the rule allows; returns how many it deleted.
    /// The caller repeats it until it deletes fewer than `batch`.
    async fn retention_delete(&self, rule: RetentionRule, batch: u32) -> Result<u64, StoreError>;
}
