//! Integration tests of xload-probe: parsers over captured and synthesized /proc text,
//! the sampler over fixture trees and the live /proc, the verdict, preflight and observe.

mod observe;
mod parsers;
mod sampler;
mod verdict;

use std::path::PathBuf;

/// `tests/fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// The text of `tests/fixtures/<rel>`.
pub fn fixture_text(rel: &str) -> String {
    let path = fixture(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}
