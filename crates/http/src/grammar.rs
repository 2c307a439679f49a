//! Byte classes of RFC 9110/9112 shared by the request builder and the parser.

/// `tchar` of RFC 9110 §5.6.2: the bytes of tokens (methods, header names, codings).
pub(crate) static TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    t
};

/// One `tchar`.
#[inline(always)]
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// A non-empty run of `tchar`.
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// A byte allowed inside a field value, reason phrase or chunk extension:
/// HTAB, SP, VCHAR, obs-text. (CR and LF end the line; other controls are errors.)
#[inline(always)]
pub(crate) fn is_value_byte(b: u8) -> bool {
    (b >= 0x20 && b != 0x7f) || b == b'\t'
}

/// Index of the first byte at or after `i` that is a control byte (< 0x20,
/// HTAB included) or DEL, or `b.len()` when there is none. Reads 8 bytes at a
/// time: the steady-state parser spends most of its time here.
#[inline(always)]
pub(crate) fn find_control(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while i + 8 <= b.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        let x = u64::from_le_bytes(w);
        // A byte below 0x20 leaves its high bit set in (x - 0x20) & !x; a DEL is a zero byte in x ^ 0x7f.
        // Borrows only produce false positives above a true one, so the lowest flag is exact.
        let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let y = x ^ (ONES * 0x7f);
        let del = y.wrapping_sub(ONES) & !y & HIGH;
        let flags = below_space | del;
        if flags != 0 {
            return i + (flags.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() {
        let c = b[i];
        if c < 0x20 || c == 0x7f {
            return i;
        }
        i += 1;
    }
    i
}

/// `a` equals the lower-case `lower` ignoring ASCII case. Exact for tokens:
/// `lower` holds only lower-case letters and `-`, and no tchar other than a
/// letter's upper case maps onto those with `| 0x20`.
#[inline(always)]
pub(crate) fn eq_lower(a: &[u8], lower: &[u8]) -> bool {
    a.len() == lower.len() && a.iter().zip(lower).all(|(&x, &y)| x | 0x20 == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_control_agrees_with_bytewise_scan_on_every_byte_and_offset() {
        for special in 0u8..=255 {
            for at in 0..20 {
                let mut v = vec![b'a'; 24];
                v[at] = special;
                let want = v
                    .iter()
                    .position(|&c| c < 0x20 || c == 0x7f)
                    .unwrap_or(v.len());
                assert_eq!(find_control(&v, 0), want, "byte {special:#x} at {at}");
                // Following bytes that are themselves special must not hide the first one.
                v[at + 1] = 0;
                let want = v
                    .iter()
                    .position(|&c| c < 0x20 || c == 0x7f)
                    .unwrap_or(v.len());
                assert_eq!(
                    find_control(&v, 0),
                    want,
                    "byte {special:#x} at {at} then NUL"
                );
            }
        }
    }

    #[test]
    fn tchar_set_matches_rfc_9110() {
        let listed: Vec<u8> = (0u8..=255).filter(|&b| is_tchar(b)).collect();
        let mut want: Vec<u8> = b"!#$%&'*+-.^_`|~".to_vec();
        want.extend(b'0'..=b'9');
        want.extend(b'A'..=b'Z');
        want.extend(b'a'..=b'z');
        want.sort();
        assert_eq!(listed, want);
    }

    #[test]
    fn eq_lower_ignores_case_only_for_letters() {
        assert!(eq_lower(b"Content-LENGTH", b"content-length"));
        assert!(!eq_lower(b"content_length", b"content-length"));
        assert!(!eq_lower(b"content-lengt", b"content-length"));
        // No tchar other than '-' ORs to '-'.
        assert!((0u8..=255)
            .filter(|&b| is_tchar(b) && b | 0x20 == b'-')
            .eq([b'-']));
    }
}
