//! Running a command on other hosts: through a transport template (`ssh -o
//! BatchMode=yes {host}`, `ip netns exec {host}`, `kubectl exec {host} --`),
//! several hosts at once, each one's stderr lines handed over as they come.
//! `xload --on` and xtune's `--ssh`/`--on` both run through here: one
//! runner, one quoting rule.
//!
//! ssh hands its arguments to the remote user's shell as one command line,
//! so for a transport whose program is ssh-like (its name contains `ssh`,
//! or is `rsh`) the command's words are quoted for a POSIX shell and sent
//! as one argument. Any other transport (`ip netns exec`, `kubectl exec`,
//! `docker exec`) runs a program directly and gets the words as they are.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

/// The transport of `xload --on` when none is given: the system's ssh
/// (which reads ~/.ssh/config), never prompting for a password.
pub const DEFAULT_TEMPLATE: &str = "ssh -o BatchMode=yes {host}";

/// The exit code that stands for "the transport itself failed" (ssh's own).
pub const TRANSPORT_FAILED: i32 = 255;

/// How to reach a host: the words of a command, with `{host}` in them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transport {
    words: Vec<String>,
    /// The command goes as one shell line (ssh), not as separate words.
    shell: bool,
}

impl Transport {
    /// Parses a template: words split on whitespace, `{host}` replaced by
    /// the host (appended as the last word when absent).
    pub fn parse(template: &str) -> Result<Transport, String> {
        let words: Vec<String> = template.split_whitespace().map(str::to_string).collect();
        let Some(program) = words.first() else {
            return Err("the transport template is empty (e.g. 'ssh {host}')".into());
        };
        if program.contains("{host}") {
            return Err(format!(
                "transport template {template:?}: its first word must be a program, not {{host}}"
            ));
        }
        let name = program.rsplit('/').next().unwrap_or(program);
        let shell = name.contains("ssh") || name == "rsh";
        Ok(Transport { words, shell })
    }

    /// A transport that always hands the command to a remote shell
    /// (`ssh -p 2222`, or a wrapper that behaves like ssh).
    pub fn remote_shell(words: Vec<String>) -> Transport {
        let words = if words.is_empty() {
            vec!["ssh".to_string()]
        } else {
            words
        };
        Transport { words, shell: true }
    }

    /// Whether the command travels as one shell line.
    pub fn is_shell(&self) -> bool {
        self.shell
    }

    /// The argv that runs `command` (program and arguments, unquoted) on `host`.
    pub fn argv(&self, host: &str, command: &[String]) -> Result<Vec<String>, String> {
        if host.is_empty() || host.starts_with('-') || host.contains(char::is_whitespace) {
            return Err(format!("`{host}` is not a host"));
        }
        let mut argv: Vec<String> = self
            .words
            .iter()
            .map(|w| w.replace("{host}", host))
            .collect();
        if !self.words.iter().any(|w| w.contains("{host}")) {
            argv.push(host.to_string());
        }
        if self.shell {
            let line: Vec<String> = command.iter().map(|w| shell_quote(w)).collect();
            argv.push(line.join(" "));
        } else {
            argv.extend(command.iter().cloned());
        }
        Ok(argv)
    }
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// What a command returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// Exit code ([`TRANSPORT_FAILED`] when it could not run or died by a signal).
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `argv` with `stdin` (none: /dev/null), capturing stdout and stderr;
/// each stderr line is also given to `on_line` as it arrives.
pub fn run(argv: &[String], stdin: Option<&str>, on_line: &mut dyn FnMut(&str)) -> Output {
    let failed = |why: String| Output {
        exit_code: TRANSPORT_FAILED,
        stdout: String::new(),
        stderr: why,
    };
    let Some(program) = argv.first() else {
        return failed("no command to run".into());
    };
    let mut child = match Command::new(program)
        .args(&argv[1..])
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot run {program}: {e}")),
    };
    let (pipe_in, mut pipe_out, pipe_err) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let stdout = std::thread::scope(|s| {
        if let (Some(text), Some(mut pipe)) = (stdin, pipe_in) {
            // A command that exits early closes the pipe; its exit code tells why.
            s.spawn(move || {
                let _ = pipe.write_all(text.as_bytes());
            });
        }
        let out = s.spawn(move || {
            let mut buf = Vec::new();
            if let Some(p) = pipe_out.as_mut() {
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        });
        let mut err = String::new();
        if let Some(p) = pipe_err {
            for line in BufReader::new(p).split(b'\n').map_while(Result::ok) {
                let line = String::from_utf8_lossy(&line);
                on_line(&line);
                err.push_str(&line);
                err.push('\n');
            }
        }
        (out.join().unwrap_or_default(), err)
    });
    let exit_code = match child.wait() {
        Ok(status) => status.code().unwrap_or(TRANSPORT_FAILED),
        Err(e) => return failed(format!("waiting for {program}: {e}")),
    };
    Output {
        exit_code,
        stdout: stdout.0,
        stderr: stdout.1,
    }
}

/// Runs `argv` with stdout and stderr passed through; its exit code, or
/// None when it could not run or died by a signal (the message on stderr).
pub fn run_passthrough(argv: &[String], stdin: Option<&str>) -> Result<Option<i32>, String> {
    let program = argv.first().ok_or("no command to run")?;
    let mut child = Command::new(program)
        .args(&argv[1..])
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {program}: {e}"))?;
    Ok(status.code())
}

/// One command of [`run_all`]: its argv and stdin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub argv: Vec<String>,
    pub stdin: Option<String>,
}

/// Runs every job at once; `on_line(job, line)` sees each stderr line as it
/// arrives (from several threads). Outputs are in the order of `jobs`.
pub fn run_all(jobs: &[Job], on_line: &(dyn Fn(usize, &str) + Sync)) -> Vec<Output> {
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .enumerate()
            .map(|(i, job)| {
                s.spawn(move || run(&job.argv, job.stdin.as_deref(), &mut |l| on_line(i, l)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Output {
                    exit_code: TRANSPORT_FAILED,
                    stdout: String::new(),
                    stderr: "the runner thread panicked".into(),
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shell_quoting_survives_spaces_quotes_and_metacharacters() {
        assert_eq!(shell_quote("verify"), "verify");
        assert_eq!(shell_quote("--settle=5s"), "--settle=5s");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("$(reboot)"), "'$(reboot)'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn ssh_gets_one_quoted_line_and_exec_transports_get_words() {
        let cmd = words(&["xload", "-H", "X-A: b", "http://t/"]);
        let ssh = Transport::parse(DEFAULT_TEMPLATE).unwrap();
        assert_eq!(
            ssh.argv("gen1", &cmd).unwrap(),
            words(&[
                "ssh",
                "-o",
                "BatchMode=yes",
                "gen1",
                "xload -H 'X-A: b' http://t/"
            ])
        );
        let ns = Transport::parse("ip netns exec {host}").unwrap();
        assert!(!ns.is_shell());
        assert_eq!(
            ns.argv("ns1", &cmd).unwrap(),
            words(&[
                "ip",
                "netns",
                "exec",
                "ns1",
                "xload",
                "-H",
                "X-A: b",
                "http://t/"
            ])
        );
        // No {host}: appended, as for `ssh -p 2222`.
        let port = Transport::parse("/usr/bin/ssh -p 2222").unwrap();
        assert_eq!(
            port.argv("h", &words(&["x"])).unwrap(),
            words(&["/usr/bin/ssh", "-p", "2222", "h", "x"])
        );
        assert!(Transport::remote_shell(words(&["fake-wrapper"])).is_shell());
    }

    #[test]
    fn bad_templates_and_hosts_are_refused() {
        assert!(Transport::parse("  ").is_err());
        assert!(Transport::parse("{host} x").is_err());
        let t = Transport::parse("ssh {host}").unwrap();
        for bad in ["", "-oProxyCommand=x", "a b"] {
            assert!(t.argv(bad, &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn jobs_run_at_once_with_their_lines_streamed_and_output_kept() {
        let sh = |script: &str| Job {
            argv: words(&["sh", "-c", script]),
            stdin: None,
        };
        let jobs = [
            sh("echo one >&2; echo out; exit 3"),
            Job {
                argv: words(&["sh", "-c", "cat; echo two >&2"]),
                stdin: Some("piped".into()),
            },
            Job {
                argv: words(&["/nonexistent/program"]),
                stdin: None,
            },
        ];
        let seen = std::sync::Mutex::new(Vec::new());
        let outs = run_all(&jobs, &|i, l| seen.lock().unwrap().push((i, l.to_string())));
        assert_eq!((outs[0].exit_code, outs[0].stdout.as_str()), (3, "out\n"));
        assert_eq!((outs[1].exit_code, outs[1].stdout.as_str()), (0, "piped"));
        assert_eq!(outs[2].exit_code, TRANSPORT_FAILED);
        assert!(outs[2].stderr.contains("/nonexistent/program"));
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, [(0, "one".to_string()), (1, "two".to_string())]);
    }
}
