//! The HTTP/2 client codec, whole against split: see harness/h2.rs.

#![no_main]

#[allow(dead_code)]
#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::h2::check(data));
