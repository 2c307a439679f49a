//! Per-flow sequence numbers: the sender's source (with test-mode faults)
//! and the receiver's tracker (delivered, lost, reordered, duplicated).
//!
//! Tracker semantics (per flow, sequences start at 0):
//! - a frame above the highest seen opens a gap; the skipped numbers count
//!   as lost for now;
//! - a frame below the highest seen is *reordered* if its number was
//!   missing (it fills the gap: lost goes down by one) and *duplicated* if
//!   it had already arrived. The receiver remembers the last
//!   [`WINDOW`] numbers of each flow; an older late frame counts as
//!   reordered (it cannot be told from a duplicate any more);
//! - frames lost after the last one received are invisible to the
//!   receiver alone; [`SeqTracker::expect`] lets a sender in the same
//!   process say how far each flow went.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Sequence numbers remembered per flow for late/duplicate detection.
pub const WINDOW: u64 = 4096;
const WORDS: usize = (WINDOW / 64) as usize;

/// Flow key: run tag in the high half, UDP source port in the low half.
pub fn flow_key(run_tag: u16, src_port: u16) -> u32 {
    (u32::from(run_tag) << 16) | u32::from(src_port)
}

/// Test-mode faults a sender injects into its own sequence numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeqFault {
    #[default]
    None,
    /// Skip one sequence number every N frames (looks like loss).
    Skip(u64),
    /// Send each Nth pair of a flow in swapped order (reordering).
    Swap(u64),
    /// Repeat the previous sequence number every N frames (duplicates).
    Duplicate(u64),
}

/// Why a fault specification was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid sequence fault {0:?}: use skip:N, swap:N or dup:N with N >= 2")]
pub struct FaultParseError(pub String);

impl std::str::FromStr for SeqFault {
    type Err = FaultParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || FaultParseError(s.to_string());
        let (kind, n) = s.split_once(':').ok_or_else(err)?;
        let n: u64 = n.parse().map_err(|_| err())?;
        if n < 2 {
            return Err(err());
        }
        match kind {
            "skip" => Ok(SeqFault::Skip(n)),
            "swap" => Ok(SeqFault::Swap(n)),
            "dup" => Ok(SeqFault::Duplicate(n)),
            _ => Err(err()),
        }
    }
}

/// The sender side of one flow.
#[derive(Debug, Clone, Default)]
pub struct SeqSource {
    /// Next fresh sequence number (also: how far the flow went).
    pub next: u64,
    count: u64,
    pending: Option<u64>,
    fault: SeqFault,
}

impl SeqSource {
    pub fn new(fault: SeqFault) -> Self {
        SeqSource {
            fault,
            ..Default::default()
        }
    }

    /// Sequence number for the next frame of this flow.
    // `%` rather than `is_multiple_of`, which needs Rust 1.87 (MSRV is 1.85).
    #[allow(clippy::manual_is_multiple_of)]
    #[inline]
    pub fn next_seq(&mut self) -> u64 {
        if let Some(p) = self.pending.take() {
            return p;
        }
        self.count += 1;
        let s = self.next;
        match self.fault {
            SeqFault::None => {
                self.next += 1;
                s
            }
            SeqFault::Skip(n) if self.count % n == 0 => {
                self.next += 2;
                s + 1
            }
            SeqFault::Swap(n) if self.count % n == 0 => {
                self.next += 2;
                self.pending = Some(s);
                s + 1
            }
            SeqFault::Duplicate(n) if self.count % n == 0 && s > 0 => s - 1,
            _ => {
                self.next += 1;
                s
            }
        }
    }
}

#[derive(Debug, Clone)]
struct FlowState {
    /// Highest sequence seen + 1.
    top: u64,
    /// Bit (s % WINDOW) set when s arrived, for s in (top - WINDOW, top].
    seen: [u64; WORDS],
    delivered: u64,
    lost: u64,
    reordered: u64,
    duplicated: u64,
}

impl FlowState {
    fn new() -> Self {
        FlowState {
            top: 0,
            seen: [0; WORDS],
            delivered: 0,
            lost: 0,
            reordered: 0,
            duplicated: 0,
        }
    }

    #[inline]
    fn bit(&mut self, s: u64) -> (&mut u64, u64) {
        let i = (s % WINDOW) as usize;
        (&mut self.seen[i / 64], 1u64 << (i % 64))
    }

    /// Returns true when `s` is a new (not duplicated) frame.
    #[inline]
    fn record(&mut self, s: u64) -> bool {
        if s >= self.top {
            let gap = s - self.top;
            // Clear the bits of the numbers skipped over (and of s).
            if gap + 1 >= WINDOW {
                self.seen = [0; WORDS];
            } else {
                for x in self.top..=s {
                    let (w, m) = self.bit(x);
                    *w &= !m;
                }
            }
            self.lost += gap;
            self.top = s + 1;
            let (w, m) = self.bit(s);
            *w |= m;
            self.delivered += 1;
            true
        } else if self.top - s <= WINDOW {
            let (w, m) = self.bit(s);
            if *w & m != 0 {
                self.duplicated += 1;
                false
            } else {
                *w |= m;
                self.reordered += 1;
                self.lost = self.lost.saturating_sub(1);
                self.delivered += 1;
                true
            }
        } else {
            self.reordered += 1;
            self.lost = self.lost.saturating_sub(1);
            self.delivered += 1;
            true
        }
    }
}

/// Fast hasher for u32 flow keys (multiplicative; keys are not adversarial
/// enough to matter: a flood of distinct keys only costs memory, capped by
/// [`SeqTracker::MAX_FLOWS`]).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Totals over all flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SeqTotals {
    /// Distinct frames received.
    pub delivered: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub flows: u64,
    /// Frames of flows beyond the tracking limit (counted, not checked).
    pub untracked: u64,
}

/// Receiver-side per-flow sequence checking.
#[derive(Debug, Clone, Default)]
pub struct SeqTracker {
    flows: HashMap<u32, FlowState, BuildHasherDefault<KeyHasher>>,
    untracked: u64,
    delivered: u64,
    /// A new flow starts at the first number seen, not at 0.
    from_first: bool,
}

impl SeqTracker {
    /// At most this many flows are tracked (memory bound against junk).
    pub const MAX_FLOWS: usize = 65_536;

    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker for a receiver that may start after its sender: each flow
    /// is counted from the first number it sees (numbers before it were sent
    /// before this receiver listened, not lost).
    pub fn from_first_seen() -> Self {
        SeqTracker {
            from_first: true,
            ..Self::default()
        }
    }

    /// Records one received frame.
    #[inline]
    pub fn record(&mut self, key: u32, seq: u64) {
        if let Some(f) = self.flows.get_mut(&key) {
            if f.record(seq) {
                self.delivered += 1;
            }
            return;
        }
        if self.flows.len() >= Self::MAX_FLOWS {
            self.untracked += 1;
            return;
        }
        let mut f = FlowState::new();
        if self.from_first {
            f.top = seq;
        }
        f.record(seq);
        self.delivered += 1;
        self.flows.insert(key, f);
    }

    /// Declares that flow `key` was sent up to (not including) `next`:
    /// numbers never received below it count as lost, including a flow
    /// that delivered nothing at all.
    pub fn expect(&mut self, key: u32, next: u64) {
        let f = self.flows.entry(key).or_insert_with(FlowState::new);
        if next > f.top {
            f.lost += next - f.top;
            f.top = next;
            // The window now refers to numbers never seen: keep the bits of
            // the old range consistent by clearing everything.
            f.seen = [0; WORDS];
        }
    }

    /// Adds another tracker's flows (from another queue's worker).
    pub fn merge(&mut self, other: &SeqTracker) {
        self.untracked += other.untracked;
        self.delivered += other.delivered;
        for (k, o) in &other.flows {
            match self.flows.get_mut(k) {
                Some(f) => {
                    // Same flow seen on two queues: sum what each saw.
                    f.delivered += o.delivered;
                    f.lost += o.lost;
                    f.reordered += o.reordered;
                    f.duplicated += o.duplicated;
                    f.top = f.top.max(o.top);
                }
                None => {
                    self.flows.insert(*k, o.clone());
                }
            }
        }
    }

    /// Distinct frames delivered so far (a running count).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    pub fn totals(&self) -> SeqTotals {
        let mut t = SeqTotals {
            flows: self.flows.len() as u64,
            untracked: self.untracked,
            ..Default::default()
        };
        for f in self.flows.values() {
            t.delivered += f.delivered;
            t.lost += f.lost;
            t.reordered += f.reordered;
            t.duplicated += f.duplicated;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(seqs: &[u64]) -> SeqTotals {
        let mut t = SeqTracker::new();
        for &s in seqs {
            t.record(1, s);
        }
        t.totals()
    }

    #[test]
    fn a_receiver_started_late_counts_from_the_first_number_it_sees() {
        let mut late = SeqTracker::from_first_seen();
        let mut first = SeqTracker::new();
        for s in (16_756..36_723).filter(|s| s % 1000 != 7) {
            late.record(3, s);
            first.record(3, s);
        }
        let (l, f) = (late.totals(), first.totals());
        assert_eq!(
            (l.lost, l.reordered, l.duplicated),
            (20, 0, 0),
            "only the gaps it saw"
        );
        assert_eq!(f.lost, 16_756 + 20, "from 0, everything before counts");
        assert_eq!(l.delivered, f.delivered);
    }

    #[test]
    fn in_order_stream_has_no_loss_reorder_or_duplicates() {
        let s: Vec<u64> = (0..10_000).collect();
        let t = feed(&s);
        assert_eq!(
            (t.delivered, t.lost, t.reordered, t.duplicated),
            (10_000, 0, 0, 0)
        );
    }

    #[test]
    fn gaps_count_as_lost_and_late_arrivals_as_reordered() {
        let t = feed(&[0, 1, 3, 4, 2, 5, 9]);
        // 2 late (reordered, fills its gap), 6,7,8 lost.
        assert_eq!(
            (t.delivered, t.lost, t.reordered, t.duplicated),
            (7, 3, 1, 0)
        );
    }

    #[test]
    fn duplicates_are_counted_once_and_not_delivered_twice() {
        let t = feed(&[0, 1, 1, 2, 0, 3]);
        assert_eq!(
            (t.delivered, t.lost, t.reordered, t.duplicated),
            (4, 0, 0, 2)
        );
    }

    #[test]
    fn first_frame_above_zero_counts_the_missing_head_as_lost() {
        let t = feed(&[3, 4]);
        assert_eq!((t.delivered, t.lost), (2, 3));
    }

    #[test]
    fn very_late_frame_beyond_window_is_reordered() {
        let mut s: Vec<u64> = (1..WINDOW + 100).collect();
        s.push(0);
        let t = feed(&s);
        assert_eq!((t.lost, t.reordered, t.duplicated), (0, 1, 0));
        // A big jump clears the window without panicking.
        let t = feed(&[0, 10 * WINDOW, 10 * WINDOW - 1, 10 * WINDOW]);
        assert_eq!((t.delivered, t.reordered, t.duplicated), (3, 1, 1));
        assert_eq!(t.lost, 10 * WINDOW - 2);
    }

    #[test]
    fn expect_accounts_for_tail_loss_and_silent_flows() {
        let mut t = SeqTracker::new();
        for s in 0..10 {
            t.record(1, s);
        }
        t.expect(1, 15);
        t.expect(2, 7);
        let x = t.totals();
        assert_eq!((x.delivered, x.lost, x.flows), (10, 5 + 7, 2));
        // Expecting less than seen changes nothing.
        t.expect(1, 3);
        assert_eq!(t.totals().lost, 12);
    }

    #[test]
    fn sender_faults_are_seen_by_the_tracker_as_intended() {
        let run = |fault: SeqFault, frames: u64| {
            let mut src = SeqSource::new(fault);
            let mut t = SeqTracker::new();
            for _ in 0..frames {
                t.record(7, src.next_seq());
            }
            t.expect(7, src.next);
            t.totals()
        };
        let t = run(SeqFault::None, 1000);
        assert_eq!(
            (t.delivered, t.lost, t.reordered, t.duplicated),
            (1000, 0, 0, 0)
        );
        let t = run(SeqFault::Skip(10), 1000);
        assert_eq!(
            (t.delivered, t.lost, t.reordered, t.duplicated),
            (1000, 100, 0, 0)
        );
        // 1000 frames: pairs start at frames 10, 20, ... the 1000th frame is
        // a pending swapped one only if the count ends mid-pair.
        let t = run(SeqFault::Swap(10), 1000);
        // A run that ends between the two frames of a swapped pair loses
        // the held-back one.
        assert!(t.lost <= 1 && t.duplicated == 0, "{t:?}");
        assert!(t.reordered >= 89 && t.reordered <= 100, "{t:?}");
        let t = run(SeqFault::Duplicate(10), 1000);
        assert_eq!(
            (t.delivered, t.lost, t.reordered, t.duplicated),
            (900, 0, 0, 100)
        );
        assert!("swap:5".parse::<SeqFault>() == Ok(SeqFault::Swap(5)));
        assert!("swap:1".parse::<SeqFault>().is_err());
        assert!("flip:3".parse::<SeqFault>().is_err());
    }

    #[test]
    fn merge_combines_workers() {
        let mut a = SeqTracker::new();
        let mut b = SeqTracker::new();
        for s in 0..5 {
            a.record(1, s);
            b.record(2, s);
        }
        a.merge(&b);
        let t = a.totals();
        assert_eq!((t.delivered, t.flows), (10, 2));
    }
}
