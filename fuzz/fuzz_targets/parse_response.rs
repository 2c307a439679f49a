//! The response parser, whole against split: see harness/response.rs.

#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::response::check(data));
