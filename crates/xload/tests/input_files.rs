//! Files given on the command line (reports to merge, a request body, a
//! workload, a manifest, a certificate and its key) are read only when they
//! are regular files, and only up to a stated limit: a FIFO with no writer
//! must not hang xload, /dev/zero must not eat memory, a directory is no
//! input. Each is a bad argument (exit 2) naming the file, made before any
//! connection or listening socket.
//!
//! Every case puts the FIFO first: a build without the check hangs there
//! and is killed by the timeout, before /dev/zero could eat memory.

mod support;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use support::run::{exit_code, run_command_with_timeout, xload_bin};
use support::{Behavior, TempDir, TestServer};

/// Each invocation answers at once; a hang is killed well before this.
const HARD_TIMEOUT: Duration = Duration::from_secs(10);

/// The bad inputs: (path, what the message must say).
fn bad_inputs(dir: &TempDir, limit_mib: u64) -> Vec<(String, &'static str)> {
    let fifo = dir.join("fifo");
    let c = CString::new(fifo.as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: mkfifo with a NUL-terminated path owned here.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let sub = dir.join("a-directory");
    std::fs::create_dir_all(&sub).expect("mkdir");
    // One byte over the limit, sparse: no disk, no memory.
    let big = dir.join("too-big");
    let f = std::fs::File::create(&big).expect("create");
    f.set_len((limit_mib << 20) + 1).expect("set_len");
    vec![
        (fifo.display().to_string(), "not a regular file"),
        (sub.display().to_string(), "not a regular file"),
        (big.display().to_string(), "limit"),
        ("/dev/zero".to_string(), "not a regular file"),
    ]
}

/// Runs `xload ARGS` (bounded) and asserts a prompt exit 2 whose message
/// names `path` and says `why`.
fn assert_refused(args: &[&str], path: &str, why: &str, limit_mib: u64) {
    let mut command = std::process::Command::new(xload_bin());
    command.args(args);
    let out = run_command_with_timeout(command, HARD_TIMEOUT);
    let show = format!(
        "xload {args:?}: exit {} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
        exit_code(out.status),
        out.elapsed,
        out.stdout,
        out.stderr
    );
    assert!(!out.timed_out, "hung on {path}: killed\n{show}");
    assert_eq!(exit_code(out.status), 2, "{show}");
    assert!(out.stderr.contains(path), "names the file\n{show}");
    assert!(out.stderr.contains(why), "says {why:?}\n{show}");
    if why == "limit" {
        assert!(
            out.stderr.contains(&format!("{limit_mib} MiB")),
            "states the limit\n{show}"
        );
    }
    assert!(!out.stderr.contains("panicked"), "{show}");
}

#[test]
fn merge_refuses_a_fifo_a_device_a_directory_and_a_file_over_256_mib() {
    let dir = TempDir::new("input-merge");
    for (path, why) in bad_inputs(&dir, 256) {
        assert_refused(&["merge", &path], &path, why, 256);
    }
}

#[test]
fn body_file_refuses_a_fifo_a_device_a_directory_and_a_file_over_64_mib() {
    let dir = TempDir::new("input-body");
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let url = server.url("/");
    for (path, why) in bad_inputs(&dir, 64) {
        let args = [
            &url,
            "-m",
            "POST",
            "--body-file",
            &path,
            "-n",
            "1",
            "-c",
            "1",
        ];
        assert_refused(&args, &path, why, 64);
    }
    assert_eq!(server.accepted(), 0, "refused before connecting");
}

#[test]
fn a_workload_file_is_refused_when_not_a_regular_file_of_at_most_16_mib() {
    let dir = TempDir::new("input-workload");
    for (path, why) in bad_inputs(&dir, 16) {
        assert_refused(&["run", &path, "http://127.0.0.1:9/"], &path, why, 16);
    }
    // A body file named inside a workload is read the same way.
    let fifo = dir.join("fifo");
    let w = dir.join("w.toml");
    std::fs::write(
        &w,
        format!(
            "url = \"http://127.0.0.1:9/\"\n[classes.up]\nmethod = \"POST\"\npath = \"/\"\nbody = {{ file = \"{}\" }}\n",
            fifo.display()
        ),
    )
    .expect("write");
    let path = fifo.display().to_string();
    assert_refused(
        &["run", &w.display().to_string()],
        &path,
        "not a regular file",
        64,
    );
}

#[test]
fn files_verify_refuses_such_a_manifest() {
    let dir = TempDir::new("input-manifest");
    let set = dir.join("set");
    std::fs::create_dir_all(&set).expect("mkdir");
    let set = set.display().to_string();
    for (path, why) in bad_inputs(&dir, 256) {
        let args = ["files", "verify", &set, "--manifest", &path];
        assert_refused(&args, &path, why, 256);
    }
}

#[test]
fn serve_tls_refuses_such_a_certificate_or_key_and_the_client_such_a_cacert() {
    let dir = TempDir::new("input-cert");
    let port = support::free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let (cert, key) = support::tls::SelfSigned::new(&["localhost"]).write(&dir);
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    for (path, why) in bad_inputs(&dir, 16) {
        for (c, k) in [
            (path.as_str(), key.as_str()),
            (cert.as_str(), path.as_str()),
        ] {
            let args = [
                "serve", "--listen", &listen, "--tls", "--cert", c, "--key", k,
            ];
            assert_refused(&args, &path, why, 16);
        }
        let args = [
            "https://127.0.0.1:9/",
            "--cacert",
            &path,
            "-n",
            "1",
            "-c",
            "1",
        ];
        assert_refused(&args, &path, why, 16);
    }
    assert!(Path::new(&cert).is_file());
}

#[test]
fn files_verify_does_not_hang_on_a_fifo_in_place_of_a_listed_file() {
    let dir = TempDir::new("input-set-fifo");
    let set = dir.join("set");
    let set_arg = set.display().to_string();
    let mut command = std::process::Command::new(xload_bin());
    command.args(["files", "generate", &set_arg, "--count", "3"]);
    let out = run_command_with_timeout(command, HARD_TIMEOUT);
    assert!(out.status.success(), "{}", out.stderr);
    let listed = set.join("dir000/file00001.bin");
    std::fs::remove_file(&listed).expect("rm");
    let c = CString::new(listed.as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: mkfifo with a NUL-terminated path owned here.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let mut command = std::process::Command::new(xload_bin());
    command.args(["files", "verify", &set_arg]);
    let out = run_command_with_timeout(command, HARD_TIMEOUT);
    assert!(!out.timed_out, "hung on the FIFO: {}", out.stderr);
    assert_eq!(exit_code(out.status), 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("file00001.bin") && out.stderr.contains("not a regular file"),
        "{}",
        out.stderr
    );
}
