//! The operation a predecessor worker (or this worker, before parking) left waiting for an
//! answer: which call it is and what its retry carries.

use m3_mcp::OperationRequest;
use m3_types::{OperationKind, ResponseMap};

/// The handed-over operation: which call it is, where its round left it, and the answer
/// whose delivery the successor started.
#[derive(Debug, Clone)]
pub(crate) struct ResumedOperation {
    pub(crate) server: String,
    pub(crate) kind: OperationKind,
    pub(crate) name: String,
    pub(crate) request_state: Option<String>,
    /// Rounds of the operation answered before this one, this one included.
    pub(crate) completed_rounds: u32,
    pub(crate) responses: ResponseMap,
}

impl ResumedOperation {
    /// Whether `request` on `server` is this operation.
    pub(super) fn matches(&self, server: &str, request: &OperationRequest) -> bool {
        self.server == server && self.kind == request.kind() && self.name == request.name()
    }
}
