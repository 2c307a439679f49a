//! TOML text to a validated [`Workload`]; every error names file, line and key.

use std::path::Path;

use toml::de::DeTable;

use crate::capture::{parse_json_path, Capture, CaptureFrom, MAX_CAPTURES};
use crate::doc::{Doc, Node, Table};
use crate::error::Error;
use crate::manifest::{parse_sha256, Manifest};
use crate::model::{
    Check, Class, Expected, Flow, Limits, Session, Source, Think, Values, Workload,
};

/// Reads and validates a workload file. Relative paths inside it (manifest,
/// body files) are taken from the file's directory.
pub fn load(path: &Path) -> Result<Workload, Error> {
    let file = path.display().to_string();
    let src = xload_sys::input::read_to_string(path, "a workload", xload_sys::input::TEXT_LIMIT)
        .map_err(|e| Error::file(&file, format!("cannot read: {e}")))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse(&src, &file, dir)
}

/// Validates workload text named `file`, with relative paths taken from `dir`.
pub fn parse(src: &str, file: &str, dir: &Path) -> Result<Workload, Error> {
    let doc = Doc { file, src };
    let parsed = DeTable::parse(src).map_err(|e| {
        let line = e.span().map(|s| doc.line(s.start));
        Error {
            file: file.to_string(),
            line,
            key: String::new(),
            message: e.message().to_string(),
        }
    })?;
    let root = Table::root(&doc, &parsed);
    root.only(&["url", "seed", "manifest", "classes", "session"])?;
    let url = match root.get("url") {
        Some(node) => {
            let url = node.str()?;
            xload_http::parse_url(url).map_err(|e| node.error(e.to_string()))?;
            Some(url.to_string())
        }
        None => None,
    };
    let seed = root.get("seed").map(|n| n.u64()).transpose()?.unwrap_or(1);
    let manifest = match root.get("manifest") {
        Some(node) => {
            let name = node.str()?;
            let m = Manifest::load(&dir.join(name)).map_err(|e| node.error(e.to_string()))?;
            if m.entries.is_empty() {
                return Err(node.error(format!("manifest {name:?} lists no files")));
            }
            Some(m)
        }
        None => None,
    };
    let Some(classes_node) = root.get("classes") else {
        return Err(root.error(
            "classes",
            "missing: a workload needs at least one [classes.NAME] table",
        ));
    };
    let classes_table = classes_node.table()?;
    if classes_table.is_empty() {
        return Err(classes_node.error("expected at least one class, e.g. [classes.static]"));
    }
    // Capture names first: a class may use a value another class captures.
    let mut captures: Vec<String> = Vec::new();
    for (_, node) in classes_table.entries() {
        let Ok(t) = node.table() else { continue };
        if let Some(c) = t.get("capture") {
            for (name, value) in c.table()?.entries() {
                if !is_ident(&name) || name == "n" {
                    return Err(value.error(
                        "a capture name is letters, digits and '_' (not starting with a digit), and not `n`",
                    ));
                }
                if !captures.contains(&name) {
                    if captures.len() == MAX_CAPTURES {
                        return Err(value.error(format!("at most {MAX_CAPTURES} capture names")));
                    }
                    captures.push(name);
                }
            }
        }
    }
    let mut classes = Vec::new();
    for (name, node) in classes_table.entries() {
        classes.push(class(&name, &node, manifest.as_ref(), dir, &captures)?);
    }
    let session = root
        .get("session")
        .map(|n| session(&n, &classes))
        .transpose()?;
    Ok(Workload {
        file: file.to_string(),
        url,
        seed,
        manifest,
        classes,
        session,
        captures,
    })
}

fn is_ident(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Slots of the `{NAME}` placeholders in `text` that name a capture.
/// In a path or header (`strict`) any other `{NAME}` but `{n}` is refused.
fn slots_in(text: &str, captures: &[String], strict: bool) -> Result<u64, String> {
    let mut mask = 0;
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find('}') else { break };
        let name = &rest[..close];
        if let Some(slot) = captures.iter().position(|c| c == name) {
            mask |= 1 << slot;
        } else if strict && name != "n" && is_ident(name) {
            return Err(format!(
                "uses {{{name}}} but no class captures {name:?} (capture = {{ {name} = {{ ... }} }})"
            ));
        }
    }
    Ok(mask)
}

fn class(
    name: &str,
    node: &Node,
    manifest: Option<&Manifest>,
    dir: &Path,
    slots: &[String],
) -> Result<Class, Error> {
    let t = node.table()?;
    t.only(&[
        "method", "path", "n", "headers", "body", "weight", "check", "limits", "capture",
    ])?;
    let method = match t.get("method") {
        Some(n) => n.str()?.to_string(),
        None => "GET".to_string(),
    };
    let Some(path_node) = t.get("path") else {
        return Err(t.error("path", "missing: e.g. path = \"/index.html\""));
    };
    let path = path_node.str()?.to_string();
    if !path.starts_with('/') {
        return Err(path_node.error("expected a path starting with '/'"));
    }
    let n = t.get("n").map(|n| values(&n, manifest)).transpose()?;
    match (&n, path.contains("{n}")) {
        (None, true) => return Err(path_node.error("uses {n} but the class has no `n`")),
        (Some(_), false) => return Err(path_node.error("has no {n} for the class's `n` to fill")),
        _ => {}
    }
    let headers = t
        .get("headers")
        .map(|n| headers(&n))
        .transpose()?
        .unwrap_or_default();
    let body = t
        .get("body")
        .map(|n| body(&n, dir))
        .transpose()?
        .unwrap_or_default();
    let weight = t
        .get("weight")
        .map(|n| n.positive())
        .transpose()?
        .unwrap_or(1.0);
    let check = t
        .get("check")
        .map(|c| check(&c, &path, n.as_ref(), manifest))
        .transpose()?;
    let limits = t
        .get("limits")
        .map(|n| limits(&n))
        .transpose()?
        .unwrap_or_default();
    let mut uses = slots_in(&path, slots, true).map_err(|e| path_node.error(e))?;
    if let Some(h) = t.get("headers") {
        for (_, value) in h.table()?.entries() {
            uses |= slots_in(value.str()?, slots, true).map_err(|e| value.error(e))?;
        }
    }
    let body_uses =
        slots_in(&String::from_utf8_lossy(&body), slots, false).map_err(|e| t.error("body", e))?;
    if body_uses != 0
        && headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        let node = t.get("headers").expect("headers were given");
        return Err(node.error(
            "a body with {NAME} values has its Content-Length computed per request: leave it out",
        ));
    }
    uses |= body_uses;
    let captures = t
        .get("capture")
        .map(|c| class_captures(&c, slots))
        .transpose()?
        .unwrap_or_default();
    let class = Class {
        name: name.to_string(),
        method,
        path,
        n,
        headers,
        body,
        weight,
        check: check.unwrap_or_default(),
        limits,
        captures,
        uses,
    };
    // Render once against a placeholder target so a bad method or header is
    // reported here, at its line, rather than when the plan is built.
    let url = xload_http::parse_url("http://localhost/").map_err(|e| node.error(e.to_string()))?;
    let sample = sample_path(&class);
    let url = xload_http::Url {
        path_and_query: sample,
        ..url
    };
    let spec = xload_http::RequestSpec {
        method: &class.method,
        url: &url,
        headers: &class.headers,
        body: &class.body,
    };
    xload_http::RequestTemplate::new(&spec).map_err(|e| node.error(e.to_string()))?;
    Ok(class)
}

fn class_captures(node: &Node, slots: &[String]) -> Result<Vec<Capture>, Error> {
    let mut out = Vec::new();
    for (name, value) in node.table()?.entries() {
        let t = value.table()?;
        t.only(&["header", "body_regex", "json"])?;
        let from = match (t.get("header"), t.get("body_regex"), t.get("json")) {
            (Some(h), None, None) => {
                let h = h.str()?;
                if !h.bytes().all(|b| b.is_ascii_graphic() && b != b':') || h.is_empty() {
                    return Err(t.error("header", "expected a header name"));
                }
                CaptureFrom::Header(h.to_string())
            }
            (None, Some(r), None) => {
                let re = regex::bytes::Regex::new(r.str()?).map_err(|e| r.error(e.to_string()))?;
                CaptureFrom::BodyRegex(re)
            }
            (None, None, Some(j)) => {
                CaptureFrom::Json(parse_json_path(j.str()?).map_err(|e| j.error(e))?)
            }
            _ => {
                return Err(value.error(
                    "expected exactly one of { header = \"X-Token\" }, { body_regex = \"acct=([0-9]+)\" } or { json = \"$.cart.id\" }",
                ))
            }
        };
        let slot = slots
            .iter()
            .position(|s| *s == name)
            .expect("names were collected first");
        out.push(Capture { name, slot, from });
    }
    Ok(out)
}

fn sample_path(class: &Class) -> String {
    class.path.replace("{n}", "1")
}

fn values(node: &Node, manifest: Option<&Manifest>) -> Result<Values, Error> {
    let t = node.table()?;
    t.only(&["list", "range", "manifest", "zipf"])?;
    let zipf = t.get("zipf").map(|n| n.positive()).transpose()?;
    let list = t.get("list");
    let range = t.get("range");
    let from_manifest = t.get("manifest");
    let source = match (list, range, from_manifest) {
        (Some(n), None, None) => {
            let mut items = Vec::new();
            for item in n.array()? {
                let s = item.str()?;
                if s.is_empty() || s.bytes().any(|b| b <= b' ' || b == 0x7f) {
                    return Err(item
                        .error("expected a non-empty value without spaces or control characters"));
                }
                items.push(s.to_string());
            }
            if items.is_empty() {
                return Err(n.error("expected at least one value"));
            }
            Source::List(items)
        }
        (None, Some(n), None) => {
            let bounds = n.array()?;
            if bounds.len() != 2 {
                return Err(n.error("expected [first, last]"));
            }
            let (first, last) = (bounds[0].u64()?, bounds[1].u64()?);
            if last < first {
                return Err(n.error("expected first <= last"));
            }
            Source::Range { first, last }
        }
        (None, None, Some(n)) => {
            if n.value.get_ref().as_bool() != Some(true) {
                return Err(n.error("expected `manifest = true`"));
            }
            if manifest.is_none() {
                return Err(n.error("needs a top-level `manifest = \"PATH\"`"));
            }
            Source::Manifest
        }
        _ => return Err(node.error("expected exactly one of `list`, `range` or `manifest`")),
    };
    Ok(Values { source, zipf })
}

fn headers(node: &Node) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for (name, value) in node.table()?.entries() {
        let v = value.str()?;
        let parsed = xload_http::parse_header_arg(&format!("{name}: {v}"))
            .map_err(|e| value.error(e.to_string()))?;
        out.push(parsed);
    }
    Ok(out)
}

fn body(node: &Node, dir: &Path) -> Result<Vec<u8>, Error> {
    if !node.is_table() {
        return Ok(node.str()?.as_bytes().to_vec());
    }
    let t = node.table()?;
    t.only(&["file", "size"])?;
    match (t.get("file"), t.get("size")) {
        (Some(f), None) => {
            let name = f.str()?;
            let path = dir.join(name);
            xload_sys::input::read(&path, "a request body", xload_sys::input::BODY_LIMIT)
                .map_err(|e| f.error(format!("cannot read {}: {e}", path.display())))
        }
        (None, Some(s)) => {
            let size = s.u64()?;
            if size > 64 << 20 {
                return Err(s.error("expected at most 64 MiB"));
            }
            // Printable and deterministic: the alphabet repeated.
            Ok((0..size).map(|i| b'a' + (i % 26) as u8).collect())
        }
        _ => Err(node.error("expected a string, { file = \"PATH\" } or { size = BYTES }")),
    }
}

fn check(
    node: &Node,
    path: &str,
    values: Option<&Values>,
    manifest: Option<&Manifest>,
) -> Result<Check, Error> {
    let t = node.table()?;
    t.only(&["status", "body_size", "sha256", "contains", "not_contains"])?;
    let mut c = Check::default();
    if let Some(n) = t.get("status") {
        let items = if n.array().is_ok() {
            n.array()?
        } else {
            vec![n.clone()]
        };
        for item in items {
            match item.u64()? {
                s @ 100..=599 => c.status.push(s as u16),
                _ => return Err(item.error("expected a status code from 100 to 599")),
            }
        }
        if c.status.is_empty() {
            return Err(n.error("expected at least one status code"));
        }
    }
    let wants_manifest = |n: &Node| -> Result<bool, Error> {
        if n.str().ok() != Some("manifest") {
            return Ok(false);
        }
        // The entry is the one `{n}` names, or the fixed path's own.
        let Some(m) = manifest else {
            return Err(n.error("needs a top-level `manifest = \"PATH\"`"));
        };
        match values {
            Some(v) if v.source == Source::Manifest => Ok(true),
            Some(_) => Err(n.error("needs `n = { manifest = true }` to know each path's entry")),
            None if m.get(path).is_some() => Ok(true),
            None => Err(n.error(format!("{path:?} is not in the manifest"))),
        }
    };
    if let Some(n) = t.get("body_size") {
        c.body_size = Some(if wants_manifest(&n)? {
            Expected::Manifest
        } else {
            Expected::Value(n.u64()?)
        });
    }
    if let Some(n) = t.get("sha256") {
        c.sha256 = Some(if wants_manifest(&n)? {
            Expected::Manifest
        } else {
            let hex = n.str()?;
            Expected::Value(
                parse_sha256(hex)
                    .ok_or_else(|| n.error("expected 64 hex digits or \"manifest\""))?,
            )
        });
    }
    c.contains = strings(t.get("contains"))?;
    c.not_contains = strings(t.get("not_contains"))?;
    Ok(c)
}

/// A string or an array of non-empty strings, as bytes.
fn strings(node: Option<Node>) -> Result<Vec<Vec<u8>>, Error> {
    let Some(node) = node else {
        return Ok(Vec::new());
    };
    let items = if node.array().is_ok() {
        node.array()?
    } else {
        vec![node.clone()]
    };
    let mut out = Vec::new();
    for item in items {
        let s = item.str()?;
        if s.is_empty() {
            return Err(item.error("expected a non-empty string"));
        }
        out.push(s.as_bytes().to_vec());
    }
    if out.len() > crate::check::MAX_NEEDLES {
        return Err(node.error(format!(
            "expected at most {} strings",
            crate::check::MAX_NEEDLES
        )));
    }
    Ok(out)
}

fn limits(node: &Node) -> Result<Limits, Error> {
    let mut l = Limits::default();
    for (key, value) in node.table()?.entries() {
        if key == "mean" {
            l.mean = Some(value.duration()?);
            continue;
        }
        let share = key.strip_prefix('p').and_then(|p| p.parse::<f64>().ok());
        match share {
            Some(s) if s > 0.0 && s < 100.0 => l.percentiles.push((s, value.duration()?)),
            _ => {
                return Err(value.error(
                    "unknown limit; expected `mean` or a percentile such as `p99` or `\"p99.9\"`",
                ))
            }
        }
    }
    l.percentiles.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(l)
}

fn session(node: &Node, classes: &[Class]) -> Result<Session, Error> {
    let t = node.table()?;
    t.only(&["think", "sequence", "start", "markov", "cookies"])?;
    let cookies = match t.get("cookies") {
        Some(n) => n
            .value
            .get_ref()
            .as_bool()
            .ok_or_else(|| n.error("expected true or false"))?,
        None => true,
    };
    let think = t
        .get("think")
        .map(|n| think(&n))
        .transpose()?
        .unwrap_or(Think::None);
    let index = |n: &Node| -> Result<usize, Error> {
        let name = n.str()?;
        classes
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| n.error(format!("no class named {name:?}")))
    };
    let flow = match (t.get("sequence"), t.get("markov")) {
        (Some(seq), None) => {
            if t.get("start").is_some() {
                return Err(t.error("start", "only applies to `markov`"));
            }
            let steps = seq
                .array()?
                .iter()
                .map(index)
                .collect::<Result<Vec<_>, _>>()?;
            if steps.is_empty() {
                return Err(seq.error("expected at least one class"));
            }
            Flow::Sequence(steps)
        }
        (None, Some(m)) => {
            let mut rows = vec![vec![0.0; classes.len()]; classes.len()];
            for (from, row) in m.table()?.entries() {
                let f = classes
                    .iter()
                    .position(|c| c.name == from)
                    .ok_or_else(|| row.error("no class of this name"))?;
                for (to, w) in row.table()?.entries() {
                    let t = classes
                        .iter()
                        .position(|c| c.name == to)
                        .ok_or_else(|| w.error("no class of this name"))?;
                    rows[f][t] = w
                        .number()
                        .filter(|v| *v >= 0.0 && v.is_finite())
                        .ok_or_else(|| w.error("expected a weight >= 0"))?;
                }
            }
            let start = match t.get("start") {
                Some(s) => {
                    let mut start = vec![0.0; classes.len()];
                    start[index(&s)?] = 1.0;
                    start
                }
                None => classes.iter().map(|c| c.weight).collect(),
            };
            Flow::Markov { start, rows }
        }
        _ => return Err(node.error("expected exactly one of `sequence` or `markov`")),
    };
    Ok(Session {
        flow,
        think,
        cookies,
    })
}

fn think(node: &Node) -> Result<Think, Error> {
    if !node.is_table() {
        return Ok(Think::Fixed(node.duration()?));
    }
    let t = node.table()?;
    t.only(&["fixed", "uniform", "exponential"])?;
    match (t.get("fixed"), t.get("uniform"), t.get("exponential")) {
        (Some(f), None, None) => Ok(Think::Fixed(f.duration()?)),
        (None, Some(u), None) => {
            let b = u.array()?;
            if b.len() != 2 {
                return Err(u.error("expected [\"min\", \"max\"]"));
            }
            let (lo, hi) = (b[0].duration()?, b[1].duration()?);
            if hi < lo {
                return Err(u.error("expected min <= max"));
            }
            Ok(Think::Uniform(lo, hi))
        }
        (None, None, Some(e)) => Ok(Think::Exponential(e.duration()?)),
        _ => {
            Err(node
                .error("expected a duration, or exactly one of `fixed`, `uniform`, `exponential`"))
        }
    }
}
