//! HTTPS runs: what each worker records of its TLS handshakes (off the
//! per-request path: once per connection) and the report's `tls` object.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error::{add_to, ReportError};
use crate::hist::{
    add_into, decode_histogram, encode_histogram, new_latency_histogram, LatencySummary,
};

/// As the report's histograms: empty only if it cannot be encoded (never).
fn histogram_string(h: &Histogram<u64>) -> String {
    encode_histogram(h).unwrap_or_default()
}

fn per_second(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        n as f64 / seconds
    } else {
        0.0
    }
}

fn per_handshake_us(seconds: f64, handshakes: u64) -> f64 {
    if handshakes == 0 {
        0.0
    } else {
        seconds * 1e6 / handshakes as f64
    }
}

/// A worker's handshakes: counts and the connect / handshake time of each.
#[derive(Clone, Debug)]
pub(crate) struct TlsState {
    pub(crate) connect_us: Histogram<u64>,
    pub(crate) handshake_us: Histogram<u64>,
    pub(crate) full: u64,
    pub(crate) resumed: u64,
    /// Time in the TLS library's handshake computation, all handshakes, ns.
    pub(crate) compute_ns: u64,
    /// What the first handshake negotiated ("TLSv1_3", "TLS13_AES_128_GCM_SHA256").
    pub(crate) version: &'static str,
    pub(crate) cipher: &'static str,
}

impl TlsState {
    pub(crate) fn new() -> TlsState {
        TlsState {
            connect_us: new_latency_histogram(),
            handshake_us: new_latency_histogram(),
            full: 0,
            resumed: 0,
            compute_ns: 0,
            version: "",
            cipher: "",
        }
    }

    pub(crate) fn reset(&mut self) {
        self.connect_us.reset();
        self.handshake_us.reset();
        self.full = 0;
        self.resumed = 0;
        self.compute_ns = 0;
    }

    pub(crate) fn merge(&mut self, o: &TlsState) {
        add_into(&mut self.connect_us, &o.connect_us);
        add_into(&mut self.handshake_us, &o.handshake_us);
        self.full += o.full;
        self.resumed += o.resumed;
        self.compute_ns += o.compute_ns;
        if self.version.is_empty() {
            self.version = o.version;
            self.cipher = o.cipher;
        }
    }
}

/// The JSON `tls` object of an https:// run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TlsReport {
    /// Where records are sealed and opened: `user-space` (rustls) or `kTLS`.
    pub mode: String,
    /// The TLS library (`rustls`).
    pub library: String,
    /// Negotiated protocol version (`TLSv1_3`); empty if no handshake completed.
    pub version: String,
    /// Negotiated cipher suite (`TLS13_AES_256_GCM_SHA384`).
    pub cipher: String,
    /// Handshakes completed in the measured window, full and resumed.
    pub handshakes_full: u64,
    pub handshakes_resumed: u64,
    /// All handshakes per second of the measured window.
    pub handshakes_per_s: f64,
    /// CPU seconds the client spent in the TLS library's handshake
    /// computation (key shares, certificate and signature checks) over the
    /// window, and per handshake in µs: the worker threads' CPU clocks read
    /// around its calls.
    #[serde(default)]
    pub handshake_cpu_s: f64,
    #[serde(default)]
    pub handshake_cpu_us: f64,
    /// Why kTLS was not used (absent when it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ktls_unavailable: Option<String>,
    /// TCP connect time of each handshaking connection, µs, and its histogram.
    pub connect_us: LatencySummary,
    pub histogram_connect: String,
    /// TLS handshake time (connected to handshake done), µs, and its histogram.
    pub handshake_us: LatencySummary,
    pub histogram_handshake: String,
}

impl TlsReport {
    /// The figures of a merged recorder's handshakes; mode, library and
    /// kTLS reason are the caller's to fill.
    pub(crate) fn build(t: &TlsState, duration_s: f64) -> TlsReport {
        TlsReport {
            version: t.version.to_string(),
            cipher: t.cipher.to_string(),
            handshakes_full: t.full,
            handshakes_resumed: t.resumed,
            handshakes_per_s: per_second(t.full + t.resumed, duration_s),
            handshake_cpu_s: t.compute_ns as f64 / 1e9,
            handshake_cpu_us: per_handshake_us(t.compute_ns as f64 / 1e9, t.full + t.resumed),
            connect_us: LatencySummary::from_histogram(&t.connect_us),
            histogram_connect: histogram_string(&t.connect_us),
            handshake_us: LatencySummary::from_histogram(&t.handshake_us),
            histogram_handshake: histogram_string(&t.handshake_us),
            ..TlsReport::default()
        }
    }

    /// Both reports' handshakes together (the merged run's `duration_s`
    /// gives the rate); summaries are recomputed from the summed histograms.
    pub(crate) fn merge(
        a: Option<TlsReport>,
        b: Option<&TlsReport>,
        duration_s: f64,
    ) -> Result<Option<TlsReport>, ReportError> {
        let (mut a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (a, b) => return Ok(a.or_else(|| b.cloned())),
        };
        let sum = |x: &str, y: &str| -> Result<Histogram<u64>, ReportError> {
            let mut h = if x.is_empty() {
                new_latency_histogram()
            } else {
                decode_histogram(x)?
            };
            if !y.is_empty() {
                add_into(&mut h, &decode_histogram(y)?);
            }
            Ok(h)
        };
        let connect = sum(&a.histogram_connect, &b.histogram_connect)?;
        let handshake = sum(&a.histogram_handshake, &b.histogram_handshake)?;
        add_to(
            &mut a.handshakes_full,
            b.handshakes_full,
            "tls.handshakes_full",
        )?;
        add_to(
            &mut a.handshakes_resumed,
            b.handshakes_resumed,
            "tls.handshakes_resumed",
        )?;
        let mut handshakes = a.handshakes_full;
        add_to(&mut handshakes, a.handshakes_resumed, "tls.handshakes")?;
        a.handshakes_per_s = per_second(handshakes, duration_s);
        a.handshake_cpu_s += b.handshake_cpu_s;
        a.handshake_cpu_us = per_handshake_us(a.handshake_cpu_s, handshakes);
        if a.version.is_empty() {
            a.version.clone_from(&b.version);
            a.cipher.clone_from(&b.cipher);
        }
        a.connect_us = LatencySummary::from_histogram(&connect);
        a.histogram_connect = histogram_string(&connect);
        a.handshake_us = LatencySummary::from_histogram(&handshake);
        a.histogram_handshake = histogram_string(&handshake);
        Ok(Some(a))
    }
}
