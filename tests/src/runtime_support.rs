//! Helpers for the runtime and kit end-to-end tests.
#![expect(clippy::panic, reason = "test support: a failed wait fails the test")]

use std::path::{Path, PathBuf};
use std::time::Duration;

use m3_kit::{
    AgentSelection, AsyncAgent, AsyncExecutionHandle, AsyncMcpTestKit, ExecutionTrace,
    RoundDiagnostics, Script, SubmitOptions,
};
use m3_mcp::{AttemptOutcome, LogicalOperation};
use m3_types::{
    ElicitationResponse, ErrorInfo, ExecutionOutcome, ExecutionResult, HumanInput,
    ManagedInputStatus, PendingElicitationRound, ResponseMap, StdioServer,
};
use serde_json::{Map, Value, json};
use tempfile::TempDir;

use crate::store_support::TestDb;

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

/// Submits "Book a shipment." to `kit` as a managed execution calling `book_shipment` once
/// on the shipping server binary `exe` in the 2026-07-28 era.
pub async fn submit_booking(
    kit: &AsyncMcpTestKit,
    exe: &str,
) -> m3_types::Result<AsyncExecutionHandle> {
    let agent = only_agent(kit.agents([call("book_shipment")])?)?;
    agent
        .submit(
            "Book a shipment.",
            SubmitOptions::new()
                .server(shipping(exe, "modern"))
                .human_input(HumanInput::Managed),
        )
        .await
}

fn only_agent(mut agents: Vec<AsyncAgent>) -> m3_types::Result<AsyncAgent> {
    agents.pop().ok_or_else(|| {
        m3_types::Error::from_code(
            m3_types::ErrorCode::InvalidArgument,
            "the kit built no agent for one selection",
        )
    })
}

/// Runs the responder binary `exe` (`m3-test-responder`: it answers the pending round of
/// `execution` in the store `db` with `city`) as another process with the extra `env`,
/// fails unless it succeeds, and returns what it printed (the round id).
pub async fn respond_from_another_process(
    exe: &str,
    db: &str,
    execution: &str,
    city: &str,
    env: &[(&str, &str)],
) -> String {
    let output = tokio::process::Command::new(exe)
        .args([db, execution, city])
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap_or_else(|error| panic!("cannot run {exe}: {error}"));
    assert!(
        output.status.success(),
        "responder failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
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

/// What a test returns: any error fails it with its message.
pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A kit on a fresh SQLite file in a temporary directory that lives as long as it.
#[derive(Debug)]
pub struct TempKit {
    /// The kit.
    pub kit: AsyncMcpTestKit,
    /// The store's location (the SQLite file, or the PostgreSQL URL), for another process
    /// or a second kit.
    pub db: PathBuf,
    dir: TempDir,
}

impl TempKit {
    /// Opens a kit on `m3.sqlite` in a new temporary directory.
    pub async fn new() -> TestResult<Self> {
        Self::on(TestDb::Sqlite).await
    }

    /// Opens a kit on `backend` (a SQLite file in a new temporary directory, or a fresh
    /// PostgreSQL schema; `db` is then its URL).
    pub async fn on(backend: TestDb) -> TestResult<Self> {
        let dir = tempfile::tempdir()?;
        let db = PathBuf::from(backend.location(dir.path())?);
        let kit = kit(&db).await?;
        Ok(Self { kit, db, dir })
    }

    /// The temporary directory (removed when the kit is dropped).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The agent for `selection`.
    pub fn agent(&self, selection: AgentSelection) -> TestResult<AsyncAgent> {
        only(self.kit.agents([selection])?)
    }

    /// Closes the kit.
    pub async fn close(self) -> TestResult {
        Ok(self.kit.close().await?)
    }
}

/// The single item of `items`.
pub fn only<T>(items: Vec<T>) -> TestResult<T> {
    let count = items.len();
    let mut items = items.into_iter();
    match (items.next(), items.next()) {
        (Some(item), None) => Ok(item),
        _ => Err(format!("expected one item, got {count}").into()),
    }
}

/// Asserts that answering `round_id` with `responses` under `key` is refused
/// with the error `code`.
pub async fn assert_refused(
    handle: &AsyncExecutionHandle,
    round_id: &str,
    responses: ResponseMap,
    key: &str,
    code: &str,
) -> TestResult {
    match handle.respond_elicitation(round_id, responses, key).await {
        Ok(()) => Err(format!("the response under {key:?} was accepted").into()),
        Err(error) => {
            assert_eq!(error.code(), code, "{error}");
            Ok(())
        }
    }
}

/// Asserts that a late address for the finished round `round_id` is refused
/// (`managed_input_state`).
pub async fn assert_late_response_refused(
    handle: &AsyncExecutionHandle,
    round_id: &str,
) -> TestResult {
    let late = address("shipping_address", "Pune");
    assert_refused(handle, round_id, late, "late", "managed_input_state").await
}

/// Asserts `result` completed and returns its trace.
pub fn completed(result: &ExecutionResult) -> TestResult<ExecutionTrace> {
    assert_eq!(
        result.outcome(),
        Some(ExecutionOutcome::Completed),
        "{:?}",
        result.error
    );
    Ok(ExecutionTrace::of(result)?)
}

/// Waits up to `wait` for the result, asserts it completed and returns its trace.
pub async fn completes(
    handle: &AsyncExecutionHandle,
    wait: Duration,
) -> TestResult<ExecutionTrace> {
    completed(&handle.result(Some(wait)).await?)
}

/// Waits up to `wait` for the result and asserts it ended `outcome`.
pub async fn ends(
    handle: &AsyncExecutionHandle,
    wait: Duration,
    outcome: ExecutionOutcome,
) -> TestResult<ExecutionResult> {
    let result = handle.result(Some(wait)).await?;
    assert_eq!(result.outcome(), Some(outcome), "{:?}", result.error);
    Ok(result)
}

/// The error of a finished execution, asserting its `code` and `details.reason`.
pub fn failure(result: &ExecutionResult, code: &str, reason: &str) -> TestResult<ErrorInfo> {
    let error = result.error.clone().ok_or("the execution has no error")?;
    assert_eq!(error.code.as_str(), code, "{error:?}");
    assert_eq!(error.details["reason"], json!(reason), "{error:?}");
    Ok(error)
}

/// Asserts the execution has `count` rounds, all resolved, and returns them.
pub async fn resolved_rounds(
    handle: &AsyncExecutionHandle,
    count: usize,
) -> TestResult<Vec<RoundDiagnostics>> {
    let rounds = handle.rounds().await?;
    assert_eq!(rounds.len(), count, "{rounds:?}");
    assert!(
        rounds
            .iter()
            .all(|r| r.status == ManagedInputStatus::Resolved),
        "{rounds:?}"
    );
    Ok(rounds)
}

/// Asserts the execution's first round failed with `code` and returns the rounds.
pub async fn first_round_failed(
    handle: &AsyncExecutionHandle,
    code: &str,
) -> TestResult<Vec<RoundDiagnostics>> {
    let rounds = handle.rounds().await?;
    let first = rounds.first().ok_or("no round")?;
    assert_eq!(first.status, ManagedInputStatus::Failed, "{first:?}");
    assert_eq!(first.failure_code.as_deref(), Some(code), "{first:?}");
    Ok(rounds)
}

/// The first logical tool call of `trace`.
pub fn first_call(trace: &ExecutionTrace) -> TestResult<&LogicalOperation> {
    Ok(trace.tool_calls().next().ok_or("no tool call")?)
}

/// The result and `isError` flag of `call`'s last attempt, which must be complete.
pub fn final_result(call: &LogicalOperation) -> TestResult<(&Value, bool)> {
    match &call.last_attempt().ok_or("no attempt")?.outcome {
        AttemptOutcome::Complete { result, is_error } => Ok((result, *is_error)),
        other => Err(format!("not complete: {other:?}").into()),
    }
}

/// The JSON document a tool result carries as its first text content.
pub fn text_json(result: &Value) -> TestResult<Value> {
    let text = result["content"][0]["text"]
        .as_str()
        .ok_or_else(|| format!("no text content: {result}"))?;
    Ok(serde_json::from_str(text)?)
}

/// `content[field]` of the answer to `key` that the second attempt of `call`
/// carried (2026-07-28 retries).
pub fn retried_content<'a>(
    call: &'a LogicalOperation,
    key: &str,
    field: &str,
) -> TestResult<&'a Value> {
    let responses = call
        .attempts
        .get(1)
        .and_then(|attempt| attempt.input_responses.as_ref())
        .ok_or_else(|| format!("no retry with input responses: {call:?}"))?;
    let content = responses
        .get(key)
        .and_then(|response| response.content.as_ref())
        .ok_or_else(|| format!("the retry carried no content for {key:?}: {responses:?}"))?;
    Ok(&content[field])
}

/// An accepted form answer for `key` with the given fields.
pub fn accept<const N: usize>(key: &str, fields: [(&str, Value); N]) -> ResponseMap {
    let content: Map<String, Value> = fields
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
    ResponseMap::from([(key.to_owned(), ElicitationResponse::accept(content))])
}
