//! Bounds on what enters M3: how deep any JSON value may nest, how large one answer may be,
//! and how many and how large the requests of one round may be.
//!
//! Every entry path applies them before anything is stored: a person's answer
//! ([`validate_responses`](crate::validate_responses), called by every store's submit), a
//! server's result and a server's elicitation requests (the MCP client), and a requested
//! schema. A value over a bound is refused with a typed error whose
//! `details.reason` is [`Reason::LimitExceeded`], `details.limit` names the bound
//! ([`Limit::as_str`]) and `details.max` gives its value.
//!
//! Why these numbers (also in `docs/decisions.md`):
//!
//! - [`MAX_NESTING_DEPTH`] (64) sits well below serde_json's recursion limit of 128, which
//!   every stored row is read back with. A stored row wraps an admitted value in a few more
//!   levels (an execution result wraps a server result in about ten), so an admitted value
//!   always reads back. It is fixed, not configurable, because the read limit is fixed.
//! - [`MAX_ANSWER_BYTES`] (1 MiB) bounds the compact JSON of one round's responses; the HTTP
//!   server derives its body limit from it, so every answer a stored round allows can be
//!   posted.
//! - [`RoundLimits`] bound what a server may put in one round (16 requests, 8 KiB message,
//!   32 KiB schema, 64 KiB per request): a round stays under about 1 MiB, so a form, an inbox
//!   page and the answer to it stay small. They are configurable per worker.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::elicitation::ElicitationRequest;
use crate::error::{Error, Result};
use crate::reason::Reason;

/// Deepest JSON nesting accepted anywhere a value enters M3 (a response's `content` and
/// `meta`, a server's result, a server's request params, a requested schema). The value's
/// own root object counts as level 1: `{"a": {"b": 1}}` is 2 deep.
pub const MAX_NESTING_DEPTH: usize = 64;

/// Largest answer to one round: the compact JSON of its [`ResponseMap`](crate::ResponseMap),
/// in bytes (1 MiB).
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Largest request body an HTTP front end needs to accept one answer of
/// [`MAX_ANSWER_BYTES`]: three times the answer (form encoding writes a byte as `%XX`;
/// JSON written with spaces or `\u` escapes also grows) plus 64 KiB for the envelope
/// (idempotency key, field names).
pub const MAX_ANSWER_BODY_BYTES: usize = 3 * MAX_ANSWER_BYTES + 64 * 1024;

/// Which bound a value exceeded (`details.limit` of the error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`MAX_NESTING_DEPTH`]: `"nesting_depth"`.
    NestingDepth,
    /// [`MAX_ANSWER_BYTES`]: `"answer_bytes"`.
    AnswerBytes,
    /// [`RoundLimits::max_requests`]: `"requests_per_round"`.
    RequestsPerRound,
    /// [`RoundLimits::max_message_bytes`]: `"message_bytes"`.
    MessageBytes,
    /// [`RoundLimits::max_schema_bytes`]: `"schema_bytes"`.
    SchemaBytes,
    /// [`RoundLimits::max_request_bytes`]: `"request_bytes"`.
    RequestBytes,
}

impl Limit {
    /// The stable snake_case name stored in `details.limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NestingDepth => "nesting_depth",
            Self::AnswerBytes => "answer_bytes",
            Self::RequestsPerRound => "requests_per_round",
            Self::MessageBytes => "message_bytes",
            Self::SchemaBytes => "schema_bytes",
            Self::RequestBytes => "request_bytes",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value over one bound: turned into a typed [`Error`] by the entry path that met it
/// (`managed_input_invalid` for an answer, `protocol_error` for a server's data).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LimitExceeded {
    /// The bound.
    pub limit: Limit,
    /// Its value.
    pub max: usize,
    /// What was measured, where known without finishing the measure.
    pub actual: Option<usize>,
    /// What was measured (`"response meta"`, `"server result"`...).
    pub what: String,
}

impl LimitExceeded {
    fn new(limit: Limit, max: usize, actual: Option<usize>, what: &str) -> Self {
        Self {
            limit,
            max,
            actual,
            what: what.to_owned(),
        }
    }

    /// A size over `max` bytes (`actual`), for bounds an entry path checks itself.
    pub fn bytes(limit: Limit, max: usize, actual: usize, what: &str) -> Self {
        Self::new(limit, max, Some(actual), what)
    }

    /// The message: what, which bound, and its value.
    pub fn message(&self) -> String {
        match self.limit {
            Limit::NestingDepth => format!(
                "{} is nested deeper than the bound of {} levels ({})",
                self.what, self.max, self.limit
            ),
            Limit::RequestsPerRound => format!(
                "{} has more than the bound of {} requests ({})",
                self.what, self.max, self.limit
            ),
            _ => format!(
                "{} is larger than the bound of {} bytes ({})",
                self.what, self.max, self.limit
            ),
        }
    }

    /// Adds `reason`, `limit`, `max` (and `actual`) to `error`'s details.
    pub fn describe(&self, error: Error) -> Error {
        let error = error
            .with_reason(Reason::LimitExceeded)
            .with_detail("limit", self.limit.as_str())
            .with_detail("max", self.max);
        match self.actual {
            Some(actual) => error.with_detail("actual", actual),
            None => error,
        }
    }

    /// As `managed_input_invalid` (a person's answer over a bound).
    pub fn into_validation_error(self) -> Error {
        self.describe(Error::managed_input_validation(self.message()))
    }

    /// As `protocol_error` (a server's result or request over a bound).
    pub fn into_protocol_error(self) -> Error {
        self.describe(Error::protocol(self.message()))
    }
}

/// Whether `value` nests at most `max` levels (its root counting as 1), measured without
/// recursion and stopping at the first level past `max`.
pub fn within_depth(value: &Value, max: usize) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Array(_) | Value::Object(_) if depth > max => return false,
            Value::Array(items) => stack.extend(items.iter().map(|child| (child, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|child| (child, depth + 1))),
            _ => {}
        }
    }
    true
}

/// Checks that `value` nests at most [`MAX_NESTING_DEPTH`] levels; `what` names it in the error.
///
/// # Errors
/// [`Limit::NestingDepth`].
pub fn check_depth(value: &Value, what: &str) -> Result<(), LimitExceeded> {
    if within_depth(value, MAX_NESTING_DEPTH) {
        Ok(())
    } else {
        Err(LimitExceeded::new(
            Limit::NestingDepth,
            MAX_NESTING_DEPTH,
            None,
            what,
        ))
    }
}

/// [`check_depth`] for an object.
///
/// # Errors
/// [`Limit::NestingDepth`].
pub fn check_map_depth(map: &Map<String, Value>, what: &str) -> Result<(), LimitExceeded> {
    // A map nests one level more than its deepest value: count the map itself.
    if map.values().all(|v| within_depth(v, MAX_NESTING_DEPTH - 1)) {
        Ok(())
    } else {
        Err(LimitExceeded::new(
            Limit::NestingDepth,
            MAX_NESTING_DEPTH,
            None,
            what,
        ))
    }
}

/// Checks that `bytes` is at most `max`.
fn check_size(limit: Limit, max: usize, bytes: usize, what: &str) -> Result<(), LimitExceeded> {
    if bytes <= max {
        Ok(())
    } else {
        Err(LimitExceeded::new(limit, max, Some(bytes), what))
    }
}

/// Checks the compact JSON size of one round's answer against [`MAX_ANSWER_BYTES`].
///
/// # Errors
/// [`Limit::AnswerBytes`].
pub fn check_answer_bytes(bytes: usize) -> Result<(), LimitExceeded> {
    check_size(Limit::AnswerBytes, MAX_ANSWER_BYTES, bytes, "the answer")
}

/// The bounds on one round a server sends: requests per round, and the size of each
/// request's message, schema and whole params (compact JSON bytes).
///
/// [`RoundLimits::new`] (also `Default`) gives the documented defaults; each `with_*`
/// setter replaces one (a zero is taken as 1). The MCP client applies them to every
/// `input_required` result and `elicitation/create` request, refusing a round over any of
/// them with `protocol_error` before it is stored.
///
/// ```
/// use m3_types::limits::RoundLimits;
///
/// let limits = RoundLimits::new().with_max_requests(4);
/// assert_eq!(limits.max_requests(), 4);
/// assert_eq!(limits.max_message_bytes(), RoundLimits::DEFAULT_MAX_MESSAGE_BYTES);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct RoundLimits {
    max_requests: usize,
    max_message_bytes: usize,
    max_schema_bytes: usize,
    max_request_bytes: usize,
}

impl RoundLimits {
    /// Default most requests in one round (16).
    pub const DEFAULT_MAX_REQUESTS: usize = 16;
    /// Default largest `message` of one request, in UTF-8 bytes (8 KiB).
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 8 * 1024;
    /// Default largest `requestedSchema` of one request, in compact JSON bytes (32 KiB).
    pub const DEFAULT_MAX_SCHEMA_BYTES: usize = 32 * 1024;
    /// Default largest params of one request (message, schema or URL, `_meta`, `task`,
    /// everything), in compact JSON bytes (64 KiB).
    pub const DEFAULT_MAX_REQUEST_BYTES: usize = 64 * 1024;

    /// The defaults.
    pub const fn new() -> Self {
        Self {
            max_requests: Self::DEFAULT_MAX_REQUESTS,
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
            max_schema_bytes: Self::DEFAULT_MAX_SCHEMA_BYTES,
            max_request_bytes: Self::DEFAULT_MAX_REQUEST_BYTES,
        }
    }

    /// Most requests in one round (default [`Self::DEFAULT_MAX_REQUESTS`]).
    pub fn with_max_requests(mut self, max: usize) -> Self {
        self.max_requests = max.max(1);
        self
    }

    /// Largest message (default [`Self::DEFAULT_MAX_MESSAGE_BYTES`]).
    pub fn with_max_message_bytes(mut self, max: usize) -> Self {
        self.max_message_bytes = max.max(1);
        self
    }

    /// Largest schema (default [`Self::DEFAULT_MAX_SCHEMA_BYTES`]).
    pub fn with_max_schema_bytes(mut self, max: usize) -> Self {
        self.max_schema_bytes = max.max(1);
        self
    }

    /// Largest params of one request (default [`Self::DEFAULT_MAX_REQUEST_BYTES`]).
    pub fn with_max_request_bytes(mut self, max: usize) -> Self {
        self.max_request_bytes = max.max(1);
        self
    }

    /// Most requests in one round.
    pub fn max_requests(&self) -> usize {
        self.max_requests
    }

    /// Largest message, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// Largest schema, in bytes.
    pub fn max_schema_bytes(&self) -> usize {
        self.max_schema_bytes
    }

    /// Largest params of one request, in bytes.
    pub fn max_request_bytes(&self) -> usize {
        self.max_request_bytes
    }

    /// Checks the number of requests in one round.
    ///
    /// # Errors
    /// [`Limit::RequestsPerRound`].
    pub fn check_request_count(&self, count: usize) -> Result<(), LimitExceeded> {
        if count <= self.max_requests {
            Ok(())
        } else {
            Err(LimitExceeded::new(
                Limit::RequestsPerRound,
                self.max_requests,
                Some(count),
                "the round",
            ))
        }
    }

    /// Checks the raw params object of one server request (before it is decoded): its
    /// nesting, its size, its `message` and its `requestedSchema`.
    ///
    /// # Errors
    /// [`Limit::NestingDepth`], [`Limit::RequestBytes`], [`Limit::MessageBytes`] or
    /// [`Limit::SchemaBytes`].
    pub fn check_request_params(&self, params: &Map<String, Value>) -> Result<(), LimitExceeded> {
        check_map_depth(params, "the elicitation request")?;
        check_size(
            Limit::RequestBytes,
            self.max_request_bytes,
            json_len(params),
            "the elicitation request",
        )?;
        if let Some(Value::String(message)) = params.get("message") {
            check_size(
                Limit::MessageBytes,
                self.max_message_bytes,
                message.len(),
                "the elicitation message",
            )?;
        }
        if let Some(schema) = params.get("requestedSchema") {
            check_size(
                Limit::SchemaBytes,
                self.max_schema_bytes,
                json_len(schema),
                "the requested schema",
            )?;
        }
        Ok(())
    }

    /// Checks decoded requests (a custom round, or a round read back): count, and each
    /// request's nesting, message and schema size.
    ///
    /// # Errors
    /// As [`check_request_count`](Self::check_request_count) and
    /// [`check_request_params`](Self::check_request_params).
    pub fn check_requests(
        &self,
        requests: &BTreeMap<String, ElicitationRequest>,
    ) -> Result<(), LimitExceeded> {
        self.check_request_count(requests.len())?;
        for request in requests.values() {
            let value = serde_json::to_value(request).unwrap_or(Value::Null);
            check_depth(&value, "the elicitation request")?;
            check_size(
                Limit::RequestBytes,
                self.max_request_bytes,
                json_len(&value),
                "the elicitation request",
            )?;
            check_size(
                Limit::MessageBytes,
                self.max_message_bytes,
                request.message().len(),
                "the elicitation message",
            )?;
            if let ElicitationRequest::Form(form) = request {
                check_size(
                    Limit::SchemaBytes,
                    self.max_schema_bytes,
                    json_len(&form.requested_schema),
                    "the requested schema",
                )?;
            }
        }
        Ok(())
    }
}

impl Default for RoundLimits {
    fn default() -> Self {
        Self::new()
    }
}

/// Compact JSON length of `value` in bytes (serialization of a `Value` cannot fail; a
/// failure would count as 0 and the depth check has already run).
pub fn json_len(value: &impl serde::Serialize) -> usize {
    serde_json::to_vec(value).map_or(0, |bytes| bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!({ "a": value });
        }
        value
    }

    #[test]
    fn depth_counts_the_root_and_stops_at_the_bound() {
        assert!(within_depth(&json!(1), 0));
        assert!(within_depth(&json!({}), 1));
        assert!(within_depth(&nested(2), 2));
        assert!(!within_depth(&nested(3), 2));
        assert!(check_depth(&nested(MAX_NESTING_DEPTH), "x").is_ok());
        let error = check_depth(&nested(MAX_NESTING_DEPTH + 1), "x").unwrap_err();
        assert_eq!(error.limit, Limit::NestingDepth);
        let Value::Object(map) = nested(MAX_NESTING_DEPTH) else {
            unreachable!()
        };
        assert!(check_map_depth(&map, "x").is_ok());
        let Value::Object(map) = nested(MAX_NESTING_DEPTH + 1) else {
            unreachable!()
        };
        assert!(check_map_depth(&map, "x").is_err());
    }

    #[test]
    fn the_bound_leaves_room_below_serde_jsons_read_limit() {
        // A stored row wraps an admitted value in at most a few dozen levels.
        const SERDE_JSON_RECURSION_LIMIT: usize = 128;
        const _: () = assert!(MAX_NESTING_DEPTH + 32 < SERDE_JSON_RECURSION_LIMIT);
        let text = serde_json::to_string(&nested(MAX_NESTING_DEPTH + 32)).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_ok());
    }

    #[test]
    fn errors_name_the_bound_in_their_details() {
        let error = RoundLimits::new()
            .check_request_count(5_000)
            .unwrap_err()
            .into_protocol_error();
        assert_eq!(error.code(), "protocol_error");
        assert_eq!(error.reason(), Some(Reason::LimitExceeded));
        assert_eq!(error.details()["limit"], "requests_per_round");
        assert_eq!(error.details()["max"], 16);
        assert_eq!(error.details()["actual"], 5_000);
    }

    #[test]
    fn request_params_are_bounded_by_message_schema_and_size() {
        let limits = RoundLimits::new();
        let params = |message: String| {
            json!({"message": message, "requestedSchema": {"type": "object"}})
                .as_object()
                .cloned()
                .unwrap()
        };
        assert!(limits.check_request_params(&params("hi".into())).is_ok());
        let long = "x".repeat(RoundLimits::DEFAULT_MAX_MESSAGE_BYTES + 1);
        let error = limits.check_request_params(&params(long)).unwrap_err();
        assert_eq!(error.limit, Limit::MessageBytes);
        let huge = "x".repeat(5 * 1024 * 1024);
        let error = limits.check_request_params(&params(huge)).unwrap_err();
        assert_eq!(error.limit, Limit::RequestBytes);
        assert_eq!(
            RoundLimits::new().with_max_requests(0).max_requests(),
            1,
            "zero is taken as one"
        );
    }
}
