//! Report text on stdout for the binaries.

use std::io::Write;

/// Writes `text` to stdout and flushes. A reader that went away (`| head`)
/// is not an error: the work the text reports on is done and its exit code
/// and files stand. Other write errors are returned.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writing_to_the_test_harness_stdout_succeeds() {
        // The closed-pipe case is tested through the binaries (`| head -1`).
        assert!(write_stdout("").is_ok());
    }
}
