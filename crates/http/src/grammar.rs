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

/// `v` without the optional whitespace (SP, HTAB) around it (RFC 9110 §5.6.3).
pub(crate) fn trim_ows(v: &[u8]) -> &[u8] {
    let s = v
        .iter()
        .position(|&c| c != b' ' && c != b'\t')
        .unwrap_or(v.len());
    let e = v
        .iter()
        .rposition(|&c| c != b' ' && c != b'\t')
        .map_or(s, |p| p + 1);
    &v[s..e]
}

/// A byte allowed inside a field value, reason phrase or chunk extension:
/// HTAB, SP, VCHAR, obs-text. (CR and LF end the line; other controls are errors.)
#[inline(always)]
pub(crate) fn is_value_byte(b: u8) -> bool {
    (b >= 0x20 && b != 0x7f) || b == b'\t'
}

/// Value of a hex digit (the caller checked `is_ascii_hexdigit`).
#[inline(always)]
pub(crate) fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        _ => (c | 0x20) - b'a' + 10,
    }
}

/// Index of the first byte at or after `i` that is a control byte (< 0x20,
/// HTAB included) or DEL, or `b.len()` when there is none: the end of a
/// header value or reason phrase. The steady-state parser spends most of its
/// time here, so it reads 16 bytes at a time where SSE2 exists.
#[inline(always)]
pub(crate) fn find_control(b: &[u8], i: usize) -> usize {
    match simd::find_control_16(b, i) {
        Ok(found) => found,
        Err(tail) => find_control_swar(b, tail),
    }
}

/// Index of the first `:`, space or control byte at or after `i` (or
/// `b.len()`): the end of a header field name in an ordinary line.
#[inline(always)]
pub(crate) fn find_name_end(b: &[u8], i: usize) -> usize {
    match simd::find_name_end_16(b, i) {
        Ok(found) => found,
        Err(tail) => find_name_end_swar(b, tail),
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The 8-byte word of `b` at `i` (caller checks `i + 8 <= b.len()`).
#[inline(always)]
fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

/// High bit set in each byte of `x` that is zero. Borrows only produce false
/// positives above a true zero, so the lowest flag is exact.
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGH
}

/// High bit set in each byte of `x` below `n` (n <= 128); lowest flag exact as above.
#[inline(always)]
fn bytes_below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH
}

#[inline(always)]
fn find_control_swar(b: &[u8], mut i: usize) -> usize {
    while i + 8 <= b.len() {
        let x = word(b, i);
        let flags = bytes_below(x, 0x20) | zero_bytes(x ^ (ONES * 0x7f));
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

#[inline(always)]
fn find_name_end_swar(b: &[u8], mut i: usize) -> usize {
    while i + 8 <= b.len() {
        let x = word(b, i);
        let flags = bytes_below(x, 0x21) | zero_bytes(x ^ (ONES * u64::from(b':')));
        if flags != 0 {
            return i + (flags.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() {
        let c = b[i];
        if c <= b' ' || c == b':' {
            return i;
        }
        i += 1;
    }
    i
}

/// 16-byte scans. Each returns `Ok` with the first matching index, or `Err`
/// with the index where fewer than 16 bytes remain (the word-at-a-time scan
/// finishes from there).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod simd {
    use core::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_loadu_si128,
        _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };

    /// Bit k set when byte k of `b[i..i + 16]` is a control byte (<= 0x1f) or DEL.
    #[inline(always)]
    pub(super) fn control_mask(chunk: &[u8; 16]) -> u32 {
        // SAFETY: SSE2 is enabled at compile time (cfg above), so the intrinsics
        // exist; `chunk` is 16 readable bytes and `_mm_loadu_si128` needs no alignment.
        unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            let below_space = _mm_set1_epi8(0x1f);
            // Unsigned v <= 0x1f  <=>  max(v, 0x1f) == 0x1f.
            let ctl = _mm_cmpeq_epi8(_mm_max_epu8(v, below_space), below_space);
            _mm_movemask_epi8(_mm_or_si128(ctl, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)))) as u32
        }
    }

    /// Bit k set when byte k is ':' or <= 0x20.
    #[inline(always)]
    fn name_end_mask(chunk: &[u8; 16]) -> u32 {
        // SAFETY: as in `control_mask`.
        unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            let space = _mm_set1_epi8(0x20);
            let ws = _mm_cmpeq_epi8(_mm_max_epu8(v, space), space);
            _mm_movemask_epi8(_mm_or_si128(
                ws,
                _mm_cmpeq_epi8(v, _mm_set1_epi8(b':' as i8)),
            )) as u32
        }
    }

    /// Bit k set when byte k is an ASCII letter, digit or '-'.
    #[inline(always)]
    pub(super) fn alnum_dash_mask(chunk: &[u8; 16]) -> u32 {
        // SAFETY: as in `control_mask`.
        unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            // Signed compares: bytes >= 0x80 are negative and fall outside every range.
            let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
            let alpha = _mm_and_si128(
                _mm_cmpgt_epi8(folded, _mm_set1_epi8(b'a' as i8 - 1)),
                _mm_cmplt_epi8(folded, _mm_set1_epi8(b'z' as i8 + 1)),
            );
            let digit = _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)),
                _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)),
            );
            let dash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'-' as i8));
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(alpha, digit), dash)) as u32
        }
    }

    #[inline(always)]
    fn scan(b: &[u8], mut i: usize, mask: impl Fn(&[u8; 16]) -> u32) -> Result<usize, usize> {
        while let Some(chunk) = b.get(i..i + 16).and_then(|c| <&[u8; 16]>::try_from(c).ok()) {
            let m = mask(chunk);
            if m != 0 {
                return Ok(i + m.trailing_zeros() as usize);
            }
            i += 16;
        }
        Err(i)
    }

    #[inline(always)]
    pub(super) fn find_control_16(b: &[u8], i: usize) -> Result<usize, usize> {
        scan(b, i, control_mask)
    }

    #[inline(always)]
    pub(super) fn find_name_end_16(b: &[u8], i: usize) -> Result<usize, usize> {
        scan(b, i, name_end_mask)
    }
}

/// Without SSE2 the word-at-a-time scans do all the work.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
mod simd {
    #[inline(always)]
    pub(super) fn find_control_16(_: &[u8], i: usize) -> Result<usize, usize> {
        Err(i)
    }

    #[inline(always)]
    pub(super) fn control_mask(chunk: &[u8; 16]) -> u32 {
        chunk
            .iter()
            .enumerate()
            .fold(0, |m, (k, &c)| m | (u32::from(c < 0x20 || c == 0x7f) << k))
    }

    /// No fast answer: `is_name_token` checks byte by byte.
    #[inline(always)]
    pub(super) fn alnum_dash_mask(_: &[u8; 16]) -> u32 {
        0
    }

    #[inline(always)]
    pub(super) fn find_name_end_16(_: &[u8], i: usize) -> Result<usize, usize> {
        Err(i)
    }
}

/// Bit k set when byte k of `chunk` is a control byte (< 0x20) or DEL.
#[inline(always)]
pub(crate) fn control_bits(chunk: &[u8; 16]) -> u32 {
    simd::control_mask(chunk)
}

/// The positions of control bytes (< 0x20, or DEL) in `b` from some start,
/// in order. Reads 16 bytes at a time at addresses that do not depend on what
/// was found, so the parser's walk from line end to line end is not a chain of
/// dependent loads.
pub(crate) struct Controls<'a> {
    b: &'a [u8],
    /// Position of bit 0 of `bits`.
    base: usize,
    /// Control bytes of `b[base..base + 16]` not yet returned.
    bits: u32,
}

impl<'a> Controls<'a> {
    #[inline(always)]
    pub(crate) fn new(b: &'a [u8], start: usize) -> Self {
        Controls {
            b,
            base: start,
            bits: Self::bits_at(b, start),
        }
    }

    #[inline(always)]
    fn bits_at(b: &[u8], at: usize) -> u32 {
        match b
            .get(at..at + 16)
            .and_then(|c| <&[u8; 16]>::try_from(c).ok())
        {
            Some(chunk) => control_bits(chunk),
            None => {
                // The last bytes: pad with a non-control byte.
                let mut chunk = [b'a'; 16];
                let tail = b.get(at..).unwrap_or_default();
                chunk[..tail.len()].copy_from_slice(tail);
                control_bits(&chunk)
            }
        }
    }

    /// The next control byte's position, or `None` at the end of `b`.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<usize> {
        while self.bits == 0 {
            self.base += 16;
            if self.base >= self.b.len() {
                return None;
            }
            self.bits = Self::bits_at(self.b, self.base);
        }
        let k = self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        Some(self.base + k)
    }
}

/// Every byte of `s` is a `tchar` (no early exit: names are short).
#[inline(always)]
pub(crate) fn all_tchar(s: &[u8]) -> bool {
    s.iter().fold(true, |ok, &c| ok & is_tchar(c))
}

/// `b[..len]` is a token (`len` >= 1). Names made of letters, digits and `-`
/// (nearly all) are checked 16 bytes at once; others byte by byte.
#[inline(always)]
pub(crate) fn is_name_token(b: &[u8], len: usize) -> bool {
    if len <= 16 {
        if let Some(chunk) = b.get(..16).and_then(|c| <&[u8; 16]>::try_from(c).ok()) {
            let wanted = (1u32 << len) - 1;
            if simd::alnum_dash_mask(chunk) & wanted == wanted {
                return true;
            }
        }
    }
    b.get(..len).is_some_and(all_tchar)
}

/// `a` equals the lower-case `lower` ignoring ASCII case. Exact for tokens:
/// `lower` holds only lower-case letters and `-`, and no tchar other than a
/// letter's upper case maps onto those with `| 0x20`.
#[inline(always)]
pub(crate) fn eq_lower(a: &[u8], lower: &[u8]) -> bool {
    let n = a.len();
    if n != lower.len() {
        return false;
    }
    if n < 8 {
        return a.iter().zip(lower).all(|(&x, &y)| x | 0x20 == y);
    }
    // Whole words, the last one overlapping the previous when n is not a multiple of 8.
    let fold = ONES * 0x20;
    let mut i = 0;
    while i + 8 < n {
        if word(a, i) | fold != word(lower, i) | fold {
            return false;
        }
        i += 8;
    }
    word(a, n - 8) | fold == word(lower, n - 8) | fold
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
    fn find_name_end_agrees_with_bytewise_scan_on_every_byte_and_offset() {
        for special in 0u8..=255 {
            for at in 0..20 {
                let mut v = vec![b'a'; 24];
                v[at] = special;
                let want = v
                    .iter()
                    .position(|&c| c <= b' ' || c == b':')
                    .unwrap_or(v.len());
                assert_eq!(find_name_end(&v, 0), want, "byte {special:#x} at {at}");
                v[at + 1] = b':';
                let want = v
                    .iter()
                    .position(|&c| c <= b' ' || c == b':')
                    .unwrap_or(v.len());
                assert_eq!(
                    find_name_end(&v, 0),
                    want,
                    "byte {special:#x} at {at} then ':'"
                );
            }
        }
    }

    #[test]
    fn is_name_token_agrees_with_the_tchar_table() {
        for special in 0u8..=255 {
            for len in 1..=20 {
                for at in 0..len {
                    let mut v = vec![b'a'; 24];
                    v[at] = special;
                    assert_eq!(
                        is_name_token(&v, len),
                        v[..len].iter().all(|&c| is_tchar(c)),
                        "{special:#x} at {at} of {len}"
                    );
                    assert_eq!(
                        is_name_token(&v[..len], len),
                        is_name_token(&v, len),
                        "short slice"
                    );
                }
            }
        }
    }

    #[test]
    fn controls_lists_every_control_byte_in_order() {
        for len in 0..50 {
            for start in 0..=len {
                let mut v: Vec<u8> = (0..len)
                    .map(|k| {
                        if k % 7 == 3 {
                            b'\r'
                        } else if k % 11 == 5 {
                            0x7f
                        } else {
                            b'x'
                        }
                    })
                    .collect();
                if len > 0 {
                    v[len - 1] = b'\n';
                }
                let want: Vec<usize> = (start..len)
                    .filter(|&k| v[k] < 0x20 || v[k] == 0x7f)
                    .collect();
                let mut c = Controls::new(&v, start);
                let got: Vec<usize> = std::iter::from_fn(|| c.next()).collect();
                assert_eq!(got, want, "len {len} start {start}");
            }
        }
    }

    #[test]
    fn trim_ows_drops_spaces_and_tabs_at_both_ends_only() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"ab"), b"ab");
        assert_eq!(trim_ows(b" \t "), b"");
        assert_eq!(trim_ows(b""), b"");
        assert_eq!(trim_ows(b"\r a"), b"\r a", "only SP and HTAB");
    }

    #[test]
    fn hex_value_reads_every_hex_digit() {
        for (k, c) in b"0123456789abcdef".iter().enumerate() {
            assert_eq!(usize::from(hex_value(*c)), k);
            assert_eq!(usize::from(hex_value(c.to_ascii_uppercase())), k);
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
        assert!(eq_lower(b"TRANSFER-encoding", b"transfer-encoding"));
        assert!(!eq_lower(b"transfer-encodinf", b"transfer-encoding"));
        assert!(!eq_lower(b"uransfer-encoding", b"transfer-encoding"));
        assert!(!eq_lower(b"transfer_encoding", b"transfer-encoding"));
        assert!(eq_lower(b"Close", b"close"));
        assert!(!eq_lower(b"Clos", b"close"));
        assert!(eq_lower(b"keep-ALIVE", b"keep-alive"));
        assert!(!eq_lower(b"keep-alivf", b"keep-alive"));
        assert!(!eq_lower(b"content_length", b"content-length"));
        assert!(!eq_lower(b"content-lengt", b"content-length"));
        // No tchar other than '-' ORs to '-'.
        assert!((0u8..=255)
            .filter(|&b| is_tchar(b) && b | 0x20 == b'-')
            .eq([b'-']));
    }
}
