//! Going on with an operation a predecessor worker handed over while its round waited: the
//! answer is sent as a fresh request carrying the stored `requestState` (2026-07-28), and
//! the operation continues as if it had never moved.

use m3_mcp::{CompletedOperation, McpConnection, OperationRequest, ResumeRequest};
use m3_types::Result;

use super::resumption::ResumedOperation;
use super::session::{AgentSession, deliver_with};

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
