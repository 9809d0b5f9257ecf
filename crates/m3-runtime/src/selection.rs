//! Agent selections: which harness runs an execution, and with what.
//!
//! Selections deserialize from the seed's JSON form:
//! `{"harness": "scripted", "script": {"steps": [...]}}` or
//! `{"harness": "codex", "models": ["..."]}`.

use m3_types::{Error, Result, ToolName};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which harness runs an execution.
///
/// ```
/// use m3_runtime::AgentSelection;
/// let selection: AgentSelection = serde_json::from_str(
///     r#"{"harness": "scripted", "script": {"steps": [{"say": "hello"}]}}"#,
/// )?;
/// assert_eq!(selection.harness_name(), "scripted");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "harness", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentSelection {
    /// The built-in deterministic agent (no model, no network).
    Scripted(ScriptedSelection),
    /// Codex app-server (recognised; not available yet).
    Codex(CodexSelection),
}

impl AgentSelection {
    /// A scripted selection running `script`.
    pub fn scripted(script: Script) -> Self {
        Self::Scripted(ScriptedSelection { script })
    }

    /// The harness name as written in JSON (`"scripted"`, `"codex"`).
    pub fn harness_name(&self) -> &'static str {
        match self {
            Self::Scripted(_) => "scripted",
            Self::Codex(_) => "codex",
        }
    }

    /// Checks that the selection can run in this build.
    ///
    /// # Errors
    /// `invalid_argument` ("harness 'codex' is not available yet") for a harness that
    /// is recognised but not implemented; `invalid_argument` for a malformed script
    /// step target.
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Scripted(selection) => selection.script.validate(),
            Self::Codex(_) => Err(Error::model_validation(
                "harness 'codex' is not available yet; use {\"harness\": \"scripted\", ...}",
            )
            .with_detail("harness", "codex")
            .with_detail("reason", "harness_not_available")),
        }
    }
}

/// The scripted harness's selection: the script it follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ScriptedSelection {
    /// The steps to run, in order.
    pub script: Script,
}

/// The Codex harness's selection (recognised so that the seed's JSON parses; the
/// harness itself is not available yet).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct CodexSelection {
    /// Models to try, in order.
    pub models: Vec<String>,
    /// Path of the `codex` executable (default: found on `PATH`).
    #[serde(default)]
    pub executable: Option<String>,
    /// Allow a Codex version that M3 has not been tested with.
    #[serde(default)]
    pub allow_untested_version: bool,
}

/// A deterministic agent script.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct Script {
    /// The steps, run in order; the first error ends the script.
    pub steps: Vec<ScriptStep>,
}

impl Script {
    /// A script of `steps`.
    pub fn new(steps: Vec<ScriptStep>) -> Self {
        Self { steps }
    }

    /// A one-step script calling `target` (`"server:tool"`) with `arguments`.
    pub fn call(target: &str, arguments: Map<String, Value>) -> Self {
        Self::new(vec![ScriptStep::Call {
            call: target.to_owned(),
            arguments: Some(arguments),
        }])
    }

    /// Appends a step.
    #[must_use]
    pub fn then(mut self, step: ScriptStep) -> Self {
        self.steps.push(step);
        self
    }

    /// Checks every step's target.
    ///
    /// # Errors
    /// `invalid_argument` naming the step.
    pub fn validate(&self) -> Result<()> {
        for (index, step) in self.steps.iter().enumerate() {
            step.target()
                .map_err(|e| e.with_detail("step", index as u64))?;
        }
        Ok(())
    }
}

/// One step of a [`Script`] (CLI.md's script JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ScriptStep {
    /// `{"call": "server:tool", "arguments": {...}}`: call a tool.
    Call {
        /// `server:tool`.
        call: String,
        /// Tool arguments (default `{}`).
        #[serde(default)]
        arguments: Option<Map<String, Value>>,
    },
    /// `{"prompt": "server:name", "arguments": {...}}`: get a prompt.
    Prompt {
        /// `server:name`.
        prompt: String,
        /// Prompt arguments (default `{}`).
        #[serde(default)]
        arguments: Option<Map<String, Value>>,
    },
    /// `{"read": "server:uri"}`: read a resource.
    Read {
        /// `server:uri` (split at the first `:`).
        read: String,
    },
    /// `{"say": "text"}`: add text to the agent's answer.
    Say {
        /// The text.
        say: String,
    },
}

/// A parsed step target: the server binding and the operation name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepTarget {
    pub(crate) server: String,
    pub(crate) name: String,
}

impl ScriptStep {
    pub(crate) fn target(&self) -> Result<Option<StepTarget>> {
        let text = match self {
            Self::Call { call, .. } => {
                let name: ToolName = call.parse()?;
                return Ok(Some(StepTarget {
                    server: name.server,
                    name: name.tool,
                }));
            }
            Self::Prompt { prompt, .. } => prompt,
            Self::Read { read } => read,
            Self::Say { .. } => return Ok(None),
        };
        match text.split_once(':') {
            Some((server, name)) if !server.is_empty() && !name.is_empty() => {
                Ok(Some(StepTarget {
                    server: server.to_owned(),
                    name: name.to_owned(),
                }))
            }
            _ => Err(Error::model_validation(format!(
                "script step target must be 'server:name', got '{text}'"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_json_forms_parse() {
        let scripted: AgentSelection = serde_json::from_value(serde_json::json!({
            "harness": "scripted",
            "script": {"steps": [
                {"call": "shipping:book_shipment", "arguments": {"weight_kg": 2}},
                {"prompt": "shipping:shipping_label"},
                {"read": "shipping:shipping://quote/latest"},
                {"say": "done"}
            ]}
        }))
        .unwrap();
        scripted.validate().unwrap();
        let AgentSelection::Scripted(s) = &scripted else {
            panic!("not scripted")
        };
        assert_eq!(s.script.steps.len(), 4);
        let read = s.script.steps[2].target().unwrap().unwrap();
        assert_eq!(
            read,
            StepTarget {
                server: "shipping".into(),
                name: "shipping://quote/latest".into()
            }
        );

        let codex: AgentSelection =
            serde_json::from_value(serde_json::json!({"harness": "codex", "models": ["gpt-x"]}))
                .unwrap();
        let err = codex.validate().unwrap_err();
        assert_eq!(err.code(), "invalid_argument");
        assert!(err.message().contains("not available yet"), "{err}");
    }

    #[test]
    fn unknown_harness_and_bad_targets_are_rejected() {
        assert!(serde_json::from_str::<AgentSelection>(r#"{"harness": "pi"}"#).is_err());
        let bad = AgentSelection::scripted(Script::new(vec![ScriptStep::Prompt {
            prompt: "no-colon".into(),
            arguments: None,
        }]));
        assert_eq!(bad.validate().unwrap_err().code(), "invalid_argument");
    }
}
