//! Static file sets for compliant-capacity runs: `xload files generate`
//! writes a seeded set of mixed-size files ([`generate`], sizes from a
//! [`SizeDist`]) and its [`Manifest`] (`path → size, SHA-256`), `xload files
//! verify` checks a directory against it ([`verify`]), a workload's checks
//! read it ([`Manifest::load`]), and `xload serve --files` answers from the
//! directory read once into memory ([`FileSet`]).
//!
//! ```
//! use xload_files::{generate, verify, Manifest, SizeDist, Spec};
//!
//! let dir = std::env::temp_dir().join(format!("xload-files-doc-{}", std::process::id()));
//! let spec = Spec {
//!     count: 20,
//!     sizes: SizeDist::parse("list:1k:3,10k:1").unwrap(),
//!     sizes_text: "list:1k:3,10k:1".into(),
//!     seed: 1,
//!     force: false,
//! };
//! let m = generate(&dir, &spec).unwrap();
//! assert_eq!(Manifest::load(&dir.join("MANIFEST")).unwrap(), m);
//! assert!(verify(&dir, &m).unwrap().problems.is_empty());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod error;
mod generate;
mod manifest;
mod rng;
mod set;
mod sizes;
mod verify;

pub use error::Error;
pub use generate::{file_path, generate, Spec, MAX_COUNT};
pub use manifest::{parse_sha256, sha256, sha256_hex, Entry, Manifest, MANIFEST_NAME};
pub use set::{File, FileSet};
pub use sizes::{parse_size, SizeDist, MAX_FILE_SIZE};
pub use verify::{verify, Problem, Verdict};
