//! House rules checked on the source of every crate under crates/*/src:
//! no function outside tests is longer than 120 lines, and no two modules of
//! a crate import each other (directly or around a longer loop).
//!
//! The scanner is a small lexer, not a Rust parser: it blanks comments,
//! string and char literals, drops `#[cfg(test)]`/`#[test]` items, then
//! matches braces. It is unit-tested below on synthetic sources.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest a non-test function may be, counted from its `fn` line to its
/// closing brace.
const MAX_FN_LINES: usize = 120;

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// Blank bytes `from..to` with spaces, keeping newlines so line numbers hold.
fn blank(out: &mut [u8], from: usize, to: usize) {
    let to = to.min(out.len());
    for b in &mut out[from..to] {
        if *b != b'\n' {
            *b = b' ';
        }
    }
}

/// End (exclusive) of the quoted string starting at the `"` at `open`.
fn string_end(b: &[u8], open: usize) -> usize {
    let mut j = open + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// If a raw string (`r"…"`, `r#"…"#`, `br"…"`) starts at `i`, its end.
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    let start = if b[i] == b'b' { i + 1 } else { i };
    if b.get(start) != Some(&b'r') || (i > 0 && is_ident(b[i - 1])) {
        return None;
    }
    let mut j = start + 1;
    let mut hashes = 0;
    while b.get(j) == Some(&b'#') {
        hashes += 1;
        j += 1;
    }
    if b.get(j) != Some(&b'"') {
        return None;
    }
    let mut k = j + 1;
    while k < b.len() {
        if b[k] == b'"'
            && b[k + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            return Some(k + 1 + hashes);
        }
        k += 1;
    }
    Some(b.len())
}

/// If a char literal (`'x'`, `'\n'`, `'\u{1F600}'`, `'é'`) starts at the `'`
/// at `i`, its end; `None` for a lifetime or label.
fn char_end(src: &str, b: &[u8], i: usize) -> Option<usize> {
    if b.get(i + 1) == Some(&b'\\') {
        let mut j = i + 3;
        while j < b.len() && b[j] != b'\'' {
            j += 1;
        }
        return Some(j + 1);
    }
    let c = src.get(i + 1..)?.chars().next()?;
    let after = i + 1 + c.len_utf8();
    (b.get(after) == Some(&b'\'')).then_some(after + 1)
}

/// The source with comments and the contents of string and char literals
/// blanked, so that braces and keywords left in it are code.
fn mask(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let next = b.get(i + 1).copied();
        if b[i] == b'/' && next == Some(b'/') {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'/' && next == Some(b'*') {
            let (mut j, mut depth) = (i + 2, 1);
            while j < b.len() && depth > 0 {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if let Some(end) = (b[i] == b'r' || b[i] == b'b')
            .then(|| raw_string_end(b, i))
            .flatten()
        {
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let end = string_end(b, i);
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'\'' {
            match char_end(src, b, i) {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Index just past the brace that closes the one at `open`.
fn matching_brace(m: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &c) in m.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    m.len()
}

/// The `{` that opens the body of the item starting at `from`, or the index
/// of the `;` that ends it if it has no body; brackets and parentheses
/// (array lengths, closures in bounds) are stepped over.
fn item_open(m: &[u8], from: usize) -> Option<(usize, bool)> {
    let mut depth = 0i32;
    for (k, &c) in m.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' if depth == 0 => return Some((k, true)),
            b';' if depth == 0 => return Some((k, false)),
            _ => {}
        }
    }
    None
}

fn skip_ws(m: &[u8], mut i: usize) -> usize {
    while i < m.len() && m[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn ident_at(m: &[u8], i: usize) -> &str {
    let end = m[i..]
        .iter()
        .position(|&c| !is_ident(c))
        .map_or(m.len(), |p| i + p);
    std::str::from_utf8(&m[i..end]).unwrap_or("")
}

/// Masked source with every `#[cfg(test)]` and `#[test]` item blanked, and
/// the names of out-of-line test modules (`#[cfg(test)] mod tests;`).
fn strip_tests(src: &str) -> (Vec<u8>, Vec<String>) {
    let mut m = mask(src);
    let mut test_mods = Vec::new();
    for attr in ["#[cfg(test)]", "#[test]"] {
        let mut from = 0;
        while let Some(p) = find(&m, attr.as_bytes(), from) {
            let mut i = skip_ws(&m, p + attr.len());
            // Further attributes on the same item.
            while m.get(i) == Some(&b'#') {
                i = m[i..]
                    .iter()
                    .position(|&c| c == b']')
                    .map_or(m.len(), |q| i + q + 1);
                i = skip_ws(&m, i);
            }
            let Some((k, body)) = item_open(&m, i) else {
                break;
            };
            let head = String::from_utf8_lossy(&m[i..k]).to_string();
            let words: Vec<&str> = head.split_whitespace().collect();
            if !body {
                if let Some(w) = words.iter().position(|w| *w == "mod") {
                    test_mods.push(words[w + 1].to_string());
                }
            }
            let end = if body { matching_brace(&m, k) } else { k + 1 };
            blank(&mut m, p, end);
            from = end;
        }
    }
    (m, test_mods)
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// Indices where the keyword `word` stands alone in masked source.
fn keyword_positions<'a>(m: &'a [u8], word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let w = word.as_bytes();
    (0..m.len().saturating_sub(w.len())).filter(move |&i| {
        &m[i..i + w.len()] == w && (i == 0 || !is_ident(m[i - 1])) && !is_ident(m[i + w.len()])
    })
}

fn line_of(m: &[u8], i: usize) -> usize {
    m[..i].iter().filter(|&&c| c == b'\n').count() + 1
}

/// Every non-test function with a body: (name, first line, length in lines).
fn functions(src: &str) -> Vec<(String, usize, usize)> {
    let (m, _) = strip_tests(src);
    let mut out = Vec::new();
    for p in keyword_positions(&m, "fn") {
        let name_at = skip_ws(&m, p + 2);
        let name = ident_at(&m, name_at);
        if name.is_empty() || name_at == p + 2 {
            continue; // `fn(u8) -> u8`, a pointer type
        }
        if let Some((open, true)) = item_open(&m, name_at) {
            let first = line_of(&m, p);
            let last = line_of(&m, matching_brace(&m, open) - 1);
            out.push((name.to_string(), first, last - first + 1));
        }
    }
    out
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `crates/…` for a path under the workspace root.
fn rel_path(path: &Path) -> String {
    let root = root().canonicalize().unwrap();
    let path = path.canonicalize().unwrap();
    path.strip_prefix(&root)
        .unwrap_or(&path)
        .display()
        .to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Module path of a file relative to its crate's src/: `a/b.rs` and
/// `a/b/mod.rs` are `a::b`; lib.rs and main.rs are the root, "".
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// The source files of one crate, keyed by module path, without out-of-line
/// test modules.
fn crate_sources(src_dir: &Path) -> BTreeMap<String, (PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files);
    let mut by_module = BTreeMap::new();
    let mut test_modules = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let module = module_of(f.strip_prefix(src_dir).unwrap());
        for t in strip_tests(&text).1 {
            test_modules.insert(child(&module, &t));
        }
        by_module.insert(module, (f, text));
    }
    by_module.retain(|m, _| {
        !test_modules
            .iter()
            .any(|t| m == t || m.starts_with(&format!("{t}::")))
    });
    by_module
}

fn child(module: &str, name: &str) -> String {
    if module.is_empty() {
        name.to_string()
    } else {
        format!("{module}::{name}")
    }
}

fn parent(module: &str) -> &str {
    module.rsplit_once("::").map_or("", |(p, _)| p)
}

/// The paths a `use` tree names, e.g. `crate::{a::B, c::{d, e}}` gives
/// `crate::a::B`, `crate::c::d`, `crate::c::e`.
fn expand_use(text: &str) -> Vec<String> {
    expand_use_named(text).into_iter().map(|(_, p)| p).collect()
}

/// As [`expand_use`], each path with the name it binds (its last segment,
/// or the `as` alias).
fn expand_use_named(text: &str) -> Vec<(String, String)> {
    fn tree(toks: &[String], pos: &mut usize, prefix: &str, out: &mut Vec<(String, String)>) {
        let mut path = prefix.to_string();
        let mut alias = None;
        loop {
            match toks.get(*pos).map(String::as_str) {
                Some("{") => {
                    *pos += 1;
                    loop {
                        match toks.get(*pos).map(String::as_str) {
                            None => return,
                            Some("}") => {
                                *pos += 1;
                                return;
                            }
                            Some(",") => *pos += 1,
                            _ => tree(toks, pos, &path, out),
                        }
                    }
                }
                Some("::") => *pos += 1,
                Some("as") => {
                    alias = toks.get(*pos + 1).cloned();
                    *pos += 2;
                }
                Some(t) if t != "," && t != "}" => {
                    path = if path.is_empty() {
                        t.to_string()
                    } else {
                        format!("{path}::{t}")
                    };
                    *pos += 1;
                }
                _ => {
                    let path = path.trim_end_matches("::self").to_string();
                    let name = alias.unwrap_or_else(|| last_seg(&path).to_string());
                    out.push((name, path));
                    return;
                }
            }
        }
    }
    let mut toks = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if is_ident(b[i]) || b[i] == b'*' {
            let s = if b[i] == b'*' { "*" } else { ident_at(b, i) };
            toks.push(s.to_string());
            i += s.len();
        } else if b[i..].starts_with(b"::") {
            toks.push("::".into());
            i += 2;
        } else if matches!(b[i], b'{' | b'}' | b',') {
            toks.push((b[i] as char).to_string());
            i += 1;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    tree(&toks, &mut 0, "", &mut out);
    out
}

/// The names a module re-exports (`pub use a::B;`, `pub(crate) use a::{B as C}`),
/// each with the path it stands for: `use crate::m::C` lands where `C` is
/// defined, not in `m`, so a loop through a re-export is still a loop.
fn reexports(src: &str) -> Vec<(String, String)> {
    let (m, _) = strip_tests(src);
    let mut out = Vec::new();
    for p in keyword_positions(&m, "use") {
        let head = String::from_utf8_lossy(&m[p.saturating_sub(24)..p]).to_string();
        let head = head.trim_end();
        if !(head.ends_with("pub") || head.ends_with(')') && head.contains("pub(")) {
            continue;
        }
        let end = m[p..]
            .iter()
            .position(|&c| c == b';')
            .map_or(m.len(), |q| p + q);
        out.extend(expand_use_named(&String::from_utf8_lossy(&m[p + 3..end])));
    }
    out.retain(|(name, _)| name != "*" && name != "self");
    out
}

/// A module's re-exports, resolved: (module, name) → (module the name's
/// path lands in, the name there).
type Reexports = BTreeMap<(String, String), (String, String)>;

fn reexport_table(files: &[(String, String)], modules: &BTreeSet<String>) -> Reexports {
    let mut table = Reexports::new();
    for (module, src) in files {
        for (name, path) in reexports(src) {
            if let Some((t, rest)) = resolve_plain(&path, module, modules) {
                let there = rest.first().cloned().unwrap_or_else(|| name.clone());
                table.insert((module.clone(), name), (t, there));
            }
        }
    }
    table
}

/// Resolve a path written in `module` to the module file it lands in, if it
/// is a module of this crate, following re-exports.
fn resolve(
    path: &str,
    module: &str,
    modules: &BTreeSet<String>,
    reexported: &Reexports,
) -> Option<String> {
    let (mut base, rest) = resolve_plain(path, module, modules)?;
    if let Some(mut name) = rest.first().cloned() {
        // A chain of re-exports (`lib` re-exports `a::B`, `a` re-exports
        // `b::B`) ends where the name is defined.
        for _ in 0..8 {
            match reexported.get(&(base.clone(), name.clone())) {
                Some((t, there)) if *t != base => (base, name) = (t.clone(), there.clone()),
                _ => break,
            }
        }
    }
    Some(base)
}

fn last_seg(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or("")
}

/// Resolve a path written in `module` to the module file it lands in, if it
/// is a module of this crate (re-exports not followed), with the segments
/// left after it.
fn resolve_plain(
    path: &str,
    module: &str,
    modules: &BTreeSet<String>,
) -> Option<(String, Vec<String>)> {
    let segs: Vec<&str> = path.split("::").collect();
    let (mut base, mut rest) = match segs[0] {
        "crate" => (String::new(), &segs[1..]),
        "self" => (module.to_string(), &segs[1..]),
        "super" => (parent(module).to_string(), &segs[1..]),
        first if modules.contains(&child(module, first)) => (module.to_string(), &segs[..]),
        _ => return None, // another crate, std, or an item in scope
    };
    while rest.first() == Some(&"super") {
        base = parent(&base).to_string();
        rest = &rest[1..];
    }
    while let Some(seg) = rest.first() {
        let next = child(&base, seg);
        if !modules.contains(&next) {
            break;
        }
        base = next;
        rest = &rest[1..];
    }
    Some((base, rest.iter().map(|s| s.to_string()).collect()))
}

/// Every path mentioned in non-test code: `use` trees expanded, and inline
/// `crate::…`/`super::…`/`self::…` paths.
fn paths_in(src: &str) -> Vec<String> {
    let (m, _) = strip_tests(src);
    let mut out = Vec::new();
    for p in keyword_positions(&m, "use") {
        let end = m[p..]
            .iter()
            .position(|&c| c == b';')
            .map_or(m.len(), |q| p + q);
        out.extend(expand_use(&String::from_utf8_lossy(&m[p + 3..end])));
    }
    for kw in ["crate", "super", "self"] {
        for p in keyword_positions(&m, kw) {
            let mut end = p;
            while end < m.len() && (is_ident(m[end]) || m[end..].starts_with(b"::")) {
                end += if m[end] == b':' { 2 } else { 1 };
            }
            out.push(
                String::from_utf8_lossy(&m[p..end])
                    .trim_end_matches("::")
                    .to_string(),
            );
        }
    }
    out
}

fn is_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.starts_with(&format!("{a}::"))
}

/// Module → modules it imports. Edges between a module and its ancestors
/// are left out: a child using its parent's items, and a parent declaring
/// and re-exporting its children, is how Rust modules nest.
fn import_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let reexported = reexport_table(files, &modules);
    let mut graph = BTreeMap::new();
    for (module, src) in files {
        let targets: BTreeSet<String> = paths_in(src)
            .iter()
            .filter_map(|p| resolve(p, module, &modules, &reexported))
            .filter(|t| t != module && !is_ancestor(t, module) && !is_ancestor(module, t))
            .collect();
        graph.insert(module.clone(), targets);
    }
    graph
}

/// Groups of modules that reach each other through imports (strongly
/// connected components with more than one module), each as a loop to print.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for t in graph.get(&n).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    stack.push(t.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for m in graph.keys() {
        if done.contains(m) || !reachable[m].contains(m) {
            continue;
        }
        let group: Vec<String> = graph
            .keys()
            .filter(|o| reachable[m].contains(*o) && reachable[*o].contains(m))
            .cloned()
            .collect();
        done.extend(group.iter().cloned());
        out.push(group);
    }
    out
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn no_function_outside_tests_is_over_120_lines() {
    let mut long = Vec::new();
    for dir in crate_dirs() {
        for (_, (path, text)) in crate_sources(&dir) {
            for (name, line, len) in functions(&text) {
                if len > MAX_FN_LINES {
                    let rel = rel_path(&path);
                    long.push(format!("{rel}:{line} fn {name}: {len} lines"));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_module_import_cycle_in_any_crate() {
    let mut found = Vec::new();
    for dir in crate_dirs() {
        let files: Vec<(String, String)> = crate_sources(&dir)
            .into_iter()
            .map(|(m, (_, text))| (m, text))
            .collect();
        let graph = import_graph(&files);
        for group in cycles(&graph) {
            let edges: Vec<String> = group
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| group.contains(b))
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            found.push(format!("{}: {}", rel_path(&dir), edges.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "module import cycles:\n{}",
        found.join("\n")
    );
}

// The checkers themselves, on synthetic sources.

fn long_fn(name: &str, body_lines: usize) -> String {
    let mut s = format!("pub fn {name}(x: u32) -> u32 {{\n");
    for i in 0..body_lines {
        s.push_str(&format!("    let _v{i} = x + {i};\n"));
    }
    s.push_str("    x\n}\n");
    s
}

#[test]
fn scanner_catches_a_function_over_the_limit() {
    let src = format!(
        "use std::fmt;\n\n{}\nfn short() {{}}\n",
        long_fn("big", 130)
    );
    let fns = functions(&src);
    let big = fns.iter().find(|f| f.0 == "big").expect("big found");
    assert_eq!((big.1, big.2), (3, 133));
    assert!(big.2 > MAX_FN_LINES);
    let short = fns.iter().find(|f| f.0 == "short").unwrap();
    assert_eq!(short.2, 1);
}

#[test]
fn scanner_is_not_fooled_by_braces_in_literals_and_comments() {
    let src = r####"
fn a() {
    let s = "}}}";
    let r = r#"}" }"#;
    let c = '}';
    let e = '\'';
    let b = b'{';
    // }
    /* } /* nested } */ */
    let l: &'static str = "x";
}
fn b() { }
"####;
    let fns = functions(src);
    assert_eq!(
        fns,
        vec![("a".to_string(), 2, 10), ("b".to_string(), 12, 1)]
    );
}

#[test]
fn scanner_skips_test_code_declarations_and_pointer_types() {
    let src = format!(
        "trait T {{ fn decl(&self); }}\n\
         fn takes(f: fn(u8) -> u8, g: [u8; 4]) -> u8 {{ f(g[0]) }}\n\
         #[cfg(test)]\nmod tests {{\n{}\n}}\n\
         #[test]\n{}\n\
         #[cfg(test)]\nmod more;\n",
        long_fn("in_tests", 200),
        long_fn("lone_test", 200)
    );
    let fns = functions(&src);
    let names: Vec<&str> = fns.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(names, ["takes"]);
    assert_eq!(strip_tests(&src).1, ["more"]);
}

#[test]
fn use_trees_expand_to_every_path() {
    assert_eq!(
        expand_use(" crate::{a::B, c::{d, e as f}, self}"),
        ["crate::a::B", "crate::c::d", "crate::c::e", "crate"]
    );
    assert_eq!(expand_use(" super::x::*"), ["super::x::*"]);
    assert_eq!(expand_use(" std::io"), ["std::io"]);
}

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(m, s)| (m.to_string(), s.to_string()))
        .collect()
}

#[test]
fn a_two_module_cycle_is_found() {
    let fs = files(&[
        ("", "mod a; mod b; pub use a::A;"),
        ("a", "use crate::b::B; pub struct A;"),
        ("b", "pub struct B; fn f() -> crate::a::A { crate::a::A }"),
    ]);
    assert_eq!(cycles(&import_graph(&fs)), vec![vec!["a", "b"]]);
}

#[test]
fn a_longer_loop_through_grouped_uses_is_found() {
    let fs = files(&[
        ("fs", "use crate::{snapshot::Snap, util};"),
        ("snapshot", "use super::host::Host;"),
        ("host", "use crate::{fs::{self}};"),
        ("util", "use std::io;"),
    ]);
    assert_eq!(
        cycles(&import_graph(&fs)),
        vec![vec!["fs", "host", "snapshot"]]
    );
}

#[test]
fn parents_children_tests_and_other_crates_make_no_cycle() {
    let fs = files(&[
        ("", "mod uring; use uring::Ring;"),
        ("uring", "mod batch; use batch::Batch; use self::batch::X;"),
        ("uring::batch", "use super::Ring; use crate::uring::Y;"),
        (
            "drive",
            "use other_crate::uring::Z; use crate::uring::Ring;",
        ),
        (
            "uring::tests_only",
            "#[cfg(test)]\nmod tests { use crate::drive::D; }",
        ),
    ]);
    let graph = import_graph(&fs);
    assert!(cycles(&graph).is_empty(), "{graph:?}");
    assert_eq!(graph["drive"], BTreeSet::from(["uring".to_string()]));
}

#[test]
fn a_cycle_through_a_reexport_is_found() {
    // `run` names `hosts::stamp`, defined in `hosts::meta`, which imports
    // `run`: the re-export in `hosts` must not hide the loop.
    let fs = files(&[
        ("", "mod hosts; mod run;"),
        ("hosts", "mod meta; pub(crate) use meta::stamp;"),
        ("hosts::meta", "use crate::run::Prepared; pub fn stamp() {}"),
        (
            "run",
            "pub struct Prepared; fn f() { crate::hosts::stamp() }",
        ),
    ]);
    assert_eq!(cycles(&import_graph(&fs)), vec![vec!["hosts::meta", "run"]]);
    // Renamed and grouped re-exports, and a chain of two, resolve too.
    let fs = files(&[
        ("", "mod a; mod b; pub use a::{Thing as Alias};"),
        ("a", "mod inner; pub(crate) use self::inner::Thing;"),
        ("a::inner", "use crate::b::B; pub struct Thing;"),
        ("b", "pub struct B; fn f() -> crate::Alias { todo!() }"),
    ]);
    assert_eq!(cycles(&import_graph(&fs)), vec![vec!["a::inner", "b"]]);
}

#[test]
fn reexports_name_what_they_bind() {
    assert_eq!(
        reexports("pub(crate) use meta::stamp;\nuse std::io;\npub use a::{B as C, d::*};"),
        [
            ("stamp".to_string(), "meta::stamp".to_string()),
            ("C".to_string(), "a::B".to_string()),
        ]
    );
}
