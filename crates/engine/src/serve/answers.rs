//! The prebuilt answers: plain answers back to back, sent by pointer, the
//! closing and 400 answers, and their `Date` patched in place once a second
//! (in a copy no send in flight reads).

use super::date;

/// Every prebuilt answer starts with this; its `Date` value follows at
/// [`OK_DATE_AT`] (patched in place by [`Answers::stamp_dates`]).
pub(super) const OK_START: &str = "HTTP/1.1 200 OK\r\nServer: xload\r\n";
const OK_DATE_AT: usize = OK_START.len() + "Date: ".len();
const BAD_START: &str = "HTTP/1.1 400 Bad Request\r\nServer: xload\r\n";
const BAD_DATE_AT: usize = BAD_START.len() + "Date: ".len();

/// Pipelined answers sent in one go, at most.
const MAX_BATCH: usize = 64;
/// Bytes a prebuilt batch of answers may take (at least one answer).
const BATCH_BYTES: usize = 1 << 20;

/// At most this many copies of the prebuilt batches (two when one answer is
/// larger than BATCH_BYTES): past that, a client that does not read (all
/// copies held by its blocked sends) makes the date wait, not the memory grow.
const MAX_COPIES: usize = 4;

/// One copy of the prebuilt answers sent by pointer, and the sends in flight
/// that read it.
struct Batches {
    /// `batch_n` keep-alive answers back to back.
    ok: Box<[u8]>,
    /// The same with `Connection: keep-alive`, for HTTP/1.0 keep-alive clients.
    ka: Box<[u8]>,
    sends: u32,
}

/// A worker's prebuilt answers.
pub(super) struct Answers {
    /// Copies of the prebuilt batches ([`Answers::stamp_dates`]): sends go
    /// from `copies[copy]`; another is re-dated once no send reads it.
    copies: Vec<Batches>,
    copy: usize,
    /// Length of one plain answer in `Batches::ok`.
    ok_len: usize,
    /// Answers in a prebuilt batch: MAX_BATCH, fewer for large bodies (the
    /// batches stay within about BATCH_BYTES unless one answer is larger).
    pub batch_n: usize,
    /// Length of one answer in `Batches::ka`.
    ok_ka_len: usize,
    /// The last answer of a connection (`Connection: close`).
    pub ok_close: Box<[u8]>,
    /// Body bytes at the end of each plain answer (left out for HEAD).
    body_size: usize,
    /// 400, then close.
    pub bad: Box<[u8]>,
    /// The second the answers' `Date` says, and its header line (for the
    /// answers built on the spot).
    pub date_secs: u64,
    date_line: [u8; date::LINE_LEN],
}

fn ok_response(body_size: usize, connection: &str, secs: u64) -> Vec<u8> {
    let date = date::line(secs);
    let mut r = OK_START.as_bytes().to_vec();
    r.extend_from_slice(&date);
    r.extend_from_slice(
        format!("Content-Type: text/plain\r\nContent-Length: {body_size}\r\n{connection}\r\n")
            .as_bytes(),
    );
    r.resize(r.len() + body_size, b'x');
    r
}

fn bad_response(secs: u64) -> Vec<u8> {
    let mut r = BAD_START.as_bytes().to_vec();
    r.extend_from_slice(&date::line(secs));
    r.extend_from_slice(b"Content-Length: 0\r\nConnection: close\r\n\r\n");
    r
}

impl Answers {
    /// Answers with a body of `body_size` bytes, dated `secs`.
    pub(super) fn new(body_size: usize, secs: u64) -> Answers {
        // 64 answers of a 16 MiB body were 1 GiB per batch and per worker.
        // (The head is under 192 bytes.)
        let batch_n = (BATCH_BYTES / (body_size + 192)).clamp(1, MAX_BATCH);
        let batch_of = |connection: &str| {
            let one = ok_response(body_size, connection, secs);
            let len = one.len();
            let batch: Vec<u8> = one.iter().copied().cycle().take(len * batch_n).collect();
            (batch.into_boxed_slice(), len)
        };
        let (ok, ok_len) = batch_of("");
        let (ka, ok_ka_len) = batch_of("Connection: keep-alive\r\n");
        Answers {
            copies: vec![Batches { ok, ka, sends: 0 }],
            copy: 0,
            ok_len,
            batch_n,
            ok_ka_len,
            ok_close: ok_response(body_size, "Connection: close\r\n", secs).into_boxed_slice(),
            body_size,
            bad: bad_response(secs).into_boxed_slice(),
            date_secs: secs,
            date_line: date::line(secs),
        }
    }

    /// Lends `k` (at most `batch_n`) plain answers to a send: the copy it
    /// reads (given back by [`Answers::give_back`] when the send completes),
    /// where the bytes start and how many there are. The bytes stay valid
    /// and unchanged until then.
    #[inline]
    pub(super) fn lend(&mut self, k: usize, says_keep_alive: bool) -> (usize, *const u8, u32) {
        let copy = &mut self.copies[self.copy];
        copy.sends += 1;
        let (batch, len) = if says_keep_alive {
            (&copy.ka, self.ok_ka_len)
        } else {
            (&copy.ok, self.ok_len)
        };
        (self.copy, batch.as_ptr(), (k * len) as u32)
    }

    /// The send that read copy `k` has completed.
    #[inline]
    pub(super) fn give_back(&mut self, k: usize) {
        self.copies[k].sends -= 1;
    }

    /// The answer to a HEAD: a plain answer's head (the last one if `close`).
    pub(super) fn head(&self, close: bool, says_keep_alive: bool) -> &[u8] {
        let one: &[u8] = if close {
            &self.ok_close
        } else if says_keep_alive {
            &self.copies[self.copy].ka[..self.ok_ka_len]
        } else {
            &self.copies[self.copy].ok[..self.ok_len]
        };
        &one[..one.len() - self.body_size]
    }

    /// The `Date` header line of the answers built on the spot.
    pub(super) fn date_line(&self) -> &[u8] {
        &self.date_line
    }

    /// Appends the `/stats` answer with `body` to `out` (its head only for
    /// `head_only`); it says `Connection: close` for `close`.
    pub(super) fn stats(
        &self,
        out: &mut Vec<u8>,
        body: &str,
        head_only: bool,
        close: bool,
        says_keep_alive: bool,
    ) {
        let connection = if close {
            "Connection: close\r\n"
        } else if says_keep_alive {
            "Connection: keep-alive\r\n"
        } else {
            ""
        };
        let head = format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n{connection}\r\n",
            body.len(),
        );
        out.extend_from_slice(OK_START.as_bytes());
        out.extend_from_slice(&self.date_line);
        out.extend_from_slice(head.as_bytes());
        if !head_only {
            out.extend_from_slice(body.as_bytes());
        }
    }

    /// Writes the date of `secs` into the prebuilt answers. A send in
    /// flight may still read its batch (a send the socket could not take
    /// whole goes on from where it stopped), so only a copy no send reads
    /// is re-dated, and new sends then go from it. With every copy read (a
    /// client that does not read holds one for as long as its send is
    /// blocked), another copy is made, up to MAX_COPIES; past that the date
    /// waits (`date_secs` stays: the next pass tries again) until a send
    /// completes (or `--send-timeout` ends it).
    /// What is copied into a connection's own buffer (close, 400, /stats,
    /// HEAD) takes the date at once.
    pub(super) fn stamp_dates(&mut self, secs: u64) {
        let date = date::imf_fixdate(secs);
        self.date_line[6..6 + date::LEN].copy_from_slice(&date);
        self.ok_close[OK_DATE_AT..OK_DATE_AT + date::LEN].copy_from_slice(&date);
        self.bad[BAD_DATE_AT..BAD_DATE_AT + date::LEN].copy_from_slice(&date);
        // The current copy if no send reads it, else another that none reads.
        let free = std::iter::once(self.copy)
            .chain(0..self.copies.len())
            .find(|&k| self.copies[k].sends == 0);
        let max = if self.ok_len > BATCH_BYTES {
            2
        } else {
            MAX_COPIES
        };
        let k = match free {
            Some(k) => k,
            None if self.copies.len() < max => {
                let cur = &self.copies[self.copy];
                let fresh = Batches {
                    ok: cur.ok.clone(),
                    ka: cur.ka.clone(),
                    sends: 0,
                };
                self.copies.push(fresh);
                self.copies.len() - 1
            }
            None => return,
        };
        let c = &mut self.copies[k];
        for (buf, stride) in [(&mut c.ok, self.ok_len), (&mut c.ka, self.ok_ka_len)] {
            for answer in buf.chunks_exact_mut(stride) {
                answer[OK_DATE_AT..OK_DATE_AT + date::LEN].copy_from_slice(&date);
            }
        }
        self.copy = k;
        self.date_secs = secs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY1: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT
    const DAY1_DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";
    const DAY2_DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:38 GMT";

    /// The bytes a send of `k` answers lent by `a` reads.
    fn lent(a: &mut Answers, k: usize, ka: bool) -> (usize, Vec<u8>) {
        let (copy, ptr, n) = a.lend(k, ka);
        // SAFETY: `lend` points into a copy owned by `a`, `n` bytes long,
        // unchanged while it is lent (it is given back below, before `a`
        // changes).
        let bytes = unsafe { std::slice::from_raw_parts(ptr, n as usize) }.to_vec();
        (copy, bytes)
    }

    /// Every `Date` value in `bytes`.
    fn dates(bytes: &[u8]) -> Vec<&[u8]> {
        bytes
            .windows(6)
            .enumerate()
            .filter(|(_, w)| *w == b"Date: ")
            .map(|(i, _)| &bytes[i + 6..i + 6 + date::LEN])
            .collect()
    }

    #[test]
    fn plain_answers_are_whole_answers_back_to_back() {
        let mut a = Answers::new(5, DAY1);
        assert_eq!(a.batch_n, MAX_BATCH);
        let one = "HTTP/1.1 200 OK\r\nServer: xload\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
                   Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nxxxxx";
        let (copy, bytes) = lent(&mut a, 3, false);
        assert_eq!(bytes, one.repeat(3).as_bytes());
        a.give_back(copy);
        let (copy, bytes) = lent(&mut a, 1, true);
        let ka = one.replace("\r\n\r\n", "\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!(bytes, ka.as_bytes());
        a.give_back(copy);
        assert!(a.ok_close.ends_with(b"Connection: close\r\n\r\nxxxxx"));
        assert_eq!(
            &a.bad[..],
            &b"HTTP/1.1 400 Bad Request\r\nServer: xload\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
               Content-Length: 0\r\nConnection: close\r\n\r\n"[..]
        );
    }

    #[test]
    fn large_bodies_make_smaller_batches() {
        assert_eq!(Answers::new(100_000, DAY1).batch_n, 10);
        assert_eq!(Answers::new(16 << 20, DAY1).batch_n, 1);
    }

    #[test]
    fn head_answers_are_the_head_of_the_get_answer() {
        let mut a = Answers::new(5, DAY1);
        for (close, ka) in [(false, false), (false, true), (true, false)] {
            let head = a.head(close, ka).to_vec();
            let full = if close {
                a.ok_close.to_vec()
            } else {
                let (copy, bytes) = lent(&mut a, 1, ka);
                a.give_back(copy);
                bytes
            };
            assert_eq!([&head[..], b"xxxxx"].concat(), full);
            assert!(head.ends_with(b"\r\n\r\n"));
        }
    }

    #[test]
    fn stats_answer_says_its_length_and_connection() {
        let a = Answers::new(5, DAY1);
        let mut out = Vec::new();
        a.stats(&mut out, "{}", false, true, false);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\nServer: xload\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        );
        let mut out = Vec::new();
        a.stats(&mut out, "{}", true, false, true);
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("Content-Length: 2\r\nConnection: keep-alive\r\n\r\n"));
    }

    #[test]
    fn stamping_patches_every_answer_of_a_copy_no_send_reads() {
        let mut a = Answers::new(5, DAY1);
        a.stamp_dates(DAY1 + 1);
        assert_eq!(a.date_secs, DAY1 + 1);
        let (copy, bytes) = lent(&mut a, MAX_BATCH, false);
        assert_eq!(copy, 0, "the only copy was free: patched in place");
        assert_eq!(dates(&bytes), vec![DAY2_DATE; MAX_BATCH]);
        a.give_back(copy);
        let (copy, bytes) = lent(&mut a, 2, true);
        assert_eq!(dates(&bytes), vec![DAY2_DATE; 2]);
        a.give_back(copy);
        assert_eq!(dates(&a.ok_close), [DAY2_DATE]);
        assert_eq!(dates(&a.bad), [DAY2_DATE]);
        assert_eq!(dates(a.head(false, false)), [DAY2_DATE]);
        let mut out = Vec::new();
        a.stats(&mut out, "{}", true, false, false);
        assert_eq!(dates(&out), [DAY2_DATE]);
    }

    #[test]
    fn a_copy_a_send_reads_is_never_patched() {
        let mut a = Answers::new(5, DAY1);
        let (first, before) = lent(&mut a, 2, false);
        a.stamp_dates(DAY1 + 1);
        // The lent copy still says what the send is sending; new sends go
        // from a second copy, patched.
        let (ptr, n) = (a.copies[first].ok.as_ptr(), before.len());
        // SAFETY: copy `first` is owned by `a` and at least `n` bytes long.
        let now = unsafe { std::slice::from_raw_parts(ptr, n) };
        assert_eq!(now, &before[..]);
        assert_eq!(dates(now), [DAY1_DATE, DAY1_DATE]);
        let (second, bytes) = lent(&mut a, 1, false);
        assert_ne!(second, first);
        assert_eq!(dates(&bytes), [DAY2_DATE]);
        assert_eq!(a.copies.len(), 2);
        a.give_back(second);
        a.give_back(first);
    }

    #[test]
    fn with_every_copy_lent_the_date_waits() {
        let mut a = Answers::new(5, DAY1);
        let mut held = Vec::new();
        for s in 1..MAX_COPIES as u64 {
            held.push(lent(&mut a, 1, false).0);
            a.stamp_dates(DAY1 + s);
            assert_eq!(a.date_secs, DAY1 + s);
        }
        assert_eq!(a.copies.len(), MAX_COPIES);
        held.push(lent(&mut a, 1, false).0);
        let before = a.date_secs;
        a.stamp_dates(before + 1);
        assert_eq!(a.date_secs, before, "no free copy: the date waits");
        assert_eq!(a.copies.len(), MAX_COPIES);
        // What goes into a connection's own buffer is dated at once.
        assert_eq!(dates(&a.bad), [&date::imf_fixdate(before + 1)[..]]);
        // A send completes: its copy is re-dated at the next pass.
        a.give_back(held.remove(0));
        a.stamp_dates(before + 1);
        assert_eq!(a.date_secs, before + 1);
        assert_eq!(a.copy, 0);
    }

    #[test]
    fn answers_larger_than_a_batch_keep_two_copies_at_most() {
        let mut a = Answers::new(BATCH_BYTES, DAY1);
        let first = lent(&mut a, 1, false).0;
        a.stamp_dates(DAY1 + 1);
        let second = lent(&mut a, 1, false).0;
        a.stamp_dates(DAY1 + 2);
        assert_eq!(a.copies.len(), 2);
        assert_eq!(a.date_secs, DAY1 + 1);
        a.give_back(first);
        a.give_back(second);
    }
}
