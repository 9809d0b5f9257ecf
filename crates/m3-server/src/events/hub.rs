//! The server's fact log and its fan-out: an [`EventHub`] reads the store's facts once
//! per [`ChangeSignal::changed`], appends the new ones to its ordered log and sends them
//! to every [`Subscription`]; a subscriber resumes from an event id.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_kit::AsyncMcpTestKit;
use m3_store::signal::{ChangeSubscription, Topic};
use tokio::sync::{OnceCell, broadcast};
use tokio_util::sync::CancellationToken;

use super::facts::{self, Fact};

/// How far before a foreign event id's time a resume replays (covers commits
/// that became visible after later ones).
const RESUME_GRACE_MICROS: i64 = 10_000_000;

/// Subscribers that fall this far behind are disconnected (they resume).
const CHANNEL_CAPACITY: usize = 1024;

/// Tells the hub when the store may have changed.
pub(crate) trait ChangeSignal: Send + Sync + std::fmt::Debug {
    /// Completes when the store may have changed since the last call.
    fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The polling fallback: "maybe changed" every interval.
#[derive(Debug)]
pub(crate) struct PollEvery(pub(crate) Duration);

impl ChangeSignal for PollEvery {
    fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(tokio::time::sleep(self.0))
    }
}

/// The store's change signal: "maybe changed" after any commit (of any
/// process) and at the signal's fallback poll.
#[derive(Debug)]
pub(crate) struct StoreSignal(tokio::sync::Mutex<ChangeSubscription>);

impl ChangeSignal for StoreSignal {
    fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            self.0.lock().await.changed().await;
        })
    }
}

/// The store's signal when it can wake the hub, else a poll every `poll`.
fn signal_for(kit: &AsyncMcpTestKit, poll: Duration) -> Arc<dyn ChangeSignal> {
    let subscription = kit.store().change_signal().subscribe(Topic::All);
    if subscription.is_signalled() {
        Arc::new(StoreSignal(tokio::sync::Mutex::new(subscription)))
    } else {
        Arc::new(PollEvery(poll))
    }
}

/// The server's fact log and its fan-out; started by the first subscriber.
#[derive(Debug)]
pub(crate) struct EventHub {
    kit: AsyncMcpTestKit,
    signal: Arc<dyn ChangeSignal>,
    shutdown: CancellationToken,
    started: OnceCell<Arc<Log>>,
}

/// What the poller appends to and subscribers read.
#[derive(Debug)]
struct Log {
    epoch: String,
    inner: Mutex<LogInner>,
    sender: broadcast::Sender<Fact>,
}

#[derive(Debug, Default)]
struct LogInner {
    facts: Vec<Fact>,
    seen: HashSet<String>,
    /// Executions whose every fact is in the log (finished and read once).
    done: HashSet<String>,
}

/// A subscription: the facts to replay, then the live ones.
pub(crate) struct Subscription {
    pub(crate) replay: Vec<Fact>,
    pub(crate) live: broadcast::Receiver<Fact>,
}

impl EventHub {
    /// A hub on `kit`'s store, woken by its change signal (`poll`: the interval when the
    /// store has none).
    pub(crate) fn new(kit: AsyncMcpTestKit, poll: Duration, shutdown: CancellationToken) -> Self {
        Self {
            signal: signal_for(&kit, poll),
            kit,
            shutdown,
            started: OnceCell::new(),
        }
    }

    async fn log(&self) -> m3_types::Result<Arc<Log>> {
        self.started
            .get_or_try_init(|| async {
                let (sender, _) = broadcast::channel(CHANNEL_CAPACITY);
                let log = Arc::new(Log {
                    epoch: m3_types::new_id(),
                    inner: Mutex::new(LogInner::default()),
                    sender,
                });
                log.scan(&self.kit).await?;
                tokio::spawn(poll(
                    Arc::clone(&log),
                    self.kit.clone(),
                    Arc::clone(&self.signal),
                    self.shutdown.clone(),
                ));
                Ok(log)
            })
            .await
            .cloned()
    }

    /// The id of the newest fact (the cursor a page starts its stream from).
    pub(crate) async fn cursor(&self) -> m3_types::Result<Option<String>> {
        let log = self.log().await?;
        let inner = log.inner.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(inner.facts.last().map(|fact| fact.id(&log.epoch)))
    }

    /// Subscribes after `last_event_id` (none: live facts only).
    pub(crate) async fn subscribe(
        &self,
        last_event_id: Option<&str>,
    ) -> m3_types::Result<(String, Subscription)> {
        let log = self.log().await?;
        let inner = log.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let replay = match last_event_id.and_then(EventId::parse) {
            None => Vec::new(),
            Some(id) if id.epoch == log.epoch => inner
                .facts
                .iter()
                .skip(usize::try_from(id.index.saturating_add(1)).unwrap_or(usize::MAX))
                .cloned()
                .collect(),
            Some(id) => inner
                .facts
                .iter()
                .filter(|fact| fact.at_micros >= id.micros.saturating_sub(RESUME_GRACE_MICROS))
                .cloned()
                .collect(),
        };
        // Appends and sends happen under this lock: the receiver gets exactly
        // the facts after `replay`.
        let live = log.sender.subscribe();
        drop(inner);
        Ok((log.epoch.clone(), Subscription { replay, live }))
    }
}

impl Log {
    /// Reads the store and appends the facts not seen yet, oldest first.
    async fn scan(&self, kit: &AsyncMcpTestKit) -> m3_types::Result<()> {
        let done = {
            let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner.done.clone()
        };
        let read = facts::read(kit, &done).await?;
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.done.extend(read.finished);
        let mut fresh: Vec<Fact> = read
            .facts
            .into_iter()
            .filter(|fact| !inner.seen.contains(&fact.key))
            .collect();
        fresh.sort_by(|a, b| {
            (a.at_micros, a.order(), &a.key).cmp(&(b.at_micros, b.order(), &b.key))
        });
        for mut fact in fresh {
            fact.index = inner.facts.len() as u64;
            inner.seen.insert(fact.key.clone());
            inner.facts.push(fact.clone());
            // No receiver is not an error: nobody listens right now.
            let _ = self.sender.send(fact);
        }
        Ok(())
    }
}

async fn poll(
    log: Arc<Log>,
    kit: AsyncMcpTestKit,
    signal: Arc<dyn ChangeSignal>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = signal.changed() => {}
        }
        if let Err(error) = log.scan(&kit).await {
            tracing::warn!(%error, "reading the store for events failed; trying again");
        }
    }
}

/// A parsed `EPOCH.INDEX.MICROS` event id.
#[derive(Debug, PartialEq)]
struct EventId {
    epoch: String,
    index: u64,
    micros: i64,
}

impl EventId {
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('.');
        let epoch = parts.next()?.to_owned();
        let index = parts.next()?.parse().ok()?;
        let micros = parts.next()?.parse().ok()?;
        parts.next().is_none().then_some(Self {
            epoch,
            index,
            micros,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_parse_or_are_ignored() {
        assert_eq!(
            EventId::parse("01J.3.1700000000000000"),
            Some(EventId {
                epoch: "01J".into(),
                index: 3,
                micros: 1_700_000_000_000_000
            })
        );
        assert_eq!(EventId::parse("garbage"), None);
        assert_eq!(EventId::parse("a.b.c"), None);
        assert_eq!(EventId::parse("a.1.2.3"), None);
    }
}
