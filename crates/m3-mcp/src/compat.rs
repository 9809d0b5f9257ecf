//! How rmcp's stdio transport (3.11, `transport::async_rw`) decodes an incoming frame,
//! reproduced for our own transport so that a server sees the same client: the frame is
//! parsed as a JSON-RPC message; a notification rmcp does not know is skipped; a frame
//! that is not JSON is ignored (our [`FrameReader`](super::frames::FrameReader) already
//! refused it); JSON that is no message rmcp accepts earns an `Invalid Request` reply.

use rmcp::RoleClient;
use rmcp::service::RxJsonRpcMessage;
use serde_json::Value;

/// What one frame is to the client.
pub(crate) enum Parsed {
    /// A message for the service.
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    /// Nothing to do: an unknown notification, or a frame that is not JSON.
    Ignored,
    /// Well-formed JSON that is no message: answer `Invalid Request`.
    InvalidRequest,
}

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Decodes `frame` (without its `\n` / `\r\n`) as rmcp's transport does.
pub(crate) fn parse_message(frame: &[u8]) -> Parsed {
    let frame = frame.strip_prefix(UTF8_BOM).unwrap_or(frame);
    let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(frame) {
        Ok(message) => return Parsed::Message(Box::new(message)),
        Err(error) => error,
    };
    if std::str::from_utf8(frame).is_ok()
        && let Ok(value) = serde_json::from_slice::<Value>(frame)
        && let Some(method) = value.get("method").and_then(Value::as_str)
        && is_ignored_notification(&value, method)
    {
        return Parsed::Ignored;
    }
    match error.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            tracing::debug!("ignoring an unparsable MCP frame: {error}");
            Parsed::Ignored
        }
        serde_json::error::Category::Data | serde_json::error::Category::Io => {
            tracing::debug!("MCP frame is not a JSON-RPC message: {error}");
            Parsed::InvalidRequest
        }
    }
}

fn is_standard_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "resources/templates/list"
            | "subscriptions/listen"
            | "tools/call"
            | "tools/list"
            | "completion/complete"
            | "elicitation/create"
            | "logging/setLevel"
            | "roots/list"
            | "sampling/createMessage"
    ) || is_standard_notification(method)
}

fn is_standard_notification(method: &str) -> bool {
    matches!(
        method,
        "notifications/cancelled"
            | "notifications/initialized"
            | "notifications/message"
            | "notifications/progress"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/roots/list_changed"
            | "notifications/subscriptions/acknowledged"
            | "notifications/tools/list_changed"
    )
}

/// A notification outside MCP (an LSP message, say) or an MCP notification rmcp does not
/// know: skipped for compatibility.
fn is_ignored_notification(value: &Value, method: &str) -> bool {
    let is_notification = value.get("id").is_none();
    if is_notification && !is_standard_method(method) {
        return true;
    }
    method.starts_with("notifications/") && !is_standard_notification(method)
}
