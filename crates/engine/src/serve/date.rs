//! The `Date` header of every answer (RFC 9110 6.6.1: an origin server with
//! a clock sends one in its 2xx, 3xx and 4xx answers), in the IMF-fixdate
//! form, `Sun, 06 Nov 1994 08:49:37 GMT`: always [`LEN`] bytes, so the
//! prebuilt answers are patched in place once a second.

use std::time::{SystemTime, UNIX_EPOCH};

use xload_sys::calendar::utc;

/// Bytes of an IMF-fixdate.
pub(crate) const LEN: usize = 29;

/// `Date: ` plus the date plus CRLF.
pub(crate) const LINE_LEN: usize = 6 + LEN + 2;

/// The date of `secs` seconds after the Unix epoch (UTC).
pub(crate) fn imf_fixdate(secs: u64) -> [u8; LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let u = utc(secs);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[u.weekday as usize]);
    two(&mut out[5..7], u.day.into());
    out[8..11].copy_from_slice(MONTHS[(u.month - 1) as usize]);
    // Years past 9999 do not fit the form; they are not this server's problem.
    let y = u.year.min(9999);
    two(&mut out[12..14], y / 100);
    two(&mut out[14..16], y % 100);
    two(&mut out[17..19], u.hour.into());
    two(&mut out[20..22], u.minute.into());
    two(&mut out[23..25], u.second.into());
    out
}

/// The `Date: ...\r\n` line of `secs`.
pub(crate) fn line(secs: u64) -> [u8; LINE_LEN] {
    let mut line = [0u8; LINE_LEN];
    line[..6].copy_from_slice(b"Date: ");
    line[6..6 + LEN].copy_from_slice(&imf_fixdate(secs));
    line[6 + LEN..].copy_from_slice(b"\r\n");
    line
}

/// Seconds since the Unix epoch (0 for a clock set before it).
pub(crate) fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn two(out: &mut [u8], v: u64) {
    out[0] = b'0' + (v / 10 % 10) as u8;
    out[1] = b'0' + (v % 10) as u8;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(secs: u64) -> String {
        String::from_utf8(imf_fixdate(secs).to_vec()).unwrap()
    }

    #[test]
    fn dates_in_the_rfc_form() {
        assert_eq!(date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        // RFC 9110's own example.
        assert_eq!(date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        // Leap days, the century rule and its exception.
        assert_eq!(date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(date(1_709_164_799), "Wed, 28 Feb 2024 23:59:59 GMT");
        assert_eq!(date(1_709_251_199), "Thu, 29 Feb 2024 23:59:59 GMT");
        assert_eq!(date(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
        assert_eq!(date(1_796_256_000), "Thu, 03 Dec 2026 00:00:00 GMT");
    }

    #[test]
    fn the_line_is_a_header_line() {
        let line = line(784_111_777);
        assert_eq!(&line[..], b"Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
        assert!(line.starts_with(b"Date: ") && line.ends_with(b" GMT\r\n"));
        assert_eq!(line.len(), LINE_LEN);
    }
}
