//! The request scanner, whole against split: see harness/request.rs.

#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::request::check(data));
