//! The checks the fuzz targets run, shared with `cargo test`: each
//! `fuzz_targets/*.rs` calls one of these on libFuzzer's input, and
//! crates/http/tests/fuzz_replay.rs replays the seed corpora and a
//! fixed-seed random corpus through the same functions (the CI-bounded run).
//! Each function panics when a property fails; nothing else may panic.

pub(crate) mod h2;
pub(crate) mod h2_server;
pub(crate) mod request;
pub(crate) mod response;

/// Reads the common input header: byte 0 = options, bytes 1..3 = split
/// point (u16 little endian, modulo the stream length + 1), then the stream.
/// None when the input is shorter than the header.
pub(crate) fn split_input(data: &[u8]) -> Option<(u8, usize, &[u8])> {
    let [options, s0, s1, stream @ ..] = data else {
        return None;
    };
    let at = usize::from(u16::from_le_bytes([*s0, *s1])) % (stream.len() + 1);
    Some((*options, at, stream))
}
