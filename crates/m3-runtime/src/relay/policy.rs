//! The portable tool policy: which client-to-server `tools/call` frames may pass.

use serde_json::Value;

/// The JSON-RPC error code of a `tools/call` the relay refused by policy.
pub const POLICY_DENIED_CODE: i64 = -32001;

/// The JSON-RPC error message of a `tools/call` the relay refused by policy.
pub const POLICY_DENIED_MESSAGE: &str = "MCP tool call denied by policy";

/// One refused `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// The tool it named (empty when none).
    pub(crate) tool: String,
    /// Its JSON-RPC id (`None` for a notification).
    pub(crate) id: Option<Value>,
}

/// What to do with one client-to-server frame.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Forward it unchanged.
    Forward,
    /// Do not forward it; answer `reply` (if any) to the client and report `refused`.
    Deny {
        refused: Vec<Refusal>,
        reply: Option<Vec<u8>>,
    },
}

/// The tools a relay lets through (`None`: all).
#[derive(Debug, Clone)]
pub(crate) struct ToolPolicy {
    allowed: Option<Vec<String>>,
}

impl ToolPolicy {
    pub(crate) fn new(allowed: Option<Vec<String>>) -> Self {
        Self { allowed }
    }

    /// Whether a policy is in force (frames that cannot be inspected are then dropped).
    pub(crate) fn is_active(&self) -> bool {
        self.allowed.is_some()
    }

    /// Judges one parsed frame.
    ///
    /// A JSON-RPC batch holding any refused `tools/call` is refused as a whole (every
    /// request in it is answered with the policy error), so nothing in it reaches the server.
    pub(crate) fn judge(&self, frame: &Value) -> Verdict {
        let Some(allowed) = &self.allowed else {
            return Verdict::Forward;
        };
        match frame {
            Value::Array(batch) => {
                let refused: Vec<Refusal> = batch
                    .iter()
                    .filter_map(|message| refusal(allowed, message))
                    .collect();
                if refused.is_empty() {
                    return Verdict::Forward;
                }
                let answers: Vec<String> = batch
                    .iter()
                    .filter_map(|message| request_id(message).map(error_response))
                    .collect();
                let reply = (!answers.is_empty())
                    .then(|| format!("[{}]\n", answers.join(",")).into_bytes());
                Verdict::Deny { refused, reply }
            }
            message => match refusal(allowed, message) {
                None => Verdict::Forward,
                Some(refused) => {
                    let reply = refused
                        .id
                        .as_ref()
                        .map(|id| format!("{}\n", error_response(id)).into_bytes());
                    Verdict::Deny {
                        refused: vec![refused],
                        reply,
                    }
                }
            },
        }
    }
}

fn refusal(allowed: &[String], message: &Value) -> Option<Refusal> {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let tool = message
        .get("params")
        .and_then(|params| params.get("name"))
        .and_then(Value::as_str);
    match tool {
        Some(tool) if allowed.iter().any(|name| name == tool) => None,
        tool => Some(Refusal {
            tool: tool.unwrap_or_default().to_owned(),
            id: request_id(message).cloned(),
        }),
    }
}

/// The id of a request (a notification has none).
fn request_id(message: &Value) -> Option<&Value> {
    message.get("method")?;
    message.get("id")
}

fn error_response(id: &Value) -> String {
    let id = serde_json::to_string(id).unwrap_or_else(|_| "null".to_owned());
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":{POLICY_DENIED_CODE},\"message\":\"{POLICY_DENIED_MESSAGE}\"}}}}"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: Value, tool: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
    }

    #[test]
    fn without_a_policy_everything_passes() {
        let policy = ToolPolicy::new(None);
        assert!(!policy.is_active());
        assert_eq!(policy.judge(&call(json!(1), "anything")), Verdict::Forward);
    }

    #[test]
    fn only_listed_tools_pass_and_others_are_answered() {
        let policy = ToolPolicy::new(Some(vec!["book_shipment".to_owned()]));
        assert_eq!(
            policy.judge(&call(json!(1), "book_shipment")),
            Verdict::Forward
        );
        assert_eq!(
            policy.judge(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})),
            Verdict::Forward
        );
        let Verdict::Deny { refused, reply } = policy.judge(&call(json!("a"), "cancel_order"))
        else {
            panic!("not denied")
        };
        assert_eq!(refused[0].tool, "cancel_order");
        assert_eq!(refused[0].id, Some(json!("a")));
        let reply: Value = serde_json::from_slice(&reply.unwrap()).unwrap();
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -32001, "message": "MCP tool call denied by policy"}})
        );
    }

    #[test]
    fn a_batch_with_a_refused_call_is_refused_whole() {
        let policy = ToolPolicy::new(Some(vec![]));
        let batch = json!([
            call(json!(1), "x"),
            {"jsonrpc": "2.0", "method": "notifications/progress"},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        ]);
        let Verdict::Deny { refused, reply } = policy.judge(&batch) else {
            panic!("not denied")
        };
        assert_eq!(refused.len(), 1);
        let reply: Value = serde_json::from_slice(&reply.unwrap()).unwrap();
        assert_eq!(reply.as_array().unwrap().len(), 2);
        let nameless = json!({"jsonrpc": "2.0", "method": "tools/call", "params": {}});
        let Verdict::Deny { refused, reply } = policy.judge(&nameless) else {
            panic!("not denied")
        };
        assert_eq!(refused[0].tool, "");
        assert_eq!(reply, None);
    }
}
