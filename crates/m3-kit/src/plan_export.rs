//! A managed execution's answers as an elicitation plan: what a person answered once,
//! replayed by every later run (`m3 plans record`, `m3 rounds --export-plan`).

use m3_types::plan::{ElicitationPlan, PlanEntry, schema_digest};
use m3_types::{ElicitationRequest, HumanInput, ManagedInputRecord, Result};

use crate::handle::AsyncExecutionHandle;

impl AsyncExecutionHandle {
    /// The answered rounds of this managed execution as a plan, oldest round first: one
    /// entry per answered request, scoped to its server, operation and request key, and to
    /// the requested schema's digest for a form (a server that changes its form no longer
    /// matches). Rounds without a committed answer (pending, failed before an answer) are
    /// left out; an execution that is not managed gives an empty plan.
    ///
    /// **The plan holds the response values themselves**, which the store otherwise keeps
    /// only in the rounds' response columns: treat it as a secret (the `m3` commands write
    /// it only with `--include-values`, to a file only its owner can read).
    ///
    /// # Errors
    /// `storage_error`; `managed_input_invalid` for a stored schema canonical JSON cannot
    /// encode.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn plan_with_answer_values(&self) -> Result<ElicitationPlan> {
        if self.human_input() != HumanInput::Managed {
            return Ok(ElicitationPlan::builder().build());
        }
        let store = self.kit().store.managed_input_store().await?;
        let mut records = store.list_rounds(self.execution_id()).await?;
        records.sort_by_key(|record| (record.pending.created_at, record.round_index));
        let mut builder = ElicitationPlan::builder();
        for record in &records {
            for entry in entries(record)? {
                builder = builder.entry(entry);
            }
        }
        Ok(builder.build())
    }
}

/// The plan entries of one answered round (none when it holds no answer).
fn entries(record: &ManagedInputRecord) -> Result<Vec<PlanEntry>> {
    let Some(responses) = &record.responses else {
        return Ok(Vec::new());
    };
    let round = &record.pending;
    let mut entries = Vec::new();
    for (key, response) in responses {
        let mut entry = PlanEntry::new(key.as_str(), response.clone())
            .server(round.server.as_str())
            .operation(round.operation_kind, round.operation_name.as_str());
        if let Some(ElicitationRequest::Form(form)) = round.requests.get(key) {
            entry = entry.schema_digest(schema_digest(&form.requested_schema)?);
        }
        entries.push(entry);
    }
    Ok(entries)
}
