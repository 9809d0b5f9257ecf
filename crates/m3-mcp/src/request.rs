//! What to run ([`OperationRequest`]) and how to continue a stored round on another
//! connection ([`ResumeRequest`]).

use m3_types::{OperationKind, ResponseMap};
use serde_json::{Map, Value};

use super::trace_context::TraceContext;

/// The request key of every legacy-era round.
pub const LEGACY_REQUEST_KEY: &str = "elicitation";

/// What to run: a tool call, a prompt get or a resource read.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct OperationRequest {
    pub(crate) kind: OperationKind,
    pub(crate) name: String,
    pub(crate) arguments: Option<Map<String, Value>>,
    pub(crate) round_limit: Option<u32>,
    pub(crate) logical_operation_id: Option<String>,
    pub(crate) trace_context: Option<TraceContext>,
}

impl OperationRequest {
    /// `tools/call` of `name` with `arguments`.
    pub fn tool(name: impl Into<String>, arguments: Map<String, Value>) -> Self {
        Self::new(OperationKind::Tool, name.into(), Some(arguments))
    }

    /// `prompts/get` of `name` with `arguments` (string values on the wire).
    pub fn prompt(name: impl Into<String>, arguments: Map<String, Value>) -> Self {
        Self::new(OperationKind::Prompt, name.into(), Some(arguments))
    }

    /// `resources/read` of `uri`.
    pub fn resource(uri: impl Into<String>) -> Self {
        Self::new(OperationKind::Resource, uri.into(), None)
    }

    fn new(kind: OperationKind, name: String, arguments: Option<Map<String, Value>>) -> Self {
        Self {
            kind,
            name,
            arguments,
            round_limit: None,
            logical_operation_id: None,
            trace_context: None,
        }
    }

    /// Override the connection's round limit for this operation.
    pub fn with_round_limit(mut self, limit: u32) -> Self {
        self.round_limit = Some(limit);
        self
    }

    /// Use this logical operation id instead of a fresh ULID.
    pub fn with_logical_operation_id(mut self, id: impl Into<String>) -> Self {
        self.logical_operation_id = Some(id.into());
        self
    }

    /// Send `context` (`traceparent`, `tracestate`) in the `_meta` of every request of
    /// this operation, its retries included.
    pub fn with_trace_context(mut self, context: TraceContext) -> Self {
        self.trace_context = Some(context);
        self
    }

    /// The trace context the operation's requests carry, if any.
    pub fn trace_context(&self) -> Option<&TraceContext> {
        self.trace_context.as_ref()
    }

    /// Tool, prompt or resource.
    pub fn kind(&self) -> OperationKind {
        self.kind
    }

    /// Tool or prompt name, or resource URI.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments (`None` for resources).
    pub fn arguments(&self) -> Option<&Map<String, Value>> {
        self.arguments.as_ref()
    }
}

/// Continue a 2026-07-28 operation from a stored round (its `requestState` and the
/// answers), on any connection to the same server: the retry is sent as a new
/// logical-operation record whose first attempt carries the answers.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ResumeRequest {
    pub(crate) operation: OperationRequest,
    pub(crate) responses: ResponseMap,
    pub(crate) request_state: Option<String>,
    pub(crate) completed_rounds: u32,
}

impl ResumeRequest {
    /// Retry `operation` (same name and arguments as the original) with `responses`.
    pub fn new(operation: OperationRequest, responses: ResponseMap) -> Self {
        Self {
            operation,
            responses,
            request_state: None,
            completed_rounds: 0,
        }
    }

    /// The stored `requestState`, echoed verbatim (default: none).
    pub fn with_request_state(mut self, request_state: impl Into<String>) -> Self {
        self.request_state = Some(request_state.into());
        self
    }

    /// Rounds already answered, counted against the round limit (default 0).
    pub fn with_completed_rounds(mut self, rounds: u32) -> Self {
        self.completed_rounds = rounds;
        self
    }
}
