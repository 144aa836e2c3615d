//! The fenced writes of the suite (outbox.md OUT-28, OUT-31, OUT-40..47, OUT-58, schema.md
//! SCH-15): renew, the terminal writes column by column, release, reclaim, and the pending
//! gauges.

use std::collections::HashSet;
use std::time::Duration;

use queuebox_core::TableLayout;
use uuid::Uuid;

use super::outbox_claim::claim_of;
use super::{
    ConformanceDatabase, ConformanceFactory, LONG_LEASE, NewOutboxRow, OutboxSnapshot, migrated,
};
use crate::outbox::{Claim, ClaimToken, OutboxStore, TerminalWrite};

/// Inserts `n` keyless due rows and claims them all with `lease`.
pub(crate) async fn claimed_rows(
    db: &dyn ConformanceDatabase,
    store: &dyn OutboxStore,
    n: usize,
    lease: Duration,
) -> Vec<Claim> {
    let rows: Vec<NewOutboxRow> = (0..n).map(|_| NewOutboxRow::new("t")).collect();
    db.insert_outbox(&TableLayout::default(), &rows).await;
    let claimed = store.claim(n as u32, lease).await.expect("claim");
    assert_eq!(claimed.len(), n);
    rows.iter().map(|r| claim_of(&claimed, r.id)).collect()
}

pub(crate) fn stale(claim: Claim) -> Claim {
    Claim {
        id: claim.id,
        token: ClaimToken(Uuid::new_v4()),
    }
}

fn as_set(claims: &[Claim]) -> HashSet<Claim> {
    claims.iter().copied().collect()
}

/// The row as `before`, with the columns every transition out of processing writes (OUT-10)
/// taken from `after`; the callers then set the columns their write changes.
pub(crate) fn left_processing(
    before: &OutboxSnapshot,
    after: &OutboxSnapshot,
    state: &str,
) -> OutboxSnapshot {
    assert!(
        before.read_at <= after.updated_at && after.updated_at <= after.read_at,
        "updated_at is not the database clock of the write"
    );
    OutboxSnapshot {
        state: state.to_owned(),
        claim_token: None,
        lease_expires_at: None,
        updated_at: after.updated_at,
        read_at: after.read_at,
        ..before.clone()
    }
}

/// OUT-40/41: a renewal extends the lease under the fence; a stale token or an expired lease
/// renews nothing and is absent from the answer.
pub(crate) async fn out_41_renew_extends_the_lease_and_stale_renews_nothing(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out41renew").await;
    let layout = TableLayout::default();
    let claims = claimed_rows(&*db, &*store, 2, Duration::from_secs(5)).await;
    let before = db.outbox_row(&layout, claims[0].id.0).await;

    let renewed = store
        .renew(&[claims[0], stale(claims[1])], LONG_LEASE)
        .await
        .expect("renew");
    assert_eq!(renewed, vec![claims[0]]);
    let after = db.outbox_row(&layout, claims[0].id.0).await;
    let lease = after.lease_expires_at.expect("lease");
    assert!(lease >= before.read_at + 59_000_000, "lease not extended");
    assert!(lease <= after.read_at + 60_000_000);
    let unchanged = OutboxSnapshot {
        lease_expires_at: before.lease_expires_at,
        read_at: before.read_at,
        ..after.clone()
    };
    assert_eq!(unchanged, before, "a renewal writes only the lease");
    let untouched = db.outbox_row(&layout, claims[1].id.0).await;
    assert!(untouched.lease_expires_at.expect("lease") < before.read_at + 6_000_000);

    let expired = claimed_rows(&*db, &*store, 1, Duration::ZERO).await;
    assert!(
        store
            .renew(&expired, LONG_LEASE)
            .await
            .expect("renew")
            .is_empty()
    );
    assert!(
        store
            .renew(&[], LONG_LEASE)
            .await
            .expect("renew")
            .is_empty()
    );
    db.cleanup().await;
}

/// SCH-15 "Delivered": `sent`, token and lease NULL, `updated_at` now; nothing else changes.
pub(crate) async fn out_31_finish_sent_writes_exactly_its_columns(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out31sent").await;
    let layout = TableLayout::default();
    let claim = claimed_rows(&*db, &*store, 1, LONG_LEASE).await[0];
    let before = db.outbox_row(&layout, claim.id.0).await;
    let written = store
        .finish(&[TerminalWrite::Sent { claim }])
        .await
        .expect("finish");
    assert_eq!(written, vec![claim]);
    let after = db.outbox_row(&layout, claim.id.0).await;
    assert_eq!(after, left_processing(&before, &after, "sent"));
    assert!(
        after.claimed_at.is_some(),
        "claimed_at keeps the last claim"
    );
    db.cleanup().await;
}

/// SCH-15 "Failed, attempts left": `pending`, the given attempt, `scheduled_at` = now +
/// delay, `last_error`, plus the OUT-10 columns.
pub(crate) async fn out_28_finish_retry_writes_exactly_its_columns(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out28retry").await;
    let layout = TableLayout::default();
    let claim = claimed_rows(&*db, &*store, 1, LONG_LEASE).await[0];
    let before = db.outbox_row(&layout, claim.id.0).await;
    let retry = TerminalWrite::Retry {
        claim,
        attempt: 1,
        delay: Duration::from_millis(1_500),
        error: "HTTP 503".into(),
    };
    assert_eq!(store.finish(&[retry]).await.expect("finish"), vec![claim]);
    let after = db.outbox_row(&layout, claim.id.0).await;
    let delay_us = after.scheduled_at - after.updated_at;
    assert!(
        (1_499_000..=1_510_000).contains(&delay_us),
        "scheduled {delay_us} µs after the write"
    );
    let expected = OutboxSnapshot {
        attempt: 1,
        scheduled_at: after.scheduled_at,
        last_error: Some("HTTP 503".into()),
        ..left_processing(&before, &after, "pending")
    };
    assert_eq!(after, expected);
    db.cleanup().await;
}

/// A hold by the destination guard (issue 15 item 6): a retry that leaves `attempt` and
/// `last_error` as they were, so a row that failed once and is then held by an open circuit
/// breaker still shows its failure (SCH-15: `last_error` is the reason of the last failure).
pub(crate) async fn out_41_hold_keeps_attempt_and_last_error(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out41hold").await;
    let layout = TableLayout::default();
    let claim = claimed_rows(&*db, &*store, 1, LONG_LEASE).await[0];
    let failed = TerminalWrite::Retry {
        claim,
        attempt: 1,
        delay: Duration::ZERO,
        error: "HTTP 503".into(),
    };
    assert_eq!(store.finish(&[failed]).await.expect("finish"), vec![claim]);
    let again = store.claim(1, LONG_LEASE).await.expect("claim");
    assert_eq!(again.len(), 1);
    let claim = claim_of(&again, claim.id.0);
    let before = db.outbox_row(&layout, claim.id.0).await;
    let hold = TerminalWrite::Hold {
        claim,
        attempt: 1,
        delay: Duration::from_millis(1_500),
    };
    assert_eq!(store.finish(&[hold]).await.expect("finish"), vec![claim]);
    let after = db.outbox_row(&layout, claim.id.0).await;
    let delay_us = after.scheduled_at - after.updated_at;
    assert!(
        (1_499_000..=1_510_000).contains(&delay_us),
        "scheduled {delay_us} µs after the write"
    );
    let expected = OutboxSnapshot {
        attempt: 1,
        scheduled_at: after.scheduled_at,
        last_error: Some("HTTP 503".into()),
        ..left_processing(&before, &after, "pending")
    };
    assert_eq!(after, expected);
    db.cleanup().await;
}

/// SCH-15 "Failed, no attempts left" and "Dead without a delivery": `dead`, the given attempt,
/// `last_error` (cut to 2000 characters), `scheduled_at` unchanged.
pub(crate) async fn out_28_finish_dead_writes_exactly_its_columns(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out28dead").await;
    let layout = TableLayout::default();
    let claims = claimed_rows(&*db, &*store, 2, LONG_LEASE).await;
    let before: Vec<OutboxSnapshot> = vec![
        db.outbox_row(&layout, claims[0].id.0).await,
        db.outbox_row(&layout, claims[1].id.0).await,
    ];
    let long = "é".repeat(2_500);
    let writes = [
        TerminalWrite::Dead {
            claim: claims[0],
            attempt: 5,
            error: "HTTP 500".into(),
        },
        TerminalWrite::Dead {
            claim: claims[1],
            attempt: 0,
            error: long.clone(),
        },
    ];
    let written = store.finish(&writes).await.expect("finish");
    assert_eq!(as_set(&written), as_set(&claims));
    let after = db.outbox_row(&layout, claims[0].id.0).await;
    let expected = OutboxSnapshot {
        attempt: 5,
        last_error: Some("HTTP 500".into()),
        ..left_processing(&before[0], &after, "dead")
    };
    assert_eq!(after, expected);
    let cut = db.outbox_row(&layout, claims[1].id.0).await;
    let expected = OutboxSnapshot {
        attempt: 0,
        last_error: Some(long.chars().take(2_000).collect()),
        ..left_processing(&before[1], &cut, "dead")
    };
    assert_eq!(cut, expected);
    db.cleanup().await;
}

/// OUT-41/44: one call writes a mixed batch; a stale token and an expired lease write nothing
/// and are absent from the answer.
pub(crate) async fn out_41_finish_mixed_batch_and_lost_claims(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out41fin").await;
    let layout = TableLayout::default();
    let live = claimed_rows(&*db, &*store, 4, LONG_LEASE).await;
    let expired = claimed_rows(&*db, &*store, 1, Duration::ZERO).await[0];
    let writes = vec![
        TerminalWrite::Sent { claim: live[0] },
        TerminalWrite::Retry {
            claim: live[1],
            attempt: 2,
            delay: Duration::from_secs(10),
            error: "timeout".into(),
        },
        TerminalWrite::Dead {
            claim: live[2],
            attempt: 5,
            error: "HTTP 400".into(),
        },
        TerminalWrite::Sent {
            claim: stale(live[3]),
        },
        TerminalWrite::Dead {
            claim: expired,
            attempt: 1,
            error: "late".into(),
        },
    ];
    let stale_before = db.outbox_row(&layout, live[3].id.0).await;
    let expired_before = db.outbox_row(&layout, expired.id.0).await;
    let written = store.finish(&writes).await.expect("finish");
    assert_eq!(as_set(&written), as_set(&live[..3]));
    for (id, state) in [
        (live[0].id, "sent"),
        (live[1].id, "pending"),
        (live[2].id, "dead"),
    ] {
        assert_eq!(db.outbox_row(&layout, id.0).await.state, state);
    }
    let stale_after = db.outbox_row(&layout, live[3].id.0).await;
    assert_eq!(
        OutboxSnapshot {
            read_at: stale_before.read_at,
            ..stale_after
        },
        stale_before,
        "a stale token wrote"
    );
    let expired_after = db.outbox_row(&layout, expired.id.0).await;
    assert_eq!(
        OutboxSnapshot {
            read_at: expired_before.read_at,
            ..expired_after
        },
        expired_before,
        "an expired lease wrote"
    );
    assert!(store.finish(&[]).await.expect("finish").is_empty());
    db.cleanup().await;
}
