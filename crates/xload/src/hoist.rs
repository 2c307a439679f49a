//! Options given before a subcommand (`xload -d 1s sweep URL -c 1,2`,
//! `xload -z 1s run FILE URL`): moved after the subcommand's name before
//! clap reads the command line, so that they mean what they mean there.
//! `xload URL` direct runs are untouched. An option given both before and
//! after the subcommand: the one after wins (repeatable options, such as
//! -H or --fail-if, add up); one the subcommand does not take is a usage
//! error naming it.

use std::ffi::OsString;

use clap::{Arg, Command};

/// One word or two (`-d 1s`) of the command line naming an option.
struct Opt {
    /// The option's id in the command that knows it.
    id: String,
    /// As written (`-d`, `--duration`), for messages.
    name: String,
    /// Its words: `start..end` in the scanned slice.
    start: usize,
    end: usize,
}

/// What a scan of words stopped at.
enum Stop {
    /// A positional word at this index.
    Positional(usize),
    /// Nothing left, `--`, or an option `cmd` does not know: left to clap.
    Other,
}

/// The options at the start of `words` up to the first positional word.
fn scan(cmd: &Command, words: &[OsString]) -> (Vec<Opt>, Stop) {
    let mut opts = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let Some(w) = words[i].to_str() else {
            return (opts, Stop::Positional(i));
        };
        if w == "--" {
            return (opts, Stop::Other);
        }
        let found = if let Some(long) = w.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            cmd.get_arguments()
                .find(|a| {
                    a.get_long_and_visible_aliases()
                        .is_some_and(|l| l.contains(&name))
                })
                .map(|a| (a, !inline && takes_value(a)))
        } else if let Some(cluster) = w.strip_prefix('-').filter(|c| !c.is_empty()) {
            // `-qd 1s`: flags, then at most one option whose value is the
            // rest of the word or the next one.
            let mut last = None;
            for (at, c) in cluster.char_indices() {
                let Some(a) = cmd.get_arguments().find(|a| {
                    a.get_short_and_visible_aliases()
                        .is_some_and(|s| s.contains(&c))
                }) else {
                    return (opts, Stop::Other);
                };
                if takes_value(a) {
                    last = Some((a, at + c.len_utf8() == cluster.len()));
                    break;
                }
                last = Some((a, false));
            }
            last
        } else {
            return (opts, Stop::Positional(i));
        };
        let Some((arg, value_follows)) = found else {
            return (opts, Stop::Other);
        };
        let end = (i + 1 + usize::from(value_follows)).min(words.len());
        opts.push(Opt {
            id: arg.get_id().to_string(),
            name: w.split('=').next().unwrap_or(w).to_string(),
            start: i,
            end,
        });
        i = end;
    }
    (opts, Stop::Other)
}

fn takes_value(a: &Arg) -> bool {
    a.get_action().takes_values()
}

fn repeatable(a: &Arg) -> bool {
    matches!(
        a.get_action(),
        clap::ArgAction::Append | clap::ArgAction::Count
    )
}

/// The first positional word of `argv` (after the program's name) and the
/// option words before it, per `cmd`.
pub(crate) fn first_positional(cmd: &Command, argv: &[OsString]) -> Option<String> {
    let words = argv.get(1..).unwrap_or_default();
    match scan(cmd, words) {
        (_, Stop::Positional(i)) => words[i].to_str().map(str::to_string),
        (_, Stop::Other) => None,
    }
}

/// `argv` with the options given before a subcommand moved after its name;
/// unchanged when there are none or no subcommand follows them.
pub(crate) fn hoist(cmd: &Command, argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some((prog, words)) = argv.split_first() else {
        return Ok(argv);
    };
    let (leading, Stop::Positional(at)) = scan(cmd, words) else {
        return Ok(argv);
    };
    let Some(sub) = words[at]
        .to_str()
        .and_then(|name| cmd.find_subcommand(name))
    else {
        return Ok(argv);
    };
    if leading.is_empty() {
        return Ok(argv);
    }
    let after = &words[at + 1..];
    let mut out = vec![prog.clone(), words[at].clone()];
    for opt in &leading {
        // The top-level option's words, read the same in the subcommand.
        let w = &words[opt.start..opt.end];
        let (mine, _) = scan(sub, w);
        let Some(theirs) = mine
            .first()
            .and_then(|o| sub.get_arguments().find(|a| a.get_id() == o.id.as_str()))
        else {
            return Err(format!(
                "{} given before `xload {}` is not an option of `xload {}`",
                opt.name,
                sub.get_name(),
                sub.get_name()
            ));
        };
        // The later one wins: dropped if given again after the subcommand.
        if !repeatable(theirs) && given(sub, after, theirs.get_id().as_str()) {
            continue;
        }
        out.extend_from_slice(w);
    }
    out.extend_from_slice(after);
    Ok(out)
}

/// Whether the option `id` of `cmd` appears anywhere in `words`.
fn given(cmd: &Command, words: &[OsString], id: &str) -> bool {
    let mut rest = words;
    loop {
        let (opts, stop) = scan(cmd, rest);
        if opts.iter().any(|o| o.id == id) {
            return true;
        }
        match stop {
            Stop::Positional(i) => rest = &rest[i + 1..],
            Stop::Other => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn hoisted(line: &str) -> Result<String, String> {
        let argv: Vec<OsString> = line.split(' ').map(OsString::from).collect();
        let out = hoist(&crate::Cli::command(), argv)?;
        let words: Vec<&str> = out.iter().map(|w| w.to_str().unwrap()).collect();
        Ok(words.join(" "))
    }

    #[test]
    fn options_before_a_subcommand_move_after_its_name() {
        assert_eq!(
            hoisted("xload -d 1s sweep http://h/ -c 1,2").unwrap(),
            "xload sweep -d 1s http://h/ -c 1,2"
        );
        assert_eq!(
            hoisted("xload -z 1s -q --json=- run w.toml http://h/").unwrap(),
            "xload run -z 1s -q --json=- w.toml http://h/"
        );
        assert_eq!(
            hoisted("xload -qd1s run w.toml").unwrap(),
            "xload run -qd1s w.toml"
        );
    }

    #[test]
    fn direct_runs_and_plain_subcommands_are_untouched() {
        for line in [
            "xload -d 1s http://h/",
            "xload sweep -d 1s http://h/ -c 1,2",
            "xload -d 1s -- sweep",
            "xload --nonsense sweep",
        ] {
            assert_eq!(hoisted(line).unwrap(), line);
        }
        // `sweep` as the value of -m is no subcommand.
        assert_eq!(
            hoisted("xload -m sweep http://h/").unwrap(),
            "xload -m sweep http://h/"
        );
    }

    #[test]
    fn the_later_option_wins_and_repeatable_ones_add_up() {
        assert_eq!(
            hoisted("xload -d 1s sweep http://h/ -c 1 --duration 2s").unwrap(),
            "xload sweep http://h/ -c 1 --duration 2s"
        );
        assert_eq!(
            hoisted("xload -H a:b run w.toml -H c:d").unwrap(),
            "xload run -H a:b w.toml -H c:d"
        );
    }

    #[test]
    fn an_option_the_subcommand_lacks_is_named() {
        let e = hoisted("xload -d 1s serve").unwrap_err();
        assert!(e.contains("-d given before `xload serve`"), "{e}");
    }
}
