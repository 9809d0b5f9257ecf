//! `m3 run`'s agent flags: `--call SERVER:TOOL [--arguments JSON]`, `--script FILE` or
//! `--agent JSON`, turned into the JSON of an agent selection
//! (`{"harness": "scripted", "script": {...}}` or `{"harness": "codex", ...}`).
//!
//! The selection's own deserializer (in the kit) decides what a valid selection is; this module
//! only assembles the document and checks what the flags themselves promise.

use std::path::Path;

use m3_types::{Error, Result};
use serde_json::{Map, Value, json};

/// Which agent flag was given.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AgentSource {
    /// `--call SERVER:TOOL` with optional `--arguments JSON`.
    Call {
        /// `server:tool`.
        target: String,
        /// The JSON text of `--arguments`.
        arguments: Option<String>,
    },
    /// `--script FILE`.
    Script(std::path::PathBuf),
    /// `--agent JSON`.
    Agent(String),
}

/// The selection document for `source`.
///
/// # Errors
/// `invalid_argument` for malformed JSON, a `--call` target without `server:tool`, non-object
/// arguments, or a script file that cannot be read or has no `steps` array.
pub(crate) fn selection_json(source: &AgentSource) -> Result<Value> {
    match source {
        AgentSource::Call { target, arguments } => {
            check_target(target)?;
            let arguments = match arguments {
                None => Map::new(),
                Some(text) => match parse_json("--arguments", text)? {
                    Value::Object(map) => map,
                    _ => {
                        return Err(Error::model_validation("--arguments must be a JSON object"));
                    }
                },
            };
            Ok(json!({
                "harness": "scripted",
                "script": {"steps": [{"call": target, "arguments": arguments}]}
            }))
        }
        AgentSource::Script(path) => {
            let script = read_script(path)?;
            Ok(json!({"harness": "scripted", "script": script}))
        }
        AgentSource::Agent(text) => {
            let value = parse_json("--agent", text)?;
            if value.get("harness").and_then(Value::as_str).is_none() {
                return Err(Error::model_validation(
                    "--agent must be a JSON object with a \"harness\" field",
                ));
            }
            Ok(value)
        }
    }
}

fn check_target(target: &str) -> Result<()> {
    match target.split_once(':') {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => Ok(()),
        _ => Err(Error::model_validation(format!(
            "--call expects SERVER:TOOL, got '{target}'"
        ))),
    }
}

fn read_script(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        Error::model_validation(format!("cannot read --script {}: {error}", path.display()))
    })?;
    let script = parse_json("--script", &text)?;
    if !script.get("steps").is_some_and(Value::is_array) {
        return Err(Error::model_validation(format!(
            "--script {}: expected {{\"steps\": [...]}}",
            path.display()
        )));
    }
    Ok(script)
}

fn parse_json(flag: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|error| Error::model_validation(format!("{flag} is not valid JSON: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_is_a_one_step_script() {
        let value = selection_json(&AgentSource::Call {
            target: "shipping:book_shipment".into(),
            arguments: Some(r#"{"weight_kg": 2}"#.into()),
        })
        .unwrap();
        assert_eq!(
            value,
            json!({"harness": "scripted", "script": {"steps": [
                {"call": "shipping:book_shipment", "arguments": {"weight_kg": 2}}
            ]}})
        );
    }

    #[test]
    fn script_file_and_agent_json_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script.json");
        std::fs::write(
            &path,
            r#"{"steps": [{"say": "hi"}, {"read": "shipping:x"}]}"#,
        )
        .unwrap();
        let value = selection_json(&AgentSource::Script(path)).unwrap();
        assert_eq!(value["script"]["steps"][0]["say"], "hi");
        let value = selection_json(&AgentSource::Agent(
            r#"{"harness": "codex", "models": ["m"]}"#.into(),
        ))
        .unwrap();
        assert_eq!(value["models"][0], "m");
    }

    #[test]
    fn malformed_flags_are_invalid_argument() {
        let dir = tempfile::tempdir().unwrap();
        let no_steps = dir.path().join("bad.json");
        std::fs::write(&no_steps, r#"{"stairs": []}"#).unwrap();
        let cases = [
            AgentSource::Call {
                target: "book_shipment".into(),
                arguments: None,
            },
            AgentSource::Call {
                target: "shipping:".into(),
                arguments: None,
            },
            AgentSource::Call {
                target: "s:t".into(),
                arguments: Some("[1]".into()),
            },
            AgentSource::Call {
                target: "s:t".into(),
                arguments: Some("{".into()),
            },
            AgentSource::Script(dir.path().join("missing.json")),
            AgentSource::Script(no_steps),
            AgentSource::Agent("{}".into()),
            AgentSource::Agent("nope".into()),
        ];
        for case in cases {
            let error = selection_json(&case).unwrap_err();
            assert_eq!(error.code(), "invalid_argument", "{case:?}");
        }
    }
}
