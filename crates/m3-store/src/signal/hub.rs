//! [`ChangeHub`]: the in-process fan-out of changes to subscriptions, and
//! [`ChangeSubscription`], what a waiter awaits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::change::{Change, ChangeKind, Topic};
use super::probe::{self, ChangeProbe, SweepGuard, Swept};
use super::wake::{DEFAULT_FALLBACK_POLL, SAFETY_POLL, Wake};

/// The in-process fan-out of announced changes to the matching subscriptions.
///
/// Cheap to clone (clones share the subscriptions). Publishing costs one map lookup for the
/// execution's own subscriptions plus one check per broad subscription ([`Topic::Rounds`],
/// [`Topic::Queue`], [`Topic::All`]), so thousands of waiting executions cost nothing while
/// nothing changes. As a [`ChangeSignal`](super::ChangeSignal) it is the signal of a
/// single-process backend (the memory backend's); a multi-process backend keeps one and
/// calls [`publish`](Self::publish) for every change it hears of from other processes.
///
/// A hub is *live* while every change a waiter cares about reaches it (a single-process
/// backend's hub always is; a multi-process backend's only while it hears from the other
/// processes, see [`set_live`](Self::set_live)). A live hub's subscriptions re-read on
/// their own only every [`SAFETY_POLL`] (a change announced but lost on the way still
/// costs latency only), a hub that is not live's every fallback interval
/// ([`DEFAULT_FALLBACK_POLL`]): 1,000 waiters on a live hub cost 1,000 reads per 30 s,
/// not per second. With a [`ChangeProbe`] attached ([`attach_probe`](Self::attach_probe)),
/// the [`Topic::Execution`] subscriptions of a live hub do not re-read on their own at all:
/// one sweep per hub reads the marks of all their executions every safety interval and
/// wakes only those whose mark changed (see [`super::probe`]).
///
/// ```
/// # async fn demo() {
/// use m3_store::signal::{Change, ChangeHub, ChangeKind, ChangeSignal, Topic, Wake};
///
/// let hub = ChangeHub::new();
/// let mut waiting = hub.subscribe(Topic::Execution("e1".into()));
/// hub.publish(&Change::new("e1", ChangeKind::Round));
/// assert_eq!(waiting.changed().await, Wake::Signalled);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ChangeHub {
    shared: Arc<Shared>,
}

#[derive(Debug)]
pub(super) struct Shared {
    /// The re-read interval while the hub is not live.
    fallback: Duration,
    /// The re-read interval while it is.
    safety: Duration,
    live: AtomicBool,
    state: Mutex<State>,
    /// The backends' batched re-reads; the first one still alive is used.
    probes: Mutex<Vec<Weak<dyn ChangeProbe>>>,
    /// Whether this hub's sweep task runs.
    sweeping: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Subscriptions to [`Topic::Execution`], by execution id.
    by_execution: HashMap<String, HashMap<u64, Arc<Notify>>>,
    /// Every other subscription, with its topic.
    broad: HashMap<u64, (Topic, Arc<Notify>)>,
}

impl State {
    /// Every [`Topic::Execution`] subscription.
    fn execution_notifies(&self) -> impl Iterator<Item = &Arc<Notify>> {
        self.by_execution.values().flat_map(HashMap::values)
    }

    /// Every subscription.
    fn all_notifies(&self) -> impl Iterator<Item = &Arc<Notify>> {
        let broad = self.broad.values().map(|(_, notify)| notify);
        self.execution_notifies().chain(broad)
    }
}

/// Wakes the collected subscriptions. Called after the hub's lock is released: a waker may
/// run foreign code (another executor's, or one that drops a subscription inline), and the
/// lock is not re-entrant.
fn wake_all(woken: &[Arc<Notify>]) {
    woken.iter().for_each(|notify| notify.notify_one());
}

impl Default for ChangeHub {
    fn default() -> Self {
        Self::new()
    }
}

impl ChangeHub {
    /// A live hub: its subscriptions re-read on their own every [`SAFETY_POLL`], or every
    /// [`DEFAULT_FALLBACK_POLL`] once [`set_live(false)`](Self::set_live).
    pub fn new() -> Self {
        Self::with_intervals(DEFAULT_FALLBACK_POLL, SAFETY_POLL)
    }

    /// A hub whose subscriptions wake on their own every `fallback` (at least 1 ms), live
    /// or not.
    pub fn with_fallback(fallback: Duration) -> Self {
        Self::with_intervals(fallback, fallback)
    }

    /// A live hub whose subscriptions wake on their own every `safety` while it is live and
    /// every `fallback` while it is not (each at least 1 ms).
    pub fn with_intervals(fallback: Duration, safety: Duration) -> Self {
        let floor = Duration::from_millis(1);
        Self {
            shared: Arc::new(Shared {
                fallback: fallback.max(floor),
                safety: safety.max(floor),
                live: AtomicBool::new(true),
                state: Mutex::new(State::default()),
                probes: Mutex::new(Vec::new()),
                sweeping: AtomicBool::new(false),
            }),
        }
    }

    /// Lets `probe` stand in for the safety re-reads of this hub's [`Topic::Execution`]
    /// subscriptions while the hub is live (see [`super::probe`]). The hub keeps only a weak
    /// reference: the probe serves while its owner (the store object) keeps it; after that
    /// the subscriptions re-read on their own again.
    pub fn attach_probe(&self, probe: &Arc<dyn ChangeProbe>) {
        let mut probes = self.shared.probes();
        probes.retain(|probe| probe.strong_count() > 0);
        probes.push(Arc::downgrade(probe));
    }

    /// Whether a probe is attached and alive.
    pub fn has_probe(&self) -> bool {
        self.shared.probe().is_some()
    }

    /// The interval after which this hub's subscriptions re-read on their own now: the
    /// safety interval while it is live, else the fallback interval.
    pub fn fallback(&self) -> Duration {
        self.shared.interval()
    }

    /// Whether every change reaches this hub (see the type's documentation).
    pub fn is_live(&self) -> bool {
        self.shared.live.load(Ordering::Acquire)
    }

    /// Marks whether every change reaches this hub. A multi-process backend clears it while
    /// it cannot hear the other processes (no socket bound, its reader gone), so its
    /// waiters fall back to the short poll; subscriptions follow at their next wait. Going
    /// from live to not live wakes every subscription, so none sleeps out a safety
    /// interval.
    pub fn set_live(&self, live: bool) {
        let was = self.shared.live.swap(live, Ordering::AcqRel);
        if was && !live {
            self.publish(&Change::any());
        }
    }

    /// Wakes every subscription whose topic matches `change` (all of them for
    /// [`ChangeKind::Any`]). A subscription that is not waiting keeps the wake-up for its
    /// next [`changed`](ChangeSubscription::changed).
    pub fn publish(&self, change: &Change) {
        let woken: Vec<Arc<Notify>> = {
            let state = self.shared.lock();
            if change.kind == ChangeKind::Any {
                state.all_notifies().cloned().collect()
            } else {
                let by_execution = state
                    .by_execution
                    .get(&change.execution_id)
                    .into_iter()
                    .flat_map(HashMap::values);
                let broad = state
                    .broad
                    .values()
                    .filter(|(topic, _)| topic.matches(change))
                    .map(|(_, notify)| notify);
                by_execution.chain(broad).cloned().collect()
            }
        };
        wake_all(&woken);
    }

    /// How many subscriptions are open.
    pub fn subscriptions(&self) -> usize {
        let state = self.shared.lock();
        state.broad.len() + state.by_execution.values().map(HashMap::len).sum::<usize>()
    }

    pub(super) fn register(&self, topic: Topic) -> ChangeSubscription {
        let notify = Arc::new(Notify::new());
        let mut state = self.shared.lock();
        let id = state.next_id;
        state.next_id += 1;
        let key = match topic {
            Topic::Execution(execution_id) => {
                state
                    .by_execution
                    .entry(execution_id.clone())
                    .or_default()
                    .insert(id, Arc::clone(&notify));
                Some(execution_id)
            }
            topic => {
                state.broad.insert(id, (topic, Arc::clone(&notify)));
                None
            }
        };
        ChangeSubscription {
            fallback: self.shared.fallback,
            wake: Some(notify),
            registration: Some(Registration {
                hub: Arc::downgrade(&self.shared),
                id,
                execution_id: key,
            }),
        }
    }
}

impl Swept for Shared {
    fn is_live(&self) -> bool {
        Shared::is_live(self)
    }

    fn safety_interval(&self) -> Duration {
        Shared::safety_interval(self)
    }

    fn probe(&self) -> Option<Arc<dyn ChangeProbe>> {
        Shared::probe(self)
    }

    fn watched_executions(&self) -> Vec<String> {
        Shared::watched_executions(self)
    }

    fn wake_execution(&self, execution_id: &str) {
        Shared::wake_execution(self, execution_id);
    }

    fn sweep_stopped(&self) {
        Shared::sweep_stopped(self);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn probes(&self) -> MutexGuard<'_, Vec<Weak<dyn ChangeProbe>>> {
        self.probes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn interval(&self) -> Duration {
        if self.is_live() {
            self.safety
        } else {
            self.fallback
        }
    }

    pub(super) fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    pub(super) fn safety_interval(&self) -> Duration {
        self.safety
    }

    /// The first attached probe still alive.
    pub(super) fn probe(&self) -> Option<Arc<dyn ChangeProbe>> {
        self.probes().iter().find_map(Weak::upgrade)
    }

    /// The executions with a [`Topic::Execution`] subscription.
    pub(super) fn watched_executions(&self) -> Vec<String> {
        self.lock().by_execution.keys().cloned().collect()
    }

    /// Wakes every subscription to `execution_id`'s topic.
    pub(super) fn wake_execution(&self, execution_id: &str) {
        let woken: Vec<Arc<Notify>> = self
            .lock()
            .by_execution
            .get(execution_id)
            .into_iter()
            .flat_map(HashMap::values)
            .cloned()
            .collect();
        wake_all(&woken);
    }

    /// Whether the sweep re-reads for the [`Topic::Execution`] subscriptions now, starting
    /// it on the current tokio runtime if it does not run (without a runtime: `false`).
    fn sweep_covers(self: &Arc<Self>) -> bool {
        if !self.is_live() || self.probe().is_none() {
            return false;
        }
        if self.sweeping.load(Ordering::Acquire) {
            return true;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        if !self.sweeping.swap(true, Ordering::AcqRel) {
            // The guard is in the future from the start: a task dropped before its first
            // poll still marks the sweep stopped.
            let guard = SweepGuard {
                hub: Arc::downgrade(self),
            };
            runtime.spawn(probe::sweep(guard));
        }
        true
    }

    /// The sweep ended: its subscriptions arm their own timers at their next wait.
    pub(super) fn sweep_stopped(&self) {
        self.sweeping.store(false, Ordering::Release);
        let woken: Vec<Arc<Notify>> = self.lock().execution_notifies().cloned().collect();
        wake_all(&woken);
    }
}

/// Where a subscription is registered, to unregister it on drop.
#[derive(Debug)]
struct Registration {
    hub: Weak<Shared>,
    id: u64,
    execution_id: Option<String>,
}

/// One waiter's subscription, from [`ChangeSignal::subscribe`](super::ChangeSignal::subscribe).
/// Unsubscribes when dropped.
///
/// The waiter's loop: subscribe, then repeatedly read the state it waits on and, while it is
/// not there yet, await [`changed`](Self::changed). A wake-up announced while the waiter was
/// reading is kept, so nothing committed after `subscribe` returned is missed.
#[derive(Debug)]
pub struct ChangeSubscription {
    fallback: Duration,
    wake: Option<Arc<Notify>>,
    registration: Option<Registration>,
}

impl ChangeSubscription {
    /// A subscription that only polls: [`changed`](Self::changed) returns [`Wake::Poll`]
    /// every `every` (at least 1 ms). What [`PollingSignal`](super::PollingSignal) hands out,
    /// and what a backend returns when its signal cannot work (no Unix sockets here, say).
    pub fn polling(every: Duration) -> Self {
        Self {
            fallback: every.max(Duration::from_millis(1)),
            wake: None,
            registration: None,
        }
    }

    /// A subscription woken through `notify` (at most `fallback` apart), for a backend with
    /// its own fan-out instead of a [`ChangeHub`]: calling `notify.notify_one()` wakes it.
    pub fn from_notify(notify: Arc<Notify>, fallback: Duration) -> Self {
        Self {
            fallback: fallback.max(Duration::from_millis(1)),
            wake: Some(notify),
            registration: None,
        }
    }

    /// Whether a signal can wake this subscription before its fallback interval.
    pub fn is_signalled(&self) -> bool {
        self.wake.is_some()
    }

    /// The longest this subscription sleeps without a wake-up now (a hub's subscription:
    /// the hub's current [`fallback`](ChangeHub::fallback)).
    pub fn fallback(&self) -> Duration {
        self.registration
            .as_ref()
            .and_then(|registration| registration.hub.upgrade())
            .map_or(self.fallback, |hub| hub.interval())
    }

    /// Completes when a matching change was announced since the last call
    /// ([`Wake::Signalled`]) or after the fallback interval ([`Wake::Poll`]); then re-read.
    /// A [`Topic::Execution`] subscription of a live hub with a [`ChangeProbe`] has no timer
    /// of its own: the hub's sweep wakes it (as [`Wake::Signalled`]) when its execution's
    /// mark changed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropped while waiting, a wake-up it received is kept for the next call.
    pub async fn changed(&mut self) -> Wake {
        let timer = self.own_timer();
        match (&self.wake, timer) {
            (Some(notify), Some(every)) => tokio::select! {
                () = notify.notified() => Wake::Signalled,
                () = tokio::time::sleep(every) => Wake::Poll,
            },
            (Some(notify), None) => {
                notify.notified().await;
                Wake::Signalled
            }
            (None, every) => {
                tokio::time::sleep(every.unwrap_or(self.fallback)).await;
                Wake::Poll
            }
        }
    }

    /// How long the next wait may last without a wake-up (`None`: the hub's sweep re-reads
    /// for this subscription).
    fn own_timer(&self) -> Option<Duration> {
        let Some(registration) = &self.registration else {
            return Some(self.fallback);
        };
        let Some(hub) = registration.hub.upgrade() else {
            return Some(self.fallback);
        };
        if registration.execution_id.is_some() && hub.sweep_covers() {
            return None;
        }
        Some(hub.interval())
    }
}

impl Drop for ChangeSubscription {
    fn drop(&mut self) {
        let Some(registration) = self.registration.take() else {
            return;
        };
        let Some(hub) = registration.hub.upgrade() else {
            return;
        };
        let mut state = hub.lock();
        match registration.execution_id {
            Some(execution_id) => {
                if let Some(subscribers) = state.by_execution.get_mut(&execution_id) {
                    subscribers.remove(&registration.id);
                    if subscribers.is_empty() {
                        state.by_execution.remove(&execution_id);
                    }
                }
            }
            None => {
                state.broad.remove(&registration.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::ChangeSignal;

    const SHORT: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn a_publish_wakes_only_matching_subscriptions() {
        let hub = ChangeHub::with_fallback(SHORT);
        let mut mine = hub.subscribe(Topic::Execution("a".into()));
        let mut other = hub.subscribe(Topic::Execution("b".into()));
        let mut queue = hub.subscribe(Topic::Queue);
        hub.publish(&Change::new("a", ChangeKind::Round));
        assert_eq!(mine.changed().await, Wake::Signalled);
        assert_eq!(other.changed().await, Wake::Poll);
        assert_eq!(queue.changed().await, Wake::Poll);
        hub.publish(&Change::new("c", ChangeKind::Queued));
        assert_eq!(queue.changed().await, Wake::Signalled);
        hub.publish(&Change::any());
        assert_eq!(other.changed().await, Wake::Signalled);
    }

    #[tokio::test]
    async fn a_wake_up_before_the_wait_is_kept_and_drop_unsubscribes() {
        let hub = ChangeHub::with_fallback(SHORT);
        let mut sub = hub.subscribe(Topic::All);
        let twin = hub.subscribe(Topic::Execution("a".into()));
        assert_eq!(hub.subscriptions(), 2);
        hub.publish(&Change::new("a", ChangeKind::Execution));
        // Announced before the wait: kept, once.
        assert_eq!(sub.changed().await, Wake::Signalled);
        assert_eq!(sub.changed().await, Wake::Poll);
        drop(twin);
        drop(sub);
        assert_eq!(hub.subscriptions(), 0);
    }

    #[tokio::test]
    async fn a_live_hub_re_reads_rarely_and_losing_liveness_wakes_everyone() {
        let hub = ChangeHub::with_intervals(SHORT, Duration::from_secs(3600));
        let mut sub = hub.subscribe(Topic::Execution("a".into()));
        assert!(hub.is_live());
        assert_eq!(sub.fallback(), Duration::from_secs(3600));
        hub.set_live(false);
        // The wake-up of the change of liveness, then the short poll.
        assert_eq!(sub.changed().await, Wake::Signalled);
        assert_eq!(sub.fallback(), SHORT);
        assert_eq!(sub.changed().await, Wake::Poll);
        hub.set_live(true);
        assert_eq!(sub.fallback(), Duration::from_secs(3600));
        assert_eq!(ChangeHub::new().fallback(), crate::signal::SAFETY_POLL);
    }

    #[tokio::test]
    async fn a_polling_subscription_wakes_on_its_own() {
        let mut sub = ChangeSubscription::polling(SHORT);
        assert!(!sub.is_signalled());
        assert_eq!(sub.fallback(), SHORT);
        assert_eq!(sub.changed().await, Wake::Poll);
    }
}
