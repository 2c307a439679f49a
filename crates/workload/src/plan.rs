//! The request plan: every request the workload can send, rendered to bytes
//! once against the target, and a seeded schedule of which one goes next.
//!
//! The engine only indexes: a [`Pick`] names a class and a variant (one value
//! of `{n}`), whose bytes and expected size and digest were fixed here.

use xload_http::{RequestSpec, RequestTemplate, Url};

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
    cdf: Cdf,
}

impl ClassPlan {
    /// Whether responses of this class must be fed to a checker body byte by byte.
    pub fn needs_body(&self) -> bool {
        self.check.needs_body()
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
    class_cdf: Cdf,
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
        Ok(RequestPlan { classes, class_cdf })
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
        variants.push(Variant {
            path: target.path_and_query,
            request: request.bytes().to_vec(),
            body_size,
            sha256,
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
        cdf,
    })
}
