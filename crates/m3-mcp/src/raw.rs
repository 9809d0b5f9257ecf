//! The elicitation requests exactly as the server wrote them.
//!
//! rmcp decodes `elicitation/create` params and `input_required` results into its
//! typed model, which keeps only its restricted schema subset: `pattern`, `const`,
//! `multipleOf`, `additionalProperties`, `x-*` keywords and `task` are lost, and
//! numbers change form. The frame reader sees every line before rmcp does, so it
//! keeps the raw JSON of those two messages here, by JSON-RPC id; the handler and
//! the driver take it when rmcp hands them the typed value, and decode the raw one.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use rmcp::model::RequestId;
use serde_json::Value;

/// Most raw messages kept per direction; an entry nobody takes (its request was
/// abandoned) is evicted oldest first.
const CAPACITY: usize = 64;

/// One bounded id → JSON map, oldest evicted first.
#[derive(Debug, Default)]
struct Slots {
    values: HashMap<String, Value>,
    order: VecDeque<String>,
}

impl Slots {
    fn put(&mut self, id: String, value: Value) {
        if self.values.insert(id.clone(), value).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > CAPACITY {
            if let Some(oldest) = self.order.pop_front() {
                self.values.remove(&oldest);
            }
        }
    }

    fn take(&mut self, id: &str) -> Option<Value> {
        let value = self.values.remove(id)?;
        self.order.retain(|kept| kept != id);
        Some(value)
    }
}

/// Raw server messages the typed model would change, by JSON-RPC id.
#[derive(Debug, Default)]
pub(crate) struct RawMessages {
    /// `elicitation/create` params, by the server's request id.
    requests: Mutex<Slots>,
    /// `input_required` results, tasks and `tasks/get` answers, by our request id.
    results: Mutex<Slots>,
}

/// The map key of a JSON-RPC id (its JSON text: `7`, `"abc"`).
fn id_key(id: &Value) -> Option<String> {
    matches!(id, Value::Number(_) | Value::String(_)).then(|| id.to_string())
}

fn request_key(id: &RequestId) -> Option<String> {
    serde_json::to_value(id).ok().as_ref().and_then(id_key)
}

impl RawMessages {
    /// Keep `frame` if it is an `elicitation/create` request or a result
    /// [`keeps_result`] names.
    pub(crate) fn observe(&self, frame: &Value) {
        let Value::Object(message) = frame else {
            return;
        };
        let Some(id) = message.get("id").and_then(id_key) else {
            return;
        };
        if message.get("method").and_then(Value::as_str) == Some("elicitation/create") {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            lock(&self.requests).put(id, params);
        } else if let Some(result) = message.get("result")
            && keeps_result(result)
        {
            lock(&self.results).put(id, result.clone());
        }
    }

    /// The raw params of the server's `elicitation/create` with this id.
    pub(crate) fn take_request(&self, id: &RequestId) -> Option<Value> {
        lock(&self.requests).take(&request_key(id)?)
    }

    /// The raw `input_required` result answering our request with this id.
    pub(crate) fn take_result(&self, id: &RequestId) -> Option<Value> {
        lock(&self.results).take(&request_key(id)?)
    }
}

/// Whether a result is one the typed model would change: an `input_required`, a task
/// (`resultType: "task"`) or a `tasks/get` answer (a `taskId` at the top), whose
/// `inputRequests` carry elicitation schemas.
fn keeps_result(result: &Value) -> bool {
    matches!(
        result.get("resultType").and_then(Value::as_str),
        Some("input_required" | "task")
    ) || result.get("taskId").is_some()
}

/// The maps hold no invariant a panicking holder could break half-way.
fn lock(slots: &Mutex<Slots>) -> std::sync::MutexGuard<'_, Slots> {
    slots.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_requests_and_input_required_results_by_id() {
        let raw = RawMessages::default();
        raw.observe(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create",
            "params": {"message": "m", "requestedSchema": {"x-a": 1}}}),
        );
        raw.observe(&json!({"jsonrpc": "2.0", "id": "r1",
            "result": {"resultType": "input_required", "requestState": "s"}}));
        raw.observe(&json!({"jsonrpc": "2.0", "id": 8, "result": {"content": []}}));
        raw.observe(&json!({"jsonrpc": "2.0", "id": 9,
            "result": {"resultType": "complete", "taskId": "T", "status": "working"}}));
        raw.observe(&json!({"jsonrpc": "2.0", "id": 10,
            "result": {"resultType": "task", "taskId": "T", "status": "working"}}));
        assert!(
            raw.take_result(&RequestId::Number(9)).is_some(),
            "tasks/get kept"
        );
        assert!(
            raw.take_result(&RequestId::Number(10)).is_some(),
            "task kept"
        );
        assert_eq!(
            raw.take_request(&RequestId::Number(7)),
            Some(json!({"message": "m", "requestedSchema": {"x-a": 1}}))
        );
        assert_eq!(raw.take_request(&RequestId::Number(7)), None, "taken once");
        assert!(raw.take_result(&RequestId::String("r1".into())).is_some());
        assert_eq!(
            raw.take_result(&RequestId::Number(8)),
            None,
            "complete results are not kept"
        );
    }

    #[test]
    fn unclaimed_messages_are_evicted_oldest_first() {
        let raw = RawMessages::default();
        for id in 0..(CAPACITY as i64 + 5) {
            raw.observe(&json!({"id": id, "method": "elicitation/create", "params": {}}));
        }
        assert_eq!(raw.take_request(&RequestId::Number(0)), None);
        assert!(
            raw.take_request(&RequestId::Number(CAPACITY as i64 + 4))
                .is_some()
        );
    }
}
