//! Prepared statements that keep a generic plan, made again on each connection every few seconds.
//!
//! PostgreSQL plans the first five executions of a prepared statement one by one, then keeps one
//! generic plan when that costs no more, and makes it again only when the table's definition or
//! statistics change. The terminal write (`finish.sql`) is written so that the generic plan is
//! kept, because planning each call cost as much as running it (docs/benchmarks.md). But a generic
//! plan made while the outbox held a few thousand rows or fewer is a sequential scan, and without
//! an ANALYZE (autovacuum off, or before its first round) it would stay one while the table grows
//! to millions. The planner sizes a table by its current number of pages, so a plan made again
//! fits the table as it is now: each connection prepares these statements again once its copy is
//! older than [`REPLAN_AFTER`], which bounds how long a plan made for another size can live.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use deadpool_postgres::{Object, StatementCache};
use tokio_postgres::Statement;

/// How long one connection keeps a prepared copy of a replanned statement. Preparing again costs
/// one parse and five planned executions, so a few seconds costs nothing measurable and keeps a
/// plan made on a small table from outliving the table's growth by more than that.
pub(crate) const REPLAN_AFTER: Duration = Duration::from_secs(5);

/// How a statement is prepared on its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Planning {
    /// Prepared once per connection and kept (PostgreSQL plans each call or keeps a plan).
    Cached,
    /// Kept, and prepared again once this connection's copy is older than [`REPLAN_AFTER`].
    Replanned,
}

/// When each connection last prepared each replanned statement.
///
/// A connection is known by its statement cache, which lives exactly as long as it does; the weak
/// reference tells a closed connection from a new one that was given the same address.
#[derive(Default)]
pub(crate) struct Replanner {
    prepared_at: Mutex<HashMap<StatementOnConnection, Prepared>>,
}

/// A connection's statement cache address and the statement's name.
type StatementOnConnection = (usize, &'static str);

/// The connection that prepared a statement, and when.
type Prepared = (Weak<StatementCache>, Instant);

impl Replanner {
    /// The prepared `sql` (named `name`) on `client`, prepared again first when this connection's
    /// copy is older than [`REPLAN_AFTER`].
    pub(crate) async fn prepare(
        &self,
        client: &Object,
        name: &'static str,
        sql: &str,
    ) -> Result<Statement, tokio_postgres::Error> {
        if self.is_due(&client.statement_cache, name, Instant::now()) {
            // Dropping the last handle of the old statement closes it on the server.
            client.statement_cache.remove(sql, &[]);
        }
        client.prepare_cached(sql).await
    }

    /// Whether the connection owning `cache` should prepare `name` again at `now`; records `now`
    /// as its preparation time when it should.
    fn is_due(&self, cache: &Arc<StatementCache>, name: &'static str, now: Instant) -> bool {
        let key = (Arc::as_ptr(cache) as usize, name);
        let mut prepared_at = self
            .prepared_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = prepared_at.get(&key).is_some_and(|(owner, at)| {
            owner.upgrade().is_some_and(|o| Arc::ptr_eq(&o, cache))
                && now.duration_since(*at) < REPLAN_AFTER
        });
        if !current {
            prepared_at.retain(|_, (owner, _)| owner.strong_count() > 0);
            prepared_at.insert(key, (Arc::downgrade(cache), now));
        }
        !current
    }
}
