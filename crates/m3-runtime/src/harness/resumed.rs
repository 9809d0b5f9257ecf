//! Going on with an operation a predecessor worker handed over while its round waited: the
//! answer is sent as a fresh request carrying the stored `requestState` (2026-07-28), and
//! the operation continues as if it had never moved.

use m3_mcp::{CompletedOperation, McpConnection, OperationRequest, ResumeRequest};
use m3_types::{OperationKind, ResponseMap, Result};

use super::session::{AgentSession, deliver_with};

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

impl AgentSession {
    /// Makes the next call of `operation`'s server, kind and name continue it.
    pub(crate) fn resume_with(&mut self, operation: ResumedOperation) {
        self.resumed = Some(operation);
    }

    /// The handed-over operation, when `request` on `server` is it.
    pub(super) fn take_resumed(
        &mut self,
        server: &str,
        request: &OperationRequest,
    ) -> Option<ResumedOperation> {
        let matches = self
            .resumed
            .as_ref()
            .is_some_and(|r| r.matches(server, request));
        if matches { self.resumed.take() } else { None }
    }

    /// Sends the handed-over round's answer as the operation's retry (while the coordinator
    /// records the delivery), then drives the operation on.
    pub(super) async fn drive_resumed(
        &mut self,
        connection: &McpConnection,
        request: OperationRequest,
        resumed: ResumedOperation,
    ) -> Result<CompletedOperation> {
        let mut resume = ResumeRequest::new(request, resumed.responses)
            .with_completed_rounds(resumed.completed_rounds);
        if let Some(state) = resumed.request_state {
            resume = resume.with_request_state(state);
        }
        let coordinator = self.coordinator()?;
        let progress = Box::pin(deliver_with(coordinator, connection.resume(resume))).await?;
        self.drive_from(connection, progress, true).await
    }
}
