//! Agent selections: which harness runs an execution, and with what.
//!
//! Selections deserialize from M3's documented JSON form:
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
    /// The Codex CLI's app-server, driven over its JSON-RPC protocol.
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
    /// `invalid_argument` for a malformed script step target or an incomplete
    /// codex selection (no model, a provider URL that is not http(s), an empty relay).
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Scripted(selection) => selection.script.validate(),
            Self::Codex(selection) => selection.validate(),
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

/// The Codex harness's selection: `codex app-server` is the agent and the MCP client.
///
/// ```
/// use m3_runtime::AgentSelection;
/// let selection: AgentSelection = serde_json::from_str(
///     r#"{"harness": "codex", "models": ["gpt-5.1-codex"]}"#,
/// )?;
/// assert_eq!(selection.harness_name(), "codex");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CodexSelection {
    /// Models to use; the first one runs the turn.
    pub models: Vec<String>,
    /// Path of the `codex` executable (default: `codex` found on `PATH`).
    #[serde(default)]
    pub executable: Option<String>,
    /// Allow a Codex version M3 has not been tested with
    /// (see [`TESTED_CODEX_VERSIONS`](crate::harness::TESTED_CODEX_VERSIONS)).
    #[serde(default)]
    pub allow_untested_version: bool,
    /// A model provider to use instead of the user's Codex sign-in (for example the
    /// local `m3 example-provider`). Without it, the user's `auth.json` is copied
    /// into the temporary `CODEX_HOME`.
    #[serde(default)]
    pub provider: Option<CodexProvider>,
    /// The MCP protocol era Codex speaks to the servers (default `"2026-07-28"`;
    /// `"legacy"` keeps Codex on `initialize` 2025-06-18). A binding's own
    /// `CODEX_MCP_PROTOCOL_VERSION` environment entry wins for that binding.
    #[serde(default)]
    pub mcp_protocol: CodexMcpProtocol,
    /// The relay command put in front of every server command, as argv
    /// (default: the `m3` executable next to the running program or on `PATH`,
    /// with `mcp-relay`).
    #[serde(default)]
    pub relay: Option<Vec<String>>,
}

impl CodexSelection {
    /// A selection running `model` with every default.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            models: vec![model.into()],
            executable: None,
            allow_untested_version: false,
            provider: None,
            mcp_protocol: CodexMcpProtocol::default(),
            relay: None,
        }
    }

    /// Sets the `codex` executable.
    #[must_use]
    pub fn with_executable(mut self, executable: impl Into<String>) -> Self {
        self.executable = Some(executable.into());
        self
    }

    /// Sets a model provider override.
    #[must_use]
    pub fn with_provider(mut self, provider: CodexProvider) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Sets the MCP protocol era.
    #[must_use]
    pub fn with_mcp_protocol(mut self, protocol: CodexMcpProtocol) -> Self {
        self.mcp_protocol = protocol;
        self
    }

    /// Sets the relay argv (program first).
    #[must_use]
    pub fn with_relay<I, S>(mut self, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.relay = Some(argv.into_iter().map(Into::into).collect());
        self
    }

    /// Allows a Codex version outside the tested ones.
    #[must_use]
    pub fn allowing_untested_version(mut self) -> Self {
        self.allow_untested_version = true;
        self
    }

    fn validate(&self) -> Result<()> {
        match self.models.first() {
            Some(model) if !model.trim().is_empty() => {}
            _ => {
                return Err(Error::model_validation(
                    "codex selection needs a non-empty 'models' list",
                ));
            }
        }
        if let Some(provider) = &self.provider {
            let url = url::Url::parse(&provider.base_url).map_err(|e| {
                Error::model_validation(format!(
                    "codex provider base_url '{}' is not a URL",
                    provider.base_url
                ))
                .with_source(e)
            })?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(Error::model_validation(
                    "codex provider base_url must be http or https",
                ));
            }
        }
        if self.relay.as_ref().is_some_and(|argv| argv.is_empty()) {
            return Err(Error::model_validation(
                "codex relay argv must not be empty",
            ));
        }
        Ok(())
    }
}

/// A model provider for Codex (`[model_providers.m3]` in its `config.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CodexProvider {
    /// Base URL of an OpenAI Responses API (`http://127.0.0.1:PORT/v1`); Codex
    /// posts to `<base_url>/responses`.
    pub base_url: String,
    /// Display name (default `"m3 provider"`).
    #[serde(default)]
    pub name: Option<String>,
}

impl CodexProvider {
    /// A provider at `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            name: None,
        }
    }
}

/// The MCP protocol era Codex uses with the servers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum CodexMcpProtocol {
    /// 2026-07-28 (multi round-trip): Codex's `mcp_2026_07_28` feature plus
    /// `CODEX_MCP_PROTOCOL_VERSION=2026-07-28` for each server.
    #[default]
    #[serde(rename = "2026-07-28")]
    V2026_07_28,
    /// The `initialize` era (2025-06-18): elicitation through `elicitation/create`.
    #[serde(rename = "legacy")]
    Legacy,
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
        codex.validate().unwrap();
        let no_model: AgentSelection =
            serde_json::from_value(serde_json::json!({"harness": "codex", "models": []})).unwrap();
        assert_eq!(no_model.validate().unwrap_err().code(), "invalid_argument");
        let full: AgentSelection = serde_json::from_value(serde_json::json!({
            "harness": "codex", "models": ["m"], "executable": "/opt/codex",
            "provider": {"base_url": "http://127.0.0.1:9/v1"}, "mcp_protocol": "legacy",
            "relay": ["m3", "mcp-relay"], "allow_untested_version": true
        }))
        .unwrap();
        full.validate().unwrap();
        let AgentSelection::Codex(c) = &full else {
            panic!("not codex")
        };
        assert_eq!(c.mcp_protocol, CodexMcpProtocol::Legacy);
        assert!(
            serde_json::from_value::<AgentSelection>(
                serde_json::json!({"harness": "codex", "models": ["m"], "bogus": 1})
            )
            .is_err()
        );
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
