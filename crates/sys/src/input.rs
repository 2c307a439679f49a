//! Input files named on a command line (reports, request bodies, workloads,
//! manifests, certificates, tuning profiles), read whole with a stated
//! limit, and only when they are regular files: opening a FIFO nobody
//! writes to would block for ever, and a device such as `/dev/zero` never
//! ends. The file is opened without blocking and judged by `fstat` on the
//! open descriptor, so what is judged is what is read.
//!
//! Errors are `std::io::Error`s (kind `InvalidInput` or `FileTooLarge`)
//! whose message says what is wrong but not the path: every caller already
//! writes `PATH: error`.

use std::fs::{FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Tuning profiles, workload files, PEM certificates and keys.
pub const TEXT_LIMIT: u64 = 16 << 20;
/// Request bodies (`--body-file`, a workload's `body = { file = … }`),
/// as large as the largest generated body.
pub const BODY_LIMIT: u64 = 64 << 20;
/// JSON reports and file-set manifests.
pub const DATA_LIMIT: u64 = 256 << 20;

/// Reads the regular file at `path` (symbolic links followed), refusing
/// anything else and anything over `limit` bytes; `what` names the input
/// in the message ("a report", "the request body").
pub fn read(path: &Path, what: &str, limit: u64) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}, not a regular file: {what} is read from a file",
                kind(meta.file_type())
            ),
        ));
    }
    if meta.len() > limit {
        return Err(too_large(what, limit));
    }
    // O_NONBLOCK means nothing to a regular file's reads.
    read_limited(file, what, limit)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, what: &str, limit: u64) -> io::Result<String> {
    String::from_utf8(read(path, what, limit)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.utf8_error()))
}

/// Reads a stream (standard input) to its end, refusing it once it passes
/// `limit` bytes.
pub fn read_stream(r: impl Read, what: &str, limit: u64) -> io::Result<Vec<u8>> {
    read_limited(r, what, limit)
}

fn read_limited(r: impl Read, what: &str, limit: u64) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(too_large(what, limit));
    }
    Ok(buf)
}

fn too_large(what: &str, limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("larger than {}, the limit for {what}", size_text(limit)),
    )
}

/// A limit as it is stated: whole MiB, or bytes.
fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} B")
    }
}

/// What a file that is not a regular one is, for the message.
fn kind(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO nobody writes to: opening it to read would block.
    fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("no NUL");
        // SAFETY: mkfifo with a NUL-terminated path owned here.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    fn temp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("xsys-input-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_regular_file_up_to_the_limit_is_read_whole() {
        let d = temp("ok");
        let p = d.join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read(&p, "a test input", 10).unwrap(), b"0123456789");
        let e = read(&p, "a test input", 9).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(e.to_string(), "larger than 9 B, the limit for a test input");
        // Through a symbolic link.
        std::os::unix::fs::symlink(&p, d.join("l")).unwrap();
        assert_eq!(read_to_string(&d.join("l"), "x", 10).unwrap(), "0123456789");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_fifo_a_device_and_a_directory_are_refused_without_blocking() {
        let d = temp("kinds");
        let fifo = d.join("fifo");
        mkfifo(&fifo);
        for (p, what) in [
            (fifo.as_path(), "a FIFO (named pipe)"),
            (Path::new("/dev/zero"), "a character device"),
            (d.as_path(), "a directory"),
        ] {
            let e = read(p, "a report", DATA_LIMIT).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{p:?}");
            assert_eq!(
                e.to_string(),
                format!("{what}, not a regular file: a report is read from a file")
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_endless_stream_stops_at_the_limit() {
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let e = read_stream(zero, "the profile", TEXT_LIMIT).unwrap_err();
        assert_eq!(
            e.to_string(),
            "larger than 16 MiB, the limit for the profile"
        );
    }
}
