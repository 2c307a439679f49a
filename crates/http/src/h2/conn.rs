//! The client side of one HTTP/2 connection: bytes in, events and bytes out.

use super::frame::{
    flags, setting, write_goaway, write_header, write_ping, write_rst_stream, write_settings,
    write_settings_ack, write_window_update, ErrorCode, FrameHeader, FrameKind,
    DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, FRAME_HEADER_LEN, MAX_MAX_FRAME_SIZE, MAX_WINDOW,
    PREFACE,
};
use super::hpack::{self, Decoder, HpackError};
use crate::request::{RequestError, RequestSpec, RequestTemplate};

/// Why the connection must end: an RFC 9113 connection error. [`Connection::recv`]
/// has already written the GOAWAY carrying [`H2Error::code`].
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum H2Error {
    /// A frame longer than the SETTINGS_MAX_FRAME_SIZE the client advertised.
    #[error("frame of {0} bytes exceeds SETTINGS_MAX_FRAME_SIZE")]
    FrameTooLarge(u32),
    /// A frame whose payload has the wrong length for its type.
    #[error("{0} frame with a payload of the wrong length")]
    BadFrameSize(FrameKind),
    /// A frame that belongs to a stream sent on stream 0.
    #[error("{0} frame on stream 0")]
    StreamZero(FrameKind),
    /// A connection-level frame sent on a stream.
    #[error("{0} frame on a stream other than 0")]
    NotStreamZero(FrameKind),
    /// A frame on a stream the client never opened (or a server-initiated one).
    #[error("{0} frame on a stream the client never opened")]
    IdleStream(FrameKind),
    /// Another frame where a CONTINUATION of an open header block must come.
    #[error("{0} frame inside a header block (CONTINUATION expected)")]
    ExpectedContinuation(FrameKind),
    /// A CONTINUATION with no header block open.
    #[error("CONTINUATION without an open header block")]
    UnexpectedContinuation,
    /// A pad length not shorter than the frame's payload.
    #[error("{0} frame with a pad length not shorter than its payload")]
    BadPadding(FrameKind),
    /// PUSH_PROMISE although the client sent SETTINGS_ENABLE_PUSH = 0.
    #[error("PUSH_PROMISE although push is disabled")]
    PushPromise,
    /// SETTINGS_ENABLE_PUSH other than 0 or 1.
    #[error("SETTINGS_ENABLE_PUSH other than 0 or 1")]
    BadEnablePush,
    /// SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1.
    #[error("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1")]
    BadInitialWindowSize,
    /// SETTINGS_MAX_FRAME_SIZE outside 2^14..2^24-1.
    #[error("SETTINGS_MAX_FRAME_SIZE outside 16384..16777215")]
    BadMaxFrameSize,
    /// WINDOW_UPDATE with an increment of 0.
    #[error("WINDOW_UPDATE with increment 0")]
    ZeroWindowIncrement,
    /// A send window pushed above 2^31-1.
    #[error("flow-control window above 2^31-1")]
    WindowOverflow,
    /// DATA beyond the receive window the client granted.
    #[error("DATA beyond the flow-control window")]
    FlowControlViolation,
    /// A header block (all its fragments) longer than the client's limit.
    #[error("header block larger than the limit")]
    HeaderBlockTooLarge,
    /// The header block cannot be decoded.
    #[error("HPACK: {0}")]
    Compression(#[from] HpackError),
    /// (Server) The client's first bytes are not the connection preface.
    #[error("the client did not send the HTTP/2 connection preface")]
    BadPreface,
    /// (Server) The client's first frame after the preface is not SETTINGS.
    #[error("{0} frame before the client's SETTINGS")]
    SettingsFirst(FrameKind),
    /// (Server) A request HEADERS on an even-numbered (server-initiated) stream.
    #[error("{0} frame opening an even-numbered stream")]
    EvenStream(FrameKind),
}

impl H2Error {
    /// A short snake_case cause, for reports and error counters.
    pub fn name(self) -> &'static str {
        use H2Error::*;
        match self {
            FrameTooLarge(_) => "frame_too_large",
            BadFrameSize(_) => "bad_frame_size",
            StreamZero(_) => "frame_on_stream_zero",
            NotStreamZero(_) => "frame_not_on_stream_zero",
            IdleStream(_) => "frame_on_idle_stream",
            ExpectedContinuation(_) => "expected_continuation",
            UnexpectedContinuation => "unexpected_continuation",
            BadPadding(_) => "bad_padding",
            PushPromise => "push_promise",
            BadEnablePush => "bad_enable_push",
            BadInitialWindowSize => "bad_initial_window_size",
            BadMaxFrameSize => "bad_max_frame_size",
            ZeroWindowIncrement => "zero_window_increment",
            WindowOverflow => "window_overflow",
            FlowControlViolation => "flow_control_violation",
            HeaderBlockTooLarge => "header_block_too_large",
            Compression(_) => "compression",
            BadPreface => "bad_preface",
            SettingsFirst(_) => "settings_not_first",
            EvenStream(_) => "even_stream_id",
        }
    }

    /// The error code the GOAWAY carries.
    pub fn code(self) -> ErrorCode {
        use H2Error::*;
        match self {
            FrameTooLarge(_) | BadFrameSize(_) => ErrorCode::FRAME_SIZE_ERROR,
            BadInitialWindowSize | WindowOverflow | FlowControlViolation => {
                ErrorCode::FLOW_CONTROL_ERROR
            }
            HeaderBlockTooLarge => ErrorCode::ENHANCE_YOUR_CALM,
            Compression(_) => ErrorCode::COMPRESSION_ERROR,
            _ => ErrorCode::PROTOCOL_ERROR,
        }
    }
}

/// Why one response is malformed (RFC 9113 §8.1.1): a stream error; the
/// client resets the stream with PROTOCOL_ERROR and the connection goes on.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Malformed {
    /// No `:status`, two of them, or one that is not three digits.
    #[error("missing, repeated or invalid :status")]
    BadStatus,
    /// A pseudo-header other than `:status`, or one after a regular field or in trailers.
    #[error("unexpected pseudo-header")]
    BadPseudo,
    /// A field name with upper-case letters, or a connection-specific field.
    #[error("invalid field name")]
    BadFieldName,
    /// DATA before the response head.
    #[error("DATA before the response head")]
    DataBeforeHeaders,
    /// A HEADERS after the final head that does not end the stream.
    #[error("trailers without END_STREAM")]
    TrailersWithoutEnd,
    /// An informational (1xx) head that ends the stream.
    #[error("informational response ends the stream")]
    InformationalEnd,
    /// A content-length that is not a number, or disagrees with the DATA received.
    #[error("content-length does not match the DATA received")]
    ContentLength,
}

impl Malformed {
    /// A short snake_case cause, for reports and error counters.
    pub fn name(self) -> &'static str {
        match self {
            Malformed::BadStatus => "h2_bad_status",
            Malformed::BadPseudo => "h2_bad_pseudo_header",
            Malformed::BadFieldName => "h2_bad_field_name",
            Malformed::DataBeforeHeaders => "h2_data_before_headers",
            Malformed::TrailersWithoutEnd => "h2_trailers_without_end",
            Malformed::InformationalEnd => "h2_informational_end",
            Malformed::ContentLength => "h2_content_length",
        }
    }
}

/// The server's SETTINGS as they stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerSettings {
    pub header_table_size: u32,
    pub enable_push: bool,
    /// `u32::MAX` until the server limits it.
    pub max_concurrent_streams: u32,
    pub initial_window_size: u32,
    pub max_frame_size: u32,
    /// `u32::MAX` until the server limits it.
    pub max_header_list_size: u32,
}

impl Default for PeerSettings {
    fn default() -> Self {
        PeerSettings {
            header_table_size: 4096,
            enable_push: true,
            max_concurrent_streams: u32::MAX,
            initial_window_size: DEFAULT_WINDOW,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: u32::MAX,
        }
    }
}

/// What the client advertises and allows itself.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Streams open at once, at most (further capped by the server's SETTINGS).
    pub max_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window.
    pub stream_window: u32,
    /// The connection's receive window (raised by a WINDOW_UPDATE after the preface).
    pub connection_window: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK dynamic table the server may use.
    pub header_table_size: u32,
    /// Largest header block (all fragments) accepted, before decoding.
    pub max_header_block: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_streams: 1,
            stream_window: MAX_WINDOW >> 1,
            connection_window: MAX_WINDOW >> 1,
            header_table_size: 4096,
            max_header_block: 64 * 1024,
        }
    }
}

/// A request rendered once: its HPACK header block and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H2Request {
    block: Vec<u8>,
    body: Vec<u8>,
    is_head: bool,
}

/// Fields HTTP/2 forbids (RFC 9113 §8.2.2), dropped from requests and refused in responses.
pub(super) fn connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}

impl H2Request {
    /// Validates the request as [`RequestTemplate::new`] does and renders its
    /// header block: `:method`, `:scheme`, `:authority` (from `Host` if given),
    /// `:path`, then the user's fields in lower case (connection-specific ones
    /// dropped), `user-agent` and `content-length` as for HTTP/1.1. Static
    /// table entries are sent as indices, the rest as literals without
    /// indexing, so the block is the same on every stream.
    pub fn new(spec: &RequestSpec) -> Result<Self, RequestError> {
        RequestTemplate::new(spec)?; // the same validation as HTTP/1.1
        let mut block = Vec::with_capacity(128);
        let authority = spec
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map_or(spec.url.authority.as_str(), |(_, v)| v.as_str());
        let scheme: &[u8] = if spec.url.tls { b"https" } else { b"http" };
        hpack::encode_field(b":method", spec.method.as_bytes(), &mut block);
        hpack::encode_field(b":scheme", scheme, &mut block);
        hpack::encode_field(b":authority", authority.as_bytes(), &mut block);
        hpack::encode_field(b":path", spec.url.path_and_query.as_bytes(), &mut block);
        let mut has_ua = false;
        let mut has_cl = false;
        let mut lower = Vec::new();
        for (name, value) in spec.headers {
            lower.clear();
            lower.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
            if connection_specific(&lower) || lower == b"host" {
                continue;
            }
            if lower == b"te" && !value.eq_ignore_ascii_case("trailers") {
                continue;
            }
            has_ua |= lower == b"user-agent";
            has_cl |= lower == b"content-length";
            hpack::encode_field(&lower, value.as_bytes(), &mut block);
        }
        if !has_ua {
            hpack::encode_field(b"user-agent", crate::USER_AGENT.as_bytes(), &mut block);
        }
        let body_method = matches!(spec.method, "POST" | "PUT" | "PATCH");
        if (!spec.body.is_empty() || body_method) && !has_cl {
            let len = spec.body.len().to_string();
            hpack::encode_field(b"content-length", len.as_bytes(), &mut block);
        }
        Ok(H2Request {
            block,
            body: spec.body.to_vec(),
            is_head: spec.method == "HEAD",
        })
    }

    /// An empty request whose buffers [`H2Request::render_http1`] fills.
    pub fn empty() -> Self {
        H2Request {
            block: Vec::new(),
            body: Vec::new(),
            is_head: false,
        }
    }

    /// Renders an HTTP/1.1 request as [`RequestTemplate`] writes it (request
    /// line, fields, empty line, body) into this one, reusing its buffers:
    /// the same header block [`H2Request::new`] makes of the same request,
    /// with `:scheme` https or http. For requests rendered per send (a
    /// session's cookies and captured values). False, and left empty, when
    /// the bytes hold no request line and empty line.
    pub fn render_http1(&mut self, request: &[u8], https: bool) -> bool {
        self.block.clear();
        self.body.clear();
        self.is_head = false;
        let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
            return false;
        };
        let mut lines = request[..end]
            .split(|&b| b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
        let line = lines.next().unwrap_or(b"");
        let mut words = line.split(|&b| b == b' ');
        let (Some(method), Some(path)) = (words.next(), words.next()) else {
            return false;
        };
        let fields = lines.clone().filter_map(split_field);
        let authority = fields
            .clone()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map_or(&b""[..], |(_, v)| v);
        let scheme: &[u8] = if https { b"https" } else { b"http" };
        let block = &mut self.block;
        hpack::encode_field(b":method", method, block);
        hpack::encode_field(b":scheme", scheme, block);
        hpack::encode_field(b":authority", authority, block);
        hpack::encode_field(b":path", path, block);
        for (name, value) in fields {
            encode_lower(name, value, block);
        }
        self.body.extend_from_slice(&request[end + 4..]);
        self.is_head = method == b"HEAD";
        true
    }

    /// The HPACK header block.
    pub fn block(&self) -> &[u8] {
        &self.block
    }

    /// The request body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

/// A field line `Name: value` as (name, trimmed value).
fn split_field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&b| b == b':')?;
    Some((&line[..colon], line[colon + 1..].trim_ascii()))
}

/// Appends a request field with its name in lower case, as
/// [`H2Request::new`] does (no allocation: names up to 64 bytes are
/// lowered on the stack; longer ones, which no static entry or
/// connection-specific name has, are written as plain literals).
fn encode_lower(name: &[u8], value: &[u8], block: &mut Vec<u8>) {
    let mut buf = [0u8; 64];
    let Some(lower) = buf.get_mut(..name.len()) else {
        block.push(0x00);
        hpack::encode_int(name.len(), 7, 0, block);
        block.extend(name.iter().map(u8::to_ascii_lowercase));
        hpack::encode_str(value, block);
        return;
    };
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let lower = &*lower;
    if connection_specific(lower) || lower == b"host" {
        return;
    }
    if lower == b"te" && !value.eq_ignore_ascii_case(b"trailers") {
        return;
    }
    hpack::encode_field(lower, value, block);
}

/// What happened, in the order the bytes said it. `T` is the caller's tag of each stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a, T> {
    /// The server's SETTINGS were applied (the stream limit may have changed).
    Settings,
    /// The server acknowledged the client's SETTINGS.
    SettingsAcked,
    /// A PING the client sent came back.
    PingAck([u8; 8]),
    /// The final response head of a stream arrived (its [`Event::Field`]s came just before).
    Head { tag: T, stream: u32, status: u16 },
    /// A regular field of a stream's final head or trailers (not of 1xx
    /// heads). Fields of a head found malformed later in its block have been
    /// reported before the [`Event::Malformed`].
    Field {
        tag: T,
        name: &'a [u8],
        value: &'a [u8],
    },
    /// Payload bytes of a stream's final response (DATA frames' data, no
    /// padding), in order, as they arrive; they are not kept.
    Data { tag: T, data: &'a [u8] },
    /// A stream's response ended well.
    Response {
        tag: T,
        stream: u32,
        status: u16,
        body_bytes: u64,
    },
    /// The server reset a stream.
    Reset {
        tag: T,
        stream: u32,
        code: ErrorCode,
    },
    /// The client reset a stream whose response is malformed.
    Malformed { tag: T, stream: u32, why: Malformed },
    /// A stream above a GOAWAY's last-stream-id: never processed, safe to retry.
    Refused { tag: T, stream: u32 },
    /// The server is going away: no new streams on this connection.
    GoAway { last_stream: u32, code: ErrorCode },
}

/// One open stream.
struct Stream<T> {
    id: u32,
    tag: T,
    request: u32,
    /// Body bytes sent so far; the stream is half-closed (local) once all are.
    body_sent: usize,
    send_window: i64,
    recv_window: i64,
    /// 0 until the final head; then its status.
    status: u16,
    content_length: Option<u64>,
    body_bytes: u64,
    head_method: bool,
}

/// Where the reader is within a frame.
#[derive(Clone, Copy, Debug)]
enum Rx {
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

/// An open header block awaiting CONTINUATION.
#[derive(Clone, Copy)]
struct OpenBlock {
    stream: u32,
    end_stream: bool,
}

/// The client side of an HTTP/2 connection, with no I/O: [`preface`](Self::preface)
/// and [`open`](Self::open) append bytes to send, [`recv`](Self::recv) takes
/// received bytes split anywhere (and keeps none of the caller's buffers),
/// appends what must be answered (SETTINGS and PING ACKs, WINDOW_UPDATEs,
/// request bodies freed by window) and reports [`Event`]s.
///
/// Request templates are passed by reference to the calls that may send
/// (`reqs`, indexed by the `request` given to `open`), so one table serves
/// every connection of a worker.
pub struct Connection<T> {
    config: Config,
    peer: PeerSettings,
    peer_settings_seen: bool,
    settings_acked: bool,
    send_window: i64,
    recv_window: i64,
    /// Received bytes not yet returned to the connection window.
    recv_unacked: u32,
    next_stream: u32,
    streams: Vec<Stream<T>>,
    goaway: Option<(u32, ErrorCode)>,
    failed: Option<H2Error>,
    hpack: Decoder,
    rx: Rx,
    head: [u8; FRAME_HEADER_LEN],
    head_len: usize,
    payload: Vec<u8>,
    block: Vec<u8>,
    open_block: Option<OpenBlock>,
}

impl<T: Copy> Connection<T> {
    /// A connection that has sent nothing yet.
    pub fn new(config: Config) -> Self {
        let max_streams = config.max_streams.max(1);
        let table = config.header_table_size.max(4096) as usize;
        Connection {
            config: Config {
                max_streams,
                ..config
            },
            peer: PeerSettings::default(),
            peer_settings_seen: false,
            settings_acked: false,
            send_window: i64::from(DEFAULT_WINDOW),
            recv_window: i64::from(DEFAULT_WINDOW),
            recv_unacked: 0,
            next_stream: 1,
            streams: Vec::with_capacity(max_streams.min(1024) as usize),
            goaway: None,
            failed: None,
            // Until our SETTINGS is acknowledged the server may use the default 4096.
            hpack: Decoder::new(table),
            rx: Rx::Head,
            head: [0; FRAME_HEADER_LEN],
            head_len: 0,
            payload: Vec::new(),
            block: Vec::new(),
            open_block: None,
        }
    }

    /// Appends the connection preface, the client's SETTINGS and the
    /// connection window's first WINDOW_UPDATE.
    pub fn preface(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(PREFACE);
        let mut s = [(0u16, 0u32); 4];
        let mut n = 0;
        let mut add = |id, v| {
            s[n] = (id, v);
            n += 1;
        };
        add(setting::ENABLE_PUSH, 0);
        add(setting::INITIAL_WINDOW_SIZE, self.config.stream_window);
        add(setting::MAX_FRAME_SIZE, DEFAULT_MAX_FRAME_SIZE);
        if self.config.header_table_size != 4096 {
            add(setting::HEADER_TABLE_SIZE, self.config.header_table_size);
        }
        write_settings(out, &s[..n]);
        let target = i64::from(self.config.connection_window);
        if target > self.recv_window {
            write_window_update(out, 0, (target - self.recv_window) as u32);
            self.recv_window = target;
        }
    }

    /// The server's SETTINGS as they stand.
    pub fn peer_settings(&self) -> &PeerSettings {
        &self.peer
    }

    /// The server's first SETTINGS has arrived.
    pub fn peer_settings_seen(&self) -> bool {
        self.peer_settings_seen
    }

    /// The server has acknowledged the client's SETTINGS.
    pub fn settings_acked(&self) -> bool {
        self.settings_acked
    }

    /// The id the next [`open`](Self::open) will use.
    pub fn next_id(&self) -> u32 {
        self.next_stream
    }

    /// Streams open now.
    pub fn active(&self) -> usize {
        self.streams.len()
    }

    /// Streams that may be open at once: `--streams` capped by the server.
    pub fn stream_limit(&self) -> u32 {
        self.config
            .max_streams
            .min(self.peer.max_concurrent_streams)
    }

    /// Whether a stream's request body waits for the server's
    /// flow-control window (O(streams): call only when requests have bodies).
    pub fn send_blocked(&self, reqs: &[H2Request]) -> bool {
        self.streams
            .iter()
            .any(|s| s.body_sent < reqs[s.request as usize].body.len())
    }

    /// The GOAWAY received, if any.
    pub fn goaway(&self) -> Option<(u32, ErrorCode)> {
        self.goaway
    }

    /// No stream may ever be opened here again (GOAWAY, connection error or
    /// stream ids used up): finish the open ones, then reconnect.
    pub fn is_closing(&self) -> bool {
        self.goaway.is_some() || self.failed.is_some() || self.next_stream > MAX_WINDOW
    }

    /// A stream may be opened now: the server's SETTINGS arrived, the
    /// connection is not closing and fewer than [`stream_limit`](Self::stream_limit) are open.
    pub fn can_open(&self) -> bool {
        self.peer_settings_seen
            && !self.is_closing()
            && (self.streams.len() as u32) < self.stream_limit()
    }

    /// Opens a stream for `reqs[request]`: appends its HEADERS (and
    /// CONTINUATIONs when the block exceeds the server's frame size) and as
    /// much of its body as the windows allow. Returns the stream id.
    ///
    /// # Panics
    /// When [`can_open`](Self::can_open) is false.
    pub fn open(&mut self, reqs: &[H2Request], request: usize, tag: T, out: &mut Vec<u8>) -> u32 {
        assert!(self.can_open(), "open() while can_open() is false");
        let req = &reqs[request];
        let id = self.next_stream;
        self.next_stream += 2;
        let max = self.peer.max_frame_size as usize;
        let end_stream = if req.body.is_empty() {
            flags::END_STREAM
        } else {
            0
        };
        let mut chunks = req.block.chunks(max);
        let first = chunks.next().unwrap_or(&[]);
        let more = req.block.len() > max;
        let end_headers = if more { 0 } else { flags::END_HEADERS };
        write_header(
            out,
            first.len(),
            FrameKind::HEADERS,
            end_stream | end_headers,
            id,
        );
        out.extend_from_slice(first);
        let n = chunks.len();
        for (i, c) in chunks.enumerate() {
            let f = if i + 1 == n { flags::END_HEADERS } else { 0 };
            write_header(out, c.len(), FrameKind::CONTINUATION, f, id);
            out.extend_from_slice(c);
        }
        self.streams.push(Stream {
            id,
            tag,
            request: request as u32,
            body_sent: 0,
            send_window: i64::from(self.peer.initial_window_size),
            recv_window: i64::from(self.config.stream_window),
            status: 0,
            content_length: None,
            body_bytes: 0,
            head_method: req.is_head,
        });
        if !req.body.is_empty() {
            let k = self.streams.len() - 1;
            self.send_body(reqs, k, out);
        }
        id
    }

    /// Sends what the windows allow of stream `k`'s body.
    fn send_body(&mut self, reqs: &[H2Request], k: usize, out: &mut Vec<u8>) {
        let s = &mut self.streams[k];
        let body = &reqs[s.request as usize].body;
        let max = self.peer.max_frame_size as usize;
        while s.body_sent < body.len() {
            let window = s.send_window.min(self.send_window);
            if window <= 0 {
                return;
            }
            let n = (body.len() - s.body_sent).min(max).min(window as usize);
            let end = s.body_sent + n == body.len();
            write_header(
                out,
                n,
                FrameKind::DATA,
                if end { flags::END_STREAM } else { 0 },
                s.id,
            );
            out.extend_from_slice(&body[s.body_sent..s.body_sent + n]);
            s.body_sent += n;
            s.send_window -= n as i64;
            self.send_window -= n as i64;
        }
    }

    /// Sends the bodies held back by flow control.
    fn send_bodies(&mut self, reqs: &[H2Request], out: &mut Vec<u8>) {
        for k in 0..self.streams.len() {
            if self.send_window <= 0 {
                return;
            }
            let s = &self.streams[k];
            if s.body_sent < reqs[s.request as usize].body.len() {
                self.send_body(reqs, k, out);
            }
        }
    }

    /// Sends a PING (its ACK is reported as [`Event::PingAck`]).
    pub fn ping(&mut self, data: [u8; 8], out: &mut Vec<u8>) {
        write_ping(out, false, data);
    }

    /// Appends a GOAWAY(NO_ERROR) for a graceful close.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        write_goaway(out, 0, ErrorCode::NO_ERROR);
    }

    /// Takes received bytes. On a connection error a GOAWAY is appended to
    /// `out`, the error is returned (and again on any later call), and the
    /// open streams' tags are lost with the connection: the caller still
    /// knows them.
    pub fn recv(
        &mut self,
        mut input: &[u8],
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        while !input.is_empty() {
            if let Err(e) = self.step(&mut input, reqs, out, events) {
                self.failed = Some(e);
                write_goaway(out, 0, e.code());
                return Err(e);
            }
        }
        Ok(())
    }

    fn step(
        &mut self,
        input: &mut &[u8],
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        match self.rx {
            Rx::Head => {
                let n = (FRAME_HEADER_LEN - self.head_len).min(input.len());
                self.head[self.head_len..self.head_len + n].copy_from_slice(&input[..n]);
                self.head_len += n;
                *input = &input[n..];
                if self.head_len == FRAME_HEADER_LEN {
                    self.head_len = 0;
                    let h = FrameHeader::parse(&self.head);
                    self.start_frame(h, reqs, out, events)?;
                }
            }
            Rx::Payload(h) => {
                let len = h.len as usize;
                if self.payload.is_empty() && input.len() >= len {
                    let (frame, rest) = input.split_at(len);
                    *input = rest;
                    self.rx = Rx::Head;
                    self.frame(h, frame, reqs, out, events)?;
                } else {
                    let n = (len - self.payload.len()).min(input.len());
                    self.payload.extend_from_slice(&input[..n]);
                    *input = &input[n..];
                    if self.payload.len() == len {
                        self.rx = Rx::Head;
                        let payload = std::mem::take(&mut self.payload);
                        let r = self.frame(h, &payload, reqs, out, events);
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
                self.data_progress(reqs, out, events);
            }
            Rx::Data {
                stream,
                end,
                left,
                body,
            } => {
                let n = (left as usize).min(input.len()) as u32;
                let chunk = &input[..n as usize];
                *input = &input[n as usize..];
                let b = n.min(body);
                if let Some(s) = self.streams.iter_mut().find(|s| s.id == stream) {
                    s.body_bytes += u64::from(b);
                    if b > 0 {
                        events(Event::Data {
                            tag: s.tag,
                            data: &chunk[..b as usize],
                        });
                    }
                }
                self.rx = Rx::Data {
                    stream,
                    end,
                    left: left - n,
                    body: body - b,
                };
                self.data_progress(reqs, out, events);
            }
        }
        Ok(())
    }

    /// Ends a DATA frame once all its payload is in.
    fn data_progress(
        &mut self,
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) {
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
                    self.finish(k, reqs, out, events);
                }
            }
        }
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// The stream was never opened by the client.
    fn idle(&self, id: u32) -> bool {
        id.is_multiple_of(2) || id >= self.next_stream
    }

    /// A frame header arrived.
    fn start_frame(
        &mut self,
        h: FrameHeader,
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        if h.len > DEFAULT_MAX_FRAME_SIZE {
            return Err(H2Error::FrameTooLarge(h.len));
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
                self.frame(h, &[], reqs, out, events)?;
            }
            return Ok(());
        }
        // DATA: checked and accounted for now; its payload is counted, never kept.
        if h.stream == 0 {
            return Err(H2Error::StreamZero(h.kind));
        }
        if self.idle(h.stream) {
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
        if let Some(k) = self.find(h.stream) {
            let s = &mut self.streams[k];
            if len > s.recv_window {
                return Err(H2Error::FlowControlViolation);
            }
            s.recv_window -= len;
            if s.status == 0 {
                self.reset(k, Malformed::DataBeforeHeaders, !end, out, events);
            } else if !end && s.recv_window < i64::from(self.config.stream_window / 2) {
                let inc = i64::from(self.config.stream_window) - s.recv_window;
                write_window_update(out, s.id, inc as u32);
                s.recv_window += inc;
            }
        }
        if h.flags & flags::PADDED != 0 {
            if h.len == 0 {
                return Err(H2Error::BadPadding(h.kind));
            }
            self.rx = Rx::DataPad(h);
        } else {
            self.rx = Rx::Data {
                stream: h.stream,
                end,
                left: h.len,
                body: h.len,
            };
            self.data_progress(reqs, out, events);
        }
        Ok(())
    }

    /// A whole non-DATA frame.
    fn frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
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
                self.headers_frame(h, p, reqs, out, events)
            }
            FrameKind::CONTINUATION => self.continuation_frame(h, p, reqs, out, events),
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
                self.settings_frame(h, p, reqs, out, events)
            }
            FrameKind::PUSH_PROMISE => Err(H2Error::PushPromise),
            FrameKind::PING => {
                on_connection(h.kind)?;
                let data: [u8; 8] = p.try_into().map_err(|_| H2Error::BadFrameSize(h.kind))?;
                if h.flags & flags::ACK != 0 {
                    events(Event::PingAck(data));
                } else {
                    write_ping(out, true, data);
                }
                Ok(())
            }
            FrameKind::GOAWAY => {
                on_connection(h.kind)?;
                self.goaway_frame(h, p, events)
            }
            FrameKind::WINDOW_UPDATE => self.window_update_frame(h, p, reqs, out),
            _ => Ok(()), // unknown types are ignored (RFC 9113 §4.1)
        }
    }

    /// HEADERS on a stream.
    fn headers_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        if self.idle(h.stream) {
            return Err(H2Error::IdleStream(h.kind));
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
            self.header_block(h.stream, end_stream, fragment, reqs, out, events)?;
        } else {
            self.append_block(fragment)?;
            self.open_block = Some(OpenBlock {
                stream: h.stream,
                end_stream,
            });
        }
        Ok(())
    }

    /// CONTINUATION of an open header block.
    fn continuation_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        let Some(b) = self.open_block else {
            return Err(H2Error::UnexpectedContinuation);
        };
        self.append_block(p)?;
        if h.flags & flags::END_HEADERS != 0 {
            self.open_block = None;
            let block = std::mem::take(&mut self.block);
            let r = self.header_block(b.stream, b.end_stream, &block, reqs, out, events);
            self.block = block;
            self.block.clear();
            r?;
        }
        Ok(())
    }

    /// RST_STREAM: the stream ends with the peer's code.
    fn rst_stream_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        if p.len() != 4 {
            return Err(H2Error::BadFrameSize(h.kind));
        }
        if self.idle(h.stream) {
            return Err(H2Error::IdleStream(h.kind));
        }
        let code = ErrorCode(u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
        if let Some(k) = self.find(h.stream) {
            let s = self.streams.swap_remove(k);
            events(Event::Reset {
                tag: s.tag,
                stream: s.id,
                code,
            });
        }
        Ok(())
    }

    /// SETTINGS or its ACK.
    fn settings_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        if h.flags & flags::ACK != 0 {
            if !p.is_empty() {
                return Err(H2Error::BadFrameSize(h.kind));
            }
            if !self.settings_acked {
                self.settings_acked = true;
                self.hpack
                    .set_allowed(self.config.header_table_size as usize);
            }
            events(Event::SettingsAcked);
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
        write_settings_ack(out);
        self.peer_settings_seen = true;
        events(Event::Settings);
        self.send_bodies(reqs, out);
        Ok(())
    }

    /// GOAWAY: streams above last-stream-id are refused for a retry.
    fn goaway_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        if p.len() < 8 {
            return Err(H2Error::BadFrameSize(h.kind));
        }
        let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW;
        let code = ErrorCode(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
        // A second GOAWAY may only lower last-stream-id.
        let last = self.goaway.map_or(last, |(prev, _)| prev.min(last));
        self.goaway = Some((last, code));
        events(Event::GoAway {
            last_stream: last,
            code,
        });
        let mut k = 0;
        while k < self.streams.len() {
            if self.streams[k].id > last {
                let s = self.streams.remove(k);
                events(Event::Refused {
                    tag: s.tag,
                    stream: s.id,
                });
            } else {
                k += 1;
            }
        }
        Ok(())
    }

    /// WINDOW_UPDATE for the connection or a stream.
    fn window_update_frame(
        &mut self,
        h: FrameHeader,
        p: &[u8],
        reqs: &[H2Request],
        out: &mut Vec<u8>,
    ) -> Result<(), H2Error> {
        if p.len() != 4 {
            return Err(H2Error::BadFrameSize(h.kind));
        }
        let inc = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW;
        if h.stream != 0 && self.idle(h.stream) {
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
        self.send_bodies(reqs, out);
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
            _ => {} // unknown settings are ignored
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

    /// A whole header block for `stream`.
    fn header_block(
        &mut self,
        stream: u32,
        end_stream: bool,
        block: &[u8],
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) -> Result<(), H2Error> {
        if block.len() > self.config.max_header_block {
            return Err(H2Error::HeaderBlockTooLarge);
        }
        let Some(k) = self.find(stream) else {
            // A stream the client reset or that ended: decode only to keep the table in step.
            self.hpack.decode(block, |_, _| {})?;
            return Ok(());
        };
        let s = &mut self.streams[k];
        let trailers = s.status != 0;
        let mut status: u16 = 0;
        let mut bad = None;
        let mut regular = false;
        let tag = s.tag;
        self.hpack.decode(block, |name, value| {
            if bad.is_some() {
                return;
            }
            if let Some(pseudo) = name.strip_prefix(b":") {
                if pseudo != b"status" || regular || trailers {
                    bad = Some(Malformed::BadPseudo);
                } else if status != 0 {
                    bad = Some(Malformed::BadStatus);
                } else {
                    status = parse_status(value).unwrap_or_else(|| {
                        bad = Some(Malformed::BadStatus);
                        0
                    });
                }
                return;
            }
            regular = true;
            if name.iter().any(u8::is_ascii_uppercase) || connection_specific(name) {
                bad = Some(Malformed::BadFieldName);
                return;
            }
            if name == b"content-length" && !trailers {
                match parse_u64(value) {
                    Some(n) if s.content_length.is_none_or(|c| c == n) => {
                        s.content_length = Some(n)
                    }
                    _ => {
                        bad = Some(Malformed::ContentLength);
                        return;
                    }
                }
            }
            if !(100..200).contains(&status) {
                events(Event::Field { tag, name, value });
            }
        })?;
        if bad.is_none() {
            if trailers {
                if !end_stream {
                    bad = Some(Malformed::TrailersWithoutEnd);
                }
            } else if status == 0 {
                bad = Some(Malformed::BadStatus);
            } else if (100..200).contains(&status) {
                if end_stream {
                    bad = Some(Malformed::InformationalEnd);
                } else {
                    // An interim head: the final one is still to come.
                    return Ok(());
                }
            }
        }
        if let Some(why) = bad {
            self.reset(k, why, !end_stream, out, events);
            return Ok(());
        }
        let s = &mut self.streams[k];
        if !trailers {
            s.status = status;
            events(Event::Head {
                tag: s.tag,
                stream: s.id,
                status,
            });
        }
        if end_stream {
            self.finish(k, reqs, out, events);
        }
        Ok(())
    }

    /// The server ended stream `k`.
    fn finish(
        &mut self,
        k: usize,
        reqs: &[H2Request],
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) {
        let s = &self.streams[k];
        let bodiless = s.head_method || s.status == 204 || s.status == 304;
        if s.content_length
            .is_some_and(|n| n != s.body_bytes && !bodiless)
        {
            let s = self.streams.swap_remove(k);
            events(Event::Malformed {
                tag: s.tag,
                stream: s.id,
                why: Malformed::ContentLength,
            });
            return;
        }
        let s = self.streams.swap_remove(k);
        if s.body_sent < reqs[s.request as usize].body.len() {
            // The server answered before the whole body went: abandon the
            // rest (RFC 9113 §8.1).
            write_rst_stream(out, s.id, ErrorCode::NO_ERROR);
        }
        events(Event::Response {
            tag: s.tag,
            stream: s.id,
            status: s.status,
            body_bytes: s.body_bytes,
        });
    }

    /// Drops stream `k` for a malformed response, resetting it unless the server ended it.
    fn reset(
        &mut self,
        k: usize,
        why: Malformed,
        open: bool,
        out: &mut Vec<u8>,
        events: &mut impl FnMut(Event<'_, T>),
    ) {
        let s = self.streams.swap_remove(k);
        if open {
            write_rst_stream(out, s.id, ErrorCode::PROTOCOL_ERROR);
        }
        events(Event::Malformed {
            tag: s.tag,
            stream: s.id,
            why,
        });
    }
}

fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

pub(super) fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}
