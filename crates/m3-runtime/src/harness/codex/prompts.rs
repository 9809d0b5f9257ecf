//! Codex's native prompts (`mcpServer/elicitation/request`) and how each is matched
//! to the request key M3 saw on the MCP wire.
//!
//! A native prompt carries no request key and no `requestState`, and Codex
//! re-serialises the schema through a typed model (alphabetical properties, only
//! `$schema`, `type`, `properties` and `required` kept at the top level). So both
//! sides are reduced to the same fingerprint, the canonical JSON of what Codex
//! keeps, and matched by server and exact fingerprint, never by order or timing.

use m3_types::{ElicitationRequest, Error, Result, canonical_json};
use serde_json::{Map, Value, json};

use super::protocol::{self, MCP_TOOL_CALL_APPROVAL, McpElicitationParams};

/// Top-level schema keys that survive Codex's typed model.
const KEPT_SCHEMA_KEYS: [&str; 4] = ["$schema", "type", "properties", "required"];

/// One `mcpServer/elicitation/request` from the app-server.
#[derive(Debug, Clone)]
pub(super) struct NativePrompt {
    /// The app-server's request id (answered verbatim).
    pub(super) id: Value,
    /// `serverName`: the binding name.
    pub(super) server: String,
    /// Present when this is Codex's own tool-approval prompt.
    pub(super) approval: Option<ApprovalPrompt>,
    /// Canonical fingerprint of what the server asked.
    pub(super) fingerprint: String,
    /// `mode` (`form` / `url`).
    pub(super) mode: String,
}

/// Codex's tool-approval prompt (`_meta.codex_approval_kind = "mcp_tool_call"`).
#[derive(Debug, Clone)]
pub(super) struct ApprovalPrompt {
    /// `_meta.tool_name` (absent in 0.156.1).
    pub(super) tool: Option<String>,
    /// `_meta.tool_params`: the call's arguments.
    pub(super) arguments: Option<Value>,
}

impl NativePrompt {
    /// Parses the params of a native prompt.
    ///
    /// # Errors
    /// `protocol_error` for params without `serverName`.
    pub(super) fn parse(id: Value, params: &Value) -> Result<Self> {
        let params = protocol::decode::<McpElicitationParams>(params.clone()).unwrap_or_default();
        let server = params
            .server_name
            .clone()
            .ok_or_else(|| Error::protocol("codex elicitation request has no serverName"))?;
        let mode = params.mode.clone().unwrap_or_else(|| "form".to_owned());
        let approval = params
            .meta
            .as_ref()
            .filter(|m| m.codex_approval_kind.as_deref() == Some(MCP_TOOL_CALL_APPROVAL))
            .map(|m| ApprovalPrompt {
                tool: m.tool_name.clone(),
                arguments: m.tool_params.clone(),
            });
        let fingerprint = native_fingerprint(&params)?;
        Ok(Self {
            id,
            server,
            approval,
            fingerprint,
            mode,
        })
    }
}

/// The fingerprint of a native prompt's params.
fn native_fingerprint(params: &McpElicitationParams) -> Result<String> {
    let message = params.message.clone();
    let value = match params.mode.as_deref().unwrap_or("form") {
        "url" => json!({
            "mode": "url",
            "message": message,
            "url": params.url,
            "elicitationId": params.elicitation_id,
        }),
        _ => json!({
            "mode": "form",
            "message": message,
            "requestedSchema": kept_schema(Some(&params.requested_schema)),
        }),
    };
    canonical_json(&value)
}

/// The fingerprint of a request observed on the MCP wire.
pub(super) fn wire_fingerprint(request: &ElicitationRequest) -> Result<String> {
    let value = match request {
        ElicitationRequest::Form(form) => json!({
            "mode": "form",
            "message": form.message,
            "requestedSchema": kept_schema(Some(&Value::Object(form.requested_schema.clone()))),
        }),
        ElicitationRequest::Url(url) => json!({
            "mode": "url",
            "message": url.message,
            "url": url.url,
            "elicitationId": url.elicitation_id,
        }),
    };
    canonical_json(&value)
}

fn kept_schema(schema: Option<&Value>) -> Value {
    let Some(Value::Object(schema)) = schema else {
        return Value::Null;
    };
    let kept: Map<String, Value> = schema
        .iter()
        .filter(|(k, v)| KEPT_SCHEMA_KEYS.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use m3_types::FormElicitationRequest;

    fn wire_form() -> ElicitationRequest {
        let schema = json!({
            "title": "Address",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            "required": ["street", "city"]
        });
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        ElicitationRequest::Form(FormElicitationRequest::new(
            "shipping_address",
            "Enter the delivery address.",
            schema,
        ))
    }

    #[test]
    fn codex_reserialised_schema_matches_the_wire_request() {
        let params = json!({
            "threadId": "t", "turnId": "u", "serverName": "shipping", "mode": "form", "_meta": null,
            "message": "Enter the delivery address.",
            "requestedSchema": {"properties": {"city": {"type": "string"}, "street": {"type": "string"}},
                                "required": ["street", "city"], "type": "object"}
        });
        let prompt = NativePrompt::parse(json!(0), &params).unwrap();
        assert!(prompt.approval.is_none());
        assert_eq!(prompt.server, "shipping");
        assert_eq!(prompt.fingerprint, wire_fingerprint(&wire_form()).unwrap());
        let other = json!({"serverName": "shipping", "mode": "form", "message": "Something else",
                           "requestedSchema": params["requestedSchema"]});
        let other = NativePrompt::parse(json!(1), &other).unwrap();
        assert_ne!(other.fingerprint, prompt.fingerprint);
    }

    #[test]
    fn approval_prompts_are_recognised() {
        let params = json!({"serverName": "shipping", "mode": "form", "message": "Allow?",
            "requestedSchema": {"type": "object", "properties": {}},
            "_meta": {"codex_approval_kind": "mcp_tool_call", "tool_name": "book_shipment",
                      "tool_params": {"weight_kg": 2}}});
        let prompt = NativePrompt::parse(json!(0), &params).unwrap();
        let approval = prompt.approval.unwrap();
        assert_eq!(approval.tool.as_deref(), Some("book_shipment"));
        assert_eq!(approval.arguments, Some(json!({"weight_kg": 2})));
        assert!(NativePrompt::parse(json!(0), &json!({"mode": "form"})).is_err());
    }
}
