//! File-descriptor limits: a client needs one per connection, a server as
//! many as it may get.

use crate::Failure;

/// Raises the soft RLIMIT_NOFILE to the hard one (a server takes as many
/// connections as it may; clients are checked by [`ensure_fd_limit`]).
pub(crate) fn raise_fd_soft_limit() {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rl is a valid out-parameter, then a valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 && rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

/// Raises RLIMIT_NOFILE to what `connections` needs, or says how.
pub(crate) fn ensure_fd_limit(connections: usize) -> Result<(), Failure> {
    let need = connections as u64 + 256;
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rl is a valid out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Ok(());
    }
    if rl.rlim_cur >= need {
        return Ok(());
    }
    if rl.rlim_max >= need {
        let new = libc::rlimit {
            rlim_cur: need.max(rl.rlim_cur),
            rlim_max: rl.rlim_max,
        };
        // SAFETY: new is a valid rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } == 0 {
            return Ok(());
        }
    }
    Err(Failure::Run(format!(
        "-c {connections} needs about {need} file descriptors but the limit is {} (hard {}): raise it with `ulimit -n {need}` \
         (as root, or LimitNOFILE={need} in a systemd unit; tuning/loadgen.toml's [limits] names it)",
        rl.rlim_cur, rl.rlim_max
    )))
}
