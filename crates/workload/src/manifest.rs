//! The file set's manifest (`path → size, SHA-256`): the shared model of
//! `xload files` (crate `xload-files`), read for the checks that say
//! `"manifest"` and for `n = { manifest = true }`.

pub use xload_files::{parse_sha256, sha256_hex, Entry as ManifestEntry, Manifest};
