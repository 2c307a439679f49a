//! Why bytes are not a valid response, and where a connection was cut.

/// Where in a response the connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Status line or header fields.
    Head,
    /// Content-Length body.
    Body,
    /// Chunked body: size line, data or chunk terminator.
    Chunked,
    /// Trailer section after the last chunk.
    Trailers,
}

/// Why bytes are not a valid response. Fieldless (apart from the EOF stage)
/// so that counting them per kind is cheap.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// The response does not start with `HTTP/1.0` or `HTTP/1.1` followed by a space.
    #[error("response does not start with HTTP/1.0 or HTTP/1.1")]
    BadVersion,
    /// The status code is not three digits from 100 to 999, or is not followed by SP or the line end.
    #[error("invalid status code")]
    BadStatus,
    /// A control character inside the reason phrase.
    #[error("invalid byte in reason phrase")]
    BadReason,
    /// A CR not followed by LF at the end of a line, or a chunk-size line
    /// ending in a bare LF (chunk framing requires CRLF, RFC 9112 §7.1).
    #[error("line not ended by CRLF")]
    BadLineEnding,
    /// A header field name that is empty or has a byte outside the token set (spaces before ':' included).
    #[error("invalid header field name")]
    BadHeaderName,
    /// A header line that starts with a space or tab (obsolete line folding).
    #[error("obsolete line folding in header")]
    ObsFold,
    /// A control character (NUL, lone CR, ...) inside a header field value.
    #[error("invalid byte in header field value")]
    BadHeaderValue,
    /// The head or trailer section is longer than `Limits::max_header_bytes`.
    #[error("response head larger than the limit")]
    HeaderTooLarge,
    /// More header fields than `Limits::max_headers`.
    #[error("more header fields than the limit")]
    TooManyHeaders,
    /// A Content-Length that is not a decimal number, or is above 2^60 - 1
    /// (no body that long can arrive).
    #[error("invalid Content-Length")]
    BadContentLength,
    /// Content-Length together with Transfer-Encoding, or two different Content-Lengths.
    #[error("conflicting message length (Content-Length with Transfer-Encoding, or two different Content-Lengths)")]
    ConflictingLength,
    /// A Transfer-Encoding that is empty, holds something other than
    /// tokens, or applies chunked twice. (Codings that do not end in
    /// chunked are no error: that body ends at the close.)
    #[error("invalid Transfer-Encoding (empty, not a list of codings, or chunked twice)")]
    UnsupportedTransferEncoding,
    /// A chunk size that is not hexadecimal, or is above 2^60 - 1.
    #[error("invalid chunk size")]
    BadChunkSize,
    /// A control character inside a chunk extension.
    #[error("invalid byte in chunk extension")]
    BadChunkExtension,
    /// A chunk-size line (with its extensions) longer than `Limits::max_header_bytes`.
    #[error("chunk-size line larger than the limit")]
    ChunkLineTooLong,
    /// Chunk data not followed by CRLF (a bare LF included).
    #[error("chunk data not followed by CRLF")]
    BadChunkTerminator,
    /// Bytes after a 204 or 304 response that do not start a response: a
    /// body those statuses cannot have (RFC 9110 §15.3.5, §15.4.5).
    #[error("body bytes after a 204 or 304 response, which has none")]
    BodyAfterBodilessStatus,
    /// The connection closed in the middle of a response.
    #[error("connection closed mid-response (in {stage:?})")]
    UnexpectedEof {
        /// What was being read.
        stage: Stage,
    },
}

impl ParseError {
    /// Short snake_case cause, for reports and error counters.
    pub fn name(&self) -> &'static str {
        match self {
            ParseError::BadVersion => "bad_version",
            ParseError::BadStatus => "bad_status",
            ParseError::BadReason => "bad_reason",
            ParseError::BadLineEnding => "bad_line_ending",
            ParseError::BadHeaderName => "bad_header_name",
            ParseError::ObsFold => "obs_fold",
            ParseError::BadHeaderValue => "bad_header_value",
            ParseError::HeaderTooLarge => "header_too_large",
            ParseError::TooManyHeaders => "too_many_headers",
            ParseError::BadContentLength => "bad_content_length",
            ParseError::ConflictingLength => "conflicting_length",
            ParseError::UnsupportedTransferEncoding => "unsupported_transfer_encoding",
            ParseError::BadChunkSize => "bad_chunk_size",
            ParseError::BadChunkExtension => "bad_chunk_extension",
            ParseError::ChunkLineTooLong => "chunk_line_too_long",
            ParseError::BadChunkTerminator => "bad_chunk_terminator",
            ParseError::BodyAfterBodilessStatus => "body_after_bodiless_status",
            ParseError::UnexpectedEof { .. } => "unexpected_eof",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_a_distinct_snake_case_name() {
        use ParseError::*;
        let all = [
            BadVersion,
            BadStatus,
            BadReason,
            BadLineEnding,
            BadHeaderName,
            ObsFold,
            BadHeaderValue,
            HeaderTooLarge,
            TooManyHeaders,
            BadContentLength,
            ConflictingLength,
            UnsupportedTransferEncoding,
            BadChunkSize,
            BadChunkExtension,
            ChunkLineTooLong,
            BadChunkTerminator,
            BodyAfterBodilessStatus,
            UnexpectedEof { stage: Stage::Body },
        ];
        let names: std::collections::BTreeSet<_> = all.iter().map(|e| e.name()).collect();
        assert_eq!(names.len(), all.len());
        assert!(names
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    }
}
