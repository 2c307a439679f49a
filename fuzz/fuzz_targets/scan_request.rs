//! The request scanner, whole against split: see harness/request.rs.

#![no_main]

// Each target calls one of the harness's checks; the other is unused here.
#[allow(dead_code)]
#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::request::check(data));
