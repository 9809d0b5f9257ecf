//! Prometheus metrics over a kit's store: the scrape (store gauges read at scrape time, then
//! the exposition) and the change-feed follower that derives the round and execution
//! metrics. The registry itself is [`Metrics`] (`m3_runtime::metrics`); the names and what
//! to alert on: `docs/operations.md`.
//!
//! ```no_run
//! # async fn demo(kit: m3_kit::AsyncMcpTestKit) -> m3_kit::Result<()> {
//! let stop = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(m3_kit::metrics::follow_feed(kit.clone(), stop.clone()));
//! let exposition = m3_kit::metrics::scrape(&kit).await?;
//! assert!(exposition.contains("m3_rounds_pending"));
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures_util::StreamExt;
use m3_store::ListExecutions;
use m3_types::{
    ChangeRecord, ChangeRecordKind, Cursor, ExecutionStatus, HumanInput, ManagedInputStatus, Result,
};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

pub use m3_runtime::metrics::{CLASSIC_CONTENT_TYPE, CONTENT_TYPE, Metrics, PendingServer};

use crate::AsyncMcpTestKit;

/// Lifecycle states counted as running in `m3_executions_running`.
const RUNNING: [ExecutionStatus; 4] = [
    ExecutionStatus::Starting,
    ExecutionStatus::Idle,
    ExecutionStatus::RunningTurn,
    ExecutionStatus::Closing,
];

/// Every lifecycle state but `finished`: only these executions can have a pending round,
/// so a scrape never lists the finished ones (most of a long-lived store).
const LIVE: [ExecutionStatus; 7] = [
    ExecutionStatus::Created,
    ExecutionStatus::Queued,
    ExecutionStatus::Starting,
    ExecutionStatus::Idle,
    ExecutionStatus::RunningTurn,
    ExecutionStatus::WaitingForInput,
    ExecutionStatus::Closing,
];

/// Reads the store gauges from `kit`'s store, then renders every metric of the process in
/// OpenMetrics text ([`CONTENT_TYPE`]).
///
/// # Errors
/// `storage_error` when the store cannot be read.
///
/// # Cancel safety
///
/// Cancel-safe: it only reads the store and sets gauges.
pub async fn scrape(kit: &AsyncMcpTestKit) -> Result<String> {
    refresh_store_gauges(kit).await?;
    Metrics::global().render()
}

/// As [`scrape`], in the format `accept` (a request's `Accept` header) asks for; returns
/// the content type and the body (see [`Metrics::render_for`]).
///
/// # Errors
/// `storage_error` when the store cannot be read.
pub async fn scrape_for(
    kit: &AsyncMcpTestKit,
    accept: Option<&str>,
) -> Result<(&'static str, String)> {
    refresh_store_gauges(kit).await?;
    Metrics::global().render_for(accept)
}

/// Sets `m3_rounds_pending` and `m3_rounds_oldest_pending_seconds` (by server),
/// `m3_executions_running` and `m3_executions_waiting` from one read of the store, so every
/// process over the same store reports the same values (ages on the store's clock). It
/// lists the executions of each live lifecycle state (never the finished ones) and the
/// rounds of the managed ones.
///
/// # Errors
/// `storage_error` when the store cannot be read.
pub async fn refresh_store_gauges(kit: &AsyncMcpTestKit) -> Result<()> {
    let now = kit.now();
    let rounds = kit.store().managed_input_store().await?;
    let mut pending: BTreeMap<String, PendingServer> = BTreeMap::new();
    let (mut running, mut waiting) = (0_i64, 0_i64);
    for lifecycle in LIVE {
        let listed = kit
            .store()
            .list_executions(ListExecutions::new().with_lifecycle(lifecycle))
            .await?;
        let count = i64::try_from(listed.len()).unwrap_or(i64::MAX);
        if lifecycle == ExecutionStatus::WaitingForInput {
            waiting += count;
        } else if RUNNING.contains(&lifecycle) {
            running += count;
        }
        for record in listed
            .iter()
            .filter(|r| r.human_input == HumanInput::Managed)
        {
            for round in rounds.list_rounds(&record.execution_id).await? {
                if round.status == ManagedInputStatus::Pending {
                    let waited = (now - round.pending.created_at).as_seconds_f64().max(0.0);
                    pending.entry(round.pending.server).or_default().add(waited);
                }
            }
        }
    }
    Metrics::global().set_store_gauges(&pending, running, waiting);
    Ok(())
}

/// Follows the store's change feed from its start until `stop`, feeding every record to a
/// [`FeedMetrics`] that observes only changes made after the call (older records only
/// teach it when still-open rounds became pending). A read error is logged and the feed
/// is followed again after a second, from the last record seen (from the start if that
/// record was pruned).
///
/// # Errors
/// None so far: errors of the feed are retried until `stop`.
pub async fn follow_feed(kit: AsyncMcpTestKit, stop: CancellationToken) -> Result<()> {
    let mut feed = FeedMetrics::new(kit.now(), Metrics::global());
    let mut after = Cursor::START;
    loop {
        let mut changes = Box::pin(kit.changes(after));
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                next = changes.next() => next,
            };
            match next {
                Some(Ok(record)) => {
                    after = record.cursor;
                    feed.observe(&record);
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "metrics: the change feed could not be read");
                    if error.error_code() == m3_types::ErrorCode::CursorExpired {
                        after = Cursor::START;
                    }
                    break;
                }
                None => break,
            }
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Derives the feed metrics from change records: round wait (pending -> answered, by
/// server and the answering actor's surface), delivery latency (answered -> delivered),
/// rounds by final status and failure code, executions by outcome.
///
/// It remembers when each open round became pending or was answered (ids and times only),
/// and observes only records at or after `since`, so a process that starts over an old
/// feed does not count history again.
#[derive(Debug)]
pub struct FeedMetrics {
    since: OffsetDateTime,
    metrics: &'static Metrics,
    pending: HashMap<String, (OffsetDateTime, String)>,
    answered: HashMap<String, (OffsetDateTime, String)>,
}

impl FeedMetrics {
    /// Observes records at or after `since` into `metrics`.
    pub fn new(since: OffsetDateTime, metrics: &'static Metrics) -> Self {
        Self {
            since,
            metrics,
            pending: HashMap::new(),
            answered: HashMap::new(),
        }
    }

    /// Takes one record into account.
    pub fn observe(&mut self, record: &ChangeRecord) {
        let live = record.at >= self.since;
        if record.kind == ChangeRecordKind::ExecutionFinished {
            if live {
                let outcome = record
                    .execution
                    .and_then(|state| state.outcome)
                    .map_or("unknown", |outcome| outcome.as_str());
                self.metrics.count_execution_finished(outcome);
            }
            return;
        }
        let (Some(round_id), Some(state)) = (record.round_id.as_ref(), record.round.as_ref())
        else {
            return;
        };
        match record.kind {
            ChangeRecordKind::RoundPending => {
                self.pending
                    .insert(round_id.clone(), (record.at, state.server.clone()));
            }
            ChangeRecordKind::RoundAnswered => {
                if let Some((pending_at, server)) = self.pending.remove(round_id)
                    && live
                {
                    let surface = record
                        .actor
                        .as_ref()
                        .map_or("unknown", |actor| actor.surface.as_str());
                    self.metrics.observe_round_wait(
                        &server,
                        surface,
                        seconds(pending_at, record.at),
                    );
                }
                self.answered
                    .insert(round_id.clone(), (record.at, state.server.clone()));
            }
            ChangeRecordKind::RoundDelivered => {
                if let Some((answered_at, server)) = self.answered.remove(round_id)
                    && live
                {
                    self.metrics
                        .observe_round_delivery(&server, seconds(answered_at, record.at));
                }
            }
            ChangeRecordKind::RoundResolved | ChangeRecordKind::RoundFailed => {
                self.pending.remove(round_id);
                self.answered.remove(round_id);
                if live {
                    let code = state.failure_code.as_deref().unwrap_or_default();
                    self.metrics
                        .count_round_finished(state.status.as_str(), code);
                }
            }
            _ => {}
        }
    }
}

/// Seconds from `from` to `to`, never negative.
fn seconds(from: OffsetDateTime, to: OffsetDateTime) -> f64 {
    (to - from).as_seconds_f64().max(0.0)
}

#[cfg(test)]
mod tests {
    use m3_types::{Actor, ActorSurface, ManagedInputStatus, RoundChangeState};
    use time::macros::datetime;

    use super::*;

    fn round(cursor: u64, status: ManagedInputStatus, at: OffsetDateTime) -> ChangeRecord {
        let state = RoundChangeState::new(0, status, "shop", None, "book", None);
        ChangeRecord::of_round(Cursor::new(cursor), "ex", "r1", at, state)
    }

    #[test]
    fn a_round_observed_from_pending_to_resolved() -> Result<()> {
        let metrics: &'static Metrics = Box::leak(Box::new(Metrics::new()));
        let start = datetime!(2026-12-01 10:00 UTC);
        let mut feed = FeedMetrics::new(start, metrics);
        feed.observe(&round(1, ManagedInputStatus::Pending, start));
        let answered = round(
            2,
            ManagedInputStatus::ResponseValidated,
            datetime!(2026-12-01 10:00:42 UTC),
        )
        .with_actor(Some(Actor::new("alice", ActorSurface::Cli)?));
        feed.observe(&answered);
        feed.observe(&round(
            3,
            ManagedInputStatus::Delivered,
            datetime!(2026-12-01 10:00:42.5 UTC),
        ));
        feed.observe(&round(
            4,
            ManagedInputStatus::Resolved,
            datetime!(2026-12-01 10:00:43 UTC),
        ));
        let text = metrics.render()?;
        for expected in [
            "m3_round_wait_seconds_sum{server=\"shop\",surface=\"cli\"} 42.0",
            "m3_round_delivery_seconds_sum{server=\"shop\"} 0.5",
            "m3_rounds_finished_total{status=\"resolved\",failure_code=\"\"} 1",
        ] {
            assert!(text.contains(expected), "{expected} missing in\n{text}");
        }
        Ok(())
    }

    #[test]
    fn history_before_the_start_is_not_counted() -> Result<()> {
        let metrics: &'static Metrics = Box::leak(Box::new(Metrics::new()));
        let start = datetime!(2026-12-01 10:00 UTC);
        let mut feed = FeedMetrics::new(start, metrics);
        let earlier = datetime!(2026-12-01 09:00 UTC);
        feed.observe(&round(1, ManagedInputStatus::Pending, earlier));
        feed.observe(&round(2, ManagedInputStatus::Failed, earlier));
        assert!(!metrics.render()?.contains("m3_rounds_finished_total{"));
        Ok(())
    }
}
