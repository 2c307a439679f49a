//! `xload serve --app banking|ecommerce|support`: the minimum of a stateful
//! application, so that the session workloads (workloads/banking.toml,
//! ecommerce.toml, support.toml) run with no external server. A session's
//! first request (a login, a shop page, a search) answers with a session
//! cookie and ids in the page; every later request must carry that cookie
//! and echo the session's own ids (banking: the account and the transfer
//! form's token; ecommerce: the product shown and the cart; support: the
//! download ticket). A request without a live session is counted as
//! `no_session`, one carrying another session's id as `mismatches`; both
//! are refused with 403. `/stats` has the counters.
//!
//! One thread per connection with blocking I/O: this is a functional
//! responder for correctness and capacity searches of the client's session
//! logic, not the io_uring responder of `xload serve`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use xload_files::FileSet;

use crate::Failure;

mod ecommerce;
mod sessions;
mod support;

use sessions::Sessions;

/// A session unused for one to two of these expires (a real application's
/// session timeout; see [`Sessions`]).
const SESSION_GENERATION: Duration = Duration::from_secs(60);

/// The applications `--app` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum App {
    /// Login, account, transfer form, transfer, logout.
    Banking,
    /// Shop page, product, add to cart, checkout.
    Ecommerce,
    /// Search, download of a file of --files DIR.
    Support,
}

impl App {
    /// As `--app` spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            App::Banking => "banking",
            App::Ecommerce => "ecommerce",
            App::Support => "support",
        }
    }
}

/// One live session's state (each app uses its own fields).
#[derive(Default)]
struct Sess {
    /// Banking: the session's account.
    account: u64,
    /// Banking: the token of the last transfer form, which the transfer
    /// must echo. Support: the ticket of the last search, which downloads
    /// must echo.
    token: u64,
    /// Ecommerce: the product the last shop page showed.
    product: u64,
    /// Ecommerce: the open cart (0: none) and its items.
    cart: u64,
    items: u64,
}

/// What the responder counts (JSON at `/stats`).
#[derive(Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub logins: AtomicU64,
    /// Requests after login that carried their session's cookie and ids.
    pub checked: AtomicU64,
    /// Requests with no live session cookie.
    pub no_session: AtomicU64,
    /// Requests carrying another session's id (account or token).
    pub mismatches: AtomicU64,
    /// Logins answered without their cookie (`--drop-cookie`).
    pub dropped_cookies: AtomicU64,
}

pub(crate) struct AppServer {
    app: App,
    sessions: Mutex<Sessions>,
    next: AtomicU64,
    /// Every Nth login gets no cookie (0: none).
    drop_every: u64,
    delay: Option<Duration>,
    /// Support: the downloads.
    files: Option<Arc<FileSet>>,
    pub counters: Counters,
}

/// A parsed request: what the app looks at.
struct Request {
    method: String,
    path: String,
    query: String,
    cookie_sid: Option<u64>,
    body: Vec<u8>,
    close: bool,
}

/// The value of `key` in `a=1&b=2`.
fn param<'a>(form: &'a str, key: &str) -> Option<&'a str> {
    form.split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// A session id: a counter spread over 64 bits (not guessable from the
/// account, so a session cannot pass for another by arithmetic).
fn sid_of(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An answer: status, extra header lines, body.
struct Answer {
    status: u16,
    content_type: &'static str,
    headers: String,
    body: Body,
}

/// An answer's body.
enum Body {
    Text(String),
    /// A file of the app's set, by index.
    File(u32),
}

impl Answer {
    fn ok(body: String) -> Answer {
        Answer {
            status: 200,
            content_type: "text/html",
            headers: String::new(),
            body: Body::Text(body),
        }
    }

    fn json(body: String) -> Answer {
        Answer {
            content_type: "application/json",
            ..Answer::ok(body)
        }
    }

    fn refused(why: &str) -> Answer {
        Answer {
            status: 403,
            ..Answer::ok(format!("refused: {why}\n"))
        }
    }

    fn not_found() -> Answer {
        Answer {
            status: 404,
            ..Answer::ok("not found\n".into())
        }
    }

    /// The body as text (tests).
    #[cfg(test)]
    fn text(&self) -> &str {
        match &self.body {
            Body::Text(t) => t,
            Body::File(_) => "",
        }
    }
}

impl AppServer {
    pub(crate) fn new(
        app: App,
        drop_every: u64,
        delay: Option<Duration>,
        files: Option<Arc<FileSet>>,
    ) -> AppServer {
        AppServer {
            app,
            sessions: Mutex::new(Sessions::new(SESSION_GENERATION)),
            next: AtomicU64::new(1),
            drop_every,
            delay,
            files,
            counters: Counters::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().expect("no panic holds the lock")
    }

    /// Starts a session (a login): its id, its state made by `make` from
    /// the session's number, and the `Set-Cookie` line that hands it out
    /// (empty for the logins `--drop-cookie` picks).
    fn start_session(
        &self,
        sessions: &mut Sessions,
        make: impl FnOnce(u64) -> Sess,
    ) -> (u64, String) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let sid = sid_of(n);
        sessions.insert(sid, make(n));
        self.counters.logins.fetch_add(1, Ordering::Relaxed);
        let drop = self.drop_every > 0 && n.is_multiple_of(self.drop_every);
        let cookie = if drop {
            self.counters
                .dropped_cookies
                .fetch_add(1, Ordering::Relaxed);
            String::new()
        } else {
            format!("Set-Cookie: SID={sid:016x}; Path=/; HttpOnly\r\n")
        };
        (sid, cookie)
    }

    pub(crate) fn stats_json(&self) -> String {
        let c = &self.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "{{\"app\": \"{}\", \"requests\": {}, \"logins\": {}, \"checked\": {}, \"no_session\": {}, \"mismatches\": {}, \"dropped_cookies\": {}, \"sessions\": {}}}\n",
            self.app.name(),
            g(&c.requests),
            g(&c.logins),
            g(&c.checked),
            g(&c.no_session),
            g(&c.mismatches),
            g(&c.dropped_cookies),
            self.sessions.lock().map_or(0, |s| s.len()),
        )
    }

    fn answer(&self, r: &Request) -> Answer {
        if r.path == "/stats" {
            return Answer::json(self.stats_json());
        }
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        match self.app {
            App::Banking => self.banking(r),
            App::Ecommerce => self.ecommerce(r),
            App::Support => self.support(r),
        }
    }

    fn banking(&self, r: &Request) -> Answer {
        let c = &self.counters;
        if r.method == "POST" && r.path == "/login" {
            return self.login();
        }
        let form = String::from_utf8_lossy(&r.body);
        let mut sessions = self.lock();
        let Some(sess) = r.cookie_sid.and_then(|sid| sessions.get_mut(&sid)) else {
            c.no_session.fetch_add(1, Ordering::Relaxed);
            return Answer::refused("no session");
        };
        // Every id the request echoes must be its own session's.
        let account = param(&r.query, "acct").or_else(|| param(&form, "acct"));
        if account.is_some_and(|a| a.parse() != Ok(sess.account)) {
            c.mismatches.fetch_add(1, Ordering::Relaxed);
            return Answer::refused("not this session's account");
        }
        let answer = match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/account") if account.is_some() => Answer::ok(format!(
                "<html><p>Account {0} balance 1000.00</p><a href=\"/transfer?acct={0}\">transfer</a></html>\n",
                sess.account
            )),
            ("GET", "/transfer") if account.is_some() => {
                sess.token = sid_of(sess.token ^ sess.account) % 1_000_000_000;
                Answer {
                    headers: format!("X-Token: {}\r\n", sess.token),
                    ..Answer::ok(format!(
                        "<form method=post action=/transfer><input name=acct value={}><input name=token value={}></form>\n",
                        sess.account, sess.token
                    ))
                }
            }
            ("POST", "/transfer") if account.is_some() => {
                if param(&form, "token").map(str::parse) != Some(Ok(sess.token)) {
                    c.mismatches.fetch_add(1, Ordering::Relaxed);
                    return Answer::refused("not this session's form token");
                }
                Answer::ok(format!("<p>transfer done from {}</p>\n", sess.account))
            }
            ("GET", "/logout") => {
                let sid = r.cookie_sid.expect("the session was found by it");
                sessions.remove(&sid);
                c.checked.fetch_add(1, Ordering::Relaxed);
                return Answer {
                    headers: "Set-Cookie: SID=; Path=/; Max-Age=0\r\n".into(),
                    ..Answer::ok("<p>logged out</p>\n".into())
                };
            }
            _ => return Answer::not_found(),
        };
        c.checked.fetch_add(1, Ordering::Relaxed);
        answer
    }

    fn login(&self) -> Answer {
        let mut account = 0;
        let (_, headers) = self.start_session(&mut self.lock(), |n| {
            account = 100_000 + n;
            Sess {
                account,
                ..Sess::default()
            }
        });
        Answer {
            headers,
            ..Answer::ok(format!(
                "<html><p>Welcome</p><a href=\"/account?acct={account}\">acct={account}</a></html>\n"
            ))
        }
    }

    /// Serves one connection until it closes or asks to.
    fn serve<S: Read + Write>(&self, stream: S) -> std::io::Result<()> {
        let mut r = BufReader::new(stream);
        let mut line = String::new();
        loop {
            let Some(req) = read_request(&mut r, &mut line)? else {
                return Ok(());
            };
            let a = self.answer(&req);
            if let Some(d) = self.delay {
                std::thread::sleep(d);
            }
            let reason = match a.status {
                200 => "OK",
                403 => "Forbidden",
                _ => "Not Found",
            };
            let body: &[u8] = match &a.body {
                Body::Text(t) => t.as_bytes(),
                Body::File(i) => match &self.files {
                    Some(set) => &set.files[*i as usize].body,
                    None => &[],
                },
            };
            let head = format!(
                "HTTP/1.1 {} {reason}\r\nServer: xload-app\r\nContent-Type: {}\r\n{}Content-Length: {}\r\n{}\r\n",
                a.status,
                a.content_type,
                a.headers,
                body.len(),
                if req.close { "Connection: close\r\n" } else { "" },
            );
            let s = r.get_mut();
            s.write_all(head.as_bytes())?;
            s.write_all(body)?;
            s.flush()?;
            if req.close {
                return Ok(());
            }
        }
    }
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

/// Reads one request; None at a clean end of stream.
fn read_request<R: BufRead>(r: &mut R, line: &mut String) -> std::io::Result<Option<Request>> {
    line.clear();
    if r.read_line(line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(bad("bad request line"));
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut req = Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        cookie_sid: None,
        body: Vec::new(),
        close: false,
    };
    let mut length = 0usize;
    loop {
        line.clear();
        if r.read_line(line)? == 0 {
            return Err(bad("end of stream in the head"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad("bad header line"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().map_err(|_| bad("bad Content-Length"))?;
        } else if name.eq_ignore_ascii_case("connection") {
            req.close = value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("cookie") {
            for c in value.split(';') {
                if let Some(v) = c.trim().strip_prefix("SID=") {
                    req.cookie_sid = u64::from_str_radix(v, 16).ok();
                }
            }
        }
    }
    if length > 1 << 20 {
        return Err(bad("body too large"));
    }
    req.body.resize(length, 0);
    r.read_exact(&mut req.body)?;
    Ok(Some(req))
}

/// Runs the app on `listener` until `stop`; one thread per connection.
pub(crate) fn run(
    server: Arc<AppServer>,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    stop: Arc<AtomicBool>,
) -> Result<(), Failure> {
    listener
        .set_nonblocking(true)
        .map_err(|e| Failure::Run(format!("serve --app: {e}")))?;
    while !stop.load(Ordering::Relaxed) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(_) => continue,
        };
        let server = Arc::clone(&server);
        let tls = tls.clone();
        let spawned = std::thread::Builder::new()
            .name("xload-app".into())
            .stack_size(256 << 10)
            .spawn(move || {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_nodelay(true);
                let _ = connection(&server, stream, tls);
            });
        if spawned.is_err() {
            // Out of threads: the connection is dropped (the client counts it).
            continue;
        }
    }
    Ok(())
}

fn connection(
    server: &AppServer,
    stream: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    match tls {
        None => server.serve(stream),
        Some(cfg) => {
            let conn = rustls::ServerConnection::new(cfg).map_err(std::io::Error::other)?;
            server.serve(rustls::StreamOwned::new(conn, stream))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn req(method: &str, target: &str, sid: Option<u64>, body: &str) -> Request {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            cookie_sid: sid,
            body: body.as_bytes().to_vec(),
            close: false,
        }
    }

    pub(super) fn sid(a: &Answer) -> u64 {
        let v = a.headers.split("SID=").nth(1).unwrap();
        u64::from_str_radix(&v[..16], 16).unwrap()
    }

    #[test]
    fn banking_refuses_another_sessions_ids() {
        let s = AppServer::new(App::Banking, 0, None, None);
        let (a, b) = (s.login(), s.login());
        let (sa, sb) = (sid(&a), sid(&b));
        let acct_a = 100_001;
        let ok = s.answer(&req(
            "GET",
            &format!("/account?acct={acct_a}"),
            Some(sa),
            "",
        ));
        assert_eq!(ok.status, 200);
        // Session b echoing a's account: refused and counted.
        let r = s.answer(&req(
            "GET",
            &format!("/account?acct={acct_a}"),
            Some(sb),
            "",
        ));
        assert_eq!(r.status, 403);
        let no = s.answer(&req("GET", "/account?acct=1", None, ""));
        assert_eq!(no.status, 403);
        let form = s.answer(&req(
            "GET",
            &format!("/transfer?acct={acct_a}"),
            Some(sa),
            "",
        ));
        let token = form.headers.trim().strip_prefix("X-Token: ").unwrap();
        let bad = s.answer(&req(
            "POST",
            "/transfer",
            Some(sa),
            &format!("acct={acct_a}&token=1{token}"),
        ));
        assert_eq!(bad.status, 403);
        let good = s.answer(&req(
            "POST",
            "/transfer",
            Some(sa),
            &format!("acct={acct_a}&token={token}&amount=10"),
        ));
        assert_eq!(good.status, 200);
        assert_eq!(s.answer(&req("GET", "/logout", Some(sa), "")).status, 200);
        assert_eq!(s.answer(&req("GET", "/logout", Some(sa), "")).status, 403);
        let c = &s.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(
            (g(&c.checked), g(&c.mismatches), g(&c.no_session)),
            (4, 2, 2)
        );
        assert!(s.stats_json().contains("\"mismatches\": 2"));
    }
}
