//! [`ServerEra`]: which MCP protocol era a server binding speaks (negotiated, or
//! pinned).
//!
//! By default the client negotiates: `server/discover` (2026-07-28) first, the
//! `initialize` handshake when the server does not know it. A server that reaches
//! the 2026-07-28 era but can only elicit with a server-to-client
//! `elicitation/create` (the official MCP Python SDK's `ctx.elicit`, mcp 2.3.0)
//! refuses its tool calls there; pinning it to a handshake version makes it work,
//! and lets one test a server in each era on purpose.

use crate::error::Error;

wire_enum! {
    /// The protocol era of a server binding: `"auto"` (negotiate; the default) or a
    /// protocol version to use instead of negotiating.
    #[non_exhaustive]
    #[derive(Default)]
    pub enum ServerEra {
        /// Negotiate: `server/discover`, falling back to `initialize`.
        #[default]
        Auto => "auto",
        /// The 2026-07-28 era only (`server/discover`; no fallback).
        V2026_07_28 => "2026-07-28",
        /// The `initialize` handshake, offering protocol version 2025-11-25.
        V2025_11_25 => "2025-11-25",
        /// The `initialize` handshake, offering protocol version 2025-06-18.
        V2025_06_18 => "2025-06-18",
    }
    unknown = |s: &str| Error::model_validation(format!(
        "server era must be one of auto, 2026-07-28, 2025-11-25, 2025-06-18, got '{s}'"
    )).with_reason(crate::reason::Reason::InvalidServerEra).with_detail("value", s)
}

impl ServerEra {
    /// Whether this is [`ServerEra::Auto`] (bindings leave the field out of their JSON
    /// then, so they read as before, also to the Python original).
    pub fn is_auto(&self) -> bool {
        *self == Self::Auto
    }

    /// The protocol version pinned, `None` for [`ServerEra::Auto`].
    pub fn pinned_version(self) -> Option<&'static str> {
        match self {
            Self::Auto => None,
            other => Some(other.as_str()),
        }
    }

    /// Whether this pins one of the `initialize` handshake versions.
    pub fn is_handshake(self) -> bool {
        matches!(self, Self::V2025_11_25 | Self::V2025_06_18)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_and_unknown_ones_say_what_is_allowed() {
        for era in ServerEra::ALL {
            assert_eq!(era.as_str().parse::<ServerEra>().unwrap(), era);
            assert_eq!(
                serde_json::to_value(era).unwrap(),
                serde_json::json!(era.as_str())
            );
        }
        let error = "2024-11-05".parse::<ServerEra>().unwrap_err();
        assert_eq!(error.code(), "invalid_argument");
        assert_eq!(error.reason(), Some(crate::Reason::InvalidServerEra));
        assert!(error.to_string().contains("2025-06-18"), "{error}");
        assert_eq!(ServerEra::default(), ServerEra::Auto);
        assert_eq!(ServerEra::Auto.pinned_version(), None);
        assert!(ServerEra::V2025_06_18.is_handshake());
        assert!(!ServerEra::V2026_07_28.is_handshake());
    }

    #[test]
    fn a_binding_leaves_auto_out_of_its_json_and_keeps_a_pinned_era() {
        use crate::{HttpServer, ServerBinding, StdioServer};
        let plain = StdioServer::new("py", "python3");
        assert!(serde_json::to_value(&plain).unwrap().get("era").is_none());
        let bindings: [ServerBinding; 2] = [
            plain.with_era(ServerEra::V2025_11_25).into(),
            HttpServer::new("web", "https://mcp.example.com/mcp")
                .with_era(ServerEra::V2025_06_18)
                .into(),
        ];
        for binding in bindings {
            let json = serde_json::to_value(&binding).unwrap();
            assert_eq!(json["era"], binding.era().as_str(), "{json}");
            let back: ServerBinding = serde_json::from_value(json).unwrap();
            assert_eq!(back, binding);
        }
        let bad = serde_json::json!({"name": "py", "command": "python3", "era": "modern"});
        assert!(serde_json::from_value::<StdioServer>(bad).is_err());
    }
}
