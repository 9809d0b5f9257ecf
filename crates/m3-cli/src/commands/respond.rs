//! `m3 respond [EXECUTION] ROUND --idempotency-key KEY RESPONSES`.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use m3_kit::{AsyncExecutionHandle, AsyncMcpTestKit, RoundAnswer, RoundDetails};
use m3_types::{Actor, ActorSurface, Error, ManagedInputStatus, ResponseMap};
use serde_json::json;

use crate::cli::RespondArgs;
use crate::commands::inspect::open_existing_kit;
use crate::commands::respond_all;
use crate::edit_answer;
use crate::failure::Failure;
use crate::ids;
use crate::lease;
use crate::output::Output;
use crate::responses::{ResponseArgs, parse_responses};

/// How long `respond` waits to see a live worker pick the answer up before it explains the
/// worker's lease instead (a live worker delivers within milliseconds).
const DELIVERY_GRACE: Duration = Duration::from_millis(1500);

pub(crate) async fn run(out: Output, db: &Path, args: RespondArgs) -> Result<(), Failure> {
    let given = if args.edit {
        None
    } else {
        Some(parse_responses(&ResponseArgs {
            responses: args.responses.as_deref().map(read_payload).transpose()?,
            accept: args.accept.clone(),
            accept_url: args.accept_url.clone(),
            decline: args.decline.clone(),
            cancel: args.cancel.clone(),
        })?)
    };
    let actor = match &args.as_principal {
        Some(name) => Actor::new(name.as_str(), ActorSurface::Cli)?,
        None => Actor::of_process_user(ActorSurface::Cli),
    };
    if args.all {
        let responses =
            given.ok_or_else(|| Failure::usage("--all cannot be combined with --edit"))?;
        return respond_all::run(out, db, &args, responses, actor).await;
    }
    let first = args
        .first
        .clone()
        .ok_or_else(|| Failure::usage("give the round to answer (or --all)"))?;
    let kit = open_existing_kit(db, true).await?;
    let outcome = async {
        let (handle, round) = match &args.second {
            Some(round) => {
                let handle = ids::attach(&kit, &first).await?;
                let round = ids::round(&handle, round).await?;
                (handle, round)
            }
            None => ids::find_round(&kit, &first).await?,
        };
        let answer = |responses| {
            // One read of the round (its lease, and its requests' defaults if asked) and
            // the write.
            RoundAnswer::new(
                handle.execution_id(),
                &round,
                responses,
                &args.idempotency_key,
            )
            .accept_defaults(args.accept_defaults)
            .actor(actor.clone())
        };
        let answered = match given {
            Some(responses) => kit.answer(answer(responses)).await?,
            None => answer_in_editor(&kit, &handle, &round, answer).await?,
        };
        report(out, &handle, &round, &args.idempotency_key, &answered).await
    }
    .await;
    kit.close().await?;
    outcome
}

/// `--edit`: the round's skeleton in the person's editor, submitted when saved; an answer
/// the store refuses as invalid reopens the editor with the error on top. Saving it
/// unchanged, or with nothing but comments, gives up (nothing is submitted).
async fn answer_in_editor(
    kit: &AsyncMcpTestKit,
    handle: &AsyncExecutionHandle,
    round: &str,
    answer: impl Fn(ResponseMap) -> RoundAnswer,
) -> Result<RoundDetails, Failure> {
    let details = handle.round(round).await?;
    if details.diagnostics.status != ManagedInputStatus::Pending {
        return Err(Failure::from(Error::managed_input_state(format!(
            "round {round} is {}, not pending: there is nothing to answer",
            details.diagnostics.status
        ))));
    }
    let mut shown = edit_answer::skeleton(&details.round);
    loop {
        let saved = edit_answer::edit(&shown)?;
        let attempt = match edit_answer::responses_json(&saved)? {
            None => {
                return Err(Failure::invalid(
                    "--edit: the answer was left empty; nothing was submitted",
                ));
            }
            Some(json) => match parse_responses(&ResponseArgs {
                responses: Some(json),
                ..ResponseArgs::default()
            }) {
                Ok(responses) => kit.answer(answer(responses)).await.map_err(Failure::from),
                Err(error) => Err(Failure::from(error)),
            },
        };
        match attempt {
            Err(error) if is_fixable(&error) && saved != shown => {
                shown = edit_answer::with_error(&saved, &error);
            }
            result => return result,
        }
    }
}

/// Whether an edited answer's failure is one the person can fix by editing again.
fn is_fixable(error: &Failure) -> bool {
    matches!(
        error.code.as_str(),
        "invalid_argument" | "managed_input_invalid"
    ) && error.details.get("not_found").is_none()
}

/// Says what the answer did: committed or replayed, who answered, and whether a worker
/// picked it up (else the lease that holds it).
async fn report(
    out: Output,
    handle: &AsyncExecutionHandle,
    round: &str,
    idempotency_key: &str,
    answered: &RoundDetails,
) -> Result<(), Failure> {
    let answered_by = &answered.diagnostics.answered_by;
    let replayed = answered.replayed;
    let picked_up = delivered_within(handle, round, DELIVERY_GRACE).await?;
    let held = if picked_up {
        None
    } else {
        lease::current(handle).await?
    };
    let now = lease::now();
    if out.is_json() {
        let mut document = json!({
            "execution_id": handle.execution_id(),
            "round_id": round,
            "idempotency_key": idempotency_key,
            "committed": true,
            "replayed": replayed,
            "picked_up": picked_up,
            "answered_by": answered_by,
        });
        if let Some(held) = &held {
            document["worker_lease"] = lease::json(held, now);
        }
        return out.document(&document);
    }
    out.say(format!(
        "responses {} to round {round} of execution {}{}",
        if replayed {
            "already committed (replay)"
        } else {
            "committed"
        },
        handle.execution_id(),
        answered_by
            .as_ref()
            .map(|actor| format!(" (answered by {actor})"))
            .unwrap_or_default()
    ));
    if let Some(held) = &held {
        out.say(format!(
            "  not picked up yet by the worker: {}",
            lease::describe(held, now)
        ));
    }
    Ok(())
}

/// `--responses` text: `@FILE` reads a file, `-` standard input, anything else is the JSON.
fn read_payload(given: &str) -> Result<String, Failure> {
    if given == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|error| {
                Failure::invalid(format!(
                    "--responses -: cannot read standard input: {error}"
                ))
            })?;
        return Ok(text);
    }
    match given.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| Failure::invalid(format!("--responses @{path}: {error}"))),
        None => Ok(given.to_owned()),
    }
}

/// Whether a worker took the committed answer further (delivered or resolved it) within
/// `grace`: a live worker does; a dead one leaves it `response_validated`.
async fn delivered_within(
    handle: &AsyncExecutionHandle,
    round_id: &str,
    grace: Duration,
) -> Result<bool, Failure> {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        let rounds = handle.rounds().await?;
        let status = rounds
            .iter()
            .find(|round| round.round_id == round_id)
            .map(|round| round.status);
        if status != Some(ManagedInputStatus::ResponseValidated) {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
