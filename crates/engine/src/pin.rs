//! CPU affinity: which CPUs this process may use, and pinning a thread to one
//! (written once in xload-sys, for the engine, the responder and AF_XDP).

pub use xload_sys::cpu::{allowed_cpus, gettid, parse_cpu_list, pin_current_thread};
