//! `m3 respond --all`: the same responses to every pending round the filters select, each
//! round answered on its own under its own idempotency key (`PREFIX-ROUND`) by the kit's
//! bulk answer ([`AsyncMcpTestKit::answer_each`]), so one failing round does not stop the
//! others and running the command again replays.

use std::path::Path;

use m3_kit::{
    ANSWER_EACH_MAX, AsyncMcpTestKit, RoundAnswer, RoundDiagnostics, RoundOutcome, each_round_key,
};
use m3_types::{Actor, Error, HumanInput, ManagedInputStatus, ResponseMap};
use serde_json::{Value, json};

use crate::cli::RespondArgs;
use crate::commands::inspect::open_existing_kit;
use crate::failure::Failure;
use crate::ids;
use crate::output::Output;

/// One selected round and what answering it did.
struct Answered {
    execution_id: String,
    round_id: String,
    idempotency_key: String,
    outcome: Result<bool, Failure>,
}

impl From<RoundOutcome> for Answered {
    fn from(outcome: RoundOutcome) -> Self {
        let replayed = outcome.is_replayed();
        Self {
            outcome: outcome.result.map(|_| replayed).map_err(Failure::from),
            execution_id: outcome.execution_id,
            round_id: outcome.round_id,
            idempotency_key: outcome.idempotency_key,
        }
    }
}

pub(crate) async fn run(
    out: Output,
    db: &Path,
    args: &RespondArgs,
    responses: ResponseMap,
    actor: Actor,
) -> Result<(), Failure> {
    let kit = open_existing_kit(db, true).await?;
    let answered = answer_all(&kit, args, &responses, &actor).await;
    kit.close().await?;
    report(out, &answered?)
}

/// Selects the rounds, then answers each (oldest first) through the kit's bulk answer,
/// [`ANSWER_EACH_MAX`] at a time.
async fn answer_all(
    kit: &AsyncMcpTestKit,
    args: &RespondArgs,
    responses: &ResponseMap,
    actor: &Actor,
) -> Result<Vec<Answered>, Failure> {
    let selected = select(kit, args).await?;
    if selected.is_empty() {
        return Err(Failure::from(Error::not_found(
            "no pending round matches --all and its filters",
        )));
    }
    let mut answered = Vec::with_capacity(selected.len());
    for chunk in selected.chunks(ANSWER_EACH_MAX) {
        let answers = chunk
            .iter()
            .map(|(execution_id, round)| {
                let key = each_round_key(&args.idempotency_key, &round.round_id);
                RoundAnswer::new(execution_id, &round.round_id, responses.clone(), key)
                    .accept_defaults(args.accept_defaults)
                    .actor(actor.clone())
            })
            .collect();
        let outcome = kit.answer_each(answers).await?;
        answered.extend(outcome.rounds.into_iter().map(Answered::from));
    }
    Ok(answered)
}

/// The managed rounds the filters select: every pending one, and every one already
/// answered under its `PREFIX-ROUND` key (so a second run replays instead of finding
/// nothing), oldest first.
async fn select(
    kit: &AsyncMcpTestKit,
    args: &RespondArgs,
) -> Result<Vec<(String, RoundDiagnostics)>, Failure> {
    let only_execution = match &args.execution {
        Some(given) => Some(ids::attach(kit, given).await?.execution_id().to_owned()),
        None => None,
    };
    let mut selected = Vec::new();
    for summary in kit.executions().await? {
        let execution_id = summary.state.execution_id;
        let wanted = only_execution.as_ref().is_none_or(|id| *id == execution_id);
        if summary.human_input != HumanInput::Managed || !wanted {
            continue;
        }
        let handle = kit.attach(&execution_id).await?;
        for round in handle.rounds().await? {
            let ours = round.response_idempotency_key.as_deref()
                == Some(each_round_key(&args.idempotency_key, &round.round_id).as_str());
            let matches = args.server.as_ref().is_none_or(|s| *s == round.server)
                && args
                    .operation
                    .as_ref()
                    .is_none_or(|o| *o == round.operation_name);
            if matches && (round.status == ManagedInputStatus::Pending || ours) {
                selected.push((execution_id.clone(), round));
            }
        }
    }
    selected.sort_by_key(|(_, round)| round.created_at);
    Ok(selected)
}

/// One line per round and a summary (or one JSON document); a failure when any round was
/// not answered, with the first failure's code (its exit status).
fn report(out: Output, answered: &[Answered]) -> Result<(), Failure> {
    let failed: Vec<&Failure> = answered
        .iter()
        .filter_map(|a| a.outcome.as_ref().err())
        .collect();
    let replayed = answered
        .iter()
        .filter(|a| matches!(a.outcome, Ok(true)))
        .count();
    let committed = answered.len() - failed.len();
    if out.is_json() {
        let rounds: Vec<Value> = answered.iter().map(round_json).collect();
        out.document(&json!({
            "rounds": rounds,
            "answered": committed,
            "replayed": replayed,
            "failed": failed.len(),
        }))?;
    } else {
        for a in answered {
            out.say(match &a.outcome {
                Ok(false) => format!("committed   {} of {}", a.round_id, a.execution_id),
                Ok(true) => format!("replayed    {} of {}", a.round_id, a.execution_id),
                Err(error) => format!(
                    "not answered {} of {}: {}",
                    a.round_id,
                    a.execution_id,
                    error.human_line()
                ),
            });
        }
        out.say(format!(
            "{committed} of {} rounds answered ({replayed} replayed), {} not answered",
            answered.len(),
            failed.len()
        ));
    }
    match failed.first() {
        None => Ok(()),
        Some(first) => Err(Failure::new(
            &first.code,
            format!(
                "{} of {} rounds were not answered (the first: {})",
                failed.len(),
                answered.len(),
                first.message
            ),
        )
        .with_detail("failed", json!(failed.len()))
        .with_detail("answered", json!(committed))),
    }
}

fn round_json(a: &Answered) -> Value {
    let mut line = json!({
        "execution_id": a.execution_id,
        "round_id": a.round_id,
        "idempotency_key": a.idempotency_key,
        "committed": a.outcome.is_ok(),
        "replayed": matches!(a.outcome, Ok(true)),
    });
    if let Err(error) = &a.outcome {
        line["error"] =
            json!({"code": error.code, "message": error.message, "details": error.details});
    }
    line
}
