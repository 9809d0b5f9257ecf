//! The `codex app-server` protocol as far as M3 speaks it: the method names and a
//! serde type for every message M3 reads or writes.
//!
//! Frames are JSON-RPC without the `"jsonrpc"` field (see [`super::app_server`]).
//! Types M3 writes are exact; types M3 reads are lenient the way the untyped code
//! was: a field of the wrong shape reads as absent instead of dropping the whole
//! message (a `turn/completed` must never be lost to an odd `error` field).

use m3_types::ElicitationAction;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Method names, as Codex spells them.
pub(super) mod method {
    /// Client request: the handshake.
    pub(crate) const INITIALIZE: &str = "initialize";
    /// Client notification: the handshake is done.
    pub(crate) const INITIALIZED: &str = "initialized";
    /// Client request: start a thread.
    pub(crate) const THREAD_START: &str = "thread/start";
    /// Client request: start a turn on a thread.
    pub(crate) const TURN_START: &str = "turn/start";
    /// Client request: interrupt the running turn.
    pub(crate) const TURN_INTERRUPT: &str = "turn/interrupt";

    /// Notification: an item (tool call, message, ...) started.
    pub(crate) const ITEM_STARTED: &str = "item/started";
    /// Notification: an item completed.
    pub(crate) const ITEM_COMPLETED: &str = "item/completed";
    /// Notification: the thread's token usage changed.
    pub(crate) const TOKEN_USAGE_UPDATED: &str = "thread/tokenUsage/updated";
    /// Notification: a turn ended (any status).
    pub(crate) const TURN_COMPLETED: &str = "turn/completed";

    /// Server request: an MCP server's elicitation, or Codex's tool approval.
    pub(crate) const MCP_ELICITATION: &str = "mcpServer/elicitation/request";
    /// Server request: approve a command execution (v2 names).
    pub(crate) const COMMAND_APPROVAL: &str = "item/commandExecution/requestApproval";
    /// Server request: approve a file change (v2 names).
    pub(crate) const FILE_CHANGE_APPROVAL: &str = "item/fileChange/requestApproval";
    /// Server request: approve a command execution (v1 names).
    pub(crate) const EXEC_COMMAND_APPROVAL: &str = "execCommandApproval";
    /// Server request: approve a patch (v1 names).
    pub(crate) const APPLY_PATCH_APPROVAL: &str = "applyPatchApproval";
    /// Server request: grant extra permissions.
    pub(crate) const PERMISSIONS_APPROVAL: &str = "item/permissions/requestApproval";
}

/// JSON-RPC error code for a server request M3 does not support.
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC error code for a server request refused because the turn is interrupted.
pub(super) const SERVER_ERROR: i64 = -32000;

// ----- framing -----

/// A request M3 sends.
#[derive(Debug, Serialize)]
pub(super) struct OutgoingRequest<'a, P> {
    pub(super) id: u64,
    pub(super) method: &'a str,
    pub(super) params: &'a P,
}

/// A notification M3 sends.
#[derive(Debug, Serialize)]
pub(super) struct OutgoingNotification<'a> {
    pub(super) method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) params: Option<&'a Value>,
}

/// M3's answer to a server request.
#[derive(Debug, Serialize)]
pub(super) struct OutgoingResult<'a, R> {
    pub(super) id: &'a Value,
    pub(super) result: &'a R,
}

/// M3's refusal of a server request.
#[derive(Debug, Serialize)]
pub(super) struct OutgoingError<'a> {
    pub(super) id: &'a Value,
    pub(super) error: RpcError<'a>,
}

/// A JSON-RPC error object.
#[derive(Debug, Serialize)]
pub(super) struct RpcError<'a> {
    pub(super) code: i64,
    pub(super) message: &'a str,
}

/// Any frame from the app-server, before it is told apart.
#[derive(Debug, Deserialize)]
pub(super) struct IncomingFrame {
    #[serde(default, deserialize_with = "present")]
    pub(super) id: Option<Value>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) method: Option<String>,
    #[serde(default)]
    pub(super) params: Value,
    #[serde(default)]
    pub(super) result: Value,
    #[serde(default, deserialize_with = "present")]
    pub(super) error: Option<Value>,
}

// ----- client requests -----

/// `initialize` params.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InitializeParams {
    pub(super) client_info: ClientInfo,
    pub(super) capabilities: ClientCapabilities,
}

/// Who the client is.
#[derive(Debug, Serialize)]
pub(super) struct ClientInfo {
    pub(super) name: &'static str,
    pub(super) title: &'static str,
    pub(super) version: &'static str,
}

/// What the client can do.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClientCapabilities {
    /// Needed for the granular approval policy.
    pub(super) experimental_api: bool,
}

/// `thread/start` params.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThreadStartParams {
    pub(super) cwd: String,
    pub(super) model: String,
    pub(super) approval_policy: ApprovalPolicy,
    pub(super) sandbox: SandboxMode,
    pub(super) ephemeral: bool,
}

/// The approval policy of a thread.
#[derive(Debug, Serialize)]
pub(super) struct ApprovalPolicy {
    pub(super) granular: GranularApproval,
}

/// Which prompts Codex surfaces instead of deciding itself (Codex spells these
/// in snake case).
#[derive(Debug, Serialize)]
pub(super) struct GranularApproval {
    pub(super) mcp_elicitations: bool,
    pub(super) rules: bool,
    pub(super) sandbox_approval: bool,
}

/// The sandbox of a thread.
#[derive(Debug, Serialize)]
pub(super) enum SandboxMode {
    /// The agent may read the workspace only.
    #[serde(rename = "read-only")]
    ReadOnly,
}

/// `thread/start` answer.
#[derive(Debug, Deserialize)]
pub(super) struct ThreadStartResponse {
    pub(super) thread: IdOnly,
}

/// `turn/start` params.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TurnStartParams<'a> {
    pub(super) thread_id: &'a str,
    pub(super) input: Vec<UserInput<'a>>,
    pub(super) model: &'a str,
}

/// One piece of user input.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(super) enum UserInput<'a> {
    /// Plain text.
    Text { text: &'a str },
}

/// `turn/start` answer.
#[derive(Debug, Deserialize)]
pub(super) struct TurnStartResponse {
    pub(super) turn: IdOnly,
}

/// An object of which only the id matters.
#[derive(Debug, Deserialize)]
pub(super) struct IdOnly {
    pub(super) id: String,
}

/// `turn/interrupt` params.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TurnInterruptParams<'a> {
    pub(super) thread_id: &'a str,
    pub(super) turn_id: &'a str,
}

// ----- notifications -----

/// `item/started` and `item/completed` params.
#[derive(Debug, Deserialize)]
pub(super) struct ItemNotification {
    pub(super) item: ThreadItem,
}

/// The items M3 looks at; every other type is [`ThreadItem::Other`].
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(super) enum ThreadItem {
    /// A call of an MCP tool.
    McpToolCall {
        #[serde(default, deserialize_with = "lenient")]
        server: Option<String>,
        #[serde(default, deserialize_with = "lenient")]
        tool: Option<String>,
        #[serde(default)]
        arguments: Value,
    },
    /// A message of the agent.
    AgentMessage {
        #[serde(default, deserialize_with = "lenient")]
        text: Option<String>,
    },
    /// Anything else.
    #[serde(other)]
    Other,
}

/// `thread/tokenUsage/updated` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TokenUsageNotification {
    /// Kept verbatim (`null` included) for the operation log.
    #[serde(default, deserialize_with = "present")]
    pub(super) token_usage: Option<Value>,
}

/// `turn/completed` params.
#[derive(Debug, Deserialize)]
pub(super) struct TurnCompletedNotification {
    pub(super) turn: CompletedTurn,
}

/// The turn of a `turn/completed`.
#[derive(Debug, Deserialize)]
pub(super) struct CompletedTurn {
    #[serde(default, deserialize_with = "lenient")]
    pub(super) id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) status: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) error: Option<TurnError>,
}

/// Why a turn failed.
#[derive(Debug, Deserialize)]
pub(super) struct TurnError {
    #[serde(default, deserialize_with = "lenient")]
    pub(super) message: Option<String>,
}

/// A turn's terminal status.
pub(super) mod turn_status {
    /// The turn ran to its end.
    pub(crate) const COMPLETED: &str = "completed";
    /// The turn was interrupted.
    pub(crate) const INTERRUPTED: &str = "interrupted";
}

// ----- server requests -----

/// `mcpServer/elicitation/request` params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct McpElicitationParams {
    #[serde(default, deserialize_with = "lenient")]
    pub(super) server_name: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) mode: Option<String>,
    #[serde(default)]
    pub(super) message: Value,
    #[serde(default)]
    pub(super) requested_schema: Value,
    #[serde(default)]
    pub(super) url: Value,
    #[serde(default)]
    pub(super) elicitation_id: Value,
    #[serde(default, rename = "_meta", deserialize_with = "lenient")]
    pub(super) meta: Option<ElicitationMeta>,
}

/// The `_meta` of a native prompt: Codex's tool approvals carry
/// `codex_approval_kind = "mcp_tool_call"`.
#[derive(Debug, Deserialize)]
pub(super) struct ElicitationMeta {
    #[serde(default, deserialize_with = "lenient")]
    pub(super) codex_approval_kind: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) tool_name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(super) tool_params: Option<Value>,
}

/// The `codex_approval_kind` of Codex's own MCP tool approval.
pub(super) const MCP_TOOL_CALL_APPROVAL: &str = "mcp_tool_call";

/// The answer to a native prompt.
#[derive(Debug, Serialize)]
pub(super) struct ElicitationAnswer {
    pub(super) action: ElicitationAction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) content: Option<Map<String, Value>>,
}

/// The answer to a v2 command or file-change approval.
#[derive(Debug, Serialize)]
pub(super) struct ApprovalAnswer {
    pub(super) decision: ApprovalDecision,
}

/// A v2 approval decision.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum ApprovalDecision {
    /// Run it.
    Accept,
    /// Do not run it.
    Decline,
}

/// The answer to a v1 command or patch approval.
#[derive(Debug, Serialize)]
pub(super) struct ReviewAnswer {
    pub(super) decision: ReviewDecision,
}

/// A v1 approval decision.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum ReviewDecision {
    /// Run it.
    Approved,
    /// Do not run it.
    Denied,
}

/// `item/permissions/requestApproval` params.
#[derive(Debug, Default, Deserialize)]
pub(super) struct PermissionsParams {
    /// Granted back verbatim when the policy allows.
    #[serde(default, deserialize_with = "present")]
    pub(super) permissions: Option<Value>,
}

/// The answer to a permissions request.
#[derive(Debug, Serialize)]
pub(super) struct PermissionsAnswer {
    pub(super) permissions: Value,
    pub(super) scope: PermissionScope,
}

/// How long granted permissions last.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum PermissionScope {
    /// For this turn only.
    Turn,
}

/// Reads `T` from the JSON object `value`; `None` when it is not an object of
/// that shape.
pub(super) fn decode<T: DeserializeOwned>(value: Value) -> Option<T> {
    match value {
        Value::Object(_) => serde_json::from_value(value).ok(),
        _ => None,
    }
}

/// A field that is present (even `null`) reads as `Some`.
pub(super) fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// A field of the wrong shape reads as absent.
pub(super) fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn odd_fields_read_as_absent_and_null_stays_present() {
        let turn: TurnCompletedNotification =
            serde_json::from_value(json!({"turn": {"id": "t", "status": 3, "error": "boom"}}))
                .unwrap();
        assert_eq!(turn.turn.id.as_deref(), Some("t"));
        assert!(turn.turn.status.is_none() && turn.turn.error.is_none());
        let usage: TokenUsageNotification =
            serde_json::from_value(json!({"tokenUsage": null})).unwrap();
        assert_eq!(usage.token_usage, Some(Value::Null));
        let usage: TokenUsageNotification = serde_json::from_value(json!({})).unwrap();
        assert_eq!(usage.token_usage, None);
    }

    #[test]
    fn items_of_other_types_are_other() {
        let item: ItemNotification =
            serde_json::from_value(json!({"item": {"type": "reasoning", "id": "x"}})).unwrap();
        assert!(matches!(item.item, ThreadItem::Other));
    }

    #[test]
    fn written_messages_have_codex_shapes() {
        let params = ThreadStartParams {
            cwd: "/w".into(),
            model: "m".into(),
            approval_policy: ApprovalPolicy {
                granular: GranularApproval {
                    mcp_elicitations: true,
                    rules: true,
                    sandbox_approval: true,
                },
            },
            sandbox: SandboxMode::ReadOnly,
            ephemeral: true,
        };
        assert_eq!(
            serde_json::to_value(&params).unwrap(),
            json!({"cwd": "/w", "model": "m",
                   "approvalPolicy": {"granular": {"mcp_elicitations": true, "rules": true, "sandbox_approval": true}},
                   "sandbox": "read-only", "ephemeral": true})
        );
        let start = TurnStartParams {
            thread_id: "t",
            input: vec![UserInput::Text { text: "hi" }],
            model: "m",
        };
        assert_eq!(
            serde_json::to_value(&start).unwrap(),
            json!({"threadId": "t", "input": [{"type": "text", "text": "hi"}], "model": "m"})
        );
        assert_eq!(
            serde_json::to_value(ReviewAnswer {
                decision: ReviewDecision::Denied
            })
            .unwrap(),
            json!({"decision": "denied"})
        );
        assert_eq!(
            serde_json::to_value(PermissionsAnswer {
                permissions: json!({}),
                scope: PermissionScope::Turn
            })
            .unwrap(),
            json!({"permissions": {}, "scope": "turn"})
        );
    }
}
