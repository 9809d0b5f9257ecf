//! The tasks extension of 2026-07-28 (`io.modelcontextprotocol/tasks`, SEP-2663) on the
//! wire: the task a server answers a `tools/call` with (`resultType: "task"`), what
//! `tasks/get` says about it, and the params of `tasks/get`, `tasks/update` and
//! `tasks/cancel`. The driver (`driver/task.rs`) follows a task with these.
//!
//! Field names follow the extension as the official conformance suite checks it
//! (`ttlMs`, `pollIntervalMs`); the SEP text's `pollIntervalMilliseconds` and the 2025-11-25
//! `pollInterval` are read too, and a `requestState` is echoed when a server sends one
//! (the SEP text has it; the suite's servers never send it).

use std::collections::BTreeMap;
use std::time::Duration;

use m3_types::{ElicitationRequest, Error, Result};
use serde_json::{Map, Value, json};

use super::wire::{self, Origin};

/// The extension's identifier, declared under `clientCapabilities.extensions`.
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The longest wait between two polls, whatever interval a server suggests: a task that
/// finishes is seen within this.
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(30);

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One view of a task: the `CreateTaskResult` or a `tasks/get` answer.
#[derive(Debug)]
pub(crate) struct TaskSnapshot {
    pub(crate) task_id: String,
    pub(crate) status: TaskStatus,
    pub(crate) status_message: Option<String>,
    /// The server's suggested wait before the next poll, capped.
    pub(crate) poll_interval: Option<Duration>,
    pub(crate) request_state: Option<String>,
    /// `input_required`: the outstanding requests, by key.
    pub(crate) input_requests: BTreeMap<String, ElicitationRequest>,
    /// `completed`: the tool's result.
    pub(crate) result: Option<Value>,
    /// `failed`: the JSON-RPC error.
    pub(crate) error: Option<Map<String, Value>>,
}

fn malformed(origin: &Origin, what: impl Into<String>) -> Error {
    Error::protocol(format!(
        "malformed task from MCP server '{}' for {} '{}': {}",
        origin.server,
        origin.kind.as_str(),
        origin.name,
        what.into()
    ))
    .with_detail("server", origin.server.clone())
    .with_detail("operation_name", origin.name.clone())
    .with_detail("reason", "malformed_task")
}

/// The `CreateTaskResult` a `tools/call` was answered with. Its `result`, `error` and
/// `inputRequests`, which the extension says it never carries, are not used.
pub(crate) fn created(object: &Map<String, Value>, origin: &Origin) -> Result<TaskSnapshot> {
    let mut snapshot = header(object, origin)?;
    // A task still being created has nothing to report but its status: the first
    // `tasks/get` says what it needs.
    if matches!(
        snapshot.status,
        TaskStatus::InputRequired | TaskStatus::Completed | TaskStatus::Failed
    ) {
        snapshot.status = TaskStatus::Working;
    }
    Ok(snapshot)
}

/// A `tasks/get` answer about `task_id`, with the payload of its status.
pub(crate) fn detailed(value: Value, origin: &Origin, task_id: &str) -> Result<TaskSnapshot> {
    let Value::Object(object) = value else {
        return Err(malformed(origin, "the tasks/get result is not an object"));
    };
    match object.get("resultType").and_then(Value::as_str) {
        None | Some("complete") => {}
        Some(other) => {
            return Err(malformed(
                origin,
                format!("tasks/get answered with resultType '{other}'"),
            ));
        }
    }
    let mut snapshot = header(&object, origin)?;
    if snapshot.task_id != task_id {
        return Err(malformed(
            origin,
            format!(
                "tasks/get for task '{task_id}' answered about task '{}'",
                snapshot.task_id
            ),
        ));
    }
    match snapshot.status {
        TaskStatus::InputRequired => {
            snapshot.input_requests = wire::input_requests(object.get("inputRequests"), origin)?;
        }
        TaskStatus::Completed => match object.get("result") {
            Some(Value::Object(result)) => snapshot.result = Some(Value::Object(result.clone())),
            _ => return Err(malformed(origin, "a completed task has no object 'result'")),
        },
        TaskStatus::Failed => match object.get("error") {
            Some(Value::Object(error)) => snapshot.error = Some(error.clone()),
            _ => return Err(malformed(origin, "a failed task has no object 'error'")),
        },
        TaskStatus::Working | TaskStatus::Cancelled => {}
    }
    Ok(snapshot)
}

/// The fields every view of a task carries.
fn header(object: &Map<String, Value>, origin: &Origin) -> Result<TaskSnapshot> {
    let task_id = match object.get("taskId") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        _ => return Err(malformed(origin, "no string 'taskId'")),
    };
    if task_id.len() > origin.limits.max_request_bytes() {
        return Err(malformed(origin, "the taskId is over the request bound"));
    }
    let status = match object.get("status").and_then(Value::as_str) {
        Some(text) => TaskStatus::parse(text)
            .ok_or_else(|| malformed(origin, format!("unknown task status '{text}'")))?,
        None => return Err(malformed(origin, "no string 'status'")),
    };
    let poll_interval = ["pollIntervalMs", "pollIntervalMilliseconds", "pollInterval"]
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_u64))
        .map(|ms| Duration::from_millis(ms).min(MAX_POLL_INTERVAL));
    Ok(TaskSnapshot {
        task_id,
        status,
        status_message: object
            .get("statusMessage")
            .and_then(Value::as_str)
            .map(str::to_owned),
        poll_interval,
        request_state: wire::request_state(object, origin)?,
        input_requests: BTreeMap::new(),
        result: None,
        error: None,
    })
}

/// The params of `tasks/get`, `tasks/update` (with `inputResponses`) and `tasks/cancel`.
pub(crate) fn params(
    task_id: &str,
    request_state: Option<&str>,
    input_responses: Option<Value>,
) -> Value {
    let mut params = json!({ "taskId": task_id });
    if let Some(responses) = input_responses {
        params["inputResponses"] = responses;
    }
    if let Some(state) = request_state {
        params["requestState"] = json!(state);
    }
    params
}

/// The typed error of a task that ended `failed`: its JSON-RPC error, as a call's.
pub(crate) fn failed(snapshot: &TaskSnapshot, origin: &Origin) -> Error {
    let error = snapshot.error.as_ref();
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_i64);
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .or(snapshot.status_message.as_deref())
        .unwrap_or("no message");
    let mut out = Error::protocol(format!(
        "MCP server '{}' failed task '{}' of {} '{}' with error {}: {message}",
        origin.server,
        snapshot.task_id,
        origin.kind.as_str(),
        origin.name,
        code.map_or_else(|| "(no code)".to_owned(), |c| c.to_string()),
    ))
    .with_detail("server", origin.server.clone())
    .with_detail("operation_name", origin.name.clone())
    .with_detail("task_id", snapshot.task_id.clone())
    .with_detail("reason", "task_failed");
    if let Some(code) = code {
        out = out.with_detail("jsonrpc_code", code);
    }
    out
}

/// The typed error of a task the server ended `cancelled` without being asked to.
pub(crate) fn cancelled(snapshot: &TaskSnapshot, origin: &Origin) -> Error {
    Error::protocol(format!(
        "MCP server '{}' cancelled task '{}' of {} '{}'{}",
        origin.server,
        snapshot.task_id,
        origin.kind.as_str(),
        origin.name,
        snapshot
            .status_message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default()
    ))
    .with_detail("server", origin.server.clone())
    .with_detail("operation_name", origin.name.clone())
    .with_detail("task_id", snapshot.task_id.clone())
    .with_detail("reason", "task_cancelled")
}

#[cfg(test)]
mod tests {
    use super::*;
    use m3_types::OperationKind;
    use m3_types::limits::RoundLimits;

    fn origin() -> Origin {
        Origin {
            server: "s".into(),
            kind: OperationKind::Tool,
            name: "t".into(),
            secrets: wire::Secrets::default(),
            limits: RoundLimits::default(),
        }
    }

    #[test]
    fn created_task_reads_id_status_and_poll_interval() {
        let object = json!({"resultType": "task", "taskId": "T1", "status": "working",
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttlMs": 60000, "pollIntervalMs": 250});
        let snapshot = created(object.as_object().unwrap(), &origin()).unwrap();
        assert_eq!(snapshot.task_id, "T1");
        assert_eq!(snapshot.status, TaskStatus::Working);
        assert_eq!(snapshot.poll_interval, Some(Duration::from_millis(250)));
        assert_eq!(snapshot.request_state, None);
    }

    #[test]
    fn input_required_task_keeps_its_requests_and_state() {
        let value = json!({"resultType": "complete", "taskId": "T1", "status": "input_required",
            "requestState": "s1", "pollIntervalMilliseconds": 99999999,
            "inputRequests": {"k": {"method": "elicitation/create", "params": {"message": "Sure?",
                "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}}});
        let snapshot = detailed(value, &origin(), "T1").unwrap();
        assert_eq!(snapshot.status, TaskStatus::InputRequired);
        assert_eq!(snapshot.request_state.as_deref(), Some("s1"));
        assert_eq!(snapshot.poll_interval, Some(MAX_POLL_INTERVAL));
        assert_eq!(snapshot.input_requests.keys().collect::<Vec<_>>(), ["k"]);
    }

    #[test]
    fn malformed_tasks_are_typed_protocol_errors() {
        let cases = [
            json!({"taskId": "T1", "status": "sleeping"}),
            json!({"status": "working"}),
            json!({"taskId": "T2", "status": "working"}),
            json!({"taskId": "T1", "status": "completed"}),
            json!({"taskId": "T1", "status": "failed", "error": "boom"}),
            json!({"taskId": "T1", "status": "working", "resultType": "task"}),
            json!({"taskId": "T1", "status": "input_required",
                "inputRequests": {"k": {"method": "sampling/createMessage", "params": {}}}}),
        ];
        for case in cases {
            let error = detailed(case.clone(), &origin(), "T1").unwrap_err();
            assert_eq!(error.code(), "protocol_error", "{case}");
        }
    }

    #[test]
    fn failed_task_error_carries_the_jsonrpc_code() {
        let value = json!({"taskId": "T1", "status": "failed",
            "error": {"code": -32603, "message": "disk on fire"}});
        let snapshot = detailed(value, &origin(), "T1").unwrap();
        let error = failed(&snapshot, &origin());
        assert!(error.to_string().contains("disk on fire"), "{error}");
        let info = error.to_error_info();
        assert_eq!(info.details["jsonrpc_code"], json!(-32603));
        assert_eq!(info.details["reason"], json!("task_failed"));
    }

    #[test]
    fn params_echo_state_only_when_given() {
        assert_eq!(params("T", None, None), json!({"taskId": "T"}));
        assert_eq!(
            params("T", Some("s"), Some(json!({"k": {"action": "accept"}}))),
            json!({"taskId": "T", "requestState": "s", "inputResponses": {"k": {"action": "accept"}}})
        );
    }
}
