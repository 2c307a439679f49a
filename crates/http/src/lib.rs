//! Sans-IO HTTP/1.1 codec for xload: the client's side, and the request
//! scanner of its embedded responder; [`h2`] is the HTTP/2 client codec.
//!
//! Four pieces, none of which touches a socket or a clock:
//!
//! - [`parse_url`]: the `http://host[:port]/path?query` target, parsed once.
//! - [`RequestTemplate`]: a request validated and rendered to bytes once
//!   (and a pipelined batch of them), so the hot loop only copies bytes.
//! - [`ResponseParser`]: an incremental response parser that accepts input
//!   split at any byte and never asks the caller to keep unconsumed bytes,
//!   because the engine returns its io_uring provided buffers to the kernel
//!   right after parsing. Main design choice: a byte-level state machine is the
//!   reference (every state can stop and resume at any byte; nothing is
//!   buffered or copied; body bytes are counted), with fast paths for a head
//!   that arrived whole (SIMD line-end masks) and for complete ordinary
//!   lines. See [`response`] for the details and for how errors stay independent
//!   of the split points.
//! - [`RequestScanner`]: the server side, for `xload serve`: finds request
//!   boundaries in a byte stream split anywhere and says what to answer;
//!   bodies are skipped. It shares the token grammar and the memory of the
//!   last head with the response parser.
//!
//! The same code is driven by the io_uring and epoll loops, unit-tested on
//! byte slices and fuzzed (`fuzz/`).
//!
//! ```
//! use xload_http::{parse_url, Limits, Parse, RequestSpec, RequestTemplate, ResponseParser};
//!
//! let url = parse_url("http://127.0.0.1:8080/index.html").unwrap();
//! let request = RequestTemplate::new(&RequestSpec { method: "GET", url: &url, headers: &[], body: b"" }).unwrap();
//! assert!(request.bytes().starts_with(b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
//!
//! // Bytes arrive in whatever pieces the socket gives; nothing needs to be kept.
//! let mut parser = ResponseParser::new(Limits::default(), request.is_head());
//! let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 404 Not Found\r\nContent-Le";
//! let mut statuses = Vec::new();
//! for mut piece in [&wire[..20], &wire[20..]] {
//!     while let Parse::Complete { consumed, response } = parser.parse(piece).unwrap() {
//!         statuses.push(response.status);
//!         piece = &piece[consumed..];
//!     }
//! }
//! assert_eq!(statuses, [200]);
//! assert!(parser.in_progress()); // the 404 is still arriving
//! ```

pub mod h2;
pub mod request;
pub mod response;
pub mod server;
pub mod url;

mod grammar;
mod memo;

pub use request::{parse_header_arg, RequestError, RequestSpec, RequestTemplate, USER_AGENT};
/// The response parser's module under its former name.
pub use response as parse;
pub use response::{Limits, Parse, ParseError, Response, ResponseParser, Stage};
pub use server::{BadRequest, PathTable, RequestScanner, ScannedRequest, MAX_REQUEST_HEAD};
pub use url::{parse_url, Url, UrlError};
