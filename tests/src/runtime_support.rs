//! Helpers for the runtime and kit end-to-end tests.
#![expect(clippy::panic, reason = "test support: a failed wait fails the test")]

use std::path::Path;
use std::time::Duration;

use m3_kit::{AgentSelection, AsyncExecutionHandle, AsyncMcpTestKit, Script};
use m3_types::{ElicitationResponse, PendingElicitationRound, ResponseMap, StdioServer};
use serde_json::{Map, Value, json};

/// How long a test waits for anything (a hang fails instead of blocking CI).
pub const WAIT: Duration = Duration::from_secs(30);

/// The shipping server binding for the helper binary at `exe`, in `era`.
pub fn shipping(exe: &str, era: &str) -> StdioServer {
    StdioServer::new("shipping", exe).with_args([era])
}

/// `{"weight_kg": 2}`.
pub fn weight() -> Map<String, Value> {
    let mut args = Map::new();
    args.insert("weight_kg".into(), json!(2));
    args
}

/// A scripted agent calling `shipping:<tool>` once.
pub fn call(tool: &str) -> AgentSelection {
    AgentSelection::scripted(Script::call(&format!("shipping:{tool}"), weight()))
}

/// An accepted address for `key`.
pub fn address(key: &str, city: &str) -> ResponseMap {
    let mut content = Map::new();
    content.insert("street".into(), json!("1 Main Street"));
    content.insert("city".into(), json!(city));
    ResponseMap::from([(key.to_owned(), ElicitationResponse::accept(content))])
}

/// A kit on the store `db` names (a SQLite file path or a store URL).
pub async fn kit(db: impl AsRef<Path>) -> m3_types::Result<AsyncMcpTestKit> {
    AsyncMcpTestKit::builder().database(db).build().await
}

/// Waits for the pending round, failing if the execution finishes first.
pub async fn pending(handle: &AsyncExecutionHandle) -> PendingElicitationRound {
    match handle.wait_for_pending(WAIT).await {
        Ok(Some(round)) => round,
        Ok(None) => {
            let result = handle.result(Some(WAIT)).await;
            panic!("execution finished without asking: {result:?}")
        }
        Err(error) => panic!("no pending round: {error}"),
    }
}

/// The `M3_TEST_PYTHON` interpreter (or the tools venv's), which must exist.
pub fn python() -> String {
    let path = std::env::var("M3_TEST_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    assert!(
        Path::new(&path).exists(),
        "python peer missing at {path}: run scripts/test.sh to install it"
    );
    path
}

/// The npm folder with server-everything (`M3_TEST_NPM_DIR` or the tools one), which must exist.
pub fn npm_dir() -> String {
    let path = std::env::var("M3_TEST_NPM_DIR").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools/npm",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    assert!(
        Path::new(&path).exists(),
        "npm peers missing at {path}: run scripts/test.sh to install them"
    );
    path
}

/// Waits until the execution's lifecycle is `status` (the round becomes
/// visible a moment before the lifecycle moves to `waiting_for_input`).
pub async fn lifecycle(handle: &AsyncExecutionHandle, status: m3_types::ExecutionStatus) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let now = handle.snapshot().await.map(|s| s.lifecycle);
        if now.as_ref().ok() == Some(&status) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "lifecycle stayed {now:?}, expected {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
