//! The counts of GET /admin/stats on PostgreSQL: migration 5's index, and the finished state's
//! total taken from the planner's row count once the table has statistics (and flagged so).

use queuebox_store::{InboxState, MigrateRequest, OperatorStore, OutboxState, SchemaStore};

use crate::support::TestDb;

#[tokio::test]
async fn stats_sent_and_processed_totals_are_estimates_once_the_tables_are_analyzed() {
    let db = TestDb::new("statsestimate").await;
    let store = db.store().await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    assert!(
        db.has_relation("idx_outbox_state_created").await,
        "version 5 creates the index of the admin lists"
    );
    db.exec(
        "INSERT INTO outbox (topic, payload, state) \
         SELECT 't', '{}', 'sent' FROM generate_series(1, 3); \
         INSERT INTO outbox (topic, payload, state) VALUES ('t', '{}', 'dead'); \
         INSERT INTO inbox (source, idempotency_key, payload, state) \
         SELECT 's', 'k' || n, '{}', 'processed' FROM generate_series(1, 3) n; \
         INSERT INTO inbox (source, idempotency_key, payload, state) VALUES ('s', 'd', '{}', 'dead')",
    )
    .await;
    // Never vacuumed or analyzed (reltuples -1): every total is counted.
    let outbox = store.outbox_counts().await.expect("outbox counts");
    assert_eq!(outbox.estimated, None);
    assert_eq!(outbox.total(OutboxState::Sent), 3);
    let inbox = store.inbox_counts().await.expect("inbox counts");
    assert_eq!(inbox.estimated, None);
    assert_eq!(inbox.total(InboxState::Processed), 3);

    // Analyzed at 4 rows each, then 2 more finished rows: the finished total is the planner's
    // 4 less the exact dead row, so the 2 later rows are not in it; dead stays exact.
    db.exec(
        "ANALYZE outbox; ANALYZE inbox; \
         INSERT INTO outbox (topic, payload, state) \
         SELECT 't', '{}', 'sent' FROM generate_series(1, 2); \
         INSERT INTO outbox (topic, payload, state) VALUES ('t', '{}', 'dead'); \
         INSERT INTO inbox (source, idempotency_key, payload, state) \
         SELECT 's', 'later' || n, '{}', 'processed' FROM generate_series(1, 2) n",
    )
    .await;
    let outbox = store.outbox_counts().await.expect("outbox counts");
    assert_eq!(outbox.estimated, Some(OutboxState::Sent));
    assert_eq!(outbox.total(OutboxState::Sent), 2, "4 analyzed less 2 dead");
    assert_eq!(outbox.total(OutboxState::Dead), 2);
    let inbox = store.inbox_counts().await.expect("inbox counts");
    assert_eq!(inbox.estimated, Some(InboxState::Processed));
    assert_eq!(
        inbox.total(InboxState::Processed),
        3,
        "4 analyzed less 1 dead"
    );
    assert_eq!(inbox.total(InboxState::Dead), 1);
    db.drop().await;
}
