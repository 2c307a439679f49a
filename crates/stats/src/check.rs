//! Before a merge: do these reports make one load? They must be of one run
//! (same `run_id`), each once (no report twice: same host, window start,
//! segment and measurements; generators on one host may share a start
//! with `--start-at`, never their histograms), over one
//! interval (windows overlapping by at least [`MIN_OVERLAP`] of their span).
//! Different targets or settings are said, not refused: one run may mix
//! loads on purpose (two URLs, two request bodies), and every count still
//! adds up.

use std::collections::BTreeMap;

use crate::merge::span_of;
use crate::walltime::{format_rfc3339_us, UnixMicros};
use crate::Report;

/// The least share of their span that every window must cover for the
/// merged rate to be a rate.
pub const MIN_OVERLAP: f64 = 0.9;

/// The measured windows of several reports on the wall clock, µs since the
/// epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// From the first window's start to the last one's end.
    pub span: (UnixMicros, UnixMicros),
    /// What every window covers (None when two do not meet).
    pub common: Option<(UnixMicros, UnixMicros)>,
}

impl Windows {
    /// The windows of `reports`; None when one has no `started_at`.
    pub fn of(reports: &[Report]) -> Option<Windows> {
        let starts: Vec<UnixMicros> = reports
            .iter()
            .map(|r| r.run.started_at_us())
            .collect::<Option<_>>()?;
        let ends: Vec<UnixMicros> = reports
            .iter()
            .zip(&starts)
            .map(|(r, s)| s.saturating_add((r.duration_s * 1e6).round() as i64))
            .collect();
        let span = span_of(reports, &starts);
        let (from, to) = (starts.iter().copied().max()?, ends.iter().copied().min()?);
        Some(Windows {
            span,
            common: (from < to).then_some((from, to)),
        })
    }

    /// The common interval as a share of the span (1 for an empty span).
    pub fn overlap(&self) -> f64 {
        let span = self.span.1.saturating_sub(self.span.0);
        if span <= 0 {
            return 1.0;
        }
        self.common
            .map_or(0.0, |(a, b)| b.saturating_sub(a) as f64 / span as f64)
    }

    /// "A to B (S s)" for the span, and the common interval with its share.
    pub fn describe(&self) -> String {
        let interval = |(a, b): (UnixMicros, UnixMicros)| {
            format!(
                "{} to {} ({:.3} s)",
                format_rfc3339_us(a),
                format_rfc3339_us(b),
                b.saturating_sub(a) as f64 / 1e6
            )
        };
        let common = match self.common {
            Some(c) => format!(
                "all of them cover only {}, {:.0}% of it",
                interval(c),
                100.0 * self.overlap()
            ),
            None => "some do not overlap at all".to_string(),
        };
        format!("the windows span {}; {common}", interval(self.span))
    }
}

/// Why reports cannot be merged into one load (indices into the slice given).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Two reports of different runs (`run_id`).
    DifferentRuns {
        first: usize,
        first_id: String,
        other: usize,
        other_id: String,
    },
    /// One report twice: same host, window start, segment, requests and
    /// histogram.
    Duplicate {
        first: usize,
        again: usize,
        host: String,
        started_at: String,
    },
    /// The windows overlap by less than [`MIN_OVERLAP`] of their span.
    PartialOverlap { windows: Windows },
}

impl Refusal {
    /// The reason, naming the reports with `name`.
    pub fn describe(&self, name: &dyn Fn(usize) -> String) -> String {
        match self {
            Refusal::DifferentRuns {
                first,
                first_id,
                other,
                other_id,
            } => format!(
                "{} is of run {first_id} and {} of run {other_id}: reports of different runs are not one load (give every generator the same --run-id, as xload --on does)",
                name(*first),
                name(*other)
            ),
            Refusal::Duplicate {
                first,
                again,
                host,
                started_at,
            } => format!(
                "{} is {} again (host {host}, window begun {started_at}): a report merged twice counts its requests twice",
                name(*again),
                name(*first)
            ),
            Refusal::PartialOverlap { windows } => format!(
                "{}: below {:.0}%, the merged rate is not the rate of one load (start the generators with one --start-at, or give --allow-partial-overlap to merge over the whole span)",
                windows.describe(),
                100.0 * MIN_OVERLAP
            ),
        }
    }
}

/// What does not stop a merge but changes how to read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// The reports aim at different targets: (report, target) of each
    /// target's first report.
    DifferentTargets(Vec<(usize, String)>),
    /// A setting differs: its key and (report, value) of each distinct value.
    DifferentSetting {
        key: String,
        values: Vec<(usize, serde_json::Value)>,
    },
    /// These reports do not say when their window began (written before
    /// `started_at` existed): windows cannot be compared.
    NoWallClock(Vec<usize>),
}

impl Note {
    /// The note, naming the reports with `name`.
    pub fn describe(&self, name: &dyn Fn(usize) -> String) -> String {
        let list = |v: Vec<String>| v.join(", ");
        match self {
            Note::DifferentTargets(t) => format!(
                "the reports aim at different targets ({}): the merge adds their loads",
                list(t.iter().map(|(i, t)| format!("{} {t}", name(*i))).collect())
            ),
            Note::DifferentSetting { key, values } => format!(
                "setting {key} differs ({}): the merge mixes different loads",
                list(
                    values
                        .iter()
                        .map(|(i, v)| format!("{} {v}", name(*i)))
                        .collect()
                )
            ),
            Note::NoWallClock(which) => format!(
                "{} {} no started_at (an older xload?): the windows cannot be compared; the merged rate assumes they ran at the same time",
                list(which.iter().map(|i| name(*i)).collect()),
                if which.len() == 1 { "has" } else { "have" }
            ),
        }
    }
}

/// Everything found in a set of reports before merging them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MergeCheck {
    /// Reasons to refuse the merge, in the order found.
    pub refusals: Vec<Refusal>,
    /// What to say about the merge.
    pub notes: Vec<Note>,
    /// The windows, when every report says when its window began.
    pub windows: Option<Windows>,
}

impl MergeCheck {
    /// Checks `reports` (in the order they will be merged).
    pub fn of(reports: &[Report]) -> MergeCheck {
        let mut c = MergeCheck {
            windows: Windows::of(reports),
            ..MergeCheck::default()
        };
        c.check_runs(reports);
        c.check_duplicates(reports);
        match c.windows {
            Some(w) if w.overlap() < MIN_OVERLAP => {
                c.refusals.push(Refusal::PartialOverlap { windows: w })
            }
            Some(_) => {}
            None if reports.len() > 1 => {
                let without = (0..reports.len())
                    .filter(|&i| reports[i].run.started_at_us().is_none())
                    .collect();
                c.notes.push(Note::NoWallClock(without));
            }
            None => {}
        }
        c.check_setup(reports);
        c
    }

    /// Every report that names its run names the same one.
    fn check_runs(&mut self, reports: &[Report]) {
        let mut ids = reports
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.run.run_id.as_deref().map(|id| (i, id)));
        let Some((first, first_id)) = ids.next() else {
            return;
        };
        if let Some((other, other_id)) = ids.find(|(_, id)| *id != first_id) {
            self.refusals.push(Refusal::DifferentRuns {
                first,
                first_id: first_id.to_string(),
                other,
                other_id: other_id.to_string(),
            });
        }
    }

    /// No report appears twice.
    fn check_duplicates(&mut self, reports: &[Report]) {
        type Key<'a> = (&'a str, UnixMicros, Option<&'a str>, u64, &'a str);
        let mut seen: BTreeMap<Key, usize> = BTreeMap::new();
        for (i, r) in reports.iter().enumerate() {
            let (Some(host), Some(start)) = (r.run.host.as_deref(), r.run.started_at_us()) else {
                continue;
            };
            let key = (
                host,
                start,
                r.run.segment.as_deref(),
                r.requests,
                r.histogram.as_str(),
            );
            if let Some(&first) = seen.get(&key) {
                self.refusals.push(Refusal::Duplicate {
                    first,
                    again: i,
                    host: host.to_string(),
                    started_at: format_rfc3339_us(start),
                });
            } else {
                seen.insert(key, i);
            }
        }
    }

    /// Targets and settings: each difference is a note.
    fn check_setup(&mut self, reports: &[Report]) {
        let mut targets: Vec<(usize, String)> = Vec::new();
        for (i, r) in reports.iter().enumerate() {
            if !targets.iter().any(|(_, t)| *t == r.target) {
                targets.push((i, r.target.clone()));
            }
        }
        if targets.len() > 1 {
            self.notes.push(Note::DifferentTargets(targets));
        }
        let keys: std::collections::BTreeSet<&String> =
            reports.iter().flat_map(|r| r.run.settings.keys()).collect();
        for key in keys {
            let mut values: Vec<(usize, serde_json::Value)> = Vec::new();
            for (i, r) in reports.iter().enumerate() {
                // A report without settings (an older xload) has nothing to compare.
                if r.run.settings.is_empty() {
                    continue;
                }
                let v = r
                    .run
                    .settings
                    .get(key)
                    .cloned()
                    .unwrap_or(serde_json::Value::Null);
                if !values.iter().any(|(_, seen)| *seen == v) {
                    values.push((i, v));
                }
            }
            if values.len() > 1 {
                self.notes.push(Note::DifferentSetting {
                    key: key.clone(),
                    values,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMicros = 1_796_292_000_000_000;

    fn report(run: &str, host: &str, start: UnixMicros, secs: f64) -> Report {
        let mut r = Report {
            target: "http://t/".into(),
            duration_s: secs,
            ..Report::default()
        };
        r.run.run_id = Some(run.into());
        r.run.host = Some(host.into());
        r.run.started_at = Some(format_rfc3339_us(start));
        r.run.settings.insert("pipeline".into(), 1.into());
        r
    }

    #[test]
    fn reports_of_one_run_at_one_time_pass() {
        let c = MergeCheck::of(&[
            report("r", "a", T0, 10.0),
            report("r", "b", T0 + 3_000, 10.0),
        ]);
        assert_eq!(c.refusals, []);
        assert_eq!(c.notes, []);
        let w = c.windows.expect("windows");
        assert_eq!(w.span, (T0, T0 + 10_003_000));
        assert_eq!(w.common, Some((T0 + 3_000, T0 + 10_000_000)));
        assert!(w.overlap() > 0.999);
    }

    #[test]
    fn different_runs_and_duplicates_are_refused() {
        let c = MergeCheck::of(&[
            report("r", "a", T0, 1.0),
            report("r", "a", T0, 1.0),
            report("s", "b", T0, 1.0),
        ]);
        let name = |i: usize| format!("#{i}");
        let reasons: Vec<String> = c.refusals.iter().map(|r| r.describe(&name)).collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(
            reasons[0].starts_with("#0 is of run r and #2 of run s"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].starts_with("#1 is #0 again (host a"),
            "{reasons:?}"
        );
        // Two generators on one host, one start: not a copy.
        let mut other = report("r", "a", T0, 1.0);
        other.requests = 5;
        let c = MergeCheck::of(&[report("r", "a", T0, 1.0), other]);
        assert_eq!(c.refusals, []);
    }

    #[test]
    fn windows_overlapping_less_than_ninety_percent_are_refused() {
        // 10 s windows 1.2 s apart: 8.8 s common over an 11.2 s span.
        let c = MergeCheck::of(&[
            report("r", "a", T0, 10.0),
            report("r", "b", T0 + 1_200_000, 10.0),
        ]);
        let Some(Refusal::PartialOverlap { windows }) = c.refusals.first() else {
            panic!("{c:?}")
        };
        assert!((windows.overlap() - 8.8 / 11.2).abs() < 1e-9);
        assert!(
            windows.describe().contains("(11.200 s)"),
            "{}",
            windows.describe()
        );
        // One after the other: no common interval.
        let c = MergeCheck::of(&[
            report("r", "a", T0, 1.0),
            report("r", "b", T0 + 2_000_000, 1.0),
        ]);
        let Some(Refusal::PartialOverlap { windows }) = c.refusals.first() else {
            panic!("{c:?}")
        };
        assert_eq!(windows.common, None);
        assert!(windows.describe().contains("do not overlap"));
    }

    #[test]
    fn targets_settings_and_missing_clocks_are_notes() {
        let a = report("r", "a", T0, 1.0);
        let mut b = report("r", "b", T0, 1.0);
        b.target = "http://u/".into();
        b.run.settings.insert("pipeline".into(), 4.into());
        let old = Report {
            target: "http://t/".into(),
            ..Report::default()
        };
        let c = MergeCheck::of(&[a, b, old]);
        assert_eq!(c.refusals, []);
        assert_eq!(c.windows, None);
        assert_eq!(
            c.notes,
            [
                Note::NoWallClock(vec![2]),
                Note::DifferentTargets(vec![(0, "http://t/".into()), (1, "http://u/".into())]),
                Note::DifferentSetting {
                    key: "pipeline".into(),
                    values: vec![(0, 1.into()), (1, 4.into())]
                },
            ]
        );
    }
}
