//! Who answered: an accepted submission's actor is stored with the answer, in the same
//! step, read back by every store object on the data, and carried by the `round.answered`
//! change record (and by no other record).

use std::sync::Arc;
use std::time::Duration;

use m3_types::{Actor, ActorSurface, ChangeRecordKind, Cursor};

use super::ExecutionHarness;
use super::support::{Step, TTL, advance, create_managed};
use crate::conformance::CaseResult;
use crate::conformance::check::ensure;
use crate::conformance::fixture::{address_round, submission};
use crate::{CreateRound, LeaseRef, ManagedInputStore, RoundRef};

/// A fresh pending round `round_id` of a new managed execution, with its lease.
async fn pending_round(
    h: &ExecutionHarness,
    round_id: &str,
) -> Step<(Arc<dyn ManagedInputStore>, RoundRef, LeaseRef)> {
    let id = create_managed(h).await?.execution_id;
    let rounds = h.store.managed_input_store().await?;
    let round = rounds
        .create_round(CreateRound::new(
            address_round(&id, round_id),
            "worker-a",
            TTL,
        ))
        .await?;
    Ok((rounds, RoundRef::of(&round), LeaseRef::of(&round.lease)))
}

/// The answer's actor reads back from both store objects and rides on `round.answered`
/// only; a repeat of the same answer by somebody else keeps the first actor.
pub async fn an_answer_keeps_its_actor_in_the_store_and_the_feed(
    h: &ExecutionHarness,
) -> CaseResult {
    let (rounds, round, lease) = pending_round(h, "r0").await?;
    let alice = Actor::new("alice", ActorSurface::Cli)?.with_display_name("Alice")?;
    ensure!(
        rounds.answered_by(&round).await?.is_none(),
        "a pending round has an actor"
    );
    advance(h, Duration::from_millis(5));
    rounds
        .submit_responses(&round, &lease, submission("k1").with_actor(alice.clone()))
        .await?;
    let bob = Actor::new("bob", ActorSurface::Api)?;
    rounds
        .submit_responses(&round, &lease, submission("k1").with_actor(bob))
        .await?;
    rounds.start_delivery(&round, &lease).await?;
    ensure!(
        rounds.answered_by(&round).await?.as_ref() == Some(&alice),
        "the store lost the first answer's actor"
    );
    let peer_rounds = h.peer.managed_input_store().await?;
    ensure!(
        peer_rounds.answered_by(&round).await?.as_ref() == Some(&alice),
        "the peer reads another actor"
    );
    let records = h.store.read_changes(Cursor::START, 100).await?.records;
    for record in records
        .iter()
        .filter(|r| r.round_id.as_ref() == Some(&round.round_id))
    {
        let expected = (record.kind == ChangeRecordKind::RoundAnswered).then_some(&alice);
        ensure!(
            record.actor.as_ref() == expected,
            "{} carries actor {:?}",
            record.kind,
            record.actor
        );
    }
    ensure!(
        records
            .iter()
            .any(|r| r.kind == ChangeRecordKind::RoundAnswered),
        "no round.answered record"
    );
    Ok(())
}

/// An answer that names nobody stores none, and its record says so; a missing round has no
/// actor either.
pub async fn an_answer_without_an_actor_records_none(h: &ExecutionHarness) -> CaseResult {
    let (rounds, round, lease) = pending_round(h, "r0").await?;
    rounds
        .submit_responses(&round, &lease, submission("k1"))
        .await?;
    ensure!(
        rounds.answered_by(&round).await?.is_none(),
        "an actor nobody gave"
    );
    let records = h.store.read_changes(Cursor::START, 100).await?.records;
    ensure!(
        records.iter().all(|r| r.actor.is_none()),
        "a record with an actor nobody gave"
    );
    let missing = RoundRef::new(round.execution_id.clone(), "no-such-round");
    ensure!(
        rounds.answered_by(&missing).await?.is_none(),
        "a missing round has an actor"
    );
    Ok(())
}
