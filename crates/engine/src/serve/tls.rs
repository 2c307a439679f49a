//! TLS for the responder (`xload serve --tls`): rustls sessions over
//! in-memory buffers, between the received bytes and the request scanner,
//! and between the answers and the send.

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::{ServerConfig, ServerConnection};

/// One connection's TLS session and the ciphertext of its send in flight.
pub(super) struct Tls {
    conn: ServerConnection,
    /// Sealed records of the send in flight (not touched until it completes).
    pub out: Vec<u8>,
    /// close_notify has been queued.
    said_bye: bool,
}

/// The peer's records could not be opened: a client that does not speak
/// TLS, a failed handshake, a forged record.
#[derive(Debug)]
pub(super) struct Broken;

impl Tls {
    pub(super) fn new(cfg: &Arc<ServerConfig>) -> Option<Box<Tls>> {
        let mut conn = ServerConnection::new(Arc::clone(cfg)).ok()?;
        // Answers are sealed whole (a batch can exceed rustls's default limit).
        conn.set_buffer_limit(None);
        Some(Box::new(Tls {
            conn,
            out: Vec::new(),
            said_bye: false,
        }))
    }

    /// Opens the records in `cipher`, appending their plaintext to `plain`.
    /// On an error the alert for the peer is queued (see [`Tls::wants_send`]).
    pub(super) fn open(&mut self, mut cipher: &[u8], plain: &mut Vec<u8>) -> Result<(), Broken> {
        while !cipher.is_empty() {
            match self.conn.read_tls(&mut cipher) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => return Err(Broken),
            }
            let st = self.conn.process_new_packets().map_err(|_| Broken)?;
            let mut want = st.plaintext_bytes_to_read();
            while want > 0 {
                let at = plain.len();
                plain.resize(at + want, 0);
                match self.conn.reader().read(&mut plain[at..]) {
                    Ok(n) => {
                        plain.truncate(at + n);
                        want -= n.min(want);
                        if n == 0 {
                            break;
                        }
                    }
                    Err(_) => {
                        plain.truncate(at);
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether ALPN chose h2; None while the handshake goes on.
    pub(super) fn chose_h2(&self) -> Option<bool> {
        if self.conn.is_handshaking() {
            return None;
        }
        Some(self.conn.alpn_protocol() == Some(b"h2"))
    }

    /// Records are waiting to go (handshake messages, an alert).
    pub(super) fn wants_send(&self) -> bool {
        self.conn.wants_write()
    }

    /// Seals the pieces of `plain` (and close_notify after them when `last`)
    /// into [`Tls::out`], after whatever records were already pending.
    pub(super) fn seal(&mut self, plain: &[&[u8]], last: bool) {
        for piece in plain.iter().filter(|p| !p.is_empty()) {
            // No buffer limit: the whole slice is taken.
            let _ = self.conn.writer().write_all(piece);
        }
        if last && !self.said_bye && !self.conn.is_handshaking() {
            self.said_bye = true;
            self.conn.send_close_notify();
        }
        self.out.clear();
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut self.out).is_err() {
                break;
            }
        }
    }
}
