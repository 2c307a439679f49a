//! Where a knob lives, derived from its identity alone: a snapshot read
//! back from disk says which knob each entry saved and where, and rollback
//! (run as root) writes only where the identity says, never where an edited
//! file points.

use crate::ethtool::Group;
use crate::host::{governor_path, sysctl_path, IRQBALANCE_CONFIGS};
use crate::profile::NIC_KNOBS;

/// Where a knob identity says its value lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A kernel file (sysctl, IRQ affinity, RPS/XPS/RFS, NIC, governor).
    File(String),
    /// irqbalance's environment file: one of [`IRQBALANCE_CONFIGS`].
    IrqbalanceConfig,
    /// The irqbalance service (no file).
    IrqbalanceService,
}

/// The place of `knob` (`sysctl:net.core.somaxconn`, `rps:eth0:rx-0`, …),
/// or why the identity names none: an unknown kind, a device or queue name
/// the kernel would not give, or a sysctl name that leaves `/proc/sys`.
pub fn place_of(knob: &str) -> Result<Place, String> {
    let bad = |why: &str| Err(format!("`{knob}` is not a knob xtune writes ({why})"));
    let Some((kind, rest)) = knob.split_once(':') else {
        return bad("no `kind:` prefix");
    };
    let file = match kind {
        "sysctl" => {
            let path = sysctl_path(rest);
            let inside = path.strip_prefix("/proc/sys/").unwrap_or_default();
            if !plain_components(inside) {
                return bad("a sysctl name with an empty, `.` or `..` part");
            }
            path
        }
        "irq" if number(rest) => format!("/proc/irq/{rest}/smp_affinity"),
        "governor" => match rest.strip_prefix("cpu").filter(|n| number(n)) {
            Some(n) => match n.parse() {
                Ok(cpu) => governor_path(cpu),
                Err(_) => return bad("a CPU number out of range"),
            },
            None => return bad("not `governor:cpuN`"),
        },
        "rps" | "xps" | "rfs" | "nic" => {
            let Some((dev, last)) = rest.split_once(':') else {
                return bad("not `KIND:DEV:...`");
            };
            if !device_name(dev) {
                return bad("not a network device name");
            }
            let queue = |prefix: &str, file: &str| {
                let ok = last.strip_prefix(prefix).is_some_and(number);
                ok.then(|| format!("/sys/class/net/{dev}/queues/{last}/{file}"))
            };
            let path = match kind {
                "rps" => queue("rx-", "rps_cpus"),
                "xps" => queue("tx-", "xps_cpus"),
                "rfs" => queue("rx-", "rps_flow_cnt"),
                _ => match last.split_once('.') {
                    Some((group, field)) => ethtool_place(dev, group, field),
                    None => NIC_KNOBS
                        .iter()
                        .find(|k| k.key == last)
                        .map(|k| format!("/sys/class/net/{dev}/{}", k.file)),
                },
            };
            match path {
                Some(p) => p,
                None => return bad("no such queue or device setting"),
            }
        }
        "irqbalance" if rest == "banned_cpus" => return Ok(Place::IrqbalanceConfig),
        "irqbalance" if rest == "service" => return Ok(Place::IrqbalanceService),
        _ => return bad("unknown kind"),
    };
    Ok(Place::File(file))
}

/// `nic:DEV:GROUP.FIELD`: the ethtool door's pseudo-path, for a field the
/// group has or a feature name of letters, digits and dashes.
fn ethtool_place(dev: &str, group: &str, field: &str) -> Option<String> {
    let group = Group::from_name(group)?;
    let ok = match group {
        Group::Features => {
            !field.is_empty()
                && field
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }
        Group::Rss if field == "equal" => return Some(crate::ethtool::path(dev, group, "indir")),
        Group::Rss => crate::ethtool::flow_attr(field).is_some(),
        g => g.fields().iter().any(|f| f.name == field),
    };
    ok.then(|| crate::ethtool::path(dev, group, field))
}

/// Whether `path` is where a [`Place::IrqbalanceConfig`] lives.
pub fn is_irqbalance_config(path: &str) -> bool {
    IRQBALANCE_CONFIGS.contains(&path)
}

/// Decimal digits, at least one.
fn number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A name the kernel accepts for a network device (`dev_valid_name`): 1 to
/// 15 bytes, not `.` or `..`, no `/`, `:` or whitespace.
fn device_name(s: &str) -> bool {
    (1..16).contains(&s.len())
        && s != "."
        && s != ".."
        && !s
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
}

/// Every `/`-separated part is a plain name: not empty, `.` or `..`, no NUL.
fn plain_components(path: &str) -> bool {
    path.split('/')
        .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_name_their_kernel_files() {
        for (knob, path) in [
            (
                "sysctl:net.ipv4.tcp_fin_timeout",
                "/proc/sys/net/ipv4/tcp_fin_timeout",
            ),
            (
                "sysctl:net.ipv4.conf.eth0/100.rp_filter",
                "/proc/sys/net/ipv4/conf/eth0.100/rp_filter",
            ),
            ("irq:38", "/proc/irq/38/smp_affinity"),
            (
                "governor:cpu3",
                "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
            ),
            ("rps:eth0:rx-0", "/sys/class/net/eth0/queues/rx-0/rps_cpus"),
            ("xps:eth0:tx-2", "/sys/class/net/eth0/queues/tx-2/xps_cpus"),
            (
                "rfs:eth0:rx-1",
                "/sys/class/net/eth0/queues/rx-1/rps_flow_cnt",
            ),
            ("nic:eth0:txqueuelen", "/sys/class/net/eth0/tx_queue_len"),
            (
                "nic:eth0:channels.combined",
                "ethtool:eth0/channels/combined",
            ),
            ("nic:eth0:ring.rx", "ethtool:eth0/ring/rx"),
            (
                "nic:eth0:coalesce.adaptive_rx",
                "ethtool:eth0/coalesce/adaptive_rx",
            ),
            ("nic:eth0:features.rx-gro", "ethtool:eth0/features/rx-gro"),
        ] {
            assert_eq!(place_of(knob), Ok(Place::File(path.into())), "{knob}");
        }
        assert_eq!(
            place_of("irqbalance:banned_cpus"),
            Ok(Place::IrqbalanceConfig)
        );
        assert_eq!(place_of("irqbalance:service"), Ok(Place::IrqbalanceService));
    }

    #[test]
    fn identities_that_would_leave_their_directory_name_no_place() {
        for knob in [
            "sysctl:net.//.//.//.etc.passwd",
            "sysctl:net..core",
            "sysctl:",
            "sysctl:./",
            "irq:38/../../etc",
            "irq:",
            "governor:cpu1/..",
            "rps:..:rx-0",
            "rps:eth0:rx-0/../../x",
            "rps:eth0:tx-0",
            "xps:eth0:rx-0",
            "nic:eth0:../../x",
            "nic:a/b:txqueuelen",
            "nic:eth0:channels.nope",
            "nic:eth0:features.../x",
            "nic:eth0:features.",
            "nic:eth0:nope.rx",
            "limits:nofile",
            "irqbalance:other",
            "somaxconn",
        ] {
            assert!(place_of(knob).is_err(), "{knob}");
        }
    }
}
