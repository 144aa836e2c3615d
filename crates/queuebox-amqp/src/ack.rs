//! The acknowledgement ledger of one consuming channel (INB-54, INB-62): which delivered
//! messages still wait for their commit, and which committed ones are still to be acknowledged.
//! One `basic.ack` with `multiple` then covers every committed message below the oldest one
//! still waiting, so a batch the intake's writer committed at once costs the broker one frame,
//! not one per message; a message is never acknowledged before its own commit.

use std::collections::BTreeSet;

/// One acknowledgement frame to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AckFrame {
    /// `basic.ack` of this delivery tag alone.
    One(u64),
    /// `basic.ack` with `multiple`: every unacknowledged tag up to and including this one.
    UpTo(u64),
}

/// The delivery tags of one channel between delivery and acknowledgement.
#[derive(Debug, Default)]
pub(crate) struct AckLedger {
    /// Delivered, handed to the intake, not settled yet.
    waiting: BTreeSet<u64>,
    /// Settled as stored or duplicate (committed), not acknowledged yet.
    committed: BTreeSet<u64>,
}

impl AckLedger {
    /// A delivery was handed to the intake.
    pub(crate) fn delivered(&mut self, tag: u64) {
        self.waiting.insert(tag);
    }

    /// The intake settled a delivery: `committed` when its row (or the row it duplicates) is
    /// durable; otherwise the caller hands it back to the broker (`basic.nack`) at once, and
    /// after that the broker no longer counts it as unacknowledged, so a later `multiple`
    /// acknowledgement does not touch it.
    pub(crate) fn settled(&mut self, tag: u64, committed: bool) {
        self.waiting.remove(&tag);
        if committed {
            self.committed.insert(tag);
        }
    }

    /// The frames that acknowledge every committed delivery now. The committed tags below the
    /// oldest waiting one go in one `multiple` frame: every tag below that one is committed,
    /// already acknowledged or already handed back, so the frame covers only committed
    /// messages. A committed tag above a waiting one (its neighbour below is still being
    /// stored, or waits to be handed back after a storage failure) is acknowledged alone, so it
    /// never waits for its neighbour.
    pub(crate) fn take_frames(&mut self) -> Vec<AckFrame> {
        let oldest_waiting = self.waiting.first().copied();
        let above = match oldest_waiting {
            Some(oldest) => self.committed.split_off(&oldest),
            None => BTreeSet::new(),
        };
        let below = std::mem::take(&mut self.committed);
        let mut frames = Vec::with_capacity(1 + above.len());
        match below.len() {
            0 => {}
            1 => frames.extend(below.last().map(|&tag| AckFrame::One(tag))),
            _ => frames.extend(below.last().map(|&tag| AckFrame::UpTo(tag))),
        }
        frames.extend(above.into_iter().map(AckFrame::One));
        frames
    }

    /// Deliveries handed to the intake and not settled yet.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{AckFrame, AckLedger};

    fn ledger(delivered: &[u64]) -> AckLedger {
        let mut ledger = AckLedger::default();
        for &tag in delivered {
            ledger.delivered(tag);
        }
        ledger
    }

    #[test]
    fn a_batch_committed_at_once_is_one_multiple_frame() {
        let mut ledger = ledger(&[1, 2, 3, 4]);
        for tag in 1..=4 {
            ledger.settled(tag, true);
        }
        assert_eq!(ledger.take_frames(), vec![AckFrame::UpTo(4)]);
        assert_eq!(ledger.take_frames(), vec![]);
        assert_eq!(ledger.waiting(), 0);
    }

    #[test]
    fn a_lone_commit_is_acknowledged_alone() {
        let mut ledger = ledger(&[7]);
        ledger.settled(7, true);
        assert_eq!(ledger.take_frames(), vec![AckFrame::One(7)]);
    }

    #[test]
    fn a_multiple_frame_never_reaches_a_delivery_still_waiting() {
        // 1 and 2 committed, 3 still being stored, 4 and 5 committed in a later batch.
        let mut ledger = ledger(&[1, 2, 3, 4, 5]);
        for tag in [1, 2, 4, 5] {
            ledger.settled(tag, true);
        }
        assert_eq!(
            ledger.take_frames(),
            vec![AckFrame::UpTo(2), AckFrame::One(4), AckFrame::One(5)]
        );
        assert_eq!(ledger.waiting(), 1);
        ledger.settled(3, true);
        assert_eq!(ledger.take_frames(), vec![AckFrame::One(3)]);
    }

    #[test]
    fn a_handed_back_delivery_is_left_out_and_does_not_hold_the_others() {
        // 2 failed to store: the caller nacks it; 1 and 3 are committed.
        let mut ledger = ledger(&[1, 2, 3]);
        ledger.settled(1, true);
        ledger.settled(2, false);
        ledger.settled(3, true);
        // Tag 2 is no longer unacknowledged on the broker (it was nacked), so a multiple
        // frame up to 3 acknowledges exactly 1 and 3.
        assert_eq!(ledger.take_frames(), vec![AckFrame::UpTo(3)]);
        assert_eq!(ledger.waiting(), 0);
    }

    #[test]
    fn nothing_settled_sends_nothing() {
        let mut ledger = ledger(&[1, 2]);
        assert_eq!(ledger.take_frames(), vec![]);
        ledger.settled(2, true);
        assert_eq!(ledger.take_frames(), vec![AckFrame::One(2)]);
        assert_eq!(ledger.waiting(), 1);
    }
}
