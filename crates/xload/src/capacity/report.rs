//! The capacity report (`xload-capacity/1`, docs/capacity.md): what was
//! verified, every step with both sides' evidence and the server's verdict,
//! and the confirmed maximum; as JSON, and as Markdown for a ticket.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::evidence::{Evidence, ServerVerdict};
use super::reach::Tuning;

/// JSON schema name.
pub(crate) const SCHEMA: &str = "xload-capacity/1";

/// A whole capacity run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CapacityReport {
    pub schema: String,
    /// The plan file.
    pub plan: String,
    pub target: String,
    /// `connections`, `rate` or `sessions`.
    pub stepped: String,
    /// RFC 3339, when the run began.
    pub started_at: String,
    /// The command line of this run.
    pub command: Vec<String>,
    /// `--allow-drift` let the run go on despite these (host: knob ...).
    pub drift: Vec<String>,
    /// Each host's profile as verified before the first step.
    pub tuning: Vec<Tuning>,
    pub steps: Vec<Step>,
    /// Index in `steps` of the knee (throughput flat, p99 rising), if any.
    pub knee: Option<usize>,
    pub maximum: Option<Maximum>,
    pub notes: Vec<String>,
}

/// One measured step (a level, or a confirmation of the maximum).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Step {
    pub level: f64,
    /// 0 for the step; 1, 2... for the confirmations of the maximum.
    pub confirmation: usize,
    pub rps: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub requests: u64,
    pub errors: u64,
    /// Compliant: answers, no error, every SLO gate held.
    pub pass: bool,
    /// Why not, when it did not pass.
    pub why: String,
    /// The measured window, µs since the epoch, and its length.
    pub window_start_us: i64,
    pub window_s: f64,
    /// Each client: its saturation rule-out and its host's evidence.
    pub clients: Vec<ClientSide>,
    pub server: Evidence,
    pub verdict: ServerVerdict,
    /// The first client's command (the others differ by their share).
    pub command: String,
}

/// One client host in a step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ClientSide {
    pub host: String,
    pub rps: f64,
    /// xload's own verdict on this client (saturated or not, and why).
    pub verdict: String,
    pub saturated: bool,
    pub evidence: Evidence,
}

/// The confirmed maximum.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Maximum {
    pub level: f64,
    /// The lowest throughput of the step and its confirmations.
    pub rps: f64,
    /// The highest p99 among them.
    pub p99_us: u64,
    /// Every confirmation passed too.
    pub confirmed: bool,
    /// Runs at this level (the step and its confirmations).
    pub runs: usize,
    /// The server's verdict at the first step that did not pass (or at the
    /// maximum, when every level passed).
    pub bottleneck: String,
}

impl CapacityReport {
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub(crate) fn from_json(text: &str) -> Result<CapacityReport, String> {
        let r: CapacityReport = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if r.schema != SCHEMA {
            return Err(format!("schema {:?}, expected {SCHEMA}", r.schema));
        }
        Ok(r)
    }

    /// The one-line summary of the run's result.
    pub(crate) fn headline(&self) -> String {
        match &self.maximum {
            Some(m) => format!(
                "maximum {} {} ({:.0} req/s, p99 {}){}; bottleneck: {}",
                fmt_level(m.level),
                self.stepped,
                m.rps,
                fmt_us(m.p99_us),
                match (m.confirmed, m.runs) {
                    (true, 1) => ", one run (no repeat asked)".to_string(),
                    (true, n) => format!(", held in {n} runs"),
                    (false, n) => format!(", NOT confirmed ({n} runs)"),
                },
                m.bottleneck
            ),
            None => "no level passed: no maximum".into(),
        }
    }

    /// Markdown of the same report, for a ticket or a commit.
    pub(crate) fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# Capacity: {}\n", self.target);
        if !self.drift.is_empty() {
            let _ = writeln!(s, "> **Run with drift (--allow-drift):**");
            for d in &self.drift {
                let _ = writeln!(s, "> - {d}");
            }
            s.push('\n');
        }
        let _ = writeln!(s, "**{}**\n", self.headline());
        let _ = writeln!(
            s,
            "Plan `{}`, stepped by {}, started {}.\n",
            self.plan, self.stepped, self.started_at
        );
        let _ = writeln!(
            s,
            "| level | run | req/s | p50 | p99 | errors | pass | server limit | client |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
        for st in &self.steps {
            let run = if st.confirmation == 0 {
                "step".to_string()
            } else {
                format!("confirm {}", st.confirmation)
            };
            let client = if st.clients.iter().any(|c| c.saturated) {
                "SATURATED"
            } else {
                "not saturated"
            };
            let _ = writeln!(
                s,
                "| {} | {run} | {:.0} | {} | {} | {} | {} | {} | {client} |",
                fmt_level(st.level),
                st.rps,
                fmt_us(st.p50_us),
                fmt_us(st.p99_us),
                st.errors,
                if st.pass { "yes" } else { "no" },
                st.verdict.text.replace('|', "/")
            );
        }
        let _ = writeln!(s, "\n## Tuning verified before the first step\n");
        if self.tuning.is_empty() {
            let _ = writeln!(s, "No host has a profile in the plan.");
        }
        for t in &self.tuning {
            let _ = writeln!(
                s,
                "- {} `{}` ({}): {}",
                t.role,
                t.host,
                t.profile,
                if t.ok { "verified" } else { "DRIFT" }
            );
            for k in &t.knobs {
                let _ = writeln!(s, "  - `{}` = {} ({})", k.knob, k.actual, k.verdict);
            }
        }
        let _ = writeln!(s, "\n## Commands\n\n```\n{}", self.command.join(" "));
        for t in &self.tuning {
            let _ = writeln!(s, "{}", t.command);
        }
        if let Some(st) = self.steps.first() {
            let _ = writeln!(s, "{}", st.command);
        }
        let _ = writeln!(s, "```");
        for n in &self.notes {
            let _ = writeln!(s, "\nNote: {n}");
        }
        s
    }
}

/// One round of the tuning log (`--compare`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Round {
    pub file: String,
    /// `knob before → after`, one per changed knob; empty for the first round.
    pub changed: Vec<String>,
    pub maximum: String,
    pub p99: String,
    pub bottleneck: String,
}

impl Round {
    /// The "what changed" cell's lines for round `index` (0-based).
    pub(crate) fn what_changed(&self, index: usize) -> Vec<String> {
        if index == 0 {
            vec!["baseline".into()]
        } else if self.changed.is_empty() {
            vec!["no knob changed".into()]
        } else {
            self.changed.clone()
        }
    }
}

/// A level as written: 64, 1500.5.
pub(crate) fn fmt_level(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

pub(crate) fn fmt_us(us: u64) -> String {
    xload_sys::fmt::fmt_us(us as f64, xload_sys::fmt::UsStyle::Narrow)
}
