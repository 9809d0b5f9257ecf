//! Connection options and the protocol era.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use m3_types::{Clock, Error, RoundLimits, ServerEra, SystemClock, ToolSelection};
use rmcp::model::ProtocolVersion;
use serde::{Deserialize, Serialize};

use super::oauth::OAuthContext;

/// Default bound on input rounds per logical operation.
pub const DEFAULT_ROUND_LIMIT: u32 = 10;
/// Default bound on one line (JSON-RPC frame) read from a server: 8 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// The MCP protocol era a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[expect(
    clippy::exhaustive_enums,
    reason = "the two MCP lifecycles; callers match both, and a new era changes every driver"
)]
pub enum ProtocolEra {
    /// 2026-07-28: `server/discover`, a `_meta` envelope on every request, input
    /// requests returned as `input_required` results and answered by a retry.
    Modern,
    /// 2025-11-25 / 2025-06-18: the `initialize` handshake, input requests sent as
    /// server-to-client `elicitation/create` while the operation is in flight.
    Legacy,
}

impl ProtocolEra {
    /// The protocol version of the modern era, `"2026-07-28"` (rmcp's
    /// `ProtocolVersion::V_2026_07_28`; a test keeps the two equal).
    pub const MODERN_VERSION: &'static str = "2026-07-28";

    /// The stable string: `"modern"` or `"legacy"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Modern => "modern",
            Self::Legacy => "legacy",
        }
    }
}

impl fmt::Display for ProtocolEra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProtocolEra {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "modern" => Ok(Self::Modern),
            "legacy" => Ok(Self::Legacy),
            other => Err(Error::model_validation(format!(
                "protocol era must be 'modern' or 'legacy', got '{other}'"
            ))),
        }
    }
}

/// How [`McpConnection::connect`](super::McpConnection::connect) starts and bounds a
/// server connection.
///
/// Build with [`ConnectOptions::new`] and the `with_*` setters; each documents its
/// default.
#[derive(Debug, Clone)]
#[must_use]
pub struct ConnectOptions {
    pub(crate) era: Option<ProtocolEra>,
    /// The version offered by the `initialize` handshake.
    pub(crate) handshake_version: ProtocolVersion,
    pub(crate) discover_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) close_grace: Duration,
    pub(crate) round_limit: u32,
    pub(crate) max_frame_bytes: usize,
    pub(crate) stderr_limit: usize,
    pub(crate) inherit_env: Vec<String>,
    pub(crate) tool_selection: Option<ToolSelection>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) round_limits: RoundLimits,
    pub(crate) oauth: OAuthContext,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectOptions {
    /// Defaults: automatic era, 10 s discover probe, 30 s connect, 60 s per wire
    /// attempt, 2 s close grace, 10 rounds, 8 MiB frames, 64 KiB stderr tail, no
    /// inherited environment, every advertised tool allowed.
    pub fn new() -> Self {
        Self {
            era: None,
            handshake_version: ProtocolVersion::V_2025_11_25,
            discover_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            close_grace: Duration::from_secs(2),
            round_limit: DEFAULT_ROUND_LIMIT,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            stderr_limit: 64 * 1024,
            inherit_env: Vec::new(),
            tool_selection: None,
            clock: Arc::new(SystemClock),
            round_limits: RoundLimits::new(),
            oauth: OAuthContext::new(),
        }
    }

    /// Where OAuth tokens are kept and who is shown an authorization URL (default
    /// [`OAuthContext::new`]: in memory, nobody; see [`crate::oauth`]).
    pub fn with_oauth(mut self, oauth: OAuthContext) -> Self {
        self.oauth = oauth;
        self
    }

    /// The clock the operation log's times come from (default: the system clock; the
    /// worker passes its store's, so traces and rounds share one time line).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Force an era instead of negotiating (default: `None`, negotiate). Pass the
    /// era a previous connection to the same server reported to skip the probe.
    pub fn with_era(mut self, era: Option<ProtocolEra>) -> Self {
        self.era = era;
        self
    }

    /// These options with a binding's pinned era applied: an era fixed with
    /// [`ConnectOptions::with_era`] wins; else `2026-07-28` fixes the modern era, a
    /// handshake version fixes the legacy era offering that version, and `auto`
    /// negotiates.
    pub(crate) fn for_binding(&self, pinned: ServerEra) -> Self {
        let mut options = self.clone();
        match pinned {
            ServerEra::V2026_07_28 => options.era = options.era.or(Some(ProtocolEra::Modern)),
            ServerEra::V2025_06_18 => {
                options.era = options.era.or(Some(ProtocolEra::Legacy));
                options.handshake_version = ProtocolVersion::V_2025_06_18;
            }
            ServerEra::V2025_11_25 => options.era = options.era.or(Some(ProtocolEra::Legacy)),
            _ => {}
        }
        options
    }

    /// Bound on the `server/discover` probe, from spawn, before falling back to a
    /// fresh process with `initialize` (default 10 s). It includes the server's
    /// start-up (an interpreter under load can take seconds), so keep it generous;
    /// to skip the probe for a server known to be legacy, use
    /// [`ConnectOptions::with_era`].
    pub fn with_discover_timeout(mut self, timeout: Duration) -> Self {
        self.discover_timeout = timeout;
        self
    }

    /// Bound on starting a connection in a fixed era, and on the `initialize`
    /// fallback (default 30 s).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Bound on the time the client waits for the server during one wire attempt
    /// (default 60 s). Time an input round spends with the caller is not counted.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long [`McpConnection::close`](super::McpConnection::close) lets the
    /// server exit on stdin EOF before killing its process group (default 2 s).
    pub fn with_close_grace(mut self, grace: Duration) -> Self {
        self.close_grace = grace;
        self
    }

    /// Default input-round bound per logical operation (default 10); an
    /// [`OperationRequest`](super::OperationRequest) may override it.
    pub fn with_round_limit(mut self, limit: u32) -> Self {
        self.round_limit = limit;
        self
    }

    /// Bounds on each round the server sends: requests per round, message, schema and
    /// request size (default [`RoundLimits::new`]). A round over one is a
    /// `protocol_error` (`details.reason` `limit_exceeded`) and is never stored.
    pub fn with_round_limits(mut self, limits: RoundLimits) -> Self {
        self.round_limits = limits;
        self
    }

    /// Largest line the server may write (default 8 MiB); a longer one is a
    /// `protocol_error` and ends the connection.
    pub fn with_max_frame_bytes(mut self, max: usize) -> Self {
        self.max_frame_bytes = max;
        self
    }

    /// Size of the retained stderr tail (default 64 KiB). Stderr is always drained.
    pub fn with_stderr_limit(mut self, limit: usize) -> Self {
        self.stderr_limit = limit;
        self
    }

    /// Copy these variables from our own environment into the server's (default:
    /// none; the server sees only the binding's `env`). `["PATH"]` is the usual
    /// choice for servers started through a shell or `npx`.
    pub fn with_inherited_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.inherit_env = names.into_iter().map(Into::into).collect();
        self
    }

    /// Restrict `tools/call` to a selection (default `None`: every advertised tool;
    /// an empty selection allows none). A call outside it is refused locally.
    pub fn with_tool_selection(mut self, selection: Option<ToolSelection>) -> Self {
        self.tool_selection = selection;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn era_strings_round_trip() {
        for era in [ProtocolEra::Modern, ProtocolEra::Legacy] {
            assert_eq!(era.as_str().parse::<ProtocolEra>().unwrap(), era);
            assert_eq!(
                serde_json::to_value(era).unwrap(),
                serde_json::json!(era.as_str())
            );
        }
        let error = "2026".parse::<ProtocolEra>().unwrap_err();
        assert!(error.message().contains("'2026'"));
    }

    #[test]
    fn the_modern_version_is_rmcps() {
        assert_eq!(
            ProtocolEra::MODERN_VERSION,
            rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
        );
    }
}
