//! Request templates: one request rendered to bytes once, sent many times.
//!
//! The hot loop never formats anything: it writes [`RequestTemplate::bytes`]
//! (or a prebuilt [`RequestTemplate::pipelined`] batch) as they are. All
//! validation happens here, before the run starts, so a bad `-H` or method is
//! an argument error rather than thousands of 400s.

use crate::grammar::is_token;
use crate::url::Url;

/// The request to render: borrowed from the command line.
#[derive(Clone, Copy, Debug)]
pub struct RequestSpec<'a> {
    /// Method token, e.g. `GET`.
    pub method: &'a str,
    /// Target URL (its path and authority are used).
    pub url: &'a Url,
    /// Extra header fields in the order given (`-H`).
    pub headers: &'a [(String, String)],
    /// Request body; `Content-Length` is added when non-empty.
    pub body: &'a [u8],
}

/// Why a request could not be built.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// The method is empty or has a character outside the HTTP token set.
    #[error("invalid method {0:?}: must be an HTTP token such as GET or POST")]
    BadMethod(String),
    /// A `-H` argument without a `:` separating name and value.
    #[error("invalid header {0:?}: expected 'Name: value'")]
    MissingColon(String),
    /// A header name that is empty or has a character outside the token set (spaces included).
    #[error("invalid header name {0:?}")]
    BadHeaderName(String),
    /// A header value with CR, LF, NUL or another control character.
    #[error("invalid value for header {0:?}: control characters (CR, LF, NUL...) are not allowed")]
    BadHeaderValue(String),
    /// A `Content-Length` header that is not a number or disagrees with the body.
    #[error("Content-Length {given:?} does not match the body of {body_len} bytes")]
    ContentLengthMismatch {
        /// The header value as given.
        given: String,
        /// Actual body length in bytes.
        body_len: usize,
    },
    /// The same singleton header (Host, Content-Length) was given twice.
    #[error("header {0:?} given more than once")]
    Duplicate(String),
    /// `Transfer-Encoding` on a request: bodies are always sent with Content-Length.
    #[error("Transfer-Encoding on requests is not supported; bodies are sent with Content-Length")]
    TransferEncodingUnsupported,
    /// `--no-keepalive` asked for `Connection: close` while a `Connection` header says otherwise.
    #[error("a Connection header {0:?} conflicts with closing the connection after each request")]
    ConnectionConflict(String),
}

/// Parses a `-H 'Name: value'` argument. The value is trimmed of spaces and tabs.
pub fn parse_header_arg(s: &str) -> Result<(String, String), RequestError> {
    let Some((name, value)) = s.split_once(':') else {
        return Err(RequestError::MissingColon(s.to_string()));
    };
    let value = value.trim_matches([' ', '\t']);
    check_header(name, value)?;
    Ok((name.to_string(), value.to_string()))
}

fn check_header(name: &str, value: &str) -> Result<(), RequestError> {
    if !is_token(name.as_bytes()) {
        return Err(RequestError::BadHeaderName(name.to_string()));
    }
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(RequestError::BadHeaderValue(name.to_string()));
    }
    Ok(())
}

/// One request rendered to bytes once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestTemplate {
    /// The whole request: head and body.
    bytes: Vec<u8>,
    /// Length of the head without its final empty line (where headers may be appended).
    head_fields_end: usize,
    is_head: bool,
    closes: bool,
    /// Value of a user `Connection` header, if any.
    connection: Option<String>,
}

/// `User-Agent` sent unless the user gives one.
pub const USER_AGENT: &str = concat!("xload/", env!("CARGO_PKG_VERSION"));

impl RequestTemplate {
    /// Validates and renders the request.
    ///
    /// Header order: request line, `Host` (unless given), the user's headers in
    /// order, `User-Agent` (unless given), `Content-Length` (when the body is
    /// non-empty or the method is POST, PUT or PATCH, and none was given),
    /// empty line, body.
    pub fn new(spec: &RequestSpec) -> Result<Self, RequestError> {
        if !is_token(spec.method.as_bytes()) {
            return Err(RequestError::BadMethod(spec.method.to_string()));
        }
        let mut has_host = false;
        let mut has_ua = false;
        let mut has_cl = false;
        let mut connection: Option<String> = None;
        for (name, value) in spec.headers {
            check_header(name, value)?;
            if name.eq_ignore_ascii_case("host") {
                if has_host {
                    return Err(RequestError::Duplicate(name.clone()));
                }
                has_host = true;
            } else if name.eq_ignore_ascii_case("user-agent") {
                has_ua = true;
            } else if name.eq_ignore_ascii_case("content-length") {
                if has_cl {
                    return Err(RequestError::Duplicate(name.clone()));
                }
                has_cl = true;
                let ok = value.len() <= 20
                    && !value.is_empty()
                    && value.bytes().all(|b| b.is_ascii_digit())
                    && value.parse::<u64>().ok() == Some(spec.body.len() as u64);
                if !ok {
                    return Err(RequestError::ContentLengthMismatch {
                        given: value.clone(),
                        body_len: spec.body.len(),
                    });
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(RequestError::TransferEncodingUnsupported);
            } else if name.eq_ignore_ascii_case("connection") {
                connection = Some(match connection {
                    Some(prev) => format!("{prev}, {value}"),
                    None => value.clone(),
                });
            }
        }
        let mut bytes = Vec::with_capacity(128 + spec.body.len());
        let mut push = |parts: &[&[u8]]| parts.iter().for_each(|p| bytes.extend_from_slice(p));
        push(&[
            spec.method.as_bytes(),
            b" ",
            spec.url.path_and_query.as_bytes(),
            b" HTTP/1.1\r\n",
        ]);
        if !has_host {
            push(&[b"Host: ", spec.url.authority.as_bytes(), b"\r\n"]);
        }
        for (name, value) in spec.headers {
            push(&[name.as_bytes(), b": ", value.as_bytes(), b"\r\n"]);
        }
        if !has_ua {
            push(&[b"User-Agent: ", USER_AGENT.as_bytes(), b"\r\n"]);
        }
        // RFC 9110 8.6: a method that gives content a meaning says when it
        // has none (strict servers and proxies answer 411 without it).
        let body_method = matches!(spec.method, "POST" | "PUT" | "PATCH");
        if (!spec.body.is_empty() || body_method) && !has_cl {
            push(&[
                b"Content-Length: ",
                spec.body.len().to_string().as_bytes(),
                b"\r\n",
            ]);
        }
        let head_fields_end = bytes.len();
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(spec.body);
        let closes = connection.as_deref().is_some_and(|v| has_token(v, "close"));
        Ok(RequestTemplate {
            bytes,
            head_fields_end,
            is_head: spec.method == "HEAD",
            closes,
            connection,
        })
    }

    /// The request as sent on the wire.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `depth` copies of the request back to back (one write for a pipelined batch).
    pub fn pipelined(&self, depth: usize) -> Vec<u8> {
        self.bytes.repeat(depth)
    }

    /// The method is HEAD: responses carry no body.
    pub fn is_head(&self) -> bool {
        self.is_head
    }

    /// The request carries `Connection: close`: the server ends the connection after answering.
    pub fn closes(&self) -> bool {
        self.closes
    }

    /// The same request with `Connection: close` (for `--no-keepalive`).
    ///
    /// Returns `self` unchanged when it already closes; refuses when a user
    /// `Connection` header asks for something else (e.g. `keep-alive`).
    pub fn with_connection_close(&self) -> Result<Self, RequestError> {
        if self.closes {
            return Ok(self.clone());
        }
        if let Some(v) = &self.connection {
            return Err(RequestError::ConnectionConflict(v.clone()));
        }
        let mut bytes = Vec::with_capacity(self.bytes.len() + 19);
        bytes.extend_from_slice(&self.bytes[..self.head_fields_end]);
        bytes.extend_from_slice(b"Connection: close\r\n");
        let head_fields_end = bytes.len();
        bytes.extend_from_slice(&self.bytes[self.head_fields_end..]);
        Ok(RequestTemplate {
            bytes,
            head_fields_end,
            is_head: self.is_head,
            closes: true,
            connection: Some("close".to_string()),
        })
    }
}

/// Whether a comma-separated header value lists `token` (ASCII case-insensitive).
fn has_token(value: &str, token: &str) -> bool {
    value
        .split(',')
        .any(|t| t.trim_matches([' ', '\t']).eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::url::parse_url;

    fn render(
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<RequestTemplate, RequestError> {
        let url = parse_url(url).expect("test URL parses");
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RequestTemplate::new(&RequestSpec {
            method,
            url: &url,
            headers: &headers,
            body,
        })
    }

    fn text(t: &RequestTemplate) -> String {
        String::from_utf8(t.bytes().to_vec()).expect("ascii request")
    }

    #[test]
    fn get_renders_exact_bytes() {
        let t = render("GET", "http://127.0.0.1:8080/a?b=1", &[], b"").unwrap();
        let want = format!(
            "GET /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: {USER_AGENT}\r\n\r\n"
        );
        assert_eq!(text(&t), want);
        assert!(!t.is_head());
        assert!(!t.closes());
    }

    #[test]
    fn user_agent_is_xload_with_crate_version() {
        assert_eq!(USER_AGENT, format!("xload/{}", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn post_with_body_adds_content_length_after_user_headers() {
        let t = render(
            "POST",
            "http://[::1]/up",
            &[("X-A", "1"), ("content-type", "text/plain")],
            b"hello",
        )
        .unwrap();
        let want = format!(
            "POST /up HTTP/1.1\r\nHost: [::1]\r\nX-A: 1\r\ncontent-type: text/plain\r\nUser-Agent: {USER_AGENT}\r\nContent-Length: 5\r\n\r\nhello"
        );
        assert_eq!(text(&t), want);
    }

    #[test]
    fn an_empty_post_says_content_length_0() {
        for m in ["POST", "PUT", "PATCH"] {
            let t = render(m, "http://h/", &[], b"").unwrap();
            assert!(
                text(&t).ends_with("Content-Length: 0\r\n\r\n"),
                "{m}: {}",
                text(&t)
            );
        }
        for m in ["GET", "HEAD", "DELETE"] {
            let t = render(m, "http://h/", &[], b"").unwrap();
            assert!(!text(&t).contains("Content-Length"), "{m}: {}", text(&t));
        }
    }

    #[test]
    fn user_host_user_agent_and_matching_content_length_replace_defaults() {
        let t = render(
            "PUT",
            "http://h/",
            &[
                ("host", "virt"),
                ("User-Agent", "me"),
                ("Content-Length", "2"),
            ],
            b"ab",
        )
        .unwrap();
        assert_eq!(
            text(&t),
            "PUT / HTTP/1.1\r\nhost: virt\r\nUser-Agent: me\r\nContent-Length: 2\r\n\r\nab"
        );
    }

    #[test]
    fn head_request_is_flagged() {
        let t = render("HEAD", "http://h/", &[], b"").unwrap();
        assert!(t.is_head());
        assert!(text(&t).starts_with("HEAD / HTTP/1.1\r\n"));
    }

    #[test]
    fn pipelined_repeats_the_request_back_to_back() {
        let t = render("GET", "http://h/", &[], b"").unwrap();
        let p = t.pipelined(3);
        assert_eq!(p.len(), 3 * t.bytes().len());
        assert_eq!(&p[..t.bytes().len()], t.bytes());
        assert_eq!(&p[2 * t.bytes().len()..], t.bytes());
        assert!(t.pipelined(0).is_empty());
    }

    #[test]
    fn connection_close_detected_case_insensitively_in_lists() {
        assert!(
            render("GET", "http://h/", &[("connection", "Upgrade, CLOSE")], b"")
                .unwrap()
                .closes()
        );
        assert!(
            !render("GET", "http://h/", &[("Connection", "closed")], b"")
                .unwrap()
                .closes()
        );
        assert!(
            !render("GET", "http://h/", &[("X-Connection", "close")], b"")
                .unwrap()
                .closes()
        );
    }

    #[test]
    fn with_connection_close_appends_header_before_body() {
        let t = render("POST", "http://h/", &[], b"xy").unwrap();
        let c = t.with_connection_close().unwrap();
        let want = format!(
            "POST / HTTP/1.1\r\nHost: h\r\nUser-Agent: {USER_AGENT}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nxy"
        );
        assert_eq!(text(&c), want);
        assert!(c.closes());
        assert_eq!(c.with_connection_close().unwrap(), c, "idempotent");
    }

    #[test]
    fn with_connection_close_keeps_a_user_close_header_and_refuses_keep_alive() {
        let t = render("GET", "http://h/", &[("Connection", "close")], b"").unwrap();
        assert_eq!(t.with_connection_close().unwrap().bytes(), t.bytes());
        let k = render("GET", "http://h/", &[("Connection", "keep-alive")], b"").unwrap();
        assert_eq!(
            k.with_connection_close(),
            Err(RequestError::ConnectionConflict("keep-alive".into()))
        );
    }

    #[test]
    fn invalid_requests_table() {
        use RequestError::*;
        let cases: Vec<(RequestError, Result<RequestTemplate, RequestError>)> = vec![
            (BadMethod("".into()), render("", "http://h/", &[], b"")),
            (
                BadMethod("G ET".into()),
                render("G ET", "http://h/", &[], b""),
            ),
            (
                BadMethod("GET\r\n".into()),
                render("GET\r\n", "http://h/", &[], b""),
            ),
            (
                BadHeaderName("".into()),
                render("GET", "http://h/", &[("", "v")], b""),
            ),
            (
                BadHeaderName("X A".into()),
                render("GET", "http://h/", &[("X A", "v")], b""),
            ),
            (
                BadHeaderName("X:".into()),
                render("GET", "http://h/", &[("X:", "v")], b""),
            ),
            (
                BadHeaderValue("X".into()),
                render("GET", "http://h/", &[("X", "a\r\nEvil: 1")], b""),
            ),
            (
                BadHeaderValue("X".into()),
                render("GET", "http://h/", &[("X", "a\nb")], b""),
            ),
            (
                BadHeaderValue("X".into()),
                render("GET", "http://h/", &[("X", "a\0b")], b""),
            ),
            (
                ContentLengthMismatch {
                    given: "3".into(),
                    body_len: 2,
                },
                render("POST", "http://h/", &[("Content-Length", "3")], b"ab"),
            ),
            (
                ContentLengthMismatch {
                    given: "5".into(),
                    body_len: 0,
                },
                render("POST", "http://h/", &[("Content-Length", "5")], b""),
            ),
            (
                ContentLengthMismatch {
                    given: "+2".into(),
                    body_len: 2,
                },
                render("POST", "http://h/", &[("Content-Length", "+2")], b"ab"),
            ),
            (
                Duplicate("Host".into()),
                render("GET", "http://h/", &[("host", "a"), ("Host", "b")], b""),
            ),
            (
                TransferEncodingUnsupported,
                render(
                    "POST",
                    "http://h/",
                    &[("Transfer-Encoding", "chunked")],
                    b"ab",
                ),
            ),
        ];
        for (want, got) in cases {
            assert_eq!(got, Err(want));
        }
    }

    #[test]
    fn header_args_parse_and_trim() {
        assert_eq!(
            parse_header_arg("X-A: 1").unwrap(),
            ("X-A".into(), "1".into())
        );
        assert_eq!(
            parse_header_arg("X-A:\t v v \t").unwrap(),
            ("X-A".into(), "v v".into())
        );
        assert_eq!(parse_header_arg("X-A:").unwrap(), ("X-A".into(), "".into()));
        assert_eq!(
            parse_header_arg("X: a:b").unwrap(),
            ("X".into(), "a:b".into())
        );
        assert_eq!(
            parse_header_arg("X-A 1"),
            Err(RequestError::MissingColon("X-A 1".into()))
        );
        assert_eq!(
            parse_header_arg("X A: 1"),
            Err(RequestError::BadHeaderName("X A".into()))
        );
        assert_eq!(
            parse_header_arg("X-A : 1"),
            Err(RequestError::BadHeaderName("X-A ".into()))
        );
        assert_eq!(
            parse_header_arg("X: a\rb"),
            Err(RequestError::BadHeaderValue("X".into()))
        );
    }
}
