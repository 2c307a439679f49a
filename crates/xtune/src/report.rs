//! What every command prints: one line per knob (wanted / actual / verdict /
//! reason), as a text table or as JSON (`--json`). The JSON reads back into
//! [`Report`], which is how the multi-host driver combines remote reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// JSON schema name of a single-target report.
pub const SCHEMA: &str = "xtune/1";

/// Verdict on one knob.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Means what the profile wants.
    Ok,
    /// diff / dry run: would be written.
    Change,
    /// verify: does not mean what the profile wants.
    Drift,
    /// apply: written.
    Written,
    /// The kernel will not move it (managed IRQ); not a failure.
    FixedByKernel,
    /// Absent on this host (no cpufreq); not a failure.
    NotApplicable,
    /// Advice the user acts on (limits).
    Advice,
    /// apply: the write that failed.
    Failed,
    /// apply: written, then restored after a later failure.
    Undone,
    /// Restoring failed: the host needs attention.
    UndoFailed,
    /// rollback: original value written back.
    Restored,
    /// rollback: already had the original value.
    Unchanged,
}

impl Verdict {
    /// Text form (`fixed by kernel`).
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Change => "change",
            Verdict::Drift => "DRIFT",
            Verdict::Written => "written",
            Verdict::FixedByKernel => "fixed by kernel",
            Verdict::NotApplicable => "n/a",
            Verdict::Advice => "advice",
            Verdict::Failed => "FAILED",
            Verdict::Undone => "undone",
            Verdict::UndoFailed => "UNDO FAILED",
            Verdict::Restored => "restored",
            Verdict::Unchanged => "unchanged",
        }
    }
}

/// One knob's line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobLine {
    /// Stable knob identity.
    pub knob: String,
    /// Value the profile wants (by meaning).
    pub wanted: String,
    /// Value read (for apply: before the write; for rollback: the original).
    pub actual: String,
    /// Verdict.
    pub verdict: Verdict,
    /// Why, in words.
    #[serde(default)]
    pub reason: String,
    /// Agent that probably rewrote it (verify).
    #[serde(default)]
    pub agent: Option<String>,
    /// errno of a failed write (`EINVAL`).
    #[serde(default)]
    pub errno: Option<String>,
    /// File behind the knob.
    #[serde(default)]
    pub path: Option<String>,
}

/// A command's report for one target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: String,
    /// `apply`, `verify`, `diff`, `rollback`.
    pub command: String,
    /// Host name.
    pub host: String,
    /// `host` or `netns:NAME`.
    pub target: String,
    /// Profile name.
    #[serde(default)]
    pub profile: Option<String>,
    /// apply --dry-run.
    #[serde(default)]
    pub dry_run: bool,
    /// Snapshot written (apply) or restored (rollback).
    #[serde(default)]
    pub snapshot: Option<String>,
    /// verify --settle, in seconds.
    #[serde(default)]
    pub settle_s: Option<f64>,
    /// One line per knob.
    pub knobs: Vec<KnobLine>,
    /// Notes (skipped devices, global knobs left out...).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Why the command failed, when it did.
    #[serde(default)]
    pub error: Option<String>,
    /// Knob count per verdict.
    #[serde(default)]
    pub counts: BTreeMap<String, usize>,
    /// All knobs mean what the profile wants (verify) / command succeeded.
    pub ok: bool,
    /// Process exit code.
    pub exit_code: i32,
}

impl Report {
    /// An empty report for `command`.
    pub fn new(command: &str, host: &str, target: &str) -> Report {
        Report {
            schema: SCHEMA.into(),
            command: command.into(),
            host: host.into(),
            target: target.into(),
            ok: true,
            ..Report::default()
        }
    }

    /// Fills `counts` from the knob lines.
    pub fn count(&mut self) {
        self.counts.clear();
        for k in &self.knobs {
            let key = serde_json::to_value(k.verdict)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            *self.counts.entry(key).or_default() += 1;
        }
    }

    /// The text table.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let what = match self.command.as_str() {
            "diff" => "diff".to_string(),
            "apply" if self.dry_run => "apply --dry-run".to_string(),
            c => c.to_string(),
        };
        let _ = write!(out, "xtune {what}");
        if let Some(p) = &self.profile {
            let _ = write!(out, " {p}");
        }
        let _ = write!(out, " on {} ({})", self.host, self.target);
        if let Some(s) = &self.snapshot {
            let _ = write!(out, "  snapshot {s}");
        }
        if let Some(s) = self.settle_s {
            let _ = write!(out, "  after {s}s settle");
        }
        out.push('\n');
        if !self.knobs.is_empty() {
            let actual_head = match self.command.as_str() {
                "diff" | "apply" => "CURRENT",
                "rollback" => "BEFORE",
                _ => "ACTUAL",
            };
            let rows: Vec<[String; 5]> = self
                .knobs
                .iter()
                .map(|k| {
                    let mut reason = k.reason.clone();
                    if let Some(a) = &k.agent {
                        if !reason.is_empty() {
                            reason.push_str("; ");
                        }
                        reason.push_str(a);
                    }
                    [
                        k.knob.clone(),
                        k.wanted.clone(),
                        k.actual.clone(),
                        k.verdict.text().to_string(),
                        reason,
                    ]
                })
                .collect();
            let head = [
                "KNOB".to_string(),
                "WANTED".to_string(),
                actual_head.to_string(),
                "VERDICT".to_string(),
                "REASON".to_string(),
            ];
            let mut widths = [0usize; 4];
            for r in rows.iter().chain(std::iter::once(&head)) {
                for (i, (w, cell)) in widths.iter_mut().zip(r.iter()).enumerate() {
                    // Knob names always fit; long values may overflow their column.
                    let cap = if i == 0 { usize::MAX } else { 40 };
                    *w = (*w).max(cell.chars().count()).min(cap);
                }
            }
            for r in std::iter::once(&head).chain(rows.iter()) {
                let mut line = String::new();
                for (i, cell) in r.iter().enumerate() {
                    if i < 4 {
                        let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
                    } else {
                        line.push_str(cell);
                    }
                }
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        if !self.counts.is_empty() {
            let parts: Vec<String> = self
                .counts
                .iter()
                .map(|(k, v)| format!("{v} {}", k.replace('_', " ")))
                .collect();
            let _ = writeln!(out, "{}", parts.join(", "));
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "error: {e}");
        }
        out
    }
}

/// Reports of several hosts (`--on`, `[hosts]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MultiReport {
    /// `xtune-multi/1`.
    pub schema: String,
    /// One entry per role.
    pub hosts: Vec<HostReport>,
    /// Worst exit code.
    pub exit_code: i32,
}

/// One role's outcome.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostReport {
    /// Role (`client`, `server`).
    pub role: String,
    /// Host it ran on.
    pub host: String,
    /// Exit code of the remote xtune (or of ssh).
    pub exit_code: i32,
    /// The remote report, when it printed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
    /// stderr of the remote command when it printed no report.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
}

impl MultiReport {
    /// Text for all hosts, one block per role.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for h in &self.hosts {
            let _ = writeln!(out, "== {} ({}) exit {}", h.role, h.host, h.exit_code);
            match &h.report {
                Some(r) => out.push_str(&r.render_text()),
                None => {
                    let _ = writeln!(out, "no report: {}", h.stderr.trim());
                }
            }
            out.push('\n');
        }
        let summary: Vec<String> = self
            .hosts
            .iter()
            .map(|h| {
                format!(
                    "{}={}",
                    h.role,
                    if h.exit_code == 0 {
                        "ok"
                    } else {
                        exit_word(h.exit_code)
                    }
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "combined: {} (exit {})",
            summary.join(" "),
            self.exit_code
        );
        out
    }
}

fn exit_word(code: i32) -> &'static str {
    match code {
        1 => "failed",
        2 => "bad-arguments",
        3 => "drift",
        _ => "error",
    }
}

/// Worst of several exit codes: 1 (could not be done) over 2 (bad arguments)
/// over 3 (drift) over 0.
pub fn worst_exit(codes: impl IntoIterator<Item = i32>) -> i32 {
    // Anything but xtune's own codes (ssh's 255, a signal) is a host that
    // could not be done: 1.
    let own = |c: i32| if matches!(c, 0 | 2 | 3) { c } else { 1 };
    let rank = |c: i32| match c {
        0 => 0,
        3 => 1,
        2 => 2,
        _ => 3,
    };
    codes
        .into_iter()
        .map(own)
        .max_by_key(|c| rank(*c))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_reads_back_into_the_same_report() {
        let mut r = Report::new("verify", "h", "host");
        r.knobs.push(KnobLine {
            knob: "sysctl:net.core.somaxconn".into(),
            wanted: "4096".into(),
            actual: "128".into(),
            verdict: Verdict::Drift,
            reason: String::new(),
            agent: Some("set by /etc/sysctl.d/x.conf:1".into()),
            errno: None,
            path: None,
        });
        r.count();
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"verdict\":\"drift\""), "{json}");
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let text = r.render_text();
        assert!(text.contains("sysctl:net.core.somaxconn  4096"), "{text}");
        assert!(text.contains("DRIFT"), "{text}");
        assert!(text.contains("1 drift"), "{text}");
    }

    #[test]
    fn worst_exit_prefers_failure_over_bad_args_over_drift() {
        assert_eq!(worst_exit([0, 3, 0]), 3);
        assert_eq!(worst_exit([3, 2]), 2);
        assert_eq!(worst_exit([2, 1, 3]), 1);
        assert_eq!(worst_exit([0, 0]), 0);
        assert_eq!(
            worst_exit([0, 255]),
            1,
            "ssh's own failure is a host not done"
        );
        assert_eq!(worst_exit([3, -1]), 1);
    }
}
