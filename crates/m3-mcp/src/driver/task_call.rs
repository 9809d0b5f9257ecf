//! [`TaskCall`]: the task a `tools/call` was answered with (tasks extension of 2026-07-28),
//! which the [`Driver`](super::Driver) holds while it polls and between rounds: where
//! the task stands for the client (its id, the `requestState` to echo, the keys already
//! answered, when to poll next), and which cancels the task on the server (`tasks/cancel`)
//! when dropped before the task ended, as when the execution is cancelled.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientRequest, CustomRequest};

use super::super::shared::Shared;
use super::super::tasks::{self, TaskSnapshot};

/// The first wait when the server suggests no poll interval; it doubles up to
/// [`BACKOFF_MAX`] while the task stays unchanged.
const BACKOFF_START: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A task in progress.
#[derive(Debug)]
pub(super) struct TaskCall {
    pub(super) task_id: String,
    /// The latest `requestState` the server sent about the task, echoed on the next request.
    pub(super) request_state: Option<String>,
    /// Keys answered with `tasks/update`: a later poll that still lists one (the update is
    /// eventually consistent) does not ask the caller twice.
    pub(super) answered: BTreeSet<String>,
    /// The server's suggested poll interval, if it gave one.
    suggested: Option<Duration>,
    /// The next wait without a suggestion.
    backoff: Duration,
    /// Whether the task ended (or was never ours to cancel).
    pub(super) finished: bool,
    shared: Arc<Shared>,
}

impl TaskCall {
    pub(super) fn new(shared: Arc<Shared>, created: &TaskSnapshot) -> Self {
        Self {
            task_id: created.task_id.clone(),
            request_state: created.request_state.clone(),
            answered: BTreeSet::new(),
            suggested: created.poll_interval,
            backoff: BACKOFF_START,
            finished: false,
            shared,
        }
    }

    /// How long to wait before the next `tasks/get`: the server's interval when it gave
    /// one (the extension asks clients to honour it), else a doubling backoff.
    pub(super) fn next_wait(&mut self) -> Duration {
        if let Some(interval) = self.suggested {
            return interval;
        }
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        wait
    }

    /// Takes in what a poll said: the state to echo next, the interval to honour.
    pub(super) fn observe(&mut self, snapshot: &TaskSnapshot) {
        self.request_state.clone_from(&snapshot.request_state);
        if snapshot.poll_interval.is_some() {
            self.suggested = snapshot.poll_interval;
        }
    }

    /// After answers went out the task moves again: poll soon.
    pub(super) fn reset_backoff(&mut self) {
        self.backoff = BACKOFF_START;
    }
}

impl Drop for TaskCall {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let params = tasks::params(&self.task_id, self.request_state.as_deref(), None);
        let request =
            ClientRequest::CustomRequest(CustomRequest::new("tasks/cancel", Some(params)));
        let peer = self.shared.peer.clone();
        let grace = self.shared.options.close_grace;
        // The connection's close waits for these (bounded), so the cancel leaves before
        // the server is shut down. Nothing is sent outside a tokio runtime.
        if tokio::runtime::Handle::try_current().is_ok() {
            self.shared.task_cancels.spawn(async move {
                let _ = tokio::time::timeout(grace, peer.send_request(request)).await;
            });
        }
    }
}
