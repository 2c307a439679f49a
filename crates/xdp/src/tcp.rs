//! A purpose-built, sans-IO TCP/IPv4 client stack for AF_XDP: many client
//! connections from one owned address to one server, dispatched in O(1)
//! (the local port is the connection's index plus a base), only the
//! connections that have something to send are visited, and frames are
//! written straight into caller-owned buffers (UMEM frames).
//!
//! First steps of issue 23's `--engine xdp`: handshake with MSS, in-order
//! receive (a segment out of order is dropped and answered with a duplicate
//! ACK), the peer's window respected, cumulative ACKs piggybacked on the
//! next request and otherwise sent at the next [`Client::on_timer`] (a
//! delayed ACK), retransmission on an RTO (go-back-N from the oldest unacked
//! byte, the RTO doubling; RFC 6298 estimators with Karn's rule, floored
//! at Linux's 200 ms) and on three duplicate ACKs, FIN and RST both ways,
//! ARP answered for the owned address and the server's MAC learned from
//! its ARP traffic. Not yet: SACK, window scaling, out-of-order queueing,
//! IPv6.

use std::net::Ipv4Addr;

// Frame layout: Ethernet, IPv4 without options, TCP (MSS option on SYN).
const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const TCP_LEN: usize = 20;
const HDR_LEN: usize = ETH_LEN + IP_LEN + TCP_LEN;
const ETH_TYPE: usize = 12;
const IP_TOTAL_LEN: usize = ETH_LEN + 2;
const IP_ID: usize = ETH_LEN + 4;
const IP_PROTO: usize = ETH_LEN + 9;
const IP_CSUM: usize = ETH_LEN + 10;
const IP_SRC: usize = ETH_LEN + 12;
const IP_DST: usize = ETH_LEN + 16;
const TCP_SPORT: usize = ETH_LEN + IP_LEN;
const TCP_DPORT: usize = TCP_SPORT + 2;
const TCP_SEQ: usize = TCP_SPORT + 4;
const TCP_ACK: usize = TCP_SPORT + 8;
const TCP_OFF: usize = TCP_SPORT + 12;
const TCP_FLAGS: usize = TCP_SPORT + 13;
const TCP_WIN: usize = TCP_SPORT + 14;
const TCP_CSUM: usize = TCP_SPORT + 16;
// ARP (Ethernet/IPv4) fields.
const ARP_OP: usize = ETH_LEN + 6;
const ARP_SHA: usize = ETH_LEN + 8;
const ARP_SPA: usize = ETH_LEN + 14;
const ARP_THA: usize = ETH_LEN + 18;
const ARP_TPA: usize = ETH_LEN + 24;
const ARP_FRAME_LEN: usize = ETH_LEN + 28;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// MSS we advertise (Ethernet MTU 1500).
pub const OUR_MSS: u16 = 1460;
/// Receive window we advertise: data is handed over at once.
const OUR_WINDOW: u16 = 65_535;
/// Initial RTO (RFC 6298 says 1 s; a LAN lab wants less), its floor
/// (Linux's) and ceiling, and the clock granularity G of RFC 6298.
const RTO_INITIAL_NS: u64 = 200_000_000;
const RTO_MIN_NS: u64 = 200_000_000;
const RTO_MAX_NS: u64 = 60_000_000_000;
const CLOCK_G_NS: u64 = 1_000_000;
/// Retransmissions of one segment before the connection is given up.
const MAX_RETRIES: u32 = 8;
/// Largest frame [`Client::transmit`] writes.
pub const MAX_FRAME: usize = ETH_LEN + 1500;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Closed,
    SynSent,
    Established,
    /// Our FIN is out (or queued behind data).
    FinWait,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both FINs seen and ours acknowledged: done.
    Done,
    /// Reset by the peer, or given up after retries.
    Failed,
}

/// Why a connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// RST to our SYN: nothing listens there.
    Refused,
    /// RST on an open connection.
    Reset,
    /// No answer after [`MAX_RETRIES`] retransmissions.
    TimedOut,
}

/// What a received frame meant for the application.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Nothing for the application (ARP, pure ACK, stray frame).
    None,
    /// Connection `conn` is established.
    Connected(u32),
    /// In-order bytes on `conn`.
    Data(u32, &'a [u8]),
    /// The peer closed `conn` (after the data it sent).
    PeerClosed(u32),
    /// `conn` failed.
    Failed(u32, Failure),
}

#[derive(Debug, Clone)]
struct Conn {
    state: State,
    failure: Option<Failure>,
    /// Oldest unacknowledged sequence number and the next one to send.
    snd_una: u32,
    snd_nxt: u32,
    /// The highest sequence number sent (above `snd_nxt` after a
    /// go-back-N retransmission): ACKs up to it are valid.
    snd_max: u32,
    /// Initial send sequence number (the SYN's).
    iss: u32,
    /// Next sequence number expected from the peer.
    rcv_nxt: u32,
    peer_window: u32,
    peer_mss: u16,
    /// Bytes from `snd_una` on: sent and unacked, then not yet sent.
    unacked: Vec<u8>,
    /// Our FIN is queued (sent after `unacked`), and acknowledged.
    fin_queued: bool,
    fin_acked: bool,
    /// The peer's FIN came (in order).
    peer_fin: bool,
    /// Bytes received since our last ACK.
    rx_unacked: u32,
    /// An ACK is owed to the peer.
    ack_owed: bool,
    dup_acks: u32,
    /// When the oldest unacked segment times out (0: no timer).
    rto_at_ns: u64,
    rto_ns: u64,
    /// RFC 6298 estimators (0 before the first sample), and the segment
    /// being timed: the sequence number whose ACK ends it, and when it left
    /// (one at a time; never a retransmitted one, per Karn).
    srtt_ns: u64,
    rttvar_ns: u64,
    rtt_seq: Option<u32>,
    rtt_sent_ns: u64,
    retries: u32,
    /// A RST with this sequence number is owed: to the peer's state of an
    /// aborted connection, or to an ACK that does not acknowledge our SYN.
    rst_seq: Option<u32>,
    /// In the dirty list.
    dirty: bool,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            state: State::Closed,
            failure: None,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            iss: 0,
            rcv_nxt: 0,
            peer_window: 0,
            peer_mss: 536,
            unacked: Vec::new(),
            fin_queued: false,
            fin_acked: false,
            peer_fin: false,
            rx_unacked: 0,
            ack_owed: false,
            dup_acks: 0,
            rto_at_ns: 0,
            rto_ns: RTO_INITIAL_NS,
            srtt_ns: 0,
            rttvar_ns: 0,
            rtt_seq: None,
            rtt_sent_ns: 0,
            retries: 0,
            rst_seq: None,
            dirty: false,
        }
    }

    /// Sequence space from the oldest unacked byte to `snd_nxt` (SYN and
    /// FIN count one each).
    fn in_flight(&self) -> u32 {
        self.snd_nxt.wrapping_sub(self.snd_una)
    }

    /// Takes an RTT sample (RFC 6298 2.2 and 2.3) and sets the RTO from it.
    fn rtt_sample(&mut self, r_ns: u64) {
        if self.srtt_ns == 0 {
            self.srtt_ns = r_ns.max(1);
            self.rttvar_ns = r_ns / 2;
        } else {
            let delta = self.srtt_ns.abs_diff(r_ns);
            self.rttvar_ns = (3 * self.rttvar_ns + delta) / 4;
            self.srtt_ns = (7 * self.srtt_ns + r_ns) / 8;
        }
        self.rto_ns = self.base_rto();
    }

    /// The RTO the estimators give (the initial one before a sample).
    fn base_rto(&self) -> u64 {
        if self.srtt_ns == 0 {
            return RTO_INITIAL_NS;
        }
        (self.srtt_ns + CLOCK_G_NS.max(4 * self.rttvar_ns)).clamp(RTO_MIN_NS, RTO_MAX_NS)
    }

    /// Sequence space ever sent and not yet acknowledged.
    fn outstanding(&self) -> u32 {
        self.snd_max.wrapping_sub(self.snd_una)
    }

    /// Offset into `unacked` of `snd_nxt` (the SYN is not in `unacked`).
    fn sent_bytes(&self) -> usize {
        let syn = u32::from(self.state == State::SynSent);
        (self.in_flight().saturating_sub(syn) as usize).min(self.unacked.len())
    }

    /// Our FIN is on the wire (in flight, or acknowledged).
    fn fin_sent(&self) -> bool {
        self.fin_acked || (self.fin_queued && self.outstanding() as usize > self.unacked.len())
    }

    /// The state the FIN flags say, for an open connection.
    fn settle(&mut self) {
        if matches!(self.state, State::Closed | State::SynSent | State::Failed) {
            return;
        }
        self.state = match (self.fin_queued, self.peer_fin) {
            _ if self.peer_fin && self.fin_acked => State::Done,
            (true, _) => State::FinWait,
            (false, true) => State::CloseWait,
            (false, false) => State::Established,
        };
    }
}

/// Counters of the stack's own work, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub frames_in: u64,
    pub frames_out: u64,
    pub retransmits: u64,
    pub fast_retransmits: u64,
    pub out_of_order: u64,
    pub bad_checksums: u64,
    pub arp_replies: u64,
}

/// The client side of many TCP connections to one server.
#[derive(Debug)]
pub struct Client {
    pub mac: [u8; 6],
    pub ip: Ipv4Addr,
    pub server_ip: Ipv4Addr,
    pub server_port: u16,
    /// The server's (next hop's) MAC, once learned.
    pub server_mac: Option<[u8; 6]>,
    port_base: u16,
    conns: Vec<Conn>,
    dirty: Vec<u32>,
    /// An ARP reply (to this MAC and IP) or request is owed.
    arp_reply_to: Option<([u8; 6], [u8; 4])>,
    arp_request: bool,
    ip_id: u16,
    seed: u64,
    pub counters: Counters,
}

impl Client {
    /// `conns` connections from ports `port_base..port_base + conns`.
    pub fn new(
        mac: [u8; 6],
        ip: Ipv4Addr,
        server_ip: Ipv4Addr,
        server_port: u16,
        port_base: u16,
        conns: u32,
        seed: u64,
    ) -> Client {
        Client {
            mac,
            ip,
            server_ip,
            server_port,
            server_mac: None,
            port_base,
            conns: (0..conns).map(|_| Conn::new()).collect(),
            dirty: Vec::with_capacity(conns as usize),
            arp_reply_to: None,
            arp_request: false,
            ip_id: 0,
            seed: seed | 1,
            counters: Counters::default(),
        }
    }

    pub fn state(&self, conn: u32) -> State {
        self.conns[conn as usize].state
    }

    /// Number of connections.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    fn mark(&mut self, conn: u32) {
        let c = &mut self.conns[conn as usize];
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(conn);
        }
    }

    fn next_isn(&mut self) -> u32 {
        // xorshift64*: fresh ISNs per connection (and per reopen).
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        (self.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    /// Starts connecting `conn` (a fresh ISN each time); asks for the
    /// server's MAC first if it is not known. A connection still open is
    /// aborted first (RST). On a port used before, the ISN is well above
    /// the old connection's sequence numbers, so a server still holding
    /// that connection in TIME_WAIT accepts the new SYN.
    pub fn connect(&mut self, conn: u32) {
        let rand = self.next_isn();
        let c = &self.conns[conn as usize];
        let iss = match c.state {
            State::Closed if c.snd_max == 0 && c.rst_seq.is_none() => rand,
            _ => c.snd_max.wrapping_add(1 << 24).wrapping_add(rand & 0xffff),
        };
        self.abort(conn);
        let c = &mut self.conns[conn as usize];
        let rst_seq = c.rst_seq;
        *c = Conn::new();
        c.rst_seq = rst_seq;
        c.state = State::SynSent;
        c.iss = iss;
        c.snd_una = iss;
        c.snd_nxt = iss;
        c.snd_max = iss;
        if self.server_mac.is_none() {
            self.arp_request = true;
        }
        self.mark(conn);
    }

    /// Queues `data` on `conn`; false if the connection cannot send.
    pub fn send(&mut self, conn: u32, data: &[u8]) -> bool {
        let c = &mut self.conns[conn as usize];
        if !matches!(c.state, State::Established | State::CloseWait) || c.fin_queued {
            return false;
        }
        c.unacked.extend_from_slice(data);
        self.mark(conn);
        true
    }

    /// Drops `conn` at once: a RST goes out if the peer may hold state for
    /// it (a SYN or data was sent and the connection is not finished).
    pub fn abort(&mut self, conn: u32) {
        let c = &mut self.conns[conn as usize];
        let live = match c.state {
            State::SynSent => c.snd_max != c.iss,
            State::Established | State::FinWait | State::CloseWait => true,
            State::Closed | State::Done | State::Failed => false,
        };
        if live {
            c.rst_seq = Some(c.snd_max);
        }
        c.state = State::Closed;
        c.rto_at_ns = 0;
        c.ack_owed = false;
        if live {
            self.mark(conn);
        }
    }

    /// Closes `conn` after what is queued (FIN).
    pub fn close(&mut self, conn: u32) {
        let c = &mut self.conns[conn as usize];
        match c.state {
            State::Established | State::CloseWait => {
                c.fin_queued = true;
                c.settle();
                self.mark(conn);
            }
            State::SynSent => c.state = State::Closed,
            _ => {}
        }
    }

    /// Bytes queued or in flight on `conn`.
    pub fn unacked(&self, conn: u32) -> usize {
        self.conns[conn as usize].unacked.len()
    }

    /// Handles one received frame.
    pub fn receive<'f>(&mut self, frame: &'f [u8], now_ns: u64) -> Event<'f> {
        self.counters.frames_in += 1;
        if frame.len() < ETH_LEN + 20 {
            return Event::None;
        }
        match [frame[ETH_TYPE], frame[ETH_TYPE + 1]] {
            [0x08, 0x06] => {
                self.receive_arp(frame);
                Event::None
            }
            [0x08, 0x00] => self.receive_ipv4(frame, now_ns),
            _ => Event::None,
        }
    }

    fn receive_arp(&mut self, f: &[u8]) {
        if f.len() < ARP_FRAME_LEN || f[ARP_TPA..ARP_TPA + 4] != self.ip.octets() {
            return;
        }
        let sha: [u8; 6] = f[ARP_SHA..ARP_SHA + 6].try_into().unwrap_or_default();
        let spa: [u8; 4] = f[ARP_SPA..ARP_SPA + 4].try_into().unwrap_or_default();
        if spa == self.server_ip.octets() {
            self.server_mac = Some(sha);
            self.arp_request = false;
        }
        if f[ARP_OP..ARP_OP + 2] == [0, 1] {
            self.arp_reply_to = Some((sha, spa));
        }
    }

    fn receive_ipv4<'f>(&mut self, f: &'f [u8], now_ns: u64) -> Event<'f> {
        if f.len() < HDR_LEN || f[ETH_LEN] != 0x45 || f[IP_PROTO] != 6 {
            return Event::None;
        }
        if f[IP_SRC..IP_SRC + 4] != self.server_ip.octets()
            || f[IP_DST..IP_DST + 4] != self.ip.octets()
        {
            return Event::None;
        }
        let total = usize::from(u16::from_be_bytes([f[IP_TOTAL_LEN], f[IP_TOTAL_LEN + 1]]));
        if total < IP_LEN + TCP_LEN || ETH_LEN + total > f.len() {
            return Event::None;
        }
        let seg = &f[ETH_LEN + IP_LEN..ETH_LEN + total];
        if tcp_checksum(self.server_ip, self.ip, seg) != 0 {
            self.counters.bad_checksums += 1;
            return Event::None;
        }
        let sport = u16::from_be_bytes([f[TCP_SPORT], f[TCP_SPORT + 1]]);
        let dport = u16::from_be_bytes([f[TCP_DPORT], f[TCP_DPORT + 1]]);
        let idx = dport.wrapping_sub(self.port_base) as usize;
        if sport != self.server_port || idx >= self.conns.len() {
            return Event::None;
        }
        let off = usize::from(f[TCP_OFF] >> 4) * 4;
        if off < TCP_LEN || off > seg.len() {
            return Event::None;
        }
        let hdr = Segment {
            seq: be32(f, TCP_SEQ),
            ack: be32(f, TCP_ACK),
            flags: f[TCP_FLAGS],
            window: u32::from(u16::from_be_bytes([f[TCP_WIN], f[TCP_WIN + 1]])),
            mss: parse_mss(&seg[TCP_LEN..off]),
        };
        self.segment(idx as u32, hdr, &seg[off..], now_ns)
    }

    /// The per-connection TCP input for one segment.
    fn segment<'f>(&mut self, id: u32, s: Segment, payload: &'f [u8], now_ns: u64) -> Event<'f> {
        let c = &mut self.conns[id as usize];
        match c.state {
            State::Closed | State::Failed => return Event::None,
            State::SynSent => return self.syn_sent(id, s, now_ns),
            _ => {}
        }
        if s.flags & RST != 0 {
            if s.seq == c.rcv_nxt && c.state != State::Done {
                c.state = State::Failed;
                c.failure = Some(Failure::Reset);
                return Event::Failed(id, Failure::Reset);
            }
            return Event::None;
        }
        if s.flags & ACK != 0 {
            self.ack_input(id, s, payload.is_empty() && s.flags & FIN == 0, now_ns);
        }
        let c = &mut self.conns[id as usize];
        c.peer_window = s.window;
        let fin = s.flags & FIN != 0;
        if payload.is_empty() && !fin {
            return Event::None;
        }
        if s.seq != c.rcv_nxt || c.peer_fin {
            // Out of order, a retransmission, or after the peer's FIN: a
            // (duplicate) ACK says where we are.
            self.counters.out_of_order += 1;
            c.ack_owed = true;
            self.mark(id);
            return Event::None;
        }
        c.rcv_nxt = c.rcv_nxt.wrapping_add(payload.len() as u32);
        c.rx_unacked += payload.len() as u32;
        c.ack_owed = true;
        // RFC 1122/5681: ACK at least every second full-sized segment.
        if c.rx_unacked >= 2 * u32::from(c.peer_mss) {
            self.mark(id);
        }
        let c = &mut self.conns[id as usize];
        if fin {
            c.rcv_nxt = c.rcv_nxt.wrapping_add(1);
            c.peer_fin = true;
            c.settle();
            // The FIN is acknowledged at once.
            self.mark(id);
            if payload.is_empty() {
                return Event::PeerClosed(id);
            }
        }
        Event::Data(id, payload)
    }

    fn syn_sent<'f>(&mut self, id: u32, s: Segment, now_ns: u64) -> Event<'f> {
        let c = &mut self.conns[id as usize];
        let acks_syn = s.flags & ACK != 0 && s.ack == c.iss.wrapping_add(1);
        if s.flags & RST != 0 {
            if acks_syn {
                c.state = State::Failed;
                c.failure = Some(Failure::Refused);
                return Event::Failed(id, Failure::Refused);
            }
            return Event::None;
        }
        if s.flags & ACK != 0 && !acks_syn {
            // RFC 793: an ACK of something else (an older connection on
            // this port the peer still holds) is answered with a RST.
            c.rst_seq = Some(s.ack);
            self.mark(id);
            return Event::None;
        }
        if s.flags & SYN == 0 {
            return Event::None;
        }
        c.state = State::Established;
        c.snd_una = s.ack;
        c.rcv_nxt = s.seq.wrapping_add(1);
        c.peer_window = s.window;
        c.peer_mss = s.mss.unwrap_or(536).min(OUR_MSS);
        c.rto_at_ns = 0;
        if c.retries == 0 && c.rtt_seq.is_some() {
            c.rtt_sample(now_ns.saturating_sub(c.rtt_sent_ns));
        }
        c.rtt_seq = None;
        c.retries = 0;
        c.ack_owed = true;
        self.mark(id);
        Event::Connected(id)
    }

    fn ack_input(&mut self, id: u32, s: Segment, pure: bool, now_ns: u64) {
        let c = &mut self.conns[id as usize];
        let acked = s.ack.wrapping_sub(c.snd_una);
        if acked == 0 {
            // RFC 5681: a duplicate ACK carries no data and does not move the window.
            if pure && c.outstanding() > 0 && s.window == c.peer_window {
                c.dup_acks += 1;
                if c.dup_acks == 3 {
                    self.counters.fast_retransmits += 1;
                    c.snd_nxt = c.snd_una;
                    c.rtt_seq = None; // Karn: no sample from a resent segment
                    self.mark(id);
                }
            }
            return;
        }
        if acked > c.outstanding() {
            return; // acknowledges what we never sent
        }
        let fin_acked = !c.fin_acked && c.fin_sent() && acked == c.outstanding();
        let data = (acked as usize - usize::from(fin_acked)).min(c.unacked.len());
        c.unacked.drain(..data);
        c.snd_una = s.ack;
        if c.in_flight() > c.outstanding() {
            // A go-back-N resend is overtaken by the ACK of the original.
            c.snd_nxt = c.snd_una;
        }
        c.dup_acks = 0;
        if let Some(seq) = c.rtt_seq {
            if s.ack.wrapping_sub(seq) as i32 >= 0 {
                c.rtt_sample(now_ns.saturating_sub(c.rtt_sent_ns));
                c.rtt_seq = None;
            }
        }
        c.retries = 0;
        // New data acknowledged: the backed-off RTO returns to the estimate.
        c.rto_ns = c.base_rto();
        c.rto_at_ns = if c.outstanding() > 0 {
            now_ns + c.rto_ns
        } else {
            0
        };
        if fin_acked {
            c.fin_acked = true;
            c.settle();
        }
        if c.unacked.len() > c.sent_bytes() {
            self.mark(id);
        }
    }

    /// Retransmission timers and delayed ACKs. Walks every connection:
    /// call it every few milliseconds, not per frame.
    pub fn on_timer(&mut self, now_ns: u64) -> Vec<(u32, Failure)> {
        let mut failed = Vec::new();
        for id in 0..self.conns.len() as u32 {
            let c = &mut self.conns[id as usize];
            if matches!(c.state, State::Closed | State::Done | State::Failed) {
                continue;
            }
            if c.ack_owed && !c.dirty {
                self.mark(id);
                continue;
            }
            if c.rto_at_ns == 0 || now_ns < c.rto_at_ns {
                continue;
            }
            c.retries += 1;
            if c.retries > MAX_RETRIES {
                c.state = State::Failed;
                c.failure = Some(Failure::TimedOut);
                c.rto_at_ns = 0;
                failed.push((id, Failure::TimedOut));
                continue;
            }
            self.counters.retransmits += 1;
            c.rto_ns = (c.rto_ns * 2).min(RTO_MAX_NS);
            c.rto_at_ns = 0;
            c.snd_nxt = c.snd_una;
            c.rtt_seq = None; // Karn: no sample from a resent segment
            if self.server_mac.is_none() {
                self.arp_request = true;
            }
            self.mark(id);
        }
        failed
    }

    /// Writes the next owed frame into `buf` (at least [`MAX_FRAME`]
    /// bytes); returns its length, or `None` when nothing is owed.
    pub fn transmit(&mut self, buf: &mut [u8], now_ns: u64) -> Option<usize> {
        if let Some((mac, ip)) = self.arp_reply_to.take() {
            self.counters.arp_replies += 1;
            return Some(self.write_arp(buf, 2, mac, ip));
        }
        if self.arp_request && self.server_mac.is_none() {
            self.arp_request = false;
            return Some(self.write_arp(buf, 1, [0xff; 6], self.server_ip.octets()));
        }
        let server_mac = self.server_mac?;
        while let Some(&id) = self.dirty.last() {
            if let Some(len) = self.segment_out(id, buf, server_mac, now_ns) {
                self.counters.frames_out += 1;
                return Some(len);
            }
            self.dirty.pop();
            self.conns[id as usize].dirty = false;
        }
        None
    }

    /// The next segment `id` owes (SYN, data, FIN or a bare ACK), if any.
    fn segment_out(&mut self, id: u32, buf: &mut [u8], mac: [u8; 6], now_ns: u64) -> Option<usize> {
        let port = self.port_base.wrapping_add(id as u16);
        let c = &mut self.conns[id as usize];
        if let Some(seq) = c.rst_seq.take() {
            let h = self.header(port, mac, seq, 0, RST, 0);
            return Some(write_segment(buf, &h, &[]));
        }
        let (flags, seq, payload) = match c.state {
            State::SynSent if c.in_flight() == 0 => (SYN, c.iss, 0..0),
            State::Established | State::FinWait | State::CloseWait | State::Done => {
                let from = c.sent_bytes();
                let window = (c.peer_window as usize).saturating_sub(from);
                let n = (c.unacked.len() - from)
                    .min(usize::from(c.peer_mss))
                    .min(window);
                if n > 0 {
                    (ACK | PSH, c.snd_nxt, from..from + n)
                } else if c.fin_queued && !c.fin_sent() && from == c.unacked.len() {
                    (ACK | FIN, c.snd_nxt, 0..0)
                } else if c.ack_owed {
                    (ACK, c.snd_nxt, 0..0)
                } else {
                    return None;
                }
            }
            _ => return None,
        };
        let consumes = payload.len() as u32 + u32::from(flags & (SYN | FIN) != 0);
        if consumes > 0 && c.snd_nxt == seq {
            let new = c.snd_nxt.wrapping_add(consumes).wrapping_sub(c.snd_max) as i32 > 0;
            c.snd_nxt = c.snd_nxt.wrapping_add(consumes);
            if new {
                c.snd_max = c.snd_nxt;
                // Time this segment unless one is being timed (never a resend).
                if c.rtt_seq.is_none() && c.retries == 0 {
                    c.rtt_seq = Some(c.snd_nxt);
                    c.rtt_sent_ns = now_ns;
                }
            }
            if c.rto_at_ns == 0 {
                c.rto_at_ns = now_ns + c.rto_ns;
            }
        }
        let ack = if flags & SYN != 0 { 0 } else { c.rcv_nxt };
        c.ack_owed = false;
        c.rx_unacked = 0;
        let flags = if flags & SYN != 0 { flags } else { flags | ACK };
        let h = self.header(port, mac, seq, ack, flags, OUR_WINDOW);
        let data = &self.conns[id as usize].unacked[payload];
        Some(write_segment(buf, &h, data))
    }

    /// The headers of a segment from local `port` to the server, with the
    /// next IP id.
    fn header(
        &mut self,
        port: u16,
        mac: [u8; 6],
        seq: u32,
        ack: u32,
        flags: u8,
        window: u16,
    ) -> Header {
        let ip_id = self.ip_id;
        self.ip_id = self.ip_id.wrapping_add(1);
        Header {
            src_mac: self.mac,
            dst_mac: mac,
            src: self.ip,
            dst: self.server_ip,
            ip_id,
            sport: port,
            dport: self.server_port,
            seq,
            ack,
            flags,
            window,
        }
    }

    fn write_arp(&self, buf: &mut [u8], op: u8, to_mac: [u8; 6], to_ip: [u8; 4]) -> usize {
        let f = &mut buf[..ARP_FRAME_LEN.max(60)];
        f.fill(0);
        f[0..6].copy_from_slice(&to_mac);
        f[6..12].copy_from_slice(&self.mac);
        f[ETH_TYPE..ETH_TYPE + 2].copy_from_slice(&[0x08, 0x06]);
        f[ETH_LEN..ETH_LEN + 6].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
        f[ARP_OP..ARP_OP + 2].copy_from_slice(&[0, op]);
        f[ARP_SHA..ARP_SHA + 6].copy_from_slice(&self.mac);
        f[ARP_SPA..ARP_SPA + 4].copy_from_slice(&self.ip.octets());
        let tha = if op == 1 { [0; 6] } else { to_mac };
        f[ARP_THA..ARP_THA + 6].copy_from_slice(&tha);
        f[ARP_TPA..ARP_TPA + 4].copy_from_slice(&to_ip);
        60
    }
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    seq: u32,
    ack: u32,
    flags: u8,
    window: u32,
    mss: Option<u16>,
}

/// The fields of one outgoing segment's headers.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ip_id: u16,
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
}

/// Writes Ethernet, IPv4 and TCP headers (with the MSS option on a SYN)
/// and `data` into `buf`, checksums included; returns the frame length.
pub fn write_segment(buf: &mut [u8], h: &Header, data: &[u8]) -> usize {
    let opt = if h.flags & SYN != 0 { 4 } else { 0 };
    let tcp_len = TCP_LEN + opt + data.len();
    let len = ETH_LEN + IP_LEN + tcp_len;
    let f = &mut buf[..len.max(60)];
    f[0..6].copy_from_slice(&h.dst_mac);
    f[6..12].copy_from_slice(&h.src_mac);
    f[ETH_TYPE..ETH_TYPE + 2].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[ETH_LEN..ETH_LEN + IP_LEN];
    ip.copy_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    f[IP_TOTAL_LEN..IP_TOTAL_LEN + 2].copy_from_slice(&((IP_LEN + tcp_len) as u16).to_be_bytes());
    f[IP_ID..IP_ID + 2].copy_from_slice(&h.ip_id.to_be_bytes());
    f[IP_SRC..IP_SRC + 4].copy_from_slice(&h.src.octets());
    f[IP_DST..IP_DST + 4].copy_from_slice(&h.dst.octets());
    let ip_sum = !fold(sum(&f[ETH_LEN..ETH_LEN + IP_LEN], 0));
    f[IP_CSUM..IP_CSUM + 2].copy_from_slice(&ip_sum.to_be_bytes());
    f[TCP_SPORT..TCP_SPORT + 2].copy_from_slice(&h.sport.to_be_bytes());
    f[TCP_DPORT..TCP_DPORT + 2].copy_from_slice(&h.dport.to_be_bytes());
    f[TCP_SEQ..TCP_SEQ + 4].copy_from_slice(&h.seq.to_be_bytes());
    f[TCP_ACK..TCP_ACK + 4].copy_from_slice(&h.ack.to_be_bytes());
    f[TCP_OFF] = (((TCP_LEN + opt) / 4) as u8) << 4;
    f[TCP_FLAGS] = h.flags;
    f[TCP_WIN..TCP_WIN + 2].copy_from_slice(&h.window.to_be_bytes());
    f[TCP_CSUM..TCP_CSUM + 4].fill(0);
    if opt > 0 {
        let m = OUR_MSS.to_be_bytes();
        f[HDR_LEN..HDR_LEN + 4].copy_from_slice(&[2, 4, m[0], m[1]]);
    }
    f[HDR_LEN + opt..len].copy_from_slice(data);
    f[len..].fill(0);
    let csum = tcp_checksum(h.src, h.dst, &f[ETH_LEN + IP_LEN..len]);
    f[TCP_CSUM..TCP_CSUM + 2].copy_from_slice(&csum.to_be_bytes());
    len.max(60)
}

fn be32(f: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]])
}

fn parse_mss(mut opts: &[u8]) -> Option<u16> {
    while let Some(&kind) = opts.first() {
        match kind {
            0 => return None,
            1 => opts = &opts[1..],
            _ => {
                let len = usize::from(*opts.get(1)?);
                if len < 2 || len > opts.len() {
                    return None;
                }
                if kind == 2 && len == 4 {
                    return Some(u16::from_be_bytes([opts[2], opts[3]]));
                }
                opts = &opts[len..];
            }
        }
    }
    None
}

/// One's complement sum of 16-bit big-endian words, not folded.
fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// TCP checksum of `seg` (header and data) with the IPv4 pseudo-header:
/// the value to store when the field is zero, and 0 when it checks out.
pub fn tcp_checksum(src: Ipv4Addr, dst: Ipv4Addr, seg: &[u8]) -> u16 {
    let mut acc = sum(&src.octets(), 0);
    acc = sum(&dst.octets(), acc);
    acc += 6 + seg.len() as u64;
    !fold(sum(seg, acc))
}

#[cfg(test)]
mod tests;
