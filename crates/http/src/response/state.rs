//! The response parser: a byte-level state machine that can stop and resume
//! at any byte, with the fast paths of [`super::fast`] tried where a head, a
//! line or a chunk-size line may start.

use super::error::{ParseError, Stage};
use super::fast::{self, Head, Line};
use super::values::{field_of, Field, FieldValue, Framing, NameMatch, MAX_LENGTH};
use crate::grammar::{hex_value, is_tchar, is_value_byte};
use crate::memo::HeadMemo;

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

/// Parser states. Head states also read trailer sections (see `trailers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Matched this many bytes of `HTTP/1.`; at 7 the minor digit is next.
    /// `Version(0)` is only ever the start of a head's byte section, where
    /// the fast paths may read the whole head.
    Version(u8),
    /// Empty lines before the status line, skipped (as llhttp and httparse
    /// do); they count toward the head's byte limit.
    Blank,
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
                | State::Blank
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
    /// Name of the field being read, matched against the interpreted ones.
    name: NameMatch,
    /// Value of the field being read.
    value: FieldValue,
    chunk_size: u64,
    body_bytes: u64,
    /// Bytes of this response consumed by earlier `parse` calls.
    wire_bytes: u64,
    /// Bytes of empty lines skipped before this response's first status line.
    blank_bytes: u64,
    /// The last response was a 204 or 304 and no head has ended since: a
    /// bad status line now is that response's body.
    after_bodiless: bool,
    /// The last head read whole by the fast path (see [`crate::memo`]).
    pub(super) memo: HeadMemo<Head>,
}

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
            name: NameMatch::START,
            value: FieldValue::OTHER,
            chunk_size: 0,
            body_bytes: 0,
            wire_bytes: 0,
            blank_bytes: 0,
            after_bodiless: false,
            memo: HeadMemo::default(),
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
        let memo = std::mem::take(&mut self.memo);
        *self = ResponseParser::new(self.limits, self.head);
        self.memo = memo;
    }

    /// Feeds bytes. See [`Parse`]. After `Complete` the parser is ready for the
    /// next response. After an error, the same error is returned until [`reset`](Self::reset).
    pub fn parse(&mut self, input: &[u8]) -> Result<Parse, ParseError> {
        self.parse_body(input, |_| {})
    }

    /// [`parse`](Self::parse), handing each piece of body payload (chunk
    /// framing removed) to `body` in order as it passes, for checks that read
    /// the body; nothing is buffered.
    #[inline]
    pub fn parse_body(
        &mut self,
        input: &[u8],
        mut body: impl FnMut(&[u8]),
    ) -> Result<Parse, ParseError> {
        let mut pos = 0;
        match self.run(input, &mut pos, &mut body) {
            Ok(Some(response)) => Ok(Parse::Complete {
                consumed: pos,
                response,
            }),
            Ok(None) => {
                self.wire_bytes += input.len() as u64;
                Ok(Parse::Partial)
            }
            Err(e) => {
                let e = match e {
                    ParseError::BadVersion if self.after_bodiless => {
                        ParseError::BodyAfterBodilessStatus
                    }
                    e => e,
                };
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
            State::Blank | State::BlankLf if self.wire_bytes == self.blank_bytes => {
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
        self.after_bodiless = matches!(response.status, 204 | 304) && !self.head;
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

    /// Reads `input[*pos..]` until a response completes (returned, with `*pos`
    /// just past it) or the input ends (`None`).
    fn run(
        &mut self,
        input: &[u8],
        pos: &mut usize,
        body: &mut impl FnMut(&[u8]),
    ) -> Result<Option<Response>, ParseError> {
        loop {
            match self.state {
                State::Failed(e) => return Err(e),
                State::Body(left) => {
                    let take = left.min((input.len() - *pos) as u64);
                    body(&input[*pos..*pos + take as usize]);
                    *pos += take as usize;
                    self.body_bytes += take;
                    if take == left {
                        return Ok(Some(self.complete(*pos, false)));
                    }
                    self.state = State::Body(left - take);
                    return Ok(None);
                }
                State::CloseDelimited => {
                    body(&input[*pos..]);
                    self.body_bytes += (input.len() - *pos) as u64;
                    *pos = input.len();
                    return Ok(None);
                }
                State::ChunkData(left) => {
                    let take = left.min((input.len() - *pos) as u64);
                    body(&input[*pos..*pos + take as usize]);
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
                    if !self.run_chunk_line(input, pos)? {
                        return Ok(None);
                    }
                }
                _ => {
                    if self.state == State::Version(0) {
                        if let Some(len) = self.fast_head(&input[*pos..]) {
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

    /// Reads a chunk-size line; true when it ended (the state then is the
    /// chunk's data or the trailer section), false when the input did. Out
    /// of line, so that `run` stays small around the head and body paths.
    #[inline(never)]
    fn run_chunk_line(&mut self, input: &[u8], pos: &mut usize) -> Result<bool, ParseError> {
        let fast = match self.state {
            State::ChunkSizeStart => fast::chunk_line(&input[*pos..], self.limits.max_header_bytes),
            _ => None,
        };
        if let Some((len, size)) = fast {
            *pos += len;
            self.chunk_size = size;
            self.section_bytes = len;
        } else {
            let end = self.section_end(input.len(), *pos);
            let start = *pos;
            let done = self.chunk_line(&input[..end], pos)?;
            self.section_bytes += *pos - start;
            if !done {
                if end < input.len() {
                    return Err(ParseError::ChunkLineTooLong);
                }
                return Ok(false);
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
        Ok(true)
    }

    /// A whole head at the start of `b`, recalled from memory or read by
    /// the fast path: records what it says and returns its length. `None`
    /// (nothing recorded) leaves it to the state machine.
    #[inline(always)]
    fn fast_head(&mut self, b: &[u8]) -> Option<usize> {
        let (head, len) = match self.memo.recall(b) {
            Some((&head, len)) => (head, len),
            None => {
                let (head, len) =
                    fast::head(b, self.limits.max_header_bytes, self.limits.max_headers)?;
                self.memo.remember(&b[..len], head);
                (head, len)
            }
        };
        self.status = head.status;
        self.http10 = head.http10;
        self.framing = head.framing;
        self.fields = head.fields;
        self.section_bytes = len;
        Some(len)
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
        self.after_bodiless = false;
        if (100..200).contains(&self.status) && self.status != 101 {
            self.start_head();
            self.state = State::Version(0);
            return Ok(None);
        }
        let f = self.framing;
        if f.te_seen && f.content_length.is_some() {
            return Err(ParseError::ConflictingLength);
        }
        if f.te_seen && (f.te_codings == 0 || f.te_malformed || f.te_chunked_count > 1) {
            return Err(ParseError::UnsupportedTransferEncoding);
        }
        if self.head || self.status == 101 || self.status == 204 || self.status == 304 {
            return Ok(Some(self.complete(pos, false)));
        }
        if f.te_seen {
            // Codings that do not end in chunked: the body ends at the
            // close (RFC 9112 §6.3 item 4).
            self.state = if f.te_last_chunked {
                self.start_chunk_line()
            } else {
                State::CloseDelimited
            };
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
            let stop = match self.state {
                State::Version(_)
                | State::Blank
                | State::BlankLf
                | State::VersionSp
                | State::Code(_)
                | State::AfterCode
                | State::Reason
                | State::StatusLf => self.status_line_states(b, i)?,
                State::LineStart
                | State::Name
                | State::Ows
                | State::Value
                | State::FieldLf
                | State::EndLf => self.field_line_states(b, i)?,
                // Not head states: `run` only calls this in head states.
                _ => Some(HeadEnd::More),
            };
            if let Some(end) = stop {
                return Ok(end);
            }
        }
    }

    /// One step in the status line (or the empty lines before it). `Some`
    /// when the head states stop.
    #[inline(always)]
    fn status_line_states(
        &mut self,
        b: &[u8],
        i: &mut usize,
    ) -> Result<Option<HeadEnd>, ParseError> {
        match self.state {
            State::Version(n) => return self.version(b, i, n),
            State::Blank => match b.get(*i) {
                // A stray empty line between responses.
                None => return Ok(Some(HeadEnd::More)),
                Some(&c @ (b'\r' | b'\n')) => {
                    *i += 1;
                    self.blank_bytes += 1;
                    if c == b'\r' {
                        self.state = State::BlankLf;
                    }
                }
                // The status line, read here: its head no longer starts its byte section.
                Some(_) => self.state = State::Version(0),
            },
            State::VersionSp => {
                let Some(&c) = b.get(*i) else {
                    return Ok(Some(HeadEnd::More));
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
                        return Ok(Some(HeadEnd::More));
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
                    return Ok(Some(HeadEnd::More));
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
                        return Ok(None);
                    }
                }
                return Ok(Some(HeadEnd::More));
            }
            // StatusLf, BlankLf
            _ => {
                if !expect_lf(b, i)? {
                    return Ok(Some(HeadEnd::More));
                }
                self.state = match self.state {
                    State::BlankLf => {
                        self.blank_bytes += 1;
                        State::Blank
                    }
                    _ => State::LineStart,
                };
            }
        }
        Ok(None)
    }

    /// `HTTP/1.x` after `n` of its bytes (at 0 also the status-line fast
    /// path, and the way into skipping empty lines).
    #[inline(always)]
    fn version(
        &mut self,
        b: &[u8],
        i: &mut usize,
        mut n: u8,
    ) -> Result<Option<HeadEnd>, ParseError> {
        if n == 0 {
            if let Some((len, status, http10)) = fast::status_line(&b[*i..]) {
                *i += len;
                (self.status, self.http10) = (status, http10);
                self.state = State::LineStart;
                return Ok(None);
            }
            if let Some(b'\r' | b'\n') = b.get(*i) {
                self.state = State::Blank;
                return Ok(None);
            }
        }
        while n < 7 {
            let Some(&c) = b.get(*i) else {
                self.state = State::Version(n);
                return Ok(Some(HeadEnd::More));
            };
            if c != b"HTTP/1."[n as usize] {
                return Err(ParseError::BadVersion);
            }
            n += 1;
            *i += 1;
        }
        let Some(&c) = b.get(*i) else {
            self.state = State::Version(7);
            return Ok(Some(HeadEnd::More));
        };
        self.http10 = match c {
            b'0' => true,
            b'1' => false,
            _ => return Err(ParseError::BadVersion),
        };
        *i += 1;
        self.state = State::VersionSp;
        Ok(None)
    }

    /// One step in the field lines or the empty line ending the head. `Some`
    /// when the head states stop.
    #[inline(always)]
    fn field_line_states(
        &mut self,
        b: &[u8],
        i: &mut usize,
    ) -> Result<Option<HeadEnd>, ParseError> {
        match self.state {
            State::LineStart => {
                if self.fast_field_lines(b, i)? {
                    return Ok(Some(HeadEnd::Done));
                }
                let Some(&c) = b.get(*i) else {
                    return Ok(Some(HeadEnd::More));
                };
                match c {
                    b'\r' => {
                        *i += 1;
                        self.state = State::EndLf;
                    }
                    b'\n' => {
                        *i += 1;
                        return Ok(Some(HeadEnd::Done));
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
                    return Ok(Some(HeadEnd::More));
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
                self.value = FieldValue::begin(field);
                self.state = State::Ows;
            }
            State::Ows => {
                while let Some(&c) = b.get(*i) {
                    if c != b' ' && c != b'\t' {
                        self.state = State::Value;
                        return Ok(None);
                    }
                    *i += 1;
                }
                return Ok(Some(HeadEnd::More));
            }
            State::Value => {
                let start = *i;
                while *i < b.len() && is_value_byte(b[*i]) {
                    *i += 1;
                }
                self.value.feed(&b[start..*i], &mut self.framing)?;
                let Some(&c) = b.get(*i) else {
                    return Ok(Some(HeadEnd::More));
                };
                *i += 1;
                match c {
                    b'\r' => self.state = State::FieldLf,
                    b'\n' => {
                        self.value.end(&mut self.framing)?;
                        self.state = State::LineStart;
                    }
                    _ => return Err(ParseError::BadHeaderValue),
                }
            }
            // FieldLf, EndLf
            _ => {
                if !expect_lf(b, i)? {
                    return Ok(Some(HeadEnd::More));
                }
                if self.state == State::EndLf {
                    return Ok(Some(HeadEnd::Done));
                }
                self.value.end(&mut self.framing)?;
                self.state = State::LineStart;
            }
        }
        Ok(None)
    }

    /// Reads complete ordinary field lines at `b[*i..]` with the line fast
    /// path; true when it read the empty line ending the head.
    #[inline(always)]
    fn fast_field_lines(&mut self, b: &[u8], i: &mut usize) -> Result<bool, ParseError> {
        loop {
            let (len, name_len, value_start, value_end) = match fast::field_line(&b[*i..]) {
                Line::Field {
                    len,
                    name_len,
                    value_start,
                    value_end,
                } => (len, name_len, value_start, value_end),
                Line::End(len) => {
                    *i += len;
                    return Ok(true);
                }
                Line::Slow => return Ok(false),
            };
            if self.fields >= self.limits.max_headers {
                return Ok(false);
            }
            let line = &b[*i..];
            if !self.trailers {
                let field = field_of(&line[..name_len]);
                if field != Field::Other {
                    let value = &line[value_start..value_end];
                    if value.first() == Some(&b' ') {
                        return Ok(false); // more whitespace than one SP: the state machine skips it
                    }
                    self.framing.whole_value(field, value)?;
                }
            }
            self.fields += 1;
            *i += len;
        }
    }

    /// Reads a chunk-size line from `b[*pos..]`. True when its LF was consumed.
    fn chunk_line(&mut self, b: &[u8], pos: &mut usize) -> Result<bool, ParseError> {
        let mut i = *pos;
        let r = loop {
            let Some(&c) = b.get(i) else { break Ok(false) };
            i += 1;
            match (self.state, c) {
                (State::ChunkSizeStart | State::ChunkSize, _) if c.is_ascii_hexdigit() => {
                    // At most MAX_LENGTH before, so the shift loses nothing.
                    self.chunk_size = self.chunk_size << 4 | u64::from(hex_value(c));
                    if self.chunk_size > MAX_LENGTH {
                        break Err(ParseError::BadChunkSize);
                    }
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

/// Consumes the LF that must follow a CR: false when `b` ended first.
#[inline(always)]
fn expect_lf(b: &[u8], i: &mut usize) -> Result<bool, ParseError> {
    match b.get(*i) {
        None => Ok(false),
        Some(b'\n') => {
            *i += 1;
            Ok(true)
        }
        Some(_) => Err(ParseError::BadLineEnding),
    }
}
