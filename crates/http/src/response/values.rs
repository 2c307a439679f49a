//! The header fields the parser interprets (`Content-Length`,
//! `Transfer-Encoding`, `Connection`): recognizing their names, and reading
//! their values from pieces of any size into [`Framing`].

use super::error::ParseError;
use crate::grammar::eq_lower;

/// Header fields whose value the parser interprets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Field {
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
pub(super) fn field_of(name: &[u8]) -> Field {
    match name.len() {
        10 if eq_lower(name, b"connection") => Field::Connection,
        14 if eq_lower(name, b"content-length") => Field::ContentLength,
        17 if eq_lower(name, b"transfer-encoding") => Field::TransferEncoding,
        _ => Field::Other,
    }
}

/// Matches a field name fed in pieces against `FIELD_NAMES`.
#[derive(Clone, Copy, Debug)]
pub(super) struct NameMatch {
    len: usize,
    alive: u8,
}

impl NameMatch {
    pub(super) const START: NameMatch = NameMatch {
        len: 0,
        alive: 0b111,
    };

    pub(super) fn feed(&mut self, piece: &[u8]) {
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

    pub(super) fn field(&self) -> Field {
        FIELD_NAMES
            .iter()
            .enumerate()
            .find(|(k, (name, _))| self.alive & (1 << k) != 0 && name.len() == self.len)
            .map_or(Field::Other, |(_, (_, f))| *f)
    }
}

/// The largest Content-Length or chunk size taken, 2^60 - 1 bytes (an
/// exbibyte, 15 hex digits): no body that long arrives within a run, so a
/// larger one is an error at once rather than a request timeout later, and
/// a response's byte counts cannot overflow.
pub(super) const MAX_LENGTH: u64 = (1 << 60) - 1;

/// Tokens looked for in comma-separated values, lower case.
const CONNECTION_TOKENS: [&[u8]; 2] = [b"close", b"keep-alive"];
const CODING_TOKENS: [&[u8]; 1] = [b"chunked"];

/// What the interpreted fields said so far.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Framing {
    pub(super) content_length: Option<u64>,
    pub(super) te_seen: bool,
    pub(super) te_last_chunked: bool,
    pub(super) te_chunked_count: u32,
    /// Transfer codings listed (empty list elements aside).
    pub(super) te_codings: u32,
    /// A Transfer-Encoding element that is no token (whitespace inside).
    pub(super) te_malformed: bool,
    pub(super) close: bool,
    pub(super) keep_alive: bool,
}

impl Framing {
    /// Records a framing field whose value has its usual plain form; false
    /// for anything else (repeated Content-Length included), which the state
    /// machine handles.
    #[inline(always)]
    pub(super) fn plain_value(&mut self, field: Field, value: &[u8]) -> bool {
        match field {
            Field::ContentLength => {
                if value.is_empty() || value.len() > 19 || self.content_length.is_some() {
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
                if n > MAX_LENGTH {
                    return false;
                }
                self.content_length = Some(n);
            }
            Field::Connection if eq_lower(value, b"keep-alive") => self.keep_alive = true,
            Field::Connection if eq_lower(value, b"close") => self.close = true,
            Field::TransferEncoding if eq_lower(value, b"chunked") && !self.te_seen => {
                self.te_seen = true;
                self.te_last_chunked = true;
                self.te_chunked_count = 1;
                self.te_codings = 1;
            }
            _ => return false,
        }
        true
    }

    /// A whole interpreted value: the common exact values directly, the rest
    /// through the same accumulators as the state machine.
    #[inline(always)]
    pub(super) fn whole_value(&mut self, field: Field, value: &[u8]) -> Result<(), ParseError> {
        match field {
            Field::Connection if eq_lower(value, b"keep-alive") => self.keep_alive = true,
            Field::Connection if eq_lower(value, b"close") => self.close = true,
            Field::TransferEncoding if eq_lower(value, b"chunked") => {
                self.te_seen = true;
                self.te_last_chunked = true;
                self.te_chunked_count += 1;
                self.te_codings += 1;
            }
            _ => {
                let mut v = FieldValue::begin(field);
                v.feed(value, self)?;
                v.end(self)?;
            }
        }
        Ok(())
    }
}

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

/// Content-Length value accumulator.
#[derive(Clone, Copy, Debug)]
struct Decimal {
    value: u64,
    digits: u32,
    trailing_ws: bool,
}

impl Decimal {
    const START: Decimal = Decimal {
        value: 0,
        digits: 0,
        trailing_ws: false,
    };
}

/// The value of the field line being read, fed in pieces (no CR, LF or
/// other control byte except HTAB); what it says goes into a [`Framing`].
#[derive(Clone, Copy, Debug)]
pub(super) struct FieldValue {
    field: Field,
    decimal: Decimal,
    elem: ListElem,
}

impl FieldValue {
    /// The value of a field the parser does not interpret.
    pub(super) const OTHER: FieldValue = FieldValue::begin(Field::Other);

    pub(super) const fn begin(field: Field) -> FieldValue {
        FieldValue {
            field,
            decimal: Decimal::START,
            elem: ListElem::START,
        }
    }

    /// A piece of the value.
    #[inline]
    pub(super) fn feed(&mut self, piece: &[u8], framing: &mut Framing) -> Result<(), ParseError> {
        match self.field {
            Field::Other => Ok(()),
            Field::ContentLength => {
                let d = &mut self.decimal;
                for &c in piece {
                    match c {
                        b'0'..=b'9' if !d.trailing_ws => {
                            // Below MAX_LENGTH before, so no overflow here.
                            d.value = d.value * 10 + u64::from(c - b'0');
                            if d.value > MAX_LENGTH {
                                return Err(ParseError::BadContentLength);
                            }
                            d.digits += 1;
                        }
                        b' ' | b'\t' if d.digits > 0 => d.trailing_ws = true,
                        _ => return Err(ParseError::BadContentLength),
                    }
                }
                Ok(())
            }
            Field::Connection => {
                self.feed_list(piece, &CONNECTION_TOKENS, framing);
                Ok(())
            }
            Field::TransferEncoding => {
                self.feed_list(piece, &CODING_TOKENS, framing);
                Ok(())
            }
        }
    }

    fn feed_list(&mut self, piece: &[u8], tokens: &[&[u8]], framing: &mut Framing) {
        for &c in piece {
            match c {
                b',' => self.end_elem(tokens, framing),
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
    fn end_elem(&mut self, tokens: &[&[u8]], framing: &mut Framing) {
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
                Some(0) => framing.close = true,
                Some(1) => framing.keep_alive = true,
                _ => {}
            },
            Field::TransferEncoding => {
                framing.te_last_chunked = matched == Some(0);
                if matched == Some(0) {
                    framing.te_chunked_count += 1;
                }
                framing.te_codings += 1;
                framing.te_malformed |= e.broken;
            }
            Field::Other | Field::ContentLength => {}
        }
    }

    /// The field line ended: what the value said goes into `framing`.
    #[inline]
    pub(super) fn end(&mut self, framing: &mut Framing) -> Result<(), ParseError> {
        match self.field {
            Field::Other => {}
            Field::ContentLength => {
                if self.decimal.digits == 0 {
                    return Err(ParseError::BadContentLength);
                }
                let n = self.decimal.value;
                if framing.content_length.is_some_and(|m| m != n) {
                    return Err(ParseError::ConflictingLength);
                }
                framing.content_length = Some(n);
            }
            Field::Connection => self.end_elem(&CONNECTION_TOKENS, framing),
            Field::TransferEncoding => {
                framing.te_seen = true;
                self.end_elem(&CODING_TOKENS, framing);
            }
        }
        self.field = Field::Other;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a value says, fed whole through `whole_value` and fed through
    /// the accumulators in pieces of every size.
    fn read(field: Field, value: &[u8]) -> Result<Framing, ParseError> {
        let mut whole = Framing::default();
        let want = whole.whole_value(field, value).map(|()| whole);
        for size in 1..=value.len().max(1) {
            let mut f = Framing::default();
            let mut v = FieldValue::begin(field);
            let got = value
                .chunks(size)
                .try_for_each(|piece| v.feed(piece, &mut f))
                .and_then(|()| v.end(&mut f))
                .map(|()| f);
            assert_eq!(
                format!("{got:?}"),
                format!("{want:?}"),
                "{value:?} in pieces of {size}"
            );
        }
        want
    }

    #[test]
    fn name_match_in_pieces_agrees_with_field_of() {
        for name in [
            &b"Content-Length"[..],
            b"content-lengtH",
            b"CONNECTION",
            b"Transfer-Encoding",
            b"Content-Lengths",
            b"Content-Lengt",
            b"Connectio",
            b"X-Connection",
            b"Server",
        ] {
            for size in 1..=name.len() {
                let mut m = NameMatch::START;
                name.chunks(size).for_each(|p| m.feed(p));
                assert_eq!(m.field(), field_of(name), "{name:?} in pieces of {size}");
            }
        }
        assert_eq!(field_of(b"Content-Length"), Field::ContentLength);
        assert_eq!(field_of(b"Content_Length"), Field::Other);
    }

    #[test]
    fn values_say_the_same_in_any_pieces() {
        let cl = read(Field::ContentLength, b"0012 \t").unwrap();
        assert_eq!(cl.content_length, Some(12));
        assert_eq!(
            read(Field::ContentLength, b"1 2").unwrap_err(),
            ParseError::BadContentLength
        );
        assert_eq!(
            read(Field::ContentLength, b"").unwrap_err(),
            ParseError::BadContentLength
        );
        assert_eq!(
            read(Field::ContentLength, b"18446744073709551616").unwrap_err(),
            ParseError::BadContentLength
        );
        let c = read(Field::Connection, b"Upgrade, CLOSE ,, keep-alive").unwrap();
        assert!(c.close && c.keep_alive);
        let c = read(Field::Connection, b"clo se, closed").unwrap();
        assert!(!c.close && !c.keep_alive);
        let te = read(Field::TransferEncoding, b"gzip, Chunked").unwrap();
        assert!(te.te_seen && te.te_last_chunked && te.te_chunked_count == 1);
        let te = read(Field::TransferEncoding, b"chunked, gzip").unwrap();
        assert!(te.te_seen && !te.te_last_chunked && te.te_chunked_count == 1);
    }

    #[test]
    fn plain_value_takes_only_the_usual_forms() {
        let mut f = Framing::default();
        assert!(f.plain_value(Field::ContentLength, b"612"));
        assert_eq!(f.content_length, Some(612));
        assert!(!f.plain_value(Field::ContentLength, b"612"), "repeated");
        let mut f = Framing::default();
        assert!(!f.plain_value(Field::ContentLength, b"61 "));
        assert!(!f.plain_value(Field::ContentLength, b"12345678901234567890"));
        assert!(f.plain_value(Field::Connection, b"Keep-Alive"));
        assert!(!f.plain_value(Field::Connection, b"keep-alive, close"));
        assert!(f.plain_value(Field::TransferEncoding, b"chunked"));
        assert!(
            !f.plain_value(Field::TransferEncoding, b"chunked"),
            "repeated"
        );
        assert!(f.keep_alive && f.te_seen && f.te_last_chunked);
    }
}
