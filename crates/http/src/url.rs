//! `http://` and `https://host[:port]/path?query` target URLs, parsed once per run.
//!
//! Only what a load generator needs: a host to resolve, a port to connect
//! to, whether to speak TLS, the request-target to send and the `Host`
//! header value. Anything the request could not faithfully carry (userinfo,
//! fragments, spaces in the path) is refused with an error that names it, instead of being
//! silently dropped or rewritten.

use std::net::{Ipv4Addr, Ipv6Addr};

/// A parsed `http://` or `https://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    /// `https://`: the connection speaks TLS (SNI from `host`).
    pub tls: bool,
    /// Host name or IP literal, without the brackets of an IPv6 literal.
    pub host: String,
    /// TCP port (80 for http, 443 for https when the URL gives none).
    pub port: u16,
    /// Request-target: path and query as sent on the request line; `/` when empty.
    pub path_and_query: String,
    /// `Host` header value: host (IPv6 bracketed) and `:port` when the URL gave one.
    pub authority: String,
}

/// Why a URL was refused.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UrlError {
    /// The URL is empty (or only whitespace).
    #[error("empty URL")]
    Empty,
    /// A scheme other than http and https.
    #[error("unsupported URL scheme {0:?}: only http:// and https:// are supported")]
    UnsupportedScheme(String),
    /// No host between `http://` and the port or path.
    #[error("URL has an empty host")]
    EmptyHost,
    /// `user:password@` in the authority.
    #[error("userinfo (user@host) in URLs is not supported; send credentials with -H 'Authorization: ...'")]
    UserinfoUnsupported,
    /// The host contains a character that no host name may contain.
    #[error("invalid host {0:?}")]
    BadHost(String),
    /// A bracketed IPv6 literal that does not parse (zone ids are not supported).
    #[error("invalid IPv6 literal {0:?}")]
    BadIpv6(String),
    /// The port is not a number in 1..=65535.
    #[error("invalid port {0:?}: expected a number from 1 to 65535")]
    BadPort(String),
    /// A `#fragment` is never sent to a server, so a URL with one would not mean what it says.
    #[error("URL fragment {0:?} is never sent to the server; remove it")]
    Fragment(String),
    /// The path or query contains a byte that cannot appear in a request-target.
    #[error("invalid character {0:?} in path or query (percent-encode it)")]
    BadPathChar(char),
}

/// Parses `http[s]://host[:port][/path][?query]`; a missing scheme means http.
///
/// IPv6 literals are written in brackets (`http://[::1]:8080/`). The port
/// defaults to 80 (443 for https) and is then left out of [`Url::authority`].
pub fn parse_url(s: &str) -> Result<Url, UrlError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(UrlError::Empty);
    }
    let (tls, rest) = match s.find("://") {
        Some(i) => {
            let scheme = &s[..i];
            if scheme.eq_ignore_ascii_case("http") {
                (false, &s[i + 3..])
            } else if scheme.eq_ignore_ascii_case("https") {
                (true, &s[i + 3..])
            } else {
                return Err(UrlError::UnsupportedScheme(scheme.to_string()));
            }
        }
        None => (false, s),
    };
    if let Some(i) = rest.find('#') {
        return Err(UrlError::Fragment(rest[i..].to_string()));
    }
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, target) = rest.split_at(auth_end);
    if auth.contains('@') {
        return Err(UrlError::UserinfoUnsupported);
    }
    let (host, port_str) = split_host_port(auth)?;
    let port = match port_str {
        None | Some("") if tls => 443,
        None | Some("") => 80,
        Some(p) => parse_port(p)?,
    };
    let explicit_port = matches!(port_str, Some(p) if !p.is_empty());
    let authority = match (host.contains(':'), explicit_port) {
        (true, true) => format!("[{host}]:{port}"),
        (true, false) => format!("[{host}]"),
        (false, true) => format!("{host}:{port}"),
        (false, false) => host.to_string(),
    };
    if let Some(c) = target.chars().find(|&c| !is_target_char(c)) {
        return Err(UrlError::BadPathChar(c));
    }
    let path_and_query = if target.is_empty() {
        "/".to_string()
    } else if target.starts_with('?') {
        format!("/{target}")
    } else {
        target.to_string()
    };
    Ok(Url {
        tls,
        host: host.to_string(),
        port,
        path_and_query,
        authority,
    })
}

/// Splits `host[:port]` or `[v6][:port]`; validates the host.
fn split_host_port(auth: &str) -> Result<(&str, Option<&str>), UrlError> {
    if let Some(inner) = auth.strip_prefix('[') {
        let Some(close) = inner.find(']') else {
            return Err(UrlError::BadIpv6(auth.to_string()));
        };
        let host = &inner[..close];
        if host.is_empty() {
            return Err(UrlError::EmptyHost);
        }
        if host.parse::<Ipv6Addr>().is_err() {
            return Err(UrlError::BadIpv6(host.to_string()));
        }
        let after = &inner[close + 1..];
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(p))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(UrlError::BadPort(after.to_string())),
        };
    }
    let (host, port) = match auth.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (auth, None),
    };
    if host.is_empty() {
        return Err(UrlError::EmptyHost);
    }
    if !host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
    {
        return Err(UrlError::BadHost(host.to_string()));
    }
    // All-digit dotted hosts must be real IPv4 addresses ("1.2.3.999" is a typo, not a name).
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') && host.parse::<Ipv4Addr>().is_err() {
        return Err(UrlError::BadHost(host.to_string()));
    }
    Ok((host, port))
}

fn parse_port(p: &str) -> Result<u16, UrlError> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(UrlError::BadPort(p.to_string()));
    }
    match p.parse::<u32>() {
        Ok(n @ 1..=65535) => Ok(n as u16),
        _ => Err(UrlError::BadPort(p.to_string())),
    }
}

/// Characters allowed verbatim in a request-target: visible ASCII except `#`.
fn is_target_char(c: char) -> bool {
    c.is_ascii_graphic() && c != '#'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> (String, u16, String, String) {
        let u = parse_url(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        (u.host, u.port, u.path_and_query, u.authority)
    }

    fn t(h: &str, p: u16, pq: &str, a: &str) -> (String, u16, String, String) {
        (h.into(), p, pq.into(), a.into())
    }

    #[test]
    fn accepted_urls_table() {
        let table = [
            (
                "http://127.0.0.1:8080/",
                t("127.0.0.1", 8080, "/", "127.0.0.1:8080"),
            ),
            (
                "http://127.0.0.1:8080",
                t("127.0.0.1", 8080, "/", "127.0.0.1:8080"),
            ),
            ("http://example", t("example", 80, "/", "example")),
            ("http://example:80/x", t("example", 80, "/x", "example:80")),
            (
                "HTTP://Example.COM/a/b?c=d&e",
                t("Example.COM", 80, "/a/b?c=d&e", "Example.COM"),
            ),
            (
                "127.0.0.1:9000/path",
                t("127.0.0.1", 9000, "/path", "127.0.0.1:9000"),
            ),
            ("localhost", t("localhost", 80, "/", "localhost")),
            ("http://[::1]:8080/x", t("::1", 8080, "/x", "[::1]:8080")),
            ("http://[::1]/", t("::1", 80, "/", "[::1]")),
            ("http://[::1]:80", t("::1", 80, "/", "[::1]:80")),
            (
                "http://[2001:db8::7]:1/q?x=1",
                t("2001:db8::7", 1, "/q?x=1", "[2001:db8::7]:1"),
            ),
            ("http://h?x=1", t("h", 80, "/?x=1", "h")),
            ("http://h:/p", t("h", 80, "/p", "h")),
            ("  http://h/p  ", t("h", 80, "/p", "h")),
            ("http://h/%20a", t("h", 80, "/%20a", "h")),
            (
                "http://my_host-1.local:65535",
                t("my_host-1.local", 65535, "/", "my_host-1.local:65535"),
            ),
        ];
        for (input, want) in table {
            assert_eq!(ok(input), want, "{input}");
        }
    }

    #[test]
    fn refused_urls_table() {
        use UrlError::*;
        let table: &[(&str, UrlError)] = &[
            ("", Empty),
            ("   ", Empty),
            ("ftp://example/", UnsupportedScheme("ftp".into())),
            ("http://", EmptyHost),
            ("http:///path", EmptyHost),
            ("http://:8080/", EmptyHost),
            ("http://[]:80/", EmptyHost),
            ("http://user:pw@host/", UserinfoUnsupported),
            ("http://host:0/", BadPort("0".into())),
            ("http://host:65536/", BadPort("65536".into())),
            ("http://host:80a/", BadPort("80a".into())),
            ("http://host:-1/", BadPort("-1".into())),
            ("http://host:123456/", BadPort("123456".into())),
            ("http://[::1]x/", BadPort("x".into())),
            ("http://[::1/", BadIpv6("[::1".into())),
            ("http://[fe80::1%25eth0]/", BadIpv6("fe80::1%25eth0".into())),
            ("http://[::g]/", BadIpv6("::g".into())),
            ("http://h/p#frag", Fragment("#frag".into())),
            ("http://h/a b", BadPathChar(' ')),
            ("http://h/é", BadPathChar('é')),
            ("http://h/\tx", BadPathChar('\t')),
            ("http://ho st/", BadHost("ho st".into())),
            ("http://h%41/", BadHost("h%41".into())),
            ("http://1.2.3.999/", BadHost("1.2.3.999".into())),
            ("http://h:1:2/", BadPort("1:2".into())),
        ];
        for (input, want) in table {
            assert_eq!(parse_url(input).as_ref(), Err(want), "{input:?}");
        }
    }

    #[test]
    fn https_speaks_tls_on_port_443_by_default() {
        let u = parse_url("HTTPS://example/x").unwrap();
        assert!(u.tls);
        assert_eq!((u.port, u.authority.as_str()), (443, "example"));
        let u = parse_url("https://[::1]:8443").unwrap();
        assert_eq!((u.port, u.authority.as_str()), (8443, "[::1]:8443"));
        assert!(!parse_url("http://example/").unwrap().tls);
    }
}
