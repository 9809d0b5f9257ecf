//! What a person answering a round is shown about what it decides: the operation's
//! arguments and, where the harness has one, the agent's prompt, both redacted.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::redact::{redact_with, secret_values};

/// The context of a round (stored with it, shown above its form, printed by `m3 pending`,
/// returned by the API). Built only through [`RoundContext::redacted`], so it never holds
/// a secret-named value: the same rules as every other projection
/// ([`redact`](crate::redact::redact)), and a secret argument's value repeated in the
/// prompt is replaced there too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct RoundContext {
    /// The operation's arguments (a tool call's `arguments`), in the order given, with
    /// secret-named values replaced by `"[REDACTED]"`.
    #[serde(default)]
    pub arguments: Map<String, Value>,
    /// The prompt the agent was given, when the harness has one (redacted likewise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

impl RoundContext {
    /// The redacted context of an operation called with `arguments` by an agent given
    /// `prompt` (an empty prompt is none).
    pub fn redacted(arguments: &Map<String, Value>, prompt: Option<&str>) -> Self {
        let arguments = Value::Object(arguments.clone());
        let secrets = secret_values(&arguments);
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let arguments = match redact_with(&arguments, &secrets) {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let prompt = prompt.filter(|p| !p.is_empty()).map(|p| {
            match redact_with(&Value::String(p.to_owned()), &secrets) {
                Value::String(text) => text,
                _ => String::new(),
            }
        });
        Self { arguments, prompt }
    }

    /// Whether there is nothing to show (no arguments, no prompt).
    pub fn is_empty(&self) -> bool {
        self.arguments.is_empty() && self.prompt.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_named_arguments_and_their_echoes_are_redacted_in_order() {
        let Value::Object(arguments) = json!({"weight_kg": 2, "api_key": "sk-live-12345",
            "to": {"city": "Pune", "password": "hunter22"}})
        else {
            unreachable!()
        };
        let context =
            RoundContext::redacted(&arguments, Some("Ship it with key sk-live-12345, please."));
        assert_eq!(
            Value::Object(context.arguments.clone()),
            json!({"weight_kg": 2, "api_key": "[REDACTED]",
                   "to": {"city": "Pune", "password": "[REDACTED]"}})
        );
        let keys: Vec<&String> = context.arguments.keys().collect();
        assert_eq!(keys, ["weight_kg", "api_key", "to"]);
        assert_eq!(
            context.prompt.as_deref(),
            Some("Ship it with key [REDACTED], please.")
        );
        assert!(RoundContext::redacted(&Map::new(), Some("")).is_empty());
    }
}
