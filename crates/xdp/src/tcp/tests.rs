//! The client stack against a scripted server: frames in, frames out.

use super::*;

const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 3);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 2);
const BASE: u16 = 20_000;
const MS: u64 = 1_000_000;

/// A segment the client sent, parsed back.
#[derive(Debug)]
struct Out {
    sport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    mss: Option<u16>,
    data: Vec<u8>,
}

fn client(conns: u32) -> Client {
    Client::new(CLIENT_MAC, CLIENT_IP, SERVER_IP, 80, BASE, conns, 7)
}

fn arp(op: u8, tpa: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&CLIENT_MAC);
    f[6..12].copy_from_slice(&SERVER_MAC);
    f[12..14].copy_from_slice(&[8, 6]);
    f[14..20].copy_from_slice(&[0, 1, 8, 0, 6, 4]);
    f[20..22].copy_from_slice(&[0, op]);
    f[22..28].copy_from_slice(&SERVER_MAC);
    f[28..32].copy_from_slice(&SERVER_IP.octets());
    f[38..42].copy_from_slice(&tpa.octets());
    f
}

/// A segment from the server to connection `conn`.
fn from_server(conn: u32, seq: u32, ack: u32, flags: u8, data: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; MAX_FRAME];
    let len = write_segment(
        &mut buf,
        &Header {
            src_mac: SERVER_MAC,
            dst_mac: CLIENT_MAC,
            src: SERVER_IP,
            dst: CLIENT_IP,
            ip_id: 1,
            sport: 80,
            dport: BASE + conn as u16,
            seq,
            ack,
            flags,
            window: 65_535,
        },
        data,
    );
    buf.truncate(len);
    buf
}

/// Every frame the client owes now, parsed (ARP frames skipped).
fn drain(c: &mut Client, now: u64) -> Vec<Out> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; MAX_FRAME];
    while let Some(len) = c.transmit(&mut buf, now) {
        let f = &buf[..len];
        if f[12..14] != [8, 0] {
            continue;
        }
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let seg = &f[34..14 + total];
        assert_eq!(tcp_checksum(CLIENT_IP, SERVER_IP, seg), 0, "TCP checksum");
        assert_eq!(fold(sum(&f[14..34], 0)), 0xffff, "IPv4 header checksum");
        let off = usize::from(seg[12] >> 4) * 4;
        out.push(Out {
            sport: u16::from_be_bytes([seg[0], seg[1]]),
            seq: be32(seg, 4),
            ack: be32(seg, 8),
            flags: seg[13],
            mss: parse_mss(&seg[20..off]),
            data: seg[off..].to_vec(),
        });
    }
    out
}

/// Connection 0 established: returns (client, client ISN + 1, server seq).
fn established() -> (Client, u32, u32) {
    let mut c = client(1);
    c.connect(0);
    let mut buf = vec![0u8; MAX_FRAME];
    let len = c.transmit(&mut buf, 0).expect("an ARP request");
    assert_eq!(&buf[12..14], &[8, 6]);
    assert_eq!(&buf[20..22], &[0, 1], "ARP request");
    assert_eq!(&buf[38..42], &SERVER_IP.octets());
    assert!(len >= 42);
    assert_eq!(c.receive(&arp(2, CLIENT_IP), 0), Event::None);
    assert_eq!(c.server_mac, Some(SERVER_MAC));
    let syn = drain(&mut c, 0);
    assert_eq!(syn.len(), 1);
    assert_eq!(syn[0].flags, SYN);
    assert_eq!(syn[0].mss, Some(OUR_MSS));
    assert_eq!(syn[0].sport, BASE);
    let iss = syn[0].seq;
    let server_isn = 5000;
    let synack = from_server(0, server_isn, iss.wrapping_add(1), SYN | ACK, &[]);
    assert_eq!(c.receive(&synack, MS), Event::Connected(0));
    assert_eq!(c.state(0), State::Established);
    let ack = drain(&mut c, MS);
    assert_eq!(ack.len(), 1);
    assert_eq!((ack[0].flags, ack[0].ack), (ACK, server_isn + 1));
    (c, iss.wrapping_add(1), server_isn + 1)
}

#[test]
fn handshake_learns_the_mac_by_arp_and_sends_mss() {
    established();
}

#[test]
fn response_ack_rides_on_the_next_request() {
    let (mut c, seq, sseq) = established();
    assert!(c.send(0, b"GET / HTTP/1.1\r\n\r\n"));
    let req = drain(&mut c, 2 * MS);
    assert_eq!(req.len(), 1);
    assert_eq!((req[0].seq, req[0].data.len()), (seq, 18));
    let body = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let resp = from_server(0, sseq, seq + 18, ACK | PSH, body);
    assert_eq!(c.receive(&resp, 3 * MS), Event::Data(0, &body[..]));
    assert_eq!(c.unacked(0), 0, "the request is acknowledged");
    // No ACK of its own: it waits for the next request.
    assert!(drain(&mut c, 3 * MS).is_empty());
    assert!(c.send(0, b"GET / HTTP/1.1\r\n\r\n"));
    let next = drain(&mut c, 4 * MS);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].ack, sseq + body.len() as u32, "piggybacked ACK");
}

#[test]
fn an_ack_owed_goes_out_at_the_next_timer() {
    let (mut c, seq, sseq) = established();
    let resp = from_server(0, sseq, seq, ACK | PSH, b"hello");
    assert_eq!(c.receive(&resp, 2 * MS), Event::Data(0, &b"hello"[..]));
    assert!(drain(&mut c, 2 * MS).is_empty());
    assert!(c.on_timer(5 * MS).is_empty());
    let ack = drain(&mut c, 5 * MS);
    assert_eq!((ack.len(), ack[0].ack), (1, sseq + 5));
}

#[test]
fn rst_to_the_syn_is_refused() {
    let mut c = client(2);
    c.receive(&arp(2, CLIENT_IP), 0);
    c.connect(1);
    let syn = drain(&mut c, 0);
    let rst = from_server(1, 0, syn[0].seq + 1, RST | ACK, &[]);
    assert_eq!(c.receive(&rst, MS), Event::Failed(1, Failure::Refused));
    assert_eq!(c.state(1), State::Failed);
}

#[test]
fn a_silent_peer_times_out_after_the_retries() {
    let mut c = client(1);
    c.receive(&arp(2, CLIENT_IP), 0);
    c.connect(0);
    let first = drain(&mut c, 0);
    let mut now = 0;
    let mut syns = 1;
    loop {
        now += RTO_MAX_NS;
        if let Some(&(conn, why)) = c.on_timer(now).first() {
            assert_eq!((conn, why), (0, Failure::TimedOut));
            break;
        }
        let again = drain(&mut c, now);
        assert_eq!(again.len(), 1);
        assert_eq!(
            (again[0].flags, again[0].seq),
            (SYN, first[0].seq),
            "same ISN"
        );
        syns += 1;
    }
    assert_eq!(syns, MAX_RETRIES + 1);
    assert_eq!(c.state(0), State::Failed);
}

#[test]
fn unacked_data_is_sent_again_after_the_rto() {
    let (mut c, seq, _) = established();
    c.send(0, b"request");
    let sent = drain(&mut c, 2 * MS);
    assert!(c.on_timer(2 * MS + RTO_INITIAL_NS - 1).is_empty());
    assert!(drain(&mut c, 2 * MS + RTO_INITIAL_NS - 1).is_empty());
    c.on_timer(2 * MS + RTO_INITIAL_NS);
    let again = drain(&mut c, 2 * MS + RTO_INITIAL_NS);
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].seq, &again[0].data), (seq, &sent[0].data));
    assert_eq!(c.counters.retransmits, 1);
}

#[test]
fn three_duplicate_acks_resend_from_the_oldest_byte() {
    let (mut c, seq, sseq) = established();
    // The server's SYN-ACK advertised MSS 1460: three segments.
    c.send(0, &[b'x'; 3000]);
    let sent = drain(&mut c, 2 * MS);
    assert_eq!(sent.len(), 3, "3000 bytes in 1460-byte segments");
    let dup = from_server(0, sseq, seq, ACK, &[]);
    for _ in 0..3 {
        c.receive(&dup, 3 * MS);
    }
    assert_eq!(c.counters.fast_retransmits, 1);
    let again = drain(&mut c, 3 * MS);
    assert_eq!(again[0].seq, seq, "from snd_una");
}

#[test]
fn out_of_order_data_is_dropped_and_answered_with_a_duplicate_ack() {
    let (mut c, seq, sseq) = established();
    let late = from_server(0, sseq + 10, seq, ACK | PSH, b"later");
    assert_eq!(c.receive(&late, 2 * MS), Event::None);
    let dup = drain(&mut c, 2 * MS);
    assert_eq!((dup.len(), dup[0].ack), (1, sseq));
    assert_eq!(c.counters.out_of_order, 1);
}

#[test]
fn a_corrupted_segment_is_dropped() {
    let (mut c, seq, sseq) = established();
    let mut resp = from_server(0, sseq, seq, ACK | PSH, b"hello");
    resp[54] ^= 0x40; // the first payload byte
    assert_eq!(c.receive(&resp, 2 * MS), Event::None);
    assert_eq!(c.counters.bad_checksums, 1);
}

#[test]
fn client_fin_then_server_fin_ends_done() {
    let (mut c, seq, sseq) = established();
    c.close(0);
    assert_eq!(c.state(0), State::FinWait);
    let fin = drain(&mut c, 2 * MS);
    assert_eq!((fin.len(), fin[0].flags & FIN, fin[0].seq), (1, FIN, seq));
    let finack = from_server(0, sseq, seq + 1, ACK | FIN, &[]);
    assert_eq!(c.receive(&finack, 3 * MS), Event::PeerClosed(0));
    assert_eq!(c.state(0), State::Done);
    let last = drain(&mut c, 3 * MS);
    assert_eq!(
        (last.len(), last[0].ack),
        (1, sseq + 1),
        "the server's FIN is acked"
    );
}

#[test]
fn server_fin_then_client_fin_ends_done() {
    let (mut c, seq, sseq) = established();
    let fin = from_server(0, sseq, seq, ACK | FIN, &[]);
    assert_eq!(c.receive(&fin, 2 * MS), Event::PeerClosed(0));
    assert_eq!(c.state(0), State::CloseWait);
    c.close(0);
    let out = drain(&mut c, 2 * MS);
    assert_eq!(out.last().map(|o| o.flags & FIN), Some(FIN));
    let ack = from_server(0, sseq + 1, seq + 1, ACK, &[]);
    c.receive(&ack, 3 * MS);
    assert_eq!(c.state(0), State::Done);
}

#[test]
fn rst_on_an_open_connection_is_a_reset() {
    let (mut c, seq, sseq) = established();
    let rst = from_server(0, sseq, seq, RST, &[]);
    assert_eq!(c.receive(&rst, 2 * MS), Event::Failed(0, Failure::Reset));
}

#[test]
fn arp_requests_for_our_address_are_answered() {
    let mut c = client(1);
    assert_eq!(c.receive(&arp(1, CLIENT_IP), 0), Event::None);
    let mut buf = vec![0u8; MAX_FRAME];
    c.transmit(&mut buf, 0).expect("an ARP reply");
    assert_eq!(&buf[0..6], &SERVER_MAC);
    assert_eq!(&buf[20..22], &[0, 2]);
    assert_eq!(&buf[28..32], &CLIENT_IP.octets());
    // Not ours: ignored.
    let mut c = client(1);
    c.receive(&arp(1, Ipv4Addr::new(10, 96, 0, 9)), 0);
    assert!(c.transmit(&mut buf, 0).is_none());
}

#[test]
fn segments_for_unknown_ports_or_peers_are_ignored() {
    let (mut c, seq, sseq) = established();
    let other_port = from_server(5, sseq, seq, ACK | PSH, b"x");
    assert_eq!(c.receive(&other_port, 2 * MS), Event::None);
    let mut spoofed = from_server(0, sseq, seq, ACK | PSH, b"x");
    spoofed[26] = 9; // source address
    assert_eq!(c.receive(&spoofed, 2 * MS), Event::None);
}

#[test]
fn an_acknowledged_fin_is_not_sent_again() {
    let (mut c, seq, sseq) = established();
    c.close(0);
    drain(&mut c, 2 * MS);
    let ack = from_server(0, sseq, seq + 1, ACK, &[]);
    c.receive(&ack, 3 * MS);
    assert!(
        drain(&mut c, 3 * MS).is_empty(),
        "nothing owed after the FIN is acked"
    );
    let fin = from_server(0, sseq, seq + 1, ACK | FIN, &[]);
    assert_eq!(c.receive(&fin, 4 * MS), Event::PeerClosed(0));
    let out = drain(&mut c, 4 * MS);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].flags, out[0].seq, out[0].ack),
        (ACK, seq + 1, sseq + 1)
    );
    assert_eq!(c.state(0), State::Done);
}

#[test]
fn an_ack_of_the_original_after_a_timeout_resend_is_taken() {
    let (mut c, seq, sseq) = established();
    c.send(0, b"request");
    drain(&mut c, 2 * MS);
    c.on_timer(2 * MS + RTO_INITIAL_NS);
    assert_eq!(drain(&mut c, 2 * MS + RTO_INITIAL_NS).len(), 1, "resent");
    // The original's answer, late: it acknowledges the request.
    let resp = from_server(0, sseq, seq + 7, ACK | PSH, b"answer");
    assert_eq!(
        c.receive(&resp, 3 * MS + RTO_INITIAL_NS),
        Event::Data(0, &b"answer"[..])
    );
    assert_eq!(c.unacked(0), 0);
    assert!(c.send(0, b"next"));
    let next = drain(&mut c, 4 * MS + RTO_INITIAL_NS);
    assert_eq!(
        (next.len(), next[0].seq, next[0].data.len()),
        (1, seq + 7, 4)
    );
}

#[test]
fn a_refused_connection_has_no_timer_left() {
    let mut c = client(1);
    c.receive(&arp(2, CLIENT_IP), 0);
    c.connect(0);
    let syn = drain(&mut c, 0);
    let rst = from_server(0, 0, syn[0].seq + 1, RST | ACK, &[]);
    c.receive(&rst, MS);
    for k in 1..=20 {
        assert!(
            c.on_timer(k * RTO_MAX_NS).is_empty(),
            "no TimedOut after Refused"
        );
    }
    assert!(drain(&mut c, 21 * RTO_MAX_NS).is_empty());
    assert_eq!(c.counters.retransmits, 0);
}

/// Connection 0 established with the SYN-ACK `rtt` after the SYN, at time
/// `rtt`: returns (client, client seq, server seq).
fn established_after(rtt: u64) -> (Client, u32, u32) {
    let mut c = client(1);
    c.receive(&arp(2, CLIENT_IP), 0);
    c.connect(0);
    let syn = drain(&mut c, 0);
    let synack = from_server(0, 9000, syn[0].seq + 1, SYN | ACK, &[]);
    assert_eq!(c.receive(&synack, rtt), Event::Connected(0));
    drain(&mut c, rtt);
    (c, syn[0].seq + 1, 9001)
}

#[test]
fn the_rto_follows_the_measured_round_trip() {
    // RTT 300 ms: SRTT 300, RTTVAR 150, RTO = 300 + 4 * 150 = 900 ms.
    let rtt = 300 * MS;
    let (mut c, seq, _) = established_after(rtt);
    c.send(0, b"request");
    let t = rtt + MS;
    drain(&mut c, t);
    c.on_timer(t + 899 * MS);
    assert!(drain(&mut c, t + 899 * MS).is_empty(), "not before 900 ms");
    c.on_timer(t + 900 * MS);
    let again = drain(&mut c, t + 900 * MS);
    assert_eq!((again.len(), again[0].seq), (1, seq));
}

#[test]
fn a_short_round_trip_keeps_the_200_ms_floor() {
    let (mut c, _, _) = established_after(MS);
    c.send(0, b"request");
    drain(&mut c, 2 * MS);
    c.on_timer(2 * MS + RTO_MIN_NS - 1);
    assert!(drain(&mut c, 2 * MS + RTO_MIN_NS - 1).is_empty());
    c.on_timer(2 * MS + RTO_MIN_NS);
    assert_eq!(drain(&mut c, 2 * MS + RTO_MIN_NS).len(), 1);
}

#[test]
fn an_ack_of_a_resent_segment_gives_no_sample() {
    // Karn: the late ACK of a resent request would read 1 s; the RTO stays
    // at the 900 ms the handshake's 300 ms gave, after the backoff ends.
    let rtt = 300 * MS;
    let (mut c, seq, sseq) = established_after(rtt);
    c.send(0, b"request");
    let t = rtt + MS;
    drain(&mut c, t);
    c.on_timer(t + 900 * MS);
    assert_eq!(drain(&mut c, t + 900 * MS).len(), 1, "resent");
    let resp = from_server(0, sseq, seq + 7, ACK | PSH, b"ok");
    c.receive(&resp, t + 1000 * MS);
    c.send(0, b"next");
    let t2 = t + 1001 * MS;
    drain(&mut c, t2);
    c.on_timer(t2 + 899 * MS);
    assert!(drain(&mut c, t2 + 899 * MS).is_empty());
    c.on_timer(t2 + 900 * MS);
    assert_eq!(drain(&mut c, t2 + 900 * MS).len(), 1, "RTO back at 900 ms");
}

#[test]
fn an_aborted_connection_sends_a_rst_and_reconnects_with_a_higher_isn() {
    let (mut c, seq, _) = established();
    assert!(c.send(0, b"GET / HTTP/1.1\r\n\r\n"));
    drain(&mut c, 2 * MS);
    c.connect(0);
    let out = drain(&mut c, 3 * MS);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!((out[0].flags, out[0].seq), (RST, seq + 18), "RST first");
    assert_eq!(out[1].flags, SYN);
    let ahead = out[1].seq.wrapping_sub(seq + 18);
    assert!((1 << 24..1 << 25).contains(&ahead), "ISN {ahead} ahead");
    assert_eq!(c.state(0), State::SynSent);
}

#[test]
fn abort_of_an_unsent_or_finished_connection_sends_nothing() {
    let mut c = client(2);
    c.abort(0);
    assert!(drain(&mut c, 0).is_empty());
    assert_eq!(c.state(0), State::Closed);
}

#[test]
fn an_ack_of_an_older_connection_in_syn_sent_is_answered_with_a_rst() {
    let (mut c, _, _) = established();
    c.connect(0);
    let syn = drain(&mut c, 2 * MS);
    let iss = syn.last().expect("SYN").seq;
    // The server still holds the old connection: a challenge ACK.
    let stale = from_server(0, 9000, 12_345, ACK, &[]);
    assert_eq!(c.receive(&stale, 3 * MS), Event::None);
    let rst = drain(&mut c, 3 * MS);
    assert_eq!(rst.len(), 1, "{rst:?}");
    assert_eq!((rst[0].flags, rst[0].seq), (RST, 12_345));
    // The SYN-ACK that follows still opens it.
    let synack = from_server(0, 7000, iss.wrapping_add(1), SYN | ACK, &[]);
    assert_eq!(c.receive(&synack, 4 * MS), Event::Connected(0));
}
