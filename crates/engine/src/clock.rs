//! A monotonic clock in nanoseconds, read once per batch of completions
//! (the reader lives in xload-sys; the engine names it `now_ns`).

pub use xload_sys::clock::{monotonic_ns as now_ns, ns_to_us};
