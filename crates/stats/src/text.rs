//! The text report: a wrk-like summary with labelled figures and units,
//! and with `--latency` a percentile table and an HdrHistogram-style
//! distribution.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use crate::error_kind::ErrorKind;
use crate::report::{OpenLoop, Report};
use xload_sys::fmt::{fmt_bytes, fmt_count, fmt_duration_us, fmt_rate, fmt_seconds};

/// What the text report includes besides the summary.
#[derive(Clone, Copy, Debug, Default)]
pub struct TextOptions {
    /// Percentile table and distribution (`--latency`).
    pub latency_table: bool,
}

/// Percentiles of the `--latency` table.
pub const TABLE_PERCENTILES: [f64; 8] = [50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0];

/// Width of the line labels ("Latency", "Requests", ...).
const LABEL: usize = 12;

fn line(out: &mut String, label: &str, body: &str) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "  {label:<LABEL$}{body}");
}

impl Report {
    /// The text report. Never panics and never prints NaN, whatever the
    /// report holds (zero requests, zero duration, unreadable histogram).
    pub fn render_text(&self, opts: &TextOptions) -> String {
        let mut out = String::new();
        self.render_setup(&mut out);
        self.render_tls(&mut out);
        self.render_h2(&mut out);
        self.render_latency(&mut out);
        self.render_throughput(&mut out);
        if let Some(o) = &self.open_loop {
            self.render_pacing(&mut out, o);
        }

        line(&mut out, "Status", &self.status_text());
        let failed = self.non_2xx_3xx();
        if failed > 0 {
            line(
                &mut out,
                "Non-2xx/3xx",
                &format!(
                    "{} responses ({:.2}% of responses; --fail-if 'non2xx>0' gates on them)",
                    fmt_count(failed),
                    100.0 * failed as f64 / self.requests.max(1) as f64
                ),
            );
        }
        line(&mut out, "Errors", &self.errors_text());
        if let Some(text) = self.unanswered_text() {
            line(&mut out, "Unanswered", &text);
        }
        crate::classes::render_text(&self.classes, &mut out);

        if opts.latency_table {
            self.render_latency_table(&mut out);
        }

        for verdict in self.client_verdicts() {
            let _ = writeln!(out, "{verdict}");
        }
        out
    }

    /// Header (what ran, against what), early stop, engine, batching.
    fn render_setup(&self, out: &mut String) {
        // Header: what ran, against what.
        let mut setup = Vec::new();
        if !self.engine.is_empty() {
            setup.push(self.engine.clone());
        }
        if let Some(o) = &self.open_loop {
            setup.push(format!(
                "open loop {} req/s target",
                fmt_rate(o.rate_target)
            ));
        }
        setup.push(format!(
            "{} thread{}",
            fmt_count(self.threads as u64),
            if self.threads == 1 { "" } else { "s" }
        ));
        setup.push(format!(
            "{} connection{}",
            fmt_count(self.connections as u64),
            if self.connections == 1 { "" } else { "s" }
        ));
        if self.pipeline > 1 {
            setup.push(format!("pipeline {}", self.pipeline));
        }
        let _ = writeln!(
            out,
            "xload {} @ {}  ({})",
            fmt_seconds(self.duration_s),
            self.target,
            setup.join(", ")
        );
        if self.interrupted {
            line(
                out,
                "Stopped",
                &format!(
                    "early, by a signal (Ctrl-C or SIGTERM): the figures cover the {} measured",
                    fmt_seconds(self.duration_s)
                ),
            );
        }
        if let Some(reason) = &self.engine_reason {
            line(out, "Engine", &format!("{}: {}", self.engine, reason));
        }
        if let Some(b) = &self.batching {
            let cap = if b.cap_min == b.cap_max {
                format!("{}", b.cap_max)
            } else {
                format!("{}-{}", b.cap_min, b.cap_max)
            };
            line(
                out,
                "Batching",
                &format!(
                    "{:.1} completions per wait ({} waits, warm-up included), cap {cap}",
                    b.completions_per_wait, b.waits
                ),
            );
        }
    }

    /// HTTP/2: streams in use, and the protocol events when there were any.
    fn render_h2(&self, out: &mut String) {
        let Some(h) = &self.h2 else {
            return;
        };
        let mut body = format!(
            "h2, {} stream{} per connection",
            h.streams_per_connection,
            if h.streams_per_connection == 1 {
                ""
            } else {
                "s"
            }
        );
        if h.streams_asked > h.streams_per_connection && h.streams_per_connection > 0 {
            body.push_str(&format!(
                " ({} asked, capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS)",
                h.streams_asked
            ));
        }
        if h.goaways > 0 {
            body.push_str(&format!(", GOAWAY {}", fmt_count(h.goaways)));
        }
        if h.retried_streams > 0 {
            body.push_str(&format!(
                ", {} streams refused and sent again",
                fmt_count(h.retried_streams)
            ));
        }
        for (code, n) in &h.rst_stream {
            body.push_str(&format!(", RST_STREAM {code} {}", fmt_count(*n)));
        }
        if h.flow_control_stall_ms > 0.0 {
            body.push_str(&format!(
                ", streams waited {} for flow-control window",
                fmt_duration_us(h.flow_control_stall_ms * 1000.0)
            ));
        }
        line(out, "HTTP/2", &body);
        if !h.connection_errors.is_empty() {
            let causes: Vec<String> = h
                .connection_errors
                .iter()
                .map(|(c, n)| format!("{c} {}", fmt_count(*n)))
                .collect();
            line(
                out,
                "",
                &format!("connection errors: {}", causes.join(", ")),
            );
        }
    }

    /// https: the TLS mode, why not kTLS, the handshakes and their timing.
    fn render_tls(&self, out: &mut String) {
        let Some(t) = &self.tls else {
            return;
        };
        let mut mode = format!("{} ({}", t.mode, t.library);
        for part in [&t.version, &t.cipher] {
            if !part.is_empty() {
                mode.push_str(", ");
                mode.push_str(part);
            }
        }
        mode.push(')');
        if let Some(why) = &t.ktls_unavailable {
            mode.push_str(&format!("; kTLS not available: {why}"));
        }
        line(out, "TLS", &mode);
        if t.handshakes_full.saturating_add(t.handshakes_resumed) == 0 && self.requests > 0 {
            // Answers but no handshake: the connections were set up before the
            // window (a warm-up or --start-at), and their handshakes with it.
            line(
                out,
                "Handshakes",
                "none in the measured window (the connections were set up in the warm-up)",
            );
            return;
        }
        let mut hs = format!(
            "{} full, {} resumed ({}/s)",
            fmt_count(t.handshakes_full),
            fmt_count(t.handshakes_resumed),
            fmt_rate(t.handshakes_per_s)
        );
        if t.handshake_cpu_us > 0.0 {
            hs.push_str(&format!(
                ", TLS CPU {} each",
                fmt_duration_us(t.handshake_cpu_us)
            ));
        }
        if t.handshakes_full.saturating_add(t.handshakes_resumed) > 0 {
            hs.push_str(&format!(
                "  connect p50 {} p99 {}  handshake p50 {} p99 {}",
                fmt_duration_us(t.connect_us.p50 as f64),
                fmt_duration_us(t.connect_us.p99 as f64),
                fmt_duration_us(t.handshake_us.p50 as f64),
                fmt_duration_us(t.handshake_us.p99 as f64),
            ));
        }
        line(out, "Handshakes", &hs);
    }

    /// Latency, corrected and (open loop) uncorrected.
    fn render_latency(&self, out: &mut String) {
        if self.requests == 0 {
            line(out, "Latency", "no responses");
        } else {
            let s = &self.latency_us;
            let mut body = format!(
                "avg {}  stdev {}  p50 {}  p99 {}  max {}",
                fmt_duration_us(s.mean),
                fmt_duration_us(s.stdev),
                fmt_duration_us(s.p50 as f64),
                fmt_duration_us(s.p99 as f64),
                fmt_duration_us(s.max as f64),
            );
            if self.open_loop.is_some() {
                body.push_str("  (from intended send times)");
            }
            line(out, "Latency", &body);
            if let Some(u) = self.open_loop.as_ref().map(|o| &o.latency_uncorrected_us) {
                line(
                    out,
                    "Uncorrected",
                    &format!(
                        "avg {}  stdev {}  p50 {}  p99 {}  max {}  (from actual sends)",
                        fmt_duration_us(u.mean),
                        fmt_duration_us(u.stdev),
                        fmt_duration_us(u.p50 as f64),
                        fmt_duration_us(u.p99 as f64),
                        fmt_duration_us(u.max as f64),
                    ),
                );
            }
        }
    }

    /// Requests, transfer and connects per second.
    fn render_throughput(&self, out: &mut String) {
        let transfer_per_s = if self.duration_s > 0.0 {
            self.bytes as f64 / self.duration_s
        } else {
            0.0
        };
        line(
            out,
            "Requests",
            &format!(
                "{} in {}  =  {} req/s   Transfer {}/s",
                fmt_count(self.requests),
                fmt_seconds(self.duration_s),
                fmt_rate(self.rps),
                fmt_bytes(transfer_per_s),
            ),
        );
        if self.connects > self.connections as u64 {
            let per_s = if self.duration_s > 0.0 {
                self.connects as f64 / self.duration_s
            } else {
                0.0
            };
            line(
                out,
                "Connects",
                &format!(
                    "{} opened  =  {} conn/s",
                    fmt_count(self.connects),
                    fmt_rate(per_s)
                ),
            );
        }
    }

    /// Open loop: pacing honesty (rate achieved, late and dropped sends, lag).
    fn render_pacing(&self, out: &mut String, o: &OpenLoop) {
        let target = o.rate_target;
        let pct = if target > 0.0 {
            format!(" ({:.2}%)", 100.0 * self.rps / target)
        } else {
            String::new()
        };
        line(
            out,
            "Rate",
            &format!(
                "achieved {} req/s of {} target{}",
                fmt_rate(self.rps),
                fmt_rate(target),
                pct
            ),
        );
        let mut why = Vec::new();
        if o.late_waiting_for_connection > 0 {
            why.push(format!(
                "{} waiting for a free connection",
                fmt_count(o.late_waiting_for_connection)
            ));
        }
        if o.late_catch_up > 0 {
            why.push(format!(
                "{} behind the backlog, at the 2× catch-up limit",
                fmt_count(o.late_catch_up)
            ));
        }
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" ({})", why.join(", "))
        };
        line(
            out,
            "Sends",
            &format!(
                "{} sent  late {}{why}  dropped {}",
                fmt_count(o.sends),
                fmt_count(o.late_sends),
                fmt_count(o.dropped)
            ),
        );
        let lag = &o.schedule_lag_us;
        line(
            out,
            "Sched. lag",
            &format!(
                "p50 {}  p99 {}  max {}",
                fmt_duration_us(lag.p50 as f64),
                fmt_duration_us(lag.p99 as f64),
                fmt_duration_us(lag.max as f64),
            ),
        );
    }

    /// Requests the window closed on, when some of them were far older than
    /// the answered ones (a server that stalled at the end): "50 in flight
    /// and 943 never sent at the end, oldest 1.02s: 993 older than the
    /// answered p99 (819µs) are in the latency at their age, a lower bound".
    /// None when nothing stands out: at the end of a healthy run a request
    /// or two is always a little older than the p99.
    pub fn unanswered_text(&self) -> Option<String> {
        let u = &self.unanswered_at_end;
        if u.recorded == 0 || u.oldest_us < u.threshold_us.max(1).saturating_mul(2) {
            return None;
        }
        let unsent = if u.unsent > 0 {
            format!(" and {} never sent", fmt_count(u.unsent))
        } else {
            String::new()
        };
        Some(format!(
            "{} in flight{unsent} at the end, oldest {}: {} older than the answered p99 ({}) are in the latency at their age, a lower bound",
            fmt_count(u.in_flight),
            fmt_duration_us(u.oldest_us as f64),
            fmt_count(u.recorded),
            fmt_duration_us(u.threshold_us as f64)
        ))
    }

    /// "200: 2,131,004  404: 3", or "none".
    fn status_text(&self) -> String {
        if self.status.is_empty() {
            return "none".to_string();
        }
        let mut codes: Vec<(&String, &u64)> = self.status.iter().collect();
        // Numeric order ("99" before "100"), non-numeric keys last.
        codes.sort_by_key(|(k, _)| (k.parse::<u64>().unwrap_or(u64::MAX), (*k).clone()));
        codes
            .iter()
            .map(|(k, n)| format!("{k}: {}", fmt_count(**n)))
            .collect::<Vec<_>>()
            .join("  ")
    }

    /// "reset 3, parse 2 [bad_chunk_size 2], other 1 [errno_ENOBUFS 1]", or "none".
    fn errors_text(&self) -> String {
        let nonzero: Vec<(&String, &u64)> = self.errors.iter().filter(|(_, n)| **n > 0).collect();
        if nonzero.is_empty() {
            return "none".to_string();
        }
        let rank = |k: &str| {
            ErrorKind::ALL
                .iter()
                .position(|e| e.name() == k)
                .unwrap_or(ErrorKind::COUNT)
        };
        let mut sorted = nonzero;
        sorted.sort_by_key(|(k, _)| (rank(k), (*k).clone()));
        let breakdown = |m: &std::collections::BTreeMap<String, u64>| {
            let mut parts: Vec<(&String, &u64)> = m.iter().collect();
            parts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            parts
                .iter()
                .map(|(k, n)| format!("{k} {}", fmt_count(**n)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        sorted
            .iter()
            .map(|(k, n)| {
                let mut s = format!("{k} {}", fmt_count(**n));
                let detail = match k.as_str() {
                    "parse" if !self.parse_errors.is_empty() => Some(breakdown(&self.parse_errors)),
                    "other" if !self.errors_other.is_empty() => Some(breakdown(&self.errors_other)),
                    _ => None,
                };
                if let Some(d) = detail {
                    let _ = write!(s, " [{d}]");
                }
                s
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn render_latency_table(&self, out: &mut String) {
        let main = match self.latency_histogram() {
            Ok(h) => h,
            Err(e) => {
                let _ = writeln!(out, "  Latency distribution unavailable: {e}");
                return;
            }
        };
        if main.is_empty() {
            let _ = writeln!(out, "  Latency distribution: no responses");
            return;
        }
        let uncorrected = self.latency_uncorrected_histogram().ok().flatten();
        let _ = writeln!(out, "  Latency distribution");
        match &uncorrected {
            Some(_) => {
                let _ = writeln!(
                    out,
                    "  {:>10}  {:>10}  {:>11}",
                    "percentile", "latency", "uncorrected"
                );
            }
            None => {
                let _ = writeln!(out, "  {:>10}  {:>10}", "percentile", "latency");
            }
        }
        for p in TABLE_PERCENTILES {
            let label = format!("{}%", trim_float(p));
            let v = fmt_duration_us(main.value_at_quantile(p / 100.0) as f64);
            match &uncorrected {
                Some(u) if !u.is_empty() => {
                    let uv = fmt_duration_us(u.value_at_quantile(p / 100.0) as f64);
                    let _ = writeln!(out, "  {label:>10}  {v:>10}  {uv:>11}");
                }
                _ => {
                    let _ = writeln!(out, "  {label:>10}  {v:>10}");
                }
            }
        }
        render_distribution(out, &main);
    }

    /// Lines "client: <verdict>" for a `client.verdict` string, or one per
    /// merged report ("client[1]: ...") under `client.per_report`.
    fn client_verdicts(&self) -> Vec<String> {
        let Some(client) = &self.client else {
            return Vec::new();
        };
        let per_report = client.get("per_report").and_then(|a| a.as_array());
        if let Some(v) = client.get("verdict").and_then(|v| v.as_str()) {
            // The probe's verdict is the whole line ("client: ..."), then
            // its notes: what it saw that is not this client's limit. A
            // merged report's comes with each input's verdict after it.
            let mut lines = vec![v.to_string()];
            if let Some(items) = per_report {
                lines.extend(items.iter().enumerate().filter_map(|(i, c)| {
                    c.get("verdict")
                        .and_then(|v| v.as_str())
                        .map(|v| format!("  [{}] {v}", i + 1))
                }));
            }
            if let Some(notes) = client.get("notes").and_then(|n| n.as_array()) {
                lines.extend(
                    notes
                        .iter()
                        .filter_map(|n| n.as_str())
                        .map(|n| format!("  note: {n}")),
                );
            }
            return lines;
        }
        client
            .get("per_report")
            .and_then(|a| a.as_array())
            .map(|items| {
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        c.get("verdict")
                            .and_then(|v| v.as_str())
                            .map(|v| format!("[{}] {v}", i + 1))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// 99.9 -> "99.9", 50.0 -> "50".
fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The HdrHistogram percentile distribution (one tick per half distance to
/// 100 %), as Java's `outputPercentileDistribution` prints it, values with
/// units.
fn render_distribution(out: &mut String, h: &Histogram<u64>) {
    let _ = writeln!(out, "  Detailed distribution");
    let _ = writeln!(
        out,
        "  {:>10}  {:>12}  {:>14}  {:>16}",
        "value", "percentile", "total count", "1/(1-percentile)"
    );
    let mut total: u64 = 0;
    for v in h.iter_quantiles(1) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let inverse = if q < 1.0 {
            format!("{:.2}", 1.0 / (1.0 - q))
        } else {
            "inf".to_string()
        };
        let _ = writeln!(
            out,
            "  {:>10}  {:>12.6}  {:>14}  {:>16}",
            fmt_duration_us(v.value_iterated_to() as f64),
            q,
            fmt_count(total),
            inverse
        );
    }
}
