//! One Codex turn: the event loop over the app-server, the relays and the
//! pending answer.
//!
//! Native prompts are collected as an unordered set and matched to the keys of
//! rounds seen on the wire (see [`super::prompts`] and [`matching`]); once every
//! key of a round has its prompt, the answer comes from the input policy (managed
//! round, plan, or `fail`, see [`answer_source`] and [`answers`]), each prompt gets its key's response,
//! and the round is resolved only after its answers were seen reaching the
//! server. Codex's own approval prompts are decided in [`approvals`].

mod answer_source;
mod answers;
mod approvals;
mod matching;
mod tool_item;

use std::time::{Duration, Instant};

use m3_types::{Error, Result, ToolSelection};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::relay::{RelayEvent, RelayObserver};
use crate::spec::PermissionPolicy;

use super::app_server::{AppServer, Incoming};
use super::observe::{Stage, WireEvent, WireTracker};
use super::prompts::NativePrompt;
use super::protocol::{
    self, CompletedTurn, ItemNotification, SERVER_ERROR, ThreadItem, TokenUsageNotification,
    TurnCompletedNotification, TurnInterruptParams, TurnStartParams, TurnStartResponse, UserInput,
    method, turn_status,
};

pub(super) use answer_source::Answers;
use answer_source::{Answering, poll_answer};
use tool_item::{ToolItem, canonical};

/// How long a native prompt may wait for its round on the wire (and a round for
/// the rest of its prompts) before the turn fails closed.
const MATCH_WAIT: Duration = Duration::from_secs(10);
/// How long to wait for `turn/completed` after `turn/interrupt`.
const INTERRUPT_WAIT: Duration = Duration::from_secs(5);
/// After `turn/completed`, how long at most to wait for the relays' reports still in transit
/// (a delivered round's confirmation, the answers to operation requests).
const DRAIN_WAIT: Duration = Duration::from_secs(3);

/// What the turn needs to know about the execution.
pub(super) struct TurnContext<'a> {
    pub(super) execution_id: String,
    pub(super) tools: Option<ToolSelection>,
    pub(super) permission_policy: PermissionPolicy,
    pub(super) answers: Answers<'a>,
    pub(super) interrupt: CancellationToken,
    pub(super) publish: &'a (dyn Fn(&WireTracker, Option<&Value>) + Send + Sync),
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
pub(super) struct TurnEnd {
    pub(super) text: String,
}

/// The state of one running turn.
pub(super) struct Turn<'a> {
    app: &'a mut AppServer,
    observer: &'a mut RelayObserver,
    context: TurnContext<'a>,
    thread_id: String,
    turn_id: String,
    tracker: WireTracker,
    unmatched: Vec<(NativePrompt, Instant)>,
    tool_items: Vec<ToolItem>,
    texts: Vec<String>,
    token_usage: Option<Value>,
    answering: Option<(usize, Answering)>,
    observer_open: bool,
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
    pub(super) fn new(
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
    pub(super) async fn run(mut self, prompt: &str, model: &str) -> Result<TurnEnd> {
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

    fn pending_delivery(&self) -> bool {
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
    async fn interrupt(&mut self, error: Error) -> Error {
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
