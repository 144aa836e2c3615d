//! The operator checks of the inbox (operations.md ADM-9, ADM-11, ADM-12, ADM-21..25; inbox.md
//! RLY-17): lists by state with filters and a keyset cursor, show without the claim token,
//! requeue of `dead` rows only, deletes guarded by state, in chunks, and the counts.

use std::collections::BTreeSet;

use queuebox_core::TableLayout;
use uuid::Uuid;

use super::inbox_support::{json, message, pulled, relay_claim_of, sources, store_all};
use super::{ConformanceFactory, LONG_LEASE, inbox_migrated};
use crate::intake::{Consumption, InsertOutcome, NewInboxRow};
use crate::operator::{
    DeleteOutcome, FinishedInboxState, InboxFilter, InboxState, PageRequest, StateCount,
};
use crate::relay::{ForwardedRow, RelayRow};
use crate::store::Store;

/// How an inbox row of an operator check ends up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    Pending,
    Processing,
    Processed,
    Dead,
}

/// Stores the push rows and brings each to its fate through the relay; dead rows carry
/// `last_error` "dead <n>" with their index. Returns the ids.
pub(crate) async fn inbox_rows(store: &dyn Store, rows: &[(NewInboxRow, Fate)]) -> Vec<Uuid> {
    let new: Vec<_> = rows.iter().map(|(row, _)| row.clone()).collect();
    for chunk in new.chunks(500) {
        store_all(store, chunk).await;
    }
    let mut names: Vec<String> = new.iter().map(|r| r.source.clone()).collect();
    names.sort();
    names.dedup();
    let mut claimed: Vec<RelayRow> = Vec::new();
    while claimed.len() < rows.len() {
        let batch = store
            .relay_claim(500, LONG_LEASE, &names)
            .await
            .expect("relay claim");
        assert!(!batch.is_empty(), "every row is claimable");
        claimed.extend(batch);
    }
    let mut release = Vec::new();
    for (n, (row, fate)) in rows.iter().enumerate() {
        let claim = relay_claim_of(&claimed, row.id);
        match fate {
            Fate::Dead => {
                let error = format!("dead {n}");
                assert!(store.relay_dead(claim, &error).await.expect("dead"));
            }
            Fate::Processed => {
                let forwarded = ForwardedRow {
                    id: Uuid::now_v7(),
                    topic: "t".into(),
                    key: None,
                    payload: row.payload.clone(),
                    headers: "{}".into(),
                    max_attempts: 5,
                };
                assert!(
                    store
                        .relay_forward(claim, &forwarded)
                        .await
                        .expect("forward")
                );
            }
            Fate::Pending => release.push(claim),
            Fate::Processing => {}
        }
    }
    store.relay_release(&release, None).await.expect("release");
    new.iter().map(|r| r.id).collect()
}

fn first_page(limit: u32) -> PageRequest {
    PageRequest { after: None, limit }
}

fn by_ids(ids: &[Uuid]) -> InboxFilter {
    InboxFilter {
        ids: Some(ids.to_vec()),
        ..InboxFilter::default()
    }
}

/// ADM-11, ADM-21: a list holds the rows of one state only, newest first by
/// (`created_at`, `id`); the cursor walks every page once; filters combine with AND.
pub(crate) async fn adm_21_inbox_list_by_state_filters_and_pages(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "adm21").await;
    let layout = TableLayout::default();
    let mut rows: Vec<_> = (0..5)
        .map(|n| {
            let mut row = message(if n % 2 == 0 { "a" } else { "b" }, &format!("k{n}"));
            row.event_type = Some(format!("e{}", n % 2));
            (row, Fate::Dead)
        })
        .collect();
    rows.push((message("a", "processed"), Fate::Processed));
    let ids = inbox_rows(&*store, &rows).await;
    let pull = pulled(message("a", "pull-1"));
    store_all(&*store, std::slice::from_ref(&pull)).await;

    let mut dead = Vec::new();
    for id in &ids[..5] {
        let row = db.inbox_row(&layout, *id).await;
        dead.push((row.created_at, row.id));
    }
    dead.sort_by(|a, b| b.cmp(a));
    let expected: Vec<Uuid> = dead.iter().map(|(_, id)| *id).collect();
    let mut seen = Vec::new();
    let mut page = first_page(2);
    loop {
        let got = store
            .list_inbox(InboxState::Dead, &InboxFilter::default(), page)
            .await
            .expect("list");
        assert!(got.items.iter().all(|s| s.state == InboxState::Dead));
        seen.extend(got.items.iter().map(|s| s.id));
        match got.next {
            Some(cursor) => page.after = Some(cursor),
            None => break,
        }
    }
    assert_eq!(seen, expected, "every dead row once, newest first");

    let filter = InboxFilter {
        sources: Some(sources(&["a"])),
        event_type: Some("e0".into()),
        ..InboxFilter::default()
    };
    let got = store
        .list_inbox(InboxState::Dead, &filter, first_page(50))
        .await
        .expect("list");
    let got: BTreeSet<_> = got.items.iter().map(|s| s.id).collect();
    assert_eq!(got, BTreeSet::from([ids[0], ids[2], ids[4]]));

    let pull_only = InboxFilter {
        consumption: Some(Consumption::Pull),
        ..InboxFilter::default()
    };
    let got = store
        .list_inbox(InboxState::Pending, &pull_only, first_page(50))
        .await
        .expect("list");
    assert_eq!(
        got.items.iter().map(|s| s.id).collect::<Vec<_>>(),
        [pull.id]
    );
    assert_eq!(got.items[0].consumption, Consumption::Pull);

    let key = InboxFilter {
        idempotency_key: Some("k3".into()),
        error_contains: Some("dead 3".into()),
        ..InboxFilter::default()
    };
    let got = store
        .list_inbox(InboxState::Dead, &key, first_page(50))
        .await
        .expect("list");
    assert_eq!(got.items.iter().map(|s| s.id).collect::<Vec<_>>(), [ids[3]]);
    assert_eq!(got.items[0].last_error.as_deref(), Some("dead 3"));
    let none = InboxFilter {
        sources: Some(Vec::new()),
        ..InboxFilter::default()
    };
    let got = store
        .list_inbox(InboxState::Dead, &none, first_page(50))
        .await
        .expect("list");
    assert!(got.items.is_empty(), "an empty source set matches nothing");
    db.cleanup().await;
}

/// ADM-12, ADM-22: show gives the list fields, the claim times, headers and payload, never
/// the claim token; an unknown id is `None`.
pub(crate) async fn adm_22_inbox_show_has_every_column_but_the_claim_token(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "adm22").await;
    let layout = TableLayout::default();
    let mut row = message("orders", "o-1");
    row.aggregate_id = Some("agg".into());
    row.correlation_id = Some("corr".into());
    row.headers = r#"{"h":"v"}"#.into();
    let ids = inbox_rows(&*store, &[(row.clone(), Fate::Processing)]).await;
    let shown = store
        .show_inbox(ids[0])
        .await
        .expect("show")
        .expect("found");
    let stored = db.inbox_row(&layout, ids[0]).await;
    let s = &shown.summary;
    assert_eq!(
        (s.id, s.source.as_str(), s.idempotency_key.as_str()),
        (row.id, "orders", "o-1")
    );
    assert_eq!(s.aggregate_id.as_deref(), Some("agg"));
    assert_eq!(s.correlation_id.as_deref(), Some("corr"));
    assert_eq!(
        (s.state, s.consumption),
        (InboxState::Processing, Consumption::Push)
    );
    assert!(shown.claimed_at.is_some() && shown.lease_expires_at.is_some());
    assert_eq!(json(&shown.headers), json(&row.headers));
    assert_eq!(json(&shown.payload), json(&row.payload));
    assert!(
        stored.claim_token.is_some(),
        "the row is claimed, yet show has no token"
    );
    assert_eq!(store.show_inbox(Uuid::new_v4()).await.expect("show"), None);
    db.cleanup().await;
}

/// RLY-17, ADM-25: requeue moves only `dead` rows back to `pending`, resets exactly its
/// columns and keeps the message; a requeued push row is claimed by the relay again.
pub(crate) async fn rly_17_requeue_moves_only_dead_rows_and_resets_their_columns(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "rly17").await;
    let layout = TableLayout::default();
    let rows = [
        (message("s", "dead"), Fate::Dead),
        (message("s", "processed"), Fate::Processed),
        (message("s", "pending"), Fate::Pending),
        (message("s", "processing"), Fate::Processing),
    ];
    let ids = inbox_rows(&*store, &rows).await;
    let mut before = Vec::new();
    for id in &ids {
        before.push(db.inbox_row(&layout, *id).await);
    }
    let moved = store
        .requeue_inbox(&by_ids(&ids), None)
        .await
        .expect("requeue");
    assert_eq!(moved, 1, "only the dead row");
    for (old, (_, fate)) in before.iter().zip(&rows) {
        let new = db.inbox_row(&layout, old.id).await;
        if *fate != Fate::Dead {
            let unchanged = super::InboxSnapshot {
                read_at: new.read_at,
                ..old.clone()
            };
            assert_eq!(new, unchanged, "{fate:?} never moves");
            continue;
        }
        assert_eq!((new.state.as_str(), new.attempt), ("pending", 0));
        assert_eq!((new.last_error, new.processed_at), (None, None));
        assert_eq!(
            (new.claimed_at, new.claim_token, new.lease_expires_at),
            (None, None, None)
        );
        assert!(new.scheduled_at >= old.scheduled_at && new.scheduled_at <= new.read_at);
        let kept = (
            &new.source,
            &new.idempotency_key,
            &new.consumption,
            &new.payload,
        );
        assert_eq!(
            kept,
            (
                &old.source,
                &old.idempotency_key,
                &old.consumption,
                &old.payload
            )
        );
        assert_eq!(
            (&new.headers, new.created_at),
            (&old.headers, old.created_at)
        );
    }
    let again = store
        .relay_claim(10, LONG_LEASE, &sources(&["s"]))
        .await
        .expect("claim");
    let claimed: BTreeSet<_> = again.iter().map(|r| r.claim.id.0).collect();
    assert_eq!(
        claimed,
        BTreeSet::from([ids[0], ids[2]]),
        "requeued and pending"
    );
    db.cleanup().await;
}

/// ADM-9: a requeue of more than one chunk moves every dead row, a `limit` bounds it, oldest
/// first.
pub(crate) async fn adm_9_requeue_in_chunks_honours_the_limit(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "adm9requeue").await;
    let rows: Vec<_> = (0..700)
        .map(|n| (message("bulk", &format!("k{n}")), Fate::Dead))
        .collect();
    inbox_rows(&*store, &rows).await;
    let bulk = InboxFilter {
        sources: Some(sources(&["bulk"])),
        ..InboxFilter::default()
    };
    assert_eq!(
        store
            .requeue_inbox(&bulk, Some(520))
            .await
            .expect("requeue"),
        520
    );
    assert_eq!(
        store.requeue_inbox(&bulk, None).await.expect("requeue"),
        180
    );
    assert_eq!(store.requeue_inbox(&bulk, None).await.expect("requeue"), 0);
    let counts = store.inbox_counts().await.expect("counts");
    let pending = StateCount {
        group: "bulk".into(),
        state: InboxState::Pending,
        count: 700,
    };
    assert_eq!(counts.counts, [pending]);
    db.cleanup().await;
}

/// ADM-23: a single delete takes a `processed` or `dead` row only; afterwards its pair no
/// longer deduplicates.
pub(crate) async fn adm_23_inbox_delete_one_is_guarded_by_state(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "adm23").await;
    let rows = [
        (message("s", "processed"), Fate::Processed),
        (message("s", "dead"), Fate::Dead),
        (message("s", "pending"), Fate::Pending),
        (message("s", "processing"), Fate::Processing),
    ];
    let ids = inbox_rows(&*store, &rows).await;
    let delete = |id| store.delete_inbox_row(id);
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
        delete(ids[1]).await.expect("delete"),
        DeleteOutcome::NotFound
    );
    let again = message("s", "processed");
    assert_eq!(
        store
            .insert_batch(std::slice::from_ref(&again))
            .await
            .expect("insert"),
        [InsertOutcome::Stored(again.id)],
        "a deleted row no longer deduplicates"
    );
    db.cleanup().await;
}

/// ADM-24, ADM-9: a bulk delete takes rows of the given state that match, at most `limit`, in
/// chunks, and leaves every other row; counts follow per source and state.
pub(crate) async fn adm_24_inbox_bulk_delete_takes_only_its_state_and_filter(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "adm24").await;
    let mut rows: Vec<_> = (0..520)
        .map(|n| (message("a", &format!("p{n}")), Fate::Processed))
        .collect();
    rows.extend((0..2).map(|n| (message("b", &format!("p{n}")), Fate::Processed)));
    rows.extend((0..3).map(|n| (message("a", &format!("d{n}")), Fate::Dead)));
    rows.push((message("a", "pending"), Fate::Pending));
    inbox_rows(&*store, &rows).await;
    let source_a = InboxFilter {
        sources: Some(sources(&["a"])),
        ..InboxFilter::default()
    };
    let processed = FinishedInboxState::Processed;
    let n = store.delete_inbox_rows(processed, &source_a, Some(5)).await;
    assert_eq!(n.expect("delete"), 5, "the limit");
    let n = store.delete_inbox_rows(processed, &source_a, None).await;
    assert_eq!(n.expect("delete"), 515, "the rest, over two chunks");
    let counts = store.inbox_counts().await.expect("counts");
    let count = |group: &str, state, count| StateCount {
        group: group.into(),
        state,
        count,
    };
    // Every state has its exact total; per source only pending, processing and dead.
    assert_eq!(
        counts.states,
        [
            (InboxState::Pending, 1),
            (InboxState::Processing, 0),
            (InboxState::Processed, 2),
            (InboxState::Dead, 3),
        ]
    );
    assert_eq!(
        counts.counts,
        [
            count("a", InboxState::Pending, 1),
            count("a", InboxState::Dead, 3),
        ]
    );
    assert!(counts.oldest_pending_age_seconds >= 0.0);
    let dead = FinishedInboxState::Dead;
    let all = InboxFilter::default();
    assert_eq!(
        store
            .delete_inbox_rows(dead, &all, None)
            .await
            .expect("delete"),
        3
    );
    let layout = TableLayout::default();
    assert_eq!(
        db.inbox_ids(&layout).await.len(),
        3,
        "2 processed of b, 1 pending"
    );
    db.cleanup().await;
}
