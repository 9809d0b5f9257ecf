//! Helpers for the managed-input store tests: sample rounds and the Python interop peer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use m3_types::{
    ElicitationRequest, ElicitationResponse, FormElicitationRequest, OperationKind,
    PendingElicitationRound, ResponseMap,
};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

/// The address form schema used by every store test (the Python bench's).
pub fn address_schema() -> Map<String, Value> {
    match json!({
        "type": "object",
        "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        "required": ["street", "city"]
    }) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A one-request (`shipping_address`) pending round created at `created_at`.
pub fn address_round(
    execution_id: &str,
    round_id: &str,
    created_at: OffsetDateTime,
) -> PendingElicitationRound {
    let request = FormElicitationRequest::new(
        "shipping_address",
        "Enter the delivery address.",
        address_schema(),
    );
    PendingElicitationRound {
        round_id: round_id.to_owned(),
        execution_id: execution_id.to_owned(),
        logical_operation_id: "tool-call-1".to_owned(),
        server: "shipping".to_owned(),
        operation_kind: OperationKind::Tool,
        operation_name: "book_shipment".to_owned(),
        request_state: Some("opaque".to_owned()),
        requests: BTreeMap::from([(
            "shipping_address".to_owned(),
            ElicitationRequest::Form(request),
        )]),
        created_at,
        deadline: None,
    }
}

/// An `accept` response for the address form.
pub fn address_response(street: &str) -> ResponseMap {
    let content = match json!({"street": street, "city": "Pune"}) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    BTreeMap::from([(
        "shipping_address".to_owned(),
        ElicitationResponse::accept(content),
    )])
}

/// The Python with sf-m3 0.3.1: `$M3_TEST_PYTHON`, else the venv scripts/test.sh installs.
pub fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("M3_TEST_PYTHON") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/m3-rs/tools/venv/bin/python")
}

/// Runs `tests/peers/m3_store_peer.py` with `args` and parses its JSON output.
///
/// # Errors
/// A message with the peer's stderr when it cannot start, fails or prints no JSON.
pub fn store_peer(args: &[&str]) -> Result<Value, String> {
    let python = python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/m3_store_peer.py");
    let output = Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .map_err(|e| {
            format!(
                "cannot run {} (set M3_TEST_PYTHON or run scripts/test.sh): {e}",
                python.display()
            )
        })?;
    if !output.status.success() {
        return Err(format!(
            "python peer {args:?} failed with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "python peer printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// Rewrites every string that is a timestamp into m3-rs's fixed-width UTC form, so records
/// serialized by Python (`...Z`, no microseconds) and by m3-rs compare equal.
pub fn normalize_timestamps(value: Value) -> Value {
    match value {
        Value::String(text) => match m3_types::timestamp::parse(&text) {
            Ok(t) if text.len() >= 20 && text.as_bytes().get(10) == Some(&b'T') => {
                Value::String(m3_types::timestamp::format(t))
            }
            _ => Value::String(text),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(normalize_timestamps).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, normalize_timestamps(v)))
                .collect(),
        ),
        other => other,
    }
}
