//! The NIC's own settings (channels, RSS, rings, interrupt coalescing,
//! offload features) through the kernel's ethtool generic-netlink family:
//! the one module that owns the encoding.
//!
//! The rest of xtune sees these settings as files behind the [`Fs`](crate::fs::Fs)
//! door, so the snapshot, the transaction and rollback treat them as every
//! other knob: `ethtool:DEV/GROUP` reads a whole group (`rx 4\ntx 4\nmax_rx 4\n…`),
//! `ethtool:DEV/GROUP/FIELD` one value, and a write of `ethtool:DEV/GROUP/FIELD`
//! sets that one field (`CHANNELS_SET` with one attribute; the kernel keeps the
//! others). A feature reads `on`, `off`, or `off (requested on)` when the
//! kernel holds it off against the request (a dependency); writing that text
//! back requests `on`, so a rollback restores the request exactly.
//!
//! RSS (`ETHTOOL_MSG_RSS_GET/SET`, the SET since Linux 6.17) has two kinds
//! of field: `ethtool:DEV/rss/indir` is the indirection table: `equal N`
//! when it spreads evenly over queues 0..N-1, else one queue number per
//! entry (`0 3 1 …`), and `default` when it is the driver's even spread
//! over the current rx channels (writing `default` resets it
//! and clears the kernel's user-configured mark, so a later channel change
//! re-spreads it as before); `ethtool:DEV/rss/hash_tcp4` (and the other flow
//! types of `ethtool -N rx-flow-hash`) is the header fields hashed, in
//! `ethtool`'s letters (`sdfn`, `none` for no field).
//!
//! [`wire`] is pure (message building and attribute parsing, unit-tested on
//! captured kernel replies); [`Ethtool`] is the socket.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::fs_error::FsError;

/// Prefix of the pseudo-paths the ethtool door answers.
pub const PREFIX: &str = "ethtool:";

/// The path of one setting (`ethtool:eth0/channels/combined`).
pub fn path(dev: &str, group: Group, field: &str) -> String {
    format!("{PREFIX}{dev}/{}/{field}", group.name())
}

/// The path of a whole group (`ethtool:eth0/ring`).
pub fn group_path(dev: &str, group: Group) -> String {
    format!("{PREFIX}{dev}/{}", group.name())
}

/// A group of settings, one pair of netlink GET/SET commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// `ethtool -l/-L`.
    Channels,
    /// `ethtool -x/-X` and `ethtool -n/-N rx-flow-hash`.
    Rss,
    /// `ethtool -g/-G`.
    Ring,
    /// `ethtool -c/-C`.
    Coalesce,
    /// `ethtool -k/-K`.
    Features,
}

impl Group {
    /// Every group, in write order (channels first: they change the
    /// queues RSS spreads over).
    pub const ALL: [Group; 5] = [
        Group::Channels,
        Group::Rss,
        Group::Ring,
        Group::Coalesce,
        Group::Features,
    ];

    /// Name in profiles, knob identities and pseudo-paths.
    pub fn name(self) -> &'static str {
        match self {
            Group::Channels => "channels",
            Group::Rss => "rss",
            Group::Ring => "ring",
            Group::Coalesce => "coalesce",
            Group::Features => "features",
        }
    }

    /// The group a name means.
    pub fn from_name(s: &str) -> Option<Group> {
        Group::ALL.into_iter().find(|g| g.name() == s)
    }

    /// `ethtool` option that shows it, for messages.
    pub fn cli(self) -> &'static str {
        match self {
            Group::Channels => "ethtool -l",
            Group::Rss => "ethtool -x",
            Group::Ring => "ethtool -g",
            Group::Coalesce => "ethtool -c",
            Group::Features => "ethtool -k",
        }
    }

    /// The numeric fields (not features) of the group.
    pub fn fields(self) -> &'static [Field] {
        match self {
            Group::Channels => CHANNEL_FIELDS,
            Group::Ring => RING_FIELDS,
            Group::Coalesce => COALESCE_FIELDS,
            Group::Rss | Group::Features => &[],
        }
    }

    fn get_cmd(self) -> u8 {
        match self {
            Group::Channels => wire::CHANNELS_GET,
            Group::Rss => wire::RSS_GET,
            Group::Ring => wire::RINGS_GET,
            Group::Coalesce => wire::COALESCE_GET,
            Group::Features => wire::FEATURES_GET,
        }
    }

    fn set_cmd(self) -> u8 {
        match self {
            Group::Channels => wire::CHANNELS_SET,
            Group::Rss => wire::RSS_SET,
            Group::Ring => wire::RINGS_SET,
            Group::Coalesce => wire::COALESCE_SET,
            Group::Features => wire::FEATURES_SET,
        }
    }
}

/// One numeric setting of a group: its name, netlink attribute, the
/// attribute of its pre-set maximum, and whether it is a u8 switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Name in profiles (`rx`, `rx_usecs`, `adaptive_rx`).
    pub name: &'static str,
    /// Attribute type of the value.
    pub attr: u16,
    /// Attribute type of the maximum, when the kernel reports one.
    pub max: Option<u16>,
    /// A u8 on/off (`adaptive_rx`), else a u32.
    pub switch: bool,
}

const fn num(name: &'static str, attr: u16, max: Option<u16>) -> Field {
    Field {
        name,
        attr,
        max,
        switch: false,
    }
}

/// `ETHTOOL_A_CHANNELS_*`.
pub const CHANNEL_FIELDS: &[Field] = &[
    num("rx", 6, Some(2)),
    num("tx", 7, Some(3)),
    num("other", 8, Some(4)),
    num("combined", 9, Some(5)),
];

/// `ETHTOOL_A_RINGS_*`.
pub const RING_FIELDS: &[Field] = &[
    num("rx", 6, Some(2)),
    num("rx_mini", 7, Some(3)),
    num("rx_jumbo", 8, Some(4)),
    num("tx", 9, Some(5)),
];

/// `ETHTOOL_A_COALESCE_*`.
pub const COALESCE_FIELDS: &[Field] = &[
    num("rx_usecs", 2, None),
    num("rx_frames", 3, None),
    num("rx_usecs_irq", 4, None),
    num("rx_frames_irq", 5, None),
    num("tx_usecs", 6, None),
    num("tx_frames", 7, None),
    num("tx_usecs_irq", 8, None),
    num("tx_frames_irq", 9, None),
    Field {
        name: "adaptive_rx",
        attr: 11,
        max: None,
        switch: true,
    },
    Field {
        name: "adaptive_tx",
        attr: 12,
        max: None,
        switch: true,
    },
];

/// One offload feature as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Feature {
    /// In force now.
    pub active: bool,
    /// Requested (the kernel may hold it off for a dependency).
    pub wanted: bool,
    /// The driver does not let it change (`[fixed]` in `ethtool -k`).
    pub fixed: bool,
}

impl Feature {
    /// The text of its pseudo-file: `on`, `off`, `off (requested on)`.
    pub fn text(&self) -> String {
        let word = |b: bool| if b { "on" } else { "off" };
        if self.active == self.wanted || self.fixed {
            word(self.active).to_string()
        } else {
            format!("{} (requested {})", word(self.active), word(self.wanted))
        }
    }
}

/// A group as read: numeric fields (`rx`, `max_rx`) or features by kernel name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupState {
    /// Fields the driver reports, and their maxima as `max_NAME`.
    pub values: BTreeMap<String, u64>,
    /// Features (the features group only).
    pub features: BTreeMap<String, Feature>,
    /// Settings that are text (RSS: `indir`, `hash_tcp4`), shown `name: text`.
    pub texts: BTreeMap<String, String>,
}

impl GroupState {
    /// The text of the group's pseudo-file: one `name value` line each.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.values {
            let _ = writeln!(s, "{k} {v}");
        }
        for (k, t) in &self.texts {
            let _ = writeln!(s, "{k}: {t}");
        }
        for (k, f) in &self.features {
            let _ = writeln!(
                s,
                "{k} {}{}",
                f.text(),
                if f.fixed { " [fixed]" } else { "" }
            );
        }
        s
    }

    /// Parses [`GroupState::text`] (the planner reads groups through `Fs`).
    pub fn parse(text: &str) -> GroupState {
        let mut g = GroupState::default();
        for line in text.lines() {
            let Some((k, rest)) = line.split_once(' ') else {
                continue;
            };
            if let Some(k) = k.strip_suffix(':') {
                g.texts.insert(k.to_string(), rest.trim().to_string());
                continue;
            }
            if let Ok(n) = rest.trim().parse() {
                g.values.insert(k.to_string(), n);
                continue;
            }
            let active = rest.starts_with("on");
            let wanted = if rest.contains("(requested on)") {
                true
            } else if rest.contains("(requested off)") {
                false
            } else {
                active
            };
            g.features.insert(
                k.to_string(),
                Feature {
                    active,
                    wanted,
                    fixed: rest.ends_with("[fixed]"),
                },
            );
        }
        g
    }
}

/// Profile names of offloads: the short `ethtool -K` names and the long
/// names `ethtool -k` prints, each with the kernel features it stands for.
/// Any other name is taken as a kernel feature name (`rx-udp-gro-forwarding`).
pub const FEATURE_ALIASES: &[(&str, &[&str])] = &[
    ("gro", &["rx-gro"]),
    ("generic-receive-offload", &["rx-gro"]),
    ("gso", &["tx-generic-segmentation"]),
    ("generic-segmentation-offload", &["tx-generic-segmentation"]),
    ("tso", TSO),
    ("tcp-segmentation-offload", TSO),
    ("lro", &["rx-lro"]),
    ("large-receive-offload", &["rx-lro"]),
    ("rx_gro_hw", &["rx-gro-hw"]),
    ("ntuple", &["rx-ntuple-filter"]),
    ("ntuple-filters", &["rx-ntuple-filter"]),
    ("rx", &["rx-checksum"]),
    ("rx-checksumming", &["rx-checksum"]),
    ("tx", TX_CSUM),
    ("tx-checksumming", TX_CSUM),
    ("sg", &["tx-scatter-gather"]),
    ("scatter-gather", &["tx-scatter-gather"]),
    ("rxhash", &["rx-hashing"]),
    ("receive-hashing", &["rx-hashing"]),
    ("rxvlan", &["rx-vlan-hw-parse"]),
    ("txvlan", &["tx-vlan-hw-insert"]),
];

const TSO: &[&str] = &[
    "tx-tcp-segmentation",
    "tx-tcp-ecn-segmentation",
    "tx-tcp-mangleid-segmentation",
    "tx-tcp6-segmentation",
    "tx-tcp-accecn-segmentation",
];

const TX_CSUM: &[&str] = &[
    "tx-checksum-ipv4",
    "tx-checksum-ip-generic",
    "tx-checksum-ipv6",
    "tx-checksum-fcoe-crc",
    "tx-checksum-sctp",
];

/// The kernel features a profile name stands for (`_` read as `-`).
pub fn kernel_features(name: &str) -> Vec<String> {
    let dashed = name.replace('_', "-");
    FEATURE_ALIASES
        .iter()
        .find(|(a, _)| *a == name || *a == dashed)
        .map(|(_, f)| f.iter().map(|s| s.to_string()).collect())
        .unwrap_or_else(|| vec![dashed])
}

/// Flow types of `ethtool -N DEV rx-flow-hash TYPE` and their
/// `ETHTOOL_A_FLOW_*` attribute in `ETHTOOL_A_RSS_FLOW_HASH`; a profile and
/// the pseudo-path name one `hash_TYPE`.
pub const FLOW_TYPES: &[(&str, u16)] = &[
    ("ether", 1),
    ("ip4", 2),
    ("ip6", 3),
    ("tcp4", 4),
    ("tcp6", 5),
    ("udp4", 6),
    ("udp6", 7),
    ("sctp4", 8),
    ("sctp6", 9),
    ("ah4", 10),
    ("ah6", 11),
    ("esp4", 12),
    ("esp6", 13),
];

/// The `ETHTOOL_A_FLOW_*` attribute of an RSS field `hash_TYPE`.
pub fn flow_attr(field: &str) -> Option<u16> {
    let ty = field.strip_prefix("hash_")?;
    FLOW_TYPES.iter().find(|(n, _)| *n == ty).map(|(_, a)| *a)
}

/// `ethtool -N … rx-flow-hash` letters and the `RXH_*` bits they stand for,
/// in bit order (the order [`hash_letters`] writes them).
pub const HASH_LETTERS: &[(char, u32)] = &[
    ('m', 1 << 1),  // L2 destination address
    ('v', 1 << 2),  // VLAN tag
    ('t', 1 << 3),  // L3 protocol
    ('s', 1 << 4),  // IP source
    ('d', 1 << 5),  // IP destination
    ('f', 1 << 6),  // L4 bytes 0-1 (source port)
    ('n', 1 << 7),  // L4 bytes 2-3 (destination port)
    ('l', 1 << 8),  // IPv6 flow label
    ('r', 1 << 31), // discard
];

/// The letters of a flow-hash field set: `sdfn`, `none` for no field, and
/// bits without a letter as `+0x…` so the text still round-trips.
pub fn hash_letters(bits: u64) -> String {
    let mut s = String::new();
    let mut rest = bits;
    for (c, b) in HASH_LETTERS {
        if bits & u64::from(*b) != 0 {
            s.push(*c);
            rest &= !u64::from(*b);
        }
    }
    if rest != 0 {
        let _ = write!(s, "+{rest:#x}");
    }
    if s.is_empty() {
        s.push_str("none");
    }
    s
}

/// Parses [`hash_letters`] text (any letter order) into `RXH_*` bits.
pub fn parse_hash_letters(s: &str) -> Result<u32, String> {
    let s = s.trim();
    if s == "none" {
        return Ok(0);
    }
    let (letters, extra) = match s.split_once("+0x") {
        Some((l, x)) => (
            l,
            u32::from_str_radix(x, 16).map_err(|_| format!("`{s}`: bad hex after +0x"))?,
        ),
        None => (s, 0),
    };
    if letters.is_empty() && extra == 0 {
        return Err("no field letters (ethtool's m v t s d f n l r, or \"none\")".into());
    }
    let mut bits = extra;
    for c in letters.chars() {
        let b = HASH_LETTERS
            .iter()
            .find(|(l, _)| *l == c)
            .map(|(_, b)| *b)
            .ok_or_else(|| {
                format!("`{c}` is not a flow-hash field letter (ethtool's m v t s d f n l r)")
            })?;
        bits |= b;
    }
    Ok(bits)
}

/// The driver's default indirection table over `rx` queues
/// (`ethtool_rxfh_indir_default`): entry i is queue i mod rx.
pub fn default_indir(size: usize, rx: u32) -> Vec<u32> {
    (0..size as u32).map(|i| i % rx.max(1)).collect()
}

/// The text of an indirection table: queue numbers, space-separated.
pub fn indir_text(table: &[u32]) -> String {
    let mut s = String::with_capacity(table.len() * 3);
    for (i, q) in table.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(s, "{q}");
    }
    s
}

/// A failed netlink request: errno and the kernel's extended-ack message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NlError {
    /// Positive errno.
    pub errno: i32,
    /// `NLMSGERR_ATTR_MSG`, when the kernel sent one.
    pub msg: String,
}

impl NlError {
    fn into_fs(self, op: &'static str, path: &str) -> FsError {
        FsError {
            op,
            path: path.to_string(),
            errno: self.errno,
            detail: self.msg,
        }
    }
}

/// Pure netlink encoding: messages built and replies parsed on byte slices.
pub mod wire {
    use super::{Feature, Field, GroupState, NlError};

    pub(super) const NLMSG_ERROR: u16 = 2;
    pub(super) const NLMSG_DONE: u16 = 3;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const NLA_F_NESTED: u16 = 0x8000;
    const NLA_TYPE_MASK: u16 = 0x3fff;
    const GENL_ID_CTRL: u16 = 0x10;
    const CTRL_CMD_GETFAMILY: u8 = 3;
    const CTRL_ATTR_FAMILY_ID: u16 = 1;
    const CTRL_ATTR_FAMILY_NAME: u16 = 2;
    const NLMSGERR_ATTR_MSG: u16 = 1;

    pub(super) const FEATURES_GET: u8 = 11;
    pub(super) const FEATURES_SET: u8 = 12;
    pub(super) const RINGS_GET: u8 = 15;
    pub(super) const RINGS_SET: u8 = 16;
    pub(super) const CHANNELS_GET: u8 = 17;
    pub(super) const CHANNELS_SET: u8 = 18;
    pub(super) const COALESCE_GET: u8 = 19;
    pub(super) const COALESCE_SET: u8 = 20;
    pub(super) const RSS_GET: u8 = 38;
    pub(super) const RSS_SET: u8 = 48;
    const A_RSS_HFUNC: u16 = 3;
    const A_RSS_INDIR: u16 = 4;
    const A_RSS_FLOW_HASH: u16 = 8;

    /// Every group's attribute 1 is the request header.
    const A_HEADER: u16 = 1;
    const A_HEADER_DEV_NAME: u16 = 2;
    const A_HEADER_FLAGS: u16 = 3;
    /// `ETHTOOL_FLAG_OMIT_REPLY`: no reply message to a SET, the ack only.
    const FLAG_OMIT_REPLY: u32 = 2;
    const A_FEATURES_HW: u16 = 2;
    const A_FEATURES_WANTED: u16 = 3;
    const A_FEATURES_ACTIVE: u16 = 4;
    const A_FEATURES_NOCHANGE: u16 = 5;
    const A_BITSET_NOMASK: u16 = 1;
    const A_BITSET_BITS: u16 = 3;
    const A_BITSET_BITS_BIT: u16 = 1;
    const A_BITSET_BIT_NAME: u16 = 2;
    const A_BITSET_BIT_VALUE: u16 = 3;

    /// A netlink message under construction.
    pub struct Msg {
        buf: Vec<u8>,
        nests: Vec<usize>,
    }

    impl Msg {
        /// Header for `family`, `cmd`, with an ack requested for SETs.
        pub fn new(family: u16, cmd: u8, seq: u32, ack: bool) -> Msg {
            let mut buf = Vec::with_capacity(128);
            buf.extend_from_slice(&0u32.to_ne_bytes());
            buf.extend_from_slice(&family.to_ne_bytes());
            let flags = NLM_F_REQUEST | if ack { NLM_F_ACK } else { 0 };
            buf.extend_from_slice(&flags.to_ne_bytes());
            buf.extend_from_slice(&seq.to_ne_bytes());
            buf.extend_from_slice(&0u32.to_ne_bytes());
            buf.extend_from_slice(&[cmd, 1, 0, 0]);
            Msg {
                buf,
                nests: Vec::new(),
            }
        }

        fn attr(&mut self, ty: u16, data: &[u8]) {
            let len = 4 + data.len();
            self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
            self.buf.extend_from_slice(&ty.to_ne_bytes());
            self.buf.extend_from_slice(data);
            self.pad();
        }

        fn pad(&mut self) {
            while self.buf.len() & 3 != 0 {
                self.buf.push(0);
            }
        }

        /// A NUL-terminated string attribute.
        pub fn string(&mut self, ty: u16, s: &str) {
            let mut d = s.as_bytes().to_vec();
            d.push(0);
            self.attr(ty, &d);
        }

        /// A u32 attribute.
        pub fn u32(&mut self, ty: u16, v: u32) {
            self.attr(ty, &v.to_ne_bytes());
        }

        /// A binary attribute.
        pub fn bytes(&mut self, ty: u16, data: &[u8]) {
            self.attr(ty, data);
        }

        /// A u8 attribute.
        pub fn u8(&mut self, ty: u16, v: u8) {
            self.attr(ty, &[v]);
        }

        /// A flag attribute (no payload).
        pub fn flag(&mut self, ty: u16) {
            self.attr(ty, &[]);
        }

        /// Opens a nested attribute.
        pub fn begin(&mut self, ty: u16) {
            self.nests.push(self.buf.len());
            self.buf.extend_from_slice(&0u16.to_ne_bytes());
            self.buf
                .extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
        }

        /// Closes the last nested attribute.
        pub fn end(&mut self) {
            let start = self.nests.pop().expect("end without begin");
            let len = (self.buf.len() - start) as u16;
            self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        }

        /// The ethtool request header naming the device.
        pub fn header(&mut self, dev: &str, omit_reply: bool) {
            self.begin(A_HEADER);
            self.string(A_HEADER_DEV_NAME, dev);
            if omit_reply {
                self.u32(A_HEADER_FLAGS, FLAG_OMIT_REPLY);
            }
            self.end();
        }

        /// The finished bytes.
        pub fn finish(mut self) -> Vec<u8> {
            let len = self.buf.len() as u32;
            self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
            self.buf
        }
    }

    /// `CTRL_CMD_GETFAMILY` for `name`.
    pub fn get_family(name: &str, seq: u32) -> Vec<u8> {
        let mut m = Msg::new(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, seq, false);
        m.string(CTRL_ATTR_FAMILY_NAME, name);
        m.finish()
    }

    /// The family id in a `CTRL_CMD_NEWFAMILY` payload (attributes after the genl header).
    pub fn family_id(attrs: &[u8]) -> Option<u16> {
        Attrs(attrs)
            .find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, d)| Some(u16::from_ne_bytes(d.get(..2)?.try_into().ok()?)))
    }

    /// The commands a `CTRL_CMD_NEWFAMILY` payload lists (`CTRL_ATTR_OPS`:
    /// one nest per op holding its `CTRL_ATTR_OP_ID`).
    pub fn family_ops(attrs: &[u8]) -> Vec<u8> {
        const CTRL_ATTR_OPS: u16 = 6;
        const CTRL_ATTR_OP_ID: u16 = 1;
        Attrs(attrs)
            .filter(|(t, _)| *t == CTRL_ATTR_OPS)
            .flat_map(|(_, ops)| Attrs(ops))
            .filter_map(|(_, op)| {
                Attrs(op)
                    .find(|(t, _)| *t == CTRL_ATTR_OP_ID)
                    .and_then(|(_, d)| u32_of(d))
                    .and_then(|id| u8::try_from(id).ok())
            })
            .collect()
    }

    /// A GET of one group for `dev`.
    pub fn get(family: u16, cmd: u8, dev: &str, seq: u32) -> Vec<u8> {
        let mut m = Msg::new(family, cmd, seq, false);
        m.header(dev, false);
        m.finish()
    }

    /// A SET of one numeric field.
    pub fn set_field(family: u16, cmd: u8, dev: &str, field: &Field, v: u32, seq: u32) -> Vec<u8> {
        let mut m = Msg::new(family, cmd, seq, true);
        m.header(dev, true);
        if field.switch {
            m.u8(field.attr, u8::from(v != 0));
        } else {
            m.u32(field.attr, v);
        }
        m.finish()
    }

    /// A FEATURES_SET requesting `on` for the kernel feature `name` (a
    /// verbose bitset: the listed bit is the mask, its VALUE flag the value).
    pub fn set_feature(family: u16, dev: &str, name: &str, on: bool, seq: u32) -> Vec<u8> {
        let mut m = Msg::new(family, FEATURES_SET, seq, true);
        m.header(dev, true);
        m.begin(A_FEATURES_WANTED);
        m.begin(A_BITSET_BITS);
        m.begin(A_BITSET_BITS_BIT);
        m.string(A_BITSET_BIT_NAME, name);
        if on {
            m.flag(A_BITSET_BIT_VALUE);
        }
        m.end();
        m.end();
        m.end();
        m.finish()
    }

    /// An RSS_SET of the indirection table (`table` empty: back to the
    /// driver's default, and the user-configured mark cleared).
    pub fn set_rss_indir(family: u16, dev: &str, table: &[u32], seq: u32) -> Vec<u8> {
        let mut m = Msg::new(family, RSS_SET, seq, true);
        m.header(dev, true);
        let bytes: Vec<u8> = table.iter().flat_map(|q| q.to_ne_bytes()).collect();
        m.bytes(A_RSS_INDIR, &bytes);
        m.finish()
    }

    /// An RSS_SET of the fields one flow type hashes: `FLOW_HASH { flow: bits }`.
    pub fn set_rss_hash(family: u16, dev: &str, flow: u16, bits: u32, seq: u32) -> Vec<u8> {
        let mut m = Msg::new(family, RSS_SET, seq, true);
        m.header(dev, true);
        m.begin(A_RSS_FLOW_HASH);
        m.u32(flow, bits);
        m.end();
        m.finish()
    }

    /// An RSS_GET reply payload: `hfunc` and `indir_size` as values, the
    /// table as text `indir` (absent when the driver has none), and each
    /// flow type's hashed fields as `hash_TYPE` (`NLA_UINT`: 4 or 8 bytes).
    pub fn parse_rss(attrs: &[u8]) -> GroupState {
        let mut g = GroupState::default();
        for (ty, d) in Attrs(attrs) {
            match ty {
                A_RSS_HFUNC => {
                    if let Some(v) = u32_of(d) {
                        g.values.insert("hfunc".into(), v);
                    }
                }
                A_RSS_INDIR => {
                    let table: Vec<u32> = d
                        .chunks_exact(4)
                        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    g.values.insert("indir_size".into(), table.len() as u64);
                    if !table.is_empty() {
                        g.texts.insert("indir".into(), super::indir_text(&table));
                    }
                }
                A_RSS_FLOW_HASH => {
                    for (flow, d) in Attrs(d) {
                        let Some((name, _)) = super::FLOW_TYPES.iter().find(|(_, a)| *a == flow)
                        else {
                            continue;
                        };
                        let bits = match d.len() {
                            4 => u64::from(u32::from_ne_bytes([d[0], d[1], d[2], d[3]])),
                            8 => u64::from_ne_bytes(d.try_into().unwrap_or([0; 8])),
                            _ => continue,
                        };
                        g.texts
                            .insert(format!("hash_{name}"), super::hash_letters(bits));
                    }
                }
                _ => {}
            }
        }
        g
    }

    /// Iterator over the attributes of a payload: (type without flags, data).
    pub struct Attrs<'a>(pub &'a [u8]);

    impl<'a> Iterator for Attrs<'a> {
        type Item = (u16, &'a [u8]);
        fn next(&mut self) -> Option<(u16, &'a [u8])> {
            let b = self.0;
            if b.len() < 4 {
                return None;
            }
            let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
            let ty = u16::from_ne_bytes([b[2], b[3]]) & NLA_TYPE_MASK;
            if len < 4 || len > b.len() {
                self.0 = &[];
                return None;
            }
            let data = &b[4..len];
            self.0 = &b[len.next_multiple_of(4).min(b.len())..];
            Some((ty, data))
        }
    }

    fn u32_of(d: &[u8]) -> Option<u64> {
        match d.len() {
            1 => Some(u64::from(d[0])),
            4 => Some(u64::from(u32::from_ne_bytes(d.try_into().ok()?))),
            _ => None,
        }
    }

    /// The fields of a CHANNELS/RINGS/COALESCE reply payload; absent
    /// attributes are settings the driver does not have.
    pub fn parse_fields(attrs: &[u8], fields: &[Field]) -> GroupState {
        let mut g = GroupState::default();
        for (ty, d) in Attrs(attrs) {
            for f in fields {
                if ty == f.attr {
                    if let Some(v) = u32_of(d) {
                        g.values.insert(f.name.to_string(), v);
                    }
                }
                if Some(ty) == f.max {
                    if let Some(v) = u32_of(d) {
                        g.values.insert(format!("max_{}", f.name), v);
                    }
                }
            }
        }
        g
    }

    /// The names listed in a verbose bitset, each with whether it is set:
    /// every listed bit when it has no mask (`NOMASK`), else the listed bits
    /// with a `VALUE` flag.
    fn bit_names(bitset: &[u8]) -> Vec<(String, bool)> {
        let nomask = Attrs(bitset).any(|(ty, _)| ty == A_BITSET_NOMASK);
        let mut out = Vec::new();
        for (ty, bits) in Attrs(bitset) {
            if ty != A_BITSET_BITS {
                continue;
            }
            for (ty, bit) in Attrs(bits) {
                if ty != A_BITSET_BITS_BIT {
                    continue;
                }
                let mut name = None;
                let mut set = nomask;
                for (ty, d) in Attrs(bit) {
                    match ty {
                        A_BITSET_BIT_NAME => {
                            let s = d.split(|b| *b == 0).next().unwrap_or_default();
                            name = Some(String::from_utf8_lossy(s).into_owned());
                        }
                        A_BITSET_BIT_VALUE => set = true,
                        _ => {}
                    }
                }
                if let Some(n) = name {
                    out.push((n, set));
                }
            }
        }
        out
    }

    /// A FEATURES_GET reply payload: every feature the kernel names (the
    /// `hw` set comes with a mask of all of them). A feature outside `hw` or
    /// inside `nochange` is fixed, as `ethtool -k` says.
    pub fn parse_features(attrs: &[u8]) -> GroupState {
        let mut sets: [Vec<(String, bool)>; 4] = Default::default();
        for (ty, d) in Attrs(attrs) {
            let i = match ty {
                A_FEATURES_HW => 0,
                A_FEATURES_WANTED => 1,
                A_FEATURES_ACTIVE => 2,
                A_FEATURES_NOCHANGE => 3,
                _ => continue,
            };
            sets[i] = bit_names(d);
        }
        let has = |i: usize, name: &str| sets[i].iter().any(|(n, on)| *on && n == name);
        let mut g = GroupState::default();
        for (name, _) in sets.iter().flatten() {
            if name.is_empty() || g.features.contains_key(name) {
                continue;
            }
            g.features.insert(
                name.clone(),
                Feature {
                    active: has(2, name),
                    wanted: has(1, name),
                    fixed: !has(0, name) || has(3, name),
                },
            );
        }
        g
    }

    /// One reply read from the socket, split into messages.
    pub enum Reply<'a> {
        /// A data message: its genl payload (after the 4-byte genl header).
        Data(&'a [u8]),
        /// An ack (errno 0) or an error.
        Ack(Result<(), NlError>),
    }

    /// The messages in `buf` that answer `seq`.
    pub fn replies(buf: &[u8], seq: u32) -> Vec<Reply<'_>> {
        let mut out = Vec::new();
        let mut b = buf;
        while b.len() >= 16 {
            let len = u32::from_ne_bytes(b[0..4].try_into().unwrap_or_default()) as usize;
            if len < 16 || len > b.len() {
                break;
            }
            let ty = u16::from_ne_bytes([b[4], b[5]]);
            let flags = u16::from_ne_bytes([b[6], b[7]]);
            let mseq = u32::from_ne_bytes(b[8..12].try_into().unwrap_or_default());
            let body = &b[16..len];
            b = &b[len.next_multiple_of(4).min(b.len())..];
            if mseq != seq {
                continue;
            }
            match ty {
                NLMSG_ERROR => out.push(Reply::Ack(parse_error(body, flags))),
                NLMSG_DONE => {}
                _ if body.len() >= 4 => out.push(Reply::Data(&body[4..])),
                _ => {}
            }
        }
        out
    }

    /// An `nlmsgerr`: errno, then the request's header (capped: the header
    /// only, flag 0x100), then the extended-ack attributes (flag 0x200).
    fn parse_error(body: &[u8], flags: u16) -> Result<(), NlError> {
        let err = i32::from_ne_bytes(
            body.get(..4)
                .and_then(|e| e.try_into().ok())
                .unwrap_or([0; 4]),
        );
        if err == 0 {
            return Ok(());
        }
        let mut msg = String::new();
        if flags & 0x200 != 0 {
            let orig_len = if flags & 0x100 != 0 {
                16
            } else {
                body.get(4..8)
                    .and_then(|l| l.try_into().ok())
                    .map(|l| u32::from_ne_bytes(l) as usize)
                    .unwrap_or(16)
            };
            if let Some(tlvs) = body.get(4 + orig_len.next_multiple_of(4)..) {
                for (ty, d) in Attrs(tlvs) {
                    if ty == NLMSGERR_ATTR_MSG {
                        let s = d.split(|b| *b == 0).next().unwrap_or_default();
                        msg = String::from_utf8_lossy(s).into_owned();
                    }
                }
            }
        }
        Err(NlError { errno: -err, msg })
    }
}

/// A generic-netlink socket bound to the ethtool family.
pub struct Ethtool {
    fd: i32,
    family: u16,
    seq: u32,
    /// The commands this kernel's family has (empty: not listed).
    ops: Vec<u8>,
}

impl Drop for Ethtool {
    fn drop(&mut self) {
        // SAFETY: the socket this value owns, closed once.
        unsafe { libc::close(self.fd) };
    }
}

const NETLINK_GENERIC: i32 = 16;
const NETLINK_CAP_ACK: i32 = 10;
const NETLINK_EXT_ACK: i32 = 11;

impl Ethtool {
    /// Opens a socket in this thread's network namespace and resolves the
    /// `ethtool` family (absent before Linux 5.6: `ENOENT`).
    pub fn open() -> Result<Ethtool, NlError> {
        // SAFETY: plain socket(2); the descriptor is owned by the value below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_GENERIC,
            )
        };
        if fd < 0 {
            return Err(last_error("socket(AF_NETLINK)"));
        }
        let mut e = Ethtool {
            fd,
            family: 0,
            seq: 1,
            ops: Vec::new(),
        };
        for opt in [NETLINK_EXT_ACK, NETLINK_CAP_ACK] {
            let one: libc::c_int = 1;
            // SAFETY: setsockopt reads one c_int from a live local.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_NETLINK,
                    opt,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
        let seq = e.next_seq();
        let payload = e.request(&wire::get_family("ethtool", seq), seq)?;
        e.family = wire::family_id(&payload).ok_or(NlError {
            errno: libc::EPROTO,
            msg: "no family id in the reply".into(),
        })?;
        e.ops = wire::family_ops(&payload);
        Ok(e)
    }

    /// Whether the kernel can set `group` (RSS_SET came in Linux 6.17,
    /// years after RSS_GET).
    pub fn can_set(&self, group: Group) -> bool {
        self.ops.is_empty() || self.ops.contains(&group.set_cmd())
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Sends `msg` and returns the payload of the data reply (empty for an ack).
    fn request(&mut self, msg: &[u8], seq: u32) -> Result<Vec<u8>, NlError> {
        // SAFETY: sends from a live slice; the kernel is the peer (pid 0).
        let n = unsafe {
            let mut addr: libc::sockaddr_nl = std::mem::zeroed();
            addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            libc::sendto(
                self.fd,
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(last_error("sendto"));
        }
        let mut buf = vec![0u8; 65536];
        let mut data: Option<Vec<u8>> = None;
        loop {
            // SAFETY: receives into a live buffer of its length.
            let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = last_error("recv");
                if e.errno == libc::EINTR {
                    continue;
                }
                return Err(e);
            }
            for r in wire::replies(&buf[..n as usize], seq) {
                match r {
                    wire::Reply::Data(d) if data.is_none() => data = Some(d.to_vec()),
                    wire::Reply::Data(_) => {}
                    wire::Reply::Ack(Err(e)) => return Err(e),
                    wire::Reply::Ack(Ok(())) => return Ok(data.unwrap_or_default()),
                }
            }
            // A GET is answered by its data message alone.
            if let Some(d) = data.take() {
                if !msg_wants_ack(msg) {
                    return Ok(d);
                }
                data = Some(d);
            }
        }
    }

    /// Reads one group of `dev`.
    pub fn get(&mut self, dev: &str, group: Group) -> Result<GroupState, NlError> {
        let seq = self.next_seq();
        let payload = self.request(&wire::get(self.family, group.get_cmd(), dev, seq), seq)?;
        Ok(match group {
            Group::Features => wire::parse_features(&payload),
            Group::Rss => wire::parse_rss(&payload),
            g => wire::parse_fields(&payload, g.fields()),
        })
    }

    /// Sets one numeric field of a group.
    pub fn set_field(
        &mut self,
        dev: &str,
        group: Group,
        field: &Field,
        v: u32,
    ) -> Result<(), NlError> {
        let seq = self.next_seq();
        let msg = wire::set_field(self.family, group.set_cmd(), dev, field, v, seq);
        self.request(&msg, seq).map(drop)
    }

    /// Sets the RSS indirection table (empty: the driver's default).
    pub fn set_rss_indir(&mut self, dev: &str, table: &[u32]) -> Result<(), NlError> {
        let seq = self.next_seq();
        let msg = wire::set_rss_indir(self.family, dev, table, seq);
        self.request(&msg, seq).map(drop)
    }

    /// Sets the header fields RSS hashes for one flow type.
    pub fn set_rss_hash(&mut self, dev: &str, flow: u16, bits: u32) -> Result<(), NlError> {
        let seq = self.next_seq();
        let msg = wire::set_rss_hash(self.family, dev, flow, bits, seq);
        self.request(&msg, seq).map(drop)
    }

    /// Requests a kernel feature on or off.
    pub fn set_feature(&mut self, dev: &str, name: &str, on: bool) -> Result<(), NlError> {
        let seq = self.next_seq();
        let msg = wire::set_feature(self.family, dev, name, on, seq);
        self.request(&msg, seq).map(drop)
    }
}

fn msg_wants_ack(msg: &[u8]) -> bool {
    msg.len() >= 8 && u16::from_ne_bytes([msg[6], msg[7]]) & 4 != 0
}

fn last_error(call: &str) -> NlError {
    let e = std::io::Error::last_os_error();
    NlError {
        errno: e.raw_os_error().unwrap_or(libc::EIO),
        msg: format!("{call}: {e}"),
    }
}

/// `ethtool:DEV/GROUP[/FIELD]` split, or None for a path that is not one.
fn split(path: &str) -> Option<(&str, Group, Option<&str>)> {
    let rest = path.strip_prefix(PREFIX)?;
    let mut parts = rest.splitn(3, '/');
    let dev = parts.next().filter(|d| !d.is_empty())?;
    let group = Group::from_name(parts.next()?)?;
    Some((dev, group, parts.next()))
}

fn bad_path(op: &'static str, path: &str, why: &str) -> FsError {
    FsError {
        op,
        path: path.to_string(),
        errno: libc::ENOENT,
        detail: why.to_string(),
    }
}

/// Reads a pseudo-file of the door through netlink.
pub fn read(path: &str) -> Result<String, FsError> {
    let (dev, group, field) =
        split(path).ok_or_else(|| bad_path("read", path, "not an ethtool setting"))?;
    let mut e = Ethtool::open().map_err(|e| e.into_fs("read", path))?;
    if !e.can_set(group) {
        // Readable but not settable: what a profile asks of it is advice.
        return Err(FsError {
            op: "read",
            path: path.to_string(),
            errno: libc::EOPNOTSUPP,
            detail: format!(
                "this kernel cannot set {} over ethtool netlink (RSS_SET: Linux 6.17+)",
                group.name()
            ),
        });
    }
    let state = e.get(dev, group).map_err(|e| e.into_fs("read", path))?;
    let Some(field) = field else {
        return Ok(state.text());
    };
    if group == Group::Features {
        return match state.features.get(field) {
            Some(f) => Ok(format!("{}\n", f.text())),
            None => Err(bad_path("read", path, "the device has no such feature")),
        };
    }
    if group == Group::Rss {
        return read_rss(&mut e, dev, field, &state).map_err(|why| FsError {
            op: "read",
            path: path.to_string(),
            errno: libc::EOPNOTSUPP,
            detail: why,
        });
    }
    match state.values.get(field) {
        Some(v) => Ok(format!("{v}\n")),
        None => Err(FsError {
            op: "read",
            path: path.to_string(),
            errno: libc::EOPNOTSUPP,
            detail: format!("the driver reports no {field} ({})", group.cli()),
        }),
    }
}

/// One RSS field as text: the table (`default` when it is the driver's
/// spread over the current rx channels), or a flow type's hashed fields.
fn read_rss(e: &mut Ethtool, dev: &str, field: &str, state: &GroupState) -> Result<String, String> {
    let text = state.texts.get(field).ok_or_else(|| match field {
        "indir" => "the driver reports no indirection table (ethtool -x)".to_string(),
        f if flow_attr(f).is_some() => format!("the driver reports no {f} (ethtool -n)"),
        f => format!("no RSS setting {f}"),
    })?;
    if field != "indir" {
        return Ok(format!("{text}\n"));
    }
    let table: Vec<u32> = text.split(' ').filter_map(|q| q.parse().ok()).collect();
    if let Ok(ch) = e.get(dev, Group::Channels) {
        let rx = ch.values.get("rx").copied().unwrap_or(0)
            + ch.values.get("combined").copied().unwrap_or(0);
        if rx > 0 && table == default_indir(table.len(), rx as u32) {
            return Ok("default\n".into());
        }
    }
    Ok(format!("{}\n", table_text(&table)))
}

/// How the door shows a table that is not the driver's default: `equal N`
/// when it is the even spread over queues 0..N-1 (`ethtool -X equal N`),
/// else the queue numbers.
pub fn table_text(table: &[u32]) -> String {
    let n = table.iter().max().map_or(0, |m| m + 1);
    if n > 0 && table == default_indir(table.len(), n) {
        format!("equal {n}")
    } else {
        indir_text(table)
    }
}

/// Writes an RSS field: the table (`default`, or queue numbers), or the
/// letters of a flow type's hashed fields.
fn write_rss(e: &mut Ethtool, dev: &str, field: &str, value: &str) -> Result<(), FsError> {
    let path = path(dev, Group::Rss, field);
    let inval = |why: String| FsError {
        op: "write",
        path: path.clone(),
        errno: libc::EINVAL,
        detail: why,
    };
    let r = if field == "indir" {
        let table: Vec<u32> = if value == "default" {
            Vec::new()
        } else if let Some(n) = value.strip_prefix("equal ") {
            let n: u32 = n
                .trim()
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| inval(format!("`{value}`: equal takes a queue count")))?;
            let size = e
                .get(dev, Group::Rss)
                .map_err(|err| err.into_fs("write", &path))?
                .values
                .get("indir_size")
                .copied()
                .unwrap_or(0);
            default_indir(size as usize, n)
        } else {
            value
                .split_whitespace()
                .map(|q| q.parse())
                .collect::<Result<_, _>>()
                .map_err(|_| inval(format!("`{value}` is not a list of queue numbers")))?
        };
        e.set_rss_indir(dev, &table)
    } else {
        let flow = flow_attr(field).ok_or_else(|| bad_path("write", &path, "no such setting"))?;
        let bits = parse_hash_letters(value).map_err(inval)?;
        e.set_rss_hash(dev, flow, bits)
    };
    r.map_err(|err| err.into_fs("write", &path))
}

/// Writes a pseudo-file of the door through netlink: one field, or one
/// feature's request (`on`, `off`, or the `… (requested on)` a read gave).
pub fn write(path: &str, value: &str) -> Result<(), FsError> {
    let (dev, group, field) =
        split(path).ok_or_else(|| bad_path("write", path, "not an ethtool setting"))?;
    let field = field.ok_or_else(|| bad_path("write", path, "a group is read, not written"))?;
    let inval = |why: String| FsError {
        op: "write",
        path: path.to_string(),
        errno: libc::EINVAL,
        detail: why,
    };
    let value = value.trim();
    let mut e = Ethtool::open().map_err(|e| e.into_fs("write", path))?;
    if group == Group::Features {
        let on = if value.contains("(requested on)") {
            true
        } else if value.contains("(requested off)") {
            false
        } else {
            match value {
                "on" => true,
                "off" => false,
                _ => return Err(inval(format!("`{value}` is not on or off"))),
            }
        };
        return e
            .set_feature(dev, field, on)
            .map_err(|e| e.into_fs("write", path));
    }
    if group == Group::Rss {
        return write_rss(&mut e, dev, field, value);
    }
    let f = group
        .fields()
        .iter()
        .find(|f| f.name == field)
        .ok_or_else(|| bad_path("write", path, "no such setting"))?;
    let v: u32 = match (f.switch, value) {
        (true, "on" | "1") => 1,
        (true, "off" | "0") => 0,
        _ => value
            .parse()
            .map_err(|_| inval(format!("`{value}` is not a number")))?,
    };
    e.set_field(dev, group, f, v)
        .map_err(|e| e.into_fs("write", path))
}

/// True for a path the door answers.
pub fn is_door(path: &str) -> bool {
    path.starts_with(PREFIX)
}

#[cfg(test)]
mod tests {
    use super::wire::{self, Attrs, Reply};
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The one data payload of a captured reply to `seq`.
    fn payload(hex: &str, seq: u32) -> Vec<u8> {
        let buf = unhex(hex);
        let r = wire::replies(&buf, seq);
        assert_eq!(r.len(), 1);
        match &r[0] {
            Reply::Data(d) => d.to_vec(),
            Reply::Ack(a) => panic!("not data: {a:?}"),
        }
    }

    // Replies captured from Linux 6.18 (x86_64, little-endian) for a
    // virtio-net eth0, whose `ethtool -l/-g/-c` printed: Combined 1 (max 1),
    // rx/tx ring 256 (max 256), Adaptive RX off TX n/a, rx-usecs 0,
    // rx-frames 1, tx-usecs 0, tx-frames 1, the rest n/a.
    const CHANNELS_VIRTIO: &str = "3c000000150000001b000000447d00001201000018000180080001000400000009000200657468300000000008000500010000000800090001000000";
    const RINGS_VIRTIO: &str = "5c0000001500000019000000447d000010010000180001800800010004000000090002006574683000000000080002000001000008000600000100000800050000010000080009000001000005000d000000000005000e0000000000";
    const COALESCE_VIRTIO: &str = "54000000150000001d000000447d000014010000180001800800010004000000090002006574683000000000080002000000000008000300010000000800060000000000080007000100000005000b0000000000";

    #[cfg(target_endian = "little")]
    #[test]
    fn captured_channel_ring_and_coalesce_replies_parse_as_ethtool_shows_them() {
        let g = wire::parse_fields(&payload(CHANNELS_VIRTIO, 0x1b), CHANNEL_FIELDS);
        assert_eq!(g.text(), "combined 1\nmax_combined 1\n");
        let g = wire::parse_fields(&payload(RINGS_VIRTIO, 0x19), RING_FIELDS);
        assert_eq!(g.text(), "max_rx 256\nmax_tx 256\nrx 256\ntx 256\n");
        let g = wire::parse_fields(&payload(COALESCE_VIRTIO, 0x1d), COALESCE_FIELDS);
        assert_eq!(
            g.text(),
            "adaptive_rx 0\nrx_frames 1\nrx_usecs 0\ntx_frames 1\ntx_usecs 0\n"
        );
        assert_eq!(GroupState::parse(&g.text()), g);
        // Another sequence number is another request's answer.
        assert!(wire::replies(&unhex(RINGS_VIRTIO), 7).is_empty());
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn captured_features_reply_matches_ethtool_k() {
        let hex = include_str!("../testdata/ethtool/features_get_veth.hex");
        let g = wire::parse_features(&payload(hex, 0x15));
        let cli = include_str!("../testdata/ethtool/features_veth.ethtool-k.txt");
        let mut compared = 0;
        for line in cli.lines().skip(1) {
            let Some((name, rest)) = line.trim().split_once(": ") else {
                continue;
            };
            let Some(f) = g.features.get(name) else {
                continue; // a legacy group name (tx-checksumming), or off and fixed
            };
            assert_eq!(f.active, rest.starts_with("on"), "{name}: {rest}");
            assert_eq!(f.fixed, rest.contains("[fixed]"), "{name}: {rest}");
            compared += 1;
        }
        assert!(compared >= 50, "only {compared} features compared");
        assert_eq!(g.features["rx-gro"].text(), "off");
        assert!(g.features["vlan-challenged"].fixed);
        assert_eq!(g.features["rx-lro"].text(), "off");
        assert!(g.features["rx-lro"].fixed);
        assert_eq!(GroupState::parse(&g.text()), g);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn captured_errors_carry_errno_and_the_kernels_message() {
        // RINGS_GET on a veth: EOPNOTSUPP, capped, no message.
        let buf = unhex("240000000200000119000000be7d0000a1ffffff20000000150001001900000000000000");
        match &wire::replies(&buf, 0x19)[..] {
            [Reply::Ack(Err(e))] => {
                assert_eq!(e.errno, libc::EOPNOTSUPP);
                assert_eq!(e.msg, "");
            }
            _ => panic!("not one error"),
        }
        // CHANNELS_SET rx 8 on a 4-queue veth: EINVAL with an extended ack.
        let buf = unhex("580000000200000364000000a07f0000eaffffff300000001500050064000000000000002c000100726571756573746564206368616e6e656c20636f756e742065786365656473206d6178696d756d000800020028000000");
        match &wire::replies(&buf, 100)[..] {
            [Reply::Ack(Err(e))] => {
                assert_eq!(e.errno, libc::EINVAL);
                assert_eq!(e.msg, "requested channel count exceeds maximum");
            }
            _ => panic!("not one error"),
        }
        // FEATURES_SET acked.
        let buf = unhex("240000000200000163000000f07e00000000000050000000150005006300000000000000");
        assert!(matches!(&wire::replies(&buf, 99)[..], [Reply::Ack(Ok(()))]));
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn requests_are_encoded_as_the_kernel_expects() {
        // The GET `ethtool` itself sends: header nest with the device name.
        let get = wire::get(0x15, 17, "eth0", 9);
        assert_eq!(
            &get[..],
            &unhex("24000000 1500 0100 09000000 00000000 11010000 1000 0180 0900 0200 65746830 00000000")[..]
        );
        // A SET asks for an ack and omits the reply; one u32 field.
        let set = wire::set_field(0x15, 18, "xa", &CHANNEL_FIELDS[0], 2, 5);
        assert_eq!(u16::from_ne_bytes([set[6], set[7]]), 5);
        let attrs: Vec<(u16, Vec<u8>)> = Attrs(&set[20..]).map(|(t, d)| (t, d.to_vec())).collect();
        assert_eq!(attrs.len(), 2);
        let header: Vec<(u16, Vec<u8>)> =
            Attrs(&attrs[0].1).map(|(t, d)| (t, d.to_vec())).collect();
        assert_eq!(
            header,
            vec![(2, b"xa\0".to_vec()), (3, 2u32.to_ne_bytes().to_vec())]
        );
        assert_eq!(attrs[1], (6, 2u32.to_ne_bytes().to_vec()));
        // A switch is a u8.
        let set = wire::set_field(0x15, 20, "xa", &COALESCE_FIELDS[8], 1, 5);
        let last = Attrs(&set[20..]).last().unwrap();
        assert_eq!((last.0, last.1.to_vec()), (11, vec![1]));
        // A feature: WANTED { BITS { BIT { NAME, VALUE } } }.
        let set = wire::set_feature(0x15, "xa", "rx-gro", true, 5);
        let (ty, wanted) = Attrs(&set[20..]).nth(1).unwrap();
        assert_eq!(ty, 3);
        let (ty, bits) = Attrs(wanted).next().unwrap();
        assert_eq!(ty, 3);
        let (ty, bit) = Attrs(bits).next().unwrap();
        assert_eq!(ty, 1);
        let bit: Vec<(u16, Vec<u8>)> = Attrs(bit).map(|(t, d)| (t, d.to_vec())).collect();
        assert_eq!(bit, vec![(2, b"rx-gro\0".to_vec()), (3, vec![])]);
        let off = wire::set_feature(0x15, "xa", "rx-gro", false, 5);
        assert_eq!(off.len(), set.len() - 4, "off: no VALUE flag");
    }

    // RSS_GET of the same virtio-net eth0 (Linux 6.18): toeplitz (hfunc 1),
    // no indirection table (the device has no RSS), and a FLOW_HASH nest of
    // all 27 flow types hashing no field (`ethtool -n eth0 rx-flow-hash
    // tcp4` prints None).
    const RSS_VIRTIO: &str = "10010000150000002100000054330000260100001800018008000100040000000900020065746830000000000800030001000000dc00088008000100000000000800020000000000080003000000000008000400000000000800050000000000080006000000000008000700000000000800080000000000080009000000000008000a000000000008000b000000000008000c000000000008000d000000000008000e000000000008000f0000000000080010000000000008001100000000000800120000000000080013000000000008001400000000000800150000000000080016000000000008001700000000000800180000000000080019000000000008001a000000000008001b0000000000";

    #[cfg(target_endian = "little")]
    #[test]
    fn captured_rss_replies_parse_as_ethtool_shows_them() {
        let g = wire::parse_rss(&payload(RSS_VIRTIO, 0x21));
        assert_eq!(g.values.get("hfunc"), Some(&1));
        assert_eq!(g.values.get("indir_size"), None, "no table on this device");
        assert!(!g.texts.contains_key("indir"));
        assert_eq!(g.texts["hash_tcp4"], "none");
        assert_eq!(g.texts["hash_udp6"], "none");
        assert_eq!(g.texts.len(), FLOW_TYPES.len(), "{:?}", g.texts);
        assert_eq!(GroupState::parse(&g.text()), g);
        // RSS_GET on a veth: EOPNOTSUPP (no get_rxfh).
        let buf = unhex("340000000200000122000000dc330000a1ffffff20000000150001002200000000000000260100000c0001800700020078610000");
        match &wire::replies(&buf, 0x22)[..] {
            [Reply::Ack(Err(e))] => assert_eq!(e.errno, libc::EOPNOTSUPP),
            _ => panic!("not one error"),
        }
        // RSS_SET tcp4 sdfn on a veth: EOPNOTSUPP; the echoed request is
        // FLOW_HASH { TCP4: 0xf0 } under the header.
        let buf = unhex("48000000020000022300000032340000a1ffffff2c000000150005002300000000000000300100000c00018007000200786100000c00088008000400f00000000800020020000000");
        match &wire::replies(&buf, 0x23)[..] {
            [Reply::Ack(Err(e))] => assert_eq!(e.errno, libc::EOPNOTSUPP),
            _ => panic!("not one error"),
        }
        // A reserved bit in a flow's fields: the kernel's policy refuses it.
        let buf = unhex("600000000200000224000000b4340000eaffffff2c000000150005002400000000000000300100000c00018007000200786100000c00088008000400010000001500010072657365727665642062697420736574000000000800020024000000");
        match &wire::replies(&buf, 0x24)[..] {
            [Reply::Ack(Err(e))] => {
                assert_eq!(e.errno, libc::EINVAL);
                assert_eq!(e.msg, "reserved bit set");
            }
            _ => panic!("not one error"),
        }
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn rss_requests_and_a_table_reply_are_encoded_as_the_kernel_expects() {
        // FLOW_HASH { TCP4: sdfn } as the kernel echoed it above (seq 0x23),
        // with the header's OMIT_REPLY flag added.
        let set = wire::set_rss_hash(0x15, "xa", 4, parse_hash_letters("sdfn").unwrap(), 5);
        assert_eq!(set[16], 48, "ETHTOOL_MSG_RSS_SET");
        let attrs: Vec<(u16, Vec<u8>)> = Attrs(&set[20..]).map(|(t, d)| (t, d.to_vec())).collect();
        assert_eq!(attrs[1], (8, unhex("08000400f0000000")));
        // The table: u32 queue numbers; empty means the driver's default.
        let set = wire::set_rss_indir(0x15, "xa", &[0, 1, 0, 1], 6);
        let (ty, d) = Attrs(&set[20..]).nth(1).unwrap();
        assert_eq!(
            (ty, d),
            (4, &unhex("00000000 01000000 00000000 01000000")[..])
        );
        let reset = wire::set_rss_indir(0x15, "xa", &[], 6);
        assert_eq!(Attrs(&reset[20..]).nth(1).unwrap(), (4, &[][..]));
        // A reply with a table and 8-byte NLA_UINT fields (the kernel sends
        // 8 bytes for values above 32 bits).
        let mut m = wire::Msg::new(0x15, 38, 7, false);
        m.header("xa", false);
        m.u32(3, 1);
        let table: Vec<u8> = default_indir(8, 2)
            .iter()
            .flat_map(|q| q.to_ne_bytes())
            .collect();
        m.bytes(4, &table);
        m.begin(8);
        m.u32(4, 0xf0);
        m.bytes(6, &0x30u64.to_ne_bytes());
        m.end();
        let reply = m.finish();
        let g = wire::parse_rss(&reply[20..]);
        assert_eq!(g.texts["indir"], "0 1 0 1 0 1 0 1");
        assert_eq!(g.values["indir_size"], 8);
        assert_eq!(g.texts["hash_tcp4"], "sdfn");
        assert_eq!(g.texts["hash_udp4"], "sd");
        assert_eq!(GroupState::parse(&g.text()), g);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn the_family_reply_lists_the_commands_this_kernel_has() {
        // CTRL_CMD_GETFAMILY "ethtool" answered by Linux 6.18.
        let hex = include_str!("../testdata/ethtool/getfamily_ethtool.hex");
        let p = payload(hex.trim(), 7);
        assert_eq!(wire::family_id(&p), Some(0x15));
        let ops = wire::family_ops(&p);
        for g in Group::ALL {
            assert!(ops.contains(&g.get_cmd()), "{g:?} get");
            assert!(ops.contains(&g.set_cmd()), "{g:?} set");
        }
        assert!(ops.contains(&wire::RSS_GET) && ops.contains(&wire::RSS_SET));
        assert!(!ops.contains(&0));
        assert!(ops.len() > 40, "{ops:?}");
    }

    #[test]
    fn hash_letters_round_trip_in_bit_order() {
        assert_eq!(parse_hash_letters("sdfn"), Ok(0xf0));
        assert_eq!(parse_hash_letters("nfds"), Ok(0xf0));
        assert_eq!(hash_letters(0xf0), "sdfn");
        assert_eq!(hash_letters(0), "none");
        assert_eq!(parse_hash_letters("none"), Ok(0));
        assert_eq!(hash_letters(0x8000_0030), "sdr");
        // A bit without a letter survives a read and a write back.
        assert_eq!(hash_letters(0x1030), "sd+0x1000");
        assert_eq!(parse_hash_letters("sd+0x1000"), Ok(0x1030));
        assert!(parse_hash_letters("sdx").unwrap_err().contains("`x`"));
        assert!(parse_hash_letters("").is_err());
        assert_eq!(flow_attr("hash_tcp4"), Some(4));
        assert_eq!(flow_attr("hash_udp4"), Some(6));
        assert_eq!(flow_attr("tcp4"), None);
        assert_eq!(default_indir(6, 4), vec![0, 1, 2, 3, 0, 1]);
        assert_eq!(indir_text(&[3, 0]), "3 0");
        assert_eq!(table_text(&default_indir(128, 3)), "equal 3");
        assert_eq!(table_text(&[0; 64]), "equal 1");
        assert_eq!(table_text(&[0, 1, 1, 0]), "0 1 1 0");
        assert_eq!(table_text(&[1, 1]), "1 1");
    }

    #[test]
    fn feature_text_round_trips_a_request_the_kernel_holds_off() {
        let f = Feature {
            active: false,
            wanted: true,
            fixed: false,
        };
        assert_eq!(f.text(), "off (requested on)");
        let g = GroupState::parse("tx-tcp-segmentation off (requested on)\nrx-lro off [fixed]\n");
        assert_eq!(g.features["tx-tcp-segmentation"], f);
        assert!(g.features["rx-lro"].fixed);
        assert_eq!(
            kernel_features("tso"),
            TSO.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        );
        assert_eq!(kernel_features("rx_gro_hw"), vec!["rx-gro-hw".to_string()]);
        assert_eq!(
            kernel_features("rx-udp-gro-forwarding"),
            vec!["rx-udp-gro-forwarding".to_string()]
        );
        assert_eq!(
            split("ethtool:xa/channels/rx"),
            Some(("xa", Group::Channels, Some("rx")))
        );
        assert_eq!(split("ethtool:xa/ring"), Some(("xa", Group::Ring, None)));
        assert_eq!(split("ethtool:/ring"), None);
        assert_eq!(split("/proc/sys/x"), None);
    }
}
