//! Workload files for xload: what to send, in which mix, and what a correct
//! and timely response is.
//!
//! A workload (TOML, see `workloads/static.toml`) names request classes (method,
//! path with `{n}` drawn from a list, a range or the manifest's files, uniformly
//! or by Zipf; headers; body; weight), their checks (status set, body size,
//! SHA-256, byte strings that must or must not appear), their latency limits
//! (mean and percentiles) and optionally sessions (a sequence or Markov chain of
//! classes with think time).
//!
//! Main design choice: everything that varies per request is decided before
//! the run. [`RequestPlan::build`] renders every variant to bytes once against
//! the target, and [`RequestPlan::schedule`] draws a seeded list of picks, so
//! the engine's hot path only indexes and copies; the [`Checker`] is fed
//! status and body pieces and hashes with `ring` without buffering the body.
//! Pure code: no sockets, no clock.
//!
//! ```
//! use xload_workload::{parse, Checker, RequestPlan};
//!
//! let toml = r#"
//! [classes.home]
//! path = "/index.html"
//! weight = 3
//! check = { status = [200], body_size = 2, contains = "ok" }
//!
//! [classes.item]
//! path = "/item/{n}"
//! n = { range = [1, 100], zipf = 1.0 }
//! "#;
//! let w = parse(toml, "w.toml", std::path::Path::new(".")).unwrap();
//! let url = xload_http::parse_url("http://127.0.0.1:8080/").unwrap();
//! let plan = RequestPlan::build(&w, &url).unwrap();
//! let picks = plan.schedule(42, 1000);
//! assert_eq!(picks, plan.schedule(42, 1000)); // same seed, same requests
//! assert!(plan.request(picks[0]).ends_with(b"\r\n\r\n"));
//!
//! let (home, v) = (&plan.classes[0], &plan.classes[0].variants[0]);
//! let mut checker = Checker::new();
//! checker.start(v);
//! checker.status(200);
//! checker.body(home, b"o");
//! checker.body(home, b"k");
//! assert!(checker.finish(home, v, 2).is_ok());
//! ```

mod capture;
mod check;
mod cookie;
pub mod doc;
mod error;
mod limits;
mod manifest;
mod model;
mod parse;
mod plan;
mod rng;
mod session;

pub use capture::{
    header_values, parse_json_path, Capture, CaptureFrom, Captured, JsonStep, Miss, MAX_CAPTURES,
};
pub use check::{Checker, Failure, MAX_NEEDLES};
pub use cookie::{parse_http_date, Jar, Origin};
pub use error::Error;
pub use limits::LimitVerdict;
pub use manifest::{parse_sha256, sha256_hex, Manifest, ManifestEntry};
pub use model::{Check, Class, Expected, Flow, Limits, Session, Source, Think, Values, Workload};
pub use parse::{load, parse};
pub use plan::{ClassPlan, Pick, RequestPlan, Variant, MAX_VARIANTS};
pub use rng::{Cdf, Rng};
pub use session::SessionWalk;
