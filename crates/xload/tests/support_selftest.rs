//! Tests of the shared test-support code: each test server behaviour, the
//! nginx harness and the process helpers do what they claim, checked with
//! plain std `TcpStream` clients.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use support::nginx::{parse_stub_status, Nginx, NginxOptions, SMALL_BODY};
use support::run::{exit_code, run_command_with_timeout, XloadChild};
use support::server::{
    parse_request, RequestError, CLOSE_DELIMITED_BODY, DECLARED_BODY_LEN, GARBAGE,
    MAX_REQUEST_HEAD_BYTES, OVERSIZE_HEADER_BYTES, SENT_BODY_LEN,
};
use support::timing::{last_run_disturbed, undisturbed};
use support::{free_port, run_xload, Behavior, TempDir, TestServer};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect to test server");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("set_read_timeout");
    stream
}

/// Reads one response head (through CRLF CRLF), byte by byte so nothing of
/// the next response is consumed.
fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(0) => panic!(
                "EOF inside a response head: {:?}",
                String::from_utf8_lossy(&head)
            ),
            Ok(_) => head.push(byte[0]),
            Err(e) => panic!("reading a response head: {e}"),
        }
    }
    String::from_utf8(head).expect("ASCII head")
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// Reads one Content-Length response; returns its head and body.
fn read_response(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let head = read_head(stream);
    let len: usize = header(&head, "content-length")
        .expect("Content-Length")
        .parse()
        .expect("numeric length");
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).expect("read body");
    (head, body)
}

fn read_to_eof(stream: &mut TcpStream) -> Vec<u8> {
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("read until EOF");
    bytes
}

/// Asserts that the peer stays open and silent for `for_ms`.
fn assert_open_and_silent(stream: &mut TcpStream, for_ms: u64) {
    stream
        .set_read_timeout(Some(Duration::from_millis(for_ms)))
        .expect("set_read_timeout");
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("expected an open, silent connection, got {other:?}"),
    }
}

fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

// ---- request parser -------------------------------------------------------

#[test]
fn parse_request_needs_every_byte_and_then_completes() {
    let request = b"POST /p?q=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
    for split in 0..request.len() {
        assert_eq!(
            parse_request(&request[..split]),
            Ok(None),
            "prefix of {split} bytes"
        );
    }
    let parsed = parse_request(request).expect("valid").expect("complete");
    assert_eq!(parsed.total_len, request.len());
    assert_eq!(parsed.head_len, request.len() - 5);
    assert!(parsed.keep_alive && !parsed.is_head);
}

#[test]
fn parse_request_keep_alive_follows_version_and_connection_header() {
    let keep = |raw: &[u8]| {
        parse_request(raw)
            .expect("valid")
            .expect("complete")
            .keep_alive
    };
    assert!(keep(b"GET / HTTP/1.1\r\n\r\n"));
    assert!(!keep(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
    assert!(!keep(b"GET / HTTP/1.0\r\n\r\n"));
    assert!(keep(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
    assert!(
        parse_request(b"HEAD / HTTP/1.1\r\n\r\n")
            .expect("valid")
            .expect("complete")
            .is_head
    );
}

#[test]
fn parse_request_rejects_malformed_and_oversize_requests() {
    assert_eq!(
        parse_request(b"GET /\r\n\r\n"),
        Err(RequestError::BadRequestLine)
    );
    assert_eq!(
        parse_request(b"GET / SPDY/3\r\n\r\n"),
        Err(RequestError::BadRequestLine)
    );
    assert_eq!(
        parse_request(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"),
        Err(RequestError::BadHeader)
    );
    assert_eq!(
        parse_request(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        Err(RequestError::BadContentLength)
    );
    assert_eq!(
        parse_request(b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
        Err(RequestError::BadContentLength)
    );
    assert_eq!(
        parse_request(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Err(RequestError::UnsupportedTransferEncoding)
    );
    let mut huge = b"GET / HTTP/1.1\r\nX: ".to_vec();
    huge.resize(MAX_REQUEST_HEAD_BYTES + 1, b'a');
    assert_eq!(parse_request(&huge), Err(RequestError::HeadTooLarge));
}

// ---- Ok -------------------------------------------------------------------

#[test]
fn ok_answers_sequential_keepalive_requests_on_one_connection() {
    let server = TestServer::start(Behavior::Ok { body_len: 7 });
    let mut stream = connect(server.addr());
    let mut received_bytes = 0;
    for _ in 0..3 {
        stream.write_all(GET).unwrap();
        let (head, body) = read_response(&mut stream);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert_eq!(header(&head, "connection"), None);
        assert_eq!(body, b"xxxxxxx");
        received_bytes += head.len() + body.len();
    }
    assert_eq!(
        (server.accepted(), server.requests(), server.served()),
        (1, 3, 3)
    );
    assert_eq!(server.bytes_written(), received_bytes as u64);
}

#[test]
fn ok_answers_pipelined_requests_in_order_head_without_body() {
    let server = TestServer::start(Behavior::Ok { body_len: 3 });
    let mut stream = connect(server.addr());
    // GET, HEAD, POST with a body, GET: one write, answered in that order.
    stream
        .write_all(
            b"GET /a HTTP/1.1\r\n\r\nHEAD /b HTTP/1.1\r\n\r\nPOST /c HTTP/1.1\r\nContent-Length: 4\r\n\r\nbodyGET /d HTTP/1.1\r\n\r\n",
        )
        .unwrap();
    let (_, first) = read_response(&mut stream);
    assert_eq!(first, b"xxx");
    let head = read_head(&mut stream);
    assert_eq!(
        header(&head, "content-length"),
        Some("3"),
        "HEAD announces the GET length"
    );
    let (_, third) = read_response(&mut stream);
    assert_eq!(third, b"xxx");
    let (_, fourth) = read_response(&mut stream);
    assert_eq!(fourth, b"xxx");
    assert_eq!((server.requests(), server.served()), (4, 4));
}

#[test]
fn ok_parses_a_request_split_into_single_bytes() {
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let mut stream = connect(server.addr());
    stream.set_nodelay(true).unwrap();
    for byte in GET {
        stream.write_all(&[*byte]).unwrap();
    }
    let (head, body) = read_response(&mut stream);
    assert!(head.starts_with("HTTP/1.1 200"));
    assert!(body.is_empty());
    assert_eq!(server.served(), 1);
}

#[test]
fn ok_honours_connection_close_and_http10_without_keepalive() {
    let server = TestServer::start(Behavior::Ok { body_len: 2 });
    for request in [
        &b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"[..],
        b"GET / HTTP/1.0\r\n\r\n",
    ] {
        let mut stream = connect(server.addr());
        stream.write_all(request).unwrap();
        let raw = String::from_utf8(read_to_eof(&mut stream)).unwrap();
        assert!(raw.starts_with("HTTP/1.1 200 OK\r\n"), "{raw}");
        assert!(raw.contains("Connection: close\r\n"), "{raw}");
        assert!(
            raw.ends_with("\r\n\r\nxx"),
            "exactly one response, then EOF: {raw}"
        );
    }
    assert_eq!((server.accepted(), server.served()), (2, 2));
}

#[test]
fn bad_request_gets_400_and_close_and_is_counted() {
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let mut stream = connect(server.addr());
    stream.write_all(b"NOT HTTP AT ALL\r\n\r\n").unwrap();
    let raw = String::from_utf8(read_to_eof(&mut stream)).unwrap();
    assert!(raw.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{raw}");
    assert_eq!((server.bad_requests(), server.served()), (1, 1));
}

#[test]
fn first_request_head_shows_what_the_client_sent() {
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let mut stream = connect(server.addr());
    stream
        .write_all(
            b"GET /x?y=1 HTTP/1.1\r\nHost: h\r\nX-Test: 1\r\n\r\nGET /second HTTP/1.1\r\n\r\n",
        )
        .unwrap();
    read_response(&mut stream);
    read_response(&mut stream);
    assert_eq!(
        server.first_request_head().as_deref(),
        Some("GET /x?y=1 HTTP/1.1\r\nHost: h\r\nX-Test: 1\r\n\r\n")
    );
}

// ---- body framings --------------------------------------------------------

#[test]
fn chunked_sends_each_chunk_then_the_last_chunk_and_keeps_alive() {
    let server = TestServer::start(Behavior::Chunked {
        chunks: vec![3, 17],
    });
    let mut stream = connect(server.addr());
    for _ in 0..2 {
        stream.write_all(GET).unwrap();
        let head = read_head(&mut stream);
        assert_eq!(header(&head, "transfer-encoding"), Some("chunked"));
        assert_eq!(header(&head, "content-length"), None);
        let expected = format!("3\r\nxxx\r\n11\r\n{}\r\n0\r\n\r\n", "x".repeat(17));
        let mut body = vec![0u8; expected.len()];
        stream.read_exact(&mut body).unwrap();
        assert_eq!(String::from_utf8(body).unwrap(), expected);
    }
    assert_eq!(server.served(), 2);
}

#[test]
fn close_delimited_is_http10_without_length_ended_by_fin() {
    let server = TestServer::start(Behavior::CloseDelimited);
    let mut stream = connect(server.addr());
    stream.write_all(GET).unwrap();
    let raw = read_to_eof(&mut stream);
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.0 200 OK"));
    assert!(header(&format!("{head}\r\n"), "content-length").is_none());
    assert!(header(&format!("{head}\r\n"), "transfer-encoding").is_none());
    assert_eq!(body.as_bytes(), CLOSE_DELIMITED_BODY);
    assert_eq!(server.served(), 1);
}

// ---- faults ---------------------------------------------------------------

#[test]
fn garbage_answers_non_http_bytes_and_stays_open() {
    let server = TestServer::start(Behavior::Garbage);
    let mut stream = connect(server.addr());
    stream.write_all(GET).unwrap();
    let mut got = vec![0u8; GARBAGE.len()];
    stream.read_exact(&mut got).unwrap();
    assert_eq!(got, GARBAGE);
    assert!(!got.starts_with(b"HTTP/"));
    assert_open_and_silent(&mut stream, 150);
    assert_eq!(server.served(), 1);
}

#[test]
fn truncated_body_declares_100_sends_10_then_fin() {
    let server = TestServer::start(Behavior::TruncatedBody);
    let mut stream = connect(server.addr());
    stream.write_all(GET).unwrap();
    let head = read_head(&mut stream);
    assert_eq!(
        header(&head, "content-length"),
        Some(DECLARED_BODY_LEN.to_string().as_str())
    );
    assert_eq!(
        read_to_eof(&mut stream).len(),
        SENT_BODY_LEN,
        "EOF after the 10 bytes, not a reset"
    );
}

#[test]
fn oversize_header_block_is_200_kib_and_then_a_valid_keepalive_response() {
    let server = TestServer::start(Behavior::OversizeHeader);
    let mut stream = connect(server.addr());
    for _ in 0..2 {
        stream.write_all(GET).unwrap();
        let head = read_head(&mut stream);
        assert_eq!(head.len(), OVERSIZE_HEADER_BYTES);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"));
        assert_eq!(header(&head, "content-length"), Some("0"));
        assert!(
            head.split("\r\n").all(|line| line.len() < 2000),
            "many lines, none absurd"
        );
    }
    assert_eq!(server.served(), 2);
}

#[test]
fn wrong_content_length_sends_less_than_declared_and_idles() {
    let server = TestServer::start(Behavior::WrongContentLength);
    let mut stream = connect(server.addr());
    stream.write_all(GET).unwrap();
    let head = read_head(&mut stream);
    assert_eq!(
        header(&head, "content-length"),
        Some(DECLARED_BODY_LEN.to_string().as_str())
    );
    let mut body = vec![0u8; SENT_BODY_LEN];
    stream.read_exact(&mut body).unwrap();
    assert_open_and_silent(&mut stream, 200);
}

#[test]
fn bad_chunk_size_sends_zz_then_idles() {
    let server = TestServer::start(Behavior::BadChunkSize);
    let mut stream = connect(server.addr());
    stream.write_all(GET).unwrap();
    let head = read_head(&mut stream);
    assert_eq!(header(&head, "transfer-encoding"), Some("chunked"));
    let mut size_line = [0u8; 4];
    stream.read_exact(&mut size_line).unwrap();
    assert_eq!(&size_line, b"zz\r\n");
    assert_open_and_silent(&mut stream, 150);
}

#[test]
fn close_without_connection_close_answers_once_then_next_request_sees_eof() {
    let server = TestServer::start(Behavior::CloseWithoutConnectionClose);
    let mut stream = connect(server.addr());
    stream.write_all(GET).unwrap();
    let (head, _) = read_response(&mut stream);
    assert!(head.starts_with("HTTP/1.1 200"));
    assert_eq!(
        header(&head, "connection"),
        None,
        "no hint that the server will close"
    );
    stream
        .write_all(GET)
        .expect("the second request can still be sent");
    let mut byte = [0u8; 1];
    assert_eq!(stream.read(&mut byte).expect("EOF, not a reset"), 0);
    assert_eq!((server.requests(), server.served()), (1, 1));
}

#[test]
fn reset_reads_the_request_then_sends_rst() {
    let server = TestServer::start(Behavior::Reset);
    let mut stream = connect(server.addr());
    stream.write_all(GET).unwrap();
    let mut byte = [0u8; 1];
    let result = stream.read(&mut byte);
    assert_eq!(
        result.map_err(|e| e.kind()),
        Err(ErrorKind::ConnectionReset)
    );
    assert_eq!((server.requests(), server.served()), (1, 0));
}

#[test]
fn never_answer_reads_and_counts_requests_but_never_writes() {
    let server = TestServer::start(Behavior::NeverAnswer);
    let mut stream = connect(server.addr());
    stream.write_all(&[GET, GET].concat()).unwrap();
    wait_for("two requests read", || server.requests() == 2);
    assert_open_and_silent(&mut stream, 200);
    assert_eq!((server.served(), server.bytes_written()), (0, 0));
}

// ---- timing behaviours ----------------------------------------------------

fn timed_get(stream: &mut TcpStream) -> Duration {
    let sent = Instant::now();
    stream.write_all(GET).unwrap();
    read_response(stream);
    sent.elapsed()
}

#[test]
fn stall_holds_responses_due_inside_the_window_until_it_ends() {
    let server = TestServer::start(Behavior::Stall {
        at: Duration::from_millis(300),
        pause: Duration::from_millis(400),
    });
    let mut stream = connect(server.addr());
    assert!(
        timed_get(&mut stream) < Duration::from_millis(250),
        "before the stall: prompt"
    );
    let start = server.started_at();
    std::thread::sleep(
        (start + Duration::from_millis(350)).saturating_duration_since(Instant::now()),
    );
    let held = timed_get(&mut stream);
    let released_at = start.elapsed();
    assert!(
        held >= Duration::from_millis(300),
        "inside the stall: held {held:?}"
    );
    assert!(
        released_at >= Duration::from_millis(700),
        "released at the end: {released_at:?}"
    );
    assert!(
        released_at < Duration::from_millis(1000),
        "released promptly: {released_at:?}"
    );
    assert!(
        timed_get(&mut stream) < Duration::from_millis(250),
        "after the stall: prompt"
    );
    assert_eq!(server.served(), 3);
}

#[test]
fn pool_serves_at_most_slots_at_once_in_fifo_order() {
    let delay = Duration::from_millis(100);
    let (server, done) = undisturbed(|| {
        let server = TestServer::start(Behavior::Pool { slots: 2, delay });
        let start = Instant::now();
        // Requests sent in a known order, 10 ms apart, each on its own connection.
        let streams: Vec<TcpStream> = (0..6)
            .map(|_| {
                let mut stream = connect(server.addr());
                stream.write_all(GET).unwrap();
                std::thread::sleep(Duration::from_millis(10));
                stream
            })
            .collect();
        let readers: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(i, mut stream)| {
                std::thread::spawn(move || {
                    read_response(&mut stream);
                    (i, start.elapsed())
                })
            })
            .collect();
        let mut done: Vec<(usize, Duration)> =
            readers.into_iter().map(|r| r.join().unwrap()).collect();
        done.sort_by_key(|&(_, at)| at);
        (server, done)
    });
    if last_run_disturbed() {
        // Reader threads and the server's handlers scheduled late say
        // nothing about the pool: only the count is asserted.
        eprintln!("every try was disturbed: order and waves not asserted: {done:?}");
        assert_eq!(server.served(), 6);
        return;
    }
    let order: Vec<usize> = done.iter().map(|&(i, _)| i).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4, 5], "FIFO: {done:?}");
    // Two slots: requests finish in pairs, one delay apart (serial service
    // would take 6 delays, unlimited service 1).
    for (rank, &(_, at)) in done.iter().enumerate() {
        let wave = (rank / 2 + 1) as u32;
        assert!(
            at >= delay * wave,
            "request {rank} done at {at:?}, before wave {wave}: {done:?}"
        );
        assert!(
            at < delay * wave + delay * 9 / 10,
            "request {rank} done at {at:?}, after wave {wave}: {done:?}"
        );
    }
    assert_eq!(server.served(), 6);
}

#[test]
fn delay_answers_each_request_after_the_delay() {
    let server = TestServer::start(Behavior::Delay {
        delay: Duration::from_millis(80),
    });
    let mut stream = connect(server.addr());
    let took = timed_get(&mut stream);
    assert!(
        took >= Duration::from_millis(80) && took < Duration::from_millis(1000),
        "{took:?}"
    );
}

// ---- lifecycle and counters -----------------------------------------------

#[test]
fn stop_closes_connections_and_wakes_held_responses_promptly() {
    for behavior in [
        Behavior::NeverAnswer,
        Behavior::Delay {
            delay: Duration::from_secs(30),
        },
        Behavior::Pool {
            slots: 1,
            delay: Duration::from_secs(30),
        },
        Behavior::Stall {
            at: Duration::ZERO,
            pause: Duration::from_secs(30),
        },
    ] {
        let server = TestServer::start(behavior.clone());
        let mut streams: Vec<TcpStream> = (0..3).map(|_| connect(server.addr())).collect();
        for stream in &mut streams {
            stream.write_all(GET).unwrap();
        }
        wait_for("requests read", || server.requests() == 3);
        assert_eq!(server.open_connections(), 3);
        let stopping = Instant::now();
        server.stop();
        assert!(
            stopping.elapsed() < Duration::from_secs(2),
            "{behavior:?}: stop took {:?}",
            stopping.elapsed()
        );
        assert_eq!(server.open_connections(), 0);
        for stream in &mut streams {
            let mut byte = [0u8; 1];
            assert!(
                matches!(stream.read(&mut byte), Ok(0) | Err(_)),
                "{behavior:?}: closed by stop"
            );
        }
        assert!(
            TcpStream::connect(server.addr()).is_err(),
            "no longer listening"
        );
    }
}

#[test]
fn counters_reconcile_over_many_connections_and_pipelined_batches() {
    let server = TestServer::start(Behavior::Ok { body_len: 1 });
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let addr = server.addr();
            std::thread::spawn(move || {
                let mut stream = connect(addr);
                let mut answered = 0u64;
                for _ in 0..25 {
                    stream.write_all(&GET.repeat(4)).unwrap();
                    for _ in 0..4 {
                        read_response(&mut stream);
                        answered += 1;
                    }
                }
                answered
            })
        })
        .collect();
    let answered: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(answered, 800);
    assert_eq!(
        (server.accepted(), server.requests(), server.served()),
        (8, 800, 800)
    );
}

#[test]
fn assert_reconciles_accepts_in_flight_slack_and_rejects_overcount() {
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let mut stream = connect(server.addr());
    stream.write_all(&GET.repeat(3)).unwrap();
    for _ in 0..3 {
        read_response(&mut stream);
    }
    server.assert_reconciles(3, 0);
    server.assert_reconciles(1, 2);
    let too_many = std::panic::catch_unwind(|| server.assert_reconciles(4, 10));
    assert!(
        too_many.is_err(),
        "a client cannot count more than was served"
    );
    let too_few = std::panic::catch_unwind(|| server.assert_reconciles(0, 2));
    assert!(too_few.is_err(), "more missing than could be in flight");
}

// ---- nginx harness --------------------------------------------------------

#[test]
fn parse_stub_status_reads_nginx_page() {
    let page = "Active connections: 3 \nserver accepts handled requests\n 10 9 42 \nReading: 0 Writing: 1 Waiting: 2 \n";
    let status = parse_stub_status(page).expect("a stub_status page");
    assert_eq!(
        (
            status.active,
            status.accepts,
            status.handled,
            status.requests
        ),
        (3, 10, 9, 42)
    );
    assert_eq!((status.reading, status.writing, status.waiting), (0, 1, 2));
    assert_eq!(parse_stub_status("<html>404</html>"), None);
}

#[test]
fn nginx_counts_requests_and_connections_without_its_own_stub_calls() {
    let Some(nginx) = Nginx::start(NginxOptions::default()) else {
        return;
    };
    assert_eq!((nginx.requests(), nginx.accepted()), (0, 0));
    let mut stream = connect(nginx.addr());
    for _ in 0..5 {
        stream.write_all(GET).unwrap();
        let (head, body) = read_response(&mut stream);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body.is_empty());
    }
    assert_eq!(nginx.requests(), 5);
    let mut second = connect(nginx.addr());
    second
        .write_all(b"GET /small HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let (_, body) = read_response(&mut second);
    assert_eq!(body, SMALL_BODY.as_bytes());
    assert_eq!((nginx.requests(), nginx.accepted()), (6, 2));
    assert_eq!(
        nginx.requests(),
        6,
        "reading the counter does not change it"
    );
}

#[test]
fn nginx_pins_itself_to_the_requested_cpu() {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cpu = cpus - 1;
    let Some(nginx) = Nginx::start(NginxOptions {
        cpu: Some(cpu),
        ..NginxOptions::default()
    }) else {
        return;
    };
    let status = std::fs::read_to_string(format!("/proc/{}/status", nginx.pid())).unwrap();
    let allowed = status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    assert_eq!(allowed, cpu.to_string());
}

#[test]
fn nginx_keeps_its_files_in_its_temp_dir_and_stops_on_drop() {
    let Some(nginx) = Nginx::start(NginxOptions::default()) else {
        return;
    };
    let dir = nginx.dir().to_path_buf();
    let pid = nginx.pid();
    assert!(dir.join("nginx.pid").is_file());
    assert!(dir.join("error.log").is_file());
    assert_eq!(
        std::fs::read_to_string(dir.join("nginx.pid"))
            .unwrap()
            .trim(),
        pid.to_string()
    );
    let addr = nginx.addr();
    drop(nginx);
    assert!(!dir.exists(), "temp dir removed");
    assert!(
        TcpStream::connect(addr).is_err(),
        "nginx no longer listening"
    );
}

// ---- processes, ports, dirs -----------------------------------------------

#[test]
fn free_port_can_be_bound_on_loopback() {
    let port = free_port();
    assert_ne!(port, 0);
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
}

#[test]
fn free_ports_are_below_the_ephemeral_range_and_differ() {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let a = free_port();
    let b = free_port();
    assert!(a < low && b < low, "{a}, {b} not below {low}");
    assert_ne!(a, b);
}

#[test]
fn temp_dir_is_removed_on_drop() {
    let dir = TempDir::new("selftest");
    std::fs::write(dir.join("f"), b"x").unwrap();
    let path = dir.path().to_path_buf();
    assert!(path.is_dir());
    drop(dir);
    assert!(!path.exists());
}

#[test]
fn command_past_its_timeout_is_killed_and_reported() {
    let mut command = Command::new("sleep");
    command.arg("30");
    let output = run_command_with_timeout(command, Duration::from_millis(200));
    assert!(output.timed_out);
    assert!(
        output.elapsed < Duration::from_secs(3),
        "{:?}",
        output.elapsed
    );
    assert_eq!(exit_code(output.status), 128 + libc::SIGKILL);
}

#[test]
fn command_output_and_status_are_collected() {
    let mut command = Command::new("sh");
    command.args(["-c", "echo out; echo err >&2; exit 7"]);
    let output = run_command_with_timeout(command, Duration::from_secs(10));
    assert!(!output.timed_out);
    assert_eq!(
        (output.stdout.as_str(), output.stderr.as_str()),
        ("out\n", "err\n")
    );
    assert_eq!(exit_code(output.status), 7);
}

#[test]
fn interrupt_sends_sigint_to_the_child() {
    let mut command = Command::new("sleep");
    command.arg("30");
    let child = XloadChild::spawn(command);
    std::thread::sleep(Duration::from_millis(50));
    child.interrupt();
    let output = child.wait_timeout(Duration::from_secs(5));
    assert!(!output.timed_out);
    assert_eq!(exit_code(output.status), 128 + libc::SIGINT);
}

#[test]
fn run_xload_runs_the_built_binary() {
    assert!(std::path::Path::new(support::run::xload_bin()).is_file());
    let (status, _stdout, stderr, elapsed) = run_xload(["--help"]);
    assert!(status.success(), "xload --help: {status}\n{stderr}");
    assert!(elapsed < Duration::from_secs(10));
}

// ---- benches/compare ------------------------------------------------------

#[test]
fn benches_compare_self_test_passes() {
    bench_script_self_test_passes("compare");
}

/// benches/breakdown's categorizer (which call chain is network stack, which is
/// the tool's own overhead) and its floor arithmetic, on captured perf output.
#[test]
fn benches_breakdown_self_test_passes() {
    bench_script_self_test_passes("breakdown");
}

/// benches/soak's verdicts (RSS within 1% after the warm-up, client counts
/// reconciled with the server's /stats) on synthetic runs.
#[test]
fn benches_soak_self_test_passes() {
    bench_script_self_test_passes("soak");
}

fn bench_script_self_test_passes(name: &str) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../benches")
        .join(name);
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("python3 not installed: skipping benches/{name} --self-test");
        return;
    }
    let mut command = Command::new("python3");
    command.arg("-B").arg(&script).arg("--self-test");
    let output = run_command_with_timeout(command, Duration::from_secs(60));
    assert!(
        output.status.success() && output.stdout.contains("self-test ok"),
        "{} --self-test: {}\n{}{}",
        script.display(),
        output.status,
        output.stdout,
        output.stderr
    );
}
