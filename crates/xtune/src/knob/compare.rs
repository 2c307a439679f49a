//! [`compare`]: a value read back judged by the meaning the profile wants.

use super::{Comparison, Current, Desired, Target, Wanted};
use crate::cpuset::CpuSet;
use crate::fs::trim_value;

/// Judges `current` against `desired` by meaning. Pure.
pub fn compare(desired: &Desired, current: &Current) -> Comparison {
    match (&desired.wanted, current) {
        (
            Wanted::Nofile {
                wanted,
                own,
                nr_open,
            },
            _,
        ) => nofile_advice(*wanted, *own, *nr_open),
        (Wanted::NicAdvice { wanted, reason }, _) => Comparison {
            matches: false,
            actual: "-".into(),
            wanted: wanted.clone(),
            reason: reason.clone(),
        },
        (wanted, _) if matches!(desired.target, Target::Unavailable { .. }) => {
            let reason = match &desired.target {
                Target::Unavailable { reason } => reason.clone(),
                _ => String::new(),
            };
            Comparison {
                matches: true,
                actual: "-".into(),
                wanted: wanted_text(wanted),
                reason,
            }
        }
        (Wanted::Stopped, Current::Service(procs)) => Comparison {
            matches: procs.is_empty(),
            actual: if procs.is_empty() {
                "not running".into()
            } else {
                format!(
                    "running (pid {})",
                    procs
                        .iter()
                        .map(|p| p.pid.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            wanted: "not running".into(),
            reason: String::new(),
        },
        (Wanted::BannedCpus(set), Current::Config(content)) => {
            let actual = content.as_deref().and_then(banned_cpulist);
            let parsed = actual.as_deref().map(CpuSet::parse_list);
            let (matches, actual_text, reason) = match parsed {
                None => (false, "unset".to_string(), String::new()),
                Some(Ok(a)) => (a == *set, a.to_string(), String::new()),
                Some(Err(e)) => (false, actual.unwrap_or_default(), e.to_string()),
            };
            Comparison {
                matches,
                actual: actual_text,
                wanted: set.to_string(),
                reason,
            }
        }
        (wanted, Current::File { raw, effective }) => match raw {
            Err(e) => Comparison {
                matches: false,
                actual: format!("unreadable: {}", e.errno_name()),
                wanted: wanted_text(wanted),
                reason: e.to_string(),
            },
            Ok(raw) => compare_value(wanted, trim_value(raw), effective.as_deref()),
        },
        (wanted, _) => Comparison {
            matches: false,
            actual: "-".into(),
            wanted: wanted_text(wanted),
            reason: "no value read".into(),
        },
    }
}

/// An integer as the kernel's sysctl parser reads it (`strtoul` base 0):
/// `0x` hex, a leading `0` octal, else decimal, with an optional sign.
fn kernel_int(s: &str) -> Option<i128> {
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let v = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        i128::from_str_radix(hex, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        if !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return None;
        }
        i128::from_str_radix(digits, 8).ok()?
    } else {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// Compares one value read from a kernel file with what it must mean.
pub fn compare_value(wanted: &Wanted, actual: &str, effective: Option<&str>) -> Comparison {
    let wanted_display = wanted_text(wanted);
    match wanted {
        Wanted::Exact(w) => {
            let a = actual.trim();
            Comparison {
                matches: a == w.trim(),
                actual: a.to_string(),
                wanted: w.clone(),
                reason: String::new(),
            }
        }
        Wanted::Meant { value, meaning } => {
            let a = actual.trim();
            Comparison {
                matches: a == value.trim(),
                actual: a.to_string(),
                wanted: value.clone(),
                reason: meaning.clone(),
            }
        }
        Wanted::Words(w) => compare_words(w, actual, wanted_display),
        Wanted::Cpus { set, keep, hex } => {
            compare_cpus(set, keep, *hex, actual, effective, wanted_display)
        }
        Wanted::PowerOfTwo(n) => compare_pow2(*n, actual, wanted_display),
        Wanted::Ports(set) => match port_set(actual.trim()) {
            Some(a) => Comparison {
                matches: a == *set,
                actual: port_text(&a),
                wanted: wanted_display,
                reason: String::new(),
            },
            None => Comparison {
                matches: false,
                actual: actual.trim().to_string(),
                wanted: wanted_display,
                reason: "not a port list".into(),
            },
        },
        Wanted::Names(names) => {
            let a = name_set(actual);
            let matches = a == *names;
            let read = actual.split_whitespace().collect::<Vec<_>>().join(" ");
            let reason = if matches && read != names.join(" ") {
                "same names (the kernel lists them in its own order)".to_string()
            } else {
                String::new()
            };
            Comparison {
                matches,
                actual: read,
                wanted: wanted_display,
                reason,
            }
        }
        Wanted::Stopped
        | Wanted::BannedCpus(_)
        | Wanted::Nofile { .. }
        | Wanted::NicAdvice { .. } => Comparison {
            matches: actual.trim() == wanted_display.trim(),
            actual: actual.trim().to_string(),
            wanted: wanted_display,
            reason: String::new(),
        },
    }
}

/// Whitespace-separated elements, integers compared as numbers.
fn compare_words(w: &[String], actual: &str, wanted_display: String) -> Comparison {
    let a: Vec<&str> = actual.split_whitespace().collect();
    let matches = a.len() == w.len()
        && a.iter()
            .zip(w)
            // Read: the kernel prints decimal. Wanted: as the kernel parses a write.
            .all(|(x, y)| match (x.parse::<i128>().ok(), kernel_int(y)) {
                (Some(p), Some(q)) => p == q,
                _ => *x == y.as_str(),
            });
    let display = a.join(" ");
    let reason = if matches && display != actual.trim() {
        "same elements (kernel separates with tabs)".to_string()
    } else if !matches && a.len() != w.len() {
        format!("{} elements, wanted {}", a.len(), w.len())
    } else {
        String::new()
    };
    Comparison {
        matches,
        actual: display,
        wanted: wanted_display,
        reason,
    }
}

/// A CPU set (hex mask or list), both sides cut to the CPUs the kernel
/// keeps; an IRQ's effective affinity is shown beside it.
fn compare_cpus(
    set: &CpuSet,
    keep: &CpuSet,
    hex: bool,
    actual: &str,
    effective: Option<&str>,
    wanted_display: String,
) -> Comparison {
    let parsed = if hex {
        CpuSet::parse_hex_mask(actual)
    } else {
        CpuSet::parse_list(actual)
    };
    let a = match parsed {
        Ok(a) => a,
        Err(e) => {
            return Comparison {
                matches: false,
                actual: actual.trim().to_string(),
                wanted: wanted_display,
                reason: e.to_string(),
            }
        }
    };
    let want_kept = set.intersection(keep);
    let matches = want_kept == a.intersection(keep);
    let dropped = set.difference(keep);
    let mut reason = Vec::new();
    if !dropped.is_empty() {
        reason.push(format!(
            "CPUs {dropped} offline or isolated: the kernel leaves them out"
        ));
    }
    if let Some(Ok(e)) = effective.map(|eff| CpuSet::parse_list(trim_value(eff))) {
        if matches && !e.is_empty() && !e.is_subset(&want_kept) {
            // x86 moves an interrupt from its own handler: the
            // effective target follows at the next interrupt.
            reason.push(format!("effective {e} until the interrupt next fires"));
        } else {
            reason.push(format!("effective {e}"));
        }
    }
    Comparison {
        matches,
        actual: if hex {
            format!("{} ({})", actual.trim(), a)
        } else {
            a.to_string()
        },
        wanted: wanted_display,
        reason: reason.join("; "),
    }
}

/// An integer the kernel rounds up to a power of two.
fn compare_pow2(n: u64, actual: &str, wanted_display: String) -> Comparison {
    let expect = round_pow2(n);
    match actual.trim().parse::<u64>() {
        Ok(a) => Comparison {
            matches: a == expect,
            actual: a.to_string(),
            wanted: wanted_display,
            reason: if expect != n && a == expect {
                format!("kernel rounds {n} up to {expect}")
            } else if expect != n {
                format!("kernel stores {n} as {expect}")
            } else {
                String::new()
            },
        },
        Err(_) => Comparison {
            matches: false,
            actual: actual.trim().to_string(),
            wanted: wanted_display,
            reason: "not an integer".into(),
        },
    }
}

/// What the kernel stores for a flow table size: the next power of two (0 stays 0).
pub fn round_pow2(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        n.checked_next_power_of_two().unwrap_or(u64::MAX)
    }
}

/// Display form of a wanted value.
pub fn wanted_text(w: &Wanted) -> String {
    match w {
        Wanted::Exact(s) => s.clone(),
        Wanted::Meant { value, .. } => value.clone(),
        Wanted::NicAdvice { wanted, .. } => wanted.clone(),
        Wanted::Words(ws) => ws.join(" "),
        Wanted::Cpus { set, keep, .. } => {
            let kept = set.intersection(keep);
            if kept.is_empty() {
                "none".into()
            } else {
                kept.to_string()
            }
        }
        Wanted::PowerOfTwo(n) => {
            let r = round_pow2(*n);
            if r == *n {
                n.to_string()
            } else {
                format!("{n} (={r})")
            }
        }
        Wanted::Ports(set) => port_text(set),
        Wanted::Names(names) => names.join(" "),
        Wanted::Stopped => "not running".into(),
        Wanted::BannedCpus(s) => s.to_string(),
        Wanted::Nofile { wanted, .. } => format!(">= {wanted}"),
    }
}

fn nofile_advice(wanted: u64, own: Option<(u64, u64)>, nr_open: Option<u64>) -> Comparison {
    let mut reason = format!(
        "a tool cannot raise another process's limit: run `ulimit -n {wanted}` in the shell that starts the load generator, or set LimitNOFILE={wanted} in its systemd unit"
    );
    if let Some(max) = nr_open {
        if wanted > max {
            reason.push_str(&format!(
                "; {wanted} is above fs.nr_open ({max}): add fs.nr_open = {wanted} to [sysctl] first"
            ));
        }
    }
    let (matches, actual) = match own {
        Some((soft, hard)) => (soft >= wanted, format!("soft {soft}, hard {hard}")),
        None => (false, "unknown".into()),
    };
    Comparison {
        matches,
        actual,
        wanted: format!(">= {wanted}"),
        reason,
    }
}

/// The `IRQBALANCE_BANNED_CPULIST` value in an irqbalance environment file.
pub fn banned_cpulist(content: &str) -> Option<String> {
    content.lines().rev().find_map(|l| {
        let l = l.trim();
        let l = l.strip_prefix("export ").unwrap_or(l);
        l.strip_prefix("IRQBALANCE_BANNED_CPULIST=")
            .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
    })
}

/// `content` with `IRQBALANCE_BANNED_CPULIST` set to `cpus` (replacing the
/// existing assignment, or appended).
pub fn with_banned_cpulist(content: Option<&str>, cpus: &CpuSet) -> String {
    let line = format!("IRQBALANCE_BANNED_CPULIST={}", cpus.to_list());
    let mut out = String::new();
    let mut replaced = false;
    for l in content.unwrap_or("").lines() {
        let t = l.trim();
        let t = t.strip_prefix("export ").unwrap_or(t);
        if t.starts_with("IRQBALANCE_BANNED_CPULIST=") {
            if !replaced {
                out.push_str(&line);
                out.push('\n');
                replaced = true;
            }
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !replaced {
        out.push_str("# set by xtune\n");
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A port set as the kernel reads one (`8080,9000-9010`; empty is none):
/// sorted, merged ranges, or None when it is not one.
pub(super) fn port_set(s: &str) -> Option<Vec<(u32, u32)>> {
    let mut ranges = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let p: u32 = part.parse().ok()?;
                (p, p)
            }
        };
        if a > b || b > 65_535 {
            return None;
        }
        ranges.push((a, b));
    }
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Some(merged)
}

fn port_text(set: &[(u32, u32)]) -> String {
    let parts: Vec<String> = set
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    parts.join(",")
}

pub(super) fn name_set(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.split_whitespace().map(str::to_string).collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn cpus(s: &str, keep: &str) -> Wanted {
        Wanted::Cpus {
            set: set(s),
            keep: set(keep),
            hex: true,
        }
    }

    #[test]
    fn verify_by_meaning_table() {
        // (wanted, value read back, matches)
        let words = |s: &str| Wanted::Words(s.split_whitespace().map(str::to_string).collect());
        let table: Vec<(Wanted, &str, bool)> = vec![
            // CPU masks: hex with and without comma groups, the meaning is the set.
            (cpus("0-7", "0-63"), "ff\n", true),
            (cpus("0-7", "0-63"), "00000000,000000ff\n", true),
            (cpus("0-7", "0-63"), "000000ff", true),
            (cpus("32", "0-63"), "00000001,00000000", true),
            (cpus("0-7", "0-63"), "7f", false),
            (cpus("0-1", "0-1"), "3", true),
            (cpus("0", "0-1"), "3", false),
            // CPUs the kernel drops (offline, isolated) do not count.
            (cpus("0-3", "0-1"), "3", true),
            (cpus("0-3", "0-1"), "1", false),
            // Empty mask.
            (cpus("", "0-1"), "0", true),
            (cpus("", "0-7"), "00000000,00000000", true),
            (
                Wanted::Cpus {
                    set: set("0-3,6"),
                    keep: set("0-7"),
                    hex: false,
                },
                "0-3,6\n",
                true,
            ),
            (
                Wanted::Cpus {
                    set: set("0-3"),
                    keep: set("0-7"),
                    hex: false,
                },
                "0,1,2,3",
                true,
            ),
            // Vector sysctls: tabs vs spaces, element by element.
            (
                words("4096 131072 6291456"),
                "4096\t131072\t6291456\n",
                true,
            ),
            (words("4096 131072 6291456"), "4096 131072 6291456", true),
            (words("1024 65535"), "1024\t65535\n", true),
            (words("1024 65535"), "1024\t65534\n", false),
            (words("1024 65535"), "1024\n", false),
            (words("4096"), "04096\n", true),
            // Integers written in another base, as the kernel parses them.
            (words("0x2000"), "8192\n", true),
            (words("0X2000"), "8192\n", true),
            (words("0755"), "493\n", true),
            (words("0755"), "755\n", false),
            (words("-0x10"), "-16\n", true),
            (words("0x"), "0\n", false),
            (words("08"), "8\n", false),
            (words("0"), "0\n", true),
            (words("bbr"), "bbr\n", true),
            (words("bbr"), "cubic\n", false),
            // Power-of-two rounding of flow tables.
            (Wanted::PowerOfTwo(1000), "1024\n", true),
            (Wanted::PowerOfTwo(1000), "1000\n", false),
            (Wanted::PowerOfTwo(32768), "32768\n", true),
            (Wanted::PowerOfTwo(32769), "65536\n", true),
            (Wanted::PowerOfTwo(0), "0\n", true),
            (Wanted::PowerOfTwo(1), "1\n", true),
            // Port sets: as the kernel prints them, sorted and merged.
            (
                Wanted::Ports(port_set("9000-9010,8080").unwrap()),
                "8080,9000-9010\n",
                true,
            ),
            (
                Wanted::Ports(port_set("8080,8081").unwrap()),
                "8080-8081\n",
                true,
            ),
            (
                Wanted::Ports(port_set("8080,8082").unwrap()),
                "8080-8082\n",
                false,
            ),
            (Wanted::Ports(port_set("8080").unwrap()), "\n", false),
            (Wanted::Ports(port_set("").unwrap()), "\n", true),
            // Name sets: in any order.
            (
                Wanted::Names(name_set("cubic reno bbr")),
                "reno cubic bbr\n",
                true,
            ),
            (
                Wanted::Names(name_set("cubic reno")),
                "reno cubic bbr\n",
                false,
            ),
            // Exact sysfs values ignore the trailing newline only.
            (Wanted::Exact("performance".into()), "performance\n", true),
            (Wanted::Exact("performance".into()), "powersave\n", false),
        ];
        for (wanted, actual, expect) in table {
            let c = compare_value(&wanted, actual, None);
            assert_eq!(c.matches, expect, "{wanted:?} vs {actual:?}: {c:?}");
        }
    }

    #[test]
    fn rounding_and_filtering_are_explained_in_the_reason() {
        let c = compare_value(&Wanted::PowerOfTwo(1000), "1024\n", None);
        assert_eq!(c.reason, "kernel rounds 1000 up to 1024");
        let c = compare_value(&cpus("0-3", "0-1"), "3\n", Some("1\n"));
        assert!(c.matches);
        assert_eq!(c.actual, "3 (0-1)");
        assert!(
            c.reason.contains("CPUs 2-3 offline or isolated"),
            "{}",
            c.reason
        );
        assert!(c.reason.contains("effective 1"), "{}", c.reason);
        // Affinity written (CPU 0) but the interrupt has not fired since: the
        // effective target is still CPU 1. The mask means what was wanted.
        let c = compare_value(&cpus("0", "0-1"), "1\n", Some("1\n"));
        assert!(c.matches);
        assert_eq!(c.reason, "effective 1 until the interrupt next fires");
    }

    #[test]
    fn banned_cpulist_is_replaced_in_place_or_appended() {
        let before =
            "# irqbalance\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=\"3\"\nOPTIONS=x\n";
        let after = with_banned_cpulist(Some(before), &set("0-1"));
        assert_eq!(
            after,
            "# irqbalance\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=0-1\nOPTIONS=x\n"
        );
        assert_eq!(banned_cpulist(before).as_deref(), Some("3"));
        let fresh = with_banned_cpulist(None, &set("2"));
        assert_eq!(banned_cpulist(&fresh).as_deref(), Some("2"));
    }

    #[test]
    fn list_sysctls_are_wanted_as_sets() {
        assert_eq!(
            port_set("9000-9010, 8080,9005"),
            Some(vec![(8080, 8080), (9000, 9010)])
        );
        assert_eq!(port_set("10-5"), None);
        assert_eq!(port_set("70000"), None);
        assert_eq!(port_set("x"), None);
        assert_eq!(port_text(&port_set("1,2,3,5").unwrap()), "1-3,5");
    }
}
