//! `xload serve --app ecommerce`: a shop page that starts a session (its
//! cookie) and shows a product, the product's page, adding it to the
//! session's cart (JSON with the cart's id) and the checkout of that cart.
//!
//! - `GET /shop?page=N`: without a live session cookie, starts a session
//!   (counted in `logins`); shows one product, `/product?id=P`, which the
//!   session's next requests must echo.
//! - `GET /product?id=P`: P must be the product this session was shown.
//! - `POST /cart` (`product=P`): adds P to the session's cart, opening one
//!   when it has none; answers `{"cart": {"id": "C", "items": N}}`.
//! - `POST /checkout` (`cart=C`): C must be this session's open cart; the
//!   order is placed and the cart closed.

use std::sync::atomic::Ordering;

use super::{param, sid_of, Answer, AppServer, Request, Sess};

/// Product ids are 1..=PRODUCTS.
const PRODUCTS: u64 = 100_000;

impl AppServer {
    pub(super) fn ecommerce(&self, r: &Request) -> Answer {
        let c = &self.counters;
        let form = String::from_utf8_lossy(&r.body);
        let mut sessions = self.lock();
        let live = r.cookie_sid.filter(|sid| sessions.contains_key(sid));
        if (r.method.as_str(), r.path.as_str()) == ("GET", "/shop") {
            let page = param(&r.query, "page")
                .and_then(|p| p.parse::<u64>().ok())
                .unwrap_or(1);
            let (sid, cookie) = match live {
                Some(sid) => {
                    c.checked.fetch_add(1, Ordering::Relaxed);
                    (sid, String::new())
                }
                None => self.start_session(&mut sessions, |_| Sess::default()),
            };
            let sess = sessions.get_mut(&sid).expect("just found or made");
            sess.product = 1 + sid_of(sid ^ page.rotate_left(32) ^ sess.product) % PRODUCTS;
            return Answer {
                headers: cookie,
                ..Answer::ok(format!(
                    "<html><h1>Shop, page {page}</h1><a href=\"/product?id={0}\">product {0}</a></html>\n",
                    sess.product
                ))
            };
        }
        let Some(sess) = live.and_then(|sid| sessions.get_mut(&sid)) else {
            c.no_session.fetch_add(1, Ordering::Relaxed);
            return Answer::refused("no session");
        };
        let answer = match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/product") => {
                if param(&r.query, "id").map(str::parse) != Some(Ok(sess.product)) {
                    c.mismatches.fetch_add(1, Ordering::Relaxed);
                    return Answer::refused("not the product this session was shown");
                }
                Answer::ok(format!(
                    "<html><p>Product {0}: in stock</p><form method=post action=/cart><input name=product value={0}></form></html>\n",
                    sess.product
                ))
            }
            ("POST", "/cart") => {
                if param(&form, "product").map(str::parse) != Some(Ok(sess.product)) {
                    c.mismatches.fetch_add(1, Ordering::Relaxed);
                    return Answer::refused("not the product this session was shown");
                }
                if sess.cart == 0 {
                    let sid = live.expect("the session was found by it");
                    sess.cart = 1 + sid_of(sid ^ sess.product) % 1_000_000_000;
                }
                sess.items += 1;
                Answer::json(format!(
                    "{{\"cart\": {{\"id\": \"{}\", \"items\": {}}}}}\n",
                    sess.cart, sess.items
                ))
            }
            ("POST", "/checkout") => {
                if sess.cart == 0 || param(&form, "cart").map(str::parse) != Some(Ok(sess.cart)) {
                    c.mismatches.fetch_add(1, Ordering::Relaxed);
                    return Answer::refused("not this session's cart");
                }
                let a = Answer::ok(format!(
                    "<html><p>Order placed: cart {}, {} items</p></html>\n",
                    sess.cart, sess.items
                ));
                (sess.cart, sess.items) = (0, 0);
                a
            }
            _ => return Answer::not_found(),
        };
        c.checked.fetch_add(1, Ordering::Relaxed);
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{req, sid};
    use super::super::App;
    use super::*;

    fn value<'a>(text: &'a str, before: &str, until: char) -> &'a str {
        let v = text.split(before).nth(1).expect(before);
        &v[..v.find(until).unwrap_or(v.len())]
    }

    #[test]
    fn ecommerce_refuses_another_sessions_ids() {
        let s = AppServer::new(App::Ecommerce, 0, None, None);
        let shop_a = s.answer(&req("GET", "/shop?page=1", None, ""));
        let shop_b = s.answer(&req("GET", "/shop?page=1", None, ""));
        let (sa, sb) = (sid(&shop_a), sid(&shop_b));
        let pa = value(shop_a.text(), "/product?id=", '"').to_string();
        let pb = value(shop_b.text(), "/product?id=", '"').to_string();
        assert_ne!(pa, pb);
        let product = |sid, p: &str| {
            s.answer(&req("GET", &format!("/product?id={p}"), sid, ""))
                .status
        };
        assert_eq!(product(Some(sa), &pa), 200);
        assert_eq!(product(Some(sb), &pa), 403, "b echoing a's product");
        assert_eq!(product(None, &pa), 403, "no session");
        let cart =
            |sid, p: &str| s.answer(&req("POST", "/cart", sid, &format!("product={p}&qty=1")));
        assert_eq!(cart(Some(sb), &pa).status, 403);
        let a1 = cart(Some(sa), &pa);
        assert_eq!(a1.status, 200);
        let c = value(a1.text(), "\"id\": \"", '"').to_string();
        assert!(cart(Some(sa), &pa).text().contains("\"items\": 2"));
        let b1 = cart(Some(sb), &pb);
        let cb = value(b1.text(), "\"id\": \"", '"').to_string();
        assert_ne!(c, cb);
        let checkout = |sid, c: &str| {
            s.answer(&req("POST", "/checkout", sid, &format!("cart={c}")))
                .status
        };
        assert_eq!(checkout(Some(sa), &cb), 403, "a checking out b's cart");
        assert_eq!(checkout(Some(sa), &c), 200);
        assert_eq!(checkout(Some(sa), &c), 403, "the cart is closed");
        // The next shop page of a keeps its session and shows another product.
        let again = s.answer(&req("GET", "/shop?page=2", Some(sa), ""));
        assert!(again.headers.is_empty());
        assert_ne!(value(again.text(), "/product?id=", '"'), pa);
        let g = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let k = &s.counters;
        assert_eq!(
            (
                g(&k.logins),
                g(&k.checked),
                g(&k.mismatches),
                g(&k.no_session)
            ),
            (2, 6, 4, 1)
        );
    }
}
