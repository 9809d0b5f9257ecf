//! The running turn: its state ([`Turn`], with what it knows of the execution in
//! [`TurnContext`]) and its event loop over the app-server, the relays and the pending
//! answer, up to the [`TurnEnd`].

use std::time::{Duration, Instant};

use m3_types::{Error, Result, ToolSelection};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::relay::{RelayEvent, RelayObserver};
use crate::spec::PermissionPolicy;

use super::super::app_server::{AppServer, Incoming};
use super::super::observe::{Stage, WireEvent, WireTracker};
use super::super::prompts::NativePrompt;
use super::super::protocol::{
    self, CompletedTurn, ItemNotification, SERVER_ERROR, ThreadItem, TokenUsageNotification,
    TurnCompletedNotification, TurnInterruptParams, TurnStartParams, TurnStartResponse, UserInput,
    method, turn_status,
};

use super::answer_source::{Answering, Answers, poll_answer};
use super::tool_item::{ToolItem, canonical};

/// How long to wait for `turn/completed` after `turn/interrupt`.
const INTERRUPT_WAIT: Duration = Duration::from_secs(5);
/// After `turn/completed`, how long at most to wait for the relays' reports still in transit
/// (a delivered round's confirmation, the answers to operation requests).
const DRAIN_WAIT: Duration = Duration::from_secs(3);

/// What the turn needs to know about the execution.
pub(in super::super) struct TurnContext<'a> {
    pub(in super::super) execution_id: String,
    pub(in super::super) tools: Option<ToolSelection>,
    pub(in super::super) permission_policy: PermissionPolicy,
    pub(in super::super) answers: Answers<'a>,
    pub(in super::super) interrupt: CancellationToken,
    pub(in super::super) publish: &'a (dyn Fn(&WireTracker, Option<&Value>) + Send + Sync),
}

impl std::fmt::Debug for TurnContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnContext")
            .field("execution_id", &self.execution_id)
            .field("permission_policy", &self.permission_policy)
            .finish_non_exhaustive()
    }
}

/// How the turn ended.
#[derive(Debug)]
pub(in super::super) struct TurnEnd {
    pub(in super::super) text: String,
}

/// The state of one running turn.
pub(in super::super) struct Turn<'a> {
    pub(super) app: &'a mut AppServer,
    pub(super) observer: &'a mut RelayObserver,
    pub(super) context: TurnContext<'a>,
    pub(super) thread_id: String,
    pub(super) turn_id: String,
    pub(super) tracker: WireTracker,
    pub(super) unmatched: Vec<(NativePrompt, Instant)>,
    pub(super) tool_items: Vec<ToolItem>,
    pub(super) texts: Vec<String>,
    pub(super) token_usage: Option<Value>,
    pub(super) answering: Option<(usize, Answering)>,
    pub(super) observer_open: bool,
}

impl std::fmt::Debug for Turn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("thread_id", &self.thread_id)
            .field("turn_id", &self.turn_id)
            .finish_non_exhaustive()
    }
}

impl<'a> Turn<'a> {
    pub(in super::super) fn new(
        app: &'a mut AppServer,
        observer: &'a mut RelayObserver,
        context: TurnContext<'a>,
        thread_id: String,
        tracker: WireTracker,
    ) -> Self {
        Self {
            app,
            observer,
            context,
            thread_id,
            turn_id: String::new(),
            tracker,
            unmatched: Vec::new(),
            tool_items: Vec::new(),
            texts: Vec::new(),
            token_usage: None,
            answering: None,
            observer_open: true,
        }
    }

    /// Starts the turn with `prompt` and runs it to its end.
    pub(in super::super) async fn run(mut self, prompt: &str, model: &str) -> Result<TurnEnd> {
        let params = TurnStartParams {
            thread_id: &self.thread_id,
            input: vec![UserInput::Text { text: prompt }],
            model,
        };
        let started = self.app.call(method::TURN_START, &params).await?;
        self.turn_id = protocol::decode::<TurnStartResponse>(started)
            .ok_or_else(|| Error::protocol("codex turn/start answered without turn.id"))?
            .turn
            .id;
        let result = self.event_loop().await;
        self.publish();
        result
    }

    fn publish(&self) {
        (self.context.publish)(&self.tracker, self.token_usage.as_ref());
    }

    async fn event_loop(&mut self) -> Result<TurnEnd> {
        loop {
            let deadline = self.match_deadline();
            tokio::select! {
                message = self.app.next() => {
                    let message = match message {
                        Ok(message) => message,
                        Err(error) => return Err(self.exit_error(error)),
                    };
                    if let Some(end) = self.on_app(message).await? {
                        return end;
                    }
                }
                event = self.observer.next(), if self.observer_open => match event {
                    Some(event) => self.on_relay(event).await?,
                    None => self.observer_open = false,
                },
                answer = poll_answer(&mut self.answering), if self.answering.is_some() => {
                    self.on_answer(answer).await?;
                }
                () = self.context.interrupt.cancelled() => {
                    return Err(self.interrupt(Error::cancelled("codex turn interrupted by m3")).await);
                }
                () = sleep_until(deadline), if deadline.is_some() => {
                    self.check_match_timeouts().await?;
                }
            }
        }
    }

    /// Handles one app-server message; `Some` ends the turn.
    async fn on_app(&mut self, message: Incoming) -> Result<Option<Result<TurnEnd>>> {
        match message {
            Incoming::Request { id, method, params } => {
                self.on_server_request(id, &method, params).await?;
                Ok(None)
            }
            Incoming::Notification { method, params } => {
                Ok(self.on_notification(&method, params).await)
            }
            Incoming::Response { .. } => Ok(None),
        }
    }

    async fn on_notification(&mut self, method: &str, params: Value) -> Option<Result<TurnEnd>> {
        match method {
            method::ITEM_STARTED => {
                if let ThreadItem::McpToolCall {
                    server,
                    tool,
                    arguments,
                } = protocol::decode::<ItemNotification>(params)?.item
                {
                    self.tool_items.push(ToolItem {
                        server: server.unwrap_or_default(),
                        tool: tool.unwrap_or_default(),
                        arguments: canonical(Some(&arguments)),
                        approved: false,
                    });
                }
                None
            }
            method::ITEM_COMPLETED => {
                if let ThreadItem::AgentMessage { text: Some(text) } =
                    protocol::decode::<ItemNotification>(params)?.item
                {
                    self.texts.push(text);
                }
                None
            }
            method::TOKEN_USAGE_UPDATED => {
                self.token_usage = protocol::decode::<TokenUsageNotification>(params)
                    .and_then(|usage| usage.token_usage);
                None
            }
            method::TURN_COMPLETED => {
                let turn = protocol::decode::<TurnCompletedNotification>(params)?.turn;
                if turn.id.as_deref() != Some(self.turn_id.as_str()) {
                    return None;
                }
                Some(self.finish(turn).await)
            }
            _ => None,
        }
    }

    async fn finish(&mut self, turn: CompletedTurn) -> Result<TurnEnd> {
        self.drain().await;
        let status = turn.status.unwrap_or_default();
        match status.as_str() {
            turn_status::COMPLETED => Ok(TurnEnd {
                text: self.texts.join("\n"),
            }),
            turn_status::INTERRUPTED => Err(Error::protocol("codex turn was interrupted")
                .with_detail("reason", "turn_interrupted")),
            _ => {
                let message = turn
                    .error
                    .and_then(|error| error.message)
                    .unwrap_or_else(|| "no error message".to_owned());
                Err(Error::protocol(format!("codex turn {status}: {message}"))
                    .with_detail("reason", "turn_failed")
                    .with_detail("turn_status", status))
            }
        }
    }

    /// After `turn/completed`, reads the relays' reports still in transit: the relays report
    /// over their own sockets, so Codex may end its turn before the worker has seen the
    /// frames Codex already got (a legacy round is confirmed by Codex's answer to
    /// `elicitation/create`, before the tool result, so waiting for the confirmation alone
    /// lost the result). It waits while a delivered round is unconfirmed or an operation
    /// request has no answer yet, at most [`DRAIN_WAIT`]; a round still unconfirmed then
    /// fails.
    async fn drain(&mut self) {
        let until = tokio::time::Instant::now() + DRAIN_WAIT;
        while self.observer_open && (self.pending_delivery() || self.tracker.awaits_answers()) {
            match tokio::time::timeout_at(until, self.observer.next()).await {
                Ok(Some(event)) => {
                    if let Err(error) = self.on_relay(event).await {
                        tracing::warn!(%error, "relay event after turn end");
                    }
                }
                Ok(None) => self.observer_open = false,
                Err(_) => break,
            }
        }
        if self.pending_delivery()
            && let Answers::Managed(coordinator) = &self.context.answers
        {
            let error =
                Error::protocol("codex ended the turn before the answer reached the server")
                    .with_detail("reason", "native_prompt_before_retry");
            coordinator.fail_round(&error).await;
        }
        self.answering = None;
    }

    pub(super) fn pending_delivery(&self) -> bool {
        self.tracker
            .rounds
            .iter()
            .any(|r| matches!(r.stage, Stage::Delivered | Stage::Answering))
    }

    async fn on_relay(&mut self, event: RelayEvent) -> Result<()> {
        let events = match event {
            RelayEvent::Frame(frame) => self.tracker.observe(&frame),
            RelayEvent::PolicyDenied {
                connection_id,
                tool,
                ..
            } => {
                tracing::info!(server = %connection_id, tool, "relay denied a tool outside the selection");
                Vec::new()
            }
            RelayEvent::Incomplete {
                connection_id,
                reason,
            } => {
                tracing::warn!(server = %connection_id, reason, "relay observation incomplete");
                Vec::new()
            }
            RelayEvent::Connected { .. } | RelayEvent::Disconnected { .. } => Vec::new(),
        };
        for event in events {
            self.on_wire(event).await?;
        }
        self.publish();
        self.match_prompts().await
    }

    async fn on_wire(&mut self, event: WireEvent) -> Result<()> {
        match event {
            WireEvent::RoundObserved(round) => {
                tracing::debug!(round, "input round observed on the wire");
                Ok(())
            }
            WireEvent::RoundConfirmed {
                round,
                operation_complete,
            } => {
                tracing::debug!(round, operation_complete, "round delivered to the server");
                if let Answers::Managed(coordinator) = &self.context.answers {
                    coordinator.resolve_round(operation_complete).await?;
                }
                Ok(())
            }
            WireEvent::RoundRetryFailed { round, error } => {
                tracing::info!(round, %error, "the retry carrying the answers failed");
                if let Answers::Managed(coordinator) = &self.context.answers {
                    coordinator.fail_round(&error).await;
                }
                Ok(())
            }
            WireEvent::AnsweredWithoutPrompt { round, action } => {
                tracing::warn!(
                    round,
                    action,
                    "codex answered an elicitation without asking m3"
                );
                Ok(())
            }
        }
    }

    /// Interrupts the turn (nothing more is answered) and returns `error`.
    pub(super) async fn interrupt(&mut self, error: Error) -> Error {
        self.answering = None;
        if let Answers::Managed(coordinator) = &self.context.answers {
            coordinator.fail_round(&error).await;
        }
        let params = TurnInterruptParams {
            thread_id: &self.thread_id,
            turn_id: &self.turn_id,
        };
        if self
            .app
            .send_request(method::TURN_INTERRUPT, &params)
            .await
            .is_err()
        {
            return error;
        }
        self.await_interrupted().await;
        error.with_detail("turn_interrupted", true)
    }

    /// Waits (bounded) for the interrupted turn's `turn/completed`, refusing every
    /// server request meanwhile.
    async fn await_interrupted(&mut self) {
        let until = tokio::time::Instant::now() + INTERRUPT_WAIT;
        loop {
            match tokio::time::timeout_at(until, self.app.next()).await {
                Ok(Ok(Incoming::Notification { method, params }))
                    if method == method::TURN_COMPLETED =>
                {
                    let Some(turn) = protocol::decode::<TurnCompletedNotification>(params)
                        .map(|completed| completed.turn)
                        .filter(|turn| turn.id.as_deref() == Some(self.turn_id.as_str()))
                    else {
                        continue;
                    };
                    let status = turn.status.unwrap_or_default();
                    tracing::info!(status, "codex turn ended after interrupt");
                    break;
                }
                Ok(Ok(Incoming::Request { id, .. })) => {
                    let _ = self
                        .app
                        .respond_error(&id, SERVER_ERROR, "turn interrupted by m3")
                        .await;
                }
                Ok(Ok(_)) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
    }

    /// The app-server vanished: an unresolved managed round cannot be resumed.
    fn exit_error(&self, error: Error) -> Error {
        let unresolved = self.answering.is_some() || self.pending_delivery();
        if unresolved && matches!(self.context.answers, Answers::Managed(_)) {
            Error::managed_input_recovery(
                "codex app-server exited while a managed round was unresolved; it cannot be resumed safely",
            )
            .with_detail("reason", "codex_exited")
            .with_source(error)
        } else {
            error
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await,
        None => std::future::pending().await,
    }
}
