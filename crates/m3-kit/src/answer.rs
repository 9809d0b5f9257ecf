//! Answering a round by its ids in one read and one write: the path of a service that
//! receives answers for many executions (the HTTP API), where a handle per answer would
//! cost reads that the answer does not need.

use m3_store::{LeaseRef, ResponseSubmission, RoundRef};
use m3_types::form_input::fill_defaults;
use std::collections::BTreeMap;

use m3_types::{
    Actor, ElicitationAction, ElicitationRequest, ElicitationResponse, Error, ManagedInputRecord,
    ResponseMap, Result, redact_responses,
};
use serde_json::{Map, Value};

use crate::handle::{RoundDetails, RoundDiagnostics, not_found};
use crate::kit::AsyncMcpTestKit;

/// One answer to a round named by its ids, for [`AsyncMcpTestKit::answer`]: the responses
/// and idempotency key, and optionally who answers and whether the requested schema's
/// defaults fill the fields an accepted form answer leaves out.
///
/// ```
/// use m3_kit::{Actor, ActorSurface, ResponseMap, RoundAnswer};
///
/// let answer = RoundAnswer::new("exec-1", "round-1", ResponseMap::new(), "key-1")
///     .accept_defaults(true)
///     .actor(Actor::new("alice", ActorSurface::Api)?);
/// assert_eq!(answer.actor.map(|a| a.principal).as_deref(), Some("alice"));
/// # Ok::<(), m3_kit::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[must_use]
pub struct RoundAnswer {
    /// The execution that owns the round.
    pub execution_id: String,
    /// The round to answer.
    pub round_id: String,
    /// One response per request key.
    pub responses: ResponseMap,
    /// The caller's idempotency key.
    pub idempotency_key: String,
    /// Fill missing form fields with the requested schema's defaults first (default false;
    /// see [`fill_defaults`]).
    pub accept_defaults: bool,
    /// Who answers (default: the kit's actor, see
    /// [`AsyncMcpTestKitBuilder::actor`](crate::AsyncMcpTestKitBuilder::actor)).
    pub actor: Option<Actor>,
    /// One response for every request of the round, whatever their keys (see
    /// [`to_every_request`](Self::to_every_request)); `responses` is then ignored.
    pub every_request: Option<ElicitationResponse>,
}

impl RoundAnswer {
    /// `responses` to round `round_id` of `execution_id` under `idempotency_key`.
    pub fn new(
        execution_id: impl Into<String>,
        round_id: impl Into<String>,
        responses: ResponseMap,
        idempotency_key: impl Into<String>,
    ) -> Self {
        Self {
            execution_id: execution_id.into(),
            round_id: round_id.into(),
            responses,
            idempotency_key: idempotency_key.into(),
            accept_defaults: false,
            actor: None,
            every_request: None,
        }
    }

    /// `response` to every request of round `round_id` (their keys read with the round),
    /// under `idempotency_key`: the shape of answering many rounds at once ("decline all
    /// selected"). A URL request is never accepted this way: consenting to open an address
    /// takes that request's own answer, so an `accept` for a round with a URL request is
    /// refused (`managed_input_invalid`, naming the request); decline and cancel apply to
    /// every request.
    ///
    /// ```
    /// use m3_kit::{ElicitationResponse, RoundAnswer};
    ///
    /// let answer =
    ///     RoundAnswer::to_every_request("exec-1", "round-1", ElicitationResponse::decline(), "k-1");
    /// assert!(answer.responses.is_empty());
    /// ```
    pub fn to_every_request(
        execution_id: impl Into<String>,
        round_id: impl Into<String>,
        response: ElicitationResponse,
        idempotency_key: impl Into<String>,
    ) -> Self {
        let mut answer = Self::new(execution_id, round_id, ResponseMap::new(), idempotency_key);
        answer.every_request = Some(response);
        answer
    }

    /// Whether the requested schema's defaults fill missing form fields first.
    pub fn accept_defaults(mut self, yes: bool) -> Self {
        self.accept_defaults = yes;
        self
    }

    /// Answered by `actor`.
    pub fn actor(mut self, actor: Actor) -> Self {
        self.actor = Some(actor);
        self
    }
}

impl AsyncMcpTestKit {
    /// Submits `responses` to round `round_id` of execution `execution_id` under the lease
    /// the round holds now, answered by the kit's actor; see [`answer`](Self::answer).
    ///
    /// # Errors
    /// As [`answer`](Self::answer).
    ///
    /// # Cancel safety
    ///
    /// As [`answer`](Self::answer).
    pub async fn respond_round(
        &self,
        execution_id: &str,
        round_id: &str,
        responses: ResponseMap,
        idempotency_key: &str,
    ) -> Result<RoundDetails> {
        self.answer(RoundAnswer::new(
            execution_id,
            round_id,
            responses,
            idempotency_key,
        ))
        .await
    }

    /// [`respond_round`](Self::respond_round), after filling the fields each accepted form
    /// answer leaves out with the defaults of its requested schema
    /// ([`fill_defaults`](m3_types::form_input::fill_defaults)), as the interactive form
    /// does. The filled answers are validated, stored and replayed like any other.
    ///
    /// # Errors
    /// As [`answer`](Self::answer).
    ///
    /// # Cancel safety
    ///
    /// As [`answer`](Self::answer).
    pub async fn respond_round_with_defaults(
        &self,
        execution_id: &str,
        round_id: &str,
        responses: ResponseMap,
        idempotency_key: &str,
    ) -> Result<RoundDetails> {
        let answer = RoundAnswer::new(execution_id, round_id, responses, idempotency_key)
            .accept_defaults(true);
        self.answer(answer).await
    }

    /// Submits an answer to a round named by its ids under the lease the round holds now,
    /// wakes a local worker, and returns the round as committed (with its redacted
    /// projection and who answered, never the raw responses).
    ///
    /// The same contract as [`AsyncExecutionHandle::respond_elicitation_as`] followed by
    /// [`AsyncExecutionHandle::round`](crate::AsyncExecutionHandle::round), in one read of
    /// the round and its write: the execution record is not read (a round exists only for a
    /// managed execution) and the projection is computed from the committed record by the
    /// rule the store applies ([`redact_responses`]).
    ///
    /// [`AsyncExecutionHandle::respond_elicitation_as`]: crate::AsyncExecutionHandle::respond_elicitation_as
    ///
    /// # Errors
    /// `not_found` for an unknown execution or round; the errors of
    /// [`respond_elicitation`](crate::AsyncExecutionHandle::respond_elicitation).
    ///
    /// # Cancel safety
    ///
    /// As `respond_elicitation`: dropped mid-way, the responses may or may not have been
    /// committed; call it again with the same idempotency key and responses to learn which.
    pub async fn answer(&self, answer: RoundAnswer) -> Result<RoundDetails> {
        let RoundAnswer {
            execution_id,
            round_id,
            mut responses,
            idempotency_key,
            accept_defaults,
            actor,
            every_request,
        } = answer;
        if execution_id.is_empty() || round_id.is_empty() {
            return Err(
                not_found("managed-input round", &round_id).with_detail("round_id", round_id)
            );
        }
        if idempotency_key.is_empty() {
            return Err(Error::managed_input_validation(
                "idempotency_key must be a non-empty string",
            ));
        }
        let store = self.inner.store.managed_input_store().await?;
        let round = RoundRef::new(execution_id, round_id.clone());
        let current = store.get_round(&round).await?.ok_or_else(|| {
            not_found("managed-input round", &round_id).with_detail("round_id", round_id.clone())
        })?;
        if let Some(response) = every_request {
            responses = for_every_request(&current.pending.requests, &response)?;
        }
        if accept_defaults {
            fill_defaults(&current.pending.requests, &mut responses);
        }
        // The store returns the stored record for a repeat of the same key and responses
        // (and refuses other responses): a key already there means this call is a replay.
        let replayed =
            current.response_idempotency_key.as_deref() == Some(idempotency_key.as_str());
        let actor = actor.unwrap_or_else(|| self.inner.actor.clone());
        let submission = ResponseSubmission::new(responses, idempotency_key).with_actor(actor);
        let record = store
            .submit_responses(&round, &LeaseRef::of(&current.lease), submission)
            .await?;
        self.inner.notifier.notify_response(&round_id);
        // A repeat keeps the first answer's actor: read what the store kept.
        let answered_by = store.answered_by(&round).await?;
        let redacted = redacted_projection(&record)?;
        let spec = crate::context::execution_spec(&*self.inner.store, &round.execution_id).await?;
        let diagnostics = RoundDiagnostics::of(&record, redacted, answered_by, spec.as_ref());
        Ok(RoundDetails {
            round: record.pending,
            diagnostics,
            replayed,
        })
    }
}

/// `response` keyed by every request of a round; an accept is refused for a URL request.
fn for_every_request(
    requests: &BTreeMap<String, ElicitationRequest>,
    response: &ElicitationResponse,
) -> Result<ResponseMap> {
    let mut responses = ResponseMap::new();
    for (key, request) in requests {
        if matches!(request, ElicitationRequest::Url(_))
            && response.action == ElicitationAction::Accept
        {
            return Err(Error::managed_input_validation(format!(
                "request '{key}' asks to open an address: accepting it takes its own answer, \
                 not one given to many rounds at once"
            ))
            .with_detail("request_key", key.as_str()));
        }
        responses.insert(key.clone(), response.clone());
    }
    Ok(responses)
}

/// The redacted projection of `record`'s responses, by the store's rule.
fn redacted_projection(record: &ManagedInputRecord) -> Result<Option<Map<String, Value>>> {
    Ok(record
        .responses
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| Error::protocol("cannot encode the responses").with_source(e))?
        .map(|payload| redact_responses(&record.pending.requests, &payload))
        .and_then(|projection| match projection {
            Value::Object(map) => Some(map),
            _ => None,
        }))
}
