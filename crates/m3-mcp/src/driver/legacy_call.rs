//! [`LegacyCall`]: the open request of a legacy-era operation, which the [`Driver`](super::Driver)
//! holds between rounds and which cancels the request on the server when dropped unfinished,
//! and [`LegacyPending`], where the answer to its open round goes.

use std::sync::Arc;

use rmcp::ServiceError;
use rmcp::model::{RequestId, ServerResult};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::super::handler::LegacyInput;
use super::super::shared::Shared;

/// A legacy request in flight.
#[derive(Debug)]
pub(super) struct LegacyCall {
    pub(super) response: oneshot::Receiver<std::result::Result<ServerResult, ServiceError>>,
    pub(super) inputs: mpsc::Receiver<LegacyInput>,
    pub(super) request_id: RequestId,
    pub(super) finished: bool,
    pub(super) shared: Arc<Shared>,
    pub(super) _slot: OwnedSemaphorePermit,
}

impl Drop for LegacyCall {
    fn drop(&mut self) {
        self.shared.router.clear();
        if !self.finished {
            self.shared
                .cancel_request(self.request_id.clone(), "operation abandoned by the caller");
        }
    }
}

/// The live half of a legacy round: where the answer goes.
#[derive(Debug)]
pub(crate) struct LegacyPending {
    pub(crate) reply: oneshot::Sender<Value>,
    pub(crate) withdrawn: CancellationToken,
}
