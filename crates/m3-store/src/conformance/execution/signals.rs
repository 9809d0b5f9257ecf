//! The change signal: a committed change is observable by a waiter subscribed on another
//! store object, through the signal or, at worst, its fallback poll.

use std::future::Future;
use std::time::Duration;

use m3_types::ExecutionStatus;

use super::ExecutionHarness;
use super::support::{Step, create, create_managed};
use crate::conformance::CaseFailure;
use crate::conformance::check::ensure;
use crate::conformance::fixture::address_round;
use crate::signal::{ChangeSubscription, Topic};
use crate::{CreateRound, ExecutionStore, RoundRef};

/// How many wake-ups a waiter gets to observe a change; each is at most one fallback
/// interval, so a backend without a signal passes too.
const WAKE_UPS: u32 = 3;

/// Checks that `observed` is false, runs `commit`, then waits on `subscription` until
/// `observed` reads true: at most [`WAKE_UPS`] wake-ups, and never longer than those
/// fallback intervals plus a margin.
async fn observe<C, F, Fut>(
    mut subscription: ChangeSubscription,
    what: &str,
    commit: C,
    observed: F,
) -> Step<()>
where
    C: Future<Output = m3_types::Result<()>>,
    F: Fn() -> Fut,
    Fut: Future<Output = m3_types::Result<bool>>,
{
    ensure!(!observed().await?, "{what}: observed before the commit");
    commit.await?;
    let limit = subscription.fallback() * (WAKE_UPS + 1) + Duration::from_secs(5);
    let wait = async {
        for _ in 0..WAKE_UPS {
            subscription.changed().await;
            if observed().await? {
                return Ok(true);
            }
        }
        Ok::<_, m3_types::Error>(false)
    };
    match tokio::time::timeout(limit, wait).await {
        Ok(Ok(true)) => Ok(()),
        Ok(Ok(false)) => Err(CaseFailure::new(format!(
            "{what}: not observable after {WAKE_UPS} wake-ups"
        ))),
        Ok(Err(error)) => Err(error.into()),
        Err(_) => Err(CaseFailure::new(format!(
            "{what}: the subscription slept longer than its fallback interval"
        ))),
    }
}

async fn lifecycle_is(
    store: &dyn ExecutionStore,
    id: &str,
    lifecycle: ExecutionStatus,
) -> m3_types::Result<bool> {
    Ok(store
        .get_execution(id)
        .await?
        .is_some_and(|r| r.lifecycle == lifecycle))
}

/// A cancel request, a queued execution and a new round, each committed through the store,
/// are observed by waiters subscribed on the peer (another store object on the same data).
pub async fn a_committed_change_is_observable_through_the_signal_or_its_poll(
    h: &ExecutionHarness,
) -> Step<()> {
    let signal = h.peer.change_signal();
    ensure!(
        !signal.mechanism().is_empty(),
        "a signal names its mechanism"
    );
    let execution = create(h).await?.execution_id;
    let cancel = signal.subscribe(Topic::Execution(execution.clone()));
    let request = async {
        h.store.request_cancel(&execution, Some("test")).await?;
        Ok(())
    };
    observe(cancel, "a cancel request", request, || {
        h.peer.is_cancel_requested(&execution)
    })
    .await?;

    let queued = signal.subscribe(Topic::Queue);
    let queue = async {
        h.store
            .transition(&execution, ExecutionStatus::Queued, None)
            .await?;
        Ok(())
    };
    observe(queued, "a queued execution", queue, || {
        lifecycle_is(h.peer.as_ref(), &execution, ExecutionStatus::Queued)
    })
    .await?;

    let managed = create_managed(h).await?.execution_id;
    let rounds = signal.subscribe(Topic::Rounds);
    let round = address_round(&managed, "signal-round");
    let create_round = async {
        h.store
            .managed_input_store()
            .await?
            .create_round(CreateRound::new(round, "worker-a", Duration::from_secs(30)))
            .await?;
        Ok(())
    };
    let peer_rounds = h.peer.managed_input_store().await?;
    let reference = RoundRef::new(managed.clone(), "signal-round");
    observe(rounds, "a created round", create_round, || async {
        Ok(peer_rounds.get_round(&reference).await?.is_some())
    })
    .await
}
