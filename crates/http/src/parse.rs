//! Incremental HTTP/1.1 response parser.
//!
//! # Design
//!
//! The parser is a byte-level state machine: every state can be left at any
//! byte and resumed with the next input slice, so the caller never keeps
//! unconsumed bytes (the engine hands io_uring provided buffers back to the
//! kernel as soon as `parse` returns). Nothing is copied: header values that
//! matter (`Content-Length`, `Transfer-Encoding`, `Connection`) are
//! interpreted by small accumulators fed with whatever piece of the value is
//! at hand, and body bytes are only counted.
//!
//! Speed comes from two fast paths layered on top, both of which only accept
//! input they can read exactly as the state machine would and otherwise hand
//! over without having recorded anything:
//!
//! - a whole-head pass: when a response head lies entirely in the input (the
//!   steady state: nginx-sized heads arrive in one receive), one scan builds
//!   16-byte control-byte masks (SSE2 on x86_64) to find every line end, and
//!   names and values are checked off that critical path;
//! - a line pass: at the start of the status line and of each header line of
//!   a head that was split, a complete ordinary line is parsed with
//!   straight-line code.
//!
//! Anything unusual — a split line, a tab, a repeated Content-Length, any
//! malformed byte — falls back to the state machine, which is the reference:
//! every error is raised by it, in input byte order, so a response gives the
//! same outcome however it is split. Tests feed every split point and compare
//! whole input with byte-by-byte feeding; the fuzz target checks whole versus
//! split equality.
//!
//! Limits are enforced by position: the head (and each trailer section and
//! chunk-size line) may be at most `max_header_bytes` long, and the parser
//! never looks at a byte beyond that bound, so the error does not depend on
//! how the input was split either.

use crate::grammar::{
    eq_lower, find_control, find_name_end, is_name_token, is_tchar, is_value_byte, Controls,
};

/// Bounds on what a response head may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest head (status line, fields and the empty line), trailer section,
    /// or chunk-size line (extensions included), in bytes.
    pub max_header_bytes: usize,
    /// Most header fields in one head (or trailer fields in one trailer section).
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 64 * 1024,
            max_headers: 128,
        }
    }
}

/// One complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// Status code of the final response (interim 1xx responses are skipped; 101 is final).
    pub status: u16,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
    /// Payload bytes: Content-Length, the sum of chunk sizes, or the close-delimited body.
    pub body_bytes: u64,
    /// Every byte of the response on the wire: skipped 1xx heads, head, chunk framing, trailers, body.
    pub wire_bytes: u64,
}

/// Result of feeding bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Parse {
    /// Every input byte was consumed; the response is not complete yet.
    Partial,
    /// A response ended after `consumed` bytes of this input; the rest belongs
    /// to the next response (call `parse` again with `input[consumed..]`).
    Complete {
        /// Bytes of this input that belonged to the response.
        consumed: usize,
        /// The response.
        response: Response,
    },
}

/// Where in a response the connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Status line or header fields.
    Head,
    /// Content-Length body.
    Body,
    /// Chunked body: size line, data or chunk terminator.
    Chunked,
    /// Trailer section after the last chunk.
    Trailers,
}

/// Why bytes are not a valid response. Fieldless (apart from the EOF stage)
/// so that counting them per kind is cheap.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// The response does not start with `HTTP/1.0` or `HTTP/1.1` followed by a space.
    #[error("response does not start with HTTP/1.0 or HTTP/1.1")]
    BadVersion,
    /// The status code is not three digits from 100 to 999, or is not followed by SP or the line end.
    #[error("invalid status code")]
    BadStatus,
    /// A control character inside the reason phrase.
    #[error("invalid byte in reason phrase")]
    BadReason,
    /// A CR not followed by LF at the end of a line, or a chunk-size line
    /// ending in a bare LF (chunk framing requires CRLF, RFC 9112 §7.1).
    #[error("line not ended by CRLF")]
    BadLineEnding,
    /// A header field name that is empty or has a byte outside the token set (spaces before ':' included).
    #[error("invalid header field name")]
    BadHeaderName,
    /// A header line that starts with a space or tab (obsolete line folding).
    #[error("obsolete line folding in header")]
    ObsFold,
    /// A control character (NUL, lone CR, ...) inside a header field value.
    #[error("invalid byte in header field value")]
    BadHeaderValue,
    /// The head or trailer section is longer than `Limits::max_header_bytes`.
    #[error("response head larger than the limit")]
    HeaderTooLarge,
    /// More header fields than `Limits::max_headers`.
    #[error("more header fields than the limit")]
    TooManyHeaders,
    /// A Content-Length that is not a decimal number fitting 64 bits.
    #[error("invalid Content-Length")]
    BadContentLength,
    /// Content-Length together with Transfer-Encoding, or two different Content-Lengths.
    #[error("conflicting message length (Content-Length with Transfer-Encoding, or two different Content-Lengths)")]
    ConflictingLength,
    /// A Transfer-Encoding whose final coding is not `chunked`, or that applies chunked twice.
    #[error("unsupported Transfer-Encoding (final coding must be chunked, once)")]
    UnsupportedTransferEncoding,
    /// A chunk size that is not hexadecimal or overflows 64 bits.
    #[error("invalid chunk size")]
    BadChunkSize,
    /// A control character inside a chunk extension.
    #[error("invalid byte in chunk extension")]
    BadChunkExtension,
    /// A chunk-size line (with its extensions) longer than `Limits::max_header_bytes`.
    #[error("chunk-size line larger than the limit")]
    ChunkLineTooLong,
    /// Chunk data not followed by CRLF (a bare LF included).
    #[error("chunk data not followed by CRLF")]
    BadChunkTerminator,
    /// The connection closed in the middle of a response.
    #[error("connection closed mid-response (in {stage:?})")]
    UnexpectedEof {
        /// What was being read.
        stage: Stage,
    },
}

impl ParseError {
    /// Short snake_case cause, for reports and error counters.
    pub fn name(&self) -> &'static str {
        match self {
            ParseError::BadVersion => "bad_version",
            ParseError::BadStatus => "bad_status",
            ParseError::BadReason => "bad_reason",
            ParseError::BadLineEnding => "bad_line_ending",
            ParseError::BadHeaderName => "bad_header_name",
            ParseError::ObsFold => "obs_fold",
            ParseError::BadHeaderValue => "bad_header_value",
            ParseError::HeaderTooLarge => "header_too_large",
            ParseError::TooManyHeaders => "too_many_headers",
            ParseError::BadContentLength => "bad_content_length",
            ParseError::ConflictingLength => "conflicting_length",
            ParseError::UnsupportedTransferEncoding => "unsupported_transfer_encoding",
            ParseError::BadChunkSize => "bad_chunk_size",
            ParseError::BadChunkExtension => "bad_chunk_extension",
            ParseError::ChunkLineTooLong => "chunk_line_too_long",
            ParseError::BadChunkTerminator => "bad_chunk_terminator",
            ParseError::UnexpectedEof { .. } => "unexpected_eof",
        }
    }
}

/// Parser states. Head states also read trailer sections (see `trailers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Matched this many bytes of `HTTP/1.`; at 7 the minor digit is next.
    /// At 0, empty lines are skipped (as llhttp and httparse do).
    Version(u8),
    /// CR of an empty line before the status line seen.
    BlankLf,
    /// After the minor version digit: SP.
    VersionSp,
    /// This many status digits read.
    Code(u8),
    /// After three digits: SP, CR or LF.
    AfterCode,
    /// Reason phrase.
    Reason,
    /// CR of the status line seen.
    StatusLf,
    /// Start of a field line or of the empty line ending the head.
    LineStart,
    /// Inside a field name.
    Name,
    /// Whitespace after the colon.
    Ows,
    /// Field value.
    Value,
    /// CR of a field line seen.
    FieldLf,
    /// CR of the empty line seen.
    EndLf,
    /// Content-Length body: bytes left (never 0).
    Body(u64),
    /// Body ends when the connection closes.
    CloseDelimited,
    /// First hex digit of a chunk size.
    ChunkSizeStart,
    /// More hex digits.
    ChunkSize,
    /// Whitespace after the size.
    ChunkSizeWs,
    /// Chunk extensions.
    ChunkExt,
    /// CR of the chunk-size line seen.
    ChunkSizeLf,
    /// Chunk data: bytes left (never 0).
    ChunkData(u64),
    /// CRLF after chunk data.
    ChunkDataCr,
    /// LF after chunk data.
    ChunkDataLf,
    /// An error was returned; it is returned again until `reset`.
    Failed(ParseError),
}

impl State {
    /// Bounded by `max_header_bytes` with `HeaderTooLarge`.
    fn in_head(self) -> bool {
        matches!(
            self,
            State::Version(_)
                | State::BlankLf
                | State::VersionSp
                | State::Code(_)
                | State::AfterCode
                | State::Reason
                | State::StatusLf
                | State::LineStart
                | State::Name
                | State::Ows
                | State::Value
                | State::FieldLf
                | State::EndLf
        )
    }
}

/// Header fields whose value the parser interprets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Other,
    ContentLength,
    TransferEncoding,
    Connection,
}

/// Names of interpreted fields, lower case, in `NameMatch::alive` bit order.
const FIELD_NAMES: [(&[u8], Field); 3] = [
    (b"content-length", Field::ContentLength),
    (b"transfer-encoding", Field::TransferEncoding),
    (b"connection", Field::Connection),
];

/// The field a complete name denotes.
#[inline(always)]
fn field_of(name: &[u8]) -> Field {
    match name.len() {
        10 if eq_lower(name, b"connection") => Field::Connection,
        14 if eq_lower(name, b"content-length") => Field::ContentLength,
        17 if eq_lower(name, b"transfer-encoding") => Field::TransferEncoding,
        _ => Field::Other,
    }
}

/// Matches a field name fed in pieces against `FIELD_NAMES`.
#[derive(Clone, Copy, Debug)]
struct NameMatch {
    len: usize,
    alive: u8,
}

impl NameMatch {
    const START: NameMatch = NameMatch {
        len: 0,
        alive: 0b111,
    };

    fn feed(&mut self, piece: &[u8]) {
        for (k, (name, _)) in FIELD_NAMES.iter().enumerate() {
            let bit = 1 << k;
            if self.alive & bit != 0 {
                let end = self.len + piece.len();
                if end > name.len() || !eq_lower(piece, &name[self.len..end]) {
                    self.alive &= !bit;
                }
            }
        }
        self.len += piece.len();
    }

    fn field(&self) -> Field {
        FIELD_NAMES
            .iter()
            .enumerate()
            .find(|(k, (name, _))| self.alive & (1 << k) != 0 && name.len() == self.len)
            .map_or(Field::Other, |(_, (_, f))| *f)
    }
}

/// Tokens looked for in comma-separated values, lower case.
const CONNECTION_TOKENS: [&[u8]; 2] = [b"close", b"keep-alive"];
const CODING_TOKENS: [&[u8]; 1] = [b"chunked"];

/// One element of a comma-separated list value, fed in pieces.
#[derive(Clone, Copy, Debug)]
struct ListElem {
    /// Bytes of the element so far, whitespace around it excluded.
    len: usize,
    /// Bit k: still equal to a prefix of token k.
    alive: u8,
    /// Whitespace followed the element's bytes.
    trailing_ws: bool,
    /// Whitespace inside the element: it matches nothing.
    broken: bool,
}

impl ListElem {
    const START: ListElem = ListElem {
        len: 0,
        alive: 0xff,
        trailing_ws: false,
        broken: false,
    };
}

/// What the interpreted fields said so far.
#[derive(Clone, Copy, Debug, Default)]
struct Framing {
    content_length: Option<u64>,
    te_seen: bool,
    te_last_chunked: bool,
    te_chunked_count: u32,
    close: bool,
    keep_alive: bool,
}

/// Content-Length value accumulator.
#[derive(Clone, Copy, Debug, Default)]
struct Decimal {
    value: u64,
    digits: u32,
    trailing_ws: bool,
}

/// Incremental HTTP/1.1 response parser for one connection.
#[derive(Clone, Debug)]
pub struct ResponseParser {
    state: State,
    limits: Limits,
    head: bool,
    /// The head of the current response ended in an interpreted trailer section.
    trailers: bool,
    /// Bytes of the current bounded section (head, trailer section, chunk-size line).
    section_bytes: usize,
    /// Field lines in the current head or trailer section.
    fields: usize,
    http10: bool,
    status: u16,
    framing: Framing,
    /// Interpretation of the field being read.
    field: Field,
    name: NameMatch,
    decimal: Decimal,
    elem: ListElem,
    chunk_size: u64,
    body_bytes: u64,
    /// Bytes of this response consumed by earlier `parse` calls.
    wire_bytes: u64,
    /// Bytes of empty lines skipped before this response's first status line.
    blank_bytes: u64,
    /// The last head read whole by the fast path, byte for byte (see `recall_head`).
    memo: Vec<u8>,
    /// What that head said; `None` while `memo` holds no head.
    memo_head: Option<HeadMemo>,
}

/// What the fast path read from one head: the same bytes say the same again.
#[derive(Clone, Copy, Debug)]
struct HeadMemo {
    status: u16,
    http10: bool,
    framing: Framing,
    fields: usize,
}

/// Heads longer than this are not remembered (nor compared).
const MEMO_MAX: usize = 512;

/// Outcome of reading bytes in the head states.
enum HeadEnd {
    /// The input ran out.
    More,
    /// The empty line ending the head (or trailer section) was consumed.
    Done,
}

impl ResponseParser {
    /// A parser for responses to HEAD requests when `head` is true (no body whatever the headers say).
    pub fn new(limits: Limits, head: bool) -> Self {
        ResponseParser {
            state: State::Version(0),
            limits,
            head,
            trailers: false,
            section_bytes: 0,
            fields: 0,
            http10: false,
            status: 0,
            framing: Framing::default(),
            field: Field::Other,
            name: NameMatch::START,
            decimal: Decimal::default(),
            elem: ListElem::START,
            chunk_size: 0,
            body_bytes: 0,
            wire_bytes: 0,
            blank_bytes: 0,
            memo: Vec::new(),
            memo_head: None,
        }
    }

    /// Whether the next responses answer HEAD requests (takes effect for the
    /// response that has not started yet; use between responses).
    pub fn set_head(&mut self, head: bool) {
        self.head = head;
    }

    /// Some byte of the current response has been received.
    pub fn in_progress(&self) -> bool {
        self.wire_bytes > 0
    }

    /// Drops all state: the connection was replaced.
    pub fn reset(&mut self) {
        // The remembered head is a pure function of its bytes: keep it (and
        // its buffer, so a connection per request allocates nothing).
        let (memo, memo_head) = (std::mem::take(&mut self.memo), self.memo_head);
        *self = ResponseParser::new(self.limits, self.head);
        (self.memo, self.memo_head) = (memo, memo_head);
    }

    /// Feeds bytes. See [`Parse`]. After `Complete` the parser is ready for the
    /// next response. After an error, the same error is returned until [`reset`](Self::reset).
    pub fn parse(&mut self, input: &[u8]) -> Result<Parse, ParseError> {
        let mut pos = 0;
        match self.run(input, &mut pos) {
            Ok(Some(response)) => Ok(Parse::Complete {
                consumed: pos,
                response,
            }),
            Ok(None) => {
                self.wire_bytes += input.len() as u64;
                Ok(Parse::Partial)
            }
            Err(e) => {
                self.state = State::Failed(e);
                Err(e)
            }
        }
    }

    /// The peer closed the connection. `Ok(Some)` when that ends a
    /// close-delimited body, `Ok(None)` when no byte of a response had
    /// arrived, `Err(UnexpectedEof)` when a response was cut. The parser is
    /// then ready for a new connection (after `Ok`) or failed (after `Err`).
    pub fn eof(&mut self) -> Result<Option<Response>, ParseError> {
        let stage = match self.state {
            State::Failed(e) => return Err(e),
            State::CloseDelimited => return Ok(Some(self.complete(0, true))),
            _ if !self.in_progress() => return Ok(None),
            // Only empty lines since the last response: nothing was cut.
            State::Version(0) | State::BlankLf if self.wire_bytes == self.blank_bytes => {
                self.start_response();
                return Ok(None);
            }
            State::Body(_) => Stage::Body,
            s if s.in_head() && self.trailers => Stage::Trailers,
            s if s.in_head() => Stage::Head,
            _ => Stage::Chunked,
        };
        let e = ParseError::UnexpectedEof { stage };
        self.state = State::Failed(e);
        Err(e)
    }

    /// Ends the current response after `consumed_now` bytes of this call's input.
    fn complete(&mut self, consumed_now: usize, close_delimited: bool) -> Response {
        let keep_alive = !close_delimited
            && self.status != 101
            && !self.framing.close
            && (!self.http10 || (self.framing.keep_alive && !self.framing.te_seen));
        let response = Response {
            status: self.status,
            keep_alive,
            body_bytes: self.body_bytes,
            wire_bytes: self.wire_bytes + consumed_now as u64,
        };
        self.start_response();
        response
    }

    fn start_response(&mut self) {
        self.state = State::Version(0);
        self.trailers = false;
        self.body_bytes = 0;
        self.wire_bytes = 0;
        self.blank_bytes = 0;
        self.start_head();
    }

    /// Fresh head (a new response or the final one after a 1xx).
    fn start_head(&mut self) {
        self.section_bytes = 0;
        self.fields = 0;
        self.http10 = false;
        self.status = 0;
        self.framing = Framing::default();
    }

    fn run(&mut self, input: &[u8], pos: &mut usize) -> Result<Option<Response>, ParseError> {
        loop {
            match self.state {
                State::Failed(e) => return Err(e),
                State::Body(left) => {
                    let take = left.min((input.len() - *pos) as u64);
                    *pos += take as usize;
                    self.body_bytes += take;
                    if take == left {
                        return Ok(Some(self.complete(*pos, false)));
                    }
                    self.state = State::Body(left - take);
                    return Ok(None);
                }
                State::CloseDelimited => {
                    self.body_bytes += (input.len() - *pos) as u64;
                    *pos = input.len();
                    return Ok(None);
                }
                State::ChunkData(left) => {
                    let take = left.min((input.len() - *pos) as u64);
                    *pos += take as usize;
                    self.body_bytes += take;
                    if take < left {
                        self.state = State::ChunkData(left - take);
                        return Ok(None);
                    }
                    self.state = State::ChunkDataCr;
                }
                State::ChunkDataCr if input.get(*pos..*pos + 2) == Some(b"\r\n") => {
                    *pos += 2;
                    self.state = self.start_chunk_line();
                }
                State::ChunkDataCr | State::ChunkDataLf => {
                    let Some(&b) = input.get(*pos) else {
                        return Ok(None);
                    };
                    *pos += 1;
                    self.state = match (self.state, b) {
                        (State::ChunkDataCr, b'\r') => State::ChunkDataLf,
                        (State::ChunkDataLf, b'\n') => self.start_chunk_line(),
                        _ => return Err(ParseError::BadChunkTerminator),
                    };
                }
                State::ChunkSizeStart
                | State::ChunkSize
                | State::ChunkSizeWs
                | State::ChunkExt
                | State::ChunkSizeLf => {
                    let fast = match self.state {
                        State::ChunkSizeStart => self.fast_chunk_line(&input[*pos..]),
                        _ => None,
                    };
                    if let Some(len) = fast {
                        *pos += len;
                    } else {
                        let end = self.section_end(input.len(), *pos);
                        let start = *pos;
                        let done = self.chunk_line(&input[..end], pos)?;
                        self.section_bytes += *pos - start;
                        if !done {
                            if end < input.len() {
                                return Err(ParseError::ChunkLineTooLong);
                            }
                            return Ok(None);
                        }
                    }
                    if self.chunk_size == 0 {
                        self.trailers = true;
                        self.section_bytes = 0;
                        self.fields = 0;
                        self.state = State::LineStart;
                    } else {
                        self.state = State::ChunkData(self.chunk_size);
                    }
                }
                _ => {
                    // Empty lines skipped before a status line count toward its
                    // head's limit; the fast paths read only a head from its start.
                    if self.state == State::Version(0) && self.section_bytes == 0 {
                        let b = &input[*pos..];
                        let fast = match self.recall_head(b) {
                            Some(len) => Some(len),
                            None => self
                                .fast_head(b)
                                .inspect(|&len| self.remember_head(&b[..len])),
                        };
                        if let Some(len) = fast {
                            *pos += len;
                            if let Some(r) = self.head_done(*pos)? {
                                return Ok(Some(r));
                            }
                            continue;
                        }
                    }
                    let end = self.section_end(input.len(), *pos);
                    let start = *pos;
                    let done = self.head_bytes(&input[..end], pos)?;
                    self.section_bytes += *pos - start;
                    match done {
                        HeadEnd::More if end < input.len() => {
                            return Err(ParseError::HeaderTooLarge)
                        }
                        HeadEnd::More => return Ok(None),
                        HeadEnd::Done if self.trailers => {
                            return Ok(Some(self.complete(*pos, false)))
                        }
                        HeadEnd::Done => {
                            if let Some(r) = self.head_done(*pos)? {
                                return Ok(Some(r));
                            }
                        }
                    }
                }
            }
        }
    }

    /// End of the readable part of `input` for a bounded section starting with `section_bytes` used.
    #[inline(always)]
    fn section_end(&self, len: usize, pos: usize) -> usize {
        let allowance = self
            .limits
            .max_header_bytes
            .saturating_sub(self.section_bytes);
        len.min(pos.saturating_add(allowance))
    }

    fn start_chunk_line(&mut self) -> State {
        self.section_bytes = 0;
        self.chunk_size = 0;
        State::ChunkSizeStart
    }

    /// The head ended: skip 1xx, pick the body framing. Returns the response if it has no body.
    fn head_done(&mut self, pos: usize) -> Result<Option<Response>, ParseError> {
        if (100..200).contains(&self.status) && self.status != 101 {
            self.start_head();
            self.state = State::Version(0);
            return Ok(None);
        }
        let f = self.framing;
        if f.te_seen && f.content_length.is_some() {
            return Err(ParseError::ConflictingLength);
        }
        if f.te_seen && (!f.te_last_chunked || f.te_chunked_count > 1) {
            return Err(ParseError::UnsupportedTransferEncoding);
        }
        if self.head || self.status == 101 || self.status == 204 || self.status == 304 {
            return Ok(Some(self.complete(pos, false)));
        }
        if f.te_seen {
            self.state = self.start_chunk_line();
            return Ok(None);
        }
        match f.content_length {
            Some(0) => Ok(Some(self.complete(pos, false))),
            Some(n) => {
                self.state = State::Body(n);
                Ok(None)
            }
            None => {
                self.state = State::CloseDelimited;
                Ok(None)
            }
        }
    }

    /// Reads status line and field lines from `b[*pos..]` until the head ends or `b` does.
    fn head_bytes(&mut self, b: &[u8], pos: &mut usize) -> Result<HeadEnd, ParseError> {
        let mut i = *pos;
        let r = self.head_states(b, &mut i);
        *pos = i;
        r
    }

    #[inline(always)]
    fn head_states(&mut self, b: &[u8], i: &mut usize) -> Result<HeadEnd, ParseError> {
        loop {
            match self.state {
                State::Version(mut n) => {
                    if n == 0 {
                        if let Some(len) = self.fast_status_line(&b[*i..]) {
                            *i += len;
                            self.state = State::LineStart;
                            continue;
                        }
                        if let Some(&c @ (b'\r' | b'\n')) = b.get(*i) {
                            // A stray empty line between responses.
                            *i += 1;
                            self.blank_bytes += 1;
                            if c == b'\r' {
                                self.state = State::BlankLf;
                            }
                            continue;
                        }
                    }
                    while n < 7 {
                        let Some(&c) = b.get(*i) else {
                            self.state = State::Version(n);
                            return Ok(HeadEnd::More);
                        };
                        if c != b"HTTP/1."[n as usize] {
                            return Err(ParseError::BadVersion);
                        }
                        n += 1;
                        *i += 1;
                    }
                    let Some(&c) = b.get(*i) else {
                        self.state = State::Version(7);
                        return Ok(HeadEnd::More);
                    };
                    self.http10 = match c {
                        b'0' => true,
                        b'1' => false,
                        _ => return Err(ParseError::BadVersion),
                    };
                    *i += 1;
                    self.state = State::VersionSp;
                }
                State::VersionSp => {
                    let Some(&c) = b.get(*i) else {
                        return Ok(HeadEnd::More);
                    };
                    if c != b' ' {
                        return Err(ParseError::BadVersion);
                    }
                    *i += 1;
                    self.state = State::Code(0);
                }
                State::Code(mut n) => {
                    while n < 3 {
                        let Some(&c) = b.get(*i) else {
                            self.state = State::Code(n);
                            return Ok(HeadEnd::More);
                        };
                        if !c.is_ascii_digit() || (n == 0 && c == b'0') {
                            return Err(ParseError::BadStatus);
                        }
                        self.status = self.status * 10 + u16::from(c - b'0');
                        n += 1;
                        *i += 1;
                    }
                    self.state = State::AfterCode;
                }
                State::AfterCode => {
                    let Some(&c) = b.get(*i) else {
                        return Ok(HeadEnd::More);
                    };
                    *i += 1;
                    self.state = match c {
                        b' ' => State::Reason,
                        b'\r' => State::StatusLf,
                        b'\n' => State::LineStart,
                        _ => return Err(ParseError::BadStatus),
                    };
                }
                State::Reason => {
                    while let Some(&c) = b.get(*i) {
                        *i += 1;
                        if !is_value_byte(c) {
                            self.state = match c {
                                b'\r' => State::StatusLf,
                                b'\n' => State::LineStart,
                                _ => return Err(ParseError::BadReason),
                            };
                            break;
                        }
                    }
                    if self.state == State::Reason {
                        return Ok(HeadEnd::More);
                    }
                }
                State::StatusLf | State::FieldLf | State::EndLf | State::BlankLf => {
                    let Some(&c) = b.get(*i) else {
                        return Ok(HeadEnd::More);
                    };
                    if c != b'\n' {
                        return Err(ParseError::BadLineEnding);
                    }
                    *i += 1;
                    self.state = match self.state {
                        State::EndLf => return Ok(HeadEnd::Done),
                        State::BlankLf => {
                            self.blank_bytes += 1;
                            State::Version(0)
                        }
                        State::FieldLf => {
                            self.end_field()?;
                            State::LineStart
                        }
                        _ => State::LineStart,
                    };
                }
                State::LineStart => {
                    loop {
                        match self.fast_field_line(&b[*i..])? {
                            FastLine::Field(len) => *i += len,
                            FastLine::End(len) => {
                                *i += len;
                                return Ok(HeadEnd::Done);
                            }
                            FastLine::Slow => break,
                        }
                    }
                    let Some(&c) = b.get(*i) else {
                        return Ok(HeadEnd::More);
                    };
                    match c {
                        b'\r' => {
                            *i += 1;
                            self.state = State::EndLf;
                        }
                        b'\n' => {
                            *i += 1;
                            return Ok(HeadEnd::Done);
                        }
                        b' ' | b'\t' => return Err(ParseError::ObsFold),
                        c if is_tchar(c) => {
                            if self.fields >= self.limits.max_headers {
                                return Err(ParseError::TooManyHeaders);
                            }
                            self.fields += 1;
                            self.name = NameMatch::START;
                            self.state = State::Name;
                        }
                        _ => return Err(ParseError::BadHeaderName),
                    }
                }
                State::Name => {
                    let start = *i;
                    while *i < b.len() && is_tchar(b[*i]) {
                        *i += 1;
                    }
                    self.name.feed(&b[start..*i]);
                    let Some(&c) = b.get(*i) else {
                        return Ok(HeadEnd::More);
                    };
                    if c != b':' {
                        return Err(ParseError::BadHeaderName);
                    }
                    *i += 1;
                    let field = if self.trailers {
                        Field::Other
                    } else {
                        self.name.field()
                    };
                    self.begin_value(field);
                    self.state = State::Ows;
                }
                State::Ows => {
                    while let Some(&c) = b.get(*i) {
                        if c != b' ' && c != b'\t' {
                            self.state = State::Value;
                            break;
                        }
                        *i += 1;
                    }
                    if self.state == State::Ows {
                        return Ok(HeadEnd::More);
                    }
                }
                State::Value => {
                    let start = *i;
                    while *i < b.len() && is_value_byte(b[*i]) {
                        *i += 1;
                    }
                    self.feed_value(&b[start..*i])?;
                    let Some(&c) = b.get(*i) else {
                        return Ok(HeadEnd::More);
                    };
                    *i += 1;
                    match c {
                        b'\r' => self.state = State::FieldLf,
                        b'\n' => {
                            self.end_field()?;
                            self.state = State::LineStart;
                        }
                        _ => return Err(ParseError::BadHeaderValue),
                    }
                }
                // Not head states: `run` only calls this in head states.
                _ => return Ok(HeadEnd::More),
            }
        }
    }

    /// A whole ordinary head at the start of `b`: status line, fields and the
    /// empty line, all within the byte and field limits, no byte needing care,
    /// framing fields with their plain values. Returns its length after
    /// recording it exactly as the state machine would; `None` (nothing
    /// recorded) leaves the head to the line-by-line path.
    ///
    /// Line ends are found from one pass of 16-byte control-byte masks, so the
    /// walk from one line to the next does not wait on the name and value checks.
    /// A server's answers to the same request usually repeat the same head
    /// byte for byte (nginx's changes once a second, with its Date): when `b`
    /// starts with the head last read whole, that head says what it said then,
    /// and one comparison replaces reading it. Leaves the parser as
    /// `fast_head` would; `None` when `b` does not start with it.
    #[inline]
    fn recall_head(&mut self, b: &[u8]) -> Option<usize> {
        let m = self.memo_head?;
        let len = self.memo.len();
        if b.get(..len)? != self.memo.as_slice() {
            return None;
        }
        self.status = m.status;
        self.http10 = m.http10;
        self.framing = m.framing;
        self.fields = m.fields;
        self.section_bytes = len;
        Some(len)
    }

    /// Remembers the head `fast_head` just read (`head` = its bytes).
    fn remember_head(&mut self, head: &[u8]) {
        if head.len() > MEMO_MAX {
            self.memo_head = None;
            return;
        }
        self.memo.clear();
        self.memo.extend_from_slice(head);
        self.memo_head = Some(HeadMemo {
            status: self.status,
            http10: self.http10,
            framing: self.framing,
            fields: self.fields,
        });
    }

    #[inline(always)]
    fn fast_head(&mut self, b: &[u8]) -> Option<usize> {
        debug_assert!(self.section_bytes == 0 && self.fields == 0);
        let b = &b[..b.len().min(self.limits.max_header_bytes)];
        let mut controls = Controls::new(b, 0);
        let mut line_end = |start: usize| -> Option<(usize, usize)> {
            let at = controls.next()?;
            match b[at] {
                b'\r' if b.get(at + 1) == Some(&b'\n') => {
                    controls.next(); // the LF
                    Some((at, at + 2))
                }
                b'\n' => Some((at, at + 1)),
                _ => None,
            }
            .filter(|_| at >= start)
        };
        let (status_end, mut start) = line_end(0)?;
        let (status, http10) = status_line(&b[..status_end])?;
        let mut framing = Framing::default();
        let mut fields = 0;
        loop {
            let (end, next) = line_end(start)?;
            if end == start {
                self.status = status;
                self.http10 = http10;
                self.framing = framing;
                self.fields = fields;
                self.section_bytes = next;
                return Some(next);
            }
            fields += 1;
            if fields > self.limits.max_headers {
                return None;
            }
            let name_end = find_name_end(b, start);
            if name_end == start
                || b[name_end] != b':'
                || !is_name_token(&b[start..], name_end - start)
            {
                return None;
            }
            let field = field_of(&b[start..name_end]);
            if field != Field::Other {
                let value_start = name_end + 1 + usize::from(b.get(name_end + 1) == Some(&b' '));
                if !plain_framing_value(&mut framing, field, b.get(value_start..end)?) {
                    return None;
                }
            }
            start = next;
        }
    }

    /// `HTTP/1.x NNN reason\r\n` all in `b`, with no byte needing care. `None` leaves it to the state machine.
    #[inline(always)]
    fn fast_status_line(&mut self, b: &[u8]) -> Option<usize> {
        if b.len() < 13 {
            return None;
        }
        let http10 = match &b[..8] {
            b"HTTP/1.1" => false,
            b"HTTP/1.0" => true,
            _ => return None,
        };
        let (d0, d1, d2) = (
            b[9].wrapping_sub(b'0'),
            b[10].wrapping_sub(b'0'),
            b[11].wrapping_sub(b'0'),
        );
        if b[8] != b' ' || !(1..=9).contains(&d0) || d1 > 9 || d2 > 9 {
            return None;
        }
        let reason = match b[12] {
            b' ' => 13,
            b'\r' | b'\n' => 12,
            _ => return None,
        };
        let len = line_end(b, find_control(b, reason))?;
        self.http10 = http10;
        self.status = u16::from(d0) * 100 + u16::from(d1) * 10 + u16::from(d2);
        Some(len)
    }

    /// One ordinary field line (or the empty line) all in `b`.
    #[inline(always)]
    fn fast_field_line(&mut self, b: &[u8]) -> Result<FastLine, ParseError> {
        match b {
            [b'\r', b'\n', ..] => return Ok(FastLine::End(2)),
            [b'\n', ..] => return Ok(FastLine::End(1)),
            _ => {}
        }
        if self.fields >= self.limits.max_headers {
            return Ok(FastLine::Slow);
        }
        let name_len = find_name_end(b, 0);
        if name_len == 0 || b.get(name_len) != Some(&b':') || !is_name_token(b, name_len) {
            return Ok(FastLine::Slow);
        }
        let mut i = name_len + 1;
        if b.get(i) == Some(&b' ') {
            i += 1;
        }
        let value_start = i;
        let value_end = find_control(b, i);
        let Some(len) = line_end(b, value_end) else {
            return Ok(FastLine::Slow);
        };
        if !self.trailers {
            let field = field_of(&b[..name_len]);
            if field != Field::Other {
                let value = &b[value_start..value_end];
                if value.first() == Some(&b' ') {
                    return Ok(FastLine::Slow); // more whitespace than one SP: the state machine skips it
                }
                self.fields += 1;
                self.fast_value(field, value)?;
                return Ok(FastLine::Field(len));
            }
        }
        self.fields += 1;
        Ok(FastLine::Field(len))
    }

    /// A whole interpreted value: the common exact values directly, the rest
    /// through the same accumulators as the state machine.
    #[inline(always)]
    fn fast_value(&mut self, field: Field, value: &[u8]) -> Result<(), ParseError> {
        match field {
            Field::Connection if eq_lower(value, b"keep-alive") => self.framing.keep_alive = true,
            Field::Connection if eq_lower(value, b"close") => self.framing.close = true,
            Field::TransferEncoding if eq_lower(value, b"chunked") => {
                self.framing.te_seen = true;
                self.framing.te_last_chunked = true;
                self.framing.te_chunked_count += 1;
            }
            _ => {
                self.begin_value(field);
                self.feed_value(value)?;
                self.end_field()?;
            }
        }
        Ok(())
    }

    fn begin_value(&mut self, field: Field) {
        self.field = field;
        self.decimal = Decimal::default();
        self.elem = ListElem::START;
    }

    /// A piece of the current field value (no CR, LF or other control byte except HTAB).
    #[inline]
    fn feed_value(&mut self, piece: &[u8]) -> Result<(), ParseError> {
        match self.field {
            Field::Other => Ok(()),
            Field::ContentLength => {
                let d = &mut self.decimal;
                for &c in piece {
                    match c {
                        b'0'..=b'9' if !d.trailing_ws => {
                            d.value = d
                                .value
                                .checked_mul(10)
                                .and_then(|v| v.checked_add(u64::from(c - b'0')))
                                .ok_or(ParseError::BadContentLength)?;
                            d.digits += 1;
                        }
                        b' ' | b'\t' if d.digits > 0 => d.trailing_ws = true,
                        _ => return Err(ParseError::BadContentLength),
                    }
                }
                Ok(())
            }
            Field::Connection => {
                self.feed_list(piece, &CONNECTION_TOKENS);
                Ok(())
            }
            Field::TransferEncoding => {
                self.feed_list(piece, &CODING_TOKENS);
                Ok(())
            }
        }
    }

    fn feed_list(&mut self, piece: &[u8], tokens: &[&[u8]]) {
        for &c in piece {
            match c {
                b',' => self.end_elem(tokens),
                b' ' | b'\t' => {
                    if self.elem.len > 0 {
                        self.elem.trailing_ws = true;
                    }
                }
                _ => {
                    let e = &mut self.elem;
                    if e.trailing_ws {
                        e.broken = true;
                    }
                    for (k, t) in tokens.iter().enumerate() {
                        // Value bytes are never CR, so `| 0x20` only folds letters (see `eq_lower`).
                        if t.get(e.len) != Some(&(c | 0x20)) {
                            e.alive &= !(1 << k);
                        }
                    }
                    e.len += 1;
                }
            }
        }
    }

    /// A list element ended (comma or end of value): record what it was.
    fn end_elem(&mut self, tokens: &[&[u8]]) {
        let e = self.elem;
        self.elem = ListElem::START;
        if e.len == 0 {
            return; // empty list elements are allowed and ignored
        }
        let matched = if e.broken {
            None
        } else {
            tokens
                .iter()
                .enumerate()
                .position(|(k, t)| e.alive & (1 << k) != 0 && t.len() == e.len)
        };
        match self.field {
            Field::Connection => match matched {
                Some(0) => self.framing.close = true,
                Some(1) => self.framing.keep_alive = true,
                _ => {}
            },
            Field::TransferEncoding => {
                self.framing.te_last_chunked = matched == Some(0);
                if matched == Some(0) {
                    self.framing.te_chunked_count += 1;
                }
            }
            Field::Other | Field::ContentLength => {}
        }
    }

    /// The current field line ended.
    #[inline]
    fn end_field(&mut self) -> Result<(), ParseError> {
        match self.field {
            Field::Other => {}
            Field::ContentLength => {
                if self.decimal.digits == 0 {
                    return Err(ParseError::BadContentLength);
                }
                let n = self.decimal.value;
                if self.framing.content_length.is_some_and(|m| m != n) {
                    return Err(ParseError::ConflictingLength);
                }
                self.framing.content_length = Some(n);
            }
            Field::Connection => self.end_elem(&CONNECTION_TOKENS),
            Field::TransferEncoding => {
                self.framing.te_seen = true;
                self.end_elem(&CODING_TOKENS);
            }
        }
        self.field = Field::Other;
        Ok(())
    }

    /// A whole `<hex>\r\n` chunk-size line (at most 15 digits, no extension)
    /// at the start of `b`: records the size and returns the line length.
    #[inline(always)]
    fn fast_chunk_line(&mut self, b: &[u8]) -> Option<usize> {
        let digits = b
            .iter()
            .take(16)
            .take_while(|c| c.is_ascii_hexdigit())
            .count();
        if digits == 0 || digits == 16 || b.get(digits..digits + 2) != Some(b"\r\n") {
            return None;
        }
        let len = digits + 2;
        if len > self.limits.max_header_bytes {
            return None;
        }
        self.chunk_size = b[..digits]
            .iter()
            .fold(0, |n, &c| n << 4 | u64::from(hex_value(c)));
        self.section_bytes = len;
        Some(len)
    }

    /// Reads a chunk-size line from `b[*pos..]`. True when its LF was consumed.
    fn chunk_line(&mut self, b: &[u8], pos: &mut usize) -> Result<bool, ParseError> {
        let mut i = *pos;
        let r = loop {
            let Some(&c) = b.get(i) else { break Ok(false) };
            i += 1;
            match (self.state, c) {
                (State::ChunkSizeStart | State::ChunkSize, _) if c.is_ascii_hexdigit() => {
                    if self.chunk_size >> 60 != 0 {
                        break Err(ParseError::BadChunkSize);
                    }
                    self.chunk_size = self.chunk_size << 4 | u64::from(hex_value(c));
                    self.state = State::ChunkSize;
                }
                (State::ChunkSizeStart, _) => break Err(ParseError::BadChunkSize),
                (State::ChunkSize | State::ChunkSizeWs, b' ' | b'\t') => {
                    self.state = State::ChunkSizeWs
                }
                (State::ChunkSize | State::ChunkSizeWs, b';') => self.state = State::ChunkExt,
                (State::ChunkSize | State::ChunkSizeWs | State::ChunkExt, b'\r') => {
                    self.state = State::ChunkSizeLf
                }
                (State::ChunkSizeLf, b'\n') => break Ok(true),
                (State::ChunkSize | State::ChunkSizeWs | State::ChunkExt, b'\n') => {
                    break Err(ParseError::BadLineEnding)
                }
                (State::ChunkSize | State::ChunkSizeWs, _) => break Err(ParseError::BadChunkSize),
                (State::ChunkExt, _) => {
                    if !is_value_byte(c) {
                        break Err(ParseError::BadChunkExtension);
                    }
                    while i < b.len() && is_value_byte(b[i]) {
                        i += 1;
                    }
                }
                _ => break Err(ParseError::BadLineEnding),
            }
        };
        *pos = i;
        r
    }
}

/// `HTTP/1.x NNN[ reason]` (the line without its end, known to hold no control
/// byte): status and whether it is HTTP/1.0.
#[inline(always)]
fn status_line(line: &[u8]) -> Option<(u16, bool)> {
    if line.len() < 12 || (line.len() > 12 && line[12] != b' ') || line[8] != b' ' {
        return None;
    }
    let http10 = match &line[..8] {
        b"HTTP/1.1" => false,
        b"HTTP/1.0" => true,
        _ => return None,
    };
    let (d0, d1, d2) = (
        line[9].wrapping_sub(b'0'),
        line[10].wrapping_sub(b'0'),
        line[11].wrapping_sub(b'0'),
    );
    if !(1..=9).contains(&d0) || d1 > 9 || d2 > 9 {
        return None;
    }
    Some((
        u16::from(d0) * 100 + u16::from(d1) * 10 + u16::from(d2),
        http10,
    ))
}

/// Records a framing field whose value has its usual plain form; false for
/// anything else (repeated Content-Length included), which the state machine handles.
#[inline(always)]
fn plain_framing_value(framing: &mut Framing, field: Field, value: &[u8]) -> bool {
    match field {
        Field::ContentLength => {
            if value.is_empty() || value.len() > 19 || framing.content_length.is_some() {
                return false;
            }
            let mut n = 0u64;
            for &c in value {
                let d = c.wrapping_sub(b'0');
                if d > 9 {
                    return false;
                }
                n = n * 10 + u64::from(d);
            }
            framing.content_length = Some(n);
        }
        Field::Connection if eq_lower(value, b"keep-alive") => framing.keep_alive = true,
        Field::Connection if eq_lower(value, b"close") => framing.close = true,
        Field::TransferEncoding if eq_lower(value, b"chunked") && !framing.te_seen => {
            framing.te_seen = true;
            framing.te_last_chunked = true;
            framing.te_chunked_count = 1;
        }
        _ => return false,
    }
    true
}

/// Fast-path verdict on one line.
enum FastLine {
    /// A field line of this many bytes was read.
    Field(usize),
    /// The empty line (this many bytes) ended the head.
    End(usize),
    /// Not an ordinary complete line: the state machine reads it.
    Slow,
}

/// Length of the line whose content ends at `at` (the first control byte), if that byte starts CRLF or LF.
#[inline(always)]
fn line_end(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at..)? {
        [b'\r', b'\n', ..] => Some(at + 2),
        [b'\n', ..] => Some(at + 1),
        _ => None,
    }
}

fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        _ => (c | 0x20) - b'a' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `input` in one piece: the responses (with their end offsets) and how it ended.
    fn parse_whole(
        input: &[u8],
        head: bool,
        limits: Limits,
    ) -> (Vec<(Response, usize)>, Result<(), ParseError>) {
        let mut p = ResponseParser::new(limits, head);
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            match p.parse(&input[at..]) {
                Ok(Parse::Partial) => return (out, Ok(())),
                Ok(Parse::Complete { consumed, response }) => {
                    assert!(consumed > 0, "a response has at least one byte");
                    at += consumed;
                    out.push((response, at));
                    if at == input.len() {
                        return (out, Ok(()));
                    }
                }
                Err(e) => return (out, Err(e)),
            }
        }
    }

    /// Parses `input` whole, and checks that feeding it byte by byte (the state
    /// machine only, never the fast path) ends the same way.
    fn one(input: &str) -> Result<Parse, ParseError> {
        let whole = ResponseParser::new(Limits::default(), false).parse(input.as_bytes());
        let mut p = ResponseParser::new(Limits::default(), false);
        let mut bytewise = Ok(Parse::Partial);
        for (i, b) in input.as_bytes().iter().enumerate() {
            bytewise = p.parse(std::slice::from_ref(b));
            match bytewise {
                Ok(Parse::Partial) => {}
                Ok(Parse::Complete { consumed, response }) => {
                    bytewise = Ok(Parse::Complete {
                        consumed: i + consumed,
                        response,
                    });
                    break;
                }
                Err(_) => break,
            }
        }
        assert_eq!(bytewise, whole, "{input:?} byte by byte");
        whole
    }

    fn resp(status: u16, keep_alive: bool, body_bytes: u64, wire_bytes: u64) -> Response {
        Response {
            status,
            keep_alive,
            body_bytes,
            wire_bytes,
        }
    }

    /// Parses a single complete response whole, and checks that byte-by-byte
    /// feeding (the state machine only) stays Partial until the last byte completes it identically.
    fn complete(input: &str, head: bool) -> Response {
        let bytes = input.as_bytes();
        let response = match ResponseParser::new(Limits::default(), head).parse(bytes) {
            Ok(Parse::Complete { consumed, response }) if consumed == bytes.len() => response,
            other => panic!("{input:?}: {other:?}"),
        };
        let mut p = ResponseParser::new(Limits::default(), head);
        let (last, init) = bytes.split_last().expect("non-empty response");
        for (i, b) in init.iter().enumerate() {
            assert_eq!(
                p.parse(std::slice::from_ref(b)),
                Ok(Parse::Partial),
                "{input:?} byte {i}"
            );
        }
        assert_eq!(
            p.parse(std::slice::from_ref(last)),
            Ok(Parse::Complete {
                consumed: 1,
                response
            }),
            "{input:?}"
        );
        response
    }

    #[test]
    fn complete_responses_table() {
        let cases: &[(&str, bool, u16, bool, u64)] = &[
            ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, 200, true, 5),
            ("HTTP/1.1 200 OK\r\nContent-Length: 0000000000000000012\r\n\r\n0123456789ab", false, 200, true, 12),
            ("HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc", false, 200, true, 3),
            ("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", false, 404, true, 0),
            ("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
            ("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
            ("HTTP/1.1 200 OK\nContent-Length: 2\n\nok", false, 200, true, 2),
            ("HTTP/1.1 599 Whatever \t reason é\r\ncontent-length:1\r\n\r\nx", false, 599, true, 1),
            ("HTTP/1.1 200 OK\r\nCONTENT-LENGTH: \t 2 \t\r\n\r\nok", false, 200, true, 2),
            ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false, 200, true, 2),
            ("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
            ("HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
            ("HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
            ("HTTP/1.1 200 OK\r\nConnection: clo se\r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
            ("HTTP/1.1 200 OK\r\nX-Connection: close\r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
            ("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 200, false, 1),
            ("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", false, 200, true, 1),
            ("HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\nx", false, 200, false, 1),
            ("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", false, 204, true, 0),
            ("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", false, 304, true, 0),
            ("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", true, 200, true, 0),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true, 200, true, 0),
            ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 200, true, 1),
            ("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", false, 201, true, 0),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", false, 101, false, 0),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false, 200, true, 5),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n1;a=b;c=\"d e\"\r\nx\r\nA \r\n0123456789\r\n0\r\nT: 1\r\nU:\r\n\r\n", false, 200, true, 11),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false, 200, true, 0),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: ,chunked,\r\n\r\n0\r\n\n", false, 200, true, 0),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000000000001\r\nx\r\n0\r\n\r\n", false, 200, true, 1),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n", false, 200, false, 0),
        ];
        for &(input, head, status, keep_alive, body) in cases {
            let r = complete(input, head);
            assert_eq!(
                r,
                resp(status, keep_alive, body, input.len() as u64),
                "{input:?}"
            );
        }
        // Multi-digit lengths through both paths.
        for len in [9usize, 10, 99, 612, 1000, 4097] {
            let input = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n{}",
                "b".repeat(len)
            );
            assert_eq!(
                complete(&input, false),
                resp(200, true, len as u64, input.len() as u64),
                "{len}"
            );
        }
    }

    #[test]
    fn close_delimited_body_ends_at_eof_and_never_keeps_alive() {
        for input in [
            "HTTP/1.1 200 OK\r\nServer: x\r\n\r\nbody until close",
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nbody",
        ] {
            let mut p = ResponseParser::new(Limits::default(), false);
            assert_eq!(p.parse(input.as_bytes()), Ok(Parse::Partial));
            assert_eq!(p.parse(b"more"), Ok(Parse::Partial));
            let head_len = input.find("\r\n\r\n").unwrap() + 4;
            let body = (input.len() - head_len + 4) as u64;
            assert_eq!(
                p.eof(),
                Ok(Some(resp(200, false, body, input.len() as u64 + 4)))
            );
            assert!(!p.in_progress());
            assert_eq!(
                p.eof(),
                Ok(None),
                "parser starts over after the close-delimited response"
            );
        }
    }

    #[test]
    fn pipelined_responses_complete_one_by_one_with_offsets() {
        let a = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let b = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        let c = "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let all = format!("{a}{b}{c}");
        let (got, end) = parse_whole(all.as_bytes(), false, Limits::default());
        assert_eq!(end, Ok(()));
        let (la, lb, lc) = (a.len(), b.len(), c.len());
        assert_eq!(
            got,
            vec![
                (resp(200, true, 2, la as u64), la),
                (resp(200, true, 3, lb as u64), la + lb),
                (resp(503, false, 0, lc as u64), la + lb + lc),
            ]
        );
    }

    #[test]
    fn prefixes_are_partial() {
        let partial = [
            "",
            "H",
            "HTTP/1.",
            "HTTP/1.1",
            "HTTP/1.1 ",
            "HTTP/1.1 20",
            "HTTP/1.1 200",
            "HTTP/1.1 200 OK",
            "HTTP/1.1 200 OK\r",
            "HTTP/1.1 200 OK\r\n",
            "HTTP/1.1 200 OK\r\nContent-Len",
            "HTTP/1.1 200 OK\r\nContent-Length:",
            "HTTP/1.1 200 OK\r\nContent-Length: 1",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nx",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nTrailer: x\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r",
            "HTTP/1.1 100 Continue\r\n\r\n",
            "HTTP/1.1 200 OK\r\n\r\nclose-delimited",
        ];
        for input in partial {
            assert_eq!(one(input), Ok(Parse::Partial), "{input:?}");
        }
    }

    #[test]
    fn malformed_responses_name_their_cause() {
        use ParseError::*;
        let cases: &[(&str, ParseError)] = &[
            ("XTTP/1.1 200 OK\r\n\r\n", BadVersion),
            ("HTTP/2 200 OK\r\n\r\n", BadVersion),
            ("HTTP/1.2 200 OK\r\n\r\n", BadVersion),
            ("HTTP/1.10 200 OK\r\n\r\n", BadVersion),
            ("HTTP/1.1  200 OK\r\n\r\n", BadStatus),
            ("http/1.1 200 OK\r\n\r\n", BadVersion),
            ("garbage\r\n\r\n", BadVersion),
            ("HTTP/1.1 20 OK\r\n\r\n", BadStatus),
            ("HTTP/1.1 2000 OK\r\n\r\n", BadStatus),
            ("HTTP/1.1 099 OK\r\n\r\n", BadStatus),
            ("HTTP/1.1 2x0 OK\r\n\r\n", BadStatus),
            ("HTTP/1.1 200 O\0K\r\n\r\n", BadReason),
            ("HTTP/1.1 200 OK\rX\n\r\n", BadLineEnding),
            ("HTTP/1.1 200 OK\r\nA: b\rX\r\n\r\n", BadLineEnding),
            ("HTTP/1.1 200 OK\r\n\rX", BadLineEnding),
            ("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", BadHeaderName),
            ("HTTP/1.1 200 OK\r\nName : x\r\n\r\n", BadHeaderName),
            ("HTTP/1.1 200 OK\r\n: x\r\n\r\n", BadHeaderName),
            ("HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n", BadHeaderName),
            ("HTTP/1.1 200 OK\r\nN\u{e9}: x\r\n\r\n", BadHeaderName),
            ("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", ObsFold),
            ("HTTP/1.1 200 OK\r\nA: b\r\n\tc\r\n\r\n", ObsFold),
            ("HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", BadHeaderValue),
            ("HTTP/1.1 200 OK\r\nA: b\x7fc\r\n\r\n", BadHeaderValue),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                BadContentLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
                BadContentLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
                BadContentLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\n",
                BadContentLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
                BadContentLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
                BadContentLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n",
                BadContentLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                ConflictingLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                ConflictingLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
                ConflictingLength,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                UnsupportedTransferEncoding,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
                UnsupportedTransferEncoding,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
                UnsupportedTransferEncoding,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n",
                UnsupportedTransferEncoding,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunk ed\r\n\r\n",
                UnsupportedTransferEncoding,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n",
                BadChunkSize,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
                BadChunkSize,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
                BadChunkSize,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1 1\r\n",
                BadChunkSize,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
                BadChunkSize,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;a\0\r\n",
                BadChunkExtension,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\rx",
                BadLineEnding,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy",
                BadChunkTerminator,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\rx",
                BadChunkTerminator,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer: x\r\n\r\n",
                BadHeaderName,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: \x01\r\n\r\n",
                BadHeaderValue,
            ),
        ];
        for &(input, want) in cases {
            assert_eq!(one(input), Err(want), "{input:?}");
        }
    }

    #[test]
    fn any_wrong_byte_in_the_version_is_bad_version() {
        for at in 0..8 {
            for wrong in [b'x', b' ', b'\n', b'2', 0] {
                let mut v = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec();
                if v[at] == wrong || (at == 7 && wrong == b'0') {
                    continue;
                }
                v[at] = wrong;
                let s = String::from_utf8(v).unwrap();
                assert_eq!(one(&s), Err(ParseError::BadVersion), "{s:?}");
            }
        }
    }

    #[test]
    fn every_error_has_a_distinct_snake_case_name() {
        use ParseError::*;
        let all = [
            BadVersion,
            BadStatus,
            BadReason,
            BadLineEnding,
            BadHeaderName,
            ObsFold,
            BadHeaderValue,
            HeaderTooLarge,
            TooManyHeaders,
            BadContentLength,
            ConflictingLength,
            UnsupportedTransferEncoding,
            BadChunkSize,
            BadChunkExtension,
            ChunkLineTooLong,
            BadChunkTerminator,
            UnexpectedEof { stage: Stage::Body },
        ];
        let names: std::collections::BTreeSet<_> = all.iter().map(|e| e.name()).collect();
        assert_eq!(names.len(), all.len());
        assert!(names
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    }

    #[test]
    fn errors_stick_until_reset() {
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(p.parse(b"XTTP"), Err(ParseError::BadVersion));
        assert_eq!(
            p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
            Err(ParseError::BadVersion)
        );
        assert_eq!(p.eof(), Err(ParseError::BadVersion));
        p.reset();
        assert!(!p.in_progress());
        let r = p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert!(matches!(
            r,
            Ok(Parse::Complete {
                response: Response { status: 200, .. },
                ..
            })
        ));
    }

    /// A head seen before is recalled only when every byte matches: one
    /// digit of Content-Length, of the status or of a framing value changed
    /// (same length, so a comparison of lengths would not see it) changes
    /// what the parser says; an identical head says the same again, also
    /// after a reset and for a HEAD parser.
    #[test]
    fn a_remembered_head_is_recalled_only_byte_for_byte() {
        let head = |status: &str, cl: &str, conn: &str| {
            format!("HTTP/1.1 {status}\r\nServer: nginx\r\nContent-Length: {cl}\r\nConnection: {conn}\r\n\r\n")
        };
        let mut p = ResponseParser::new(Limits::default(), false);
        let answer = |p: &mut ResponseParser, h: String, body: &str| {
            let wire = format!("{h}{body}");
            match p.parse(wire.as_bytes()) {
                Ok(Parse::Complete { consumed, response }) => {
                    assert_eq!(consumed, wire.len(), "{wire:?}");
                    response
                }
                other => panic!("{wire:?}: {other:?}"),
            }
        };
        let a = answer(&mut p, head("200 OK", "13", "keep-alive"), "Hello, world!");
        let b = answer(&mut p, head("200 OK", "13", "keep-alive"), "Hello, world!");
        assert_eq!((a.status, a.body_bytes, a.keep_alive), (200, 13, true));
        assert_eq!((b.status, b.body_bytes, b.keep_alive), (200, 13, true));
        // Content-Length 13 -> 12: a recalled head would wait for 13 bytes.
        let c = answer(&mut p, head("200 OK", "12", "keep-alive"), "Hello, world");
        assert_eq!(c.body_bytes, 12);
        let c = answer(&mut p, head("200 OK", "12", "keep-alive"), "Hello, world");
        assert_eq!(c.body_bytes, 12);
        let d = answer(&mut p, head("503 OK", "12", "keep-alive"), "Hello, world");
        assert_eq!(d.status, 503);
        let e = answer(&mut p, head("503 OK", "12", "keep-aliv_"), "Hello, world");
        assert!(e.keep_alive, "an unknown token does not close");
        let f = answer(&mut p, head("503 OK", "12", "close\t\t\t "), "Hello, world");
        assert!(!f.keep_alive, "Connection: close");
        p.reset();
        let g = answer(&mut p, head("503 OK", "12", "close\t\t\t "), "Hello, world");
        assert_eq!((g.status, g.body_bytes, g.keep_alive), (503, 12, false));
        p.set_head(true);
        let h = answer(&mut p, head("503 OK", "12", "close\t\t\t "), "");
        assert_eq!((h.status, h.body_bytes), (503, 0), "HEAD: no body");
        // A head cut short is not a remembered one: the state machine waits.
        let mut q = ResponseParser::new(Limits::default(), false);
        let full = head("200 OK", "0", "keep-alive");
        answer(&mut q, full.clone(), "");
        assert_eq!(
            q.parse(&full.as_bytes()[..full.len() - 1]),
            Ok(Parse::Partial)
        );
        assert!(matches!(
            q.parse(b"\n"),
            Ok(Parse::Complete { consumed: 1, .. })
        ));
    }

    /// Heads longer than the memo's bound are read every time, and right.
    #[test]
    fn long_heads_are_not_remembered_and_still_parse() {
        let filler = "x".repeat(MEMO_MAX);
        let wire = format!("HTTP/1.1 200 OK\r\nX-Fill: {filler}\r\nContent-Length: 2\r\n\r\nhi");
        let mut p = ResponseParser::new(Limits::default(), false);
        for _ in 0..3 {
            match p.parse(wire.as_bytes()) {
                Ok(Parse::Complete { consumed, response }) => {
                    assert_eq!((consumed, response.body_bytes), (wire.len(), 2));
                }
                other => panic!("{other:?}"),
            }
            assert!(p.memo_head.is_none());
        }
    }

    #[test]
    fn eof_reports_where_the_response_was_cut() {
        let cases: &[(&str, Option<Stage>)] = &[
            ("", None),
            ("HTTP/1.1 2", Some(Stage::Head)),
            ("HTTP/1.1 100 Continue\r\n\r\n", Some(Stage::Head)),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
                Some(Stage::Body),
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                Some(Stage::Body),
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                Some(Stage::Chunked),
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
                Some(Stage::Chunked),
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n",
                Some(Stage::Trailers),
            ),
        ];
        for &(input, stage) in cases {
            let mut p = ResponseParser::new(Limits::default(), false);
            assert_eq!(p.parse(input.as_bytes()), Ok(Parse::Partial), "{input:?}");
            assert_eq!(p.in_progress(), stage.is_some(), "{input:?}");
            let want = match stage {
                None => Ok(None),
                Some(stage) => Err(ParseError::UnexpectedEof { stage }),
            };
            assert_eq!(p.eof(), want, "{input:?}");
        }
    }

    #[test]
    fn in_progress_follows_the_current_response_only() {
        let mut p = ResponseParser::new(Limits::default(), false);
        assert!(!p.in_progress());
        let both = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 2";
        let Ok(Parse::Complete { consumed, .. }) = p.parse(both) else {
            panic!("first response completes")
        };
        assert!(
            !p.in_progress(),
            "completed response leaves nothing in progress"
        );
        assert_eq!(p.parse(&both[consumed..]), Ok(Parse::Partial));
        assert!(p.in_progress());
        p.reset();
        assert!(!p.in_progress());
    }

    #[test]
    fn header_block_at_the_byte_limit_passes_and_one_more_fails() {
        let input = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        let exact = Limits {
            max_header_bytes: input.len(),
            ..Limits::default()
        };
        assert!(matches!(
            ResponseParser::new(exact, false).parse(input.as_bytes()),
            Ok(Parse::Complete { .. })
        ));
        let short = Limits {
            max_header_bytes: input.len() - 1,
            ..Limits::default()
        };
        assert_eq!(
            ResponseParser::new(short, false).parse(input.as_bytes()),
            Err(ParseError::HeaderTooLarge)
        );
        // A head still arriving stays Partial until it passes the limit.
        let mut p = ResponseParser::new(short, false);
        assert_eq!(
            p.parse(&input.as_bytes()[..input.len() - 1]),
            Ok(Parse::Partial)
        );
        assert_eq!(p.parse(b"\n"), Err(ParseError::HeaderTooLarge));
    }

    #[test]
    fn default_limit_refuses_an_endless_header_line() {
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(p.parse(b"HTTP/1.1 200 OK\r\nX: "), Ok(Parse::Partial));
        let filler = vec![b'a'; 1024];
        let mut result = Ok(Parse::Partial);
        for _ in 0..65 {
            result = p.parse(&filler);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(ParseError::HeaderTooLarge));
    }

    #[test]
    fn header_count_limit_applies_to_head_and_to_trailers() {
        let limits = Limits {
            max_headers: 2,
            ..Limits::default()
        };
        let two = "HTTP/1.1 200 OK\r\nA: 1\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(
            ResponseParser::new(limits, false).parse(two.as_bytes()),
            Ok(Parse::Complete { .. })
        ));
        let three = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            ResponseParser::new(limits, false).parse(three.as_bytes()),
            Err(ParseError::TooManyHeaders)
        );
        let trailers = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nB: 2\r\n\r\n0\r\nT: 1\r\nU: 2\r\nV: 3\r\n\r\n";
        assert_eq!(
            ResponseParser::new(limits, false).parse(trailers.as_bytes()),
            Err(ParseError::TooManyHeaders)
        );
    }

    #[test]
    fn trailer_section_and_chunk_line_have_their_own_byte_limit() {
        let limits = Limits {
            max_header_bytes: 48,
            ..Limits::default()
        };
        let ok = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\r\n\r\n";
        assert!(matches!(
            ResponseParser::new(limits, false).parse(ok.as_bytes()),
            Ok(Parse::Complete { .. })
        ));
        let long_trailer = format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: {}\r\n\r\n",
            "x".repeat(50)
        );
        assert_eq!(
            ResponseParser::new(limits, false).parse(long_trailer.as_bytes()),
            Err(ParseError::HeaderTooLarge)
        );
        let long_ext = format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;{}\r\nx\r\n0\r\n\r\n",
            "e".repeat(50)
        );
        assert_eq!(
            ResponseParser::new(limits, false).parse(long_ext.as_bytes()),
            Err(ParseError::ChunkLineTooLong)
        );
    }

    #[test]
    fn wire_bytes_include_interim_heads_and_chunk_framing() {
        let interim = "HTTP/1.1 100 Continue\r\n\r\n";
        let last = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";
        let r = complete(&format!("{interim}{last}"), false);
        assert_eq!(r, resp(200, true, 2, (interim.len() + last.len()) as u64));
    }

    #[test]
    fn upgrade_response_ends_parsing_for_the_connection() {
        let input = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n\x81\x05hello";
        let mut p = ResponseParser::new(Limits::default(), false);
        let Ok(Parse::Complete { consumed, response }) = p.parse(input) else {
            panic!("101 completes")
        };
        assert_eq!(consumed, input.len() - 7);
        assert!(!response.keep_alive);
    }

    #[test]
    fn set_head_switches_body_rules_for_the_next_response() {
        let input = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(p.parse(input), Ok(Parse::Partial));
        p.reset();
        p.set_head(true);
        assert!(
            matches!(p.parse(input), Ok(Parse::Complete { consumed, .. }) if consumed == input.len())
        );
    }

    /// RFC 9112 §7.1: the chunk-size line and the end of chunk data are CRLF;
    /// a bare LF there is an error (as in llhttp), wherever the input is split.
    #[test]
    fn chunk_framing_requires_crlf() {
        use ParseError::*;
        let te = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let cases: &[(&str, ParseError)] = &[
            ("3\nabc\n0\n\n", BadLineEnding),
            ("3\r\nabc\n0\r\n\r\n", BadChunkTerminator),
            ("3\r\nabc\r\n0\n\r\n", BadLineEnding),
            ("3 \nabc\r\n0\r\n\r\n", BadLineEnding),
            ("3;ext\nabc\r\n0\r\n\r\n", BadLineEnding),
            ("3;ext=1 \nabc\r\n0\r\n\r\n", BadLineEnding),
            ("3\r\nabc\r\n0;e\n\r\n", BadLineEnding),
            ("3\r\nabc\r\r\n", BadChunkTerminator),
        ];
        for &(chunks, want) in cases {
            assert_eq!(one(&format!("{te}{chunks}")), Err(want), "{chunks:?}");
        }
    }

    /// Empty lines before a status line (after a body, after a 1xx) are
    /// skipped, as llhttp and httparse do, and count as the next response's bytes.
    #[test]
    fn stray_empty_lines_between_responses_are_skipped() {
        let a = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let b = "\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let c = "\n\r\n\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n";
        let all = format!("{a}{b}{c}");
        let (got, end) = parse_whole(all.as_bytes(), false, Limits::default());
        assert_eq!(end, Ok(()));
        let (la, lb, lc) = (a.len(), b.len(), c.len());
        assert_eq!(
            got,
            vec![
                (resp(200, true, 2, la as u64), la),
                (resp(204, true, 0, lb as u64), la + lb),
                (resp(200, true, 1, lc as u64), la + lb + lc),
            ]
        );
        let after_continue =
            "HTTP/1.1 100 Continue\r\n\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(
            complete(after_continue, false),
            resp(200, true, 1, after_continue.len() as u64)
        );
        let lead = "\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(complete(lead, false), resp(200, true, 0, lead.len() as u64));
        assert_eq!(
            one("\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
            Ok(Parse::Complete {
                consumed: 40,
                response: resp(200, true, 0, 40)
            })
        );
        // A CR must still be followed by LF; other bytes are still not a status line.
        assert_eq!(
            one("\rHTTP/1.1 200 OK\r\n\r\n"),
            Err(ParseError::BadLineEnding)
        );
        assert_eq!(one("\r\n \r\n"), Err(ParseError::BadVersion));
    }

    #[test]
    fn eof_after_stray_empty_lines_cuts_nothing_unless_a_1xx_came_first() {
        for (input, want) in [
            ("\r\n", Ok(None)),
            ("\r\n\n\r", Ok(None)),
            (
                "HTTP/1.1 100 Continue\r\n\r\n\r\n",
                Err(ParseError::UnexpectedEof { stage: Stage::Head }),
            ),
        ] {
            let mut p = ResponseParser::new(Limits::default(), false);
            assert_eq!(p.parse(input.as_bytes()), Ok(Parse::Partial), "{input:?}");
            assert!(p.in_progress(), "{input:?}");
            assert_eq!(p.eof(), want, "{input:?}");
        }
        // After a clean end the parser reads a new connection from scratch.
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(p.parse(b"\r\n"), Ok(Parse::Partial));
        assert_eq!(p.eof(), Ok(None));
        assert!(!p.in_progress());
        let r = p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert!(
            matches!(r, Ok(Parse::Complete { consumed: 38, .. })),
            "{r:?}"
        );
    }

    #[test]
    fn stray_empty_lines_count_toward_the_head_limit() {
        let limits = Limits {
            max_header_bytes: 48,
            ..Limits::default()
        };
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"; // 38 bytes
        let fits = format!("{}{head}", "\r\n".repeat(5));
        assert!(matches!(
            ResponseParser::new(limits, false).parse(fits.as_bytes()),
            Ok(Parse::Complete { .. })
        ));
        let over = format!("{}{head}", "\r\n".repeat(6));
        assert_eq!(
            ResponseParser::new(limits, false).parse(over.as_bytes()),
            Err(ParseError::HeaderTooLarge)
        );
        let mut p = ResponseParser::new(limits, false);
        let endless = "\r\n".repeat(100);
        assert_eq!(p.parse(endless.as_bytes()), Err(ParseError::HeaderTooLarge));
    }

    #[test]
    fn huge_content_length_is_counted_without_overflow() {
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(
            p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n"),
            Ok(Parse::Partial)
        );
        assert_eq!(p.parse(&[0u8; 4096]), Ok(Parse::Partial));
        assert_eq!(
            p.eof(),
            Err(ParseError::UnexpectedEof { stage: Stage::Body })
        );
    }
}
