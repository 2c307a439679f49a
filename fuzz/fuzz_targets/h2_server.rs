//! The HTTP/2 server codec, whole against split: see harness/h2_server.rs.

#![no_main]

#[allow(dead_code)]
#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::h2_server::check(data));
