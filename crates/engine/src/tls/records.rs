//! The record layer once the handshake is done: records sealed straight into
//! the connection's send buffer and opened in place in the receive buffer,
//! with the traffic keys rustls hands over (the same hand-over kTLS takes).
//! TLS 1.3 and TLS 1.2, AES-GCM and ChaCha20-Poly1305.

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, NONCE_LEN};
use rustls::{ConnectionTrafficSecrets, ExtractedSecrets};

/// Record header: type, legacy version, length.
pub(super) const HEADER: usize = 5;
/// Largest plaintext of one record (2^14).
const MAX_FRAGMENT: usize = 16 * 1024;
/// Largest ciphertext a peer may send (2^14 + 256).
const MAX_CIPHERTEXT: usize = MAX_FRAGMENT + 256;
const TAG: usize = 16;
/// TLS 1.2 AES-GCM: the nonce's explicit part carried in each record.
const EXPLICIT_NONCE: usize = 8;

pub(super) const ALERT: u8 = 21;
pub(super) const HANDSHAKE: u8 = 22;
pub(super) const APPLICATION_DATA: u8 = 23;

/// A record that cannot be opened: forged, truncated, oversized or of a
/// kind this side of the protocol never gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BadRecord;

/// One direction's key, its IV and the next record's sequence number.
struct Keys {
    key: LessSafeKey,
    iv: [u8; NONCE_LEN],
    seq: u64,
}

impl Keys {
    fn new(secrets: &ConnectionTrafficSecrets, seq: u64) -> Result<Keys, BadRecord> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv)
            }
            _ => return Err(BadRecord),
        };
        let key = UnboundKey::new(alg, key.as_ref()).map_err(|_| BadRecord)?;
        Ok(Keys {
            key: LessSafeKey::new(key),
            iv: iv.as_ref().try_into().map_err(|_| BadRecord)?,
            seq,
        })
    }

    /// The IV xor the sequence number (TLS 1.3, and TLS 1.2's ChaCha20 and
    /// AES-GCM sends: the explicit part is then the sequence-derived one).
    fn nonce(&self) -> [u8; NONCE_LEN] {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        n
    }
}

/// Both directions of a connection's record protection.
pub(super) struct Records {
    tls13: bool,
    /// TLS 1.2 AES-GCM: records carry an 8-byte explicit nonce.
    explicit_nonce: bool,
    tx: Keys,
    rx: Keys,
}

impl Records {
    pub(super) fn new(tls13: bool, s: &ExtractedSecrets) -> Result<Records, BadRecord> {
        let explicit_nonce = !tls13
            && matches!(
                s.tx.1,
                ConnectionTrafficSecrets::Aes128Gcm { .. }
                    | ConnectionTrafficSecrets::Aes256Gcm { .. }
            );
        Ok(Records {
            tls13,
            explicit_nonce,
            tx: Keys::new(&s.tx.1, s.tx.0)?,
            rx: Keys::new(&s.rx.1, s.rx.0)?,
        })
    }

    /// Records sent so far under the current send key.
    pub(super) fn sent(&self) -> u64 {
        self.tx.seq
    }

    pub(super) fn rekey_tx(
        &mut self,
        seq: u64,
        s: &ConnectionTrafficSecrets,
    ) -> Result<(), BadRecord> {
        self.tx = Keys::new(s, seq)?;
        Ok(())
    }

    pub(super) fn rekey_rx(
        &mut self,
        seq: u64,
        s: &ConnectionTrafficSecrets,
    ) -> Result<(), BadRecord> {
        self.rx = Keys::new(s, seq)?;
        Ok(())
    }

    /// Seals `plain` as records of type `typ` appended to `out`.
    pub(super) fn seal(&mut self, typ: u8, plain: &[u8], out: &mut Vec<u8>) {
        for chunk in plain.chunks(MAX_FRAGMENT) {
            self.seal_one(typ, chunk, out);
        }
    }

    fn seal_one(&mut self, typ: u8, chunk: &[u8], out: &mut Vec<u8>) {
        let at = out.len();
        let nonce = self.tx.nonce();
        let (outer, inner, explicit) = if self.tls13 {
            (APPLICATION_DATA, 1, 0)
        } else {
            (
                typ,
                0,
                if self.explicit_nonce {
                    EXPLICIT_NONCE
                } else {
                    0
                },
            )
        };
        let len = explicit + chunk.len() + inner + TAG;
        out.extend_from_slice(&[outer, 3, 3, (len >> 8) as u8, len as u8]);
        if explicit > 0 {
            out.extend_from_slice(&nonce[4..]);
        }
        out.extend_from_slice(chunk);
        if inner > 0 {
            out.push(typ);
        }
        let body = at + HEADER + explicit;
        let aad = if self.tls13 {
            aad13(&out[at..at + HEADER])
        } else {
            aad12(self.tx.seq, typ, chunk.len())
        };
        let tag = self
            .tx
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad[..aad_len(self.tls13)]),
                &mut out[body..],
            )
            .expect("a record within the AEAD's length limit");
        out.extend_from_slice(tag.as_ref());
        self.tx.seq = self.tx.seq.wrapping_add(1);
    }

    /// The length of the whole record at the front of `buf` (header
    /// included), None while it is incomplete.
    pub(super) fn whole(buf: &[u8]) -> Result<Option<usize>, BadRecord> {
        Ok(Records::record_len(buf)?.filter(|&n| buf.len() >= n))
    }

    /// The length of the record starting `buf` (header included), from its
    /// header; None until the header is there.
    pub(super) fn record_len(buf: &[u8]) -> Result<Option<usize>, BadRecord> {
        if buf.len() < HEADER {
            return Ok(None);
        }
        let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
        if len > MAX_CIPHERTEXT {
            return Err(BadRecord);
        }
        Ok(Some(HEADER + len))
    }

    /// Opens one whole record in place: its content type and plaintext.
    pub(super) fn open<'a>(&mut self, rec: &'a mut [u8]) -> Result<(u8, &'a [u8]), BadRecord> {
        let (header, body) = rec.split_at_mut(HEADER);
        let outer = header[0];
        let (nonce, body) = if self.tls13 {
            if outer != APPLICATION_DATA {
                return Err(BadRecord);
            }
            (self.rx.nonce(), body)
        } else if self.explicit_nonce {
            if body.len() < EXPLICIT_NONCE {
                return Err(BadRecord);
            }
            let (explicit, rest) = body.split_at_mut(EXPLICIT_NONCE);
            let mut n = self.rx.iv;
            n[4..].copy_from_slice(explicit);
            (n, rest)
        } else {
            (self.rx.nonce(), body)
        };
        if body.len() < TAG {
            return Err(BadRecord);
        }
        let aad = if self.tls13 {
            aad13(header)
        } else {
            aad12(self.rx.seq, outer, body.len() - TAG)
        };
        let plain = self
            .rx
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad[..aad_len(self.tls13)]),
                body,
            )
            .map_err(|_| BadRecord)?;
        self.rx.seq = self.rx.seq.wrapping_add(1);
        if !self.tls13 {
            return Ok((outer, plain));
        }
        // TLS 1.3: the content type is the last non-zero byte (zeros are padding).
        let end = plain.iter().rposition(|&b| b != 0).ok_or(BadRecord)?;
        Ok((plain[end], &plain[..end]))
    }
}

/// TLS 1.3's additional data: the record header.
fn aad13(header: &[u8]) -> [u8; 13] {
    let mut a = [0; 13];
    a[..HEADER].copy_from_slice(&header[..HEADER]);
    a
}

/// TLS 1.2's additional data: sequence number, type, version, plaintext length.
fn aad12(seq: u64, typ: u8, len: usize) -> [u8; 13] {
    let mut a = [0; 13];
    a[..8].copy_from_slice(&seq.to_be_bytes());
    a[8..].copy_from_slice(&[typ, 3, 3, (len >> 8) as u8, len as u8]);
    a
}

fn aad_len(tls13: bool) -> usize {
    if tls13 {
        HEADER
    } else {
        13
    }
}
