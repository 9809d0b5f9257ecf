//! Whether a pending round survives its worker's restart: a stopping worker hands its
//! execution to another live worker when everything the next step needs is in the store
//! (docs/workers.md, "Handing over").

use m3_types::{ManagedInputRecord, ManagedInputStatus};
use serde_json::Value;

/// The key under which the worker records, in a round's operation parameters, that the
/// round can be carried on by another worker (beside `logical_operation_id` and the other
/// bookkeeping it stores there).
pub const TRANSFERABLE_PARAMETER: &str = "m3_transferable";

/// True when `round` is pending and would be handed to another live worker if its worker
/// stopped (SIGINT/SIGTERM): the worker that opened it recorded so, because its execution
/// runs the scripted harness, its server is reached over Streamable HTTP, and the round is
/// of the 2026-07-28 era outside a task (the retry is a fresh request carrying the stored
/// `requestState` and the answers). False for a legacy-era round (its request waits on the
/// worker's connection), a stdio server (a child process of the worker), the Codex harness
/// (a native process), and a round not pending.
///
/// A worker that *disappears* hands nothing over: every unresolved round it held fails
/// closed, transferable or not.
pub fn survives_worker_restart(round: &ManagedInputRecord) -> bool {
    round.status == ManagedInputStatus::Pending
        && round.operation_parameters.get(TRANSFERABLE_PARAMETER) == Some(&Value::Bool(true))
}
