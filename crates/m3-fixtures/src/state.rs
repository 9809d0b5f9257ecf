//! Integrity-protected `requestState` (2026-07-28 era).
//!
//! The state is sealed with HMAC-SHA256 (rmcp's `RequestStateCodec`). The sealed payload holds
//! the round number, the operation id and the answers of the earlier rounds; the operation kind,
//! name and canonical arguments are bound as associated data, so a state is accepted only for
//! the very operation and arguments it was issued for, and only by the server that holds the key.

use std::collections::BTreeMap;

use rmcp::{
    ErrorData,
    model::{RequestStateCodec, SealOptions},
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::FixtureError;

/// The message of the `-32602` error for a tampered, foreign or malformed state.
pub(crate) const INVALID_STATE_MESSAGE: &str = "Invalid or expired requestState";

/// What one operation carries from round to round.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct StatePayload {
    /// How many rounds were asked so far (the round the retry answers is `round - 1`).
    pub(crate) round: usize,
    /// The server-chosen id of the operation (used in URLs).
    pub(crate) operation_id: String,
    /// The answers of the rounds before the current one, keyed by request key.
    pub(crate) answers: Vec<BTreeMap<String, Value>>,
}

/// Identifies an operation for the HMAC: kind, name (or uri) and canonical arguments.
#[derive(Debug, Clone)]
pub(crate) struct OperationKey {
    kind: &'static str,
    name: String,
    arguments: Value,
}

impl OperationKey {
    pub(crate) fn new(kind: &'static str, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            kind,
            name: name.into(),
            arguments,
        }
    }

    fn associated_data(&self) -> Vec<u8> {
        let mut text = String::new();
        text.push_str(self.kind);
        text.push('\n');
        text.push_str(&self.name);
        text.push('\n');
        write_canonical(&self.arguments, &mut text);
        text.into_bytes()
    }
}

/// Writes `value` as compact JSON with object keys sorted, so the same arguments always give
/// the same bytes whatever order the client sent them in.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            out.push('{');
            for (index, (key, item)) in sorted.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Seals and opens [`StatePayload`]s with one server's key.
#[derive(Debug, Clone)]
pub(crate) struct StateSealer {
    codec: RequestStateCodec,
}

impl StateSealer {
    /// A sealer with `key` (at least 32 bytes) or, for `None`, 32 random bytes.
    pub(crate) fn new(key: Option<&[u8]>) -> Result<Self, FixtureError> {
        let codec = match key {
            Some(key) => RequestStateCodec::try_new(key),
            None => {
                let mut random = [0_u8; 32];
                getrandom::fill(&mut random).map_err(|error| {
                    FixtureError::InvalidArgument(format!("no random state key: {error}"))
                })?;
                RequestStateCodec::try_new(random.as_slice())
            }
        }
        .map_err(|error| FixtureError::InvalidArgument(error.to_string()))?;
        Ok(Self { codec })
    }

    /// Seals `payload` for `operation`.
    pub(crate) fn seal(
        &self,
        operation: &OperationKey,
        payload: &StatePayload,
    ) -> Result<String, ErrorData> {
        let bytes = serde_json::to_vec(payload).map_err(|error| {
            ErrorData::internal_error(format!("cannot encode requestState: {error}"), None)
        })?;
        let associated = operation.associated_data();
        Ok(self
            .codec
            .seal_with(&bytes, &SealOptions::new().associated_data(&associated)))
    }

    /// Opens a state echoed by the client for `operation`.
    ///
    /// # Errors
    /// `-32602` "Invalid or expired requestState" when the state was altered, was sealed by
    /// another key or for another operation or arguments, or does not decode.
    pub(crate) fn open(
        &self,
        operation: &OperationKey,
        sealed: &str,
    ) -> Result<StatePayload, ErrorData> {
        let associated = operation.associated_data();
        let bytes = self.codec.open_with(sealed, &associated).map_err(|error| {
            tracing::info!(%error, "rejected requestState");
            ErrorData::invalid_params(INVALID_STATE_MESSAGE, None)
        })?;
        serde_json::from_slice(&bytes)
            .map_err(|_| ErrorData::invalid_params(INVALID_STATE_MESSAGE, None))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn payload() -> StatePayload {
        StatePayload {
            round: 1,
            operation_id: "op-1".into(),
            answers: vec![],
        }
    }

    #[test]
    fn a_state_opens_for_the_same_operation_whatever_the_key_order() {
        let sealer = StateSealer::new(Some(KEY)).unwrap();
        let issued = OperationKey::new(
            "tool",
            "book",
            json!({"a": 1, "b": [true, {"y": 2, "x": 1}]}),
        );
        let echoed = OperationKey::new(
            "tool",
            "book",
            json!({"b": [true, {"x": 1, "y": 2}], "a": 1}),
        );
        let sealed = sealer.seal(&issued, &payload()).unwrap();
        assert_eq!(sealer.open(&echoed, &sealed).unwrap(), payload());
    }

    #[test]
    fn other_arguments_another_operation_or_another_key_are_rejected() {
        let sealer = StateSealer::new(Some(KEY)).unwrap();
        let operation = OperationKey::new("tool", "book", json!({"weight_kg": 2.0}));
        let sealed = sealer.seal(&operation, &payload()).unwrap();
        let other_args = OperationKey::new("tool", "book", json!({"weight_kg": 3.0}));
        let other_name = OperationKey::new("tool", "quote", json!({"weight_kg": 2.0}));
        let other_kind = OperationKey::new("prompt", "book", json!({"weight_kg": 2.0}));
        for key in [other_args, other_name, other_kind] {
            let error = sealer.open(&key, &sealed).unwrap_err();
            assert_eq!(error.code.0, -32602);
        }
        let foreign = StateSealer::new(None).unwrap();
        assert_eq!(
            foreign.open(&operation, &sealed).unwrap_err().code.0,
            -32602
        );
        let mut tampered = sealed.clone();
        tampered.push('A');
        assert_eq!(
            sealer.open(&operation, &tampered).unwrap_err().code.0,
            -32602
        );
    }

    #[test]
    fn a_short_key_is_refused() {
        let error = StateSealer::new(Some(b"short")).unwrap_err();
        assert_eq!(error.code(), "invalid_argument");
    }
}
