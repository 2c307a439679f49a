//! Test frames: Ethernet + IPv4/IPv6 + UDP carrying the xload payload, built
//! once per flow and patched per packet.
//!
//! Payload layout (18 bytes, all the room a 64-byte IPv4 frame leaves):
//!
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 2    | run tag (random per sender process, big-endian)   |
//! | 2      | 8    | sequence number of the frame in its flow (LE)     |
//! | 10     | 8    | send time, `CLOCK_MONOTONIC` nanoseconds (LE)     |
//!
//! Frames longer than the minimum are padded with zeros. A flow is one UDP
//! source port; the receiver keys flows by (run tag, source port).
//!
//! The UDP checksum is kept correct cheaply: the template stores the
//! one's-complement sum of everything that does not change (pseudo-header,
//! UDP header, run tag, padding), and each packet adds the 16 bytes of
//! sequence and timestamp (RFC 1624 style incremental update). Both fields
//! start at even offsets from the UDP header, so they are whole 16-bit words.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A header field: its byte range from the start of its header (smoltcp's
/// `wire` convention), so the code names fields instead of offsets.
type Field = std::ops::Range<usize>;
/// Everything from an offset on.
type Rest = std::ops::RangeFrom<usize>;

/// Ethernet II header fields.
mod eth {
    use super::Field;
    pub(super) const DST: Field = 0..6;
    pub(super) const SRC: Field = 6..12;
    pub(super) const ETHERTYPE: Field = 12..14;
}

/// IPv4 header fields (RFC 791), without options.
mod ipv4 {
    use super::Field;
    /// Version (4) and header length in 32-bit words (5).
    pub(super) const VER_IHL: usize = 0;
    pub(super) const DSCP_ECN: usize = 1;
    pub(super) const LENGTH: Field = 2..4;
    pub(super) const IDENT: Field = 4..6;
    pub(super) const FLG_OFF: Field = 6..8;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Field = 10..12;
    pub(super) const SRC_ADDR: Field = 12..16;
    pub(super) const DST_ADDR: Field = 16..20;
}

/// IPv6 header fields (RFC 8200).
mod ipv6 {
    use super::Field;
    /// Version (6), traffic class and flow label.
    pub(super) const VER_TC_FLOW: Field = 0..4;
    pub(super) const LENGTH: Field = 4..6;
    pub(super) const NXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC_ADDR: Field = 8..24;
    pub(super) const DST_ADDR: Field = 24..40;
}

/// UDP header fields (RFC 768).
mod udp {
    use super::{Field, Rest};
    pub(super) const SRC_PORT: Field = 0..2;
    pub(super) const DST_PORT: Field = 2..4;
    pub(super) const LENGTH: Field = 4..6;
    pub(super) const CHECKSUM: Field = 6..8;
    pub(super) const PAYLOAD: Rest = 8..;
}

/// The xload payload fields (see the table above), from the start of the UDP payload.
mod payload {
    use super::Field;
    pub(super) const RUN_TAG: Field = 0..2;
    pub(super) const SEQ: Field = 2..10;
    pub(super) const TX_NS: Field = 10..18;
}

/// A big-endian 16-bit field.
#[inline]
fn be16(field: &[u8]) -> u16 {
    u16::from_be_bytes([field[0], field[1]])
}

/// Bytes of the xload payload (run tag, sequence, timestamp).
pub const PAYLOAD_LEN: usize = payload::TX_NS.end;
/// Ethernet frame check sequence, added by the device, not in our buffers.
pub const FCS_LEN: usize = 4;
/// Preamble + start delimiter (8) and inter-frame gap (12) on the wire.
pub const WIRE_OVERHEAD_LEN: usize = 20;
/// Ethernet header without VLAN tag.
pub const ETH_HEADER_LEN: usize = eth::ETHERTYPE.end;
const IPV4_HEADER_LEN: usize = ipv4::DST_ADDR.end;
const IPV6_HEADER_LEN: usize = ipv6::DST_ADDR.end;
const UDP_HEADER_LEN: usize = udp::PAYLOAD.start;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const IPPROTO_UDP: u8 = 17;

/// An Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MacAddr(pub [u8; 6]);

/// Why a MAC address string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {input:?}: expected six hex byte pairs like 02:00:00:00:00:01")]
pub struct MacParseError {
    /// The rejected text.
    pub input: String,
}

impl FromStr for MacAddr {
    type Err = MacParseError;

    /// Accepts `aa:bb:cc:dd:ee:ff` and `aa-bb-cc-dd-ee-ff` (hex, either case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || MacParseError {
            input: s.to_string(),
        };
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split(sep) {
            if n == 6 || part.len() != 2 {
                return Err(err());
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| err())?;
            n += 1;
        }
        if n != 6 {
            return Err(err());
        }
        Ok(MacAddr(out))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// What to put in the headers of one flow's frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSpec {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    /// Frame size on the wire including the 4-byte FCS (the usual "64-byte
    /// frame"); the buffer we build is 4 bytes shorter.
    pub wire_size: usize,
    /// Random per sender process; lets a receiver tell runs apart.
    pub run_tag: u16,
}

/// Why a frame could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Source and destination addresses are of different IP versions.
    #[error("source {src} and destination {dst} are not the same IP version")]
    MixedFamilies { src: IpAddr, dst: IpAddr },
    /// The size cannot hold the headers and the 18-byte payload.
    #[error("frame size {size} B is too small for {family} UDP with the {PAYLOAD_LEN}-byte xload payload: minimum is {min} B (including 4 B FCS)")]
    TooSmall {
        size: usize,
        min: usize,
        family: &'static str,
    },
    /// The size exceeds what a UDP datagram length field can describe.
    #[error("frame size {size} B is too large (maximum {max} B)")]
    TooLarge { size: usize, max: usize },
}

/// Minimum wire size (with FCS) for a frame of the given IP version.
pub fn min_wire_size(ipv6: bool) -> usize {
    let l3 = if ipv6 {
        IPV6_HEADER_LEN
    } else {
        IPV4_HEADER_LEN
    };
    ETH_HEADER_LEN + l3 + UDP_HEADER_LEN + PAYLOAD_LEN + FCS_LEN
}

/// A prebuilt frame for one flow; [`FrameTemplate::write`] stamps a copy.
#[derive(Debug, Clone)]
pub struct FrameTemplate {
    bytes: Vec<u8>,
    /// Offset of the UDP header.
    udp_off: usize,
    /// One's-complement sum (not folded, not inverted) of the pseudo-header
    /// and the UDP segment with sequence and timestamp set to zero.
    static_sum: u64,
}

impl FrameTemplate {
    /// Builds the template; every checksum is computed here once.
    pub fn new(spec: &FrameSpec) -> Result<Self, FrameError> {
        let ipv6 = match (spec.src_ip, spec.dst_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => false,
            (IpAddr::V6(_), IpAddr::V6(_)) => true,
            (src, dst) => return Err(FrameError::MixedFamilies { src, dst }),
        };
        let min = min_wire_size(ipv6);
        if spec.wire_size < min {
            return Err(FrameError::TooSmall {
                size: spec.wire_size,
                min,
                family: if ipv6 { "IPv6" } else { "IPv4" },
            });
        }
        let max = 9000 + ETH_HEADER_LEN + FCS_LEN;
        if spec.wire_size > max {
            return Err(FrameError::TooLarge {
                size: spec.wire_size,
                max,
            });
        }
        let len = spec.wire_size - FCS_LEN;
        let mut b = vec![0u8; len];
        b[eth::DST].copy_from_slice(&spec.dst_mac.0);
        b[eth::SRC].copy_from_slice(&spec.src_mac.0);
        let l3 = ETH_HEADER_LEN;
        let udp_off;
        let mut pseudo_sum: u64 = 0;
        match (spec.src_ip, spec.dst_ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                b[eth::ETHERTYPE].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                udp_off = l3 + IPV4_HEADER_LEN;
                let total_len = (len - l3) as u16;
                let ip = &mut b[l3..l3 + IPV4_HEADER_LEN];
                ip[ipv4::VER_IHL] = 0x45;
                ip[ipv4::DSCP_ECN] = 0;
                ip[ipv4::LENGTH].copy_from_slice(&total_len.to_be_bytes());
                ip[ipv4::IDENT].copy_from_slice(&0u16.to_be_bytes()); // atomic datagram (RFC 6864)
                ip[ipv4::FLG_OFF].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
                ip[ipv4::TTL] = 64;
                ip[ipv4::PROTOCOL] = IPPROTO_UDP;
                ip[ipv4::SRC_ADDR].copy_from_slice(&src.octets());
                ip[ipv4::DST_ADDR].copy_from_slice(&dst.octets());
                let csum = checksum_fold(sum_words(ip));
                ip[ipv4::CHECKSUM].copy_from_slice(&csum.to_be_bytes());
                pseudo_sum += sum_words(&src.octets());
                pseudo_sum += sum_words(&dst.octets());
                pseudo_sum += u64::from(IPPROTO_UDP);
                pseudo_sum += u64::from((len - udp_off) as u16);
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                b[eth::ETHERTYPE].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
                udp_off = l3 + IPV6_HEADER_LEN;
                let payload_len = (len - udp_off) as u16;
                let ip = &mut b[l3..l3 + IPV6_HEADER_LEN];
                ip[ipv6::VER_TC_FLOW].copy_from_slice(&0x6000_0000u32.to_be_bytes());
                ip[ipv6::LENGTH].copy_from_slice(&payload_len.to_be_bytes());
                ip[ipv6::NXT_HEADER] = IPPROTO_UDP;
                ip[ipv6::HOP_LIMIT] = 64;
                ip[ipv6::SRC_ADDR].copy_from_slice(&src.octets());
                ip[ipv6::DST_ADDR].copy_from_slice(&dst.octets());
                pseudo_sum += sum_words(&src.octets());
                pseudo_sum += sum_words(&dst.octets());
                pseudo_sum += u64::from(payload_len);
                pseudo_sum += u64::from(IPPROTO_UDP);
            }
            _ => unreachable!("families checked above"),
        }
        let udp_len = (len - udp_off) as u16;
        {
            let udp = &mut b[udp_off..];
            udp[udp::SRC_PORT].copy_from_slice(&spec.src_port.to_be_bytes());
            udp[udp::DST_PORT].copy_from_slice(&spec.dst_port.to_be_bytes());
            udp[udp::LENGTH].copy_from_slice(&udp_len.to_be_bytes());
            udp[udp::CHECKSUM].copy_from_slice(&0u16.to_be_bytes());
            udp[udp::PAYLOAD][payload::RUN_TAG].copy_from_slice(&spec.run_tag.to_be_bytes());
        }
        let static_sum = pseudo_sum + sum_words(&b[udp_off..]);
        Ok(FrameTemplate {
            bytes: b,
            udp_off,
            static_sum,
        })
    }

    /// Length of the frame buffer (wire size minus FCS).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: a template holds at least the headers.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The frame with sequence 0 and timestamp 0 (checksum not yet set).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Writes the frame for `seq` sent at `tx_ns` into `buf`, which must be
    /// exactly [`FrameTemplate::len`] bytes; returns false (and writes
    /// nothing) when it is not.
    #[inline]
    pub fn write(&self, buf: &mut [u8], seq: u64, tx_ns: u64) -> bool {
        if buf.len() != self.bytes.len() {
            return false;
        }
        buf.copy_from_slice(&self.bytes);
        self.stamp(buf, seq, tx_ns);
        true
    }

    /// Patches sequence, timestamp and UDP checksum into a buffer that
    /// already holds this template's bytes (e.g. a UMEM frame reused for the
    /// same flow).
    #[inline]
    pub fn stamp(&self, buf: &mut [u8], seq: u64, tx_ns: u64) {
        let seq_bytes = seq.to_le_bytes();
        let ts_bytes = tx_ns.to_le_bytes();
        let udp = &mut buf[self.udp_off..];
        udp[udp::PAYLOAD][payload::SEQ].copy_from_slice(&seq_bytes);
        udp[udp::PAYLOAD][payload::TX_NS].copy_from_slice(&ts_bytes);
        let sum = self.static_sum + sum_words(&seq_bytes) + sum_words(&ts_bytes);
        let mut csum = checksum_fold(sum);
        if csum == 0 {
            // RFC 768: a computed zero is sent as all ones (0 means "none" in IPv4).
            csum = 0xffff;
        }
        udp[udp::CHECKSUM].copy_from_slice(&csum.to_be_bytes());
    }
}

/// Sum of big-endian 16-bit words (odd trailing byte padded with zero),
/// not folded.
#[inline]
pub fn sum_words(data: &[u8]) -> u64 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// Folds a one's-complement sum to 16 bits and inverts it.
#[inline]
pub fn checksum_fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// One received xload frame, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedFrame {
    pub ipv6: bool,
    pub src_port: u16,
    pub dst_port: u16,
    pub run_tag: u16,
    pub seq: u64,
    pub tx_ns: u64,
    /// False when the IPv4 header or UDP checksum does not verify.
    pub checksums_ok: bool,
}

/// Why a received frame is not an xload frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("frame shorter than its headers")]
    Truncated,
    #[error("not IPv4 or IPv6")]
    NotIp,
    #[error("IPv4 header with options or wrong version")]
    BadIpHeader,
    #[error("not UDP")]
    NotUdp,
    #[error("UDP length field disagrees with the frame")]
    BadLength,
    #[error("UDP payload shorter than the xload payload")]
    ShortPayload,
}

/// Decodes an xload frame; checksums are verified when `verify` is set
/// (otherwise `checksums_ok` is true).
pub fn parse(frame: &[u8], verify: bool) -> Result<ParsedFrame, ParseError> {
    if frame.len() < ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN {
        return Err(ParseError::Truncated);
    }
    let ethertype = be16(&frame[eth::ETHERTYPE]);
    let l3 = ETH_HEADER_LEN;
    let (ipv6, udp_off, pseudo_sum, ip_ok) = match ethertype {
        ETHERTYPE_IPV4 => {
            let ip = &frame[l3..l3 + IPV4_HEADER_LEN];
            if ip[ipv4::VER_IHL] != 0x45 {
                return Err(ParseError::BadIpHeader);
            }
            if ip[ipv4::PROTOCOL] != IPPROTO_UDP {
                return Err(ParseError::NotUdp);
            }
            let udp_off = l3 + IPV4_HEADER_LEN;
            let mut ok = true;
            let mut pseudo = 0;
            if verify {
                ok = checksum_fold(sum_words(ip)) == 0;
                pseudo = sum_words(&ip[ipv4::SRC_ADDR.start..ipv4::DST_ADDR.end])
                    + u64::from(IPPROTO_UDP);
            }
            (false, udp_off, pseudo, ok)
        }
        ETHERTYPE_IPV6 => {
            if frame.len() < l3 + IPV6_HEADER_LEN + UDP_HEADER_LEN {
                return Err(ParseError::Truncated);
            }
            let ip = &frame[l3..l3 + IPV6_HEADER_LEN];
            if ip[ipv6::NXT_HEADER] != IPPROTO_UDP {
                return Err(ParseError::NotUdp);
            }
            let pseudo = if verify {
                sum_words(&ip[ipv6::SRC_ADDR.start..ipv6::DST_ADDR.end]) + u64::from(IPPROTO_UDP)
            } else {
                0
            };
            (true, l3 + IPV6_HEADER_LEN, pseudo, true)
        }
        _ => return Err(ParseError::NotIp),
    };
    let udp = &frame[udp_off..];
    let udp_len = usize::from(be16(&udp[udp::LENGTH]));
    if udp_len < UDP_HEADER_LEN || udp_len > udp.len() {
        return Err(ParseError::BadLength);
    }
    if udp_len < UDP_HEADER_LEN + PAYLOAD_LEN {
        return Err(ParseError::ShortPayload);
    }
    let udp = &udp[..udp_len];
    let mut checksums_ok = ip_ok;
    if verify {
        let wire_csum = be16(&udp[udp::CHECKSUM]);
        // IPv4 may omit the UDP checksum (0); IPv6 may not.
        if ipv6 || wire_csum != 0 {
            let sum = pseudo_sum + udp_len as u64 + sum_words(udp);
            checksums_ok &= checksum_fold(sum) == 0;
        }
    }
    let p = &udp[udp::PAYLOAD];
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&p[payload::SEQ]);
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&p[payload::TX_NS]);
    Ok(ParsedFrame {
        ipv6,
        src_port: be16(&udp[udp::SRC_PORT]),
        dst_port: be16(&udp[udp::DST_PORT]),
        run_tag: be16(&p[payload::RUN_TAG]),
        seq: u64::from_le_bytes(seq),
        tx_ns: u64::from_le_bytes(ts),
        checksums_ok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn spec(src: IpAddr, dst: IpAddr, wire_size: usize) -> FrameSpec {
        FrameSpec {
            src_mac: "02:00:00:00:00:01".parse().unwrap(),
            dst_mac: "02:00:00:00:00:02".parse().unwrap(),
            src_ip: src,
            dst_ip: dst,
            src_port: 10007,
            dst_port: 9,
            wire_size,
            run_tag: 0xbeef,
        }
    }

    /// Reference RFC 1071 checksum written the textbook way (byte loop,
    /// fold at the end), independent of `sum_words`.
    fn rfc1071(parts: &[&[u8]]) -> u16 {
        let mut all = Vec::new();
        for p in parts {
            all.extend_from_slice(p);
        }
        if all.len() % 2 == 1 {
            all.push(0);
        }
        let mut sum: u32 = 0;
        for i in (0..all.len()).step_by(2) {
            sum += (u32::from(all[i]) << 8) | u32::from(all[i + 1]);
        }
        while sum > 0xffff {
            sum = (sum >> 16) + (sum & 0xffff);
        }
        !(sum as u16)
    }

    fn v4() -> (IpAddr, IpAddr) {
        (
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
        )
    }

    fn v6() -> (IpAddr, IpAddr) {
        (
            IpAddr::V6("2001:2::1".parse::<Ipv6Addr>().unwrap()),
            IpAddr::V6("2001:2::2".parse::<Ipv6Addr>().unwrap()),
        )
    }

    #[test]
    fn mac_parses_colon_and_dash_forms_and_rejects_garbage() {
        let m: MacAddr = "0A:1b:2C:3d:4E:5f".parse().unwrap();
        assert_eq!(m.0, [0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f]);
        assert_eq!(m.to_string(), "0a:1b:2c:3d:4e:5f");
        let d: MacAddr = "0a-1b-2c-3d-4e-5f".parse().unwrap();
        assert_eq!(d, m);
        for bad in [
            "",
            "0a:1b:2c:3d:4e",
            "0a:1b:2c:3d:4e:5f:60",
            "0a:1b:2c:3d:4e:5g",
            "a:1b:2c:3d:4e:5f",
            "0a1b2c3d4e5f",
            "0a:1b:2c:3d:4e:5f:",
            "zz:zz:zz:zz:zz:zz",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn ipv4_64_byte_frame_has_valid_ip_and_udp_checksums() {
        let (s, d) = v4();
        let t = FrameTemplate::new(&spec(s, d, 64)).unwrap();
        assert_eq!(t.len(), 60);
        let mut buf = vec![0u8; 60];
        for (seq, ts) in [
            (0u64, 0u64),
            (1, 2),
            (u64::MAX, u64::MAX),
            (0x0123_4567_89ab_cdef, 987_654_321),
        ] {
            assert!(t.write(&mut buf, seq, ts));
            let ip = &buf[14..34];
            assert_eq!(rfc1071(&[ip]), 0, "IPv4 header checksum");
            let udp = &buf[34..60];
            assert_ne!(u16::from_be_bytes([udp[6], udp[7]]), 0);
            let pseudo = [&ip[12..20], &[0, 17], &(26u16).to_be_bytes()[..]].concat();
            assert_eq!(rfc1071(&[&pseudo, udp]), 0, "UDP checksum for seq {seq}");
            let p = parse(&buf, true).unwrap();
            assert!(p.checksums_ok);
            assert_eq!(
                (p.seq, p.tx_ns, p.run_tag, p.src_port, p.dst_port),
                (seq, ts, 0xbeef, 10007, 9)
            );
            assert!(!p.ipv6);
        }
        assert_eq!(u16::from_be_bytes([buf[12], buf[13]]), 0x0800);
        assert_eq!(
            u16::from_be_bytes([buf[16], buf[17]]),
            46,
            "IPv4 total length"
        );
        assert_eq!(u16::from_be_bytes([buf[38], buf[39]]), 26, "UDP length");
    }

    #[test]
    fn ipv6_frame_has_valid_udp_checksum_and_lengths() {
        let (s, d) = v6();
        let t = FrameTemplate::new(&spec(s, d, 128)).unwrap();
        assert_eq!(t.len(), 124);
        let mut buf = vec![0u8; 124];
        assert!(t.write(&mut buf, 42, 7));
        let ip = &buf[14..54];
        assert_eq!(ip[0] >> 4, 6);
        let udp = &buf[54..];
        assert_eq!(udp.len(), 70);
        assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 70);
        let pseudo = [&ip[8..40], &70u32.to_be_bytes()[..], &[0, 0, 0, 17]].concat();
        assert_eq!(rfc1071(&[&pseudo, udp]), 0);
        let p = parse(&buf, true).unwrap();
        assert!(p.ipv6 && p.checksums_ok);
        assert_eq!((p.seq, p.tx_ns), (42, 7));
    }

    #[test]
    fn incremental_checksum_matches_full_recompute_over_many_values() {
        let (s, d) = v4();
        let t = FrameTemplate::new(&spec(s, d, 64)).unwrap();
        let mut buf = vec![0u8; 60];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            assert!(t.write(&mut buf, x, x.rotate_left(17)));
            let ip = &buf[14..34];
            let pseudo = [&ip[12..20], &[0, 17], &(26u16).to_be_bytes()[..]].concat();
            assert_eq!(rfc1071(&[&pseudo, &buf[34..60]]), 0);
        }
    }

    #[test]
    fn corrupted_frame_fails_checksum_verification() {
        let (s, d) = v4();
        let t = FrameTemplate::new(&spec(s, d, 64)).unwrap();
        let mut buf = vec![0u8; 60];
        t.write(&mut buf, 5, 6);
        buf[50] ^= 0x01;
        assert!(!parse(&buf, true).unwrap().checksums_ok);
        assert!(parse(&buf, false).unwrap().checksums_ok);
        t.write(&mut buf, 5, 6);
        buf[22] ^= 0x01; // TTL: IPv4 header checksum breaks
        assert!(!parse(&buf, true).unwrap().checksums_ok);
    }

    #[test]
    fn sizes_below_minimum_are_rejected_with_the_minimum() {
        let (s, d) = v4();
        assert_eq!(min_wire_size(false), 64);
        assert!(matches!(
            FrameTemplate::new(&spec(s, d, 63)),
            Err(FrameError::TooSmall { min: 64, .. })
        ));
        let (s6, d6) = v6();
        assert_eq!(min_wire_size(true), 84);
        let e = FrameTemplate::new(&spec(s6, d6, 64)).unwrap_err();
        assert!(e.to_string().contains("minimum is 84"), "{e}");
        assert!(matches!(
            FrameTemplate::new(&spec(s, d6, 100)),
            Err(FrameError::MixedFamilies { .. })
        ));
    }

    #[test]
    fn larger_frames_are_zero_padded_and_parse() {
        let (s, d) = v4();
        let t = FrameTemplate::new(&spec(s, d, 1518)).unwrap();
        let mut buf = vec![0u8; 1514];
        t.write(&mut buf, 1, 1);
        assert!(buf[60..].iter().all(|&b| b == 0));
        assert!(parse(&buf, true).unwrap().checksums_ok);
        assert!(
            !t.write(&mut buf[..100], 1, 1),
            "wrong buffer length must be refused"
        );
    }

    #[test]
    fn parser_rejects_non_xload_frames_without_panicking() {
        assert_eq!(parse(&[], true), Err(ParseError::Truncated));
        assert_eq!(parse(&[0u8; 41], true), Err(ParseError::Truncated));
        let mut arp = vec![0u8; 60];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(parse(&arp, true), Err(ParseError::NotIp));
        let (s, d) = v4();
        let t = FrameTemplate::new(&spec(s, d, 64)).unwrap();
        let mut buf = vec![0u8; 60];
        t.write(&mut buf, 1, 1);
        let mut tcp = buf.clone();
        tcp[23] = 6;
        assert_eq!(parse(&tcp, true), Err(ParseError::NotUdp));
        let mut long = buf.clone();
        long[38..40].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(parse(&long, true), Err(ParseError::BadLength));
        let mut short = buf.clone();
        short[38..40].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(parse(&short, true), Err(ParseError::ShortPayload));
        // Every truncation of a valid frame is an error or a valid parse, never a panic.
        for n in 0..buf.len() {
            let _ = parse(&buf[..n], true);
        }
        let (s6, d6) = v6();
        let t6 = FrameTemplate::new(&spec(s6, d6, 84)).unwrap();
        let mut b6 = vec![0u8; 80];
        t6.write(&mut b6, 1, 1);
        for n in 0..b6.len() {
            let _ = parse(&b6[..n], true);
        }
    }
}
