//! Frame layout (RFC 9113 §4, §6): types, flags, settings, error codes and
//! the writers the client uses. Readers live in the connection state machine.

use std::fmt;

/// The connection preface a client sends first (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Size of a frame header.
pub const FRAME_HEADER_LEN: usize = 9;

/// The default and smallest SETTINGS_MAX_FRAME_SIZE.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE.
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The initial flow-control window of the connection and of each stream.
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest flow-control window.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// A frame type (RFC 9113 §6); unknown types are carried so they can be
/// named and skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameKind(pub u8);

impl FrameKind {
    pub const DATA: FrameKind = FrameKind(0);
    pub const HEADERS: FrameKind = FrameKind(1);
    pub const PRIORITY: FrameKind = FrameKind(2);
    pub const RST_STREAM: FrameKind = FrameKind(3);
    pub const SETTINGS: FrameKind = FrameKind(4);
    pub const PUSH_PROMISE: FrameKind = FrameKind(5);
    pub const PING: FrameKind = FrameKind(6);
    pub const GOAWAY: FrameKind = FrameKind(7);
    pub const WINDOW_UPDATE: FrameKind = FrameKind(8);
    pub const CONTINUATION: FrameKind = FrameKind(9);
}

impl fmt::Display for FrameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            0 => "DATA",
            1 => "HEADERS",
            2 => "PRIORITY",
            3 => "RST_STREAM",
            4 => "SETTINGS",
            5 => "PUSH_PROMISE",
            6 => "PING",
            7 => "GOAWAY",
            8 => "WINDOW_UPDATE",
            9 => "CONTINUATION",
            t => return write!(f, "frame type {t:#04x}"),
        };
        f.write_str(name)
    }
}

/// Frame flags.
pub mod flags {
    /// DATA, HEADERS: the last frame the sender sends on the stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the header block ends in this frame.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: a pad length byte leads the payload.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: a 5-byte priority block follows the pad length.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// An HTTP/2 error code (RFC 9113 §7), as carried by RST_STREAM and GOAWAY.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    pub const NO_ERROR: ErrorCode = ErrorCode(0x0);
    pub const PROTOCOL_ERROR: ErrorCode = ErrorCode(0x1);
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(0x2);
    pub const FLOW_CONTROL_ERROR: ErrorCode = ErrorCode(0x3);
    pub const SETTINGS_TIMEOUT: ErrorCode = ErrorCode(0x4);
    pub const STREAM_CLOSED: ErrorCode = ErrorCode(0x5);
    pub const FRAME_SIZE_ERROR: ErrorCode = ErrorCode(0x6);
    pub const REFUSED_STREAM: ErrorCode = ErrorCode(0x7);
    pub const CANCEL: ErrorCode = ErrorCode(0x8);
    pub const COMPRESSION_ERROR: ErrorCode = ErrorCode(0x9);
    pub const CONNECT_ERROR: ErrorCode = ErrorCode(0xa);
    pub const ENHANCE_YOUR_CALM: ErrorCode = ErrorCode(0xb);
    pub const INADEQUATE_SECURITY: ErrorCode = ErrorCode(0xc);
    pub const HTTP_1_1_REQUIRED: ErrorCode = ErrorCode(0xd);

    /// The RFC's name, or `None` for an unknown code.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "error code {:#x}", self.0),
        }
    }
}

/// A parsed frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub len: u32,
    pub kind: FrameKind,
    pub flags: u8,
    pub stream: u32,
}

impl FrameHeader {
    /// Reads the 9-byte header (the reserved bit of the stream id is ignored).
    pub fn parse(b: &[u8; FRAME_HEADER_LEN]) -> Self {
        FrameHeader {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: FrameKind(b[3]),
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }
}

/// Appends a frame header.
pub fn write_header(out: &mut Vec<u8>, len: usize, kind: FrameKind, flags: u8, stream: u32) {
    debug_assert!(len <= MAX_MAX_FRAME_SIZE as usize);
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind.0, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// Appends a SETTINGS frame with the given `(id, value)` pairs.
pub fn write_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    write_header(out, settings.len() * 6, FrameKind::SETTINGS, 0, 0);
    for &(id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends an empty SETTINGS frame with ACK.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_header(out, 0, FrameKind::SETTINGS, flags::ACK, 0);
}

/// Appends a WINDOW_UPDATE.
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_header(out, 4, FrameKind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// Appends a PING (an ACK echoes the peer's data).
pub fn write_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    write_header(out, 8, FrameKind::PING, if ack { flags::ACK } else { 0 }, 0);
    out.extend_from_slice(&data);
}

/// Appends an RST_STREAM.
pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    write_header(out, 4, FrameKind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.0.to_be_bytes());
}

/// Appends a GOAWAY without debug data.
pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode) {
    write_header(out, 8, FrameKind::GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&code.0.to_be_bytes());
}
