//! Fast paths over complete input: a whole head, one ordinary line, one plain
//! chunk-size line. Each accepts only input it reads exactly as the state
//! machine would and returns what it read; `None` (or [`Line::Slow`]) hands
//! the bytes to the state machine, which raises every error.

use super::values::{field_of, Field, Framing};
use crate::grammar::{find_control, find_name_end, hex_value, is_name_token, Controls};

/// What a head read whole says (and says again when recalled from memory).
#[derive(Clone, Copy, Debug)]
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) http10: bool,
    pub(super) framing: Framing,
    /// Field lines in the head.
    pub(super) fields: usize,
}

/// A whole ordinary head at the start of `b`: status line, fields and the
/// empty line, within `max_bytes` and `max_fields`, no byte needing care,
/// framing fields with their plain values. Returns what it says and its length.
///
/// Line ends are found from one pass of 16-byte control-byte masks, so the
/// walk from one line to the next does not wait on the name and value checks.
#[inline(always)]
pub(super) fn head(b: &[u8], max_bytes: usize, max_fields: usize) -> Option<(Head, usize)> {
    let b = &b[..b.len().min(max_bytes)];
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
    let (status, http10) = status_line_content(&b[..status_end])?;
    let mut framing = Framing::default();
    let mut fields = 0;
    loop {
        let (end, next) = line_end(start)?;
        if end == start {
            let head = Head {
                status,
                http10,
                framing,
                fields,
            };
            return Some((head, next));
        }
        fields += 1;
        if fields > max_fields {
            return None;
        }
        let name_end = find_name_end(b, start);
        if name_end == start || b[name_end] != b':' || !is_name_token(&b[start..], name_end - start)
        {
            return None;
        }
        let field = field_of(&b[start..name_end]);
        if field != Field::Other {
            let value_start = name_end + 1 + usize::from(b.get(name_end + 1) == Some(&b' '));
            if !framing.plain_value(field, b.get(value_start..end)?) {
                return None;
            }
        }
        start = next;
    }
}

/// `HTTP/1.x NNN[ reason]` (the line without its end, known to hold no control
/// byte): status and whether it is HTTP/1.0.
#[inline(always)]
fn status_line_content(line: &[u8]) -> Option<(u16, bool)> {
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

/// `HTTP/1.x NNN reason\r\n` all in `b`, with no byte needing care: its
/// length, the status and whether it is HTTP/1.0.
#[inline(always)]
pub(super) fn status_line(b: &[u8]) -> Option<(usize, u16, bool)> {
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
    let status = u16::from(d0) * 100 + u16::from(d1) * 10 + u16::from(d2);
    Some((len, status, http10))
}

/// Fast-path verdict on one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// A field line of `len` bytes: its name is `b[..name_len]`, its value
    /// `b[value_start..value_end]` (one SP after the colon skipped).
    Field {
        len: usize,
        name_len: usize,
        value_start: usize,
        value_end: usize,
    },
    /// The empty line (this many bytes) ends the head.
    End(usize),
    /// Not an ordinary complete line: the state machine reads it.
    Slow,
}

/// One ordinary field line (or the empty line) all at the start of `b`.
#[inline(always)]
pub(super) fn field_line(b: &[u8]) -> Line {
    match b {
        [b'\r', b'\n', ..] => return Line::End(2),
        [b'\n', ..] => return Line::End(1),
        _ => {}
    }
    let name_len = find_name_end(b, 0);
    if name_len == 0 || b.get(name_len) != Some(&b':') || !is_name_token(b, name_len) {
        return Line::Slow;
    }
    let mut value_start = name_len + 1;
    if b.get(value_start) == Some(&b' ') {
        value_start += 1;
    }
    let value_end = find_control(b, value_start);
    match line_end(b, value_end) {
        Some(len) => Line::Field {
            len,
            name_len,
            value_start,
            value_end,
        },
        None => Line::Slow,
    }
}

/// A whole `<hex>\r\n` chunk-size line (at most 15 digits, no extension, at
/// most `max_bytes` long) at the start of `b`: its length and the size.
#[inline(always)]
pub(super) fn chunk_line(b: &[u8], max_bytes: usize) -> Option<(usize, u64)> {
    let digits = b
        .iter()
        .take(16)
        .take_while(|c| c.is_ascii_hexdigit())
        .count();
    if digits == 0 || digits == 16 || b.get(digits..digits + 2) != Some(b"\r\n") {
        return None;
    }
    let len = digits + 2;
    if len > max_bytes {
        return None;
    }
    let size = b[..digits]
        .iter()
        .fold(0, |n, &c| n << 4 | u64::from(hex_value(c)));
    Some((len, size))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_reads_an_ordinary_head_and_leaves_anything_else() {
        let wire = b"HTTP/1.1 404 Not Found\r\nServer: x\r\nContent-Length: 12\r\nConnection: close\r\n\r\nbody";
        let (h, len) = head(wire, 1024, 8).expect("ordinary head");
        assert_eq!(len, wire.len() - 4);
        assert_eq!((h.status, h.http10, h.fields), (404, false, 3));
        assert_eq!(h.framing.content_length, Some(12));
        assert!(h.framing.close && !h.framing.keep_alive);
        // Limits, a split head, a tab in a value, a repeated Content-Length.
        assert!(head(wire, len - 1, 8).is_none());
        assert!(head(wire, 1024, 2).is_none());
        assert!(head(&wire[..len - 1], 1024, 8).is_none());
        assert!(head(b"HTTP/1.1 200 OK\r\nA:\tb\r\n\r\n", 1024, 8).is_none());
        assert!(head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            1024,
            8
        )
        .is_none());
    }

    #[test]
    fn status_line_needs_a_whole_plain_line() {
        assert_eq!(status_line(b"HTTP/1.0 200 OK\r\nX"), Some((17, 200, true)));
        assert_eq!(status_line(b"HTTP/1.1 204\nX"), Some((13, 204, false)));
        assert_eq!(status_line(b"HTTP/1.1 200 OK\r"), None);
        assert_eq!(status_line(b"HTTP/1.1 200 O\x01K\r\n"), None);
        assert_eq!(status_line(b"HTTP/1.1 099 OK\r\n"), None);
    }

    #[test]
    fn field_line_bounds_name_and_value() {
        assert_eq!(
            field_line(b"Name: value\r\nnext"),
            Line::Field {
                len: 13,
                name_len: 4,
                value_start: 6,
                value_end: 11
            }
        );
        assert_eq!(field_line(b"\r\nx"), Line::End(2));
        assert_eq!(field_line(b"\nx"), Line::End(1));
        assert_eq!(field_line(b"Name: value"), Line::Slow, "no line end");
        assert_eq!(field_line(b"Na me: v\r\n"), Line::Slow);
        assert_eq!(field_line(b" x: v\r\n"), Line::Slow);
    }

    #[test]
    fn chunk_line_reads_plain_sizes_only() {
        assert_eq!(chunk_line(b"1aF\r\nxyz", 64), Some((5, 0x1af)));
        assert_eq!(
            chunk_line(b"fffffffffffffff\r\n", 64),
            Some((17, (1 << 60) - 1))
        );
        assert_eq!(chunk_line(b"ffffffffffffffff\r\n", 64), None, "16 digits");
        assert_eq!(chunk_line(b"1;ext\r\n", 64), None);
        assert_eq!(chunk_line(b"1\n", 64), None);
        assert_eq!(chunk_line(b"1\r\n", 2), None, "over the limit");
    }
}
