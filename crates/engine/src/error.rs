//! What a run or a responder could not do, by kind (the drivers' own setup
//! failures stay strings: they are reasons shown as they are).

use std::fmt;

/// Why [`run`](crate::run), [`run_observed`](crate::run_observed),
/// [`probe_engine`](crate::probe_engine) or a responder's
/// [`Server::stop`](crate::serve::Server::stop) failed.
#[derive(Debug)]
pub enum Error {
    /// `--engine uring` chosen and io_uring cannot run here (the probe's reason).
    UringUnavailable(String),
    /// The plan has no worker.
    NoWorkers,
    /// A worker thread could not be started.
    Spawn(std::io::Error),
    /// A worker thread panicked: what it measured is lost.
    Panicked,
    /// `--engine xdp`: the AF_XDP socket or program could not be set up
    /// (no fallback: the run would not measure what was asked).
    Xdp(String),
    /// A responder worker stopped with an error, or panicked (None).
    Responder(Option<String>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UringUnavailable(why) => f.write_str(why),
            Error::NoWorkers => f.write_str("no workers"),
            Error::Spawn(e) => write!(f, "cannot start worker thread: {e}"),
            Error::Panicked => f.write_str("a worker thread panicked"),
            Error::Xdp(why) => f.write_str(why),
            Error::Responder(Some(why)) => f.write_str(why),
            Error::Responder(None) => f.write_str("responder worker panicked"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::Error;
    use std::error::Error as _;

    #[test]
    fn each_kind_says_what_failed_and_keeps_its_cause() {
        let spawn = Error::Spawn(std::io::Error::from_raw_os_error(libc::EAGAIN));
        assert!(spawn
            .to_string()
            .starts_with("cannot start worker thread: "));
        assert!(spawn.source().is_some());
        assert_eq!(Error::Panicked.to_string(), "a worker thread panicked");
        assert!(Error::Panicked.source().is_none());
        assert_eq!(
            Error::Responder(None).to_string(),
            "responder worker panicked"
        );
        let why = "pin to cpu 7: Invalid argument".to_string();
        assert_eq!(Error::Responder(Some(why.clone())).to_string(), why);
        assert_eq!(
            String::from(Error::Xdp("no such device".into())),
            "no such device"
        );
    }
}
