//! The operator checks of the outbox (operations.md ADM-9, ADM-11..20; outbox.md OUT-48..52):
//! lists by state with filters and a keyset cursor, show without the claim token, replay of
//! `sent` and `dead` rows only, deletes guarded by state, in chunks, and the counts.

use std::collections::BTreeMap;

use queuebox_core::TableLayout;
use uuid::Uuid;

use super::outbox_claim::claim_of;
use super::{ConformanceDatabase, ConformanceFactory, LONG_LEASE, NewOutboxRow, migrated};
use crate::operator::{
    DeleteOutcome, FinishedOutboxState, OutboxFilter, OutboxState, PageRequest, StateCount,
};
use crate::outbox::TerminalWrite;
use crate::store::Store;

/// How an outbox row of an operator check ends up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    Pending,
    Processing,
    Sent,
    Dead,
}

/// Inserts the rows (in one transaction, so in slice order) and brings each to its end through
/// the store; dead rows carry `last_error` "dead <n>" with their index. Returns the ids.
pub(crate) async fn outbox_rows(
    db: &dyn ConformanceDatabase,
    store: &dyn Store,
    rows: &[(NewOutboxRow, End)],
) -> Vec<Uuid> {
    let layout = TableLayout::default();
    let new: Vec<_> = rows.iter().map(|(row, _)| row.clone()).collect();
    db.insert_outbox(&layout, &new).await;
    let mut claimed = Vec::new();
    while claimed.len() < rows.len() {
        let batch = store.claim(500, LONG_LEASE).await.expect("claim");
        assert!(!batch.is_empty(), "every row is claimable");
        claimed.extend(batch);
    }
    let writes: Vec<_> = rows
        .iter()
        .enumerate()
        .filter_map(|(n, (row, end))| {
            let claim = claim_of(&claimed, row.id);
            match end {
                End::Sent => Some(TerminalWrite::Sent { claim }),
                End::Dead => Some(TerminalWrite::Dead {
                    claim,
                    attempt: 1,
                    error: format!("dead {n}"),
                }),
                End::Pending | End::Processing => None,
            }
        })
        .collect();
    for chunk in writes.chunks(500) {
        store.finish(chunk).await.expect("finish");
    }
    let pending: Vec<_> = rows
        .iter()
        .filter(|(_, end)| *end == End::Pending)
        .map(|(row, _)| claim_of(&claimed, row.id))
        .collect();
    store.release(&pending).await.expect("release");
    new.iter().map(|r| r.id).collect()
}

fn by_ids(ids: &[Uuid]) -> OutboxFilter {
    OutboxFilter {
        ids: Some(ids.to_vec()),
        ..OutboxFilter::default()
    }
}

fn first_page(limit: u32) -> PageRequest {
    PageRequest { after: None, limit }
}

/// ADM-11, ADM-17: a list holds the rows of one state only, newest first by
/// (`created_at`, `id`); the cursor walks every page once; filters combine with AND; an empty
/// topic set matches nothing; the error filter is a literal substring.
pub(crate) async fn adm_17_outbox_list_by_state_filters_and_pages(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "adm17").await;
    let layout = TableLayout::default();
    let rows: Vec<_> = (0..7)
        .map(|n| {
            let topic = if n % 2 == 0 { "even" } else { "odd" };
            let end = if n < 5 { End::Dead } else { End::Sent };
            (NewOutboxRow::new(topic).key(&format!("k{n}")), end)
        })
        .collect();
    let ids = outbox_rows(&*db, &*store, &rows).await;

    // Newest first by (created_at, id): the order the database holds, read back.
    let mut dead = Vec::new();
    for id in &ids[..5] {
        let row = db.outbox_row(&layout, *id).await;
        dead.push((row.created_at, row.id));
    }
    dead.sort_by(|a, b| b.cmp(a));
    let expected: Vec<Uuid> = dead.iter().map(|(_, id)| *id).collect();

    let mut seen = Vec::new();
    let mut page = first_page(2);
    loop {
        let got = store
            .list_outbox(OutboxState::Dead, &OutboxFilter::default(), page)
            .await
            .expect("list");
        assert!(got.items.len() <= 2);
        seen.extend(got.items.iter().map(|s| s.id));
        assert!(got.items.iter().all(|s| s.state == OutboxState::Dead));
        match got.next {
            Some(cursor) => page.after = Some(cursor),
            None => break,
        }
    }
    assert_eq!(seen, expected, "every dead row once, newest first");

    let even = OutboxFilter {
        topics: Some(vec!["even".into()]),
        ..OutboxFilter::default()
    };
    let got = store
        .list_outbox(OutboxState::Dead, &even, first_page(50))
        .await
        .expect("list");
    let mut topics: Vec<_> = got.items.iter().map(|s| s.topic.as_str()).collect();
    topics.dedup();
    assert_eq!(topics, ["even"]);
    assert_eq!(got.items.len(), 3, "rows 0, 2 and 4");

    let nothing = OutboxFilter {
        topics: Some(Vec::new()),
        ..OutboxFilter::default()
    };
    let got = store
        .list_outbox(OutboxState::Dead, &nothing, first_page(50))
        .await
        .expect("list");
    assert!(got.items.is_empty(), "an empty topic set matches nothing");

    let both = OutboxFilter {
        key: Some("k3".into()),
        error_contains: Some("dead 3".into()),
        ..OutboxFilter::default()
    };
    let got = store
        .list_outbox(OutboxState::Dead, &both, first_page(50))
        .await
        .expect("list");
    assert_eq!(got.items.iter().map(|s| s.id).collect::<Vec<_>>(), [ids[3]]);
    let wildcard = OutboxFilter {
        error_contains: Some("dead _".into()),
        ..OutboxFilter::default()
    };
    let got = store
        .list_outbox(OutboxState::Dead, &wildcard, first_page(50))
        .await
        .expect("list");
    assert!(got.items.is_empty(), "_ is matched literally: {got:?}");

    let sent = store
        .list_outbox(OutboxState::Sent, &by_ids(&ids), first_page(50))
        .await
        .expect("list");
    assert_eq!(sent.items.len(), 2);
    let item = &sent.items[0];
    let row = db.outbox_row(&layout, item.id).await;
    assert_eq!(
        (item.attempt, item.max_attempts),
        (row.attempt, row.max_attempts)
    );
    assert_eq!(item.key, row.key);
    db.cleanup().await;
}

/// ADM-12, ADM-18: show gives every column but the claim token; an unknown id is `None`.
pub(crate) async fn adm_18_outbox_show_has_every_column_but_the_claim_token(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "adm18").await;
    let layout = TableLayout::default();
    let mut row = NewOutboxRow::new("orders").key("o-1");
    row.payload = r#"{"total":12.5}"#.into();
    row.headers = r#"{"h":"v"}"#.into();
    row.aggregate_type = Some("order".into());
    db.insert_outbox(&layout, std::slice::from_ref(&row)).await;
    store.claim(1, LONG_LEASE).await.expect("claim");

    let shown = store
        .show_outbox(row.id)
        .await
        .expect("show")
        .expect("found");
    let stored = db.outbox_row(&layout, row.id).await;
    assert_eq!(shown.summary.id, row.id);
    assert_eq!(shown.summary.topic, "orders");
    assert_eq!(shown.summary.key.as_deref(), Some("o-1"));
    assert_eq!(shown.summary.aggregate_type.as_deref(), Some("order"));
    assert_eq!(shown.summary.state, OutboxState::Processing);
    assert_eq!(shown.sequence, stored.sequence);
    assert!(shown.claimed_at.is_some() && shown.lease_expires_at.is_some());
    assert_eq!(
        super::inbox_support::json(&shown.payload),
        super::inbox_support::json(&row.payload)
    );
    assert_eq!(
        super::inbox_support::json(&shown.headers),
        super::inbox_support::json(&row.headers)
    );
    assert!(
        stored.claim_token.is_some(),
        "the row is claimed, yet show has no token"
    );
    assert_eq!(store.show_outbox(Uuid::new_v4()).await.expect("show"), None);
    db.cleanup().await;
}

/// OUT-50..52, ADM-15: replay moves only `sent` and `dead` rows, resets exactly the columns of
/// OUT-50 and keeps `id`, `sequence` and the message; it answers the rows moved.
pub(crate) async fn out_50_replay_moves_only_sent_and_dead_rows_and_resets_their_columns(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out50").await;
    let layout = TableLayout::default();
    let rows = [
        (NewOutboxRow::new("t").key("p"), End::Pending),
        (NewOutboxRow::new("t").key("q"), End::Processing),
        (NewOutboxRow::new("t").key("s"), End::Sent),
        (NewOutboxRow::new("t").key("d"), End::Dead),
    ];
    let ids = outbox_rows(&*db, &*store, &rows).await;
    let mut before = Vec::new();
    for id in &ids {
        before.push(db.outbox_row(&layout, *id).await);
    }

    let moved = store
        .replay_outbox(&by_ids(&ids), None)
        .await
        .expect("replay");
    assert_eq!(moved, 2, "OUT-51: the sent and the dead row");

    for (old, (_, end)) in before.iter().zip(&rows) {
        let new = db.outbox_row(&layout, old.id).await;
        match end {
            End::Pending | End::Processing => {
                let unchanged = super::OutboxSnapshot {
                    read_at: new.read_at,
                    ..old.clone()
                };
                assert_eq!(new, unchanged, "{end:?} never moves");
            }
            End::Sent | End::Dead => {
                assert_eq!(new.state, "pending", "{end:?}");
                assert_eq!(new.attempt, 0);
                assert_eq!(new.last_error, None);
                assert_eq!(
                    (new.claimed_at, new.claim_token, new.lease_expires_at),
                    (None, None, None)
                );
                assert!(new.scheduled_at >= old.updated_at && new.scheduled_at <= new.read_at);
                assert_eq!(new.updated_at, new.scheduled_at, "both are now");
                let kept = (&new.id, new.sequence, &new.topic, &new.key, &new.payload);
                assert_eq!(
                    kept,
                    (&old.id, old.sequence, &old.topic, &old.key, &old.payload)
                );
                assert_eq!(
                    (
                        &new.headers,
                        &new.aggregate_type,
                        new.max_attempts,
                        new.created_at
                    ),
                    (
                        &old.headers,
                        &old.aggregate_type,
                        old.max_attempts,
                        old.created_at
                    )
                );
            }
        }
    }
    let again = store
        .replay_outbox(&by_ids(&ids), None)
        .await
        .expect("replay");
    assert_eq!(again, 0, "nothing sent or dead is left");
    let claimed = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(
        claimed.len(),
        3,
        "the replayed rows and the released one are due"
    );
    db.cleanup().await;
}

/// ADM-9: a bulk replay of more than one chunk moves every row, and a `limit` bounds it,
/// oldest `sequence` first.
pub(crate) async fn adm_9_replay_in_chunks_honours_the_limit_oldest_first(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "adm9replay").await;
    let layout = TableLayout::default();
    let rows: Vec<_> = (0..1_100)
        .map(|_| (NewOutboxRow::new("bulk"), End::Dead))
        .collect();
    let ids = outbox_rows(&*db, &*store, &rows).await;
    let bulk = OutboxFilter {
        topics: Some(vec!["bulk".into()]),
        ..OutboxFilter::default()
    };
    assert_eq!(
        store.replay_outbox(&bulk, Some(620)).await.expect("replay"),
        620
    );
    let states = db.outbox_states(&layout).await;
    assert_eq!(
        states,
        BTreeMap::from([("dead".into(), 480), ("pending".into(), 620)])
    );
    // Oldest first: the rows inserted first (lowest sequence) are the replayed ones.
    assert_eq!(db.outbox_row(&layout, ids[619]).await.state, "pending");
    assert_eq!(db.outbox_row(&layout, ids[620]).await.state, "dead");
    assert_eq!(store.replay_outbox(&bulk, None).await.expect("replay"), 480);
    assert_eq!(store.replay_outbox(&bulk, None).await.expect("replay"), 0);
    db.cleanup().await;
}

/// ADM-19: a single delete takes a `sent` or `dead` row only, guarded in the delete.
pub(crate) async fn adm_19_outbox_delete_one_is_guarded_by_state(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "adm19").await;
    let rows = [
        (NewOutboxRow::new("t"), End::Dead),
        (NewOutboxRow::new("t"), End::Sent),
        (NewOutboxRow::new("t"), End::Pending),
        (NewOutboxRow::new("t"), End::Processing),
    ];
    let ids = outbox_rows(&*db, &*store, &rows).await;
    let delete = |id| store.delete_outbox_row(id);
    assert_eq!(
        delete(ids[0]).await.expect("delete"),
        DeleteOutcome::Deleted
    );
    assert_eq!(
        delete(ids[1]).await.expect("delete"),
        DeleteOutcome::Deleted
    );
    assert_eq!(
        delete(ids[2]).await.expect("delete"),
        DeleteOutcome::NotDeletable
    );
    assert_eq!(
        delete(ids[3]).await.expect("delete"),
        DeleteOutcome::NotDeletable
    );
    assert_eq!(
        delete(ids[0]).await.expect("delete"),
        DeleteOutcome::NotFound
    );
    let layout = TableLayout::default();
    assert_eq!(db.outbox_ids(&layout).await.len(), 2);
    db.cleanup().await;
}

/// ADM-20, ADM-9: a bulk delete takes rows of the given state that match the filter, at most
/// `limit`, in chunks, and leaves every other row.
pub(crate) async fn adm_20_outbox_bulk_delete_takes_only_its_state_and_filter(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "adm20").await;
    let layout = TableLayout::default();
    let mut rows: Vec<_> = (0..600)
        .map(|_| (NewOutboxRow::new("a"), End::Dead))
        .collect();
    rows.extend((0..3).map(|_| (NewOutboxRow::new("b"), End::Dead)));
    rows.extend((0..4).map(|_| (NewOutboxRow::new("a"), End::Sent)));
    rows.push((NewOutboxRow::new("a"), End::Pending));
    outbox_rows(&*db, &*store, &rows).await;
    let topic_a = OutboxFilter {
        topics: Some(vec!["a".into()]),
        ..OutboxFilter::default()
    };
    let dead = FinishedOutboxState::Dead;
    let n = store.delete_outbox_rows(dead, &topic_a, Some(10)).await;
    assert_eq!(n.expect("delete"), 10, "the limit");
    let n = store.delete_outbox_rows(dead, &topic_a, None).await;
    assert_eq!(n.expect("delete"), 590, "the rest, over two chunks");
    let states = db.outbox_states(&layout).await;
    assert_eq!(
        states,
        BTreeMap::from([
            ("dead".into(), 3),
            ("pending".into(), 1),
            ("sent".into(), 4)
        ])
    );
    let sent = FinishedOutboxState::Sent;
    let all = OutboxFilter::default();
    assert_eq!(
        store
            .delete_outbox_rows(sent, &all, None)
            .await
            .expect("delete"),
        4
    );
    assert_eq!(
        db.outbox_ids(&layout).await.len(),
        4,
        "3 dead of b, 1 pending"
    );
    db.cleanup().await;
}

/// Counts per state, per topic and live state, the oldest due pending age, and the distinct
/// topics.
pub(crate) async fn outbox_counts_per_topic_and_state(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "outboxcounts").await;
    let layout = TableLayout::default();
    let rows = [
        (NewOutboxRow::new("a"), End::Dead),
        (NewOutboxRow::new("a"), End::Dead),
        (NewOutboxRow::new("a"), End::Sent),
        (NewOutboxRow::new("b"), End::Pending),
    ];
    let ids = outbox_rows(&*db, &*store, &rows).await;
    db.backdate_outbox(&layout, ids[3], 5_000).await;
    let counts = store.outbox_counts().await.expect("counts");
    let count = |group: &str, state, count| StateCount {
        group: group.into(),
        state,
        count,
    };
    // Every state has its exact total; per topic only pending, processing and dead.
    assert_eq!(
        counts.states,
        [
            (OutboxState::Pending, 1),
            (OutboxState::Processing, 0),
            (OutboxState::Sent, 1),
            (OutboxState::Dead, 2),
        ]
    );
    assert_eq!(
        counts.counts,
        [
            count("a", OutboxState::Dead, 2),
            count("b", OutboxState::Pending, 1),
        ]
    );
    let age = counts.oldest_pending_age_seconds;
    assert!((5.0..60.0).contains(&age), "age {age}");
    assert_eq!(store.outbox_topics().await.expect("topics"), ["a", "b"]);
    db.cleanup().await;
}
