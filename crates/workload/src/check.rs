//! The streaming checker: fed a response's status and body pieces as they
//! arrive, it says whether the response met its class's checks and, if not,
//! why. One checker per connection, reused for every response (no allocation
//! after the first response of the longest needle).

use std::fmt;

use ring::digest;

use crate::plan::{ClassPlan, Variant};

/// Why a response failed its checks (the first failure found).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The status is not in the class's set.
    Status { got: u16 },
    /// The body length differs from the expected one.
    BodySize { expected: u64, got: u64 },
    /// The body's SHA-256 differs from the expected one.
    Sha256,
    /// The body lacks a `contains` string (its index).
    Missing(usize),
    /// The body holds a `not_contains` string (its index).
    Forbidden(usize),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Status { got } => write!(f, "status {got} not expected"),
            Failure::BodySize { expected, got } => {
                write!(f, "body of {got} bytes, expected {expected}")
            }
            Failure::Sha256 => f.write_str("body SHA-256 differs"),
            Failure::Missing(i) => write!(f, "body lacks contains[{i}]"),
            Failure::Forbidden(i) => write!(f, "body holds not_contains[{i}]"),
        }
    }
}

/// Checks one response at a time against a class and variant.
pub struct Checker {
    sha: Option<digest::Context>,
    status: u16,
    body_bytes: u64,
    /// Bit i: contains[i] seen / not_contains[i] seen.
    found: u64,
    forbidden: u64,
    /// The last bytes of the body so far, so a needle split across pieces is found.
    tail: Vec<u8>,
    scratch: Vec<u8>,
}

/// Most `contains` (and, separately, `not_contains`) strings per class.
pub const MAX_NEEDLES: usize = 64;

impl Default for Checker {
    fn default() -> Self {
        Self::new()
    }
}

impl Checker {
    pub fn new() -> Self {
        Checker {
            sha: None,
            status: 0,
            body_bytes: 0,
            found: 0,
            forbidden: 0,
            tail: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Starts a response to a request of `variant` in `class`.
    pub fn start(&mut self, variant: &Variant) {
        self.sha = variant
            .sha256
            .map(|_| digest::Context::new(&digest::SHA256));
        self.status = 0;
        self.body_bytes = 0;
        self.found = 0;
        self.forbidden = 0;
        self.tail.clear();
    }

    pub fn status(&mut self, status: u16) {
        self.status = status;
    }

    /// A piece of the body, in order.
    pub fn body(&mut self, class: &ClassPlan, piece: &[u8]) {
        self.body_bytes += piece.len() as u64;
        if let Some(sha) = &mut self.sha {
            sha.update(piece);
        }
        let (contains, not_contains) = (&class.check.contains, &class.check.not_contains);
        if contains.is_empty() && not_contains.is_empty() {
            return;
        }
        let longest = contains
            .iter()
            .chain(not_contains)
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        // Search the seam (tail of earlier pieces + head of this one), then the piece.
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.tail);
        self.scratch
            .extend_from_slice(&piece[..piece.len().min(longest.saturating_sub(1))]);
        for hay in [&self.scratch[..], piece] {
            self.found |= scan(contains, hay);
            self.forbidden |= scan(not_contains, hay);
        }
        // Keep the last longest-1 bytes of the body for the next seam.
        let keep = longest.saturating_sub(1);
        if piece.len() >= keep {
            self.tail.clear();
            self.tail.extend_from_slice(&piece[piece.len() - keep..]);
        } else {
            self.tail.extend_from_slice(piece);
            let excess = self.tail.len().saturating_sub(keep);
            self.tail.drain(..excess);
        }
    }

    /// The verdict once the response is complete. `body_bytes` is the body
    /// length the parser counted (used when the body was not fed).
    pub fn finish(
        &mut self,
        class: &ClassPlan,
        variant: &Variant,
        body_bytes: u64,
    ) -> Result<(), Failure> {
        let check = &class.check;
        if !check.status.is_empty() && !check.status.contains(&self.status) {
            return Err(Failure::Status { got: self.status });
        }
        if let Some(expected) = variant.body_size {
            if expected != body_bytes {
                return Err(Failure::BodySize {
                    expected,
                    got: body_bytes,
                });
            }
        }
        if let (Some(expected), Some(sha)) = (variant.sha256, self.sha.take()) {
            if sha.finish().as_ref() != expected {
                return Err(Failure::Sha256);
            }
        }
        if let Some(i) = (0..check.contains.len()).find(|i| self.found & (1 << i) == 0) {
            return Err(Failure::Missing(i));
        }
        if let Some(i) = (0..check.not_contains.len()).find(|i| self.forbidden & (1 << i) != 0) {
            return Err(Failure::Forbidden(i));
        }
        Ok(())
    }

    /// Body bytes fed since [`Checker::start`].
    pub fn fed(&self) -> u64 {
        self.body_bytes
    }
}

/// Bit i set when needles[i] occurs in hay.
fn scan(needles: &[Vec<u8>], hay: &[u8]) -> u64 {
    let mut bits = 0;
    for (i, n) in needles.iter().enumerate() {
        if hay.len() >= n.len() && hay.windows(n.len()).any(|w| w == &n[..]) {
            bits |= 1 << i;
        }
    }
    bits
}
