//! Captures: values a response gives (a header, a regex group of the body,
//! a JSON member) that later requests of the same session carry as
//! `{name}`, and the per-session store of them.

use std::fmt;

/// Most distinct capture names per workload (a session's values are a bitmask).
pub const MAX_CAPTURES: usize = 64;

/// One `capture = { NAME = { ... } }` entry of a class.
#[derive(Clone, Debug)]
pub struct Capture {
    pub name: String,
    /// Index of the name in [`crate::Workload::captures`].
    pub slot: usize,
    pub from: CaptureFrom,
}

/// Where a captured value is found.
#[derive(Clone, Debug)]
pub enum CaptureFrom {
    /// The first field of this name in the response head (value trimmed).
    Header(String),
    /// The first match of the regex in the body: its first group, or the
    /// whole match when it has none.
    BodyRegex(regex::bytes::Regex),
    /// `$.a.b[0]`: a string, number or boolean member of a JSON body.
    Json(Vec<JsonStep>),
}

impl PartialEq for CaptureFrom {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CaptureFrom::Header(a), CaptureFrom::Header(b)) => a.eq_ignore_ascii_case(b),
            (CaptureFrom::BodyRegex(a), CaptureFrom::BodyRegex(b)) => a.as_str() == b.as_str(),
            (CaptureFrom::Json(a), CaptureFrom::Json(b)) => a == b,
            _ => false,
        }
    }
}

impl PartialEq for Capture {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.slot == other.slot && self.from == other.from
    }
}

impl CaptureFrom {
    /// Whether the value comes from the body (which must then be kept).
    pub fn reads_body(&self) -> bool {
        !matches!(self, CaptureFrom::Header(_))
    }
}

/// One step of a JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonStep {
    Key(String),
    Index(usize),
}

/// Parses the `$.a.b[0]` subset: `$`, then `.name` and `[index]` steps.
pub fn parse_json_path(s: &str) -> Result<Vec<JsonStep>, String> {
    let bad = || format!("expected a JSON path like \"$.cart.id\" or \"$.items[0].id\", got {s:?}");
    let mut rest = s.strip_prefix('$').ok_or_else(bad)?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            if key.is_empty() {
                return Err(bad());
            }
            steps.push(JsonStep::Key(key.to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(bad)?;
            let i = r[..end].parse().map_err(|_| bad())?;
            steps.push(JsonStep::Index(i));
            rest = &r[end + 1..];
        } else {
            return Err(bad());
        }
    }
    if steps.is_empty() {
        return Err(bad());
    }
    Ok(steps)
}

/// Why a capture took no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Miss {
    /// Nothing matched.
    NotFound,
    /// The value holds spaces or control bytes: it cannot go into a path or header.
    Unusable,
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Miss::NotFound => "found nothing",
            Miss::Unusable => "value holds spaces or control bytes",
        })
    }
}

impl Capture {
    /// Finds the value in a response (`head`: status line and fields;
    /// `body`: the payload) and writes it to `out` (cleared first).
    pub fn extract(&self, head: &[u8], body: &[u8], out: &mut Vec<u8>) -> Result<(), Miss> {
        self.extract_with(head, body, out, &mut None)
    }

    /// [`Capture::extract`] with the regex's match positions kept in `locs`
    /// (made at the first use): a warm session allocates nothing.
    fn extract_with(
        &self,
        head: &[u8],
        body: &[u8],
        out: &mut Vec<u8>,
        locs: &mut Option<regex::bytes::CaptureLocations>,
    ) -> Result<(), Miss> {
        out.clear();
        let found = match &self.from {
            CaptureFrom::Header(name) => header_values(head, name.as_bytes())
                .next()
                .map(|v| out.extend_from_slice(v)),
            CaptureFrom::BodyRegex(re) => {
                let locs = locs.get_or_insert_with(|| re.capture_locations());
                re.captures_read(locs, body).map(|whole| {
                    let (a, b) = locs.get(1).unwrap_or((whole.start(), whole.end()));
                    out.extend_from_slice(&body[a..b]);
                })
            }
            CaptureFrom::Json(steps) => json_value(body, steps, out),
        };
        match found {
            None => Err(Miss::NotFound),
            Some(()) if out.is_empty() => Err(Miss::NotFound),
            Some(()) if out.iter().any(|&b| b <= b' ' || b == 0x7f) => Err(Miss::Unusable),
            Some(()) => Ok(()),
        }
    }
}

/// The values of every field named `name` (case-insensitive) in a response
/// head, trimmed; the status line is skipped.
pub fn header_values<'a>(head: &'a [u8], name: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    head.split(|&b| b == b'\n').skip(1).filter_map(move |line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        line[..colon]
            .eq_ignore_ascii_case(name)
            .then(|| line[colon + 1..].trim_ascii())
    })
}

/// A session's captured values, by slot.
#[derive(Clone, Debug, Default)]
pub struct Captured {
    values: Vec<Vec<u8>>,
    /// Per slot: a body regex's match positions, reused.
    locs: Vec<Option<regex::bytes::CaptureLocations>>,
    /// Bit i: slot i holds a value of this session.
    have: u64,
}

impl Captured {
    pub fn new(slots: usize) -> Captured {
        Captured {
            values: vec![Vec::new(); slots],
            locs: vec![None; slots],
            have: 0,
        }
    }

    /// Forgets every value (a new session), keeping the buffers.
    pub fn clear(&mut self) {
        self.have = 0;
    }

    /// Whether every slot of `mask` holds a value.
    pub fn has_all(&self, mask: u64) -> bool {
        self.have & mask == mask
    }

    /// The first slot of `mask` without a value.
    pub fn first_missing(&self, mask: u64) -> Option<usize> {
        let missing = mask & !self.have;
        (missing != 0).then(|| missing.trailing_zeros() as usize)
    }

    pub fn get(&self, slot: usize) -> &[u8] {
        &self.values[slot]
    }

    /// Runs `capture` on a response; on success its slot holds the value.
    pub fn take(&mut self, capture: &Capture, head: &[u8], body: &[u8]) -> Result<(), Miss> {
        let (out, locs) = (&mut self.values[capture.slot], &mut self.locs[capture.slot]);
        let r = capture.extract_with(head, body, out, locs);
        if r.is_ok() {
            self.have |= 1 << capture.slot;
        } else {
            self.have &= !(1 << capture.slot);
        }
        r
    }
}

/// Walks `steps` into the JSON text `s`; writes the scalar found (a
/// string's content, unescaped, or a number's or boolean's text).
fn json_value(s: &[u8], steps: &[JsonStep], out: &mut Vec<u8>) -> Option<()> {
    let mut p = Json { s, i: 0 };
    for step in steps {
        p.ws();
        match step {
            JsonStep::Key(key) => {
                p.eat(b'{')?;
                loop {
                    p.ws();
                    if p.peek()? == b'}' {
                        return None;
                    }
                    out.clear();
                    p.string(out)?;
                    p.ws();
                    p.eat(b':')?;
                    p.ws();
                    if out[..] == *key.as_bytes() {
                        break;
                    }
                    p.skip_value()?;
                    p.ws();
                    if p.peek()? == b',' {
                        p.i += 1;
                    }
                }
            }
            JsonStep::Index(n) => {
                p.eat(b'[')?;
                for _ in 0..*n {
                    p.ws();
                    if p.peek()? == b']' {
                        return None;
                    }
                    p.skip_value()?;
                    p.ws();
                    p.eat(b',')?;
                }
                p.ws();
                if p.peek()? == b']' {
                    return None;
                }
            }
        }
    }
    p.ws();
    out.clear();
    match p.peek()? {
        b'"' => p.string(out),
        b'{' | b'[' | b'n' => None,
        _ => {
            let start = p.i;
            p.scalar()?;
            out.extend_from_slice(&s[start..p.i]);
            Some(())
        }
    }
}

struct Json<'a> {
    s: &'a [u8],
    i: usize,
}

impl Json<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.i += 1)
    }

    /// A string, unescaped into `out` (`\uXXXX` as UTF-8, surrogates refused).
    fn string(&mut self, out: &mut Vec<u8>) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let b = self.peek()?;
            self.i += 1;
            match b {
                b'"' => return Some(()),
                b'\\' => {
                    let e = self.peek()?;
                    self.i += 1;
                    let c = match e {
                        b'"' | b'\\' | b'/' => e,
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let hex = self.s.get(self.i..self.i + 4)?;
                            let v = u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
                            self.i += 4;
                            let ch = char::from_u32(v)?;
                            let mut buf = [0; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            continue;
                        }
                        _ => return None,
                    };
                    out.push(c);
                }
                _ => out.push(b),
            }
        }
    }

    /// A number, `true`, `false` or `null`.
    fn scalar(&mut self) -> Option<()> {
        let start = self.i;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'E')
        ) {
            self.i += 1;
        }
        let t = &self.s[start..self.i];
        let ok = matches!(t, b"true" | b"false" | b"null")
            || (!t.is_empty() && t.iter().all(|b| !b.is_ascii_lowercase() || *b == b'e'));
        ok.then_some(())
    }

    fn skip_value(&mut self) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => {
                let mut sink = Vec::new();
                self.string(&mut sink)
            }
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.i += 1;
                loop {
                    self.ws();
                    if self.peek()? == close {
                        self.i += 1;
                        return Some(());
                    }
                    if open == b'{' {
                        let mut sink = Vec::new();
                        self.string(&mut sink)?;
                        self.ws();
                        self.eat(b':')?;
                    }
                    self.skip_value()?;
                    self.ws();
                    if self.peek()? == b',' {
                        self.i += 1;
                    }
                }
            }
            _ => self.scalar(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(from: CaptureFrom) -> Capture {
        Capture {
            name: "x".into(),
            slot: 0,
            from,
        }
    }

    fn get(c: &Capture, head: &[u8], body: &[u8]) -> Result<String, Miss> {
        let mut out = Vec::new();
        c.extract(head, body, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn header_capture_is_case_insensitive_and_trimmed() {
        let head = b"HTTP/1.1 200 OK\r\nx-token:  abc123 \r\nX-Token: second\r\n\r\n";
        let c = cap(CaptureFrom::Header("X-Token".into()));
        assert_eq!(get(&c, head, b"").unwrap(), "abc123");
        let c = cap(CaptureFrom::Header("X-Missing".into()));
        assert_eq!(get(&c, head, b""), Err(Miss::NotFound));
        // The status line is not a field.
        let c = cap(CaptureFrom::Header("HTTP/1.1 200 OK\r\nx".into()));
        assert_eq!(get(&c, head, b""), Err(Miss::NotFound));
    }

    #[test]
    fn regex_capture_takes_the_first_group() {
        let re = |s: &str| cap(CaptureFrom::BodyRegex(regex::bytes::Regex::new(s).unwrap()));
        let body = b"<a href=\"/acct?acct=4711\">acct=9</a>";
        assert_eq!(get(&re("acct=([0-9]+)"), b"", body).unwrap(), "4711");
        assert_eq!(get(&re("acct=[0-9]"), b"", body).unwrap(), "acct=4");
        assert_eq!(get(&re("cart=([0-9]+)"), b"", body), Err(Miss::NotFound));
        assert_eq!(
            get(&re("acct=([0-9]*)x"), b"", b"acct=x"),
            Err(Miss::NotFound)
        );
        assert_eq!(get(&re("<(a h)"), b"", body), Err(Miss::Unusable));
    }

    #[test]
    fn json_paths() {
        let json = |path: &str, body: &str| {
            get(
                &cap(CaptureFrom::Json(parse_json_path(path).unwrap())),
                b"",
                body.as_bytes(),
            )
        };
        let body = r#" { "user": "ann", "cart": { "items": [ {"id": 1}, {"id": "b\"2\u0041"} ], "id": 42, "open": true }, "n": null }"#;
        assert_eq!(json("$.cart.id", body).unwrap(), "42");
        assert_eq!(json("$.user", body).unwrap(), "ann");
        assert_eq!(json("$.cart.open", body).unwrap(), "true");
        assert_eq!(json("$.cart.items[1].id", body).unwrap(), "b\"2A");
        assert_eq!(json("$.cart.items[0].id", body).unwrap(), "1");
        assert_eq!(json("$.cart.items[2].id", body), Err(Miss::NotFound));
        assert_eq!(json("$.cart", body), Err(Miss::NotFound));
        assert_eq!(json("$.n", body), Err(Miss::NotFound));
        assert_eq!(json("$.nope", body), Err(Miss::NotFound));
        assert_eq!(json("$.cart.id", "not json"), Err(Miss::NotFound));
        assert_eq!(
            json("$.cart.id", r#"{"cart": {"id": "4"#),
            Err(Miss::NotFound)
        );
        for bad in ["cart.id", "$", "$.", "$..a", "$[x]", "$.a[1"] {
            assert!(parse_json_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn captured_values_are_per_slot() {
        let mut v = Captured::new(2);
        let c = Capture {
            name: "t".into(),
            slot: 1,
            from: CaptureFrom::Header("X-T".into()),
        };
        assert!(!v.has_all(0b10));
        v.take(&c, b"HTTP/1.1 200 OK\r\nX-T: 7\r\n\r\n", b"")
            .unwrap();
        assert!(v.has_all(0b10));
        assert_eq!(v.first_missing(0b11), Some(0));
        assert_eq!(v.get(1), b"7");
        assert!(v.take(&c, b"HTTP/1.1 200 OK\r\n\r\n", b"").is_err());
        assert!(!v.has_all(0b10));
        v.clear();
        assert_eq!(v.first_missing(0b10), Some(1));
    }
}
