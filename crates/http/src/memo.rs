//! The head shortcut shared by the response parser and the request scanner.
//!
//! A peer in a benchmark sends the same head again and again (a load
//! generator its request, a server its answer, whose Date changes once a
//! second). What a head says is a pure function of its bytes, so when input
//! starts with the head last read whole, one comparison replaces reading it.

/// Heads longer than this are not remembered (nor compared).
pub(crate) const MEMO_MAX: usize = 512;

/// The last head read whole, byte for byte, and what it said.
#[derive(Clone, Debug)]
pub(crate) struct HeadMemo<T> {
    bytes: Vec<u8>,
    /// `None` while `bytes` holds no head.
    said: Option<T>,
}

impl<T> Default for HeadMemo<T> {
    fn default() -> Self {
        HeadMemo {
            bytes: Vec::new(),
            said: None,
        }
    }
}

impl<T: Copy> HeadMemo<T> {
    /// What the remembered head said and its length, when `b` starts with it.
    #[inline]
    pub(crate) fn recall(&self, b: &[u8]) -> Option<(&T, usize)> {
        let said = self.said.as_ref()?;
        let len = self.bytes.len();
        (b.get(..len)? == self.bytes.as_slice()).then_some((said, len))
    }

    /// Remembers `head` (its bytes) and what it said; a head longer than
    /// [`MEMO_MAX`] is not remembered and the previous one stays.
    pub(crate) fn remember(&mut self, head: &[u8], said: T) {
        if head.len() <= MEMO_MAX {
            self.bytes.clear();
            self.bytes.extend_from_slice(head);
            self.said = Some(said);
        }
    }

    /// No head is remembered.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.said.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recalls_only_input_that_starts_with_the_remembered_bytes() {
        let mut m = HeadMemo::default();
        assert!(m.is_empty());
        assert_eq!(m.recall(b"GET / HTTP/1.1\r\n\r\n"), None);
        m.remember(b"GET / HTTP/1.1\r\n\r\n", 7u8);
        assert_eq!(m.recall(b"GET / HTTP/1.1\r\n\r\nnext"), Some((&7, 18)));
        assert_eq!(m.recall(b"GET / HTTP/1.1\r\n\r"), None, "cut short");
        assert_eq!(m.recall(b"GET /x HTTP/1.1\r\n\r\n"), None);
        assert_eq!(
            m.recall(b"GET / HTTP/1.0\r\n\r\n"),
            None,
            "same length, one byte"
        );
    }

    #[test]
    fn a_head_over_the_bound_leaves_the_previous_one() {
        let mut m = HeadMemo::default();
        m.remember(b"short", 1u8);
        let long = vec![b'x'; MEMO_MAX + 1];
        m.remember(&long, 2);
        assert_eq!(m.recall(&long), None);
        assert_eq!(m.recall(b"short"), Some((&1, 5)));
        let exact = vec![b'y'; MEMO_MAX];
        m.remember(&exact, 3);
        assert_eq!(m.recall(&exact), Some((&3, MEMO_MAX)));
    }
}
