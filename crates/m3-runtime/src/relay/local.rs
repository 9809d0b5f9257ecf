//! The in-process counterpart of the relay's reporter: an HTTP relay runs inside the
//! worker, so it hands its observations straight to the observer's event channel.
//!
//! Like the socket reporter it never blocks traffic: when the channel is full the
//! event is dropped (a frame's sequence number is still used, so the gap shows) and an
//! [`RelayEvent::Incomplete`] follows as soon as there is room.

use std::sync::{Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::mpsc;

use super::{Direction, Observation, RelayEvent};

#[derive(Debug, Default)]
struct Counters {
    sequence: u64,
    dropped: u64,
}

/// Reports one in-process relay's frames to its observer.
#[derive(Debug)]
pub(crate) struct LocalReporter {
    connection_id: String,
    tx: mpsc::Sender<RelayEvent>,
    counters: Mutex<Counters>,
}

impl LocalReporter {
    pub(crate) fn new(connection_id: &str, tx: mpsc::Sender<RelayEvent>) -> Self {
        let reporter = Self {
            connection_id: connection_id.to_owned(),
            tx,
            counters: Mutex::new(Counters::default()),
        };
        reporter.push(|_| {
            Some(RelayEvent::Connected {
                connection_id: connection_id.to_owned(),
            })
        });
        reporter
    }

    /// Reports one frame (already parsed).
    pub(crate) fn frame(&self, direction: Direction, payload: Value) {
        let connection_id = self.connection_id.clone();
        self.push(move |counters| {
            counters.sequence += 1;
            Some(RelayEvent::Frame(Observation {
                connection_id,
                sequence: counters.sequence,
                direction,
                payload,
            }))
        });
    }

    /// Reports a `tools/call` refused by policy.
    pub(crate) fn policy_denied(&self, tool: &str, request_id: Option<&Value>) {
        let event = RelayEvent::PolicyDenied {
            connection_id: self.connection_id.clone(),
            tool: tool.to_owned(),
            request_id: request_id.cloned().unwrap_or(Value::Null),
        };
        self.push(|_| Some(event));
    }

    /// Reports that something crossed the relay without being observed.
    pub(crate) fn incomplete(&self, reason: &str) {
        let event = self.lost(reason.to_owned());
        self.push(|_| Some(event));
    }

    fn lost(&self, reason: String) -> RelayEvent {
        RelayEvent::Incomplete {
            connection_id: self.connection_id.clone(),
            reason,
        }
    }

    fn push(&self, make: impl FnOnce(&mut Counters) -> Option<RelayEvent>) {
        let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        if counters.dropped > 0 {
            let reason = format!(
                "{} observation(s) were dropped: the observer fell behind",
                counters.dropped
            );
            if self.tx.try_send(self.lost(reason)).is_ok() {
                counters.dropped = 0;
            }
        }
        if let Some(event) = make(&mut counters)
            && self.tx.try_send(event).is_err()
        {
            counters.dropped += 1;
        }
    }
}

impl Drop for LocalReporter {
    fn drop(&mut self) {
        let _ = self.tx.try_send(RelayEvent::Disconnected {
            connection_id: self.connection_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_full_channel_drops_frames_and_says_so_later() {
        let (tx, mut rx) = mpsc::channel(2);
        let reporter = LocalReporter::new("s", tx);
        reporter.frame(Direction::ClientToServer, json!({"id": 1}));
        reporter.frame(Direction::ServerToClient, json!({"id": 1}));
        assert!(matches!(rx.try_recv(), Ok(RelayEvent::Connected { .. })));
        assert!(matches!(rx.try_recv(), Ok(RelayEvent::Frame(f)) if f.sequence == 1));
        assert!(rx.try_recv().is_err(), "the second frame was dropped");
        reporter.frame(Direction::ClientToServer, json!({"id": 2}));
        assert!(matches!(rx.try_recv(), Ok(RelayEvent::Incomplete { .. })));
        assert!(matches!(rx.try_recv(), Ok(RelayEvent::Frame(f)) if f.sequence == 3));
        drop(reporter);
        assert!(matches!(rx.try_recv(), Ok(RelayEvent::Disconnected { .. })));
    }
}
