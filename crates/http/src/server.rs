//! The server side: an incremental request scanner for a responder. It finds
//! request boundaries in a byte stream split anywhere, reads what a responder
//! needs (method HEAD or not, whether the target is one special path,
//! Content-Length or a chunked body, keep-alive, `Expect: 100-continue`) and
//! rejects what it cannot frame. Bodies are skipped, not kept.
//!
//! A request head that arrives whole is parsed in place; only a head split
//! across receives is copied, into a per-connection buffer reused for the
//! connection's lifetime, so the scanner allocates nothing per request. A
//! load generator sends the same request again and again: a head identical
//! byte for byte to the last one parsed whole is recognized by one comparison
//! and means what it meant then (see `crate::memo`).

use crate::grammar::{eq_lower, hex_value, is_tchar, is_token, is_value_byte, trim_ows};
use crate::memo::HeadMemo;

/// What the responder must answer, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScannedRequest {
    /// The connection stays open after the answer.
    pub keep_alive: bool,
    /// The target's path (origin- or absolute-form, query dropped) is the
    /// scanner's special path (see [`RequestScanner::new`]).
    pub special_path: bool,
    /// HTTP/1.0 with `Connection: keep-alive`: the answer must say keep-alive
    /// too, or the client waits for the close (ab -k does).
    pub says_keep_alive: bool,
    /// `HEAD`: the answer's head only, no body.
    pub head: bool,
    /// Not a request but its `Expect: 100-continue`, reported when the head
    /// is read and a body is still to come: a `100 Continue` is owed now.
    pub continue_only: bool,
    /// What the scanner's [`PathTable`] found for the target's path (None:
    /// no table, or nothing of that name; never looked up for the special path).
    pub found: Option<u32>,
}

/// A responder's table of paths (`xload serve --files`): the number of the
/// entry a request's path names. Looked up once per distinct head: the
/// scanner remembers the answer with the head.
pub trait PathTable: Send + Sync + std::fmt::Debug {
    /// `path`: the target's path as sent (origin-form, query dropped).
    fn find(&self, path: &[u8]) -> Option<u32>;
}

/// Why a request was refused (a responder answers 400 and closes).
#[derive(thiserror::Error, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// Not `method SP target SP version CRLF`, a head ended by bare LFs, or
    /// a target with a control byte or space.
    #[error("malformed request line")]
    RequestLine,
    /// A version other than HTTP/1.0 and HTTP/1.1.
    #[error("unsupported HTTP version")]
    Version,
    /// A header line without a colon, or a name that is not a token.
    #[error("invalid header field name")]
    HeaderName,
    /// A header line not ended by CRLF, or a control byte other than HTAB
    /// (NUL, CR, form feed, ...) or DEL inside a value.
    #[error("invalid header field value")]
    HeaderValue,
    /// A Content-Length that is not 1 to 15 digits, or two that differ.
    #[error("invalid Content-Length")]
    ContentLength,
    /// A Transfer-Encoding list (one over all its lines) whose last coding
    /// is not chunked, that lists chunked twice or a non-token, one on an
    /// HTTP/1.0 request, or one with a Content-Length (RFC 9112 §6.1, §6.3).
    #[error("unsupported Transfer-Encoding")]
    TransferEncoding,
    /// A chunked body that breaks its framing: a size line outside RFC 9112
    /// §7.1.1 (a space before its CR, an extension without `;` or name, an
    /// unclosed quote), a missing CRLF, an endless trailer.
    #[error("invalid chunked body")]
    Chunk,
    /// An HTTP/1.1 request without a Host field, or with two (RFC 9112 §3.2).
    #[error("missing or repeated Host")]
    Host,
    /// CONNECT: a tunnel request, for proxies; this responder is none.
    #[error("CONNECT is for proxies")]
    Connect,
    /// A head longer than [`MAX_REQUEST_HEAD`].
    #[error("request head larger than the limit")]
    HeadTooLarge,
}

/// Largest request head accepted (its empty line included), in bytes.
pub const MAX_REQUEST_HEAD: usize = 16 * 1024;

/// Incremental request scanner for one connection.
#[derive(Debug)]
pub struct RequestScanner {
    /// The path whose requests are marked `special_path`.
    special: &'static [u8],
    /// Looks up the other paths (see [`RequestScanner::with_paths`]).
    paths: Option<std::sync::Arc<dyn PathTable>>,
    /// Bytes of a head split across receives.
    head: Vec<u8>,
    /// Body bytes still to skip, and the request they belong to.
    body_left: u64,
    pending: Option<ScannedRequest>,
    /// Where in a chunked body the scanner is (None: not in one).
    chunk: Option<Chunk>,
    /// The last head parsed whole, and what it said (request, body length).
    memo: HeadMemo<(ScannedRequest, u64)>,
    /// The input ended on a CR where a request line could start: the CR of
    /// an empty line, skipped with its LF (or the start of a head).
    blank_cr: bool,
}

/// The body length `parse_head` gives for a chunked body.
const CHUNKED: u64 = u64::MAX;

/// A chunked body's framing, byte by byte but for the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// The chunk-size line: the size so far, the line's length so far, and
    /// where in its grammar the next byte falls.
    Line {
        size: u64,
        len: usize,
        at: SizeLine,
    },
    /// After the size line's CR.
    SizeLf {
        size: u64,
    },
    /// Data bytes still to skip.
    Data(u64),
    DataCr,
    DataLf,
    /// A trailer line (or the final empty line), its length so far.
    Trailer {
        len: usize,
    },
    TrailerLf {
        len: usize,
    },
}

/// Where a chunk-size line is, in RFC 9112 §7.1.1's grammar:
/// `chunk-size *( BWS ";" BWS ext-name [ BWS "=" BWS ext-value ] ) CRLF`,
/// an `ext-value` being a token or a quoted string. Anything else (a space
/// before the CR, an extension without `;`, an empty name, an unclosed
/// quote) is refused: a proxy in front may read such a line differently,
/// and the two would disagree on where the request ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SizeLine {
    /// Hex digits, this many so far (at most 15).
    Digits(u8),
    /// Whitespace after the size: only `;` may follow.
    SizeWs,
    /// After `;`: whitespace, then the extension's name.
    NameStart,
    Name,
    /// Whitespace after a name: `=` or `;` follows.
    NameWs,
    /// After `=`: whitespace, then the value.
    ValueStart,
    Token,
    Quoted,
    /// After a backslash inside the quoted string.
    QuotedEscape,
    /// After a value: whitespace, then `;` or the line's end.
    ValueEnd,
    /// Whitespace after a value: only `;` may follow.
    ValueWs,
}

/// Where the byte after a chunk-size line's byte `c` falls; `None` when
/// the line is malformed. A CR (ending the line) is handled by the caller.
fn size_line_step(at: SizeLine, c: u8) -> Option<SizeLine> {
    use SizeLine::*;
    let ws = c == b' ' || c == b'\t';
    Some(match at {
        Digits(n) if c.is_ascii_hexdigit() && n < 15 => Digits(n + 1),
        Digits(n) if n > 0 && c == b';' => NameStart,
        Digits(n) if n > 0 && ws => SizeWs,
        SizeWs | ValueWs if ws => at,
        SizeWs | ValueWs | ValueEnd if c == b';' => NameStart,
        NameStart | ValueStart if ws => at,
        NameStart | Name if is_tchar(c) => Name,
        Name | NameWs if c == b'=' => ValueStart,
        Name | NameWs if c == b';' => NameStart,
        Name | NameWs if ws => NameWs,
        ValueStart | Token if is_tchar(c) => Token,
        ValueStart if c == b'"' => Quoted,
        Token if c == b';' => NameStart,
        Token | ValueEnd if ws => ValueWs,
        Quoted if c == b'"' => ValueEnd,
        Quoted if c == b'\\' => QuotedEscape,
        // qdtext and quoted-pair: HTAB, SP, VCHAR, obs-text.
        Quoted | QuotedEscape if is_value_byte(c) => Quoted,
        _ => return None,
    })
}

impl SizeLine {
    /// The line may end (CRLF) here.
    fn may_end(self) -> bool {
        matches!(
            self,
            SizeLine::Digits(1..) | SizeLine::Name | SizeLine::Token | SizeLine::ValueEnd
        )
    }
}

impl Chunk {
    const START: Chunk = Chunk::Line {
        size: 0,
        len: 0,
        at: SizeLine::Digits(0),
    };

    /// Consumes bytes of `input`; returns how many, and whether the body ended.
    fn step(&mut self, input: &[u8]) -> Result<(usize, bool), BadRequest> {
        let mut i = 0;
        while i < input.len() {
            let c = input[i];
            *self = match *self {
                Chunk::Data(n) => {
                    let k = n.min((input.len() - i) as u64);
                    i += k as usize;
                    *self = if n == k {
                        Chunk::DataCr
                    } else {
                        Chunk::Data(n - k)
                    };
                    continue;
                }
                Chunk::Line { size, at, .. } if c == b'\r' && at.may_end() => {
                    Chunk::SizeLf { size }
                }
                Chunk::Line { size, len, at } if len < MAX_REQUEST_HEAD => {
                    let next = size_line_step(at, c).ok_or(BadRequest::Chunk)?;
                    let size = match (at, next) {
                        (SizeLine::Digits(_), SizeLine::Digits(_)) => {
                            size * 16 + u64::from(hex_value(c))
                        }
                        _ => size,
                    };
                    Chunk::Line {
                        size,
                        len: len + 1,
                        at: next,
                    }
                }
                Chunk::SizeLf { size } if c == b'\n' => {
                    if size == 0 {
                        Chunk::Trailer { len: 0 }
                    } else {
                        Chunk::Data(size)
                    }
                }
                Chunk::DataCr if c == b'\r' => Chunk::DataLf,
                Chunk::DataLf if c == b'\n' => Chunk::START,
                Chunk::Trailer { len } if c == b'\r' => Chunk::TrailerLf { len },
                Chunk::Trailer { len } if c != b'\n' && len < MAX_REQUEST_HEAD => {
                    Chunk::Trailer { len: len + 1 }
                }
                Chunk::TrailerLf { len } if c == b'\n' => {
                    if len == 0 {
                        return Ok((i + 1, true));
                    }
                    Chunk::Trailer { len: 0 }
                }
                _ => return Err(BadRequest::Chunk),
            };
            i += 1;
        }
        Ok((i, false))
    }
}

impl RequestScanner {
    /// A scanner for one connection; requests whose target's path is
    /// `special_path` (e.g. `b"/stats"`) are marked
    /// [`ScannedRequest::special_path`].
    pub fn new(special_path: &'static [u8]) -> RequestScanner {
        RequestScanner {
            special: special_path,
            paths: None,
            head: Vec::new(),
            body_left: 0,
            pending: None,
            chunk: None,
            memo: HeadMemo::default(),
            blank_cr: false,
        }
    }

    /// Requests whose path is not the special one are looked up in `paths`
    /// ([`ScannedRequest::found`]).
    pub fn with_paths(mut self, paths: std::sync::Arc<dyn PathTable>) -> RequestScanner {
        self.paths = Some(paths);
        self
    }

    /// Feeds received bytes; calls `on` for each complete request in order.
    /// After an error the connection is to be answered 400 and closed.
    pub fn feed(
        &mut self,
        input: &[u8],
        mut on: impl FnMut(ScannedRequest),
    ) -> Result<(), BadRequest> {
        let mut i = 0;
        while i < input.len() {
            if let Some(mut chunk) = self.chunk {
                let (used, done) = chunk.step(&input[i..])?;
                i += used;
                if done {
                    self.chunk = None;
                    if let Some(r) = self.pending.take() {
                        on(r);
                    }
                } else {
                    self.chunk = Some(chunk);
                }
                continue;
            }
            if self.body_left > 0 {
                let k = self.body_left.min((input.len() - i) as u64);
                self.body_left -= k;
                i += k as usize;
                if self.body_left == 0 {
                    if let Some(r) = self.pending.take() {
                        on(r);
                    }
                }
                continue;
            }
            let rest = &input[i..];
            if std::mem::take(&mut self.blank_cr) {
                if rest[0] == b'\n' {
                    i += 1;
                    continue;
                }
                // Not an empty line: the CR starts a head, as it would have
                // had it come with what follows.
                self.head.push(b'\r');
            }
            if !self.head.is_empty() {
                i += self.split_head(rest, &mut on)?;
                continue;
            }
            // An empty line before a request line is ignored (RFC 9112 §2.2),
            // also when its CR and LF come in different receives.
            if rest.starts_with(b"\r\n") {
                i += 2;
                continue;
            }
            if rest == b"\r" {
                self.blank_cr = true;
                i += 1;
                continue;
            }
            // The remembered head ends at its only blank line, so input
            // starting with it has its first head end at the same place.
            if let Some((&(req, body), len)) = self.memo.recall(rest) {
                i += len;
                self.start(req, body, &mut on);
                continue;
            }
            i += self.new_head(rest, &mut on)?;
        }
        Ok(())
    }

    /// A head not seen before starts at `rest[0]`: parsed in place when it
    /// ends in `rest`, kept otherwise. Returns the bytes used.
    #[inline(always)]
    fn new_head(
        &mut self,
        rest: &[u8],
        on: &mut impl FnMut(ScannedRequest),
    ) -> Result<usize, BadRequest> {
        // The limit is on where the head ends, so only that far is searched:
        // the same verdict as when the head comes in pieces.
        let window = &rest[..rest.len().min(MAX_REQUEST_HEAD)];
        match head_end(window, 0)? {
            Some(end) => {
                let (req, body) = parse_head(&rest[..end], self.special, self.paths.as_deref())?;
                self.memo.remember(&rest[..end], (req, body));
                self.start(req, body, on);
                Ok(end)
            }
            None if rest.len() >= MAX_REQUEST_HEAD => Err(BadRequest::HeadTooLarge),
            None => {
                self.head.extend_from_slice(rest);
                Ok(rest.len())
            }
        }
    }

    /// More of a head split across receives (rare: kept out of the loop).
    /// Returns the bytes used.
    #[inline(never)]
    fn split_head(
        &mut self,
        rest: &[u8],
        on: &mut impl FnMut(ScannedRequest),
    ) -> Result<usize, BadRequest> {
        // INVARIANT: a kept head is shorter than the limit (else refused).
        let old = self.head.len();
        let take = rest.len().min(MAX_REQUEST_HEAD - old);
        self.head.extend_from_slice(&rest[..take]);
        match head_end(&self.head, old)? {
            Some(end) => {
                let (req, body) =
                    parse_head(&self.head[..end], self.special, self.paths.as_deref())?;
                self.head.clear();
                self.start(req, body, on);
                Ok(end - old)
            }
            None if self.head.len() >= MAX_REQUEST_HEAD => Err(BadRequest::HeadTooLarge),
            None => Ok(take),
        }
    }

    fn start(&mut self, req: ScannedRequest, body: u64, on: &mut impl FnMut(ScannedRequest)) {
        // From parse_head, `continue_only` means "Expect: 100-continue was sent".
        let wants_continue = req.continue_only;
        let req = ScannedRequest {
            continue_only: false,
            ..req
        };
        if body == 0 {
            on(req);
        } else {
            if wants_continue {
                on(ScannedRequest {
                    continue_only: true,
                    ..req
                });
            }
            if body == CHUNKED {
                self.chunk = Some(Chunk::START);
            } else {
                self.body_left = body;
            }
            self.pending = Some(req);
        }
    }

    /// Part of a request head has come and not the rest.
    pub fn mid_head(&self) -> bool {
        !self.head.is_empty()
    }

    /// A connection was replaced: forget everything (keeps the buffer's
    /// memory, and the remembered head: a pure function of its bytes).
    pub fn reset(&mut self) {
        self.head.clear();
        self.body_left = 0;
        self.pending = None;
        self.chunk = None;
        self.blank_cr = false;
    }
}

/// Where the head at the start of `b` ends, looking at the LFs at or after
/// `from` (those before were looked at already): `Some` offset just past
/// its `\r\n\r\n`, `None` when it has not ended yet. An empty line ended
/// by a bare LF (LF LF) is refused: such a head would never end, and the
/// client would wait for an answer.
fn head_end(b: &[u8], from: usize) -> Result<Option<usize>, BadRequest> {
    let mut i = from;
    while let Some(p) = b[i..].iter().position(|&c| c == b'\n') {
        let j = i + p; // an LF
        if j >= 1 && b[j - 1] == b'\n' {
            return Err(BadRequest::RequestLine);
        }
        if j >= 3 && b[j - 3..j] == *b"\r\n\r" {
            return Ok(Some(j + 1));
        }
        i = j + 1;
    }
    Ok(None)
}

/// What the header fields of a request said.
#[derive(Default)]
struct Fields {
    /// `Connection` lists held `close` / `keep-alive` (close wins over
    /// keep-alive wherever either stands, RFC 9112 §9.6).
    close: bool,
    keep_alive: bool,
    length: Option<u64>,
    expect_continue: bool,
    /// Host fields.
    hosts: u32,
    /// Transfer-Encoding lines came; the last coding listed is chunked;
    /// how many times chunked was listed.
    te_seen: bool,
    te_last_chunked: bool,
    te_chunked: u32,
}

/// Parses a complete head (ending in CRLFCRLF): the request and its body
/// length (`CHUNKED` for a chunked body).
fn parse_head(
    h: &[u8],
    special: &[u8],
    paths: Option<&dyn PathTable>,
) -> Result<(ScannedRequest, u64), BadRequest> {
    // Drop the final "\n\r\n": every line then ends in '\r'.
    let mut lines = h[..h.len() - 3].split(|&c| c == b'\n');
    let line = lines.next().ok_or(BadRequest::RequestLine)?;
    let line = line.strip_suffix(b"\r").ok_or(BadRequest::RequestLine)?;
    let mut parts = line.split(|&c| c == b' ');
    let method = parts.next().ok_or(BadRequest::RequestLine)?;
    let target = parts.next().ok_or(BadRequest::RequestLine)?;
    let version = parts.next().ok_or(BadRequest::RequestLine)?;
    if parts.next().is_some() || !is_token(method) || target.is_empty() {
        return Err(BadRequest::RequestLine);
    }
    if target.iter().any(|&c| c <= b' ' || c == 0x7f) {
        return Err(BadRequest::RequestLine);
    }
    let http11 = match version {
        b"HTTP/1.1" => true,
        b"HTTP/1.0" => false,
        _ => return Err(BadRequest::Version),
    };
    if method == b"CONNECT" {
        return Err(BadRequest::Connect);
    }
    let mut f = Fields::default();
    for line in lines {
        field_line(line, http11, &mut f)?;
    }
    if f.hosts > 1 || (http11 && f.hosts == 0) {
        return Err(BadRequest::Host);
    }
    // HTTP/1.1 stays open unless told to close; HTTP/1.0 only when asked to.
    let keep_alive = !f.close && (http11 || f.keep_alive);
    if f.te_seen && (f.length.is_some() || !f.te_last_chunked || f.te_chunked > 1) {
        // Both framings at once (the request-smuggling shape), or codings
        // that do not end in chunked, once: no length to read (RFC 9112 §6.3).
        return Err(BadRequest::TransferEncoding);
    }
    let path = origin_path(target);
    let special_path = path == special;
    let request = ScannedRequest {
        keep_alive,
        special_path,
        says_keep_alive: keep_alive && !http11,
        head: method == b"HEAD",
        // HTTP/1.1 only (RFC 9110 §10.1.1: ignore it from 1.0 clients).
        continue_only: f.expect_continue && http11,
        found: paths.filter(|_| !special_path).and_then(|p| p.find(path)),
    };
    let body = if f.te_seen {
        CHUNKED
    } else {
        f.length.unwrap_or(0)
    };
    Ok((request, body))
}

/// One header line (its LF removed, its CR still there) into `f`.
#[inline(always)]
fn field_line(line: &[u8], http11: bool, f: &mut Fields) -> Result<(), BadRequest> {
    let line = line.strip_suffix(b"\r").ok_or(BadRequest::HeaderValue)?;
    let colon = line
        .iter()
        .position(|&c| c == b':')
        .ok_or(BadRequest::HeaderName)?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    if !is_token(name) {
        return Err(BadRequest::HeaderName);
    }
    if !value.iter().all(|&c| is_value_byte(c)) {
        return Err(BadRequest::HeaderValue);
    }
    let value = trim_ows(value);
    // `name` is a token, so `eq_lower` compares it exactly.
    match name.len() {
        14 if eq_lower(name, b"content-length") => {
            if value.is_empty() || value.len() > 15 || !value.iter().all(u8::is_ascii_digit) {
                return Err(BadRequest::ContentLength);
            }
            let v = value
                .iter()
                .fold(0u64, |a, &d| a * 10 + u64::from(d - b'0'));
            if f.length.is_some_and(|l| l != v) {
                return Err(BadRequest::ContentLength);
            }
            f.length = Some(v);
        }
        4 if eq_lower(name, b"host") => f.hosts += 1,
        6 if eq_lower(name, b"expect") => {
            f.expect_continue = value.eq_ignore_ascii_case(b"100-continue");
        }
        17 if eq_lower(name, b"transfer-encoding") => {
            // One list over every Transfer-Encoding line (RFC 9110 §5.3),
            // judged when the head ends; the body is skipped, so codings
            // other than chunked need no decoding.
            if !http11 || value.is_empty() {
                return Err(BadRequest::TransferEncoding);
            }
            for coding in value.split(|&c| c == b',').map(trim_ows) {
                if coding.is_empty() {
                    continue;
                }
                if !is_token(coding) {
                    return Err(BadRequest::TransferEncoding);
                }
                f.te_last_chunked = coding.eq_ignore_ascii_case(b"chunked");
                f.te_chunked += u32::from(f.te_last_chunked);
            }
            f.te_seen = true;
        }
        10 if eq_lower(name, b"connection") => {
            for tok in value.split(|&c| c == b',').map(trim_ows) {
                if tok.eq_ignore_ascii_case(b"close") {
                    f.close = true;
                } else if tok.eq_ignore_ascii_case(b"keep-alive") {
                    f.keep_alive = true;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The path of a request target: origin-form (`/stats?x=1`) or
/// absolute-form (`http://host/stats`, which a server must accept, RFC 9112
/// §3.2.2), without its query.
fn origin_path(target: &[u8]) -> &[u8] {
    let scheme = |p: &[u8]| {
        (target.len() >= p.len() && target[..p.len()].eq_ignore_ascii_case(p))
            .then(|| &target[p.len()..])
    };
    let path = match scheme(b"http://").or_else(|| scheme(b"https://")) {
        // Past the authority: the path starts at the first '/' (none: "/").
        Some(rest) => match rest.iter().position(|&c| c == b'/' || c == b'?') {
            Some(p) if rest[p] == b'/' => &rest[p..],
            _ => &b"/"[..],
        },
        None => target,
    };
    path.split(|&c| c == b'?').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(chunks: &[&[u8]]) -> Result<Vec<ScannedRequest>, BadRequest> {
        let mut s = RequestScanner::new(b"/stats");
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, |r| out.push(r))?;
        }
        Ok(out)
    }

    const PIPE: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /stats?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.0\r\n\r\n";

    #[test]
    fn pipelined_requests_split_at_every_byte_give_the_same_answers() {
        let whole = scan_all(&[PIPE]).unwrap();
        assert_eq!(
            whole,
            vec![
                ScannedRequest {
                    keep_alive: true,
                    special_path: false,
                    says_keep_alive: false,
                    head: false,
                    continue_only: false,
                    found: None,
                },
                ScannedRequest {
                    keep_alive: true,
                    special_path: false,
                    says_keep_alive: false,
                    head: false,
                    continue_only: false,
                    found: None,
                },
                ScannedRequest {
                    keep_alive: false,
                    special_path: true,
                    says_keep_alive: false,
                    head: false,
                    continue_only: false,
                    found: None,
                },
                ScannedRequest {
                    keep_alive: false,
                    special_path: false,
                    says_keep_alive: false,
                    head: false,
                    continue_only: false,
                    found: None,
                },
            ]
        );
        for cut in 0..=PIPE.len() {
            assert_eq!(
                scan_all(&[&PIPE[..cut], &PIPE[cut..]]).unwrap(),
                whole,
                "cut at {cut}"
            );
        }
        let bytes: Vec<&[u8]> = PIPE.chunks(1).collect();
        assert_eq!(scan_all(&bytes).unwrap(), whole);
    }

    #[test]
    fn bad_requests_are_named() {
        assert_eq!(
            scan_all(&[b"garbage\r\n\r\n"]),
            Err(BadRequest::RequestLine)
        );
        assert_eq!(
            scan_all(&[b"GET / HTTP/2.0\r\n\r\n"]),
            Err(BadRequest::Version)
        );
        assert_eq!(
            scan_all(&[b"GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n"]),
            Err(BadRequest::HeaderName)
        );
        assert_eq!(
            scan_all(&[b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n"]),
            Err(BadRequest::ContentLength)
        );
        for te in [
            &b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"[..],
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        ] {
            assert_eq!(scan_all(&[te]), Err(BadRequest::TransferEncoding), "{te:?}");
        }
        for body in [&b"x\r\n"[..], b"5\r\nhelloXX", b"5\nhello\r\n0\r\n\r\n"] {
            let mut req =
                b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            req.extend_from_slice(body);
            assert_eq!(scan_all(&[&req]), Err(BadRequest::Chunk), "{body:?}");
        }
        let big = vec![b'a'; MAX_REQUEST_HEAD + 10];
        assert_eq!(
            scan_all(&[b"GET / HTTP/1.1\r\nHost: a\r\nX: ", &big]),
            Err(BadRequest::HeadTooLarge)
        );
        assert_eq!(scan_all(&[&big]), Err(BadRequest::HeadTooLarge));
    }

    /// A remembered head is recalled only byte for byte: the same request
    /// again means the same, one byte changed (same length) is read anew —
    /// a Content-Length digit (the body to skip), the target, Connection.
    #[test]
    fn a_remembered_head_is_recalled_only_byte_for_byte() {
        let ka = ScannedRequest {
            keep_alive: true,
            special_path: false,
            says_keep_alive: false,
            head: false,
            continue_only: false,
            found: None,
        };
        let mut s = RequestScanner::new(b"/stats");
        let mut out = Vec::new();
        let mut feed = |s: &mut RequestScanner, b: &[u8]| {
            out.clear();
            s.feed(b, |r| out.push(r)).unwrap();
            out.clone()
        };
        let get = b"GET /stats HTTP/1.1\r\nHost: a\r\nConnection: keep\r\n\r\n";
        assert_eq!(
            feed(&mut s, get),
            vec![ScannedRequest {
                special_path: true,
                ..ka
            }]
        );
        assert_eq!(
            feed(&mut s, &get.repeat(3)),
            vec![
                ScannedRequest {
                    special_path: true,
                    ..ka
                };
                3
            ]
        );
        let other = b"GET /stata HTTP/1.1\r\nHost: a\r\nConnection: keep\r\n\r\n";
        assert_eq!(feed(&mut s, other), vec![ka]);
        let close = b"GET /stata HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
        assert_eq!(
            feed(&mut s, close),
            vec![ScannedRequest {
                keep_alive: false,
                ..ka
            }]
        );
        // Content-Length 3 then 4: the second body's fourth byte is not a request.
        let post3 = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
        let post4 = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nabcd";
        assert_eq!(feed(&mut s, post3), vec![ka]);
        assert_eq!(feed(&mut s, post3), vec![ka]);
        assert_eq!(feed(&mut s, post4), vec![ka]);
        assert_eq!(feed(&mut s, post4), vec![ka]);
        s.reset();
        assert_eq!(feed(&mut s, post4), vec![ka], "kept across a reset");
        // The same head cut short waits for the rest.
        assert_eq!(feed(&mut s, &post4[..20]), vec![]);
        assert_eq!(feed(&mut s, &post4[20..]), vec![ka]);
    }

    #[test]
    fn http10_keep_alive_is_honoured() {
        let r = scan_all(&[b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"]).unwrap();
        assert!(r[0].keep_alive && r[0].says_keep_alive);
    }

    #[test]
    fn empty_lines_before_a_request_are_skipped_and_bare_lf_heads_refused() {
        let r = scan_all(&[
            b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        ])
        .unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            scan_all(&[b"GET / HTTP/1.1\n\n"]),
            Err(BadRequest::RequestLine)
        );
        assert_eq!(
            scan_all(&[b"GET / HTTP/1.1\nHost: x", b"\n\n"]),
            Err(BadRequest::RequestLine)
        );
    }

    #[test]
    fn expect_100_continue_is_reported_before_the_body() {
        let mut s = RequestScanner::new(b"/stats");
        let head =
            b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
        let mut got = Vec::new();
        s.feed(head, |r| got.push(r)).unwrap();
        assert_eq!(got.len(), 1);
        assert!(got[0].continue_only);
        got.clear();
        s.feed(b"abc", |r| got.push(r)).unwrap();
        assert_eq!(got.len(), 1);
        assert!(!got[0].continue_only, "then the request itself");
        // No body, or HTTP/1.0: nothing to continue.
        let r = scan_all(&[b"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n"]).unwrap();
        assert!(r.len() == 1 && !r[0].continue_only);
        let r =
            scan_all(&[b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx"])
                .unwrap();
        assert!(r.len() == 1 && !r[0].continue_only);
    }

    #[test]
    fn head_is_told_apart_by_its_method() {
        let r =
            scan_all(&[b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nHEADX / HTTP/1.1\r\nHost: a\r\n\r\n"])
                .unwrap();
        assert_eq!(
            r.iter().map(|r| r.head).collect::<Vec<_>>(),
            [true, false, false]
        );
    }

    #[test]
    fn chunked_bodies_are_skipped_split_at_every_byte() {
        let stream: &[u8] =
            b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
            5;name=v\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n\
            GET /stats HTTP/1.1\r\nHost: a\r\n\r\n\
            POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let whole = scan_all(&[stream]).unwrap();
        assert_eq!(whole.len(), 3, "{whole:?}");
        assert!(whole[1].special_path && !whole[0].special_path && !whole[2].special_path);
        for at in 1..stream.len() {
            let (a, b) = stream.split_at(at);
            assert_eq!(scan_all(&[a, b]).unwrap(), whole, "split at {at}");
        }
    }

    #[test]
    fn the_special_path_is_the_one_given() {
        let mut s = RequestScanner::new(b"/health");
        let mut got = Vec::new();
        s.feed(
            b"GET /health?x HTTP/1.1\r\nHost: a\r\n\r\nGET /stats HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
            |r| got.push(r.special_path),
        )
        .unwrap();
        assert_eq!(got, [true, false, false]);
    }

    #[test]
    fn absolute_form_targets_name_their_path() {
        assert_eq!(origin_path(b"/stats?x=1"), b"/stats");
        assert_eq!(origin_path(b"http://a/stats"), b"/stats");
        assert_eq!(origin_path(b"HTTP://a:8080/stats?x"), b"/stats");
        assert_eq!(origin_path(b"https://a"), b"/");
        assert_eq!(origin_path(b"http://a?q"), b"/");
        assert_eq!(origin_path(b"*"), b"*");
        let r = scan_all(&[b"GET http://a/stats HTTP/1.1\r\nHost: a\r\n\r\n"]).unwrap();
        assert!(r[0].special_path, "{r:?}");
    }

    /// A table that knows `/a` and `/b/c` (numbers 1 and 2), and counts its lookups.
    #[derive(Debug, Default)]
    struct Table(std::sync::atomic::AtomicU32);

    impl PathTable for Table {
        fn find(&self, path: &[u8]) -> Option<u32> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match path {
                b"/a" => Some(1),
                b"/b/c" => Some(2),
                _ => None,
            }
        }
    }

    #[test]
    fn paths_are_looked_up_once_per_distinct_head() {
        let table = std::sync::Arc::new(Table::default());
        let mut s = RequestScanner::new(b"/stats").with_paths(table.clone());
        let mut found = Vec::new();
        let input = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /a HTTP/1.1\r\nHost: a\r\n\r\n\
                      HEAD http://h/b/c?x=1 HTTP/1.1\r\nHost: a\r\n\r\nGET /stats HTTP/1.1\r\nHost: a\r\n\r\n\
                      GET /nope HTTP/1.1\r\nHost: a\r\n\r\n";
        s.feed(input, |r| found.push((r.found, r.head, r.special_path)))
            .unwrap();
        assert_eq!(
            found,
            [
                (Some(1), false, false),
                (Some(1), false, false),
                (Some(2), true, false),
                (None, false, true),
                (None, false, false),
            ]
        );
        // The second `/a` came from the remembered head; /stats is not looked up.
        assert_eq!(table.0.load(std::sync::atomic::Ordering::Relaxed), 3);
    }
}
