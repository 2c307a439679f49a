//! The error taxonomy: one fieldless kind per cause a user can act on, plus
//! names for the `errno` values that land in [`ErrorKind::Other`].

/// Why a request or a connection failed. Fieldless so that a worker counts it
/// in a fixed array slot on the hot path (`kind as usize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ErrorKind {
    /// `connect` answered ECONNREFUSED: nothing listens on the port.
    ConnectRefused,
    /// The connection was not established within the connect timeout.
    ConnectTimeout,
    /// The peer reset the connection (ECONNRESET / EPIPE).
    Reset,
    /// The peer closed the connection with a request outstanding and no
    /// byte of its response received.
    Closed,
    /// The peer closed the connection part-way through a response.
    EofMidResponse,
    /// The response could not be parsed (see the per-cause breakdown).
    Parse,
    /// No complete response within the request timeout.
    RequestTimeout,
    /// A socket could not be created: the process or system ran out of file
    /// descriptors (EMFILE / ENFILE).
    FdLimit,
    /// `connect` found no free local port (EADDRNOTAVAIL).
    NoEphemeralPort,
    /// A response failed a workload check (status set, size, SHA-256, byte
    /// strings): the server answered, but not correctly.
    Consistency,
    /// https: the server's certificate did not verify (unknown issuer, wrong
    /// name, expired): see `--cacert` and `--insecure`.
    TlsUntrusted,
    /// https: the TLS handshake failed: the peer sent an alert (no common
    /// version or cipher) or broke the protocol.
    TlsHandshake,
    /// https: the peer closed (FIN or RST) before the handshake completed.
    TlsClosedInHandshake,
    /// https: TCP connected but the TLS handshake did not complete within
    /// the handshake timeout.
    TlsHandshakeTimeout,
    /// https: the server answered with something that is not TLS (a plain
    /// HTTP server on an https:// URL).
    NotTls,
    /// HTTP/2: the server reset a stream (RST_STREAM with a code other than
    /// REFUSED_STREAM, which is retried): counted per code in the report's `h2`.
    H2StreamReset,
    /// HTTP/2: the connection broke the protocol (a connection error, or
    /// SETTINGS never acknowledged): counted per cause in the report's `h2`.
    H2Connection,
    /// Anything else; counted per errno by [`crate::Recorder::record_errno`].
    Other,
}

impl ErrorKind {
    /// Number of kinds (the size of a per-kind counter array).
    pub const COUNT: usize = 18;

    /// Every kind, in the order reports print them.
    pub const ALL: [ErrorKind; ErrorKind::COUNT] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::Reset,
        ErrorKind::Closed,
        ErrorKind::EofMidResponse,
        ErrorKind::Parse,
        ErrorKind::RequestTimeout,
        ErrorKind::FdLimit,
        ErrorKind::NoEphemeralPort,
        ErrorKind::Consistency,
        ErrorKind::TlsUntrusted,
        ErrorKind::TlsHandshake,
        ErrorKind::TlsClosedInHandshake,
        ErrorKind::TlsHandshakeTimeout,
        ErrorKind::NotTls,
        ErrorKind::H2StreamReset,
        ErrorKind::H2Connection,
        ErrorKind::Other,
    ];

    /// The key used in the JSON `errors` map and in the text report.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Closed => "closed",
            ErrorKind::EofMidResponse => "eof_mid_response",
            ErrorKind::Parse => "parse",
            ErrorKind::RequestTimeout => "request_timeout",
            ErrorKind::FdLimit => "fd_limit",
            ErrorKind::NoEphemeralPort => "no_ephemeral_port",
            ErrorKind::Consistency => "consistency",
            ErrorKind::TlsUntrusted => "tls_untrusted_certificate",
            ErrorKind::TlsHandshake => "tls_handshake_failed",
            ErrorKind::TlsClosedInHandshake => "tls_closed_in_handshake",
            ErrorKind::TlsHandshakeTimeout => "tls_handshake_timeout",
            ErrorKind::NotTls => "not_tls",
            ErrorKind::H2StreamReset => "h2_stream_reset",
            ErrorKind::H2Connection => "h2_connection_error",
            ErrorKind::Other => "other",
        }
    }

    /// The kind whose [`name`](Self::name) is `name`, if any.
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind an `errno` from a socket call belongs to: the ones with a
    /// category of their own map to it, everything else is [`ErrorKind::Other`].
    /// [`crate::Recorder::record_errno`] applies this mapping first.
    /// ETIMEDOUT stays `Other`: after the handshake it means a retransmission
    /// or keep-alive timeout, not a connect timeout, so the engine reports
    /// connect timeouts itself.
    pub fn from_errno(errno: i32) -> ErrorKind {
        match errno {
            libc::ECONNREFUSED => ErrorKind::ConnectRefused,
            libc::ECONNRESET | libc::EPIPE => ErrorKind::Reset,
            libc::EMFILE | libc::ENFILE => ErrorKind::FdLimit,
            libc::EADDRNOTAVAIL => ErrorKind::NoEphemeralPort,
            _ => ErrorKind::Other,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! errno_table {
    ($($name:ident),* $(,)?) => {
        /// The symbolic name of `errno` ("ENOBUFS"), for the errno values a
        /// network client meets; `None` for others.
        pub fn errno_symbol(errno: i32) -> Option<&'static str> {
            // Guards instead of patterns: some constants alias each other on
            // Linux (EAGAIN == EWOULDBLOCK), which patterns would reject.
            $( if errno == libc::$name { return Some(stringify!($name)); } )*
            None
        }
    };
}

errno_table![
    EPERM,
    ENOENT,
    EINTR,
    EIO,
    EBADF,
    EAGAIN,
    ENOMEM,
    EACCES,
    EFAULT,
    EINVAL,
    ENFILE,
    EMFILE,
    ENOSPC,
    EPIPE,
    ENOSYS,
    ENOTSOCK,
    EMSGSIZE,
    EPROTOTYPE,
    ENOPROTOOPT,
    EPROTONOSUPPORT,
    EOPNOTSUPP,
    EAFNOSUPPORT,
    EADDRINUSE,
    EADDRNOTAVAIL,
    ENETDOWN,
    ENETUNREACH,
    ENETRESET,
    ECONNABORTED,
    ECONNRESET,
    ENOBUFS,
    EISCONN,
    ENOTCONN,
    ESHUTDOWN,
    ETIMEDOUT,
    ECONNREFUSED,
    EHOSTDOWN,
    EHOSTUNREACH,
    EALREADY,
    EINPROGRESS,
    ECANCELED,
    EPROTO,
    ETIME,
    EBUSY,
    ENODEV,
    ENXIO,
    EOVERFLOW,
    ERANGE,
];

/// The JSON key for an errno counted under `other`: `"errno_ENOBUFS"`, or
/// `"errno_<n>"` when the number has no known name.
pub fn errno_key(errno: i32) -> String {
    match errno_symbol(errno) {
        Some(sym) => format!("errno_{sym}"),
        None => format!("errno_{errno}"),
    }
}
