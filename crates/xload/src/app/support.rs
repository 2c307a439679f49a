//! `xload serve --app support --files DIR`: a search page that starts a
//! session (its cookie) and hands out a download ticket, and downloads of
//! the files of DIR that must echo it.
//!
//! - `GET /search?q=WORDS`: without a live session cookie, starts a session
//!   (counted in `logins`); lists a few files as
//!   `/download/PATH?ticket=T`, T a new ticket of this session.
//! - `GET /download/PATH?ticket=T`: T must be this session's last ticket;
//!   the file at PATH of the set (404 if none).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::{param, sid_of, Answer, AppServer, Body, Request, Sess};

/// Files a search page lists.
const RESULTS: u64 = 3;

impl AppServer {
    pub(super) fn support(&self, r: &Request) -> Answer {
        let c = &self.counters;
        let files = self.files.as_deref().expect("--app support has --files");
        let mut sessions = self.lock();
        let live = r.cookie_sid.filter(|sid| sessions.contains_key(sid));
        if (r.method.as_str(), r.path.as_str()) == ("GET", "/search") {
            let q = param(&r.query, "q").unwrap_or("");
            let (sid, cookie) = match live {
                Some(sid) => {
                    c.checked.fetch_add(1, Ordering::Relaxed);
                    (sid, String::new())
                }
                None => self.start_session(&mut sessions, |_| Sess::default()),
            };
            let sess = sessions.get_mut(&sid).expect("just found or made");
            let h = q
                .bytes()
                .fold(sess.token ^ sid, |h, b| sid_of(h ^ u64::from(b)));
            sess.token = 1 + h % 1_000_000_000;
            let mut body = format!("<html><h1>Results for {q}</h1><ul>\n");
            let n = files.files.len() as u64;
            for k in 0..RESULTS.min(n) {
                let f = &files.files[((h >> 8).wrapping_add(k) % n) as usize];
                let _ = writeln!(
                    body,
                    "<li><a href=\"/download/{}?ticket={}\">{} ({} bytes)</a></li>",
                    f.path,
                    sess.token,
                    f.path,
                    f.body.len()
                );
            }
            body.push_str("</ul></html>\n");
            return Answer {
                headers: cookie,
                ..Answer::ok(body)
            };
        }
        let Some(sess) = live.and_then(|sid| sessions.get_mut(&sid)) else {
            c.no_session.fetch_add(1, Ordering::Relaxed);
            return Answer::refused("no session");
        };
        let Some(path) = r
            .path
            .strip_prefix("/download")
            .filter(|_| r.method == "GET")
        else {
            return Answer::not_found();
        };
        if param(&r.query, "ticket").map(str::parse) != Some(Ok(sess.token)) {
            c.mismatches.fetch_add(1, Ordering::Relaxed);
            return Answer::refused("not this session's ticket");
        }
        let Some(i) = files.find(path.as_bytes()) else {
            return Answer::not_found();
        };
        c.checked.fetch_add(1, Ordering::Relaxed);
        Answer {
            content_type: "application/octet-stream",
            body: Body::File(i),
            ..Answer::ok(String::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xload_files::FileSet;

    use super::super::tests::{req, sid};
    use super::super::App;
    use super::*;

    #[test]
    fn support_refuses_another_sessions_ticket() {
        let mut set = FileSet::default();
        set.add("a/one.bin".into(), vec![1u8; 5000].into_boxed_slice());
        set.add("a/two.bin".into(), vec![2u8; 7].into_boxed_slice());
        let s = AppServer::new(App::Support, 0, None, Some(Arc::new(set)));
        let search = |sid| s.answer(&req("GET", "/search?q=driver+x", sid, ""));
        let (ra, rb) = (search(None), search(None));
        let (sa, sb) = (sid(&ra), sid(&rb));
        let ticket = |a: &Answer| {
            let t = a.text().split("ticket=").nth(1).unwrap();
            t[..t.find('"').unwrap()].to_string()
        };
        let (ta, tb) = (ticket(&ra), ticket(&rb));
        assert_ne!(ta, tb);
        assert!(
            ra.text().contains("/download/a/one.bin?ticket="),
            "{}",
            ra.text()
        );
        let get = |sid, path: &str, t: &str| {
            s.answer(&req(
                "GET",
                &format!("/download/{path}?ticket={t}"),
                sid,
                "",
            ))
        };
        let ok = get(Some(sa), "a/one.bin", &ta);
        assert_eq!(
            (ok.status, ok.content_type),
            (200, "application/octet-stream")
        );
        assert!(matches!(ok.body, Body::File(0)));
        assert_eq!(get(Some(sb), "a/one.bin", &ta).status, 403, "a's ticket");
        assert_eq!(get(None, "a/one.bin", &ta).status, 403, "no session");
        assert_eq!(get(Some(sa), "a/nine.bin", &ta).status, 404);
        // A new search gives a new ticket: the old one is refused.
        let ta2 = ticket(&search(Some(sa)));
        assert_ne!(ta2, ta);
        assert_eq!(get(Some(sa), "a/two.bin", &ta).status, 403);
        assert_eq!(get(Some(sa), "a/two.bin", &ta2).status, 200);
        let g = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let k = &s.counters;
        assert_eq!(
            (
                g(&k.logins),
                g(&k.checked),
                g(&k.mismatches),
                g(&k.no_session)
            ),
            (2, 3, 2, 1)
        );
    }
}
