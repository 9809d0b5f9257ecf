//! A round's context: the operation's arguments, from the round's stored operation
//! parameters, and the agent's prompt, from its execution's spec, redacted together
//! ([`RoundContext::redacted`]). Derived when read: both are stored already, and the SQLite
//! round table is the Python original's layout, which has no column for more (see
//! docs/decisions.md, "A round shows its context").

use m3_store::ExecutionStore;
use m3_types::{ManagedInputRecord, PendingElicitationRound, Result, RoundContext};
use serde::Serialize;
use serde_json::Value;

/// The keys the runtime's coordinator adds to a round's operation parameters for its own
/// bookkeeping: not the operation's arguments.
const BOOKKEEPING: [&str; 3] = ["logical_operation_id", "operation_kind", "operation_name"];

/// The context of round `record` of an execution whose agent was given `prompt`.
pub(crate) fn round_context(record: &ManagedInputRecord, prompt: Option<&str>) -> RoundContext {
    let mut arguments = record.operation_parameters.clone();
    for key in BOOKKEEPING {
        arguments.shift_remove(key);
    }
    RoundContext::redacted(&arguments, prompt)
}

/// The prompt of an execution's spec, if it has one.
pub(crate) fn spec_prompt(spec: &Value) -> Option<&str> {
    spec.get("prompt").and_then(Value::as_str)
}

/// The prompt of execution `execution_id` (`None` when it has none, or for rounds without
/// an execution record, which another implementation may have written).
///
/// # Errors
/// `storage_error`.
pub(crate) async fn execution_prompt(
    store: &dyn ExecutionStore,
    execution_id: &str,
) -> Result<Option<String>> {
    Ok(store
        .get_execution(execution_id)
        .await?
        .and_then(|record| spec_prompt(&record.spec).map(str::to_owned)))
}

/// A pending round with its context, from
/// [`AsyncMcpTestKit::pending_rounds_in_context`](crate::AsyncMcpTestKit::pending_rounds_in_context):
/// serialized as the round's own fields plus `context`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PendingRound {
    /// The public round: server, operation, requests, deadline.
    #[serde(flatten)]
    pub round: PendingElicitationRound,
    /// The operation's arguments and the agent's prompt, redacted.
    pub context: RoundContext,
}

impl PendingRound {
    /// Round `record` (pending) with the context of an agent given `prompt`.
    pub(crate) fn of(record: ManagedInputRecord, prompt: Option<&str>) -> Self {
        let context = round_context(&record, prompt);
        Self {
            round: record.pending,
            context,
        }
    }
}
