//! Helpers for the managed-input store tests: the backends a process test runs on, sample
//! rounds and the Python interop peer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use m3_types::{
    ElicitationRequest, ElicitationResponse, FormElicitationRequest, OperationKind,
    PendingElicitationRound, ResponseMap,
};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

/// The persistent backend a process test runs on; each such test runs once per backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestDb {
    /// A SQLite file in the test's temp dir.
    Sqlite,
    /// A fresh schema on the PostgreSQL server `M3_TEST_POSTGRES_URL` names (scripts/test.sh
    /// starts a throwaway one); without it the test fails, it is never skipped.
    Postgres,
}

impl TestDb {
    /// The store location (a path or a store URL, as `--db`, `M3_DB` and the kit take it)
    /// for one test: `<dir>/m3.sqlite`, or the test server's URL with a schema no other
    /// test uses.
    ///
    /// # Errors
    /// `storage_error` when the PostgreSQL test server is not named.
    pub fn location(self, dir: &Path) -> m3_types::Result<String> {
        match self {
            Self::Sqlite => Ok(dir.join("m3.sqlite").display().to_string()),
            Self::Postgres => m3_store_postgres::testing::isolated_url(),
        }
    }
}

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
