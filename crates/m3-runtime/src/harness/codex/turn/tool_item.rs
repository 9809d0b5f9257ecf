//! [`ToolItem`]: a started `mcpToolCall` item of the turn, which Codex's approval prompts
//! are matched against by server, tool and canonical arguments.

use m3_types::canonical_json;
use serde_json::Value;

/// A started `mcpToolCall` item, the only thing Codex's approval prompt may be about.
#[derive(Debug)]
pub(super) struct ToolItem {
    pub(super) server: String,
    pub(super) tool: String,
    pub(super) arguments: String,
    pub(super) approved: bool,
}

/// Canonical JSON of a tool call's arguments (absent and `null` are `{}`).
pub(super) fn canonical(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "{}".into(),
        Some(value) => canonical_json(value).unwrap_or_default(),
    }
}
