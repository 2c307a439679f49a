//! Free ports, temp dirs, and running the built `xload` binary with a hard timeout.

use std::ffi::OsStr;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Hard timeout of [`run_xload`]: far above any bounded test run, low enough
/// that a hang fails the test instead of the CI job.
pub(crate) const DEFAULT_XLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Path of the `xload` binary cargo built for these integration tests.
pub(crate) fn xload_bin() -> &'static str {
    env!("CARGO_BIN_EXE_xload")
}

/// A loopback TCP port that was free a moment ago, chosen below the kernel's
/// ephemeral range: a port from that range can be taken as the source port of
/// any outgoing connect (a load test opens thousands), and a connect to it
/// before the server listens can connect to itself and look like readiness.
pub(crate) fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Ports 20000..low-1 (low = first ephemeral port), walked from a
    // per-process offset so parallel tests and test binaries rarely meet.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768)
        .clamp(21000, 65535);
    let span = low - 20000;
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20000 + (start + n.wrapping_mul(13)) % span;
        if TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener
        .local_addr()
        .expect("local_addr of a bound listener")
        .port()
}

pub(crate) use xload_testkit::TempDir;

/// What a finished (or killed) command left.
#[derive(Debug)]
pub(crate) struct CommandOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From spawn to exit (or to the kill).
    pub elapsed: Duration,
    /// True when the timeout fired and the process group was killed.
    pub timed_out: bool,
}

/// A spawned child with its output collected in the background. The child is
/// the leader of its own process group, so a kill reaches anything it spawned.
pub(crate) struct XloadChild {
    child: Child,
    started: Instant,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
    finished: bool,
}

fn collect<R: Read + Send + 'static>(mut pipe: R) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

impl XloadChild {
    /// Spawns `command` with piped stdout/stderr and no stdin.
    pub(crate) fn spawn(mut command: Command) -> XloadChild {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // A test run started in the background of a shell without job
        // control inherits SIGINT ignored, and an ignored signal stays
        // ignored across exec: the child gets the default back, so that
        // what a test sends it means what it means in a terminal.
        // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
        let stdout = child.stdout.take().map(collect);
        let stderr = child.stderr.take().map(collect);
        XloadChild {
            child,
            started,
            stdout,
            stderr,
            finished: false,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (e.g. `libc::SIGINT`) to the child only.
    pub(crate) fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our
        // own child, not yet reaped (so not reused) while `self` is alive and
        // `finished` is false.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert!(
            rc == 0 || self.finished,
            "kill({}, {signal}): {}",
            self.child.id(),
            std::io::Error::last_os_error()
        );
    }

    /// Ctrl-C: SIGINT to the child.
    pub(crate) fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }

    fn kill_group(&mut self) {
        // SAFETY: as in `signal`; a negative pid names the child's process
        // group, which `spawn` made the child lead.
        unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
    }

    /// Waits up to `timeout` for the exit; past it, kills the process group
    /// and reports `timed_out`.
    pub(crate) fn wait_timeout(mut self, timeout: Duration) -> CommandOutput {
        let deadline = self.started + timeout;
        let mut timed_out = false;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    timed_out = true;
                    self.kill_group();
                    break self.child.wait().expect("wait for killed child");
                }
                Ok(None) => thread::sleep(Duration::from_millis(5)),
                Err(e) => panic!("try_wait on child {}: {e}", self.child.id()),
            }
        };
        let elapsed = self.started.elapsed();
        self.finished = true;
        // Anything the child left behind in its group must not hold the pipes open.
        self.kill_group();
        let text = |handle: Option<JoinHandle<Vec<u8>>>| {
            handle
                .map(|h| String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned())
                .unwrap_or_default()
        };
        let stdout = text(self.stdout.take());
        let stderr = text(self.stderr.take());
        CommandOutput {
            status,
            stdout,
            stderr,
            elapsed,
            timed_out,
        }
    }
}

impl Drop for XloadChild {
    fn drop(&mut self) {
        if !self.finished {
            self.kill_group();
            let _ = self.child.wait();
        }
    }
}

/// Runs `command` to completion or until `timeout`, whichever comes first.
pub(crate) fn run_command_with_timeout(command: Command, timeout: Duration) -> CommandOutput {
    XloadChild::spawn(command).wait_timeout(timeout)
}

fn xload_command<I>(args: I) -> Command
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    let mut command = Command::new(xload_bin());
    command.args(args);
    command
}

/// Spawns `xload ARGS` in the background (e.g. to send it SIGINT).
pub(crate) fn spawn_xload<I>(args: I) -> XloadChild
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    XloadChild::spawn(xload_command(args))
}

/// Runs `xload ARGS` and returns `(exit status, stdout, stderr, elapsed)`.
/// Panics (with the output so far) if it runs past `timeout`; the process
/// group is killed first.
pub(crate) fn run_xload_with_timeout<I>(
    args: I,
    timeout: Duration,
) -> (ExitStatus, String, String, Duration)
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    let command = xload_command(args);
    let shown = format!("{command:?}");
    let output = run_command_with_timeout(command, timeout);
    assert!(
        !output.timed_out,
        "{shown} still running after {timeout:?}: killed\n--- stdout\n{}\n--- stderr\n{}",
        output.stdout, output.stderr
    );
    (output.status, output.stdout, output.stderr, output.elapsed)
}

/// [`run_xload_with_timeout`] with [`DEFAULT_XLOAD_TIMEOUT`].
pub(crate) fn run_xload<I>(args: I) -> (ExitStatus, String, String, Duration)
where
    I: IntoIterator,
    I::Item: AsRef<OsStr>,
{
    run_xload_with_timeout(args, DEFAULT_XLOAD_TIMEOUT)
}

/// Exit code, or `128 + signal` when the process was killed by a signal
/// (the shell's convention), for short assertion messages.
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Reads and parses a JSON report written by `xload --json PATH`.
pub(crate) fn read_json(path: impl AsRef<Path>) -> serde_json::Value {
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}\n{text}", path.display()))
}

/// Waits (10 s at most, else panics) until something accepts connections on
/// 127.0.0.1:`port`: a server the test just spawned. Ports come from
/// [`free_port`], below the ephemeral range, so no stray connect answers.
pub(crate) fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// What `xload ARGS --json PATH` left: its exit code, output and JSON
/// report (`Null` when it wrote none).
pub(crate) struct JsonRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub json: serde_json::Value,
}

impl JsonRun {
    /// Both outputs, for assertion messages.
    pub(crate) fn show(&self) -> String {
        format!("--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// Runs `xload ARGS --json DIR/run-K.json` (a new K each call) within
/// `timeout`, checks that it did not panic, and reads the report it wrote.
pub(crate) fn run_json(dir: &TempDir, args: &[&str], timeout: Duration) -> JsonRun {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let path = dir.join(format!("run-{}.json", NEXT.fetch_add(1, Ordering::Relaxed)));
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(["--json".to_string(), path.display().to_string()]);
    let (status, stdout, stderr, _) = run_xload_with_timeout(&all, timeout);
    assert!(!stderr.contains("panicked"), "xload {all:?}\n{stderr}");
    let json = if path.exists() {
        read_json(&path)
    } else {
        serde_json::Value::Null
    };
    JsonRun {
        code: exit_code(status),
        stdout,
        stderr,
        json,
    }
}
