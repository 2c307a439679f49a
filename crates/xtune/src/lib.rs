//! xtune: apply, verify by meaning, diff and roll back a host tuning profile
//! (sysctl, NIC settings, IRQ affinity, RPS/XPS/RFS, CPU governor, irqbalance)
//! on a host, inside a network namespace, or on remote hosts over ssh.
//!
//! Main design choice: a pure planner and a thin applier. A TOML profile is
//! checked into a [`profile::Profile`] (unknown keys and wrong types fail
//! here, before anything is read or written); [`knob::build`] expands it
//! against the host [`host::Topology`] into knobs with stable identities
//! (`sysctl:net.core.somaxconn`, `rps:eth0:rx-0`, `irq:45`, `governor:cpu1`),
//! each carrying the *meaning* its value must have (a CPU set, a vector of
//! integers, a power of two); [`plan::Plan`] pairs them with what was read and
//! [`knob::compare`] judges each by meaning. Only [`apply`] writes, always
//! after an fsync'd [`snapshot`], and always through the [`fs::Fs`] door, so
//! everything but the kernel's own behaviour is testable on a temporary tree.
//! [`commands`] holds the rules of each command (what is drift, which
//! snapshot may be rolled back) as functions returning a [`report::Report`];
//! the binary only parses arguments, renders the report and exits with its code.

pub mod agents;
pub mod apply;
pub mod commands;
pub mod cpuset;
pub mod ethtool;
pub mod export;
pub mod fs;
pub mod fs_error;
pub mod host;
pub mod knob;
pub mod lock;
pub mod netns;
pub mod plan;
pub mod profile;
pub mod remote;
pub mod report;
pub mod snapshot;

#[cfg(test)]
pub(crate) mod testutil;
