//! Hand-written man page sections in roff, for the parts of xload's and
//! xtune's pages that clap does not generate (EXAMPLES, EXIT STATUS).

/// `text` escaped for roff: backslashes and hyphens (so that `-c` stays an
/// ASCII hyphen when copied from the page), and a leading `.` or `'` that
/// would read as a request.
pub fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 8);
    if text.starts_with(['.', '\'']) {
        s.push_str("\\&");
    }
    for c in text.chars() {
        match c {
            '\\' => s.push_str("\\e"),
            '-' => s.push_str("\\-"),
            c => s.push(c),
        }
    }
    s
}

/// The man page of `cmd` as clap_mangen renders it, with EXAMPLES (when
/// given) and EXIT STATUS ([`sections`]) before its VERSION.
pub fn render_man(
    cmd: clap::Command,
    examples: &[(&str, &str)],
    exit_status: &[(&str, &str)],
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let has_args = cmd.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = cmd.get_subcommands().any(|c| !c.is_hide_set());
    let extra = cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some();
    let man = clap_mangen::Man::new(cmd);
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    if has_args {
        man.render_options_section(w)?;
    }
    if has_subcommands {
        man.render_subcommands_section(w)?;
    }
    if extra {
        man.render_extra_section(w)?;
    }
    w.write_all(sections(examples, exit_status).as_bytes())?;
    man.render_version_section(w)
}

/// An EXAMPLES section (command line in bold, then what it does; none
/// when `examples` is empty) followed by an EXIT STATUS section (status,
/// then its meaning).
pub fn sections(examples: &[(&str, &str)], exit_status: &[(&str, &str)]) -> String {
    let mut s = String::new();
    let mut list = |title: &str, items: &[(&str, &str)]| {
        if items.is_empty() {
            return;
        }
        s.push_str(&format!(".SH \"{title}\"\n"));
        for (term, what) in items {
            s.push_str(&format!(
                ".TP\n\\fB{}\\fR\n{}\n",
                escape(term),
                escape(what)
            ));
        }
    };
    list("EXAMPLES", examples);
    list("EXIT STATUS", exit_status);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_escape_hyphens_backslashes_and_leading_dots() {
        let s = sections(
            &[("xload -c 1 'a\\b'", ".starts with a dot")],
            &[("0", "Success.")],
        );
        assert_eq!(
            s,
            ".SH \"EXAMPLES\"\n.TP\n\\fBxload \\-c 1 'a\\eb'\\fR\n\\&.starts with a dot\n\
             .SH \"EXIT STATUS\"\n.TP\n\\fB0\\fR\nSuccess.\n"
        );
        assert!(!sections(&[], &[("0", "ok")]).contains("EXAMPLES"));
    }
}
