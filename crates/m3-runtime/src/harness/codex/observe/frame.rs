//! The MCP frames the wire tracker reads, typed: JSON-RPC framing plus the
//! params of the requests it follows. Method names are rmcp's.
//!
//! Like [`super::super::protocol`], fields of the wrong shape read as absent: an
//! odd frame is still counted, never dropped.

use m3_types::{OperationKind, ResponseMap};
use rmcp::model::{
    CallToolRequestMethod, ConstString, DiscoverRequestMethod, ElicitationCreateRequestMethod,
    GetPromptRequestMethod, InitializeResultMethod, ReadResourceRequestMethod,
};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::super::protocol::{self, lenient, present};

/// `initialize`.
pub(super) const INITIALIZE: &str = InitializeResultMethod::VALUE;
/// `server/discover`.
pub(super) const SERVER_DISCOVER: &str = DiscoverRequestMethod::VALUE;
/// `elicitation/create`.
pub(super) const ELICITATION_CREATE: &str = ElicitationCreateRequestMethod::VALUE;

/// One JSON-RPC frame (request, notification or response).
#[derive(Debug, Deserialize)]
pub(super) struct McpFrame {
    #[serde(default, deserialize_with = "present")]
    pub(super) id: Option<Value>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) method: Option<String>,
    #[serde(default)]
    pub(super) params: Value,
    #[serde(default, deserialize_with = "present")]
    pub(super) result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) error: Option<Value>,
}

impl McpFrame {
    /// The frame, when `payload` is a JSON object.
    pub(super) fn parse(payload: &Value) -> Option<Self> {
        protocol::decode(payload.clone())
    }
}

/// `initialize` params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InitializeParams {
    #[serde(default, deserialize_with = "lenient")]
    pub(super) protocol_version: Option<String>,
}

/// `tools/call`, `prompts/get` and `resources/read` params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct OperationParams {
    #[serde(default, deserialize_with = "lenient")]
    pub(super) name: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) uri: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) arguments: Option<Map<String, Value>>,
    /// 2026-07-28: the state echoed on a retry.
    #[serde(default, deserialize_with = "lenient")]
    pub(super) request_state: Option<String>,
    /// 2026-07-28: the answers carried by a retry.
    #[serde(default, deserialize_with = "lenient")]
    pub(super) input_responses: Option<ResponseMap>,
}

impl OperationParams {
    /// The operation's name: a resource's `uri`, else `name` (`""` when absent).
    pub(super) fn operation_name(&self, kind: OperationKind) -> String {
        let name = if kind == OperationKind::Resource {
            &self.uri
        } else {
            &self.name
        };
        name.clone().unwrap_or_default()
    }
}

/// A JSON-RPC error object, for its message.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RpcErrorBody {
    #[serde(default, deserialize_with = "lenient")]
    pub(super) message: Option<String>,
}

/// The kind of operation a request method starts, if any.
pub(super) fn operation_kind(method: &str) -> Option<OperationKind> {
    match method {
        CallToolRequestMethod::VALUE => Some(OperationKind::Tool),
        GetPromptRequestMethod::VALUE => Some(OperationKind::Prompt),
        ReadResourceRequestMethod::VALUE => Some(OperationKind::Resource),
        _ => None,
    }
}

/// `T` from params; the default when they are not an object of that shape.
pub(super) fn params<T: Default + serde::de::DeserializeOwned>(params: &Value) -> T {
    protocol::decode(params.clone()).unwrap_or_default()
}
