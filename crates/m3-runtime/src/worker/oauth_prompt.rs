//! The OAuth prompt of one execution: the worker's prompt (the terminal of `m3 run`), and
//! beside it the execution's event log, so the answer page of `m3 serve` (another
//! process on the store) shows a pending authorization as a link while it waits, like a
//! URL-mode round, and stops once the wait ended.

use std::sync::Arc;

use m3_mcp::oauth::{AuthorizationNotice, AuthorizationPrompt, OAuthContext};
use m3_store::{
    AppendEvent, EVENT_OAUTH_AUTHORIZATION_FINISHED, EVENT_OAUTH_AUTHORIZATION_REQUIRED,
    ExecutionLeaseRef, ExecutionStore,
};
use serde_json::json;
use tokio::sync::mpsc;

/// See the module docs.
#[derive(Debug)]
struct ExecutionPrompt {
    inner: Arc<dyn AuthorizationPrompt>,
    execution_id: String,
    lease: ExecutionLeaseRef,
    /// Events go out in order through one task: a `finished` never lands before its
    /// `required`.
    events: mpsc::UnboundedSender<AppendEvent>,
}

impl ExecutionPrompt {
    fn append(&self, kind: &str, payload: serde_json::Value) {
        let event = AppendEvent::new(self.execution_id.clone(), kind, payload)
            .with_lease(self.lease.clone());
        // The task ends only when every sender is gone.
        let _ = self.events.send(event);
    }
}

impl AuthorizationPrompt for ExecutionPrompt {
    fn show(&self, notice: &AuthorizationNotice) {
        self.inner.show(notice);
        let payload = json!({
            "server": notice.server,
            "server_url": notice.server_url,
            "url": notice.url,
        });
        self.append(EVENT_OAUTH_AUTHORIZATION_REQUIRED, payload);
    }

    fn finished(&self, notice: &AuthorizationNotice, completed: bool) {
        self.inner.finished(notice, completed);
        let payload = json!({"server": notice.server, "url": notice.url, "completed": completed});
        self.append(EVENT_OAUTH_AUTHORIZATION_FINISHED, payload);
    }
}

/// `oauth` for the execution `lease` fences: when it shows authorization URLs to
/// somebody, they also go to the execution's event log. Unchanged otherwise (a worker
/// without a person fails the authorization code grant at once; nothing to show).
pub(super) fn for_execution(
    oauth: &OAuthContext,
    store: &Arc<dyn ExecutionStore>,
    lease: &ExecutionLeaseRef,
) -> OAuthContext {
    let Some(inner) = oauth.prompt() else {
        return oauth.clone();
    };
    let (events, mut queued) = mpsc::unbounded_channel::<AppendEvent>();
    let store = Arc::clone(store);
    tokio::spawn(async move {
        while let Some(event) = queued.recv().await {
            if let Err(error) = store.append_event(event).await {
                // The terminal still shows the URL; only the page misses it.
                tracing::warn!(error = %error.message(), "OAuth authorization event not stored");
            }
        }
    });
    let prompt = ExecutionPrompt {
        inner,
        execution_id: lease.execution_id.clone(),
        lease: lease.clone(),
        events,
    };
    oauth.clone().with_prompt(Arc::new(prompt))
}
