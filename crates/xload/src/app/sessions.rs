//! The live sessions of an app, which expire when unused, as a real
//! application's do: a client session that restarts or stops leaves its
//! server session behind, and a long run with many restarts would
//! otherwise grow the map without bound.
//!
//! Two generations: a session used in the current one stays; at each
//! turn (the first use a `generation` after the last turn) the previous
//! generation, the sessions unused since, is dropped. A session unused for
//! one to two generations (on a server in use) expires.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Sess;

pub(super) struct Sessions {
    now: HashMap<u64, Sess>,
    old: HashMap<u64, Sess>,
    generation: Duration,
    turned: Instant,
}

impl Sessions {
    pub(super) fn new(generation: Duration) -> Sessions {
        Sessions {
            now: HashMap::new(),
            old: HashMap::new(),
            generation,
            turned: Instant::now(),
        }
    }

    /// Drops the sessions unused for a whole generation when one is over.
    fn turn(&mut self, at: Instant) {
        if at.duration_since(self.turned) < self.generation {
            return;
        }
        self.old = std::mem::take(&mut self.now);
        if at.duration_since(self.turned) >= 2 * self.generation {
            // Nothing was used for two generations: all expired.
            self.old.clear();
        }
        self.turned = at;
    }

    /// The live session `sid` (now used: it stays a generation more).
    pub(super) fn get_mut(&mut self, sid: &u64) -> Option<&mut Sess> {
        self.get_mut_at(sid, Instant::now())
    }

    fn get_mut_at(&mut self, sid: &u64, at: Instant) -> Option<&mut Sess> {
        self.turn(at);
        if !self.now.contains_key(sid) {
            let s = self.old.remove(sid)?;
            self.now.insert(*sid, s);
        }
        self.now.get_mut(sid)
    }

    pub(super) fn contains_key(&mut self, sid: &u64) -> bool {
        self.get_mut(sid).is_some()
    }

    pub(super) fn insert(&mut self, sid: u64, s: Sess) {
        self.turn(Instant::now());
        self.old.remove(&sid);
        self.now.insert(sid, s);
    }

    pub(super) fn remove(&mut self, sid: &u64) {
        self.now.remove(sid);
        self.old.remove(sid);
    }

    pub(super) fn len(&self) -> usize {
        self.now.len() + self.old.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unused_sessions_expire_after_one_to_two_generations() {
        let g = Duration::from_secs(60);
        let mut s = Sessions::new(g);
        let t0 = s.turned;
        s.now.insert(1, Sess::default());
        s.now.insert(2, Sess::default());
        s.now.insert(3, Sess::default());
        // Within the first generation: no turn, nothing dropped.
        assert!(s.get_mut_at(&1, t0 + g / 2).is_some());
        // The first turn (at the first use a generation later) keeps
        // everything one generation more; 2 is used in the new one.
        assert!(s.get_mut_at(&2, t0 + g + g / 2).is_some());
        assert_eq!(s.len(), 3, "one generation: nothing dropped yet");
        // The next turn drops what the generation since did not use.
        assert!(
            s.get_mut_at(&3, t0 + 2 * g + g * 6 / 10).is_none(),
            "3 expired"
        );
        assert!(
            s.get_mut_at(&1, t0 + 2 * g + g * 6 / 10).is_none(),
            "1 expired"
        );
        assert!(
            s.get_mut_at(&2, t0 + 2 * g + g * 7 / 10).is_some(),
            "2 stays"
        );
        assert_eq!(s.len(), 1);
        // Two idle generations: everything expires at once.
        assert!(s.get_mut_at(&2, t0 + 5 * g).is_none());
        assert_eq!(s.len(), 0);
        s.insert(7, Sess::default());
        s.remove(&7);
        assert_eq!(s.len(), 0);
    }
}
