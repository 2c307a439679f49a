//! The workload as parsed and validated: what the file says, nothing resolved
//! against a target yet (the plan does that).

use std::time::Duration;

use crate::capture::Capture;
use crate::manifest::Manifest;

/// A whole workload file.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The file as named by the user (for messages).
    pub file: String,
    /// `url = "http://..."`: the default target; the command line's URL overrides it.
    pub url: Option<String>,
    /// `seed = N`: makes the request plan (and session choices) reproducible.
    pub seed: u64,
    /// `manifest = "PATH"`: the file set's sizes and SHA-256 digests.
    pub manifest: Option<Manifest>,
    /// Request classes in file order.
    pub classes: Vec<Class>,
    /// `[session]`: how a session walks the classes; None = independent picks by weight.
    pub session: Option<Session>,
    /// Every capture name any class declares, in order of first
    /// declaration: a name's index is its slot.
    pub captures: Vec<String>,
}

/// One kind of request, with its checks and limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Class {
    pub name: String,
    pub method: String,
    /// Path template, starting with `/`; `{n}` is replaced by a value of `n`.
    pub path: String,
    /// Where `{n}` comes from, when the path has one.
    pub n: Option<Values>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Share of independent picks (relative to the other classes' weights).
    pub weight: f64,
    pub check: Check,
    pub limits: Limits,
    /// `capture = { NAME = { header | body_regex | json = ... } }`.
    pub captures: Vec<Capture>,
    /// Slots (bit i: `Workload::captures[i]`) this class's path, headers
    /// or body use as `{NAME}`.
    pub uses: u64,
}

/// The values `{n}` takes and how often each is drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct Values {
    pub source: Source,
    /// Zipf exponent: the value of rank k is drawn with weight 1/k^s; None = uniform.
    pub zipf: Option<f64>,
}

/// The set `{n}` is drawn from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// `list = ["a", "b"]`, in rank order.
    List(Vec<String>),
    /// `range = [first, last]`, inclusive, in rank order.
    Range { first: u64, last: u64 },
    /// `manifest = true`: every file of the manifest, in the manifest's order.
    Manifest,
}

/// What a response must be for the request to count as correct.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Check {
    /// Allowed status codes; empty = not checked.
    pub status: Vec<u16>,
    /// Exact body length in bytes (as framed by Content-Length or chunked).
    pub body_size: Option<Expected<u64>>,
    pub sha256: Option<Expected<[u8; 32]>>,
    /// Byte strings the body must contain.
    pub contains: Vec<Vec<u8>>,
    /// Byte strings the body must not contain.
    pub not_contains: Vec<Vec<u8>>,
}

impl Check {
    /// Whether a check reads body bytes (rather than only the status and length).
    pub fn needs_body(&self) -> bool {
        self.sha256.is_some() || !self.contains.is_empty() || !self.not_contains.is_empty()
    }

    /// Whether anything is checked at all.
    pub fn is_empty(&self) -> bool {
        self.status.is_empty() && self.body_size.is_none() && !self.needs_body()
    }
}

/// An expected value given in the file or looked up in the manifest per path.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected<T> {
    Value(T),
    Manifest,
}

/// Latency limits of a class (SPECweb's "average and tail").
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Limits {
    /// `mean = "20ms"`: the mean latency must not exceed this.
    pub mean: Option<Duration>,
    /// `p95 = "50ms"`: at least 95 % of the class's requests take no longer
    /// than 50 ms. (share in percent, limit), sorted by share.
    pub percentiles: Vec<(f64, Duration)>,
}

impl Limits {
    pub fn is_empty(&self) -> bool {
        self.mean.is_none() && self.percentiles.is_empty()
    }
}

/// How a session moves from one request to the next.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub flow: Flow,
    pub think: Think,
    /// `cookies = false` turns the session's cookie jar off (default on).
    pub cookies: bool,
}

/// The order of classes within a session (indices into `Workload::classes`).
#[derive(Clone, Debug, PartialEq)]
pub enum Flow {
    /// Always the same sequence, repeated.
    Sequence(Vec<usize>),
    /// A Markov chain: the first class is drawn from `start`, each next one
    /// from the current class's row of transition weights.
    Markov {
        /// Start weight per class.
        start: Vec<f64>,
        /// `rows[from][to]`: transition weight; a row of zeros ends the session.
        rows: Vec<Vec<f64>>,
    },
}

/// Pause between a response and the session's next request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Think {
    None,
    Fixed(Duration),
    /// Uniform between the two bounds.
    Uniform(Duration, Duration),
    /// Exponentially distributed with this mean.
    Exponential(Duration),
}

impl Think {
    /// The mean pause: the span over which sessions' first requests are spread.
    pub fn mean(&self) -> Duration {
        match *self {
            Think::None => Duration::ZERO,
            Think::Fixed(d) | Think::Exponential(d) => d,
            Think::Uniform(lo, hi) => (lo + hi) / 2,
        }
    }
}
