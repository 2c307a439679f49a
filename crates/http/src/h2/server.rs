//! The server side of one HTTP/2 connection: bytes in, events and bytes out.
//!
//! The mirror of [`super::Connection`] for a responder: it reads the client
//! preface, sends its SETTINGS (MAX_CONCURRENT_STREAMS, the stream window)
//! and ACKs the client's, decodes request heads (HEADERS + CONTINUATION)
//! into `:method` and `:path` for the caller to classify, counts request
//! bodies (returning their window as it goes) and sends prebuilt answers
//! within the client's windows and frame size, queuing the rest until a
//! WINDOW_UPDATE. Every connection error is an [`H2Error`] with the GOAWAY
//! already written; a malformed request resets its stream only.

use super::conn::{connection_specific, parse_u64, H2Error};
use super::frame::{
    flags, setting, write_goaway, write_header, write_ping, write_rst_stream, write_settings,
    write_settings_ack, write_window_update, ErrorCode, FrameHeader, FrameKind,
    DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, FRAME_HEADER_LEN, MAX_MAX_FRAME_SIZE, MAX_WINDOW,
    PREFACE,
};
use super::hpack::{self, Decoder};
use super::PeerSettings;

/// What the server advertises and allows itself.
#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams above it are refused.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: each request body's receive window.
    pub stream_window: u32,
    /// The connection's receive window (raised by a WINDOW_UPDATE at the start).
    pub connection_window: u32,
    /// Largest header block (all fragments) accepted, before decoding.
    pub max_header_block: usize,
    /// DATA is written only while `out` holds fewer bytes than this: the
    /// rest of a large answer waits for [`ServerConnection::pump`], so one
    /// call never renders more than about this much.
    pub out_budget: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_concurrent_streams: 128,
            stream_window: 1 << 20,
            connection_window: 1 << 24,
            max_header_block: 64 * 1024,
            out_budget: 256 * 1024,
        }
    }
}

/// An answer rendered once: its HPACK header block and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H2Response {
    block: Vec<u8>,
    body: Vec<u8>,
}

impl H2Response {
    /// `:status`, then `fields` (lower-case names) as static indices or
    /// literals without indexing, and `body`. An answer to HEAD is one with
    /// the GET answer's `content-length` and an empty body.
    pub fn new(status: u16, fields: &[(&str, &str)], body: Vec<u8>) -> Self {
        let mut block = Vec::with_capacity(64);
        hpack::encode_field(b":status", status.to_string().as_bytes(), &mut block);
        for (name, value) in fields {
            hpack::encode_field(name.as_bytes(), value.as_bytes(), &mut block);
        }
        H2Response { block, body }
    }

    /// The HPACK header block.
    pub fn block(&self) -> &[u8] {
        &self.block
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

/// What happened, in the order the bytes said it. `T` is the caller's tag
/// of each stream, given by its `classify` at the request head.
#[derive(Debug, PartialEq, Eq)]
pub enum ServerEvent<T> {
    /// A request came whole (head and body): answer it with
    /// [`ServerConnection::respond`].
    Request {
        stream: u32,
        tag: T,
        body_bytes: u64,
    },
    /// The last byte of a stream's answer was written to `out`.
    Sent { stream: u32, tag: T },
    /// The client reset a stream before its answer was written whole.
    Reset {
        stream: u32,
        tag: T,
        code: ErrorCode,
    },
    /// A malformed request (RFC 9113 §8.1.1): its stream was reset with
    /// PROTOCOL_ERROR.
    Malformed { stream: u32 },
    /// A stream above MAX_CONCURRENT_STREAMS: reset with REFUSED_STREAM.
    Refused { stream: u32 },
    /// The client is going away.
    GoAway { last_stream: u32, code: ErrorCode },
}

/// Where an answer's body comes from.
enum Body {
    /// The request is not answered yet.
    None,
    /// `responses[idx]` of the table passed to every call that may send.
    Table { idx: u32 },
    /// A body given once ([`ServerConnection::respond_once`]), kept until sent.
    Owned(Vec<u8>),
}

/// One open stream.
struct Stream<T> {
    id: u32,
    tag: T,
    /// The request's END_STREAM has not come yet.
    receiving: bool,
    body_bytes: u64,
    content_length: Option<u64>,
    recv_window: i64,
    send_window: i64,
    body: Body,
    /// Body bytes written so far.
    sent: usize,
}

/// Where the reader is.
#[derive(Clone, Copy, Debug)]
enum Rx {
    /// In the client preface: this many bytes of it matched.
    Preface(usize),
    /// Between frames: `head_len` bytes of the next header buffered.
    Head,
    /// In a non-DATA frame's payload (buffered in `payload` when split).
    Payload(FrameHeader),
    /// In a DATA frame: waiting for its pad length byte.
    DataPad(FrameHeader),
    /// In a DATA frame: `left` payload bytes to go, the first `body` of them data.
    Data {
        stream: u32,
        end: bool,
        left: u32,
        body: u32,
    },
}

#[derive(Clone, Copy)]
struct OpenBlock {
    stream: u32,
    end_stream: bool,
}

/// The server side of an HTTP/2 connection, with no I/O:
/// [`start`](Self::start) appends the server's SETTINGS,
/// [`recv`](Self::recv) takes received bytes split anywhere, appends what
/// must be answered (ACKs, WINDOW_UPDATEs, answers freed by window) and
/// reports [`ServerEvent`]s; [`respond`](Self::respond) answers a request
/// from a table of prebuilt [`H2Response`]s, passed by reference to every
/// call that may send (one table serves every connection of a worker).
pub struct ServerConnection<T> {
    config: ServerConfig,
    peer: PeerSettings,
    peer_settings_seen: bool,
    send_window: i64,
    recv_window: i64,
    recv_unacked: u32,
    /// The highest stream id the client has opened.
    last_stream: u32,
    streams: Vec<Stream<T>>,
    /// GOAWAY sent: streams above `last_stream` are ignored.
    going_away: bool,
    failed: Option<H2Error>,
    hpack: Decoder,
    rx: Rx,
    head: [u8; FRAME_HEADER_LEN],
    head_len: usize,
    payload: Vec<u8>,
    block: Vec<u8>,
    open_block: Option<OpenBlock>,
    /// A request head's :method and :path while it is classified.
    scratch: Vec<u8>,
    /// Streams reset as above MAX_CONCURRENT_STREAMS, so far.
    refused: u64,
}

impl<T: Copy> ServerConnection<T> {
    /// A connection that has read and sent nothing yet.
    pub fn new(config: ServerConfig) -> Self {
        ServerConnection {
            config,
            peer: PeerSettings::default(),
            peer_settings_seen: false,
            send_window: i64::from(DEFAULT_WINDOW),
            recv_window: i64::from(DEFAULT_WINDOW),
            recv_unacked: 0,
            last_stream: 0,
            streams: Vec::with_capacity(config.max_concurrent_streams.min(256) as usize),
            going_away: false,
            failed: None,
            hpack: Decoder::new(4096),
            rx: Rx::Preface(0),
            head: [0; FRAME_HEADER_LEN],
            head_len: 0,
            payload: Vec::new(),
            block: Vec::new(),
            open_block: None,
            scratch: Vec::new(),
            refused: 0,
        }
    }

    /// Appends the server's SETTINGS and the connection window's first
    /// WINDOW_UPDATE (sent at once, before the client preface is read).
    pub fn start(&mut self, out: &mut Vec<u8>) {
        write_settings(
            out,
            &[
                (
                    setting::MAX_CONCURRENT_STREAMS,
                    self.config.max_concurrent_streams,
                ),
                (setting::INITIAL_WINDOW_SIZE, self.config.stream_window),
            ],
        );
        let target = i64::from(self.config.connection_window.min(MAX_WINDOW));
        if target > self.recv_window {
            write_window_update(out, 0, (target - self.recv_window) as u32);
            self.recv_window = target;
        }
    }

    /// The client's SETTINGS as they stand.
    pub fn peer_settings(&self) -> &PeerSettings {
        &self.peer
    }

    /// Streams open now (receiving, awaiting an answer or sending one).
    pub fn active(&self) -> usize {
        self.streams.len()
    }

    /// Streams whose answer is partly written, waiting for window or for
    /// [`pump`](Self::pump).
    pub fn has_pending(&self) -> bool {
        self.streams
            .iter()
            .any(|s| !matches!(s.body, Body::None) && !s.receiving)
    }

    /// Streams refused for MAX_CONCURRENT_STREAMS so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The highest stream id the client opened.
    pub fn last_stream(&self) -> u32 {
        self.last_stream
    }

    /// The connection error, if one happened.
    pub fn failed(&self) -> Option<H2Error> {
        self.failed
    }

    /// Appends a GOAWAY(NO_ERROR) naming the last stream opened: streams
    /// opened since are ignored; those below it are still answered.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        if !self.going_away && self.failed.is_none() {
            self.going_away = true;
            write_goaway(out, self.last_stream, ErrorCode::NO_ERROR);
        }
    }

    /// Takes received bytes. `classify` sees each request's `:method` and
    /// `:path` and gives the stream its tag. On a connection error a GOAWAY
    /// is appended to `out` and the error is returned (and again on any
    /// later call).
    pub fn recv(
        &mut self,
        mut input: &[u8],
        responses: &[H2Response],
        out: &mut Vec<u8>,
        classify: &mut impl FnMut(&[u8], &[u8]) -> T,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        while !input.is_empty() {
            if let Err(e) = self.step(&mut input, responses, out, classify, events) {
                self.failed = Some(e);
                write_goaway(out, self.last_stream, e.code());
                return Err(e);
            }
        }
        Ok(())
    }

    /// Answers `stream` with `responses[idx]`: its HEADERS and as much of
    /// its body as the windows and the out budget allow (the rest goes on
    /// later calls). False if the stream is not awaiting an answer (reset
    /// meanwhile, or still receiving its request).
    pub fn respond(
        &mut self,
        stream: u32,
        responses: &[H2Response],
        idx: usize,
        out: &mut Vec<u8>,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> bool {
        let Some(k) = self.awaiting(stream) else {
            return false;
        };
        let r = &responses[idx];
        self.streams[k].body = Body::Table { idx: idx as u32 };
        self.start_answer(k, &r.block, r.body.is_empty(), out);
        self.send_answer(k, responses, out, events);
        true
    }

    /// Answers `stream` with `response`, made for this one answer (its
    /// body is kept if the windows hold part of it back).
    pub fn respond_once(
        &mut self,
        stream: u32,
        response: H2Response,
        responses: &[H2Response],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> bool {
        let Some(k) = self.awaiting(stream) else {
            return false;
        };
        self.start_answer(k, &response.block, response.body.is_empty(), out);
        self.streams[k].body = Body::Owned(response.body);
        self.send_answer(k, responses, out, events);
        true
    }

    /// Writes what the windows and the out budget now allow of the answers
    /// held back.
    pub fn pump(
        &mut self,
        responses: &[H2Response],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(ServerEvent<T>),
    ) {
        let mut k = 0;
        while k < self.streams.len() {
            if self.send_window <= 0 || out.len() >= self.config.out_budget {
                return;
            }
            let s = &self.streams[k];
            if !matches!(s.body, Body::None)
                && !s.receiving
                && self.send_answer(k, responses, out, events)
            {
                continue; // stream k was removed: k is the next one
            }
            k += 1;
        }
    }

    fn awaiting(&self, stream: u32) -> Option<usize> {
        if self.failed.is_some() {
            return None;
        }
        self.find(stream)
            .filter(|&k| !self.streams[k].receiving && matches!(self.streams[k].body, Body::None))
    }

    /// HEADERS (+ CONTINUATION) of an answer.
    fn start_answer(&mut self, k: usize, block: &[u8], end_stream: bool, out: &mut Vec<u8>) {
        let id = self.streams[k].id;
        let max = self.peer.max_frame_size as usize;
        let mut chunks = block.chunks(max);
        let first = chunks.next().unwrap_or(&[]);
        let end = if end_stream { flags::END_STREAM } else { 0 };
        let end_headers = if block.len() > max {
            0
        } else {
            flags::END_HEADERS
        };
        write_header(out, first.len(), FrameKind::HEADERS, end | end_headers, id);
        out.extend_from_slice(first);
        let n = chunks.len();
        for (i, c) in chunks.enumerate() {
            let f = if i + 1 == n { flags::END_HEADERS } else { 0 };
            write_header(out, c.len(), FrameKind::CONTINUATION, f, id);
            out.extend_from_slice(c);
        }
    }

    /// Writes what it may of stream `k`'s answer body; true when the answer
    /// is done and the stream removed.
    fn send_answer(
        &mut self,
        k: usize,
        responses: &[H2Response],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> bool {
        let max = self.peer.max_frame_size as usize;
        let s = &mut self.streams[k];
        let body: &[u8] = match &s.body {
            Body::None => return false,
            Body::Table { idx } => &responses[*idx as usize].body,
            Body::Owned(b) => b,
        };
        while s.sent < body.len() {
            let window = s.send_window.min(self.send_window);
            if window <= 0 || out.len() >= self.config.out_budget {
                return false;
            }
            let n = (body.len() - s.sent).min(max).min(window as usize);
            let end = s.sent + n == body.len();
            write_header(
                out,
                n,
                FrameKind::DATA,
                if end { flags::END_STREAM } else { 0 },
                s.id,
            );
            out.extend_from_slice(&body[s.sent..s.sent + n]);
            s.sent += n;
            s.send_window -= n as i64;
            self.send_window -= n as i64;
        }
        let s = self.streams.swap_remove(k);
        events(ServerEvent::Sent {
            stream: s.id,
            tag: s.tag,
        });
        true
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    fn step(
        &mut self,
        input: &mut &[u8],
        responses: &[H2Response],
        out: &mut Vec<u8>,
        classify: &mut impl FnMut(&[u8], &[u8]) -> T,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        match self.rx {
            Rx::Preface(got) => {
                let n = (PREFACE.len() - got).min(input.len());
                if input[..n] != PREFACE[got..got + n] {
                    return Err(H2Error::BadPreface);
                }
                *input = &input[n..];
                self.rx = if got + n == PREFACE.len() {
                    Rx::Head
                } else {
                    Rx::Preface(got + n)
                };
            }
            Rx::Head => {
                let n = (FRAME_HEADER_LEN - self.head_len).min(input.len());
                self.head[self.head_len..self.head_len + n].copy_from_slice(&input[..n]);
                self.head_len += n;
                *input = &input[n..];
                if self.head_len == FRAME_HEADER_LEN {
                    self.head_len = 0;
                    let h = FrameHeader::parse(&self.head);
                    self.start_frame(h, responses, out, classify, events)?;
                }
            }
            Rx::Payload(h) => {
                let len = h.len as usize;
                if self.payload.is_empty() && input.len() >= len {
                    let (frame, rest) = input.split_at(len);
                    *input = rest;
                    self.rx = Rx::Head;
                    self.frame(h, frame, responses, out, classify, events)?;
                } else {
                    let n = (len - self.payload.len()).min(input.len());
                    self.payload.extend_from_slice(&input[..n]);
                    *input = &input[n..];
                    if self.payload.len() == len {
                        self.rx = Rx::Head;
                        let payload = std::mem::take(&mut self.payload);
                        let r = self.frame(h, &payload, responses, out, classify, events);
                        self.payload = payload;
                        self.payload.clear();
                        r?;
                    }
                }
            }
            Rx::DataPad(h) => {
                let pad = u32::from(input[0]);
                *input = &input[1..];
                if pad >= h.len {
                    return Err(H2Error::BadPadding(FrameKind::DATA));
                }
                self.rx = Rx::Data {
                    stream: h.stream,
                    end: h.flags & flags::END_STREAM != 0,
                    left: h.len - 1,
                    body: h.len - 1 - pad,
                };
                self.data_progress(out, events);
            }
            Rx::Data {
                stream,
                end,
                left,
                body,
            } => {
                let n = (left as usize).min(input.len()) as u32;
                *input = &input[n as usize..];
                let b = n.min(body);
                if let Some(k) = self.find(stream) {
                    self.streams[k].body_bytes += u64::from(b);
                }
                self.rx = Rx::Data {
                    stream,
                    end,
                    left: left - n,
                    body: body - b,
                };
                self.data_progress(out, events);
            }
        }
        Ok(())
    }

    /// Ends a DATA frame once all its payload is in.
    fn data_progress(&mut self, out: &mut Vec<u8>, events: &mut impl FnMut(ServerEvent<T>)) {
        if let Rx::Data {
            stream,
            end,
            left: 0,
            ..
        } = self.rx
        {
            self.rx = Rx::Head;
            if end {
                if let Some(k) = self.find(stream) {
                    if self.streams[k].receiving {
                        self.request_done(k, out, events);
                    }
                }
            }
        }
    }

    /// Stream `k`'s request came whole.
    fn request_done(
        &mut self,
        k: usize,
        out: &mut Vec<u8>,
        events: &mut impl FnMut(ServerEvent<T>),
    ) {
        let s = &mut self.streams[k];
        s.receiving = false;
        if s.content_length.is_some_and(|n| n != s.body_bytes) {
            let s = self.streams.swap_remove(k);
            write_rst_stream(out, s.id, ErrorCode::PROTOCOL_ERROR);
            events(ServerEvent::Malformed { stream: s.id });
            return;
        }
        events(ServerEvent::Request {
            stream: s.id,
            tag: s.tag,
            body_bytes: s.body_bytes,
        });
    }

    /// A frame header arrived.
    fn start_frame(
        &mut self,
        h: FrameHeader,
        responses: &[H2Response],
        out: &mut Vec<u8>,
        classify: &mut impl FnMut(&[u8], &[u8]) -> T,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        if h.len > DEFAULT_MAX_FRAME_SIZE {
            return Err(H2Error::FrameTooLarge(h.len));
        }
        if !self.peer_settings_seen && h.kind != FrameKind::SETTINGS {
            return Err(H2Error::SettingsFirst(h.kind));
        }
        if let Some(b) = self.open_block {
            if h.kind != FrameKind::CONTINUATION || h.stream != b.stream {
                return Err(H2Error::ExpectedContinuation(h.kind));
            }
        }
        if h.kind != FrameKind::DATA {
            self.rx = Rx::Payload(h);
            if h.len == 0 {
                self.rx = Rx::Head;
                self.frame(h, &[], responses, out, classify, events)?;
            }
            return Ok(());
        }
        if h.stream == 0 {
            return Err(H2Error::StreamZero(h.kind));
        }
        if h.stream.is_multiple_of(2) || h.stream > self.last_stream {
            return Err(H2Error::IdleStream(h.kind));
        }
        let len = i64::from(h.len);
        if len > self.recv_window {
            return Err(H2Error::FlowControlViolation);
        }
        self.recv_window -= len;
        self.recv_unacked += h.len;
        if self.recv_unacked >= self.config.connection_window / 2 {
            write_window_update(out, 0, self.recv_unacked);
            self.recv_window += i64::from(self.recv_unacked);
            self.recv_unacked = 0;
        }
        let end = h.flags & flags::END_STREAM != 0;
        // DATA on a stream that is closed (reset, refused, answered) is
        // counted for the connection's window and dropped.
        let mut counted = false;
        if let Some(k) = self.find(h.stream) {
            let s = &mut self.streams[k];
            if s.receiving {
                counted = true;
                if len > s.recv_window {
                    return Err(H2Error::FlowControlViolation);
                }
                s.recv_window -= len;
                let half = i64::from(self.config.stream_window / 2);
                if !end && s.recv_window < half {
                    let inc = i64::from(self.config.stream_window) - s.recv_window;
                    write_window_update(out, s.id, inc as u32);
                    s.recv_window += inc;
                }
            }
        }
        let stream = if counted { h.stream } else { 0 };
        if h.flags & flags::PADDED != 0 {
            if h.len == 0 {
                return Err(H2Error::BadPadding(h.kind));
            }
            self.rx = Rx::DataPad(FrameHeader { stream, ..h });
        } else {
            self.rx = Rx::Data {
                stream,
                end,
                left: h.len,
                body: h.len,
            };
            self.data_progress(out, events);
        }
        Ok(())
    }

    /// A whole non-DATA frame.
    fn frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        responses: &[H2Response],
        out: &mut Vec<u8>,
        classify: &mut impl FnMut(&[u8], &[u8]) -> T,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        let on_stream = |kind| {
            if h.stream == 0 {
                Err(H2Error::StreamZero(kind))
            } else {
                Ok(())
            }
        };
        let on_connection = |kind| {
            if h.stream != 0 {
                Err(H2Error::NotStreamZero(kind))
            } else {
                Ok(())
            }
        };
        match h.kind {
            FrameKind::HEADERS => {
                on_stream(h.kind)?;
                self.headers_frame(h, p, out, classify, events)
            }
            FrameKind::CONTINUATION => {
                let Some(b) = self.open_block else {
                    return Err(H2Error::UnexpectedContinuation);
                };
                self.append_block(p)?;
                if h.flags & flags::END_HEADERS != 0 {
                    self.open_block = None;
                    let block = std::mem::take(&mut self.block);
                    let r =
                        self.header_block(b.stream, b.end_stream, &block, out, classify, events);
                    self.block = block;
                    self.block.clear();
                    r?;
                }
                Ok(())
            }
            FrameKind::PRIORITY => {
                on_stream(h.kind)?;
                if p.len() != 5 {
                    return Err(H2Error::BadFrameSize(h.kind));
                }
                Ok(())
            }
            FrameKind::RST_STREAM => {
                on_stream(h.kind)?;
                self.rst_stream_frame(h, p, events)
            }
            FrameKind::SETTINGS => {
                on_connection(h.kind)?;
                self.settings_frame(h, p, responses, out, events)
            }
            FrameKind::PUSH_PROMISE => Err(H2Error::PushPromise),
            FrameKind::PING => {
                on_connection(h.kind)?;
                let data: [u8; 8] = p.try_into().map_err(|_| H2Error::BadFrameSize(h.kind))?;
                if h.flags & flags::ACK == 0 {
                    write_ping(out, true, data);
                }
                Ok(())
            }
            FrameKind::GOAWAY => {
                on_connection(h.kind)?;
                if p.len() < 8 {
                    return Err(H2Error::BadFrameSize(h.kind));
                }
                events(ServerEvent::GoAway {
                    last_stream: u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW,
                    code: ErrorCode(u32::from_be_bytes([p[4], p[5], p[6], p[7]])),
                });
                Ok(())
            }
            FrameKind::WINDOW_UPDATE => self.window_update_frame(h, p, responses, out, events),
            _ => Ok(()), // unknown types are ignored (RFC 9113 §4.1)
        }
    }

    /// RST_STREAM: the stream ends with the client's code.
    fn rst_stream_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        if p.len() != 4 {
            return Err(H2Error::BadFrameSize(h.kind));
        }
        if h.stream.is_multiple_of(2) || h.stream > self.last_stream {
            return Err(H2Error::IdleStream(h.kind));
        }
        let code = ErrorCode(u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
        if let Some(k) = self.find(h.stream) {
            let s = self.streams.swap_remove(k);
            events(ServerEvent::Reset {
                stream: s.id,
                tag: s.tag,
                code,
            });
        }
        Ok(())
    }

    /// SETTINGS (applied, then ACKed; a larger window may free answers) or its ACK.
    fn settings_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        responses: &[H2Response],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        if h.flags & flags::ACK != 0 {
            if !p.is_empty() {
                return Err(H2Error::BadFrameSize(h.kind));
            }
            return Ok(());
        }
        if !p.len().is_multiple_of(6) {
            return Err(H2Error::BadFrameSize(h.kind));
        }
        for s in p.chunks_exact(6) {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            self.apply_setting(id, v)?;
        }
        self.peer_settings_seen = true;
        write_settings_ack(out);
        self.pump(responses, out, events);
        Ok(())
    }

    /// WINDOW_UPDATE for the connection or a stream: answers held back may go.
    fn window_update_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        responses: &[H2Response],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        if p.len() != 4 {
            return Err(H2Error::BadFrameSize(h.kind));
        }
        let inc = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW;
        if h.stream != 0 && (h.stream.is_multiple_of(2) || h.stream > self.last_stream) {
            return Err(H2Error::IdleStream(h.kind));
        }
        if inc == 0 {
            return Err(H2Error::ZeroWindowIncrement);
        }
        let window = if h.stream == 0 {
            &mut self.send_window
        } else if let Some(k) = self.find(h.stream) {
            &mut self.streams[k].send_window
        } else {
            return Ok(()); // a closed stream
        };
        *window += i64::from(inc);
        if *window > i64::from(MAX_WINDOW) {
            return Err(H2Error::WindowOverflow);
        }
        self.pump(responses, out, events);
        Ok(())
    }

    fn apply_setting(&mut self, id: u16, v: u32) -> Result<(), H2Error> {
        match id {
            setting::HEADER_TABLE_SIZE => self.peer.header_table_size = v,
            setting::ENABLE_PUSH => {
                if v > 1 {
                    return Err(H2Error::BadEnablePush);
                }
                self.peer.enable_push = v == 1;
            }
            setting::MAX_CONCURRENT_STREAMS => self.peer.max_concurrent_streams = v,
            setting::INITIAL_WINDOW_SIZE => {
                if v > MAX_WINDOW {
                    return Err(H2Error::BadInitialWindowSize);
                }
                let delta = i64::from(v) - i64::from(self.peer.initial_window_size);
                for s in &mut self.streams {
                    s.send_window += delta;
                    if s.send_window > i64::from(MAX_WINDOW) {
                        return Err(H2Error::WindowOverflow);
                    }
                }
                self.peer.initial_window_size = v;
            }
            setting::MAX_FRAME_SIZE => {
                if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&v) {
                    return Err(H2Error::BadMaxFrameSize);
                }
                self.peer.max_frame_size = v;
            }
            setting::MAX_HEADER_LIST_SIZE => self.peer.max_header_list_size = v,
            _ => {}
        }
        Ok(())
    }

    fn append_block(&mut self, fragment: &[u8]) -> Result<(), H2Error> {
        if self.block.len() + fragment.len() > self.config.max_header_block {
            return Err(H2Error::HeaderBlockTooLarge);
        }
        self.block.extend_from_slice(fragment);
        Ok(())
    }

    /// HEADERS: a request head, or trailers of a request still receiving.
    fn headers_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        out: &mut Vec<u8>,
        classify: &mut impl FnMut(&[u8], &[u8]) -> T,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        if h.stream.is_multiple_of(2) {
            return Err(H2Error::EvenStream(h.kind));
        }
        let mut p = p;
        let mut pad = 0;
        if h.flags & flags::PADDED != 0 {
            let (&n, rest) = p.split_first().ok_or(H2Error::BadPadding(h.kind))?;
            pad = usize::from(n);
            p = rest;
        }
        if h.flags & flags::PRIORITY != 0 {
            if p.len() < 5 {
                return Err(H2Error::BadFrameSize(h.kind));
            }
            p = &p[5..];
        }
        if pad > p.len() {
            return Err(H2Error::BadPadding(h.kind));
        }
        let fragment = &p[..p.len() - pad];
        let end_stream = h.flags & flags::END_STREAM != 0;
        if h.flags & flags::END_HEADERS != 0 {
            self.header_block(h.stream, end_stream, fragment, out, classify, events)
        } else {
            self.append_block(fragment)?;
            self.open_block = Some(OpenBlock {
                stream: h.stream,
                end_stream,
            });
            Ok(())
        }
    }

    /// A whole header block on `stream`.
    fn header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        out: &mut Vec<u8>,
        classify: &mut impl FnMut(&[u8], &[u8]) -> T,
        events: &mut impl FnMut(ServerEvent<T>),
    ) -> Result<(), H2Error> {
        if block.len() > self.config.max_header_block {
            return Err(H2Error::HeaderBlockTooLarge);
        }
        if stream <= self.last_stream {
            // Trailers of a request still receiving, or a block on a closed
            // stream: decoded only to keep the table in step.
            self.hpack.decode(block, |_, _| {})?;
            if let Some(k) = self.find(stream) {
                if self.streams[k].receiving {
                    if end_stream {
                        self.request_done(k, out, events);
                    } else {
                        // Trailers must end the stream (RFC 9113 §8.1).
                        let s = self.streams.swap_remove(k);
                        write_rst_stream(out, s.id, ErrorCode::PROTOCOL_ERROR);
                        events(ServerEvent::Malformed { stream: s.id });
                    }
                }
            }
            return Ok(());
        }
        self.last_stream = stream;
        // The head's :method and :path are copied to `scratch` (kept, so
        // no allocation once it has grown).
        let mut method = (0usize, 0usize);
        let mut path = (0usize, 0usize);
        let scratch = &mut self.scratch;
        scratch.clear();
        let mut bad = false;
        let mut regular = false;
        let mut seen = 0u8;
        let mut content_length: Option<u64> = None;
        self.hpack.decode(block, |name, value| {
            if bad {
                return;
            }
            if let Some(pseudo) = name.strip_prefix(b":") {
                let bit = match pseudo {
                    b"method" => 1,
                    b"path" => 2,
                    b"scheme" => 4,
                    b"authority" => 8,
                    _ => 0,
                };
                if bit == 0 || regular || seen & bit != 0 {
                    bad = true;
                    return;
                }
                seen |= bit;
                let at = scratch.len();
                scratch.extend_from_slice(value);
                match bit {
                    1 => method = (at, scratch.len()),
                    2 => path = (at, scratch.len()),
                    _ => {}
                }
                return;
            }
            regular = true;
            if name.iter().any(u8::is_ascii_uppercase) || connection_specific(name) {
                bad = true;
                return;
            }
            if name == b"te" && value != b"trailers" {
                bad = true;
                return;
            }
            if name == b"content-length" {
                match parse_u64(value) {
                    Some(n) if content_length.is_none_or(|c| c == n) => content_length = Some(n),
                    _ => bad = true,
                }
            }
        })?;
        let scratch = &self.scratch;
        let is_connect = &scratch[method.0..method.1] == b"CONNECT";
        if seen & 1 == 0 || (!is_connect && (seen & 2 == 0 || path.0 == path.1)) {
            bad = true;
        }
        if bad {
            write_rst_stream(out, stream, ErrorCode::PROTOCOL_ERROR);
            events(ServerEvent::Malformed { stream });
            Ok(())
        } else if self.going_away {
            Ok(()) // above the GOAWAY's last stream: ignored
        } else if self.streams.len() >= self.config.max_concurrent_streams as usize {
            self.refused += 1;
            write_rst_stream(out, stream, ErrorCode::REFUSED_STREAM);
            events(ServerEvent::Refused { stream });
            Ok(())
        } else {
            let tag = classify(&scratch[method.0..method.1], &scratch[path.0..path.1]);
            self.streams.push(Stream {
                id: stream,
                tag,
                receiving: true,
                body_bytes: 0,
                content_length,
                recv_window: i64::from(self.config.stream_window),
                send_window: i64::from(self.peer.initial_window_size),
                body: Body::None,
                sent: 0,
            });
            if end_stream {
                let k = self.streams.len() - 1;
                self.request_done(k, out, events);
            }
            Ok(())
        }
    }
}
