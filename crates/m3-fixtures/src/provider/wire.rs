//! The Responses API wire: output items, the SSE reply and the model list.

use serde_json::{Value, json};

use super::script::{ProviderScript, ProviderStep, tool_namespace};

/// The number of `function_call_output` items in a request body's `input` (0 when the body
/// has no `input` list).
pub(crate) fn function_call_outputs(body: &Value) -> usize {
    body.get("input")
        .and_then(Value::as_array)
        .map_or(0, |items| {
            items
                .iter()
                .filter(|item| {
                    item.get("type").and_then(Value::as_str) == Some("function_call_output")
                })
                .count()
        })
}

/// The output item answering a request with `outputs` function call outputs.
///
/// Ids are numbered from 1 by step: step 0 is `fc_1`/`call_1` or `msg_1`.
pub(crate) fn output_item(script: &ProviderScript, outputs: usize) -> Value {
    let number = outputs.saturating_add(1);
    match script.step(outputs) {
        ProviderStep::Call {
            server,
            tool,
            arguments,
        } => json!({
            "type": "function_call",
            "id": format!("fc_{number}"),
            "call_id": format!("call_{number}"),
            "status": "completed",
            "name": tool,
            "namespace": tool_namespace(&server),
            "arguments": Value::Object(arguments).to_string(),
        }),
        ProviderStep::Builtin { name, arguments } => json!({
            "type": "function_call",
            "id": format!("fc_{number}"),
            "call_id": format!("call_{number}"),
            "status": "completed",
            "name": name,
            "arguments": Value::Object(arguments).to_string(),
        }),
        ProviderStep::Text { text } => json!({
            "type": "message",
            "role": "assistant",
            "id": format!("msg_{number}"),
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
    }
}

/// A rough, deterministic token count: one token per four bytes of JSON, at least one.
fn tokens(value: &Value) -> u64 {
    let bytes = u64::try_from(value.to_string().len()).unwrap_or(u64::MAX);
    (bytes / 4).max(1)
}

/// The SSE body of a reply: `response.created`, `response.output_item.done` and
/// `response.completed` (with usage), each as `event: <type>\ndata: <json>\n\n`.
pub(crate) fn sse_reply(response_id: &str, model: &str, request: &Value, item: Value) -> String {
    let input_tokens = request.get("input").map_or(1, tokens);
    let output_tokens = tokens(&item);
    let usage = json!({
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens.saturating_add(output_tokens),
    });
    let events = [
        json!({
            "type": "response.created",
            "sequence_number": 0,
            "response": {"id": response_id, "object": "response", "model": model, "status": "in_progress", "output": []},
        }),
        json!({
            "type": "response.output_item.done",
            "sequence_number": 1,
            "output_index": 0,
            "item": item.clone(),
        }),
        json!({
            "type": "response.completed",
            "sequence_number": 2,
            "response": {
                "id": response_id,
                "object": "response",
                "model": model,
                "status": "completed",
                "output": [item],
                "usage": usage,
            },
        }),
    ];
    let mut body = String::new();
    for event in events {
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        body.push_str("event: ");
        body.push_str(kind);
        body.push_str("\ndata: ");
        body.push_str(&event.to_string());
        body.push_str("\n\n");
    }
    body
}

/// The `GET /v1/models` body: an OpenAI-style list holding the script's model.
pub(crate) fn model_list(model: &str) -> Value {
    json!({
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "m3-fixtures"}],
    })
}

/// An OpenAI-style error body.
pub(crate) fn error_body(code: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error", "code": code}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_function_call_outputs() {
        let body = json!({"input": [
            {"type": "message", "role": "user"},
            {"type": "function_call", "call_id": "call_1"},
            {"type": "function_call_output", "call_id": "call_1"},
        ]});
        assert_eq!(function_call_outputs(&body), 1);
        assert_eq!(function_call_outputs(&json!({"input": "text"})), 0);
    }
}
