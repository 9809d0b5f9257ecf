//! The provider's script: which model it claims to be and what it answers, step by step.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::FixtureError;

/// The model name a script has when its JSON names none.
pub const DEFAULT_PROVIDER_MODEL: &str = "m3-example-model";

/// The text answered past the end of a script whose last step is a tool call.
pub const SCRIPT_EXHAUSTED_TEXT: &str = "script exhausted";

/// What the deterministic provider answers, one step per model request.
///
/// JSON form (`model` is optional and defaults to [`DEFAULT_PROVIDER_MODEL`]):
///
/// ```json
/// {"model": "m3-example-model",
///  "steps": [
///    {"call": "shipping:book_shipment", "arguments": {"weight_kg": 2}},
///    {"text": "Shipment booked."}
///  ]}
/// ```
///
/// The step answering a request is the number of `function_call_output` items in the
/// request's `input`, so a retried or re-sent request gets the same answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderScript {
    /// The model id listed by `GET /v1/models`.
    #[serde(default = "default_model")]
    pub model: String,
    /// The answers, in order (at least one).
    pub steps: Vec<ProviderStep>,
}

fn default_model() -> String {
    DEFAULT_PROVIDER_MODEL.to_owned()
}

/// One answer of the provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawStep", into = "RawStep")]
pub enum ProviderStep {
    /// Call the MCP tool `tool` of server `server` (JSON: `{"call": "server:tool", "arguments": {..}}`).
    Call {
        /// The MCP server name as configured in the agent (not yet sanitised).
        server: String,
        /// The bare tool name.
        tool: String,
        /// The tool arguments (JSON: optional, default `{}`).
        arguments: Map<String, Value>,
    },
    /// Call one of Codex's own tools, such as `exec_command` (JSON:
    /// `{"builtin": "exec_command", "arguments": {"cmd": "..."}}`): a function call
    /// without a namespace, for testing how native approvals are answered.
    Builtin {
        /// The built-in function name.
        name: String,
        /// Its arguments (JSON: optional, default `{}`).
        arguments: Map<String, Value>,
    },
    /// Answer with an assistant message (JSON: `{"text": "..."}`).
    Text {
        /// The message text.
        text: String,
    },
}

/// The JSON shape of a step, before validation.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    call: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    builtin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
}

fn object_arguments(what: &str, arguments: Option<Value>) -> Result<Map<String, Value>, String> {
    match arguments {
        None => Ok(Map::new()),
        Some(Value::Object(arguments)) => Ok(arguments),
        Some(_) => Err(format!("the arguments of {what:?} are not an object")),
    }
}

impl TryFrom<RawStep> for ProviderStep {
    type Error = String;

    fn try_from(raw: RawStep) -> Result<Self, Self::Error> {
        match (raw.call, raw.builtin, raw.text) {
            (Some(call), None, None) => {
                let Some((server, tool)) = call.split_once(':') else {
                    return Err(format!("call {call:?} is not SERVER:TOOL"));
                };
                if server.is_empty() || tool.is_empty() {
                    return Err(format!("call {call:?} is not SERVER:TOOL"));
                }
                Ok(ProviderStep::Call {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    arguments: object_arguments(&call, raw.arguments)?,
                })
            }
            (None, Some(name), None) if !name.is_empty() => Ok(ProviderStep::Builtin {
                arguments: object_arguments(&name, raw.arguments)?,
                name,
            }),
            (None, Some(_), None) => Err("a builtin step needs a function name".to_owned()),
            (None, None, Some(text)) => match raw.arguments {
                None => Ok(ProviderStep::Text { text }),
                Some(_) => Err("a text step has no arguments".to_owned()),
            },
            (None, None, None) => Err("a step needs call, builtin or text".to_owned()),
            _ => Err("a step has exactly one of call, builtin or text".to_owned()),
        }
    }
}

impl From<ProviderStep> for RawStep {
    fn from(step: ProviderStep) -> Self {
        match step {
            ProviderStep::Call {
                server,
                tool,
                arguments,
            } => RawStep {
                call: Some(format!("{server}:{tool}")),
                builtin: None,
                arguments: Some(Value::Object(arguments)),
                text: None,
            },
            ProviderStep::Builtin { name, arguments } => RawStep {
                call: None,
                builtin: Some(name),
                arguments: Some(Value::Object(arguments)),
                text: None,
            },
            ProviderStep::Text { text } => RawStep {
                call: None,
                builtin: None,
                arguments: None,
                text: Some(text),
            },
        }
    }
}

impl ProviderScript {
    /// Parses and checks a script.
    ///
    /// # Errors
    ///
    /// `invalid_argument` when the text is not JSON, has unknown fields, has no steps, or a
    /// step is neither a `call` of `SERVER:TOOL` (with object `arguments`) nor a `text`.
    pub fn from_json(text: &str) -> Result<Self, FixtureError> {
        let script: ProviderScript = serde_json::from_str(text)
            .map_err(|error| FixtureError::InvalidArgument(format!("provider script: {error}")))?;
        script.check()?;
        Ok(script)
    }

    /// Checks what serde cannot: at least one step and a non-empty model name.
    ///
    /// # Errors
    ///
    /// `invalid_argument` when `steps` is empty or `model` is blank.
    pub fn check(&self) -> Result<(), FixtureError> {
        if self.steps.is_empty() {
            return Err(FixtureError::InvalidArgument(
                "provider script: steps must not be empty".to_owned(),
            ));
        }
        if self.model.trim().is_empty() {
            return Err(FixtureError::InvalidArgument(
                "provider script: model must not be empty".to_owned(),
            ));
        }
        Ok(())
    }

    /// The step answering a request whose `input` holds `outputs` `function_call_output`
    /// items: step `outputs`, or past the end the last step if it is text, else the text
    /// [`SCRIPT_EXHAUSTED_TEXT`].
    pub fn step(&self, outputs: usize) -> ProviderStep {
        if let Some(step) = self.steps.get(outputs) {
            return step.clone();
        }
        match self.steps.last() {
            Some(step @ ProviderStep::Text { .. }) => step.clone(),
            _ => ProviderStep::Text {
                text: SCRIPT_EXHAUSTED_TEXT.to_owned(),
            },
        }
    }
}

/// The namespace Codex gives the tools of MCP server `server`: `mcp__` plus the name with
/// every character that is not ASCII alphanumeric replaced by `_` (`m3-ship.v2` ->
/// `mcp__m3_ship_v2`).
pub fn tool_namespace(server: &str) -> String {
    let sanitised: String = server
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("mcp__{sanitised}")
}
