//! `/proc/net/snmp` and `/proc/net/netstat`: header/value line pairs.

use serde::{Deserialize, Serialize};

use super::parse_i64;
use crate::error::{ParseErrorKind, ProbeError};

/// One `Prefix:` table: the names of its header line with the values of the line after.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnmpRow {
    /// `Tcp`, `Udp`, `TcpExt`, `IpExt`, ...
    pub prefix: String,
    /// (name, value) in file order. Values are signed (`Tcp: MaxConn` is -1).
    pub pairs: Vec<(String, i64)>,
}

impl SnmpRow {
    /// The value of `name`, if this kernel prints it.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.pairs.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

/// Parses the header/value line pairs of /proc/net/snmp or /proc/net/netstat. `what`
/// names the file in errors. Every header line must be followed by a value line with
/// the same prefix and as many values as names.
pub fn parse_snmp_table(what: &'static str, text: &str) -> Result<Vec<SnmpRow>, ProbeError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut rows = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let header = lines.get(i).copied().unwrap_or_default();
        let line_no = i + 1;
        if header.trim().is_empty() {
            i += 1;
            continue;
        }
        let (prefix, names) = split_prefix(what, line_no, header)?;
        let Some(values_line) = lines.get(i + 1).copied() else {
            return Err(ProbeError::parse(
                what,
                line_no,
                ParseErrorKind::UnpairedHeader(prefix.into()),
            ));
        };
        let (vprefix, values) = split_prefix(what, line_no + 1, values_line)?;
        if vprefix != prefix {
            return Err(ProbeError::parse(
                what,
                line_no + 1,
                ParseErrorKind::UnpairedHeader(prefix.into()),
            ));
        }
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        if names.len() != values.len() || names.is_empty() {
            return Err(ProbeError::parse(
                what,
                line_no + 1,
                ParseErrorKind::CountMismatch {
                    prefix: prefix.into(),
                    names: names.len(),
                    values: values.len(),
                },
            ));
        }
        let mut pairs = Vec::with_capacity(names.len());
        for (name, value) in names.iter().zip(&values) {
            pairs.push(((*name).to_owned(), parse_i64(what, line_no + 1, value)?));
        }
        rows.push(SnmpRow {
            prefix: prefix.to_owned(),
            pairs,
        });
        i += 2;
    }
    if rows.is_empty() {
        return Err(ProbeError::parse(what, 0, ParseErrorKind::Empty));
    }
    Ok(rows)
}

fn split_prefix<'a>(
    what: &'static str,
    line_no: usize,
    line: &'a str,
) -> Result<(&'a str, &'a str), ProbeError> {
    let (prefix, rest) = line.split_once(':').ok_or_else(|| {
        ProbeError::parse(what, line_no, ParseErrorKind::BadLine(line.trim().into()))
    })?;
    if prefix.is_empty() || prefix.contains(char::is_whitespace) {
        return Err(ProbeError::parse(
            what,
            line_no,
            ParseErrorKind::BadLine(line.trim().into()),
        ));
    }
    Ok((prefix, rest))
}

/// TCP counters that tell a saturated client or server apart from a slow one.
///
/// All are cumulative counters since boot (per network namespace) except `curr_estab`,
/// a gauge. `None` means this kernel does not print the counter (e.g. `InCsumErrors` and
/// `TCPSynRetrans` appeared in 3.10).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpCounters {
    /// Tcp ActiveOpens: connect() calls that sent a SYN.
    pub active_opens: Option<u64>,
    /// Tcp PassiveOpens: connections accepted from a listener's SYN queue.
    pub passive_opens: Option<u64>,
    /// Tcp AttemptFails: connection attempts that failed (RST in SYN-SENT, ...).
    pub attempt_fails: Option<u64>,
    /// Tcp EstabResets: established connections reset.
    pub estab_resets: Option<u64>,
    /// Tcp CurrEstab: connections now ESTABLISHED or CLOSE-WAIT (a gauge).
    pub curr_estab: Option<u64>,
    /// Tcp InSegs: segments received.
    pub in_segs: Option<u64>,
    /// Tcp OutSegs: segments sent.
    pub out_segs: Option<u64>,
    /// Tcp RetransSegs: segments retransmitted.
    pub retrans_segs: Option<u64>,
    /// Tcp OutRsts: RST segments sent.
    pub out_rsts: Option<u64>,
    /// TcpExt ListenOverflows: a listener's accept queue was full.
    pub listen_overflows: Option<u64>,
    /// TcpExt ListenDrops: SYNs dropped at a listener (includes overflows).
    pub listen_drops: Option<u64>,
    /// TcpExt TCPTimeouts: retransmission timer expiries.
    pub tcp_timeouts: Option<u64>,
    /// TcpExt TCPSynRetrans: SYN and SYN-ACK retransmits.
    pub tcp_syn_retrans: Option<u64>,
    /// TcpExt RcvPruned: segments dropped from a receive queue over its buffer.
    #[serde(default)]
    pub rcv_pruned: Option<u64>,
}

impl TcpCounters {
    /// The cumulative counters by their kernel names (the gauge `CurrEstab` excluded).
    pub fn counters(&self) -> [(&'static str, Option<u64>); 13] {
        [
            ("ActiveOpens", self.active_opens),
            ("PassiveOpens", self.passive_opens),
            ("AttemptFails", self.attempt_fails),
            ("EstabResets", self.estab_resets),
            ("InSegs", self.in_segs),
            ("OutSegs", self.out_segs),
            ("RetransSegs", self.retrans_segs),
            ("OutRsts", self.out_rsts),
            ("ListenOverflows", self.listen_overflows),
            ("ListenDrops", self.listen_drops),
            ("TCPTimeouts", self.tcp_timeouts),
            ("TCPSynRetrans", self.tcp_syn_retrans),
            ("RcvPruned", self.rcv_pruned),
        ]
    }
}

/// Picks the [`TcpCounters`] out of parsed /proc/net/snmp and /proc/net/netstat tables.
/// The `Tcp` table is required; a counter with a negative value is an error.
pub fn tcp_counters(snmp: &[SnmpRow], netstat: &[SnmpRow]) -> Result<TcpCounters, ProbeError> {
    const SNMP: &str = "/proc/net/snmp";
    const NETSTAT: &str = "/proc/net/netstat";
    let tcp = snmp
        .iter()
        .find(|r| r.prefix == "Tcp")
        .ok_or_else(|| ProbeError::parse(SNMP, 0, ParseErrorKind::MissingField("Tcp")))?;
    let ext = netstat.iter().find(|r| r.prefix == "TcpExt");
    let counter = |what: &'static str,
                   row: Option<&SnmpRow>,
                   name: &str|
     -> Result<Option<u64>, ProbeError> {
        match row.and_then(|r| r.get(name)) {
            None => Ok(None),
            Some(v) => u64::try_from(v).map(Some).map_err(|_| {
                ProbeError::parse(what, 0, ParseErrorKind::OutOfRange(format!("{name} = {v}")))
            }),
        }
    };
    Ok(TcpCounters {
        active_opens: counter(SNMP, Some(tcp), "ActiveOpens")?,
        passive_opens: counter(SNMP, Some(tcp), "PassiveOpens")?,
        attempt_fails: counter(SNMP, Some(tcp), "AttemptFails")?,
        estab_resets: counter(SNMP, Some(tcp), "EstabResets")?,
        curr_estab: counter(SNMP, Some(tcp), "CurrEstab")?,
        in_segs: counter(SNMP, Some(tcp), "InSegs")?,
        out_segs: counter(SNMP, Some(tcp), "OutSegs")?,
        retrans_segs: counter(SNMP, Some(tcp), "RetransSegs")?,
        out_rsts: counter(SNMP, Some(tcp), "OutRsts")?,
        listen_overflows: counter(NETSTAT, ext, "ListenOverflows")?,
        listen_drops: counter(NETSTAT, ext, "ListenDrops")?,
        tcp_timeouts: counter(NETSTAT, ext, "TCPTimeouts")?,
        tcp_syn_retrans: counter(NETSTAT, ext, "TCPSynRetrans")?,
        rcv_pruned: counter(NETSTAT, ext, "RcvPruned")?,
    })
}
