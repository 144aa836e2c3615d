//! The claims this poller holds (OUT-40, OUT-53): each row's stage, its cancel token and its log
//! fields. Every task that changes a row's fate goes through here under one short lock, so the
//! release at shutdown, a lost renewal and a finished publish can never both act on one row.
//! The lock is a std mutex and is never held across an `.await`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use queuebox_store::Claim;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::row::RowLog;

/// Where a held row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Claimed; its publish has not started (waiting for a slot, OUT-53).
    Queued,
    /// Its publish is in flight.
    Publishing,
    /// Its terminal write is queued or being written; the writer's answer decides whether the
    /// claim was lost (OUT-44), so a renewal does not.
    Finishing,
}

/// What the claim loop and the shutdown wait for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Every held row, whatever its stage.
    pub held: usize,
    /// Rows waiting for a publish slot.
    pub queued: usize,
    /// Rows whose outcome is known and whose terminal write is queued or being written.
    pub finishing: usize,
}

impl Counts {
    /// The rows OUT-54 counts as held for a claim cycle: waiting for a slot plus publishing.
    /// A finishing row needs no slot; counting it would hold the next claim back until the
    /// writer's commit, so claim, publish and write would take turns instead of overlapping.
    pub fn unfinished(&self) -> usize {
        self.held - self.finishing
    }
}

/// A held row, as handed back when it leaves.
#[derive(Debug)]
pub struct Entry {
    pub stage: Stage,
    /// Cancelled when the claim is lost or the row released: stops the wait for a slot and the
    /// publish (OUT-43).
    pub token: CancellationToken,
    pub log: Arc<RowLog>,
    pub claimed_at: Instant,
    /// The end of the lease by this process's clock: when the claim or the last renewal that
    /// renewed the row was sent, plus `claimTimeoutMs`. The database set the lease a little
    /// later, so this is never after the real end, whatever this process was doing meanwhile
    /// (a stall, a `SIGSTOP`): a publish is not started past it (OUT-43, [`lease_margin`]).
    pub lease_deadline: Instant,
    /// The row has a key and is the last this replica holds of it (alone, or the last row of a
    /// run, run.rs): when it leaves, the next row of its key may have become eligible, so the
    /// claim loop's wait ends (OUT-54). An earlier row of a run leaves no row eligible: the run's
    /// next row still holds the key.
    pub keyed: bool,
}

/// What [`HeldRows::start_publish`] decided.
#[derive(Debug)]
pub enum Start {
    /// The row moved to [`Stage::Publishing`]; its lease has room for the publish.
    Go,
    /// Released or lost meanwhile: nothing more may be done with it.
    Gone,
    /// Its local lease deadline is (nearly) reached: the row left, its token cancelled. Another
    /// replica may own it already, so it must not be published (issue 17 defect 3).
    Expired(Entry),
}

/// The room a publish must still have on its lease to start: a tenth of `claimTimeoutMs`, at
/// least 1 ms. It covers the drift between this process's clock and the database's over one
/// lease, and the time the publish needs to reach the destination.
pub fn lease_margin(claim_timeout: std::time::Duration) -> std::time::Duration {
    (claim_timeout / 10).max(std::time::Duration::from_millis(1))
}

pub struct HeldRows {
    rows: Mutex<HashMap<Claim, Entry>>,
    counts: watch::Sender<Counts>,
    /// Signalled when a keyed row leaves after its terminal write (OUT-54, third point). One
    /// stored permit: any number of rows finished during a claim cycle end the next wait once.
    keyed_left: tokio::sync::Notify,
}

impl HeldRows {
    pub fn new() -> Self {
        Self {
            rows: Mutex::new(HashMap::new()),
            counts: watch::Sender::new(Counts::default()),
            keyed_left: tokio::sync::Notify::new(),
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<Counts> {
        self.counts.subscribe()
    }

    pub fn counts(&self) -> Counts {
        *self.counts.borrow()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Claim, Entry>> {
        // A panic while holding this lock leaves a consistent map (every change is one insert,
        // remove or field store), so a poisoned lock is still usable.
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes the counts after a change, still under the lock so they never go backwards.
    fn publish(&self, rows: &HashMap<Claim, Entry>) {
        let (mut queued, mut finishing) = (0, 0);
        for entry in rows.values() {
            match entry.stage {
                Stage::Queued => queued += 1,
                Stage::Publishing => {}
                Stage::Finishing => finishing += 1,
            }
        }
        self.counts.send_replace(Counts {
            held: rows.len(),
            queued,
            finishing,
        });
    }

    pub fn insert(&self, claim: Claim, entry: Entry) {
        let mut rows = self.lock();
        rows.insert(claim, entry);
        self.publish(&rows);
    }

    /// Moves a row to `to` if it is still held; `false` means it was released or lost meanwhile
    /// and the caller must make no further write (OUT-43).
    pub fn advance(&self, claim: &Claim, to: Stage) -> bool {
        let mut rows = self.lock();
        let Some(entry) = rows.get_mut(claim) else {
            return false;
        };
        entry.stage = to;
        self.publish(&rows);
        true
    }

    /// Moves a queued row to [`Stage::Publishing`] if it is still held and its lease ends
    /// after `now + margin`; a row whose lease is too close to its end leaves instead, as a
    /// lost claim.
    pub fn start_publish(&self, claim: &Claim, now: Instant, margin: std::time::Duration) -> Start {
        let mut rows = self.lock();
        let Some(entry) = rows.get_mut(claim) else {
            return Start::Gone;
        };
        if entry.lease_deadline <= now + margin {
            let entry = rows.remove(claim).map_or(Start::Gone, Start::Expired);
            self.publish(&rows);
            if let Start::Expired(e) = &entry {
                e.token.cancel();
            }
            return entry;
        }
        entry.stage = Stage::Publishing;
        self.publish(&rows);
        Start::Go
    }

    /// OUT-40: these claims were renewed by a renewal sent at `sent`; their leases now end no
    /// earlier than `deadline`.
    pub fn renewed(&self, claims: &[Claim], deadline: Instant) {
        let mut rows = self.lock();
        for claim in claims {
            if let Some(entry) = rows.get_mut(claim) {
                entry.lease_deadline = entry.lease_deadline.max(deadline);
            }
        }
    }

    pub fn contains(&self, claim: &Claim) -> bool {
        self.lock().contains_key(claim)
    }

    /// Every held claim, to renew (OUT-40: waiting, publishing and finishing rows alike).
    pub fn claims(&self) -> Vec<Claim> {
        self.lock().keys().copied().collect()
    }

    /// Stops holding a row (its terminal write is done or given up). A keyed row that leaves
    /// ends the claim loop's wait (OUT-54).
    pub fn remove(&self, claim: &Claim) -> Option<Entry> {
        let mut rows = self.lock();
        let entry = rows.remove(claim);
        self.publish(&rows);
        drop(rows);
        if entry.as_ref().is_some_and(|e| e.keyed) {
            self.keyed_left.notify_one();
        }
        entry
    }

    /// Completes when a keyed row left since the last call (or while waiting).
    pub async fn keyed_row_left(&self) {
        self.keyed_left.notified().await;
    }

    /// OUT-43: the renewal reported these claims not renewed. Rows still queued or publishing
    /// are lost: they leave, and their token is cancelled. Finishing rows stay for the writer,
    /// whose own answer tells (the renewal may simply have run after their write).
    pub fn take_lost(&self, missing: &[Claim]) -> Vec<Entry> {
        let mut rows = self.lock();
        let mut lost = Vec::new();
        for claim in missing {
            if rows.get(claim).is_some_and(|e| e.stage != Stage::Finishing) {
                lost.extend(rows.remove(claim));
            }
        }
        self.publish(&rows);
        lost.iter().for_each(|e| e.token.cancel());
        lost
    }

    /// A run ended early (run.rs): those of these rows still held leave, with their token
    /// cancelled, to be released. No wake-up: the row that ended the run still holds its key.
    pub fn take(&self, claims: &[Claim]) -> Vec<(Claim, Entry)> {
        let mut rows = self.lock();
        let taken: Vec<(Claim, Entry)> = claims
            .iter()
            .filter_map(|c| rows.remove(c).map(|e| (*c, e)))
            .collect();
        self.publish(&rows);
        taken.iter().for_each(|(_, e)| e.token.cancel());
        taken
    }

    /// OUT-58 step 2: every row whose publish has not started leaves, with its token cancelled,
    /// so no publish can start after the release was decided.
    pub fn take_queued(&self) -> Vec<(Claim, Entry)> {
        let mut rows = self.lock();
        let queued: Vec<Claim> = rows
            .iter()
            .filter(|(_, e)| e.stage == Stage::Queued)
            .map(|(c, _)| *c)
            .collect();
        let taken: Vec<(Claim, Entry)> = queued
            .into_iter()
            .filter_map(|c| rows.remove(&c).map(|e| (c, e)))
            .collect();
        self.publish(&rows);
        taken.iter().for_each(|(_, e)| e.token.cancel());
        taken
    }

    /// OUT-58 step 4: the abandon. Every row left stops being held, with no write; its token
    /// is cancelled so its publish is no longer awaited.
    pub fn take_all(&self) -> Vec<Entry> {
        let mut rows = self.lock();
        let all: Vec<Entry> = rows.drain().map(|(_, e)| e).collect();
        self.publish(&rows);
        all.iter().for_each(|e| e.token.cancel());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_store::{ClaimToken, RowId};
    use uuid::Uuid;

    fn claim() -> Claim {
        Claim {
            id: RowId(Uuid::new_v4()),
            token: ClaimToken(Uuid::new_v4()),
        }
    }

    fn entry() -> Entry {
        Entry {
            stage: Stage::Queued,
            token: CancellationToken::new(),
            log: Arc::new(RowLog {
                message_id: Uuid::nil(),
                topic: "t".into(),
                destination: None,
                attempt: 0,
                correlation_id: "c".into(),
            }),
            claimed_at: Instant::now(),
            lease_deadline: Instant::now() + std::time::Duration::from_secs(60),
            keyed: false,
        }
    }

    #[test]
    fn out_43_lost_rows_leave_with_their_token_cancelled_but_finishing_rows_stay() {
        let held = HeldRows::new();
        let (a, b, c) = (claim(), claim(), claim());
        for x in [a, b, c] {
            held.insert(x, entry());
        }
        assert!(held.advance(&b, Stage::Publishing));
        assert!(held.advance(&c, Stage::Finishing));
        let lost = held.take_lost(&[a, b, c]);
        assert_eq!(lost.len(), 2);
        assert!(lost.iter().all(|e| e.token.is_cancelled()));
        assert_eq!(held.claims(), vec![c]);
        assert!(
            !held.advance(&a, Stage::Publishing),
            "a lost row never starts"
        );
    }

    #[test]
    fn out_43_a_publish_does_not_start_past_the_local_lease_deadline_and_renewals_extend_it() {
        use std::time::Duration;
        let held = HeldRows::new();
        let (a, b) = (claim(), claim());
        let now = Instant::now();
        for x in [a, b] {
            let mut e = entry();
            e.lease_deadline = now + Duration::from_millis(1000);
            held.insert(x, e);
        }
        let margin = lease_margin(Duration::from_millis(1000));
        assert_eq!(margin, Duration::from_millis(100));
        // 950 ms in: inside the margin, so b may no longer start.
        let late = now + Duration::from_millis(950);
        let Start::Expired(gone) = held.start_publish(&b, late, margin) else {
            panic!("b must not start")
        };
        assert!(gone.token.is_cancelled());
        assert!(!held.contains(&b));
        assert!(matches!(held.start_publish(&b, late, margin), Start::Gone));
        // a was renewed by a renewal sent 500 ms in: its lease now ends at 1500 ms.
        held.renewed(&[a, b], now + Duration::from_millis(1500));
        assert!(matches!(held.start_publish(&a, late, margin), Start::Go));
        assert_eq!(held.counts(), counts(1, 0, 0));
    }

    #[test]
    fn out_58_release_takes_only_rows_whose_publish_has_not_started() {
        let held = HeldRows::new();
        let (a, b) = (claim(), claim());
        held.insert(a, entry());
        held.insert(b, entry());
        assert_eq!(held.counts(), counts(2, 2, 0));
        held.advance(&b, Stage::Publishing);
        assert_eq!(held.counts(), counts(2, 1, 0));
        let taken = held.take_queued();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].0, a);
        assert!(taken[0].1.token.is_cancelled());
        assert_eq!(held.counts(), counts(1, 0, 0));
        // b's outcome is known: it stays held, as finishing, until its write commits.
        held.advance(&b, Stage::Finishing);
        assert_eq!(held.counts(), counts(1, 0, 1));
        assert_eq!(held.counts().unfinished(), 0);
        assert!(held.remove(&b).is_some());
        assert_eq!(held.counts(), Counts::default());
    }

    /// Every held row, those waiting for a slot, and those finishing.
    fn counts(held: usize, queued: usize, finishing: usize) -> Counts {
        Counts {
            held,
            queued,
            finishing,
        }
    }
}
