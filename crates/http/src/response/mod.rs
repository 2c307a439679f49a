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
//!
//! A head identical byte for byte to the last one read whole is recalled
//! rather than read again (see `crate::memo`).
//!
//! Files: `state.rs` holds the parser and its state machine, `fast.rs` the
//! fast paths, `values.rs` the interpreted fields (`Content-Length`,
//! `Transfer-Encoding`, `Connection`), `error.rs` the error kinds.

mod error;
mod fast;
mod state;
mod values;

pub use error::{ParseError, Stage};
pub use state::{Limits, Parse, Response, ResponseParser};

#[cfg(test)]
mod tests;
