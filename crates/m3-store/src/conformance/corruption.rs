//! Damaged stored rows surface as `managed_input_invalid` ("stored ..."), never as a panic,
//! a wrong record or a storage error.

use super::check::{CaseFailure, expect_error};
use super::fixture::{EXECUTION, Step, lease, pending, round_ref, submission, validated};
use super::{CaseResult, Corruption, Harness};

const INVALID: &str = "managed_input_invalid";

async fn reads_report_stored_corruption(h: &Harness) -> Step<()> {
    expect_error(h.store.get_round(&round_ref()).await, INVALID, "stored")?;
    expect_error(h.store.list_rounds(EXECUTION).await, INVALID, "stored")?;
    expect_error(h.peer.get_round(&round_ref()).await, INVALID, "stored")?;
    Ok(())
}

async fn corrupt(h: &Harness, corruption: Corruption) -> Step<()> {
    h.corruptor
        .corrupt(&round_ref(), corruption)
        .await
        .map_err(|e| CaseFailure::new(format!("the harness could not corrupt the row: {e}")))
}

/// A pending round that is not a JSON object.
pub async fn corrupt_pending_json_is_a_stored_validation_error(h: &Harness) -> CaseResult {
    pending(h).await?;
    corrupt(h, Corruption::PendingNotObject).await?;
    reads_report_stored_corruption(h).await?;
    expect_error(
        h.store
            .submit_responses(&round_ref(), &lease(), submission("key-1"))
            .await,
        INVALID,
        "stored",
    )?;
    Ok(())
}

/// Responses that are not a JSON object.
pub async fn corrupt_responses_json_is_a_stored_validation_error(h: &Harness) -> CaseResult {
    validated(h).await?;
    corrupt(h, Corruption::ResponsesNotObject).await?;
    reads_report_stored_corruption(h).await?;
    expect_error(
        h.store.start_delivery(&round_ref(), &lease()).await,
        INVALID,
        "stored",
    )?;
    Ok(())
}

/// Operation parameters that are not a JSON object.
pub async fn corrupt_operation_parameters_are_a_stored_validation_error(h: &Harness) -> CaseResult {
    pending(h).await?;
    corrupt(h, Corruption::OperationParametersNotObject).await?;
    reads_report_stored_corruption(h).await
}

/// A status outside the six.
pub async fn corrupt_status_is_a_stored_validation_error(h: &Harness) -> CaseResult {
    pending(h).await?;
    corrupt(h, Corruption::UnknownStatus).await?;
    reads_report_stored_corruption(h).await?;
    expect_error(
        h.store
            .renew(&round_ref(), &lease(), super::fixture::LEASE)
            .await,
        INVALID,
        "stored",
    )?;
    Ok(())
}

/// A timestamp that does not parse.
pub async fn corrupt_timestamp_is_a_stored_validation_error(h: &Harness) -> CaseResult {
    pending(h).await?;
    corrupt(h, Corruption::UnparsableTimestamp).await?;
    reads_report_stored_corruption(h).await
}

/// A redacted projection that is not a JSON object.
pub async fn corrupt_redacted_projection_is_a_validation_error(h: &Harness) -> CaseResult {
    validated(h).await?;
    corrupt(h, Corruption::RedactedResponsesNotObject).await?;
    expect_error(
        h.store.redacted_responses(&round_ref()).await,
        INVALID,
        "stored redacted",
    )?;
    Ok(())
}
