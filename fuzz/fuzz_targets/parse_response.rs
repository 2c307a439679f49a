//! The response parser, whole against split: see harness/response.rs.

#![no_main]

// Each target calls one of the harness's checks; the other is unused here.
#[allow(dead_code)]
#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::response::check(data));
