//! What a relay reports: each frame as an [`Observation`] (with its [`Direction`]), the
//! [`RelayEvent`]s an observer yields, and the largest frame it inspects.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest NDJSON frame the relay inspects and reports (8 MiB, newline excluded).
///
/// A longer line is still forwarded unchanged (unless a tool policy is active for a
/// client-to-server line, which is then dropped), but it is not observed: the observer
/// sees [`RelayEvent::Incomplete`].
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// Which way a frame crossed the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[expect(
    clippy::exhaustive_enums,
    reason = "a frame crosses a relay one of two ways"
)]
pub enum Direction {
    /// From the harness (the MCP client) to the server.
    ClientToServer,
    /// From the server to the harness.
    ServerToClient,
}

impl Direction {
    /// The wire name: `client_to_server` or `server_to_client`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientToServer => "client_to_server",
            Self::ServerToClient => "server_to_client",
        }
    }
}

/// One NDJSON frame as it crossed a relay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Observation {
    /// The connection id given to [`RelayObserver::handoff`](super::RelayObserver::handoff).
    pub connection_id: String,
    /// Position of the frame on its connection, both directions counted together,
    /// starting at 1. A gap means frames were lost (reported as
    /// [`RelayEvent::Incomplete`] as well).
    pub sequence: u64,
    /// Which way the frame went.
    pub direction: Direction,
    /// The frame, parsed.
    pub payload: Value,
}

/// What a [`RelayObserver`](super::RelayObserver) reports.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RelayEvent {
    /// A relay authenticated.
    Connected {
        /// The connection id of its handoff.
        connection_id: String,
    },
    /// One NDJSON frame as it crossed the relay, in order per connection.
    Frame(Observation),
    /// The relay refused a client-to-server `tools/call` outside `allowed_tools` (it
    /// answered the client with JSON-RPC error [`POLICY_DENIED_CODE`](super::POLICY_DENIED_CODE)).
    PolicyDenied {
        /// The connection id of the relay.
        connection_id: String,
        /// The tool the client asked for (empty when the call named none).
        tool: String,
        /// The JSON-RPC id of the refused request (`null` for a notification).
        request_id: Value,
    },
    /// Frames were lost or malformed: the observation is incomplete (traffic still flowed).
    Incomplete {
        /// The connection id of the relay.
        connection_id: String,
        /// What was lost, for diagnostics.
        reason: String,
    },
    /// The relay's socket closed (the server or the relay ended).
    Disconnected {
        /// The connection id of the relay.
        connection_id: String,
    },
}

impl RelayEvent {
    /// The connection the event belongs to.
    pub fn connection_id(&self) -> &str {
        match self {
            Self::Connected { connection_id }
            | Self::PolicyDenied { connection_id, .. }
            | Self::Incomplete { connection_id, .. }
            | Self::Disconnected { connection_id } => connection_id,
            Self::Frame(observation) => &observation.connection_id,
        }
    }
}
