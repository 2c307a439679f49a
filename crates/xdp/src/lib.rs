//! AF_XDP small-packet generator and receiver (work in progress).
pub mod cli;
