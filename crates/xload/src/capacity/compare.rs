//! `xload capacity --compare R1.json R2.json ...`: seed 004's tuning log —
//! round, what changed (the knob diff between the rounds' verified tunings,
//! computed), the confirmed maximum, p99 at it, the bottleneck named.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::report::{fmt_level, fmt_us, CapacityReport, Round};
use super::CapacityArgs;
use crate::output::write_out;
use crate::Failure;

/// Each host's verified knobs, keyed `role host knob` (a client's host is
/// part of its key; the server is the server whatever its name).
fn knobs(r: &CapacityReport) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for t in &r.tuning {
        let who = if t.role == "server" {
            "server".to_string()
        } else {
            format!("client {}", t.host)
        };
        for k in &t.knobs {
            out.insert((who.clone(), k.knob.clone()), k.actual.clone());
        }
    }
    out
}

/// The knobs whose verified value differs between two rounds.
pub(crate) fn knob_diff(before: &CapacityReport, after: &CapacityReport) -> Vec<String> {
    let (a, b) = (knobs(before), knobs(after));
    let mut keys: Vec<&(String, String)> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let (was, now) = (a.get(key), b.get(key));
            (was != now).then(|| {
                let show =
                    |v: Option<&String>| v.map_or("(not in the profile)".to_string(), Clone::clone);
                format!("{} {} → {} ({})", key.1, show(was), show(now), key.0)
            })
        })
        .collect()
}

/// The log of `reports`, in round order.
pub(crate) fn rounds(reports: &[(String, CapacityReport)]) -> Vec<Round> {
    reports
        .iter()
        .enumerate()
        .map(|(i, (file, r))| {
            let changed = if i == 0 {
                Vec::new()
            } else {
                knob_diff(&reports[i - 1].1, r)
            };
            let (maximum, p99, bottleneck) = match &r.maximum {
                Some(m) => (
                    format!(
                        "{} {} ({:.0} req/s){}",
                        fmt_level(m.level),
                        r.stepped,
                        m.rps,
                        if m.confirmed { "" } else { ", not confirmed" }
                    ),
                    fmt_us(m.p99_us),
                    m.bottleneck.clone(),
                ),
                None => ("none".into(), "-".into(), "no level passed".into()),
            };
            Round {
                file: file.clone(),
                changed,
                maximum,
                p99,
                bottleneck,
            }
        })
        .collect()
}

/// The log as a Markdown table.
pub(crate) fn markdown(rounds: &[Round]) -> String {
    let mut s = String::from("| round | report | what changed | maximum | p99 at max | bottleneck |\n|---|---|---|---|---|---|\n");
    for (i, r) in rounds.iter().enumerate() {
        let changed = r.what_changed(i).join("<br>");
        let _ = writeln!(
            s,
            "| R{} | {} | {} | {} | {} | {} |",
            i + 1,
            r.file,
            changed,
            r.maximum,
            r.p99,
            r.bottleneck.replace('|', "/")
        );
    }
    s
}

pub(crate) fn main_compare(a: &CapacityArgs) -> Result<i32, Failure> {
    if a.compare.len() < 2 {
        return Err(Failure::Usage(
            "--compare needs two reports or more, in round order".into(),
        ));
    }
    let mut reports = Vec::new();
    for p in &a.compare {
        let text = std::fs::read_to_string(p)
            .map_err(|e| Failure::Usage(format!("--compare {}: {e}", p.display())))?;
        let r = CapacityReport::from_json(&text).map_err(|e| {
            Failure::Usage(format!(
                "--compare {}: not an xload capacity report: {e}",
                p.display()
            ))
        })?;
        reports.push((p.display().to_string(), r));
    }
    let log = rounds(&reports);
    let md = markdown(&log);
    if a.markdown.as_deref() == Some("-") {
        eprint!("{md}");
    } else {
        crate::out(&md);
    }
    if let Some(p) = &a.markdown {
        write_out(p, md.trim_end())?;
    }
    if let Some(p) = &a.html {
        let last = &reports[reports.len() - 1].1;
        write_out(p, &super::html::page(last, &log))?;
    }
    if a.json.is_some() {
        return Err(Failure::Usage("--json writes a run's report; --compare prints Markdown (--markdown) and HTML (--html)".into()));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::super::reach::{KnobValue, Tuning};
    use super::super::report::{Maximum, SCHEMA};
    use super::*;

    fn report(somaxconn: &str, max: f64, bottleneck: &str) -> CapacityReport {
        CapacityReport {
            schema: SCHEMA.into(),
            plan: "p.toml".into(),
            target: "http://x/".into(),
            stepped: "connections".into(),
            started_at: String::new(),
            command: Vec::new(),
            drift: Vec::new(),
            tuning: vec![Tuning {
                role: "server".into(),
                host: "srv".into(),
                profile: "s.toml".into(),
                ok: true,
                knobs: vec![
                    KnobValue {
                        knob: "sysctl:net.core.somaxconn".into(),
                        wanted: somaxconn.into(),
                        actual: somaxconn.into(),
                        verdict: "ok".into(),
                        reason: String::new(),
                    },
                    KnobValue {
                        knob: "sysctl:net.ipv4.tcp_fin_timeout".into(),
                        wanted: "30".into(),
                        actual: "30".into(),
                        verdict: "ok".into(),
                        reason: String::new(),
                    },
                ],
                command: String::new(),
            }],
            steps: Vec::new(),
            knee: None,
            maximum: Some(Maximum {
                level: max,
                rps: max * 10.0,
                p99_us: 2500,
                confirmed: true,
                runs: 3,
                bottleneck: bottleneck.into(),
            }),
            notes: Vec::new(),
        }
    }

    #[test]
    fn the_log_shows_the_computed_knob_diff_and_both_maxima() {
        let log = rounds(&[
            (
                "r1.json".into(),
                report("64", 256.0, "listen queue overflow"),
            ),
            ("r2.json".into(), report("4096", 1024.0, "application CPU")),
        ]);
        assert!(log[0].changed.is_empty());
        assert_eq!(
            log[1].changed,
            vec!["sysctl:net.core.somaxconn 64 → 4096 (server)"]
        );
        let md = markdown(&log);
        assert!(
            md.contains("| R1 | r1.json | baseline | 256 connections (2560 req/s)"),
            "{md}"
        );
        assert!(md.contains("| R2 | r2.json | sysctl:net.core.somaxconn 64 → 4096 (server) | 1024 connections (10240 req/s)"), "{md}");
        assert!(md.contains("listen queue overflow") && md.contains("application CPU"));
    }

    #[test]
    fn a_knob_only_one_round_verified_is_shown_as_absent_in_the_other() {
        let a = report("64", 1.0, "x");
        let mut b = report("64", 1.0, "x");
        b.tuning[0].knobs.pop();
        assert_eq!(
            knob_diff(&a, &b),
            vec!["sysctl:net.ipv4.tcp_fin_timeout 30 → (not in the profile) (server)"]
        );
    }
}
