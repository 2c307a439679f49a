//! The per-host rows of `xload --on`: what each generator did (its share,
//! rate, p99, how late its window opened, whether it was saturated) or why
//! it returned nothing.

use serde_json::{json, Value};
use xload_stats::Report;
use xload_sys::fmt::{fmt_us, UsStyle};

/// What one host's run returned.
pub(crate) struct HostOutcome {
    pub(crate) host: String,
    pub(crate) exit_code: i32,
    /// The transport failed (ssh's 255): the host was not reached, or the
    /// command died by a signal.
    pub(crate) unreachable: bool,
    pub(crate) stderr: String,
    /// Its JSON report, when it ran to the end.
    pub(crate) report: Option<Report>,
}

impl HostOutcome {
    /// Why there is no report: the exit and the last line the host said.
    pub(crate) fn failure(&self) -> String {
        let last = self
            .stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(nothing on stderr)");
        let how = if self.unreachable {
            "could not be reached or was killed".to_string()
        } else if self.exit_code == 0 {
            "returned no JSON report".to_string()
        } else {
            format!("failed (exit {})", self.exit_code)
        };
        format!("{how}: {last}")
    }
}

/// Whether a report's client was saturated, and its reasons.
fn saturation(r: &Report) -> (Option<bool>, Vec<String>) {
    let Some(c) = &r.client else {
        return (None, Vec::new());
    };
    let reasons = c
        .get("reasons")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    (c.get("saturated").and_then(Value::as_bool), reasons)
}

/// The text table of the hosts and the same rows for the JSON report.
pub(crate) fn host_rows(outcomes: &[HostOutcome]) -> (String, Value) {
    let mut text = format!(
        "Hosts ({} of {} reported)\n  {:<16} {:>7} {:>6} {:>10} {:>11} {:>10} {:>12}  client\n",
        outcomes.iter().filter(|o| o.report.is_some()).count(),
        outcomes.len(),
        "host",
        "segment",
        "conns",
        "requests",
        "req/s",
        "p99",
        "start error"
    );
    let mut json_rows = Vec::new();
    let mut saturated_hosts = Vec::new();
    let mut why = String::new();
    for o in outcomes {
        let Some(r) = &o.report else {
            text.push_str(&format!("  {:<16} FAILED: {}\n", o.host, o.failure()));
            json_rows.push(json!({"host": o.host, "ok": false, "exit_code": o.exit_code, "error": o.failure()}));
            continue;
        };
        let (saturated, reasons) = saturation(r);
        let verdict = match saturated {
            Some(true) => {
                saturated_hosts.push(o.host.as_str());
                why.push_str(&format!("    {}: {}\n", o.host, reasons.join("; ")));
                "SATURATED".to_string()
            }
            Some(false) => "not saturated".to_string(),
            None => "not judged".to_string(),
        };
        let start_error = r
            .run
            .start_error_us
            .map_or("-".to_string(), |e| format!("{e}µs"));
        text.push_str(&format!(
            "  {:<16} {:>7} {:>6} {:>10} {:>11.1} {:>10} {:>12}  {verdict}\n",
            o.host,
            r.run.segment.as_deref().unwrap_or("-"),
            r.connections,
            r.requests,
            r.rps,
            fmt_us(r.latency_us.p99 as f64, UsStyle::TwoDecimals),
            start_error,
        ));
        json_rows.push(json!({
            "host": o.host,
            "ok": true,
            "segment": r.run.segment,
            "connections": r.connections,
            "requests": r.requests,
            "rps": r.rps,
            "p99_us": r.latency_us.p99,
            "start_error_us": r.run.start_error_us,
            "saturated": saturated,
        }));
    }
    if !saturated_hosts.is_empty() {
        text.push_str(&format!(
            "  generator SATURATED on {}: the merge understates the server (add hosts or give each less)\n{why}",
            saturated_hosts.join(", ")
        ));
    }
    (text, Value::Array(json_rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(host: &str, report: Option<Report>) -> HostOutcome {
        HostOutcome {
            host: host.into(),
            exit_code: if report.is_some() { 0 } else { 255 },
            unreachable: report.is_none(),
            stderr: "ssh: connect to host c: No route to host\n".into(),
            report,
        }
    }

    #[test]
    fn rows_name_failed_and_saturated_hosts() {
        let mut a = Report {
            requests: 100,
            rps: 50.0,
            ..Report::default()
        };
        a.run.segment = Some("1/3".into());
        a.client = Some(json!({"saturated": true, "reasons": ["cpu 3 busy"]}));
        let mut b = a.clone();
        b.client = Some(json!({"saturated": false}));
        let (text, rows) = host_rows(&[
            outcome("a", Some(a)),
            outcome("b", Some(b)),
            outcome("c", None),
        ]);
        assert!(text.starts_with("Hosts (2 of 3 reported)"), "{text}");
        assert!(text.contains("    a: cpu 3 busy\n"), "{text}");
        assert!(text.contains("not saturated"), "{text}");
        assert!(
            text.contains("c                FAILED: could not be reached or was killed: ssh: connect to host c: No route to host"),
            "{text}"
        );
        assert!(text.contains("generator SATURATED on a:"), "{text}");
        assert_eq!(rows[2]["ok"], false);
        assert_eq!(rows[0]["saturated"], true);
    }
}
