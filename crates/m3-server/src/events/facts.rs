//! Facts: what the event stream reports, derived from the durable state of
//! rounds and executions (never from anything held in memory by a worker).

use std::collections::HashSet;

use m3_kit::{AsyncMcpTestKit, RoundDiagnostics};
use m3_types::{ExecutionStatus, HumanInput, timestamp};
use serde_json::{Value, json};
use time::OffsetDateTime;

/// One event of the stream.
#[derive(Debug, Clone)]
pub(crate) struct Fact {
    /// `kind:execution:round`: the same fact always has the same key.
    pub(crate) key: String,
    /// `round.pending`, `round.answered`, `round.resolved`, `round.failed`,
    /// `execution.finished`.
    pub(crate) kind: &'static str,
    /// The store time of the change, in microseconds since the epoch.
    pub(crate) at_micros: i64,
    /// Position in the server's log (set when appended).
    pub(crate) index: u64,
    /// The ids (and status) the event carries; never a response value.
    pub(crate) data: Value,
}

impl Fact {
    fn new(kind: &'static str, at: OffsetDateTime, subject: &str, data: Value) -> Self {
        let micros = at.unix_timestamp_nanos() / 1_000;
        Self {
            key: format!("{kind}:{subject}"),
            kind,
            at_micros: i64::try_from(micros).unwrap_or(i64::MAX),
            index: 0,
            data,
        }
    }

    /// The SSE id of this fact in the log of `epoch`.
    pub(crate) fn id(&self, epoch: &str) -> String {
        format!("{epoch}.{}.{}", self.index, self.at_micros)
    }

    /// Order of facts with the same time: a round is pending before it is
    /// answered before it ends, and an execution finishes last.
    pub(crate) fn order(&self) -> u8 {
        match self.kind {
            "round.pending" => 0,
            "round.answered" => 1,
            "round.resolved" | "round.failed" => 2,
            _ => 3,
        }
    }
}

/// One read of the store.
#[derive(Debug, Default)]
pub(crate) struct Read {
    pub(crate) facts: Vec<Fact>,
    /// Finished executions read completely (no need to read them again).
    pub(crate) finished: Vec<String>,
}

/// Every fact of every execution not in `done`.
pub(crate) async fn read(kit: &AsyncMcpTestKit, done: &HashSet<String>) -> m3_types::Result<Read> {
    let mut read = Read::default();
    for summary in kit.executions().await? {
        let state = &summary.state;
        if done.contains(&state.execution_id) {
            continue;
        }
        if summary.human_input == HumanInput::Managed {
            let handle = kit.attach(&state.execution_id).await?;
            for round in handle.rounds().await? {
                round_facts(&state.execution_id, &round, &mut read.facts);
            }
        }
        if let (ExecutionStatus::Finished, Some(at)) = (state.lifecycle, state.finished_at) {
            read.facts.push(Fact::new(
                "execution.finished",
                at,
                &state.execution_id,
                json!({
                    "execution_id": state.execution_id,
                    "outcome": state.outcome.map(|o| o.as_str()),
                    "at": timestamp::format(at),
                }),
            ));
            read.finished.push(state.execution_id.clone());
        }
    }
    Ok(read)
}

fn round_facts(execution_id: &str, round: &RoundDiagnostics, out: &mut Vec<Fact>) {
    let subject = format!("{execution_id}:{}", round.round_id);
    // `status` is the one the fact reports, not the round's current one.
    let data = |at: OffsetDateTime, status: &str| {
        json!({
            "execution_id": execution_id,
            "round_id": round.round_id,
            "round_index": round.round_index,
            "status": status,
            "server": round.server,
            "operation_kind": round.operation_kind.as_str(),
            "operation_name": round.operation_name,
            "at": timestamp::format(at),
        })
    };
    out.push(Fact::new(
        "round.pending",
        round.created_at,
        &subject,
        data(round.created_at, "pending"),
    ));
    if let Some(at) = round.response_validated_at {
        out.push(Fact::new(
            "round.answered",
            at,
            &subject,
            data(at, "response_validated"),
        ));
    }
    if let Some(at) = round.resolved_at {
        out.push(Fact::new(
            "round.resolved",
            at,
            &subject,
            data(at, "resolved"),
        ));
    }
    if let Some(at) = round.failed_at {
        let mut value = data(at, "failed");
        if let Value::Object(map) = &mut value {
            map.insert("failure_code".into(), json!(round.failure_code));
        }
        out.push(Fact::new("round.failed", at, &subject, value));
    }
}
