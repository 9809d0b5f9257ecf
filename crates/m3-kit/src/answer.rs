//! Answering a round by its ids in one read and one write: the path of a service that
//! receives answers for many executions (the HTTP API), where a handle per answer would
//! cost reads that the answer does not need.

use m3_store::{LeaseRef, ResponseSubmission, RoundRef};
use m3_types::form_input::fill_defaults;
use m3_types::{Error, ResponseMap, Result, redact_responses};

use crate::handle::{RoundDetails, RoundDiagnostics, not_found};
use crate::kit::AsyncMcpTestKit;

impl AsyncMcpTestKit {
    /// Submits `responses` to round `round_id` of execution `execution_id` under the lease
    /// the round holds now, wakes a local worker, and returns the round as committed (with
    /// its redacted projection, never the raw responses).
    ///
    /// The same contract as [`AsyncExecutionHandle::respond_elicitation`] followed by
    /// [`AsyncExecutionHandle::round`](crate::AsyncExecutionHandle::round), in one read of
    /// the round and its write: the execution record is not read (a round exists only for a
    /// managed execution) and the projection is computed from the committed record by the
    /// rule the store applies ([`redact_responses`]).
    ///
    /// [`AsyncExecutionHandle::respond_elicitation`]: crate::AsyncExecutionHandle::respond_elicitation
    ///
    /// # Errors
    /// `not_found` for an unknown execution or round; the errors of
    /// [`respond_elicitation`](crate::AsyncExecutionHandle::respond_elicitation).
    ///
    /// # Cancel safety
    ///
    /// As `respond_elicitation`: dropped mid-way, the responses may or may not have been
    /// committed; call it again with the same idempotency key and responses to learn which.
    pub async fn respond_round(
        &self,
        execution_id: &str,
        round_id: &str,
        responses: ResponseMap,
        idempotency_key: &str,
    ) -> Result<RoundDetails> {
        self.answer_round(execution_id, round_id, responses, idempotency_key, false)
            .await
    }

    /// [`respond_round`](Self::respond_round), after filling the fields each accepted form
    /// answer leaves out with the defaults of its requested schema
    /// ([`fill_defaults`](m3_types::form_input::fill_defaults)), as the interactive form
    /// does. The filled answers are validated, stored and replayed like any other.
    ///
    /// # Errors
    /// As [`respond_round`](Self::respond_round).
    ///
    /// # Cancel safety
    ///
    /// As [`respond_round`](Self::respond_round).
    pub async fn respond_round_with_defaults(
        &self,
        execution_id: &str,
        round_id: &str,
        responses: ResponseMap,
        idempotency_key: &str,
    ) -> Result<RoundDetails> {
        self.answer_round(execution_id, round_id, responses, idempotency_key, true)
            .await
    }

    async fn answer_round(
        &self,
        execution_id: &str,
        round_id: &str,
        mut responses: ResponseMap,
        idempotency_key: &str,
        accept_defaults: bool,
    ) -> Result<RoundDetails> {
        if execution_id.is_empty() || round_id.is_empty() {
            return Err(
                not_found("managed-input round", round_id).with_detail("round_id", round_id)
            );
        }
        if idempotency_key.is_empty() {
            return Err(Error::managed_input_validation(
                "idempotency_key must be a non-empty string",
            ));
        }
        let store = self.inner.store.managed_input_store().await?;
        let round = RoundRef::new(execution_id, round_id);
        let current = store.get_round(&round).await?.ok_or_else(|| {
            not_found("managed-input round", round_id).with_detail("round_id", round_id)
        })?;
        if accept_defaults {
            fill_defaults(&current.pending.requests, &mut responses);
        }
        let submission = ResponseSubmission::new(responses, idempotency_key);
        let record = store
            .submit_responses(&round, &LeaseRef::of(&current.lease), submission)
            .await?;
        self.inner.notifier.notify_response(round_id);
        let redacted = record
            .responses
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| Error::protocol("cannot encode the responses").with_source(e))?
            .map(|payload| redact_responses(&record.pending.requests, &payload))
            .and_then(|projection| match projection {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            });
        let diagnostics = RoundDiagnostics::of(&record, redacted);
        Ok(RoundDetails {
            round: record.pending,
            diagnostics,
        })
    }
}
