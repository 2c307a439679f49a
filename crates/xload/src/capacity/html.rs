//! The capacity report as one self-contained HTML page: inline SVG and CSS,
//! no script, nothing fetched. Throughput and p50/p99 against load with the
//! knee and the maximum, per-CPU utilisation per step for every host, NET_RX
//! per CPU per step as a heat map, the verdicts, the verified tuning, the
//! commands, and the tuning log when there is one.

use std::fmt::Write as _;

use super::evidence::Evidence;
use super::report::{fmt_level, fmt_us, CapacityReport, Round, Step};

const W: f64 = 460.0;
const H: f64 = 240.0;
/// Margins of a chart: left, right, top, bottom.
const M: (f64, f64, f64, f64) = (64.0, 16.0, 24.0, 40.0);

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page for `r`, with the tuning log `log` when not empty.
pub(crate) fn page(r: &CapacityReport, log: &[Round]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Capacity: {}</title><style>{}</style></head><body>\n",
        esc(&r.target),
        CSS
    );
    let _ = writeln!(s, "<h1>Capacity of {}</h1>", esc(&r.target));
    let _ = writeln!(s, "<p class=\"headline\">{}</p>", esc(&r.headline()));
    if !r.drift.is_empty() {
        let _ = writeln!(s, "<div class=\"drift\"><b>Run with drift (--allow-drift)</b>: the hosts did not have the tuning their profiles name:<ul>");
        for d in &r.drift {
            let _ = writeln!(s, "<li>{}</li>", esc(d));
        }
        let _ = writeln!(s, "</ul></div>");
    }
    let _ = writeln!(
        s,
        "<p>Plan <code>{}</code>, stepped by {}, started {}.</p>",
        esc(&r.plan),
        esc(&r.stepped),
        esc(&r.started_at)
    );
    if !log.is_empty() {
        tuning_log(&mut s, log);
    }
    // The curves in level order (bisection runs levels out of order).
    let mut steps: Vec<&Step> = r.steps.iter().filter(|st| st.confirmation == 0).collect();
    steps.sort_by(|a, b| a.level.total_cmp(&b.level));
    let _ = writeln!(
        s,
        "<h2>Throughput and latency against load</h2><div class=\"row\">"
    );
    s.push_str(&throughput_chart(r, &steps));
    // A step with no answer has no latency to draw.
    let answered: Vec<&Step> = steps.iter().copied().filter(|st| st.requests > 0).collect();
    s.push_str(&latency_chart(&answered));
    let _ = writeln!(s, "</div>");
    verdicts(&mut s, r);
    let _ = writeln!(s, "<h2>Per-CPU utilisation per step</h2>");
    let _ = writeln!(s, "<p class=\"legend\">{}</p>", legend());
    s.push_str(&host_cpu_chart(
        "server",
        &r.steps
            .iter()
            .map(|st| (st, &st.server))
            .collect::<Vec<_>>(),
    ));
    let clients: Vec<String> = r
        .steps
        .first()
        .map(|st| st.clients.iter().map(|c| c.host.clone()).collect())
        .unwrap_or_default();
    for (i, host) in clients.iter().enumerate() {
        let per: Vec<(&Step, &Evidence)> = r
            .steps
            .iter()
            .filter_map(|st| st.clients.get(i).map(|c| (st, &c.evidence)))
            .collect();
        if per.iter().all(|(_, e)| e.host == r.steps[0].server.host) {
            continue; // the same host as the server: shown above
        }
        s.push_str(&host_cpu_chart(&format!("client {host}"), &per));
    }
    let _ = writeln!(s, "<h2>NET_RX softirqs per CPU per step (server)</h2>");
    s.push_str(&heat_map(&r.steps));
    tuning(&mut s, r);
    let _ = writeln!(s, "<h2>Commands</h2><pre>{}", esc(&r.command.join(" ")));
    for t in &r.tuning {
        let _ = writeln!(s, "{}", esc(&t.command));
    }
    if let Some(st) = r.steps.first() {
        let _ = writeln!(s, "{}", esc(&st.command));
    }
    let _ = writeln!(s, "</pre>");
    for n in &r.notes {
        let _ = writeln!(s, "<p>Note: {}</p>", esc(n));
    }
    s.push_str("</body></html>");
    s
}

const CSS: &str = "body{font-family:DejaVu Sans,Arial,sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}\
.headline{font-size:16px;font-weight:bold}.drift{background:#fde2e1;border:1px solid #c0392b;padding:8px}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}\
.pass{color:#1e7d32}.fail{color:#c0392b}.row{display:flex;flex-wrap:wrap;gap:12px}\
svg{background:#fff;border:1px solid #eee}svg text{font-size:11px;font-family:DejaVu Sans,Arial,sans-serif}\
pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 10px;vertical-align:middle}";

/// (field name, colour) of the stacked CPU bars, bottom up.
const CPU_PARTS: [(&str, &str); 6] = [
    ("usr", "#2e86de"),
    ("sys", "#e67e22"),
    ("softirq", "#c0392b"),
    ("irq", "#8e44ad"),
    ("steal", "#7f8c8d"),
    ("idle", "#ecf0f1"),
];

fn legend() -> String {
    CPU_PARTS
        .iter()
        .map(|(n, c)| format!("<span style=\"background:{c}\"></span>{n}"))
        .collect()
}

/// The smallest 1, 2, 2.5 or 5 × 10^k at or above `v`: an axis end with round ticks.
fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let base = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * base)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * base)
}

/// A chart's scales: x linear from 0, or logarithmic when the levels span
/// more than ten times (1, 2, 4 ... 1024 would crowd the left otherwise).
struct Frame {
    x_min: f64,
    x_max: f64,
    log_x: bool,
    y_max: f64,
}

impl Frame {
    fn new(levels: &[f64], y_max: f64) -> Frame {
        let lo = levels.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = levels.iter().copied().fold(0.0, f64::max);
        let log_x = lo > 0.0 && hi / lo > 10.0;
        Frame {
            x_min: if log_x { lo / 1.3 } else { 0.0 },
            x_max: if log_x { hi * 1.3 } else { hi * 1.05 },
            log_x,
            y_max: nice_max(y_max * 1.05),
        }
    }

    fn x(&self, v: f64) -> f64 {
        let t = if self.log_x {
            (v.ln() - self.x_min.ln()) / (self.x_max.ln() - self.x_min.ln())
        } else if self.x_max > 0.0 {
            v / self.x_max
        } else {
            0.0
        };
        M.0 + (W - M.0 - M.1) * t
    }
    fn y(&self, v: f64) -> f64 {
        H - M.3
            - (H - M.2 - M.3)
                * if self.y_max > 0.0 {
                    v / self.y_max
                } else {
                    0.0
                }
    }
    fn open(
        &self,
        s: &mut String,
        title: &str,
        x_label: &str,
        y_label: &str,
        y_fmt: &dyn Fn(f64) -> String,
    ) {
        let _ = write!(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\">");
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"15\" font-weight=\"bold\">{}</text>",
            M.0,
            esc(title)
        );
        let _ = write!(s, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/><line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#333\"/>", M.0, H - M.3, W - M.1, M.2);
        for k in 0..=4 {
            let v = self.y_max * k as f64 / 4.0;
            let y = self.y(v);
            let _ = write!(s, "<line x1=\"{}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", M.0, W - M.1, M.0 - 4.0, y + 4.0, esc(&y_fmt(v)));
        }
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            (M.0 + W - M.1) / 2.0,
            H - 6.0,
            esc(x_label)
        );
        let _ = write!(s, "<text x=\"12\" y=\"{}\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>", H / 2.0, H / 2.0, esc(y_label));
    }
    /// A label under each level, left out where it would overlap the one
    /// before (bisection puts levels close together).
    fn x_ticks(&self, s: &mut String, levels: &[f64]) {
        let mut last = f64::NEG_INFINITY;
        for &l in levels {
            let width = 7.0 * fmt_level(l).len() as f64 + 8.0;
            if self.x(l) - last < width {
                continue;
            }
            last = self.x(l);
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                self.x(l),
                H - M.3 + 14.0,
                fmt_level(l)
            );
        }
    }
}

fn polyline(points: &[(f64, f64)], colour: &str) -> String {
    let pts: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let dots: String = points
        .iter()
        .map(|(x, y)| format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>"))
        .collect();
    format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>{dots}",
        pts.join(" ")
    )
}

fn throughput_chart(r: &CapacityReport, steps: &[&Step]) -> String {
    let mut s = String::new();
    let levels: Vec<f64> = steps.iter().map(|st| st.level).collect();
    let f = Frame::new(&levels, steps.iter().map(|st| st.rps).fold(0.0, f64::max));
    let x_label = if f.log_x {
        format!("{} (log scale)", r.stepped)
    } else {
        r.stepped.clone()
    };
    f.open(&mut s, "Throughput", &x_label, "req/s", &|v| {
        format!("{v:.0}")
    });
    f.x_ticks(&mut s, &steps.iter().map(|st| st.level).collect::<Vec<_>>());
    let pts: Vec<(f64, f64)> = steps
        .iter()
        .map(|st| (f.x(st.level), f.y(st.rps)))
        .collect();
    s.push_str(&polyline(&pts, "#2e86de"));
    if let Some(k) = r.knee.and_then(|k| r.steps.get(k)) {
        let x = f.x(k.level);
        let _ = write!(s, "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#e67e22\" stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{}\" fill=\"#e67e22\">knee</text>", M.2, H - M.3, x + 3.0, M.2 + 10.0);
    }
    if let Some(m) = &r.maximum {
        let (x, y) = (f.x(m.level), f.y(m.rps));
        let label = if m.confirmed {
            "confirmed max"
        } else {
            "max (unconfirmed)"
        };
        // The label on the side with room: left of the point in the right half.
        let (lx, anchor) = if x > (M.0 + W - M.1) / 2.0 {
            (x - 10.0, "end")
        } else {
            (x + 10.0, "start")
        };
        let _ = write!(s, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"7\" fill=\"none\" stroke=\"#1e7d32\" stroke-width=\"2\"/><text x=\"{lx:.1}\" y=\"{:.1}\" fill=\"#1e7d32\" text-anchor=\"{anchor}\">{label} {:.0}/s</text>", y + 18.0, m.rps);
    }
    s.push_str("</svg>");
    s
}

fn latency_chart(steps: &[&Step]) -> String {
    let mut s = String::new();
    let levels: Vec<f64> = steps.iter().map(|st| st.level).collect();
    let f = Frame::new(
        &levels,
        steps.iter().map(|st| st.p99_us as f64).fold(0.0, f64::max),
    );
    f.open(
        &mut s,
        "Latency (p50 solid, p99 dashed)",
        if f.log_x { "load (log scale)" } else { "load" },
        "latency",
        &|v| fmt_us(v as u64),
    );
    f.x_ticks(&mut s, &steps.iter().map(|st| st.level).collect::<Vec<_>>());
    let p50: Vec<(f64, f64)> = steps
        .iter()
        .map(|st| (f.x(st.level), f.y(st.p50_us as f64)))
        .collect();
    let p99: Vec<(f64, f64)> = steps
        .iter()
        .map(|st| (f.x(st.level), f.y(st.p99_us as f64)))
        .collect();
    s.push_str(&polyline(&p50, "#16a085"));
    s.push_str(&polyline(&p99, "#c0392b").replacen(
        "stroke-width=\"2\"",
        "stroke-width=\"2\" stroke-dasharray=\"6 3\"",
        1,
    ));
    s.push_str("</svg>");
    s
}

fn run_name(st: &Step) -> String {
    if st.confirmation == 0 {
        fmt_level(st.level)
    } else {
        format!("{} c{}", fmt_level(st.level), st.confirmation)
    }
}

fn verdicts(s: &mut String, r: &CapacityReport) {
    let _ = writeln!(s, "<h2>Verdict per step</h2><table><tr><th>level</th><th>req/s</th><th>p50</th><th>p99</th><th>errors</th><th>pass</th><th>server: limiting resource</th><th>what would change it</th><th>clients</th></tr>");
    for st in &r.steps {
        let clients: Vec<String> = st
            .clients
            .iter()
            .map(|c| format!("{}: {}", c.host, c.verdict))
            .collect();
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td><b>{}</b><br>{}</td><td>{}</td><td>{}</td></tr>",
            run_name(st),
            st.rps,
            fmt_us(st.p50_us),
            fmt_us(st.p99_us),
            st.errors,
            if st.pass { "pass" } else { "fail" },
            if st.pass { "yes".to_string() } else { esc(&st.why) },
            st.verdict.limit.name(),
            esc(&st.verdict.text),
            esc(&st.verdict.change),
            esc(&clients.join("; "))
        );
    }
    let _ = writeln!(s, "</table>");
}

/// One host: for each step a group of stacked bars, one per CPU.
fn host_cpu_chart(title: &str, per: &[(&Step, &Evidence)]) -> String {
    let cpus = per
        .iter()
        .map(|(_, e)| e.cpus.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let group = (cpus as f64 * 14.0 + 18.0).max(40.0);
    let width = M.0 + M.1 + group * per.len().max(1) as f64;
    let mut s = String::new();
    let _ = write!(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{H}\" viewBox=\"0 0 {width:.0} {H}\">");
    let host = per.first().map_or(String::new(), |(_, e)| e.host.clone());
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"15\" font-weight=\"bold\">{} ({})</text>",
        M.0,
        esc(title),
        esc(&host)
    );
    let y = |pct: f64| H - M.3 - (H - M.2 - M.3) * pct / 100.0;
    for k in 0..=4 {
        let v = 25.0 * k as f64;
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}%</text>",
            M.0 - 4.0,
            y(v) + 4.0
        );
    }
    for (g, (st, e)) in per.iter().enumerate() {
        let x0 = M.0 + group * g as f64 + 8.0;
        for (i, c) in e.cpus.iter().enumerate() {
            let x = x0 + 14.0 * i as f64;
            let mut bottom = 0.0;
            for (name, colour) in CPU_PARTS {
                let v = match name {
                    "usr" => c.usr + c.nice,
                    "sys" => c.sys + c.iowait,
                    "softirq" => c.softirq,
                    "irq" => c.irq,
                    "steal" => c.steal,
                    _ => c.idle,
                };
                let (top, bot) = (y(bottom + v), y(bottom));
                let _ = write!(s, "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"11\" height=\"{:.1}\" fill=\"{colour}\"><title>cpu{} {name} {v:.1}%</title></rect>", (bot - top).max(0.0), c.cpu);
                bottom += v;
            }
        }
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x0 + 7.0 * cpus as f64 - 4.0,
            H - M.3 + 14.0,
            run_name(st)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">steps (one bar per CPU)</text>",
        width / 2.0,
        H - 6.0
    );
    s.push_str("</svg>");
    s
}

/// Rows: the server's CPUs; columns: steps; colour: NET_RX per second.
fn heat_map(steps: &[Step]) -> String {
    let cpus = steps
        .iter()
        .map(|st| st.server.net_rx.len())
        .max()
        .unwrap_or(0);
    if cpus == 0 {
        return "<p>No NET_RX figures.</p>".into();
    }
    let rate = |st: &Step, c: usize| {
        let n = st.server.net_rx.get(c).copied().unwrap_or(0) as f64;
        if st.server.window_s > 0.0 {
            n / st.server.window_s
        } else {
            0.0
        }
    };
    let max = steps
        .iter()
        .flat_map(|st| (0..cpus).map(move |c| rate(st, c)))
        .fold(0.0, f64::max);
    let (cw, ch) = (56.0, 22.0);
    let width = 70.0 + cw * steps.len() as f64;
    let height = 40.0 + ch * cpus as f64;
    let mut s = String::new();
    let _ = write!(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\">");
    for (j, st) in steps.iter().enumerate() {
        let x = 70.0 + cw * j as f64;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"14\" text-anchor=\"middle\">{}</text>",
            x + cw / 2.0,
            run_name(st)
        );
        for c in 0..cpus {
            let v = rate(st, c);
            let t = if max > 0.0 { v / max } else { 0.0 };
            // White to dark red.
            let (r, g, b) = (255.0 - 63.0 * t, 255.0 - 198.0 * t, 255.0 - 212.0 * t);
            let y = 22.0 + ch * c as f64;
            let _ = write!(s, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{}\" height=\"{}\" fill=\"rgb({r:.0},{g:.0},{b:.0})\" stroke=\"#fff\"><title>cpu{c} {v:.0} NET_RX/s</title></rect>", cw - 2.0, ch - 2.0);
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                x + cw / 2.0 - 1.0,
                y + 14.0,
                if t > 0.5 { "#fff" } else { "#333" },
                short(v)
            );
        }
    }
    for c in 0..cpus {
        let _ = write!(
            s,
            "<text x=\"62\" y=\"{:.1}\" text-anchor=\"end\">cpu{c}</text>",
            36.0 + ch * c as f64
        );
    }
    s.push_str("</svg>");
    s
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn tuning(s: &mut String, r: &CapacityReport) {
    let _ = writeln!(s, "<h2>Tuning verified before the first step</h2>");
    if r.tuning.is_empty() {
        let _ = writeln!(s, "<p>No host has a profile in the plan.</p>");
    }
    for t in &r.tuning {
        let _ = writeln!(
            s,
            "<p>{} <b>{}</b>, profile <code>{}</code>: <span class=\"{}\">{}</span></p><table><tr><th>knob</th><th>wanted</th><th>verified value</th><th>verdict</th></tr>",
            esc(&t.role),
            esc(&t.host),
            esc(&t.profile),
            if t.ok { "pass" } else { "fail" },
            if t.ok { "verified" } else { "DRIFT" }
        );
        for k in &t.knobs {
            let _ = writeln!(
                s,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&k.knob),
                esc(&k.wanted),
                esc(&k.actual),
                esc(&k.verdict)
            );
        }
        let _ = writeln!(s, "</table>");
    }
}

fn tuning_log(s: &mut String, log: &[Round]) {
    let _ = writeln!(s, "<h2>Tuning log</h2><table><tr><th>round</th><th>report</th><th>what changed</th><th>maximum</th><th>p99 at max</th><th>bottleneck</th></tr>");
    for (i, r) in log.iter().enumerate() {
        let changed: Vec<String> = r.what_changed(i).iter().map(|c| esc(c)).collect();
        let changed = changed.join("<br>");
        let _ = writeln!(
            s,
            "<tr><td>R{}</td><td>{}</td><td>{changed}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            esc(&r.file),
            esc(&r.maximum),
            esc(&r.p99),
            esc(&r.bottleneck)
        );
    }
    let _ = writeln!(s, "</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ends_are_round() {
        assert_eq!(nice_max(160_524.0), 200_000.0);
        assert_eq!(nice_max(23.0), 25.0);
        assert_eq!(nice_max(4.0), 5.0);
        assert_eq!(nice_max(0.0), 1.0);
    }

    #[test]
    fn levels_that_span_ten_times_get_a_log_axis() {
        let f = Frame::new(&[8.0, 16.0, 32.0, 64.0, 384.0], 1.0);
        assert!(f.log_x);
        // Doublings are evenly spaced.
        let (a, b, c) = (f.x(8.0), f.x(16.0), f.x(32.0));
        assert!(((b - a) - (c - b)).abs() < 0.01);
        let lin = Frame::new(&[100.0, 200.0, 400.0], 1.0);
        assert!(!lin.log_x && lin.x(0.0) == M.0);
    }
}
