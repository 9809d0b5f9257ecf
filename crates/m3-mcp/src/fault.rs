//! Connection-level faults: the first thing that made a connection unusable.
//!
//! The stdout reader, the process reaper and the close path record a
//! [`ConnectionFault`] in a [`tokio::sync::watch`] slot. Every wire attempt races
//! its response against that slot, so a crash, a garbage line or an oversized
//! frame ends the attempt at once with a typed error instead of a hang.

use m3_types::Error;
use serde_json::{Map, Value};
use tokio::sync::watch;

/// Which error code a fault maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// The server broke the protocol (non-JSON line, oversized frame): `protocol_error`.
    Protocol,
    /// The pipe or the process went away: `transport_error`.
    Transport,
}

/// The first fault seen on a connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionFault {
    pub(crate) kind: FaultKind,
    pub(crate) message: String,
    pub(crate) details: Map<String, Value>,
}

impl ConnectionFault {
    pub(crate) fn protocol(message: impl Into<String>) -> Self {
        Self {
            kind: FaultKind::Protocol,
            message: message.into(),
            details: Map::new(),
        }
    }

    pub(crate) fn transport(message: impl Into<String>) -> Self {
        Self {
            kind: FaultKind::Transport,
            message: message.into(),
            details: Map::new(),
        }
    }

    pub(crate) fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_owned(), value.into());
        self
    }

    /// The fault of a failure outside the wire (an authorization during the
    /// connection): its message and details, a `protocol_error` staying one and every
    /// other code a transport fault.
    pub(crate) fn from_error(error: &Error) -> Self {
        let fault = if error.is_protocol() {
            Self::protocol(error.message())
        } else {
            Self::transport(error.message())
        };
        Self {
            details: error.details().clone(),
            ..fault
        }
    }

    /// The typed error for this fault, tagged with the server name.
    pub(crate) fn to_error(&self, server: &str) -> Error {
        let base = match self.kind {
            FaultKind::Protocol => Error::protocol(self.message.clone()),
            FaultKind::Transport => Error::transport(self.message.clone()),
        };
        let mut error = base.with_detail("server", server);
        for (key, value) in &self.details {
            error = error.with_detail(key, value.clone());
        }
        error
    }
}

/// Write side of the fault slot; only the first fault is kept.
#[derive(Debug, Clone)]
pub(crate) struct FaultSender(pub(crate) std::sync::Arc<watch::Sender<Option<ConnectionFault>>>);

impl FaultSender {
    pub(crate) fn new() -> (Self, watch::Receiver<Option<ConnectionFault>>) {
        let (tx, rx) = watch::channel(None);
        (Self(std::sync::Arc::new(tx)), rx)
    }

    /// Record `fault` unless an earlier one is already recorded.
    pub(crate) fn raise(&self, fault: ConnectionFault) {
        self.0.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            tracing::debug!(kind = ?fault.kind, message = %fault.message, "mcp connection fault");
            *slot = Some(fault);
            true
        });
    }
}

/// Wait until a fault is recorded and return it. Cancel safe.
pub(crate) async fn wait_for_fault(
    rx: &mut watch::Receiver<Option<ConnectionFault>>,
) -> ConnectionFault {
    match rx.wait_for(Option::is_some).await {
        Ok(slot) => match slot.as_ref() {
            Some(fault) => fault.clone(),
            None => ConnectionFault::transport("connection closed"),
        },
        // Every sender is gone: the connection's tasks ended.
        Err(_) => ConnectionFault::transport("connection closed"),
    }
}
