//! The request plan: every request the workload can send, rendered to bytes
//! once against the target, and a seeded schedule of which one goes next.
//!
//! The engine only indexes: a [`Pick`] names a class and a variant (one value
//! of `{n}`), whose bytes and expected size and digest were fixed here.

use xload_http::{RequestSpec, RequestTemplate, Url};

use crate::capture::{Capture, Captured};
use crate::model::{Check, Class, Expected, Limits, Source, Workload};
use crate::rng::{Cdf, Rng};

/// Most variants one class may prebuild (a `range` beyond it is refused).
pub const MAX_VARIANTS: usize = 100_000;

/// One request of a class, with what its response must match.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// Request-target as sent.
    pub path: String,
    /// The whole request, head and body.
    pub request: Vec<u8>,
    /// Expected body length, from the check or the manifest.
    pub body_size: Option<u64>,
    /// Expected body digest, from the check or the manifest.
    pub sha256: Option<[u8; 32]>,
    /// Where the head's fields end in `request` (the empty line starts there):
    /// a session's `Cookie` line goes here.
    pub fields_end: usize,
    /// With `{NAME}` values: the request as pieces of `request` and slots
    /// (empty: `request` is sent as it is).
    parts: Vec<Part>,
}

/// A piece of a request with captured values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// `request[start..end]`.
    Lit(u32, u32),
    /// A session's captured value.
    Slot(u8),
    /// The end of the head's fields: `Content-Length` when the body has
    /// slots, the caller's lines (cookies), the empty line.
    Fields,
}

impl Variant {
    /// Appends the request to `out` with `values` in its `{NAME}` slots and
    /// whatever `fields` writes (whole header lines, e.g. `Cookie`) after
    /// the head's fields. The caller checked that every slot the class
    /// uses holds a value.
    pub fn render(&self, values: &Captured, out: &mut Vec<u8>, fields: impl FnOnce(&mut Vec<u8>)) {
        if self.parts.is_empty() {
            out.extend_from_slice(&self.request[..self.fields_end]);
            fields(out);
            out.extend_from_slice(&self.request[self.fields_end..]);
            return;
        }
        let piece = |p: &Part| match *p {
            Part::Lit(a, b) => &self.request[a as usize..b as usize],
            Part::Slot(i) => values.get(i as usize),
            Part::Fields => &[],
        };
        let at = self
            .parts
            .iter()
            .position(|p| *p == Part::Fields)
            .expect("every template has its fields' end");
        let (head, body) = (&self.parts[..at], &self.parts[at + 1..]);
        for p in head {
            out.extend_from_slice(piece(p));
        }
        let body_len: usize = body.iter().map(|p| piece(p).len()).sum();
        if self.has_length_slot() {
            out.extend_from_slice(b"Content-Length: ");
            write_decimal(out, body_len as u64);
            out.extend_from_slice(b"\r\n");
        }
        fields(out);
        out.extend_from_slice(b"\r\n");
        for p in body {
            out.extend_from_slice(piece(p));
        }
    }

    /// The body has slots: its length is written per request.
    fn has_length_slot(&self) -> bool {
        let at = self.parts.iter().position(|p| *p == Part::Fields);
        at.is_some_and(|at| {
            self.parts[at + 1..]
                .iter()
                .any(|p| matches!(p, Part::Slot(_)))
        })
    }
}

fn write_decimal(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Splits `request` (fields ending at `fields_end`, the empty line, the
/// body) into pieces and the slots of `names` it holds as `{NAME}`. A body
/// with slots loses its `Content-Length` line (written per request).
fn template(request: &[u8], fields_end: usize, names: &[String], uses: u64) -> Vec<Part> {
    if uses == 0 {
        return Vec::new();
    }
    let body_start = fields_end + 2;
    let mut parts = Vec::new();
    let split = |from: usize, to: usize, parts: &mut Vec<Part>| {
        let mut lit = from;
        let mut i = from;
        while i < to {
            let hit = (request[i] == b'{')
                .then(|| {
                    names.iter().enumerate().find(|(slot, n)| {
                        uses & (1 << slot) != 0
                            && request[i + 1..to].starts_with(n.as_bytes())
                            && request.get(i + 1 + n.len()) == Some(&b'}')
                    })
                })
                .flatten();
            match hit {
                Some((slot, n)) => {
                    if lit < i {
                        parts.push(Part::Lit(lit as u32, i as u32));
                    }
                    parts.push(Part::Slot(slot as u8));
                    i += n.len() + 2;
                    lit = i;
                }
                None => i += 1,
            }
        }
        if lit < to {
            parts.push(Part::Lit(lit as u32, to as u32));
        }
    };
    let mut body = Vec::new();
    split(body_start, request.len(), &mut body);
    let body_slots = body.iter().any(|p| matches!(p, Part::Slot(_)));
    let head = &request[..fields_end];
    let cl = b"Content-Length: ";
    let cl_at = body_slots
        .then(|| head.windows(cl.len()).rposition(|w| w == cl))
        .flatten();
    match cl_at {
        Some(at) => {
            let end = at + head[at..].iter().position(|&b| b == b'\n').expect("a line") + 1;
            split(0, at, &mut parts);
            split(end, fields_end, &mut parts);
        }
        None => split(0, fields_end, &mut parts),
    }
    parts.push(Part::Fields);
    parts.extend(body);
    parts
}

/// A class resolved against the target.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassPlan {
    pub name: String,
    /// The request is HEAD (responses carry no body).
    pub head: bool,
    /// Status and byte-string checks (size and digest are per variant).
    pub check: Check,
    pub limits: Limits,
    pub variants: Vec<Variant>,
    /// Values this class's responses give to later requests of the session.
    pub captures: Vec<Capture>,
    /// Slots (bit i: capture name i) the class's requests carry.
    pub uses: u64,
    cdf: Cdf,
}

impl ClassPlan {
    /// Whether responses of this class must be fed to a checker body byte by byte.
    pub fn needs_body(&self) -> bool {
        self.check.needs_body() || self.captures_body()
    }

    /// Whether a capture reads the body (which is then kept whole).
    pub fn captures_body(&self) -> bool {
        self.captures.iter().any(|c| c.from.reads_body())
    }
}

/// A class and one of its variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    pub class: u32,
    pub variant: u32,
}

/// Every class's requests, prebuilt.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestPlan {
    pub classes: Vec<ClassPlan>,
    /// Capture names; a name's index is its slot.
    pub captures: Vec<String>,
    /// The target's host (cookies match it) and scheme.
    pub host: String,
    pub https: bool,
    class_cdf: Cdf,
    /// Per class: the index of its first variant among all (see [`RequestPlan::index`]).
    first: Vec<u32>,
}

impl RequestPlan {
    /// Renders every variant of every class for `url` (its authority is the
    /// Host header; a path other than `/` is prefixed to each class's path).
    pub fn build(workload: &Workload, url: &Url) -> Result<Self, String> {
        let prefix = url
            .path_and_query
            .split('?')
            .next()
            .unwrap_or("")
            .trim_end_matches('/');
        let classes = workload
            .classes
            .iter()
            .map(|c| class_plan(workload, c, url, prefix))
            .collect::<Result<Vec<_>, _>>()?;
        let class_cdf = Cdf::new(workload.classes.iter().map(|c| c.weight));
        let first = classes
            .iter()
            .scan(0u32, |n, c| {
                let at = *n;
                *n += c.variants.len() as u32;
                Some(at)
            })
            .collect();
        Ok(RequestPlan {
            first,
            classes,
            captures: workload.captures.clone(),
            host: url.host.to_ascii_lowercase(),
            https: url.tls,
            class_cdf,
        })
    }

    /// Whether any class captures a value or uses one.
    pub fn stateful(&self) -> bool {
        !self.captures.is_empty()
    }

    /// A class by weight and one of its variants by the class's distribution.
    pub fn pick(&self, rng: &mut Rng) -> Pick {
        self.pick_in(self.class_cdf.draw(rng), rng)
    }

    /// A variant of a given class.
    pub fn pick_in(&self, class: usize, rng: &mut Rng) -> Pick {
        let variant = self.classes[class].cdf.draw(rng);
        Pick {
            class: class as u32,
            variant: variant as u32,
        }
    }

    /// `len` independent picks from `seed`: the same seed gives the same list.
    pub fn schedule(&self, seed: u64, len: usize) -> Vec<Pick> {
        let mut rng = Rng::new(seed);
        (0..len).map(|_| self.pick(&mut rng)).collect()
    }

    pub fn variant(&self, pick: Pick) -> &Variant {
        &self.classes[pick.class as usize].variants[pick.variant as usize]
    }

    /// The bytes to send for a pick.
    pub fn request(&self, pick: Pick) -> &[u8] {
        &self.variant(pick).request
    }

    /// Every variant of every class, in class order: a pick's
    /// [`index`](Self::index) is its place here (a table of requests
    /// prebuilt in another form, e.g. HTTP/2's, is indexed by it).
    pub fn variants(&self) -> impl Iterator<Item = &Variant> + '_ {
        self.classes.iter().flat_map(|c| c.variants.iter())
    }

    /// The place of a pick's variant in [`variants`](Self::variants).
    #[inline]
    pub fn index(&self, pick: Pick) -> usize {
        (self.first[pick.class as usize] + pick.variant) as usize
    }
}

fn class_plan(
    workload: &Workload,
    class: &Class,
    url: &Url,
    prefix: &str,
) -> Result<ClassPlan, String> {
    let fail = |e: String| format!("{}: classes.{}: {e}", workload.file, class.name);
    let manifest = workload.manifest.as_ref();
    // (value of {n}, manifest entry) per variant, in rank order.
    let values: Vec<(String, Option<&crate::ManifestEntry>)> =
        match class.n.as_ref().map(|n| &n.source) {
            None => vec![(String::new(), manifest.and_then(|m| m.get(&class.path)))],
            Some(Source::List(items)) => items.iter().map(|v| (v.clone(), None)).collect(),
            Some(Source::Range { first, last }) => {
                if last - first >= MAX_VARIANTS as u64 {
                    return Err(fail(format!("range holds more than {MAX_VARIANTS} values")));
                }
                (*first..=*last).map(|v| (v.to_string(), None)).collect()
            }
            Some(Source::Manifest) => {
                let m = manifest.ok_or_else(|| fail("no manifest".into()))?;
                if m.entries.len() > MAX_VARIANTS {
                    return Err(fail(format!(
                        "manifest holds more than {MAX_VARIANTS} files"
                    )));
                }
                m.entries
                    .iter()
                    .map(|e| (e.path.clone(), Some(e)))
                    .collect()
            }
        };
    let mut variants = Vec::with_capacity(values.len());
    for (value, entry) in values {
        let path = format!("{prefix}{}", class.path.replace("{n}", &value));
        let target = xload_http::parse_url(&format!("http://{}{path}", url.authority))
            .map_err(|e| fail(e.to_string()))?;
        let target = Url {
            path_and_query: target.path_and_query,
            ..url.clone()
        };
        let spec = RequestSpec {
            method: &class.method,
            url: &target,
            headers: &class.headers,
            body: &class.body,
        };
        let request = RequestTemplate::new(&spec).map_err(|e| fail(e.to_string()))?;
        let from_manifest = |what: &str| {
            entry.ok_or_else(|| fail(format!("{path:?} has no manifest entry for its {what}")))
        };
        let body_size = match &class.check.body_size {
            None => None,
            Some(Expected::Value(v)) => Some(*v),
            Some(Expected::Manifest) => Some(from_manifest("size")?.size),
        };
        let sha256 = match &class.check.sha256 {
            None => None,
            Some(Expected::Value(v)) => Some(*v),
            Some(Expected::Manifest) => Some(from_manifest("SHA-256")?.sha256),
        };
        let bytes = request.bytes().to_vec();
        let fields_end = bytes.len() - class.body.len() - 2;
        let parts = template(&bytes, fields_end, &workload.captures, class.uses);
        variants.push(Variant {
            path: target.path_and_query,
            request: bytes,
            body_size,
            sha256,
            fields_end,
            parts,
        });
    }
    let cdf = match class.n.as_ref().and_then(|n| n.zipf) {
        Some(s) => Cdf::zipf(variants.len(), s),
        None => Cdf::uniform(variants.len()),
    };
    Ok(ClassPlan {
        name: class.name.clone(),
        head: class.method.eq_ignore_ascii_case("HEAD"),
        check: class.check.clone(),
        limits: class.limits.clone(),
        variants,
        captures: class.captures.clone(),
        uses: class.uses,
        cdf,
    })
}
