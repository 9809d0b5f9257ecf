//! The batched safety re-read: one read per store for every execution a process waits on.
//!
//! A live signal can still lose an announcement (a committer killed between its commit and
//! its send). If every waiter re-read its own row every [`SAFETY_POLL`](super::SAFETY_POLL),
//! the cost of waiting would grow with the number of waiters (1,000 waiting executions, each
//! with a coordinator and a cancel watch: about 67 reads a second). Instead, a backend that
//! can read a *mark* of many executions at once attaches a [`ChangeProbe`] to its
//! [`ChangeHub`](super::ChangeHub): while the hub is live, one sweep task per hub reads the
//! marks of every execution that has a [`Topic::Execution`](super::Topic::Execution)
//! subscription, once per safety interval, and wakes only the subscriptions of an execution
//! whose mark changed since the last sweep (or that the sweep sees for the first time);
//! those subscriptions keep no timer of their own. A failed read wakes them all. So a lost
//! announcement still costs at most about one safety interval of latency, and waiting costs
//! one read per interval however many executions wait.

use std::collections::HashMap;
use std::fmt::Debug;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// What [`ChangeProbe::marks`] returns.
pub type ProbeFuture<'a> =
    Pin<Box<dyn Future<Output = m3_types::Result<HashMap<String, u64>>> + Send + 'a>>;

/// A backend's batched read of the *marks* of many executions (see the module docs).
///
/// A mark is any value that changes whenever something a waiter on the execution waits
/// for changes: its lifecycle and outcome, its cancel flag, its worker lease (taken,
/// released, lost), the set of its rounds and their statuses. It should not change when
/// only a lease's expiry moves (renewals), or every renewal would wake every waiter. An
/// execution the answer leaves out is woken at every sweep.
pub trait ChangeProbe: Debug + Send + Sync {
    /// The marks of `executions`, in one read where the backend can.
    fn marks<'a>(&'a self, executions: &'a [String]) -> ProbeFuture<'a>;
}

/// What the sweep needs of the hub it serves (the hub's shared state implements it, so
/// this module does not import the hub).
pub(super) trait Swept: Send + Sync + 'static {
    /// Whether the hub's signal is live (the sweep only runs then).
    fn is_live(&self) -> bool;
    /// How long the sweep sleeps between reads.
    fn safety_interval(&self) -> Duration;
    /// The first attached probe still alive.
    fn probe(&self) -> Option<Arc<dyn ChangeProbe>>;
    /// The executions with a `Topic::Execution` subscription.
    fn watched_executions(&self) -> Vec<String>;
    /// Wakes every subscription to `execution_id`'s topic.
    fn wake_execution(&self, execution_id: &str);
    /// The sweep ended.
    fn sweep_stopped(&self);
}

/// Marks the hub's sweep as stopped when the task ends or is dropped (its runtime shut
/// down), and wakes the subscriptions it covered so they arm their own timers again.
pub(super) struct SweepGuard<H: Swept> {
    pub(super) hub: Weak<H>,
}

impl<H: Swept> Drop for SweepGuard<H> {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.sweep_stopped();
        }
    }
}

/// The executions among `executions` whose mark is new or differs from `before`, or that
/// `now` does not know.
fn changed<'a>(
    executions: &'a [String],
    before: &HashMap<String, u64>,
    now: &HashMap<String, u64>,
) -> Vec<&'a str> {
    executions
        .iter()
        .filter(|id| match now.get(*id) {
            Some(mark) => before.get(*id) != Some(mark),
            None => true,
        })
        .map(String::as_str)
        .collect()
}

/// The sweep task of one hub: every safety interval while the hub is live, reads the marks
/// of the executions with subscriptions and wakes those that changed. Ends with the hub.
pub(super) async fn sweep<H: Swept>(guard: SweepGuard<H>) {
    let hub = guard.hub.clone();
    let mut marks: HashMap<String, u64> = HashMap::new();
    // Whether subscriptions may be sleeping on this sweep (a probe was there).
    let mut covering = true;
    loop {
        let Some(interval) = hub.upgrade().map(|shared| shared.safety_interval()) else {
            return;
        };
        tokio::time::sleep(interval).await;
        let Some(shared) = hub.upgrade() else {
            return;
        };
        if !shared.is_live() {
            // Its subscriptions poll on their own meanwhile; start afresh when live again.
            marks.clear();
            continue;
        }
        let executions = shared.watched_executions();
        let Some(probe) = shared.probe() else {
            if covering {
                // The probe's owner is gone: let the subscriptions arm their own timers.
                executions.iter().for_each(|id| shared.wake_execution(id));
            }
            covering = false;
            marks.clear();
            continue;
        };
        covering = true;
        drop(shared);
        let read = if executions.is_empty() {
            Ok(HashMap::new())
        } else {
            probe.marks(&executions).await
        };
        drop(probe);
        let Some(shared) = hub.upgrade() else {
            return;
        };
        marks = match read {
            Ok(now) => {
                for execution_id in changed(&executions, &marks, &now) {
                    shared.wake_execution(execution_id);
                }
                now
            }
            Err(error) => {
                tracing::debug!(%error, "the batched safety re-read failed; waking every waiter");
                executions.iter().for_each(|id| shared.wake_execution(id));
                HashMap::new()
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::signal::{ChangeHub, ChangeSignal, Topic, Wake};

    const SWEEP: Duration = Duration::from_millis(20);
    const LONG: Duration = Duration::from_secs(10);

    /// A probe answering from a map it can be told to change, or failing.
    #[derive(Debug, Default)]
    struct Marks {
        marks: Mutex<HashMap<String, u64>>,
        reads: AtomicUsize,
        failing: AtomicBool,
    }

    impl Marks {
        fn set(&self, execution_id: &str, mark: u64) {
            self.marks
                .lock()
                .unwrap()
                .insert(execution_id.to_owned(), mark);
        }
    }

    impl ChangeProbe for Marks {
        fn marks<'a>(&'a self, executions: &'a [String]) -> ProbeFuture<'a> {
            Box::pin(async move {
                self.reads.fetch_add(1, Ordering::SeqCst);
                if self.failing.load(Ordering::SeqCst) {
                    return Err(m3_types::Error::storage("the probe is down"));
                }
                let marks = self.marks.lock().unwrap();
                Ok(executions
                    .iter()
                    .filter_map(|id| Some((id.clone(), *marks.get(id)?)))
                    .collect())
            })
        }
    }

    fn probed_hub() -> (ChangeHub, Arc<Marks>, Arc<dyn ChangeProbe>) {
        // Live: a subscription the sweep did not cover would poll every `SWEEP` itself.
        let hub = ChangeHub::with_intervals(Duration::from_secs(3600), SWEEP);
        let marks = Arc::new(Marks::default());
        let probe: Arc<dyn ChangeProbe> = marks.clone();
        hub.attach_probe(&probe);
        (hub, marks, probe)
    }

    async fn wakes(sub: &mut crate::signal::ChangeSubscription, within: Duration) -> Option<Wake> {
        tokio::time::timeout(within, sub.changed()).await.ok()
    }

    #[tokio::test]
    async fn the_sweep_wakes_only_executions_whose_mark_changed() {
        let (hub, marks, _probe) = probed_hub();
        marks.set("a", 1);
        marks.set("b", 1);
        let mut a = hub.subscribe(Topic::Execution("a".into()));
        let mut b = hub.subscribe(Topic::Execution("b".into()));
        // Seen for the first time: woken once (a change before the first sweep is not missed).
        assert_eq!(wakes(&mut a, LONG).await, Some(Wake::Signalled));
        assert_eq!(wakes(&mut b, LONG).await, Some(Wake::Signalled));
        // Nothing changes: several sweeps, one read each for both, and nobody wakes.
        let before = marks.reads.load(Ordering::SeqCst);
        assert_eq!(wakes(&mut a, SWEEP * 8).await, None);
        assert!(marks.reads.load(Ordering::SeqCst) >= before + 3);
        marks.set("a", 2);
        assert_eq!(wakes(&mut a, LONG).await, Some(Wake::Signalled));
        assert_eq!(wakes(&mut b, SWEEP * 4).await, None);
        // An execution the probe does not know is woken at every sweep.
        let mut unknown = hub.subscribe(Topic::Execution("unknown".into()));
        assert_eq!(wakes(&mut unknown, LONG).await, Some(Wake::Signalled));
        assert_eq!(wakes(&mut unknown, LONG).await, Some(Wake::Signalled));
    }

    #[tokio::test]
    async fn a_failed_read_wakes_everyone_and_without_a_probe_subscriptions_poll_again() {
        let (hub, marks, probe) = probed_hub();
        marks.set("a", 1);
        let mut a = hub.subscribe(Topic::Execution("a".into()));
        assert_eq!(wakes(&mut a, LONG).await, Some(Wake::Signalled));
        marks.failing.store(true, Ordering::SeqCst);
        assert_eq!(wakes(&mut a, LONG).await, Some(Wake::Signalled));
        // The probe's owner is gone: the sweep wakes the subscription once, and from then on
        // it re-reads on its own timer again.
        marks.failing.store(false, Ordering::SeqCst);
        drop(probe);
        drop(marks);
        assert!(!hub.has_probe());
        let mut wake_ups = Vec::new();
        while wake_ups.last() != Some(&Wake::Poll) && wake_ups.len() < 5 {
            wake_ups.push(wakes(&mut a, LONG).await.unwrap());
        }
        assert_eq!(wake_ups.last(), Some(&Wake::Poll), "{wake_ups:?}");
    }

    #[tokio::test]
    async fn a_hub_that_is_not_live_leaves_its_subscriptions_on_their_own_poll() {
        let hub = ChangeHub::with_intervals(SWEEP, Duration::from_secs(3600));
        let marks = Arc::new(Marks::default());
        let probe: Arc<dyn ChangeProbe> = marks.clone();
        hub.attach_probe(&probe);
        hub.set_live(false);
        let mut a = hub.subscribe(Topic::Execution("a".into()));
        assert_eq!(wakes(&mut a, LONG).await, Some(Wake::Poll));
        assert_eq!(marks.reads.load(Ordering::SeqCst), 0);
        assert_eq!(hub.mechanism(), "in-process");
    }

    #[test]
    fn only_new_changed_and_unknown_marks_wake() {
        let executions: Vec<String> = ["same", "moved", "new", "gone"].map(String::from).to_vec();
        let before = HashMap::from([
            ("same".to_owned(), 1),
            ("moved".to_owned(), 1),
            ("gone".to_owned(), 1),
        ]);
        let now = HashMap::from([
            ("same".to_owned(), 1),
            ("moved".to_owned(), 2),
            ("new".to_owned(), 1),
        ]);
        assert_eq!(
            changed(&executions, &before, &now),
            ["moved", "new", "gone"]
        );
    }
}
