//! Policies and deadline reminders: policies are shared by every store object on the data,
//! unique by name, checked when added (a refused one changes nothing) and removed for all at
//! once; a deadline reminder is appended once per round and fraction, whichever store
//! object asks and however often, only while the round is pending, and carries the fraction
//! and the deadline, never an answer.

use std::time::Duration;

use m3_types::{ChangeRecordKind, Cursor, DeadlineReminder, ElicitationResponse, Reason};
use serde_json::json;

use super::ExecutionHarness;
use super::support::{INVALID_ARGUMENT, NOT_FOUND, TTL, advance, create_managed};
use crate::conformance::check::{ensure, expect_error};
use crate::conformance::fixture::{address_round, submission};
use crate::conformance::{CaseFailure, CaseResult};
use crate::policies::NewPolicy;
use crate::{CreateRound, LeaseRef, RoundRef};

/// A policy added on one store object is listed by the other; names are unique; a refused
/// policy adds nothing; a removed one is gone for both.
pub async fn policies_are_shared_unique_and_removed(h: &ExecutionHarness) -> CaseResult {
    let policies = h.store.policy_store().await?;
    let peer = h.peer.policy_store().await?;
    let minute = Duration::from_secs(60);
    let decline = policies
        .add_policy(
            NewPolicy::new("decline-late", minute, ElicitationResponse::decline())
                .server("shipping"),
        )
        .await?;
    advance(h, Duration::from_millis(5));
    let content = json!({"street": "1 Main Street", "city": "Pune"});
    let accept = peer
        .add_policy(NewPolicy::new(
            "accept-home",
            minute * 2,
            ElicitationResponse::accept(content.as_object().cloned().unwrap_or_default()),
        ))
        .await?;
    ensure!(
        decline.created_at < accept.created_at,
        "not stamped by the store's clock"
    );
    expect_error(
        peer.add_policy(NewPolicy::new(
            "decline-late",
            minute,
            ElicitationResponse::cancel(),
        ))
        .await,
        INVALID_ARGUMENT,
        Some(Reason::PolicyNameTaken),
    )?;
    let nested = json!({"address": {"city": "Pune"}});
    expect_error(
        policies
            .add_policy(NewPolicy::new(
                "nested",
                minute,
                ElicitationResponse::accept(nested.as_object().cloned().unwrap_or_default()),
            ))
            .await,
        INVALID_ARGUMENT,
        Some(Reason::InvalidPolicy),
    )?;
    let listed = peer.list_policies().await?;
    ensure!(
        listed == vec![decline.clone(), accept.clone()],
        "listed {listed:?}"
    );
    ensure!(
        policies.remove_policy("decline-late").await? == decline,
        "removed another policy"
    );
    ensure!(
        peer.list_policies().await? == vec![accept],
        "a removed policy is listed"
    );
    expect_error(peer.remove_policy("decline-late").await, NOT_FOUND, None)?;
    Ok(())
}

/// A reminder is appended once per round and fraction (both store objects, repeated), in
/// the order asked, with the round's state, the fraction and the deadline; none for a round
/// that is not pending or does not exist.
pub async fn deadline_reminders_are_appended_once_per_fraction(h: &ExecutionHarness) -> CaseResult {
    let id = create_managed(h).await?.execution_id;
    let rounds = h.store.managed_input_store().await?;
    let deadline = crate::conformance::start_time() + Duration::from_secs(100);
    let mut pending = address_round(&id, "r0");
    pending.deadline = Some(deadline);
    let round = rounds
        .create_round(CreateRound::new(pending, "worker-a", TTL))
        .await?;
    let before = h.store.read_changes(Cursor::START, 1_000).await?.next;
    let half = DeadlineReminder::new(0.5, deadline)?;
    let late = DeadlineReminder::new(0.9, deadline)?;
    ensure!(
        h.store.remind_deadline(&id, "r0", half).await?,
        "the first reminder was not appended"
    );
    ensure!(
        !h.peer.remind_deadline(&id, "r0", half).await?,
        "a repeated reminder was appended"
    );
    ensure!(
        h.peer.remind_deadline(&id, "r0", late).await?,
        "the second fraction was not appended"
    );
    ensure!(
        !h.store.remind_deadline(&id, "r0", late).await?,
        "a repeated reminder was appended"
    );
    ensure!(
        !h.store.remind_deadline(&id, "missing", half).await?,
        "a missing round was reminded"
    );
    let page = h.peer.read_changes(before, 1_000).await?;
    let reminders: Vec<_> = page
        .records
        .iter()
        .filter(|r| r.kind == ChangeRecordKind::RoundDeadlineApproaching)
        .collect();
    ensure!(
        page.records.len() == 2 && reminders.len() == 2,
        "appended {:?}",
        page.records.iter().map(|r| r.kind).collect::<Vec<_>>()
    );
    for (record, fraction) in reminders.iter().zip([0.5, 0.9]) {
        let reminder = record
            .reminder
            .ok_or_else(|| CaseFailure::new("a reminder without its fraction"))?;
        ensure!(
            reminder.fraction == fraction && reminder.deadline == deadline,
            "reminder {reminder:?}"
        );
        ensure!(
            record.round_id.as_deref() == Some("r0")
                && record
                    .round
                    .as_ref()
                    .is_some_and(|state| state.server == "shipping"),
            "the record does not name its round: {record:?}"
        );
        ensure!(record.actor.is_none(), "a reminder names an actor");
    }
    let (round_ref, lease) = (RoundRef::of(&round), LeaseRef::of(&round.lease));
    rounds
        .submit_responses(&round_ref, &lease, submission("k1"))
        .await?;
    let third = DeadlineReminder::new(0.75, deadline)?;
    ensure!(
        !h.store.remind_deadline(&id, "r0", third).await?,
        "an answered round was reminded"
    );
    Ok(())
}
