//! Sans-IO HTTP/2 client codec (RFC 9113, HPACK RFC 7541), beside the
//! HTTP/1.1 one and in the same style: bytes in, events and bytes out, no
//! socket, no clock, no allocation per request once buffers have grown.
//!
//! - [`H2Request`]: a request's HPACK header block rendered once (static
//!   table indices and plain literals, nothing indexed), so opening a stream
//!   only copies bytes; [`H2Request::render_http1`] makes the same block of
//!   a request rendered per send as HTTP/1.1 bytes, reusing its buffers.
//! - [`Connection`]: one connection's client state machine: preface and
//!   SETTINGS (the server's MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE,
//!   MAX_FRAME_SIZE honoured), streams up to a limit, HEADERS/CONTINUATION,
//!   DATA counted and handed over as [`Event::Data`], never kept, flow control on the connection and each
//!   stream in both directions, PING, RST_STREAM, GOAWAY (streams above the
//!   last-stream-id come back as [`Event::Refused`] for a retry), padding,
//!   unknown frames skipped. Every connection error is an [`H2Error`]
//!   naming the RFC's rule, with the GOAWAY already written; a malformed
//!   response resets its stream only ([`Malformed`]).
//! - [`hpack::Decoder`]: Huffman, the dynamic table and size updates.
//!
//! ```
//! use xload_http::h2::{Config, Connection, Event, H2Request};
//! use xload_http::{parse_url, RequestSpec};
//!
//! let url = parse_url("http://127.0.0.1:8080/").unwrap();
//! let reqs = [H2Request::new(&RequestSpec { method: "GET", url: &url, headers: &[], body: b"" }).unwrap()];
//! let mut conn = Connection::<u64>::new(Config { max_streams: 10, ..Config::default() });
//! let mut out = Vec::new();
//! conn.preface(&mut out);
//! assert!(out.starts_with(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
//!
//! // The server's SETTINGS (empty) lets streams open.
//! out.clear();
//! conn.recv(&[0, 0, 0, 4, 0, 0, 0, 0, 0], &reqs, &mut out, &mut |_| {}).unwrap();
//! assert!(conn.can_open());
//! let id = conn.open(&reqs, 0, 7, &mut out);
//! assert_eq!(id, 1);
//!
//! // HEADERS with END_STREAM | END_HEADERS: `:status: 200` is static index 8.
//! let mut done = Vec::new();
//! conn.recv(&[0, 0, 1, 1, 5, 0, 0, 0, 1, 0x88], &reqs, &mut out, &mut |e| {
//!     if let Event::Response { tag, status, .. } = e { done.push((tag, status)) }
//! }).unwrap();
//! assert_eq!(done, [(7, 200)]);
//! ```

mod conn;
pub mod frame;
pub mod hpack;
mod server;
#[cfg(test)]
mod server_tests;
mod tables;
#[cfg(test)]
mod tests;

pub use conn::{Config, Connection, Event, H2Error, H2Request, Malformed, PeerSettings};
pub use frame::{ErrorCode, FrameKind};
pub use hpack::HpackError;
pub use server::{H2Response, ServerConfig, ServerConnection, ServerEvent};
