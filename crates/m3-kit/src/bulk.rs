//! Answering many rounds at once: each answer committed on its own (one that does not fit
//! leaves its round pending and does not stop the others), under the idempotency key of
//! its own round, so the same list again replays. The CLI's `m3 respond --all`, the API's
//! `POST /api/v1/rounds/responses` and the page's multi-select all go through here.

use m3_types::{Error, Result};

use crate::answer::RoundAnswer;
use crate::handle::RoundDetails;
use crate::kit::AsyncMcpTestKit;

/// The most answers one [`AsyncMcpTestKit::answer_each`] call takes: a bound on the work
/// (and the time) one request of a service may ask for. A longer list is split by the
/// caller (the CLI does) or refused (the HTTP API does).
pub const ANSWER_EACH_MAX: usize = 500;

/// Refuses a bulk answer of more than [`ANSWER_EACH_MAX`] rounds before anything is read.
///
/// # Errors
/// `invalid_argument` (details `limit` and `given`) for `count` over the maximum.
pub fn check_answer_count(count: usize) -> Result<()> {
    if count > ANSWER_EACH_MAX {
        return Err(Error::model_validation(format!(
            "{count} answers in one list: at most {ANSWER_EACH_MAX} are taken at once"
        ))
        .with_detail("limit", ANSWER_EACH_MAX)
        .with_detail("given", count));
    }
    Ok(())
}

/// The idempotency key of round `round_id` in a bulk answer given under `prefix`:
/// `PREFIX-ROUND`. Every round has its own key, and answering the same rounds under the
/// same prefix again replays each.
///
/// ```
/// assert_eq!(m3_kit::each_round_key("ci-42", "r1"), "ci-42-r1");
/// ```
pub fn each_round_key(prefix: &str, round_id: &str) -> String {
    format!("{prefix}-{round_id}")
}

/// What answering one round of a bulk answer did.
#[derive(Debug)]
#[non_exhaustive]
pub struct RoundOutcome {
    /// The execution that owns the round.
    pub execution_id: String,
    /// The round.
    pub round_id: String,
    /// The idempotency key the answer was given under.
    pub idempotency_key: String,
    /// The round as committed (with its redacted projection and
    /// [`RoundDetails::replayed`]), or why it was not answered (it stays as it was).
    pub result: Result<RoundDetails>,
}

impl RoundOutcome {
    /// Whether the round holds this answer now (committed by this call or replayed).
    pub fn is_answered(&self) -> bool {
        self.result.is_ok()
    }

    /// Whether the answer was already stored under its key (nothing new was written).
    pub fn is_replayed(&self) -> bool {
        self.result.as_ref().is_ok_and(|details| details.replayed)
    }
}

/// The outcomes of one bulk answer, in the order of the answers given, with counts.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct BulkOutcome {
    /// One per answer, in order.
    pub rounds: Vec<RoundOutcome>,
}

impl BulkOutcome {
    /// How many rounds hold their answer now (committed or replayed).
    pub fn answered(&self) -> usize {
        self.rounds.iter().filter(|r| r.is_answered()).count()
    }

    /// How many of the answered were replays.
    pub fn replayed(&self) -> usize {
        self.rounds.iter().filter(|r| r.is_replayed()).count()
    }

    /// How many were not answered.
    pub fn failed(&self) -> usize {
        self.rounds.len() - self.answered()
    }

    /// The outcomes of `other` after these.
    pub fn extend(&mut self, other: Self) {
        self.rounds.extend(other.rounds);
    }
}

impl AsyncMcpTestKit {
    /// Commits each of `answers` on its own with [`answer`](Self::answer), in order: a
    /// round whose answer is refused (schema, state, conflict, unknown round) keeps its
    /// state and the next answer is still given. Give each its own idempotency key
    /// ([`each_round_key`]) so the same list again replays round by round.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> m3_kit::Result<()> {
    /// use m3_kit::{AsyncMcpTestKit, ElicitationResponse, RoundAnswer, each_round_key};
    ///
    /// let kit = AsyncMcpTestKit::builder().build().await?;
    /// let answers = vec![RoundAnswer::to_every_request(
    ///     "no-such-execution",
    ///     "r1",
    ///     ElicitationResponse::decline(),
    ///     each_round_key("bulk", "r1"),
    /// )];
    /// let outcome = kit.answer_each(answers).await?;
    /// assert_eq!((outcome.answered(), outcome.failed()), (0, 1));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `invalid_argument` (nothing answered) for more than [`ANSWER_EACH_MAX`] answers
    /// ([`check_answer_count`]).
    /// Every other failure is the outcome of its own round.
    ///
    /// # Cancel safety
    ///
    /// As [`answer`](Self::answer), round by round: dropped mid-way, a prefix of the
    /// rounds was answered; the same list again tells which (replays).
    pub async fn answer_each(&self, answers: Vec<RoundAnswer>) -> Result<BulkOutcome> {
        check_answer_count(answers.len())?;
        let mut outcome = BulkOutcome::default();
        for answer in answers {
            let execution_id = answer.execution_id.clone();
            let round_id = answer.round_id.clone();
            let idempotency_key = answer.idempotency_key.clone();
            let result = self.answer(answer).await;
            outcome.rounds.push(RoundOutcome {
                execution_id,
                round_id,
                idempotency_key,
                result,
            });
        }
        Ok(outcome)
    }
}
