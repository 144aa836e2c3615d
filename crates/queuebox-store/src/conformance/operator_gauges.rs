//! The operator gauges (issue 13 part 4, issue 14 items 10 and 12): dead rows of each table, the
//! age of the oldest `pending` row by `created_at` whether it is due or waits in backoff, and the
//! inbox pending rows per source.

use queuebox_core::TableLayout;

use super::outbox_claim::claim_of;
use super::{ConformanceFactory, InboxFixture, LONG_LEASE, NewOutboxRow, inbox_migrated, migrated};
use crate::intake::Consumption;
use crate::outbox::TerminalWrite;

/// A row in backoff is not due, so the due-based age reads 0, while the age by `created_at`
/// reads how long it has waited; a `dead` row is counted, a `sent` one is not.
pub(crate) async fn gauges_outbox_backoff_age_and_dead_rows(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "gauge_out").await;
    let layout = TableLayout::default();
    let empty = store.pending_stats().await.expect("stats");
    assert_eq!(
        (empty.pending, empty.dead, empty.oldest_created_age_seconds),
        (0, 0, 0.0)
    );
    let dead = NewOutboxRow::new("t").scheduled_in_ms(-1_000);
    let sent = NewOutboxRow::new("t").scheduled_in_ms(-1_000);
    db.insert_outbox(&layout, &[dead.clone(), sent.clone()])
        .await;
    let claimed = store.claim(10, LONG_LEASE).await.expect("claim");
    let writes = [
        TerminalWrite::Dead {
            claim: claim_of(&claimed, dead.id),
            attempt: 1,
            error: "gone".into(),
        },
        TerminalWrite::Sent {
            claim: claim_of(&claimed, sent.id),
        },
    ];
    assert_eq!(store.finish(&writes).await.expect("finish").len(), 2);
    // Waiting in backoff: due in an hour, created two minutes ago.
    let backoff = NewOutboxRow::new("t").scheduled_in_ms(3_600_000);
    db.insert_outbox(&layout, std::slice::from_ref(&backoff))
        .await;
    db.backdate_outbox(&layout, backoff.id, 120_000).await;

    let stats = store.pending_stats().await.expect("stats");
    assert_eq!(stats.pending, 1);
    assert_eq!(stats.dead, 1);
    assert_eq!(stats.oldest_due_age_seconds, 0.0, "the row is not due");
    assert!(
        // SQLite's clock arithmetic is in floating-point days: 120 s can read 119.99999 s.
        (119.9..140.0).contains(&stats.oldest_created_age_seconds),
        "age by created_at {}",
        stats.oldest_created_age_seconds
    );
    db.cleanup().await;
}

/// Pending rows per source (push and pull, due or not), the oldest age by `created_at` of
/// each, and the dead rows; `processing` and `processed` rows count in neither.
pub(crate) async fn gauges_inbox_backlog_per_source_and_dead_rows(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "gauge_in").await;
    let empty = store.inbox_backlog().await.expect("backlog");
    assert_eq!((empty.pending(), empty.dead), (0, 0));
    assert!(empty.sources.is_empty());
    let mut in_backoff = InboxFixture::old("stripe", "k1", Consumption::Push, "pending", 300_000);
    in_backoff.scheduled_ago_ms = -3_600_000;
    let rows = [
        in_backoff,
        InboxFixture::old("stripe", "k2", Consumption::Push, "pending", 10_000),
        InboxFixture::old("jobs", "k3", Consumption::Pull, "pending", 60_000),
        InboxFixture::old("jobs", "k4", Consumption::Pull, "processing", 900_000),
        InboxFixture::old("jobs", "k5", Consumption::Pull, "processed", 900_000),
        InboxFixture::old("stripe", "k6", Consumption::Push, "dead", 900_000),
        InboxFixture::old("jobs", "k7", Consumption::Pull, "dead", 900_000),
    ];
    db.insert_inbox_fixtures(&rows).await;
    let backlog = store.inbox_backlog().await.expect("backlog");
    assert_eq!(backlog.dead, 2);
    assert_eq!(backlog.pending(), 3);
    let mut sources = backlog.sources.clone();
    sources.sort_by(|a, b| a.source.cmp(&b.source));
    let names: Vec<_> = sources
        .iter()
        .map(|s| (s.source.as_str(), s.pending))
        .collect();
    assert_eq!(names, [("jobs", 1), ("stripe", 2)]);
    let jobs = sources[0].oldest_created_age_seconds;
    let stripe = sources[1].oldest_created_age_seconds;
    assert!((60.0..80.0).contains(&jobs), "jobs {jobs}");
    assert!(
        (300.0..320.0).contains(&stripe),
        "stripe {stripe} (a row in backoff counts)"
    );
    assert!((300.0..320.0).contains(&backlog.oldest_created_age_seconds()));
    // The due-based gauge does not see the row in backoff.
    let due = store.inbox_oldest_pending_age().await.expect("age");
    assert!((60.0..80.0).contains(&due), "due age {due}");
    db.cleanup().await;
}
