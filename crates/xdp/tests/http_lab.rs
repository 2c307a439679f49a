//! The purpose-built TCP stack ([`xload_xdp::tcp`]) over AF_XDP against
//! real peers in a veth lab each test builds and removes: nginx's request
//! count reconciles exactly with the responses counted, every connection
//! closes cleanly (also with 1% of frames lost each way in the test's own
//! frame path), the XDP program is gone after the link is dropped, and a
//! closed port refuses every connection. Load goes only to the lab's server
//! address; every loop is bounded in time.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use xload_xdp::claim::ClaimProgram;
use xload_xdp::lab::{ServerLab, ServerLabOptions};
use xload_xdp::netdev;
use xload_xdp::port::FramePort;
use xload_xdp::program::XdpLink;
use xload_xdp::tcp::{Client, Counters, Event, Failure, State};
use xload_xdp::xsk::{BindMode, XskConfig, XskSocket};

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: lab\r\n\r\n";

fn nginx() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

macro_rules! need_root_and_nginx {
    () => {{
        if let Some(why) = xload_xdp::lab::unsupported() {
            eprintln!("skipped: {why}");
            return;
        }
        let Some(nginx) = nginx() else {
            eprintln!("skipped: no nginx");
            return;
        };
        nginx
    }};
}

/// The lab with the claim program attached and a port on its socket.
struct Rig {
    port: FramePort,
    link: Option<XdpLink>,
    _prog: ClaimProgram,
    lab: ServerLab,
    started: Instant,
    /// Test-only loss: every Nth frame each way is dropped (0: none).
    drop_every: u64,
    frames: u64,
}

impl Rig {
    fn new(nginx: &Path) -> Rig {
        let mut lab = ServerLab::new(ServerLabOptions::default()).expect("lab");
        lab.start_nginx(nginx, 80).expect("nginx in the lab");
        let link = netdev::link_by_name(&lab.dev_gen).expect("generator end");
        let prog = ClaimProgram::load(lab.ip_user, 1).expect("claim program");
        let xsk = XskSocket::open(XskConfig {
            ifindex: link.ifindex,
            queue: 0,
            frame_size: 2048,
            frame_count: 4096,
            rx_size: 1024,
            tx_size: 1024,
            fill_size: 2048,
            comp_size: 1024,
            mode: BindMode::Auto,
        })
        .expect("AF_XDP socket");
        prog.register_socket(0, xsk.fd()).expect("XSKMAP");
        let attached = prog.attach(link.ifindex, false).expect("attach");
        Rig {
            port: FramePort::new(xsk),
            link: Some(attached),
            _prog: prog,
            lab,
            started: Instant::now(),
            drop_every: 0,
            frames: 0,
        }
    }

    fn client(&self, server_port: u16, conns: u32) -> Client {
        let seed = u64::from(std::process::id()) << 16 | u64::from(conns);
        let (mac, ip) = (self.lab.mac_gen.0, self.lab.ip_user);
        Client::new(mac, ip, self.lab.ip_srv, server_port, 30_000, conns, seed)
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// One pass: frames in (responses counted, answered with the next
    /// request while `send`), owed frames out, timers; sleeps briefly when
    /// nothing came.
    fn pump(&mut self, client: &mut Client, http: &mut [Http], send: bool) -> Vec<(u32, Failure)> {
        let now = self.now();
        let mut failed = Vec::new();
        let (drop_every, frames) = (self.drop_every, &mut self.frames);
        let mut lose = move || {
            *frames += 1;
            drop_every > 0 && *frames % drop_every == 0
        };
        let got = self.port.rx_each(|frame| {
            if lose() {
                return;
            }
            match client.receive(frame, now) {
                Event::Data(id, bytes) => {
                    let h = &mut http[id as usize];
                    h.feed(bytes);
                    if send && h.waiting == 0 && client.send(id, REQUEST) {
                        h.waiting = 1;
                    }
                }
                Event::Failed(id, why) => failed.push((id, why)),
                _ => {}
            }
        });
        loop {
            let mut lost = false;
            let sent = self.port.tx_one(|buf| {
                let n = client.transmit(buf, now)?;
                lost = lose();
                (!lost).then_some(n)
            });
            if !sent && !lost {
                break;
            }
        }
        self.port.flush();
        failed.extend(client.on_timer(now));
        if got == 0 {
            self.port.wait(1);
        }
        failed
    }

    fn stub_requests(&self) -> u64 {
        let addr = SocketAddr::from((self.lab.ip_srv, 80));
        xload_testkit::nginx_stub_requests(addr, Duration::from_secs(2))
    }
}

/// Counts responses of nginx's `= /` (empty bodies: a response ends at its
/// blank line), across segment boundaries.
#[derive(Default)]
struct Http {
    /// How much of "\r\n\r\n" the last bytes matched.
    matched: usize,
    waiting: u32,
    responses: u64,
}

impl Http {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            let want = b"\r\n\r\n"[self.matched];
            self.matched = match (b == want, b) {
                (true, _) => self.matched + 1,
                (false, b'\r') => 1,
                _ => 0,
            };
            if self.matched == 4 {
                self.matched = 0;
                self.responses += 1;
                self.waiting = 0;
            }
        }
    }
}

fn all_in(client: &Client, states: &[State]) -> bool {
    (0..client.len() as u32).all(|i| states.contains(&client.state(i)))
}

#[test]
fn own_stack_reconciles_with_nginx_at_100_connections_and_closes_cleanly() {
    let nginx = need_root_and_nginx!();
    // The veth's 256-frame ring may still drop a burst: retransmissions
    // are allowed here, wrong counts are not.
    reconcile(&nginx, 100, 0);
}

#[test]
fn own_stack_recovers_from_1_percent_loss_both_ways_with_exact_counts() {
    let nginx = need_root_and_nginx!();
    let counters = reconcile(&nginx, 20, 100);
    assert!(counters.retransmits > 0, "{counters:?}");
}

/// `conns` connections for a second of load (every `drop_every`th frame
/// lost each way, 0: none), drained and closed; nginx's count must match.
fn reconcile(nginx: &Path, conns: u32, drop_every: u64) -> Counters {
    let mut rig = Rig::new(nginx);
    rig.drop_every = drop_every;
    let mut client = rig.client(80, conns);
    let mut http: Vec<Http> = (0..conns).map(|_| Http::default()).collect();
    for i in 0..conns {
        client.connect(i);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_in(&client, &[State::Established]) {
        assert!(
            Instant::now() < deadline,
            "connections not established in 10 s"
        );
        let failed = rig.pump(&mut client, &mut http, false);
        assert!(failed.is_empty(), "{failed:?}");
    }
    assert!(client.server_mac.is_some(), "the server's MAC came by ARP");
    // stub_status goes through the kernel: never lost.
    let before = rig.stub_requests();
    for (i, h) in http.iter_mut().enumerate() {
        assert!(client.send(i as u32, REQUEST));
        h.waiting = 1;
    }
    // A second of load, at most 50,000 responses.
    let until = Instant::now() + Duration::from_secs(1);
    let total = |http: &[Http]| http.iter().map(|h| h.responses).sum::<u64>();
    while Instant::now() < until && total(&http) < 50_000 {
        let failed = rig.pump(&mut client, &mut http, true);
        assert!(failed.is_empty(), "{failed:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while http.iter().any(|h| h.waiting > 0) {
        assert!(Instant::now() < deadline, "answers still due after 10 s");
        rig.pump(&mut client, &mut http, false);
    }
    for i in 0..conns {
        client.close(i);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_in(&client, &[State::Done]) {
        assert!(Instant::now() < deadline, "connections not closed in 10 s");
        rig.pump(&mut client, &mut http, false);
    }
    let after = rig.stub_requests();
    let responses = total(&http);
    assert!(responses > u64::from(conns), "only {responses} responses");
    // The second stub_status request counts itself.
    assert_eq!(responses, after - before - 1, "{:?}", client.counters);
    // Dropping the link detaches the program.
    let dev = rig.lab.dev_gen.clone();
    drop(rig.link.take());
    let info = netdev::link_by_name(&dev).expect("generator end");
    assert_eq!(info.xdp_prog_id, None, "XDP program still attached");
    client.counters
}

#[test]
fn a_closed_port_refuses_every_connection() {
    let nginx = need_root_and_nginx!();
    let mut rig = Rig::new(&nginx);
    let mut client = rig.client(81, 10);
    let mut http: Vec<Http> = (0..10).map(|_| Http::default()).collect();
    for i in 0..10 {
        client.connect(i);
    }
    let mut refused = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while refused.len() < 10 && Instant::now() < deadline {
        refused.extend(rig.pump(&mut client, &mut http, false));
    }
    refused.sort_unstable_by_key(|&(id, _)| id);
    let want: Vec<(u32, Failure)> = (0..10).map(|i| (i, Failure::Refused)).collect();
    assert_eq!(refused, want);
    assert!(all_in(&client, &[State::Failed]));
}
