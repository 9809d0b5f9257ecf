//! [`CompletedOperation`]: the final result of an operation and the record of its attempts.

use serde_json::Value;

use super::record::LogicalOperation;

/// A finished operation: the result JSON and the record of its attempts.
#[derive(Debug, Clone)]
pub struct CompletedOperation {
    pub(crate) result: Value,
    pub(crate) is_error: bool,
    pub(crate) record: Box<LogicalOperation>,
}

impl CompletedOperation {
    /// The result object as the server sent it (`CallToolResult`,
    /// `GetPromptResult` or `ReadResourceResult` JSON).
    pub fn result(&self) -> &Value {
        &self.result
    }

    /// The tool's `isError` flag (false for prompts and resources).
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// The record of the logical operation.
    pub fn record(&self) -> &LogicalOperation {
        &self.record
    }

    /// The concatenated `text` of every text content block (tool `content`,
    /// prompt `messages[].content`, resource `contents[]`).
    pub fn text(&self) -> String {
        let mut texts = Vec::new();
        collect_text(&self.result, &mut texts);
        texts.join("\n")
    }

    /// Split into the result JSON and the record.
    pub fn into_parts(self) -> (Value, LogicalOperation) {
        (self.result, *self.record)
    }
}

fn collect_text(value: &Value, out: &mut Vec<String>) {
    let items = ["content", "messages", "contents"]
        .iter()
        .filter_map(|key| value.get(*key))
        .flat_map(|v| match v {
            Value::Array(items) => items.iter().collect::<Vec<_>>(),
            other => vec![other],
        });
    for item in items {
        if let Some(Value::String(text)) = item.get("text") {
            out.push(text.clone());
        } else if item.get("content").is_some() {
            collect_text(item, out);
        }
    }
}
