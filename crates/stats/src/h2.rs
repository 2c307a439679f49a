//! HTTP/2 runs: what each worker records of its connections' protocol
//! events (GOAWAYs, RST_STREAMs, connection errors, flow-control stalls and
//! the server's SETTINGS; none of it per response) and the report's `h2`
//! object.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{add_to, ReportError};

/// Adds `n` under `key` in a short list of named counts (a dozen names at
/// most: a scan beats hashing, and nothing is allocated once a name is in).
fn bump(list: &mut Vec<(&'static str, u64)>, key: &'static str, n: u64) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, m)) => *m += n,
        None => list.push((key, n)),
    }
}

/// The server's SETTINGS, as the first connection that saw them applied them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct H2Settings {
    pub header_table_size: u32,
    pub enable_push: bool,
    /// Absent (None) when the server set no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_streams: Option<u32>,
    pub initial_window_size: u32,
    pub max_frame_size: u32,
    /// Absent (None) when the server set no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_header_list_size: Option<u32>,
}

/// A worker's HTTP/2 events.
#[derive(Clone, Debug, Default)]
pub(crate) struct H2State {
    pub(crate) goaways: u64,
    /// Streams the server never processed (above a GOAWAY's last-stream-id,
    /// or reset with REFUSED_STREAM), sent again.
    pub(crate) retried: u64,
    /// RST_STREAMs received, by error code name.
    pub(crate) resets: Vec<(&'static str, u64)>,
    /// Connection errors, by cause.
    pub(crate) conn_errors: Vec<(&'static str, u64)>,
    /// Time streams waited for send window, summed over streams, ns.
    pub(crate) stall_ns: u64,
    /// The most streams a connection could have open at once (`--streams`
    /// capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS).
    pub(crate) streams_limit: u32,
    pub(crate) settings: Option<H2Settings>,
}

impl H2State {
    pub(crate) fn reset(&mut self) {
        let (limit, settings) = (self.streams_limit, self.settings);
        *self = H2State {
            resets: std::mem::take(&mut self.resets),
            conn_errors: std::mem::take(&mut self.conn_errors),
            ..H2State::default()
        };
        self.resets.clear();
        self.conn_errors.clear();
        // What the server said stays true after the warm-up.
        self.streams_limit = limit;
        self.settings = settings;
    }

    pub(crate) fn merge(&mut self, o: &H2State) {
        self.goaways += o.goaways;
        self.retried += o.retried;
        for &(k, n) in &o.resets {
            bump(&mut self.resets, k, n);
        }
        for &(k, n) in &o.conn_errors {
            bump(&mut self.conn_errors, k, n);
        }
        self.stall_ns += o.stall_ns;
        self.streams_limit = self.streams_limit.max(o.streams_limit);
        if self.settings.is_none() {
            self.settings = o.settings;
        }
    }

    pub(crate) fn reset_by(&mut self, code: &'static str) {
        bump(&mut self.resets, code, 1);
    }

    pub(crate) fn conn_error(&mut self, cause: &'static str) {
        bump(&mut self.conn_errors, cause, 1);
    }
}

/// The JSON `h2` object of an HTTP/2 run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct H2Report {
    /// `--streams`: streams each connection may carry at once.
    pub streams_asked: u32,
    /// The most streams a connection could carry at once: `--streams`
    /// capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    pub streams_per_connection: u32,
    /// GOAWAY frames received.
    pub goaways: u64,
    /// Streams the server never processed (above a GOAWAY's
    /// last-stream-id, or refused with RST_STREAM REFUSED_STREAM), sent again.
    pub retried_streams: u64,
    /// RST_STREAM frames received, by error code.
    pub rst_stream: BTreeMap<String, u64>,
    /// Connection errors, by cause (each also counts once in
    /// `errors.h2_connection_error`).
    pub connection_errors: BTreeMap<String, u64>,
    /// Time streams waited for the server's flow-control window to send
    /// their bodies, summed over streams, ms.
    pub flow_control_stall_ms: f64,
    /// The server's SETTINGS (absent if none arrived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_settings: Option<H2Settings>,
}

impl H2Report {
    pub(crate) fn build(h: &H2State) -> H2Report {
        let map = |l: &[(&'static str, u64)]| l.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        H2Report {
            streams_asked: 0,
            streams_per_connection: h.streams_limit,
            goaways: h.goaways,
            retried_streams: h.retried,
            rst_stream: map(&h.resets),
            connection_errors: map(&h.conn_errors),
            flow_control_stall_ms: h.stall_ns as f64 / 1e6,
            server_settings: h.settings,
        }
    }

    /// Both reports' counts together.
    pub(crate) fn merge(
        a: Option<H2Report>,
        b: Option<&H2Report>,
    ) -> Result<Option<H2Report>, ReportError> {
        let (mut a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (a, b) => return Ok(a.or_else(|| b.cloned())),
        };
        add_to(&mut a.goaways, b.goaways, "h2.goaways")?;
        add_to(
            &mut a.retried_streams,
            b.retried_streams,
            "h2.retried_streams",
        )?;
        for (k, n) in &b.rst_stream {
            add_to(
                a.rst_stream.entry(k.clone()).or_default(),
                *n,
                "h2.rst_stream",
            )?;
        }
        for (k, n) in &b.connection_errors {
            let m = a.connection_errors.entry(k.clone()).or_default();
            add_to(m, *n, "h2.connection_errors")?;
        }
        a.flow_control_stall_ms += b.flow_control_stall_ms;
        a.streams_asked = a.streams_asked.max(b.streams_asked);
        a.streams_per_connection = a.streams_per_connection.max(b.streams_per_connection);
        if a.server_settings.is_none() {
            a.server_settings = b.server_settings;
        }
        Ok(Some(a))
    }
}
