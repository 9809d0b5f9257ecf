//! [`Shared`]: what a connection and each of its operations hold in common (the rmcp peer,
//! the fault watch, the legacy-era router, the operation log). Kept apart from
//! `connection` so that the operation drivers, which the connection starts, do not reach
//! back into it.

use std::sync::{Arc, Mutex};

use m3_types::{Error, Result};
use rmcp::model::{CancelledNotificationParam, RequestId};
use rmcp::service::{Peer, RoleClient};
use tokio::sync::{Semaphore, watch};
use tokio_util::task::TaskTracker;

use super::fault::{ConnectionFault, FaultSender, wait_for_fault};
use super::handler::LegacyRouter;
use super::negotiation::ServerIdentity;
use super::options::{ConnectOptions, ProtocolEra};
use super::process::ServerProcess;
use super::raw::RawMessages;
use super::record::LogicalOperation;

/// How many operation records a connection keeps for [`McpConnection::operation_log`].
const OPERATION_LOG_LIMIT: usize = 256;

/// State shared by a connection and its operations.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) server: String,
    pub(crate) era: ProtocolEra,
    pub(crate) protocol_version: String,
    pub(crate) identity: Option<ServerIdentity>,
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) faults: watch::Receiver<Option<ConnectionFault>>,
    pub(crate) fault_tx: FaultSender,
    /// The server's process (`None` for an HTTP endpoint).
    pub(crate) process: Option<ServerProcess>,
    /// Resolved header values of an HTTP binding, to redact wherever they appear.
    pub(crate) secrets: Vec<String>,
    pub(crate) router: Arc<LegacyRouter>,
    /// Raw `input_required` results and `elicitation/create` params, by id.
    pub(crate) raw: Arc<RawMessages>,
    pub(crate) legacy_slot: Arc<Semaphore>,
    pub(crate) options: ConnectOptions,
    pub(crate) log: Mutex<Vec<LogicalOperation>>,
    /// `tasks/cancel` requests of abandoned tasks still being sent; closing waits for them.
    pub(crate) task_cancels: TaskTracker,
}

impl Shared {
    /// The recorded fault as a typed error, if any.
    pub(crate) fn fault_error(&self) -> Option<Error> {
        self.faults
            .borrow()
            .as_ref()
            .map(|fault| fault.to_error(&self.server))
    }

    /// Replace (or append) an operation record in the log.
    pub(crate) fn publish(&self, record: &LogicalOperation) {
        if let Ok(mut log) = self.log.lock() {
            if let Some(slot) = log
                .iter_mut()
                .rev()
                .find(|r| r.logical_operation_id == record.logical_operation_id)
            {
                *slot = record.clone();
            } else {
                log.push(record.clone());
                let excess = log.len().saturating_sub(OPERATION_LOG_LIMIT);
                log.drain(..excess);
            }
        }
    }

    /// Tells the server, in the background, that the request `request_id` is abandoned
    /// (`notifications/cancelled` with `reason`). Nothing is sent outside a tokio runtime
    /// (a drop during shutdown).
    pub(crate) fn cancel_request(&self, request_id: RequestId, reason: &str) {
        let peer = self.peer.clone();
        let params = CancelledNotificationParam::new(Some(request_id), Some(reason.to_owned()));
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }

    /// Run `future` bounded by the request timeout and the connection's faults.
    pub(crate) async fn bounded<T>(
        &self,
        what: &str,
        future: impl Future<Output = std::result::Result<T, rmcp::ServiceError>>,
    ) -> Result<T> {
        let mut faults = self.faults.clone();
        tokio::select! {
            result = tokio::time::timeout(self.options.request_timeout, future) => match result {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(error)) => Err(self.fault_error().unwrap_or_else(|| {
                    Error::protocol(format!("MCP {what} to '{}' failed: {error}", self.server))
                        .with_detail("server", self.server.clone())
                })),
                Err(_) => Err(Error::timeout(format!(
                    "MCP server '{}' did not answer {what} within {} ms",
                    self.server,
                    self.options.request_timeout.as_millis()
                ))
                .with_detail("server", self.server.clone())),
            },
            fault = wait_for_fault(&mut faults) => Err(fault.to_error(&self.server)),
        }
    }
}
