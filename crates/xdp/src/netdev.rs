//! Interface facts through rtnetlink and ethtool ioctls: index, state, MAC,
//! queue counts, the attached XDP program, the counters and the link speed.
//!
//! Why not `/sys/class/net`: sysfs shows the network namespace of whoever
//! mounted it, while a thread that entered a peer namespace with `setns`
//! (the local receiver of `xload pps --peer-ns`) still sees the old mount.
//! Netlink and ioctls always answer for the calling thread's namespace. The
//! counters are the same ones sysfs prints (`IFLA_STATS64` and
//! `statistics/*` both come from `dev_get_stats()`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_STATS64: u16 = 23;
const IFLA_NUM_TX_QUEUES: u16 = 31;
const IFLA_NUM_RX_QUEUES: u16 = 32;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_PROG_ID: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Interface counters (the `statistics/` files in sysfs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_missed_errors: u64,
    pub rx_nohandler: u64,
}

impl LinkStats {
    /// Counter-wise difference `self - earlier` (saturating).
    pub fn since(&self, e: &LinkStats) -> LinkStats {
        LinkStats {
            rx_packets: self.rx_packets.saturating_sub(e.rx_packets),
            tx_packets: self.tx_packets.saturating_sub(e.tx_packets),
            rx_bytes: self.rx_bytes.saturating_sub(e.rx_bytes),
            tx_bytes: self.tx_bytes.saturating_sub(e.tx_bytes),
            rx_errors: self.rx_errors.saturating_sub(e.rx_errors),
            tx_errors: self.tx_errors.saturating_sub(e.tx_errors),
            rx_dropped: self.rx_dropped.saturating_sub(e.rx_dropped),
            tx_dropped: self.tx_dropped.saturating_sub(e.tx_dropped),
            rx_missed_errors: self.rx_missed_errors.saturating_sub(e.rx_missed_errors),
            rx_nohandler: self.rx_nohandler.saturating_sub(e.rx_nohandler),
        }
    }
}

/// What rtnetlink says about one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    pub name: String,
    pub ifindex: u32,
    /// `IFF_*` flags.
    pub flags: u32,
    /// `IF_OPER_*` (6 = up).
    pub operstate: u8,
    pub mac: Option<[u8; 6]>,
    pub mtu: u32,
    pub num_rx_queues: u32,
    pub num_tx_queues: u32,
    /// Id of the attached XDP program, if any.
    pub xdp_prog_id: Option<u32>,
    /// `XDP_ATTACHED_*`: 0 none, 1 driver, 2 generic, 3 offload, 4 several.
    pub xdp_attached: u8,
    pub stats: LinkStats,
}

impl LinkInfo {
    /// Administratively up (`IFF_UP`).
    pub fn is_up(&self) -> bool {
        self.flags & libc::IFF_UP as u32 != 0
    }

    /// Carrier present (`IFF_LOWER_UP`) or operstate up.
    pub fn has_carrier(&self) -> bool {
        self.flags & libc::IFF_LOWER_UP as u32 != 0 || self.operstate == 6
    }
}

/// Why an interface query failed.
#[derive(Debug, thiserror::Error)]
pub enum NetdevError {
    #[error("no interface named {0:?} in this network namespace")]
    NoSuchInterface(String),
    #[error("invalid interface name {0:?}")]
    BadName(String),
    #[error("rtnetlink {op}: {source}")]
    Netlink {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("rtnetlink reply is malformed ({0})")]
    Malformed(&'static str),
    #[error("cannot enter network namespace {name:?}: {source}")]
    Netns {
        name: String,
        #[source]
        source: io::Error,
    },
}

fn nl_err(op: &'static str) -> impl FnOnce(io::Error) -> NetdevError {
    move |source| NetdevError::Netlink { op, source }
}

// `%` rather than `is_multiple_of`, which needs Rust 1.87 (MSRV is 1.85).
#[allow(clippy::manual_is_multiple_of)]
fn push_attr(buf: &mut Vec<u8>, ty: u16, data: &[u8]) {
    let len = 4 + data.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(data);
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

/// Iterates `(type, payload)` over netlink attributes; stops at the first
/// malformed one.
fn attrs(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([data[0], data[1]]));
        let ty = u16::from_ne_bytes([data[2], data[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > data.len() {
            return None;
        }
        let payload = &data[4..len];
        let adv = (len + 3) & !3;
        data = &data[adv.min(data.len())..];
        Some((ty, payload))
    })
}

fn u32_of(p: &[u8]) -> Option<u32> {
    p.get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn parse_stats64(p: &[u8]) -> LinkStats {
    let f = |i: usize| -> u64 {
        p.get(i * 8..i * 8 + 8)
            .map(|b| {
                let mut w = [0u8; 8];
                w.copy_from_slice(b);
                u64::from_ne_bytes(w)
            })
            .unwrap_or(0)
    };
    LinkStats {
        rx_packets: f(0),
        tx_packets: f(1),
        rx_bytes: f(2),
        tx_bytes: f(3),
        rx_errors: f(4),
        tx_errors: f(5),
        rx_dropped: f(6),
        tx_dropped: f(7),
        rx_missed_errors: f(15),
        rx_nohandler: f(23),
    }
}

/// Parses one `RTM_NEWLINK` message body (after the nlmsghdr).
fn parse_newlink(body: &[u8]) -> Result<LinkInfo, NetdevError> {
    if body.len() < 16 {
        return Err(NetdevError::Malformed("short ifinfomsg"));
    }
    let ifindex = i32::from_ne_bytes([body[4], body[5], body[6], body[7]]) as u32;
    let flags = u32::from_ne_bytes([body[8], body[9], body[10], body[11]]);
    let mut info = LinkInfo {
        name: String::new(),
        ifindex,
        flags,
        operstate: 0,
        mac: None,
        mtu: 0,
        num_rx_queues: 1,
        num_tx_queues: 1,
        xdp_prog_id: None,
        xdp_attached: 0,
        stats: LinkStats::default(),
    };
    for (ty, p) in attrs(&body[16..]) {
        match ty {
            IFLA_IFNAME => {
                let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
                info.name = String::from_utf8_lossy(&p[..end]).into_owned();
            }
            IFLA_ADDRESS if p.len() == 6 => {
                let mut m = [0u8; 6];
                m.copy_from_slice(p);
                info.mac = Some(m);
            }
            IFLA_MTU => info.mtu = u32_of(p).unwrap_or(0),
            IFLA_OPERSTATE => info.operstate = p.first().copied().unwrap_or(0),
            IFLA_STATS64 => info.stats = parse_stats64(p),
            IFLA_NUM_TX_QUEUES => info.num_tx_queues = u32_of(p).unwrap_or(1),
            IFLA_NUM_RX_QUEUES => info.num_rx_queues = u32_of(p).unwrap_or(1),
            IFLA_XDP => {
                for (xty, xp) in attrs(p) {
                    match xty {
                        IFLA_XDP_ATTACHED => info.xdp_attached = xp.first().copied().unwrap_or(0),
                        IFLA_XDP_PROG_ID => info.xdp_prog_id = u32_of(xp).filter(|&id| id != 0),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

fn netlink_socket() -> Result<OwnedFd, NetdevError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(nl_err("socket")(io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends one RTM_GETLINK request and returns the reply message.
fn getlink(by_name: Option<&str>, by_index: u32) -> Result<LinkInfo, NetdevError> {
    let sock = netlink_socket()?;
    let mut msg = Vec::with_capacity(64);
    msg.extend_from_slice(&0u32.to_ne_bytes()); // length, patched below
    msg.extend_from_slice(&RTM_GETLINK.to_ne_bytes());
    msg.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid
                                                // ifinfomsg
    msg.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    msg.extend_from_slice(&(by_index as i32).to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    if let Some(name) = by_name {
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        push_attr(&mut msg, IFLA_IFNAME, &n);
    }
    let len = msg.len() as u32;
    msg[0..4].copy_from_slice(&len.to_ne_bytes());
    // SAFETY: zeroed sockaddr_nl is a valid "kernel, no groups" address.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: msg and sa are valid for the lengths passed.
    let r = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&sa as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if r < 0 {
        return Err(nl_err("sendto")(io::Error::last_os_error()));
    }
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: buf is valid for writes of buf.len() bytes.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(nl_err("recv")(io::Error::last_os_error()));
    }
    let reply = &buf[..n as usize];
    if reply.len() < 16 {
        return Err(NetdevError::Malformed("short reply"));
    }
    let mlen =
        (u32::from_ne_bytes([reply[0], reply[1], reply[2], reply[3]]) as usize).min(reply.len());
    let mtype = u16::from_ne_bytes([reply[4], reply[5]]);
    let body = &reply[16..mlen.max(16)];
    match mtype {
        NLMSG_ERROR => {
            let errno = body
                .get(..4)
                .map(|b| -i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                .ok_or(NetdevError::Malformed("short error"))?;
            if errno == libc::ENODEV {
                return Err(NetdevError::NoSuchInterface(
                    by_name
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("#{by_index}")),
                ));
            }
            Err(nl_err("RTM_GETLINK")(io::Error::from_raw_os_error(errno)))
        }
        RTM_NEWLINK => parse_newlink(body),
        _ => Err(NetdevError::Malformed("unexpected message type")),
    }
}

/// Looks an interface up by name in the calling thread's namespace.
pub fn link_by_name(name: &str) -> Result<LinkInfo, NetdevError> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', '\0', ' ']) {
        return Err(NetdevError::BadName(name.to_string()));
    }
    let mut info = getlink(Some(name), 0)?;
    // rtnetlink gives the queues allocated; AF_XDP binds only to those in
    // use (a veth allocates one per CPU and uses one). The driver's channel
    // counts say how many are in use.
    if let Some((rx, tx)) = channels_in_use(name) {
        info.num_rx_queues = info.num_rx_queues.min(rx).max(1);
        info.num_tx_queues = info.num_tx_queues.min(tx).max(1);
    }
    Ok(info)
}

/// One `SIOCETHTOOL` request on interface `name`: `data` is an ethtool
/// command struct whose first field (`cmd`) says what to get; the driver
/// fills the rest. None when the interface or the driver says no.
fn ethtool<T>(name: &str, data: &mut T) -> Option<()> {
    #[repr(C)]
    struct IfReq<T> {
        name: [u8; 16],
        data: *mut T,
        _pad: [u8; 16],
    }
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    if name.len() >= 16 {
        return None;
    }
    let mut req = IfReq {
        name: [0; 16],
        data,
        _pad: [0; 16],
    };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: plain socket(2); checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is fresh and owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: req points at a valid ifreq whose data points at a live
    // ethtool struct of the kind its `cmd` asks for, for the call's duration.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    (r >= 0).then_some(())
}

/// RX and TX queues in use (`ETHTOOL_GCHANNELS`: rx + combined, tx +
/// combined), when the driver says.
pub fn channels_in_use(name: &str) -> Option<(u32, u32)> {
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolChannels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    ethtool(name, &mut ch)?;
    let (rx, tx) = (
        ch.rx_count + ch.combined_count,
        ch.tx_count + ch.combined_count,
    );
    (rx > 0 && tx > 0).then_some((rx, tx))
}

/// Looks an interface up by index in the calling thread's namespace.
pub fn link_by_index(ifindex: u32) -> Result<LinkInfo, NetdevError> {
    getlink(None, ifindex)
}

/// Link speed in Mb/s from the driver (`ETHTOOL_GSET`, the value sysfs
/// shows as `speed`); `None` when unknown or the driver does not say.
pub fn link_speed_mbps(name: &str) -> Option<u64> {
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolCmd {
        cmd: u32,
        supported: u32,
        advertising: u32,
        speed: u16,
        duplex: u8,
        port: u8,
        phy_address: u8,
        transceiver: u8,
        autoneg: u8,
        mdio_support: u8,
        maxtxpkt: u32,
        maxrxpkt: u32,
        speed_hi: u16,
        eth_tp_mdix: u8,
        eth_tp_mdix_ctrl: u8,
        lp_advertising: u32,
        reserved: [u32; 2],
    }
    const ETHTOOL_GSET: u32 = 1;
    let mut cmd = EthtoolCmd {
        cmd: ETHTOOL_GSET,
        ..Default::default()
    };
    ethtool(name, &mut cmd)?;
    let speed = u32::from(cmd.speed) | (u32::from(cmd.speed_hi) << 16);
    if speed == 0 || speed == u32::MAX || speed == u32::from(u16::MAX) {
        None
    } else {
        Some(u64::from(speed))
    }
}

/// Moves the calling thread into the named network namespace
/// (`/run/netns/NAME`, as made by `ip netns add`). Threads it spawns
/// afterwards start there too.
pub fn enter_netns(name: &str) -> Result<(), NetdevError> {
    use xload_sys::netns::NetnsError;
    xload_sys::netns::enter(name).map_err(|e| NetdevError::Netns {
        name: name.to_string(),
        source: match e {
            NetnsError::BadName(_) => {
                io::Error::new(io::ErrorKind::InvalidInput, "not a namespace name")
            }
            NetnsError::NotFound(_) => io::Error::from_raw_os_error(libc::ENOENT),
            NetnsError::Sys { source, .. } => source,
        },
    })
}

/// Runs `f` in network namespace `ns` (on a helper thread that enters it),
/// or right here when `ns` is `None`. Threads `f` spawns stay in `ns`.
pub fn in_netns<T: Send>(ns: Option<&str>, f: impl FnOnce() -> T + Send) -> Result<T, NetdevError> {
    let Some(ns) = ns else { return Ok(f()) };
    std::thread::scope(|s| {
        let h = s.spawn(|| -> Result<T, NetdevError> {
            enter_netns(ns)?;
            Ok(f())
        });
        match h.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_walker_stops_on_malformed_input_without_panicking() {
        let mut buf = Vec::new();
        push_attr(&mut buf, 3, b"eth0\0");
        push_attr(&mut buf, 4, &1500u32.to_ne_bytes());
        let got: Vec<_> = attrs(&buf).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], (3, &b"eth0\0"[..]));
        assert_eq!(u32_of(got[1].1), Some(1500));
        // length beyond the buffer, length < 4, truncated header
        for bad in [&[0xff, 0x00, 3, 0][..], &[2, 0, 3, 0], &[8, 0]] {
            assert_eq!(attrs(bad).count(), 0);
        }
        for n in 0..buf.len() {
            let _ = attrs(&buf[..n]).count();
            let _ = parse_newlink(&buf[..n]);
        }
    }

    #[test]
    fn loopback_is_found_up_and_unknown_names_are_reported() {
        let lo = link_by_name("lo").expect("lo exists in every namespace");
        assert_eq!(lo.name, "lo");
        assert!(lo.ifindex >= 1);
        assert!(lo.is_up());
        let again = link_by_index(lo.ifindex).unwrap();
        assert_eq!(again.name, "lo");
        match link_by_name("xload-nope0") {
            Err(NetdevError::NoSuchInterface(n)) => assert_eq!(n, "xload-nope0"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(link_by_name("a/b"), Err(NetdevError::BadName(_))));
        assert!(matches!(
            link_by_name("waytoolonginterfacename"),
            Err(NetdevError::BadName(_))
        ));
    }
}
