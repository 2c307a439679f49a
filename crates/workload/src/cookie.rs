//! A session's cookie jar: the subset of RFC 6265 that matters for load
//! (name and value, `Path`, `Max-Age` and `Expires`, `Domain`, `Secure`).
//!
//! Time is the run's monotonic clock in ns: `Max-Age` counts from the
//! response that set the cookie, and `Expires` (an HTTP date) is turned into
//! the same kind of deadline by its distance from the wall clock when the
//! cookie arrives. The jar reuses its storage: replacing a cookie's value
//! allocates nothing once the jar has held it.

/// One stored cookie.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cookie {
    name: Vec<u8>,
    value: Vec<u8>,
    /// Lower-case domain; `host_only` cookies go to that exact host only.
    domain: Vec<u8>,
    host_only: bool,
    path: Vec<u8>,
    /// Deadline on the run's clock (ns); None: lives as long as the session.
    expires_ns: Option<u64>,
    secure: bool,
}

/// The cookies of one session.
#[derive(Clone, Debug, Default)]
pub struct Jar {
    cookies: Vec<Cookie>,
    /// Cookies dropped (replaced or expired) whose buffers are reused.
    spare: Vec<Cookie>,
}

/// Where a request goes: what a cookie is matched against.
#[derive(Clone, Copy, Debug)]
pub struct Origin<'a> {
    /// The target host (lower case), as in the URL.
    pub host: &'a str,
    /// The request path (the query is ignored).
    pub path: &'a [u8],
    pub https: bool,
}

impl Jar {
    pub fn new() -> Jar {
        Jar::default()
    }

    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    pub fn len(&self) -> usize {
        self.cookies.len()
    }

    /// Forgets every cookie (a new session), keeping the buffers.
    pub fn clear(&mut self) {
        self.spare.append(&mut self.cookies);
    }

    /// Takes one `Set-Cookie` field value received for a request to `origin`
    /// at `now_ns` (run clock), `wall_secs` being the Unix time then.
    /// Malformed cookies and those for another domain are ignored, as a
    /// browser does.
    pub fn set(&mut self, value: &[u8], origin: Origin<'_>, now_ns: u64, wall_secs: u64) {
        let mut parts = value.split(|&b| b == b';');
        let Some(pair) = parts.next() else { return };
        let Some(eq) = pair.iter().position(|&b| b == b'=') else {
            return;
        };
        let (name, val) = (trim(&pair[..eq]), trim(&pair[eq + 1..]));
        if name.is_empty() {
            return;
        }
        let mut domain: Option<&[u8]> = None;
        let mut path: Option<&[u8]> = None;
        let mut max_age: Option<i64> = None;
        let mut expires: Option<u64> = None;
        let mut secure = false;
        for attr in parts {
            let (k, v) = match attr.iter().position(|&b| b == b'=') {
                Some(i) => (trim(&attr[..i]), trim(&attr[i + 1..])),
                None => (trim(attr), &b""[..]),
            };
            if k.eq_ignore_ascii_case(b"domain") {
                let d = v.strip_prefix(b".").unwrap_or(v);
                if !d.is_empty() {
                    domain = Some(d);
                }
            } else if k.eq_ignore_ascii_case(b"path") {
                if v.first() == Some(&b'/') {
                    path = Some(v);
                }
            } else if k.eq_ignore_ascii_case(b"max-age") {
                max_age = std::str::from_utf8(v).ok().and_then(|s| s.parse().ok());
            } else if k.eq_ignore_ascii_case(b"expires") {
                expires = std::str::from_utf8(v).ok().and_then(parse_http_date);
            } else if k.eq_ignore_ascii_case(b"secure") {
                secure = true;
            }
        }
        let host = origin.host.as_bytes();
        let host_only = match domain {
            Some(d) if !d.eq_ignore_ascii_case(host) => {
                // A domain cookie: the host must be the domain or under it,
                // and an IP literal has no parent domain.
                let under = host.len() > d.len()
                    && host[host.len() - d.len()..].eq_ignore_ascii_case(d)
                    && host[host.len() - d.len() - 1] == b'.';
                if !under || origin.host.parse::<std::net::IpAddr>().is_ok() {
                    return;
                }
                false
            }
            Some(_) => false,
            None => true,
        };
        let domain = domain.unwrap_or(host);
        // Max-Age wins over Expires (RFC 6265 5.3 step 3).
        let expires_ns = match (max_age, expires) {
            (Some(s), _) if s <= 0 => Some(0),
            (Some(s), _) => Some(now_ns.saturating_add((s as u64).saturating_mul(1_000_000_000))),
            (None, Some(at)) if at <= wall_secs => Some(0),
            (None, Some(at)) => Some(now_ns.saturating_add((at - wall_secs) * 1_000_000_000)),
            (None, None) => None,
        };
        let default_path = default_path(origin.path);
        let path = path.unwrap_or(default_path);
        let same =
            |c: &Cookie| c.name == name && c.domain.eq_ignore_ascii_case(domain) && c.path == path;
        let at = self.cookies.iter().position(same);
        if expires_ns == Some(0) {
            // Expired on arrival: deletes the cookie it names.
            if let Some(i) = at {
                self.spare.push(self.cookies.remove(i));
            }
            return;
        }
        let c = match at {
            Some(i) => &mut self.cookies[i],
            None => {
                let c = self.spare.pop().unwrap_or(Cookie {
                    name: Vec::new(),
                    value: Vec::new(),
                    domain: Vec::new(),
                    host_only: true,
                    path: Vec::new(),
                    expires_ns: None,
                    secure: false,
                });
                self.cookies.push(c);
                self.cookies.last_mut().expect("just pushed")
            }
        };
        refill(&mut c.name, name);
        refill(&mut c.value, val);
        refill(&mut c.domain, domain);
        c.domain.make_ascii_lowercase();
        refill(&mut c.path, path);
        c.host_only = host_only;
        c.expires_ns = expires_ns;
        c.secure = secure;
    }

    /// Appends `Cookie: a=1; b=2\r\n` for a request to `origin` at `now_ns`
    /// (nothing when no cookie applies); drops expired cookies. Returns
    /// whether a line was written.
    pub fn write_header(&mut self, origin: Origin<'_>, now_ns: u64, out: &mut Vec<u8>) -> bool {
        let mut i = 0;
        while i < self.cookies.len() {
            if self.cookies[i].expires_ns.is_some_and(|t| t <= now_ns) {
                self.spare.push(self.cookies.remove(i));
            } else {
                i += 1;
            }
        }
        let path = origin.path.split(|&b| b == b'?').next().unwrap_or(b"/");
        let mut wrote = false;
        for c in &self.cookies {
            if (c.secure && !origin.https)
                || !domain_matches(c, origin.host.as_bytes())
                || !path_matches(&c.path, path)
            {
                continue;
            }
            out.extend_from_slice(if wrote { b"; " } else { b"Cookie: " });
            out.extend_from_slice(&c.name);
            out.push(b'=');
            out.extend_from_slice(&c.value);
            wrote = true;
        }
        if wrote {
            out.extend_from_slice(b"\r\n");
        }
        wrote
    }
}

fn refill(buf: &mut Vec<u8>, from: &[u8]) {
    buf.clear();
    buf.extend_from_slice(from);
}

fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

fn domain_matches(c: &Cookie, host: &[u8]) -> bool {
    if c.host_only || host.eq_ignore_ascii_case(&c.domain) {
        return host.eq_ignore_ascii_case(&c.domain);
    }
    host.len() > c.domain.len()
        && host[host.len() - c.domain.len()..].eq_ignore_ascii_case(&c.domain)
        && host[host.len() - c.domain.len() - 1] == b'.'
}

/// RFC 6265 5.1.4: the cookie path is the request path or a prefix of it
/// ending at a `/`.
fn path_matches(cookie: &[u8], request: &[u8]) -> bool {
    request == cookie
        || (request.starts_with(cookie)
            && (cookie.ends_with(b"/") || request.get(cookie.len()) == Some(&b'/')))
}

/// RFC 6265 5.1.4: the request path up to (not including) its last `/`, or `/`.
fn default_path(request: &[u8]) -> &[u8] {
    let path = request.split(|&b| b == b'?').next().unwrap_or(b"");
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/",
        Some(i) => &path[..i],
    }
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) or the dashed RFC 850
/// form (`Sunday, 06-Nov-94 08:49:37 GMT`) as Unix seconds.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let rest = s.split_once(',')?.1.trim();
    let mut it = rest.split([' ', '-']).filter(|p| !p.is_empty());
    let day: i64 = it.next()?.parse().ok()?;
    let month = it.next()?;
    let month = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    .iter()
    .position(|m| month.eq_ignore_ascii_case(m))? as i64
        + 1;
    let mut year: i64 = it.next()?.parse().ok()?;
    if year < 100 {
        year += if year < 70 { 2000 } else { 1900 };
    }
    let mut hms = it.next()?.split(':').map(|p| p.parse::<i64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let days = xload_sys::calendar::days_from_civil(year, month, day);
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + sec).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn at<'a>(host: &'a str, path: &'a str, https: bool) -> Origin<'a> {
        Origin {
            host,
            path: path.as_bytes(),
            https,
        }
    }

    fn header(jar: &mut Jar, o: Origin<'_>, now: u64) -> String {
        let mut out = Vec::new();
        jar.write_header(o, now, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn name_value_and_replacement() {
        let mut jar = Jar::new();
        let o = at("bank.test", "/login", false);
        jar.set(b"sid=abc; HttpOnly", o, 0, 0);
        jar.set(b" theme = dark ", o, 0, 0);
        jar.set(b"novalue", o, 0, 0);
        jar.set(b"=x", o, 0, 0);
        assert_eq!(header(&mut jar, o, 1), "Cookie: sid=abc; theme=dark\r\n");
        jar.set(b"sid=def", o, 0, 0);
        assert_eq!(header(&mut jar, o, 1), "Cookie: sid=def; theme=dark\r\n");
        jar.clear();
        assert!(jar.is_empty());
        assert_eq!(header(&mut jar, o, 1), "");
    }

    #[test]
    fn path_rules() {
        let mut jar = Jar::new();
        // Default path: the request path up to its last slash.
        jar.set(b"a=1", at("h", "/acct/summary?x=1", false), 0, 0);
        jar.set(b"b=2; Path=/acct/", at("h", "/", false), 0, 0);
        jar.set(b"c=3; Path=/", at("h", "/deep/page", false), 0, 0);
        jar.set(b"d=4; Path=nonsense", at("h", "/x/y", false), 0, 0);
        let get = |jar: &mut Jar, p: &str| header(jar, at("h", p, false), 0);
        assert_eq!(get(&mut jar, "/acct"), "Cookie: a=1; c=3\r\n");
        assert_eq!(get(&mut jar, "/acct/x"), "Cookie: a=1; b=2; c=3\r\n");
        assert_eq!(get(&mut jar, "/acctx"), "Cookie: c=3\r\n");
        assert_eq!(get(&mut jar, "/"), "Cookie: c=3\r\n");
        assert_eq!(get(&mut jar, "/x/z"), "Cookie: c=3; d=4\r\n");
    }

    #[test]
    fn expiry_on_the_run_clock() {
        let mut jar = Jar::new();
        let o = at("h", "/", false);
        let wall = 1_700_000_000;
        jar.set(b"short=1; Max-Age=2", o, 10 * SEC, wall);
        jar.set(
            b"dated=1; Expires=Tue, 14 Nov 2023 22:13:25 GMT",
            o,
            10 * SEC,
            wall,
        ); // wall + 5 s
        jar.set(
            b"both=1; Max-Age=100; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
            o,
            10 * SEC,
            wall,
        );
        assert_eq!(
            header(&mut jar, o, 11 * SEC),
            "Cookie: short=1; dated=1; both=1\r\n"
        );
        assert_eq!(header(&mut jar, o, 12 * SEC), "Cookie: dated=1; both=1\r\n");
        assert_eq!(header(&mut jar, o, 15 * SEC), "Cookie: both=1\r\n");
        // Max-Age=0 or a past date deletes.
        jar.set(b"both=x; Max-Age=0", o, 16 * SEC, wall);
        jar.set(
            b"gone=1; Expires=Sun, 06 Nov 1994 08:49:37 GMT",
            o,
            16 * SEC,
            wall,
        );
        assert_eq!(header(&mut jar, o, 16 * SEC), "");
        assert_eq!(
            parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"),
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT")
        );
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("yesterday"), None);
    }

    #[test]
    fn domain_rules() {
        let mut jar = Jar::new();
        let www = at("www.shop.test", "/", false);
        jar.set(b"host=1", www, 0, 0);
        jar.set(b"dom=1; Domain=.shop.test", www, 0, 0);
        jar.set(b"other=1; Domain=evil.test", www, 0, 0);
        jar.set(b"suffix=1; Domain=op.test", www, 0, 0);
        assert_eq!(header(&mut jar, www, 0), "Cookie: host=1; dom=1\r\n");
        assert_eq!(
            header(&mut jar, at("api.shop.test", "/", false), 0),
            "Cookie: dom=1\r\n"
        );
        assert_eq!(
            header(&mut jar, at("shop.test", "/", false), 0),
            "Cookie: dom=1\r\n"
        );
        assert_eq!(header(&mut jar, at("xshop.test", "/", false), 0), "");
        // An IP literal takes no domain cookie but its own.
        let ip = at("127.0.0.1", "/", false);
        jar.set(b"ipdom=1; Domain=0.0.1", ip, 0, 0);
        jar.set(b"ip=1; Domain=127.0.0.1", ip, 0, 0);
        assert_eq!(header(&mut jar, ip, 0), "Cookie: ip=1\r\n");
    }

    #[test]
    fn secure_only_over_https() {
        let mut jar = Jar::new();
        jar.set(b"s=1; Secure", at("h", "/", true), 0, 0);
        jar.set(b"p=1", at("h", "/", true), 0, 0);
        assert_eq!(header(&mut jar, at("h", "/", false), 0), "Cookie: p=1\r\n");
        assert_eq!(
            header(&mut jar, at("h", "/", true), 0),
            "Cookie: s=1; p=1\r\n"
        );
    }
}
