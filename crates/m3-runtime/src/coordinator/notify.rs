//! In-process wake-ups for coordinators waiting on a response, and the hook a coordinator
//! calls when its round becomes pending.

use m3_store::signal::ChangeSubscription;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use m3_types::{Error, Result};
use tokio::sync::Notify;

/// Wakes the coordinator that waits on a round when a response for it is
/// committed in the same process.
///
/// The coordinator registers its waiter *before* it persists the round, so a
/// response committed right after `create_round` is never missed; the durable
/// poll covers responses committed by other processes or store objects. A kit
/// shares one notifier between its handles and its workers.
#[derive(Debug, Default)]
pub struct ResponseNotifier {
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
}

impl ResponseNotifier {
    /// An empty notifier.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Registers a waiter for `round_id`.
    pub(crate) fn register(&self, round_id: &str) -> Result<Arc<Notify>> {
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if waiters.contains_key(round_id) {
            return Err(
                Error::managed_input_state("managed-input round already has a waiter")
                    .with_detail("round_id", round_id),
            );
        }
        let notify = Arc::new(Notify::new());
        waiters.insert(round_id.to_owned(), Arc::clone(&notify));
        Ok(notify)
    }

    /// Drops the waiter of `round_id`.
    pub(crate) fn unregister(&self, round_id: &str) {
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(round_id);
    }

    /// Wakes the waiter of `round_id`, if this process has one. Returns whether
    /// a waiter was found. Call it after the response is committed.
    pub fn notify_response(&self, round_id: &str) -> bool {
        let waiter = self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(round_id)
            .cloned();
        match waiter {
            Some(notify) => {
                notify.notify_one();
                true
            }
            None => false,
        }
    }

    /// How many rounds have a waiter in this process.
    pub fn waiting(&self) -> usize {
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Unregisters a round's waiter when dropped.
#[derive(Debug)]
pub(super) struct Registration<'a> {
    notifier: &'a ResponseNotifier,
    round_id: &'a str,
}

impl<'a> Registration<'a> {
    pub(super) fn new(notifier: &'a ResponseNotifier, round_id: &'a str) -> Self {
        Self { notifier, round_id }
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.notifier.unregister(self.round_id);
    }
}

/// What a [`Worker`](crate::Worker) calls when a round of an execution it runs becomes pending (the round
/// stored, the execution `waiting_for_input`): with the execution id and the round id.
#[derive(Clone)]
pub struct RoundPendingHook(Arc<RoundPendingFn>);

/// The function behind a [`RoundPendingHook`]: `(execution_id, round_id)`.
type RoundPendingFn = dyn Fn(&str, &str) + Send + Sync;

impl RoundPendingHook {
    /// A hook calling `f(execution_id, round_id)`; it must not block.
    pub fn new(f: impl Fn(&str, &str) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Calls the hook.
    pub(crate) fn call(&self, execution_id: &str, round_id: &str) {
        (self.0)(execution_id, round_id);
    }
}

impl std::fmt::Debug for RoundPendingHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoundPendingHook")
    }
}

/// What a waiting coordinator wakes on: this process's responders, and the store's
/// change signal (other processes, and the fallback poll).
pub(super) struct Waiters<'a> {
    pub(super) local: &'a tokio::sync::Notify,
    pub(super) changes: ChangeSubscription,
}

/// Sleeps for `budget`, or forever for [`Duration::MAX`] (which no timer can hold).
pub(super) async fn sleep_at_most(budget: Duration) {
    match tokio::time::Instant::now().checked_add(budget) {
        Some(until) if budget != Duration::MAX => tokio::time::sleep_until(until).await,
        _ => std::future::pending().await,
    }
}
