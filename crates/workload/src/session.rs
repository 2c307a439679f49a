//! A session's walk through the classes and its think times.

use std::time::Duration;

use crate::model::{Flow, Session, Think};
use crate::rng::{Cdf, Rng};

/// Where one session is: drawn classes come from here, seeded per session.
#[derive(Clone, Debug)]
pub struct SessionWalk {
    rng: Rng,
    /// Sequence position, or the current Markov state.
    at: Option<usize>,
    start: Option<Cdf>,
    rows: Vec<Option<Cdf>>,
    think: Think,
    sequence: Vec<usize>,
}

impl SessionWalk {
    pub fn new(session: &Session, seed: u64) -> Self {
        let (start, rows, sequence) = match &session.flow {
            Flow::Sequence(steps) => (None, Vec::new(), steps.clone()),
            Flow::Markov { start, rows } => {
                let cdf = |w: &[f64]| {
                    w.iter()
                        .any(|&x| x > 0.0)
                        .then(|| Cdf::new(w.iter().copied()))
                };
                (
                    cdf(start),
                    rows.iter().map(|r| cdf(r)).collect(),
                    Vec::new(),
                )
            }
        };
        SessionWalk {
            rng: Rng::new(seed),
            at: None,
            start,
            rows,
            think: session.think,
            sequence,
        }
    }

    /// The next class of the session; None when a Markov chain reached a class
    /// with no way out (the session ends and a new one starts from `start`).
    pub fn next_class(&mut self) -> Option<usize> {
        if !self.sequence.is_empty() {
            let next = self.at.map_or(0, |i| (i + 1) % self.sequence.len());
            self.at = Some(next);
            return Some(self.sequence[next]);
        }
        let cdf = match self.at {
            None => self.start.as_ref(),
            Some(from) => self.rows[from].as_ref(),
        };
        let next = cdf.map(|c| c.draw(&mut self.rng));
        self.at = next;
        next
    }

    /// The pause before the next request.
    pub fn think(&mut self) -> Duration {
        match self.think {
            Think::None => Duration::ZERO,
            Think::Fixed(d) => d,
            Think::Uniform(lo, hi) => lo + (hi - lo).mul_f64(self.rng.unit()),
            Think::Exponential(mean) => mean.mul_f64(-(1.0 - self.rng.unit()).ln()),
        }
    }

    /// The rng for drawing a variant of the class just chosen.
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_repeats_and_markov_follows_weights() {
        let s = Session {
            flow: Flow::Sequence(vec![2, 0]),
            think: Think::Fixed(Duration::from_millis(5)),
            cookies: true,
        };
        let mut w = SessionWalk::new(&s, 1);
        let got: Vec<_> = (0..5).map(|_| w.next_class().unwrap()).collect();
        assert_eq!(got, [2, 0, 2, 0, 2]);
        assert_eq!(w.think(), Duration::from_millis(5));

        // 0 -> 1 always, 1 -> end.
        let s = Session {
            flow: Flow::Markov {
                start: vec![1.0, 0.0],
                rows: vec![vec![0.0, 1.0], vec![0.0, 0.0]],
            },
            think: Think::None,
            cookies: true,
        };
        let mut w = SessionWalk::new(&s, 1);
        assert_eq!(
            [
                w.next_class(),
                w.next_class(),
                w.next_class(),
                w.next_class()
            ],
            [Some(0), Some(1), None, Some(0)]
        );
    }

    #[test]
    fn think_times_have_their_means() {
        let ms = Duration::from_millis;
        for (think, mean) in [
            (Think::Uniform(ms(50), ms(150)), 100.0),
            (Think::Exponential(ms(100)), 100.0),
        ] {
            let mut w = SessionWalk::new(
                &Session {
                    flow: Flow::Sequence(vec![0]),
                    think,
                    cookies: true,
                },
                3,
            );
            assert_eq!(think.mean(), ms(100));
            let total: f64 = (0..20_000).map(|_| w.think().as_secs_f64() * 1e3).sum();
            assert!(
                (total / 20_000.0 - mean).abs() < 3.0,
                "{think:?}: {}",
                total / 20_000.0
            );
        }
    }
}
