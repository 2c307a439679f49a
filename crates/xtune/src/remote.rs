//! Remote targets: `--ssh HOST` runs the same xtune command on HOST through
//! the system's ssh (xtune installed there) and passes its report through;
//! `--on ROLE=HOST` (or a profile's `[hosts]` table) runs it on several hosts
//! at once and combines their JSON reports into one.
//!
//! The profile travels on stdin, already merged (`extends` resolved locally),
//! so it need not exist on the remote host. `XTUNE_SSH` replaces the ssh
//! program (split on whitespace, e.g. `ssh -p 2222`); `XTUNE_REMOTE_BIN`
//! replaces the remote command (`xtune`; split on whitespace too, e.g.
//! `sudo xtune` for a login that is not root). Host `local` runs this binary
//! directly, without ssh. Quoting and running go through
//! `xload_sys::remote`, the runner `xload --on` uses too.

use xload_sys::remote::{self as runner, Transport};

use crate::report::{worst_exit, HostReport, MultiReport, Report};

/// Environment variable that overrides the ssh program.
pub const SSH_ENV: &str = "XTUNE_SSH";
/// Environment variable that overrides the remote xtune command.
pub const REMOTE_BIN_ENV: &str = "XTUNE_REMOTE_BIN";

/// What a remote run returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteOutput {
    /// Exit code (255 when ssh itself failed, as ssh does).
    pub exit_code: i32,
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

/// One remote run to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteJob {
    /// Role name (`client`), or the host for `--ssh`.
    pub role: String,
    /// ssh destination, or `local`.
    pub host: String,
    /// xtune arguments (after the program name).
    pub args: Vec<String>,
    /// Profile text for stdin.
    pub stdin: Option<String>,
}

/// Quotes `s` for a POSIX shell (the remote side of ssh runs one).
pub use xload_sys::remote::shell_quote;

/// The remote command's words (`sudo xtune` is two words; quoted as one,
/// the remote shell looked for a program named `sudo xtune`). Empty: `xtune`.
fn remote_words(bin: &str) -> Vec<String> {
    let words: Vec<String> = bin.split_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        vec!["xtune".into()]
    } else {
        words
    }
}

/// The argv that runs `job`: ssh HOST 'xtune' 'args'..., or this binary for `local`.
pub fn command_line(job: &RemoteJob) -> Result<Vec<String>, String> {
    if job.host == "local" {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find this xtune binary: {e}"))?;
        let mut argv = vec![exe.to_string_lossy().into_owned()];
        argv.extend(job.args.iter().cloned());
        return Ok(argv);
    }
    if job.host.starts_with('-') {
        return Err(format!("`{}` is not a host", job.host));
    }
    let ssh = std::env::var(SSH_ENV).unwrap_or_else(|_| "ssh".into());
    let transport = Transport::remote_shell(ssh.split_whitespace().map(str::to_string).collect());
    let bin = std::env::var(REMOTE_BIN_ENV).unwrap_or_else(|_| "xtune".into());
    let mut remote = remote_words(&bin);
    remote.extend(job.args.iter().cloned());
    transport.argv(&job.host, &remote)
}

/// Runs `job`, capturing stdout and stderr.
pub fn run_captured(job: &RemoteJob) -> RemoteOutput {
    match command_line(job) {
        Ok(argv) => from_runner(runner::run(&argv, job.stdin.as_deref(), &mut |_| {})),
        Err(e) => RemoteOutput {
            exit_code: 2,
            stdout: String::new(),
            stderr: e,
        },
    }
}

fn from_runner(o: runner::Output) -> RemoteOutput {
    RemoteOutput {
        exit_code: o.exit_code,
        stdout: o.stdout,
        stderr: o.stderr,
    }
}

/// Runs `job` with stdout and stderr passed through; returns its exit code.
pub fn run_passthrough(job: &RemoteJob) -> i32 {
    let argv = match command_line(job) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xtune: {e}");
            return 2;
        }
    };
    match runner::run_passthrough(&argv, job.stdin.as_deref()) {
        Ok(Some(c @ 0..=3)) => c,
        // ssh's own failure (255), a signal: the remote command was not done.
        Ok(other) => {
            let how = other.map_or_else(|| "a signal".to_string(), |c| format!("exit {c}"));
            eprintln!(
                "xtune: {} ended with {how}: the remote command could not be done (exit 1)",
                argv[0]
            );
            1
        }
        Err(e) => {
            eprintln!("xtune: {e}");
            1
        }
    }
}

/// Runs every job at once (the args must ask for `--json`) and combines the reports.
pub fn run_many(jobs: &[RemoteJob]) -> MultiReport {
    // A job whose command line is refused runs nothing and says why (exit 2).
    let lines: Vec<Result<Vec<String>, String>> = jobs.iter().map(command_line).collect();
    let runnable: Vec<runner::Job> = jobs
        .iter()
        .zip(&lines)
        .filter_map(|(j, l)| {
            l.as_ref().ok().map(|argv| runner::Job {
                argv: argv.clone(),
                stdin: j.stdin.clone(),
            })
        })
        .collect();
    let mut ran = runner::run_all(&runnable, &|_, _| {}).into_iter();
    let outputs: Vec<RemoteOutput> = lines
        .into_iter()
        .map(|l| match l {
            Ok(_) => ran.next().map(from_runner).unwrap_or_default(),
            Err(e) => RemoteOutput {
                exit_code: 2,
                stdout: String::new(),
                stderr: e,
            },
        })
        .collect();
    let hosts: Vec<HostReport> = jobs
        .iter()
        .zip(outputs)
        .map(|(job, out)| {
            let report = serde_json::from_str::<Report>(out.stdout.trim()).ok();
            let stderr = if report.is_some() {
                String::new()
            } else if out.stderr.trim().is_empty() {
                out.stdout.clone()
            } else {
                out.stderr.clone()
            };
            HostReport {
                role: job.role.clone(),
                host: job.host.clone(),
                exit_code: out.exit_code,
                report,
                stderr,
            }
        })
        .collect();
    MultiReport {
        schema: "xtune-multi/1".into(),
        exit_code: worst_exit(hosts.iter().map(|h| h.exit_code)),
        hosts,
    }
}

/// Parses `ROLE=HOST`.
pub fn parse_on(s: &str) -> Result<(String, String), String> {
    let (role, host) = s
        .split_once('=')
        .ok_or_else(|| format!("--on `{s}`: expected ROLE=HOST, e.g. client=gen1"))?;
    if role.is_empty()
        || !role
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!("--on `{s}`: `{role}` is not a role name"));
    }
    if host.is_empty() || host.starts_with('-') {
        return Err(format!("--on `{s}`: `{host}` is not a host"));
    }
    Ok((role.to_string(), host.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_command_is_split_into_words_each_quoted_for_ssh() {
        assert_eq!(remote_words("sudo xtune"), vec!["sudo", "xtune"]);
        assert_eq!(
            remote_words(" /opt/x tune/xtune "),
            vec!["/opt/x", "tune/xtune"]
        );
        assert_eq!(remote_words("  "), vec!["xtune"]);
        let job = RemoteJob {
            role: "client".into(),
            host: "gen1".into(),
            args: vec!["verify".into(), "a b".into()],
            stdin: None,
        };
        let argv = command_line(&job).unwrap();
        assert_eq!(argv[argv.len() - 2], "gen1");
        assert!(argv[argv.len() - 1].ends_with("verify 'a b'"), "{argv:?}");
    }

    #[test]
    fn on_arguments_need_role_and_host() {
        assert_eq!(
            parse_on("client=gen1").unwrap(),
            ("client".into(), "gen1".into())
        );
        assert_eq!(parse_on("server=root@10.0.0.2").unwrap().1, "root@10.0.0.2");
        assert!(parse_on("client").is_err());
        assert!(parse_on("=h").is_err());
        assert!(parse_on("c=-oProxyCommand=x").is_err());
    }
}
