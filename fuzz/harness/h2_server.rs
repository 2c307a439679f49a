//! `h2_server`: the HTTP/2 server codec on a client byte stream fed whole,
//! split in two at a fuzzer-chosen point, and in fuzzer-chosen piece sizes
//! gives the same events, the same bytes to send and the same connection
//! error; every request is answered once at most; nothing panics.
//!
//! Input layout: byte 0 = options (bits 0..5: piece size - 1; bit 6: small
//! windows and frame budget; bit 7: the stream brings its own preface and
//! SETTINGS instead of the harness's), bytes 1..3 = split point, then the
//! client's bytes. Requests are answered after the stream is read (so the
//! answers do not depend on where it was split), then held-back answers
//! are pumped once.

use std::collections::BTreeSet;

use xload_http::h2::{H2Error, H2Response, ServerConfig, ServerConnection, ServerEvent};

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    events: Vec<String>,
    out: Vec<u8>,
    end: Result<(), H2Error>,
    active: usize,
}

fn table() -> Vec<H2Response> {
    vec![
        H2Response::new(200, &[("content-length", "3000")], vec![b'b'; 3000]),
        H2Response::new(200, &[("content-length", "3000")], Vec::new()),
    ]
}

fn drive<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
    small: bool,
    own_preface: bool,
) -> Outcome {
    let table = table();
    let config = if small {
        ServerConfig {
            max_concurrent_streams: 3,
            stream_window: 100,
            connection_window: 300,
            max_header_block: 512,
            out_budget: 1000,
        }
    } else {
        ServerConfig::default()
    };
    let mut conn = ServerConnection::<bool>::new(config);
    let mut out = Vec::new();
    conn.start(&mut out);
    let mut events = Vec::new();
    let mut requests = Vec::new();
    let mut end = Ok(());
    let record =
        |e: ServerEvent<bool>, events: &mut Vec<String>, requests: &mut Vec<(u32, bool)>| {
            if let ServerEvent::Request { stream, tag, .. } = e {
                requests.push((stream, tag));
            }
            events.push(format!("{e:?}"));
        };
    let mut classify = |method: &[u8], _path: &[u8]| method == b"HEAD";
    if !own_preface {
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend([0, 0, 0, 4, 0, 0, 0, 0, 0]);
        conn.recv(&hello, &table, &mut out, &mut classify, &mut |e| {
            record(e, &mut events, &mut requests)
        })
        .unwrap();
    }
    for piece in pieces {
        end = conn.recv(piece, &table, &mut out, &mut classify, &mut |e| {
            record(e, &mut events, &mut requests)
        });
        if end.is_err() {
            break;
        }
    }
    let mut answered = 0;
    for &(stream, head) in &requests.clone() {
        let mut sink = |e: ServerEvent<bool>| record(e, &mut events, &mut requests);
        if conn.respond(stream, &table, usize::from(head), &mut out, &mut sink) {
            answered += 1;
        }
    }
    conn.pump(&table, &mut out, &mut |e| {
        record(e, &mut events, &mut requests)
    });
    let mut seen = BTreeSet::new();
    for (stream, _) in &requests {
        assert!(seen.insert(*stream), "stream {stream} requested twice");
    }
    let sent = events.iter().filter(|e| e.starts_with("Sent")).count();
    assert!(sent <= answered, "{sent} sent of {answered} answered");
    Outcome {
        events,
        out,
        end,
        active: conn.active(),
    }
}

pub(crate) fn check(data: &[u8]) {
    let Some((options, at, stream)) = super::split_input(data) else {
        return;
    };
    let piece = 1 + usize::from(options & 0x3f);
    let small = options & 0x40 != 0;
    let own = options & 0x80 != 0;
    let whole = drive([stream], small, own);
    let (a, b) = stream.split_at(at);
    assert_eq!(drive([a, b], small, own), whole, "split at {at}");
    assert_eq!(
        drive(stream.chunks(piece), small, own),
        whole,
        "pieces of {piece}"
    );
}
