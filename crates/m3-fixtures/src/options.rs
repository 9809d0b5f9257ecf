//! Options of the example servers: the protocol era to serve and the fault to inject.

use std::{borrow::Cow, fmt, str::FromStr};

use rmcp::model::ProtocolVersion;

use crate::error::FixtureError;

/// Which MCP protocol era a fixture server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    /// Both eras: `server/discover` plus per-request metadata (2026-07-28) and the legacy
    /// `initialize` handshake. The first request of a connection picks the era.
    #[default]
    Auto,
    /// Only 2026-07-28. `initialize` is refused with `-32022` (unsupported protocol version).
    Modern,
    /// Only the handshake versions (2024-11-05 to 2025-11-25). `server/discover` is answered
    /// with `-32601` (method not found), like a server that predates 2026-07-28.
    Legacy,
}

impl Era {
    /// The protocol versions the server accepts in this era.
    pub fn supported_versions(self) -> Cow<'static, [ProtocolVersion]> {
        match self {
            Era::Auto => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
            Era::Modern => Cow::Owned(vec![ProtocolVersion::V_2026_07_28]),
            Era::Legacy => Cow::Owned(
                ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .filter(|version| version.has_initialize())
                    .cloned()
                    .collect(),
            ),
        }
    }

    /// The command-line spelling (`auto`, `2026-07-28`, `legacy`).
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Auto => "auto",
            Era::Modern => "2026-07-28",
            Era::Legacy => "legacy",
        }
    }
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Era {
    type Err = FixtureError;

    /// Parses `auto`, `2026-07-28` (also `modern`) or `legacy`.
    ///
    /// # Errors
    /// [`FixtureError::InvalidArgument`] (`invalid_argument`) for any other text.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(Era::Auto),
            "2026-07-28" | "modern" => Ok(Era::Modern),
            "legacy" => Ok(Era::Legacy),
            other => Err(FixtureError::InvalidArgument(format!(
                "era must be 'auto', '2026-07-28' or 'legacy', not '{other}'"
            ))),
        }
    }
}

/// A deliberate misbehaviour of the server, for the client's robustness tests.
///
/// Every fault applies to `tools/call` only (any tool name); discovery, listing, prompts and
/// resources keep working normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The server ends while a `tools/call` is in flight: its output closes without a response.
    /// Run as a process (`m3 example-server`), the process exits with [`CRASH_EXIT_CODE`].
    CrashMidCall,
    /// The server writes [`GARBAGE_LINE`] (not JSON) instead of the response and never answers.
    Garbage,
    /// The server answers with one frame larger than [`OVERSIZED_TEXT_BYTES`] bytes.
    Oversized,
    /// The server asks for `shipping_address` forever: `input_required` on every retry
    /// (2026-07-28), `elicitation/create` after every answer (legacy).
    EndlessRounds,
    /// The server never answers (it only stops when the request is cancelled or the
    /// connection closes).
    Hang,
}

impl Fault {
    /// The command-line spelling (`crash-mid-call`, `garbage`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::CrashMidCall => "crash-mid-call",
            Fault::Garbage => "garbage",
            Fault::Oversized => "oversized",
            Fault::EndlessRounds => "endless-rounds",
            Fault::Hang => "hang",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Fault {
    type Err = FixtureError;

    /// Parses the command-line spelling.
    ///
    /// # Errors
    /// [`FixtureError::InvalidArgument`] (`invalid_argument`) for an unknown mode.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "crash-mid-call" => Ok(Fault::CrashMidCall),
            "garbage" => Ok(Fault::Garbage),
            "oversized" => Ok(Fault::Oversized),
            "endless-rounds" => Ok(Fault::EndlessRounds),
            "hang" => Ok(Fault::Hang),
            other => Err(FixtureError::InvalidArgument(format!(
                "fault must be one of crash-mid-call, garbage, oversized, endless-rounds, hang; not '{other}'"
            ))),
        }
    }
}

/// Exit code of `m3 example-server` after [`Fault::CrashMidCall`].
pub const CRASH_EXIT_CODE: u8 = 70;

/// The line [`Fault::Garbage`] writes instead of a response (followed by `\n`).
pub const GARBAGE_LINE: &str = "this is not JSON-RPC {{{ garbage";

/// Length in bytes of the text content [`Fault::Oversized`] returns: 17 MiB of `x`. The whole
/// frame (the JSON-RPC response on one line) is a little larger, so it exceeds a 16 MiB bound.
pub const OVERSIZED_TEXT_BYTES: usize = 17 * 1024 * 1024;

/// How to run the shipping server.
#[derive(Clone, Default)]
pub struct ShippingOptions {
    /// The era(s) to serve.
    pub era: Era,
    /// The fault to inject into `tools/call`, if any.
    pub fault: Option<Fault>,
    /// The key that seals `requestState` (at least 32 bytes). `None`: 32 random bytes per
    /// server, so a state from another server (process) is rejected.
    pub state_key: Option<Vec<u8>>,
    /// Append one JSON line per `tools/call` to this file (tests count deliveries):
    /// `{"pid", "ppid", "tool", "answered", "city"}`, `city` being the answered address's
    /// city (tests put an identifier there).
    pub call_log: Option<std::path::PathBuf>,
    /// Never answer a `tools/call` that carries input responses (the retry): the call is
    /// logged, then held until the client goes away (a worker killed mid-delivery).
    pub hold_retry: bool,
}

impl fmt::Debug for ShippingOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShippingOptions")
            .field("era", &self.era)
            .field("fault", &self.fault)
            .field("state_key", &self.state_key.as_ref().map(|_| "<redacted>"))
            .field("call_log", &self.call_log)
            .field("hold_retry", &self.hold_retry)
            .finish()
    }
}

impl ShippingOptions {
    /// Options for `era` with no fault and a random state key.
    pub fn new(era: Era) -> Self {
        Self {
            era,
            ..Self::default()
        }
    }

    /// The same options with `fault` injected.
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The same options logging every `tools/call` to `path` (see [`Self::call_log`]).
    pub fn with_call_log(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.call_log = Some(path.into());
        self
    }

    /// The same options holding every retry that carries input responses.
    pub fn with_hold_retry(mut self, hold: bool) -> Self {
        self.hold_retry = hold;
        self
    }

    /// The same options with a fixed `requestState` key (at least 32 bytes).
    pub fn with_state_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.state_key = Some(key.into());
        self
    }
}
