//! The NIC's own settings (channels, rings, interrupt coalescing, offload
//! features) through the kernel's ethtool generic-netlink family: the one
//! module that owns the encoding.
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
//! [`wire`] is pure (message building and attribute parsing, unit-tested on
//! captured kernel replies); [`Ethtool`] is the socket.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::fs::FsError;

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
    /// `ethtool -g/-G`.
    Ring,
    /// `ethtool -c/-C`.
    Coalesce,
    /// `ethtool -k/-K`.
    Features,
}

impl Group {
    /// Every group, in write order (channels first: they change the queues).
    pub const ALL: [Group; 4] = [
        Group::Channels,
        Group::Ring,
        Group::Coalesce,
        Group::Features,
    ];

    /// Name in profiles, knob identities and pseudo-paths.
    pub fn name(self) -> &'static str {
        match self {
            Group::Channels => "channels",
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
            Group::Features => &[],
        }
    }

    fn get_cmd(self) -> u8 {
        match self {
            Group::Channels => wire::CHANNELS_GET,
            Group::Ring => wire::RINGS_GET,
            Group::Coalesce => wire::COALESCE_GET,
            Group::Features => wire::FEATURES_GET,
        }
    }

    fn set_cmd(self) -> u8 {
        match self {
            Group::Channels => wire::CHANNELS_SET,
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
}

impl GroupState {
    /// The text of the group's pseudo-file: one `name value` line each.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.values {
            let _ = writeln!(s, "{k} {v}");
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

    /// Names of the bits set in a verbose bitset without mask.
    fn bit_names(bitset: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for (ty, bits) in Attrs(bitset) {
            if ty != A_BITSET_BITS {
                continue;
            }
            for (ty, bit) in Attrs(bits) {
                if ty != A_BITSET_BITS_BIT {
                    continue;
                }
                for (ty, d) in Attrs(bit) {
                    if ty == A_BITSET_BIT_NAME {
                        let s = d.split(|b| *b == 0).next().unwrap_or_default();
                        out.push(String::from_utf8_lossy(s).into_owned());
                    }
                }
            }
        }
        out
    }

    /// A FEATURES_GET reply payload: every feature the device can change, has
    /// on, or wants on. A feature outside `hw` or inside `nochange` is fixed.
    pub fn parse_features(attrs: &[u8]) -> GroupState {
        let mut sets: [Vec<String>; 4] = Default::default();
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
        let [hw, wanted, active, nochange] = sets;
        let mut g = GroupState::default();
        for name in hw.iter().chain(&wanted).chain(&active) {
            g.features.insert(
                name.clone(),
                Feature {
                    active: active.contains(name),
                    wanted: wanted.contains(name),
                    fixed: !hw.contains(name) || nochange.contains(name),
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
        Ok(e)
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
