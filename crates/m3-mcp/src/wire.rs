//! Translation between MCP wire JSON and m3 values.
//!
//! Results are classified from their JSON (`ServerResult` re-serialized, or the raw
//! `CustomResult` rmcp falls back to when a reply is outside its typed model), so
//! one code path handles typed and non-conforming replies alike: a schema outside
//! the restricted subset passes through verbatim as data, and a malformed
//! `input_required` is a `protocol_error`, never a panic.

use std::collections::BTreeMap;
use std::sync::Arc;

use m3_types::limits::{LimitExceeded, RoundLimits, check_map_depth};
use m3_types::{
    ElicitationRequest, ElicitationResponse, Error, FormElicitationRequest, OperationKind, Reason,
    Result, ServerEra, UrlElicitationRequest,
};
use rmcp::ServiceError;
use serde_json::{Map, Value, json};

use super::options::ProtocolEra;

/// Where a request came from; stamped on every [`ElicitationRequest`].
#[derive(Debug, Clone)]
#[expect(
    clippy::exhaustive_structs,
    reason = "plumbing: the Codex harness of m3-runtime builds it with a struct literal"
)]
pub struct Origin {
    /// The server binding's name.
    pub server: String,
    /// Tool, prompt or resource.
    pub kind: OperationKind,
    /// Tool or prompt name, or resource URI.
    pub name: String,
    /// Values the server's requests must not carry (see [`Secrets`]).
    pub secrets: Secrets,
    /// Bounds on the rounds this server may send.
    pub limits: RoundLimits,
}

/// A server's value over a bound of [`m3_types::limits`]: `protocol_error`, refused before
/// anything stores it.
fn over_limit(origin: &Origin, exceeded: LimitExceeded) -> Error {
    let error = Error::protocol(format!(
        "MCP server '{}' sent data over a bound: {}",
        origin.server,
        exceeded.message()
    ));
    exceeded
        .describe(error)
        .with_detail("server", origin.server.clone())
        .with_detail("operation_name", origin.name.clone())
}

/// The resolved `${NAME}` header values of an HTTP binding. A round stores the
/// server's request exactly as sent, so a request that carries one of them
/// (a server echoing its credential back) is refused rather than stored: it
/// cannot be both kept byte for byte and kept out of the store.
#[derive(Clone, Default)]
pub struct Secrets(Arc<[String]>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} values)", self.0.len())
    }
}

impl Secrets {
    /// The non-empty values of `values`.
    pub fn new(values: &[String]) -> Self {
        Self(values.iter().filter(|v| !v.is_empty()).cloned().collect())
    }

    /// Whether a string anywhere in `value` (an object key included) contains one.
    fn appear_in(&self, value: &Value) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let carries = |text: &str| self.0.iter().any(|secret| text.contains(secret.as_str()));
        match value {
            Value::String(text) => carries(text),
            Value::Array(items) => items.iter().any(|item| self.appear_in(item)),
            Value::Object(map) => self.appear_in_map(map),
            _ => false,
        }
    }

    fn appear_in_map(&self, map: &Map<String, Value>) -> bool {
        map.iter().any(|(key, item)| {
            self.0.iter().any(|secret| key.contains(secret.as_str())) || self.appear_in(item)
        })
    }
}

/// A classified answer to one wire attempt.
#[derive(Debug)]
#[expect(
    clippy::exhaustive_enums,
    reason = "a result either completes or asks for input; callers match both"
)]
pub enum Answer {
    /// The operation's final result.
    Complete {
        /// The result object as the server sent it.
        result: Value,
        /// The tool's `isError` flag.
        is_error: bool,
    },
    /// The server needs input (`input_required`).
    InputRequired {
        /// The keyed requests, stamped with their origin.
        requests: BTreeMap<String, ElicitationRequest>,
        /// The opaque `requestState`, verbatim.
        request_state: Option<String>,
    },
}

fn malformed(origin: &Origin, what: impl Into<String>) -> Error {
    Error::protocol(format!(
        "malformed input_required from MCP server '{}': {}",
        origin.server,
        what.into()
    ))
    .with_detail("server", origin.server.clone())
    .with_detail("operation_name", origin.name.clone())
}

/// Decode one elicitation request's params (`elicitation/create` params object).
pub fn elicitation_request(
    key: &str,
    params: &Value,
    origin: &Origin,
) -> Result<ElicitationRequest> {
    let Some(params) = params.as_object() else {
        return Err(malformed(
            origin,
            format!("request '{key}' params are not an object"),
        ));
    };
    origin
        .limits
        .check_request_params(params)
        .map_err(|e| over_limit(origin, e).with_detail("request_key", key))?;
    if origin.secrets.appear_in_map(params) {
        return Err(Error::protocol(format!(
            "MCP server '{}' sent elicitation request '{key}' containing the value of one of \
             its resolved header references; it was refused so that the value is never stored",
            origin.server
        ))
        .with_detail("server", origin.server.clone())
        .with_detail("operation_name", origin.name.clone())
        .with_detail("reason", "request_carries_header_secret"));
    }
    let message = match params.get("message") {
        Some(Value::String(message)) => message.clone(),
        _ => {
            return Err(malformed(
                origin,
                format!("request '{key}' has no string 'message'"),
            ));
        }
    };
    let meta = params.get("_meta").and_then(Value::as_object).cloned();
    let task = params.get("task").and_then(Value::as_object).cloned();
    match params.get("mode").and_then(Value::as_str) {
        None | Some("form") => {
            let Some(Value::Object(schema)) = params.get("requestedSchema") else {
                return Err(malformed(
                    origin,
                    format!("form request '{key}' has no object 'requestedSchema'"),
                ));
            };
            Ok(ElicitationRequest::Form(form_request(
                key,
                message,
                schema.clone(),
                meta,
                task,
                origin,
            )))
        }
        Some("url") => {
            let Some(Value::String(url)) = params.get("url") else {
                return Err(malformed(
                    origin,
                    format!("url request '{key}' has no string 'url'"),
                ));
            };
            let elicitation_id = params
                .get("elicitationId")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_owned);
            Ok(ElicitationRequest::Url(url_request(
                key,
                message,
                url.clone(),
                elicitation_id,
                meta,
                task,
                origin,
            )))
        }
        Some(other) => Err(malformed(
            origin,
            format!("request '{key}' has unknown mode '{other}'"),
        )),
    }
}

fn form_request(
    key: &str,
    message: String,
    requested_schema: Map<String, Value>,
    meta: Option<Map<String, Value>>,
    task: Option<Map<String, Value>>,
    origin: &Origin,
) -> FormElicitationRequest {
    let mut request = FormElicitationRequest::new(key, message, requested_schema).with_operation(
        origin.server.clone(),
        origin.kind,
        origin.name.clone(),
    );
    if let Some(meta) = meta {
        request = request.with_meta(meta);
    }
    if let Some(task) = task {
        request = request.with_task(task);
    }
    request
}

fn url_request(
    key: &str,
    message: String,
    url: String,
    elicitation_id: Option<String>,
    meta: Option<Map<String, Value>>,
    task: Option<Map<String, Value>>,
    origin: &Origin,
) -> UrlElicitationRequest {
    let mut request = UrlElicitationRequest::new(key, message, url).with_operation(
        origin.server.clone(),
        origin.kind,
        origin.name.clone(),
    );
    if let Some(id) = elicitation_id {
        request = request.with_elicitation_id(id);
    }
    if let Some(meta) = meta {
        request = request.with_meta(meta);
    }
    if let Some(task) = task {
        request = request.with_task(task);
    }
    request
}

/// Decode an `inputRequests` map (of an `input_required` result, or of a task waiting for
/// input): every entry an `elicitation/create`, within the round's bounds.
pub(crate) fn input_requests(
    value: Option<&Value>,
    origin: &Origin,
) -> Result<BTreeMap<String, ElicitationRequest>> {
    let mut requests = BTreeMap::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            origin
                .limits
                .check_request_count(map.len())
                .map_err(|e| over_limit(origin, e))?;
            for (key, entry) in map {
                if key.is_empty() {
                    return Err(malformed(origin, "an input request has an empty key"));
                }
                let method = entry.get("method").and_then(Value::as_str);
                if method != Some("elicitation/create") {
                    return Err(malformed(
                        origin,
                        format!("request '{key}' has method {method:?}; only elicitation/create is declared"),
                    )
                    .with_detail("request_key", key.clone()));
                }
                let params = entry.get("params").cloned().unwrap_or(Value::Null);
                requests.insert(key.clone(), elicitation_request(key, &params, origin)?);
            }
        }
        Some(_) => return Err(malformed(origin, "'inputRequests' is not an object")),
    }
    Ok(requests)
}

/// The opaque `requestState` of a result (or of a task), within the request bound: it is
/// stored with the round and echoed.
pub(crate) fn request_state(
    object: &Map<String, Value>,
    origin: &Origin,
) -> Result<Option<String>> {
    let request_state = match object.get("requestState") {
        None | Some(Value::Null) => None,
        Some(Value::String(state)) => Some(state.clone()),
        Some(_) => return Err(malformed(origin, "'requestState' is not a string")),
    };
    if let Some(state) = &request_state
        && state.len() > origin.limits.max_request_bytes()
    {
        return Err(over_limit(
            origin,
            LimitExceeded::bytes(
                m3_types::Limit::RequestBytes,
                origin.limits.max_request_bytes(),
                state.len(),
                "the requestState",
            ),
        ));
    }
    Ok(request_state)
}

/// Decode an `input_required` result object.
fn input_required(object: &Map<String, Value>, origin: &Origin) -> Result<Answer> {
    let request_state = request_state(object, origin)?;
    let requests = input_requests(object.get("inputRequests"), origin)?;
    if requests.is_empty() && request_state.is_none() {
        return Err(malformed(
            origin,
            "neither inputRequests nor requestState is present",
        ));
    }
    Ok(Answer::InputRequired {
        requests,
        request_state,
    })
}

/// Classify the JSON result of one wire attempt.
pub fn classify(result: Value, origin: &Origin) -> Result<Answer> {
    let Value::Object(object) = result else {
        return Err(Error::protocol(format!(
            "MCP server '{}' returned a non-object result",
            origin.server
        ))
        .with_detail("server", origin.server.clone()));
    };
    // Nothing deeper than the bound reaches a trace or a round: every stored row reads back.
    check_map_depth(&object, "the server's result").map_err(|e| over_limit(origin, e))?;
    match object.get("resultType").and_then(Value::as_str) {
        Some("input_required") => return input_required(&object, origin),
        None | Some("complete") => {}
        Some(other) => {
            return Err(Error::protocol(format!(
                "MCP server '{}' returned unknown resultType '{other}'",
                origin.server
            ))
            .with_detail("server", origin.server.clone()));
        }
    }
    let expected = match origin.kind {
        OperationKind::Tool => ["content", "structuredContent", "isError"]
            .iter()
            .any(|k| object.contains_key(*k)),
        OperationKind::Prompt => matches!(object.get("messages"), Some(Value::Array(_))),
        OperationKind::Resource => matches!(object.get("contents"), Some(Value::Array(_))),
    };
    if !expected {
        return Err(Error::protocol(format!(
            "MCP server '{}' returned a result that is not a {} result",
            origin.server,
            origin.kind.as_str()
        ))
        .with_detail("server", origin.server.clone()));
    }
    let is_error = object
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(Answer::Complete {
        result: Value::Object(object),
        is_error,
    })
}

/// The wire `ElicitResult` for one response.
pub(crate) fn response_json(response: &ElicitationResponse) -> Value {
    let mut out = Map::new();
    out.insert("action".to_owned(), json!(response.action.as_str()));
    if let Some(content) = &response.content {
        out.insert("content".to_owned(), Value::Object(content.clone()));
    }
    if let Some(meta) = &response.meta {
        out.insert("_meta".to_owned(), Value::Object(meta.clone()));
    }
    Value::Object(out)
}

/// Whether a JSON-RPC error says the server could not send a server-to-client request
/// (the MCP Python SDK's `ctx.elicit` in the 2026-07-28 era: -32600 "Cannot send
/// 'elicitation/create': this transport context has no back-channel ...").
fn lacks_back_channel(data: &rmcp::model::ErrorData) -> bool {
    let message = data.message.to_ascii_lowercase();
    message.contains("back-channel")
        || message.contains("back channel")
        || (message.contains("elicitation/create") && message.contains("cannot"))
}

/// Map an rmcp service error of a 2026-07-28 attempt: as [`service_error`], except that
/// a server refusing for lack of a back-channel is told apart (reason
/// `needs_handshake_era`), with the negotiated era and how to pin another.
pub(crate) fn modern_service_error(error: ServiceError, origin: &Origin) -> Error {
    let ServiceError::McpError(data) = &error else {
        return service_error(error, origin);
    };
    if !lacks_back_channel(data) {
        return service_error(error, origin);
    }
    let server = &origin.server;
    Error::protocol(format!(
        "MCP server '{server}' refused {} '{}': {} (error {}). This connection negotiated \
         the 2026-07-28 era, where a server asks for input in its result; this server asks \
         with a server-to-client elicitation/create, which only the handshake eras allow: \
         pin it with --server-era {server}=2025-11-25 (\"era\": \"2025-11-25\" in the binding)",
        method(origin.kind),
        origin.name,
        data.message,
        data.code.0,
    ))
    .with_reason(Reason::NeedsHandshakeEra)
    .with_detail("server", server.clone())
    .with_detail("jsonrpc_code", data.code.0)
    .with_detail("negotiated_era", ProtocolEra::MODERN_VERSION)
    .with_detail("suggested_era", ServerEra::V2025_11_25.as_str())
}

/// Map an rmcp service error; `fault` is the connection fault if one is recorded.
pub(crate) fn service_error(error: ServiceError, origin: &Origin) -> Error {
    let server = origin.server.clone();
    match error {
        ServiceError::McpError(data) => {
            let mut error = Error::protocol(format!(
                "MCP server '{}' answered {} '{}' with error {}: {}",
                origin.server,
                method(origin.kind),
                origin.name,
                data.code.0,
                data.message
            ))
            .with_detail("server", server)
            .with_detail("jsonrpc_code", data.code.0);
            if let Some(data) = data.data {
                error = error.with_detail("jsonrpc_data", data);
            }
            error
        }
        ServiceError::Timeout { timeout } => Error::timeout(format!(
            "MCP server '{}' did not answer within {} ms",
            origin.server,
            timeout.as_millis()
        ))
        .with_detail("server", server),
        ServiceError::UnexpectedResponse => Error::protocol(format!(
            "MCP server '{}' sent an unexpected response",
            origin.server
        ))
        .with_detail("server", server),
        other => Error::transport(format!(
            "MCP connection to '{}' failed: {other}",
            origin.server
        ))
        .with_detail("server", server),
    }
}

/// The JSON-RPC method of an operation kind.
pub(crate) fn method(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::Tool => "tools/call",
        OperationKind::Prompt => "prompts/get",
        OperationKind::Resource => "resources/read",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(kind: OperationKind) -> Origin {
        Origin {
            server: "s".into(),
            kind,
            name: "op".into(),
            secrets: Secrets::default(),
            limits: RoundLimits::new(),
        }
    }

    #[test]
    fn input_required_keeps_keys_state_and_raw_schema() {
        let reply = json!({
            "resultType": "input_required",
            "requestState": "  opaque\u{e9}state ",
            "inputRequests": {
                "a": {"method": "elicitation/create", "params": {"message": "m", "requestedSchema":
                    {"type": "object", "properties": {"x": {"type": "object", "properties": {}}}}}},
                "b": {"method": "elicitation/create", "params": {"mode": "url", "message": "go", "url": "https://x.test", "elicitationId": ""}}
            }
        });
        let Answer::InputRequired {
            requests,
            request_state,
        } = classify(reply, &origin(OperationKind::Tool)).unwrap()
        else {
            panic!("expected input_required")
        };
        assert_eq!(request_state.as_deref(), Some("  opaque\u{e9}state "));
        assert_eq!(requests.keys().collect::<Vec<_>>(), ["a", "b"]);
        let ElicitationRequest::Form(form) = &requests["a"] else {
            panic!("form")
        };
        assert_eq!(
            form.requested_schema["properties"]["x"]["type"],
            json!("object")
        );
        assert_eq!(form.operation_kind, Some(OperationKind::Tool));
        let ElicitationRequest::Url(url) = &requests["b"] else {
            panic!("url")
        };
        assert_eq!(url.elicitation_id, None);
    }

    #[test]
    fn malformed_replies_are_protocol_errors() {
        let cases = [
            json!({"resultType": "input_required"}),
            json!({"resultType": "input_required", "inputRequests": {}}),
            json!({"resultType": "input_required", "requestState": 7}),
            json!({"resultType": "input_required", "inputRequests": []}),
            json!({"resultType": "input_required", "inputRequests": {"k": {"method": "roots/list"}}}),
            json!({"resultType": "input_required", "inputRequests": {"k": {"method": "elicitation/create", "params": {"message": "m"}}}}),
            json!({"resultType": "input_required", "inputRequests": {"k": {"method": "elicitation/create", "params": {"mode": "url", "message": "m"}}}}),
            json!({"resultType": "input_required", "inputRequests": {"k": {"method": "elicitation/create", "params": {"mode": "sms", "message": "m"}}}}),
            json!({"resultType": "task"}),
            json!({"unrelated": true}),
            json!("not an object"),
        ];
        for case in cases {
            let error = classify(case.clone(), &origin(OperationKind::Tool)).unwrap_err();
            assert_eq!(error.code(), "protocol_error", "{case}");
        }
    }

    #[test]
    fn complete_results_by_kind() {
        let tool = classify(
            json!({"content": [], "isError": true}),
            &origin(OperationKind::Tool),
        )
        .unwrap();
        assert!(matches!(tool, Answer::Complete { is_error: true, .. }));
        let prompt = classify(
            json!({"messages": [], "resultType": "complete"}),
            &origin(OperationKind::Prompt),
        )
        .unwrap();
        assert!(matches!(
            prompt,
            Answer::Complete {
                is_error: false,
                ..
            }
        ));
        assert!(classify(json!({"messages": []}), &origin(OperationKind::Resource)).is_err());
    }

    #[test]
    fn responses_serialize_as_elicit_results() {
        let mut content = Map::new();
        content.insert("name".into(), json!("Ada"));
        assert_eq!(
            response_json(&ElicitationResponse::accept(content)),
            json!({"action": "accept", "content": {"name": "Ada"}})
        );
        assert_eq!(
            response_json(&ElicitationResponse::decline()),
            json!({"action": "decline"})
        );
        assert_eq!(
            response_json(&ElicitationResponse::accept_url()),
            json!({"action": "accept"})
        );
    }

    #[test]
    fn a_request_carrying_a_resolved_header_value_is_refused() {
        let params = json!({"message": "Confirm", "requestedSchema": {"type": "object",
            "properties": {"t": {"type": "string", "default": "Bearer tok-123"}}}});
        let mut guarded = origin(OperationKind::Tool);
        guarded.secrets = Secrets::new(&["tok-123".to_owned(), String::new()]);
        let error = elicitation_request("q", &params, &guarded).unwrap_err();
        assert_eq!(error.code(), "protocol_error");
        assert_eq!(error.details()["reason"], "request_carries_header_secret");
        assert!(!error.to_string().contains("tok-123"), "{error}");
        assert!(!format!("{guarded:?}").contains("tok-123"));
        let in_key = json!({"message": "m", "requestedSchema": {"properties": {"tok-123": {}}}});
        assert!(elicitation_request("q", &in_key, &guarded).is_err());
        assert!(elicitation_request("q", &params, &origin(OperationKind::Tool)).is_ok());
    }
}
