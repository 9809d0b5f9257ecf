//! Damaged stored rows surface as `managed_input_invalid` ("stored ..."), never as a panic,
//! a wrong record or a storage error.

use m3_types::Reason;

use super::check::{CaseFailure, ensure, expect_error};
use super::fixture::{
    EXECUTION, LEASE, OWNER, ROUND, Step, address_round, lease, pending, round_ref, submission,
    validated,
};
use super::{CaseResult, Corruption, Harness};
use crate::CreateRound;

const INVALID: &str = "managed_input_invalid";

async fn reads_report_stored_corruption(h: &Harness) -> Step<()> {
    expect_error(
        h.store.get_round(&round_ref()).await,
        INVALID,
        Some(Reason::StoredRecordInvalid),
    )?;
    let scan = h.store.scan_rounds(EXECUTION).await?;
    ensure!(
        scan.rounds.is_empty() && scan.unreadable.len() == 1,
        "the scan must report the one unreadable round: {scan:?}"
    );
    let unreadable = &scan.unreadable[0];
    ensure!(
        unreadable.round_id == ROUND
            && unreadable.error.code() == INVALID
            && unreadable.error.reason() == Some(Reason::StoredRecordInvalid),
        "unexpected unreadable report: {unreadable:?}"
    );
    ensure!(
        h.store.list_rounds(EXECUTION).await?.is_empty(),
        "list_rounds must skip the unreadable round"
    );
    expect_error(
        h.peer.get_round(&round_ref()).await,
        INVALID,
        Some(Reason::StoredRecordInvalid),
    )?;
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
        Some(Reason::StoredRecordInvalid),
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
        Some(Reason::StoredRecordInvalid),
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
        Some(Reason::StoredRecordInvalid),
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
        Some(Reason::StoredRecordInvalid),
    )?;
    Ok(())
}

/// One damaged row never stops the listing of the execution's other rounds: it is reported
/// by `scan_rounds` and skipped by `list_rounds`.
pub async fn one_unreadable_round_does_not_hide_the_others(h: &Harness) -> CaseResult {
    pending(h).await?;
    let other = h
        .store
        .create_round(
            CreateRound::new(address_round(EXECUTION, "round-2"), OWNER, LEASE).with_round_index(1),
        )
        .await?;
    corrupt(h, Corruption::UnknownStatus).await?;
    let listed = h.store.list_rounds(EXECUTION).await?;
    ensure!(
        listed == vec![other.clone()],
        "list_rounds must return the readable round only"
    );
    let scan = h.peer.scan_rounds(EXECUTION).await?;
    ensure!(
        scan.rounds == vec![other] && scan.unreadable.len() == 1,
        "scan_rounds must count the unreadable round: {scan:?}"
    );
    Ok(())
}
