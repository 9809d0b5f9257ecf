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
const BOOKKEEPING: [&str; 4] = [
    "logical_operation_id",
    "operation_kind",
    "operation_name",
    m3_runtime::TRANSFERABLE_PARAMETER,
];

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

/// The submitted spec of execution `execution_id` (`None` for rounds without an execution
/// record, which another implementation may have written).
///
/// # Errors
/// `storage_error`.
pub(crate) async fn execution_spec(
    store: &dyn ExecutionStore,
    execution_id: &str,
) -> Result<Option<Value>> {
    Ok(store
        .get_execution(execution_id)
        .await?
        .map(|record| record.spec))
}

/// Whether round `record`, pending, would be handed to another worker if its worker
/// stopped ([`m3_runtime::survives_worker_restart`]); false for a round that is not pending.
pub(crate) fn transferable(record: &ManagedInputRecord) -> bool {
    m3_runtime::survives_worker_restart(record)
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
    /// Whether the round survives its worker's restart: a stopping worker hands it to
    /// another live worker (docs/workers.md, "Handing over"); false: it fails closed when
    /// its worker stops.
    pub transferable: bool,
}

impl PendingRound {
    /// Round `record` (pending) of the execution submitted as `spec`.
    pub(crate) fn of(record: ManagedInputRecord, spec: &Value) -> Self {
        let context = round_context(&record, spec_prompt(spec));
        let transferable = transferable(&record);
        Self {
            round: record.pending,
            context,
            transferable,
        }
    }
}
