//! Where io_uring is denied (a container's default seccomp profile, or
//! `kernel.io_uring_disabled`), `--engine auto` runs on epoll and the report
//! says why once. The denial is a seccomp filter installed in the xload child
//! only (io_uring_setup fails with EPERM), so nothing on the host changes.

mod support;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use support::run::{run_command_with_timeout, xload_bin};
use support::{read_json, Behavior, TempDir, TestServer};

/// io_uring_setup(2): the same number on every Linux architecture.
const SYS_IO_URING_SETUP: u32 = 425;

/// Installs a seccomp filter on the calling thread: io_uring_setup fails with
/// EPERM, every other syscall is allowed. Runs between fork and exec, so it
/// only makes raw syscalls (prctl) on memory of its own stack.
fn deny_io_uring() -> std::io::Result<()> {
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    let insn = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let ld_w_abs = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let jeq_k = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    let ret_k = (libc::BPF_RET | libc::BPF_K) as u16;
    let mut prog = [
        // A = seccomp_data.nr
        insn(ld_w_abs, 0, 0, 0),
        insn(jeq_k, 0, 1, SYS_IO_URING_SETUP),
        insn(ret_k, 0, 0, SECCOMP_RET_ERRNO | libc::EPERM as u32),
        insn(ret_k, 0, 0, SECCOMP_RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: prctl with integer arguments; no pointers.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fprog` points at `prog`, both alive for the call; the kernel
    // copies the program before prctl returns.
    if unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &fprog as *const libc::sock_fprog,
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[test]
fn denied_io_uring_falls_back_to_epoll_and_says_why_once() {
    let server = TestServer::start(Behavior::Ok { body_len: 16 });
    let dir = TempDir::new("fallback");
    let json = dir.join("r.json");
    let mut cmd = Command::new(xload_bin());
    cmd.args(["-d", "300ms", "-c", "2", "-t", "1", "--json"])
        .arg(&json)
        .arg(server.url("/"));
    // SAFETY: the closure runs in the forked child before exec and only
    // calls deny_io_uring, which makes prctl syscalls on its own stack.
    unsafe { cmd.pre_exec(deny_io_uring) };
    let out = run_command_with_timeout(cmd, Duration::from_secs(20));
    assert!(!out.timed_out, "{}", out.stderr);
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let engine_line = out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Engine"))
        .unwrap_or_else(|| panic!("no Engine line:\n{}", out.stdout));
    assert!(
        engine_line.contains("epoll: io_uring unavailable"),
        "{engine_line}"
    );
    assert_eq!(engine_line.matches("epoll:").count(), 1, "{engine_line}");
    let r = read_json(&json);
    assert_eq!(r["engine"], "epoll", "{r:#}");
    let reason = r["engine_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("io_uring unavailable: "), "{reason}");
}
