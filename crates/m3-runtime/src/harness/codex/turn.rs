//! One Codex turn: the event loop over the app-server, the relays and the
//! pending answer.
//!
//! Native prompts are collected as an unordered set and matched to the keys of
//! rounds seen on the wire (see [`super::prompts`]); once every key of a round has
//! its prompt, the answer comes from the input policy (managed round, plan, or
//! `fail`), each prompt gets its key's response, and the round is resolved only
//! after its answers were seen reaching the server.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use m3_types::{
    ElicitationAction, ElicitationRequest, Error, PendingElicitationRound, ResponseMap, Result,
    ToolSelection, canonical_json,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::coordinator::Coordinator;
use crate::relay::{RelayEvent, RelayObserver};
use crate::spec::PermissionPolicy;

use super::app_server::{AppServer, Incoming};
use super::observe::{Stage, WireEvent, WireTracker};
use super::prompts::NativePrompt;

/// How long a native prompt may wait for its round on the wire (and a round for
/// the rest of its prompts) before the turn fails closed.
const MATCH_WAIT: Duration = Duration::from_secs(10);
/// How long to wait for `turn/completed` after `turn/interrupt`.
const INTERRUPT_WAIT: Duration = Duration::from_secs(5);
/// After `turn/completed`, how long to wait for the wire to confirm a delivered round.
const DRAIN_WAIT: Duration = Duration::from_secs(3);

type Answering = Pin<Box<dyn Future<Output = Result<ResponseMap>> + Send>>;

/// Where answers come from.
#[derive(Debug)]
pub(super) enum Answers<'a> {
    /// `human_input = fail`.
    Fail,
    /// A predefined plan, one response map per round.
    Plan(&'a mut VecDeque<ResponseMap>),
    /// `human_input = managed`.
    Managed(Arc<Coordinator>),
}

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

#[derive(Debug)]
struct ToolItem {
    server: String,
    tool: String,
    arguments: String,
    approved: bool,
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
        let started = self
            .app
            .call(
                "turn/start",
                json!({
                    "threadId": self.thread_id,
                    "input": [{"type": "text", "text": prompt}],
                    "model": model,
                }),
            )
            .await?;
        self.turn_id = started
            .pointer("/turn/id")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::protocol("codex turn/start answered without turn.id"))?
            .to_owned();
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
                self.on_server_request(id, &method, &params).await?;
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
            "item/started" => {
                let item = params.get("item")?;
                if item.get("type").and_then(Value::as_str) == Some("mcpToolCall") {
                    self.tool_items.push(ToolItem {
                        server: str_field(item, "server"),
                        tool: str_field(item, "tool"),
                        arguments: canonical(item.get("arguments")),
                        approved: false,
                    });
                }
                None
            }
            "item/completed" => {
                let item = params.get("item")?;
                if item.get("type").and_then(Value::as_str) == Some("agentMessage")
                    && let Some(text) = item.get("text").and_then(Value::as_str)
                {
                    self.texts.push(text.to_owned());
                }
                None
            }
            "thread/tokenUsage/updated" => {
                self.token_usage = params.get("tokenUsage").cloned();
                None
            }
            "turn/completed" => {
                let turn = params.get("turn")?;
                if turn.get("id").and_then(Value::as_str) != Some(self.turn_id.as_str()) {
                    return None;
                }
                Some(self.finish(turn.clone()).await)
            }
            _ => None,
        }
    }

    async fn finish(&mut self, turn: Value) -> Result<TurnEnd> {
        self.drain().await;
        let status = turn.get("status").and_then(Value::as_str).unwrap_or("");
        match status {
            "completed" => Ok(TurnEnd {
                text: self.texts.join("\n"),
            }),
            "interrupted" => Err(Error::protocol("codex turn was interrupted")
                .with_detail("reason", "turn_interrupted")),
            _ => {
                let message = turn
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no error message");
                Err(Error::protocol(format!("codex turn {status}: {message}"))
                    .with_detail("reason", "turn_failed")
                    .with_detail("turn_status", status))
            }
        }
    }

    /// After `turn/completed`, gives the relays a moment to confirm a delivered
    /// round; a round still unconfirmed then fails.
    async fn drain(&mut self) {
        let until = tokio::time::Instant::now() + DRAIN_WAIT;
        while self.observer_open && self.pending_delivery() {
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

    async fn on_server_request(&mut self, id: Value, method: &str, params: &Value) -> Result<()> {
        match method {
            "mcpServer/elicitation/request" => {
                let prompt = NativePrompt::parse(id.clone(), params)?;
                if prompt.approval.is_some() && !self.forged_approval(&prompt) {
                    let approve = self.approve(&prompt);
                    let action = if approve { "accept" } else { "decline" };
                    tracing::info!(server = %prompt.server, action, "codex tool approval");
                    let result = if approve {
                        json!({"action": "accept", "content": {}})
                    } else {
                        json!({"action": "decline"})
                    };
                    return self.app.respond(&id, result).await;
                }
                if matches!(self.context.answers, Answers::Fail) {
                    let error = unexpected_elicitation(&prompt);
                    return Err(self.interrupt(error).await);
                }
                self.unmatched.push((prompt, Instant::now()));
                self.match_prompts().await
            }
            "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
                let decision = if self.allowed_natively() {
                    "accept"
                } else {
                    "decline"
                };
                self.app.respond(&id, json!({"decision": decision})).await
            }
            "execCommandApproval" | "applyPatchApproval" => {
                let decision = if self.allowed_natively() {
                    "approved"
                } else {
                    "denied"
                };
                self.app.respond(&id, json!({"decision": decision})).await
            }
            "item/permissions/requestApproval" => {
                let permissions = if self.allowed_natively() {
                    params
                        .get("permissions")
                        .cloned()
                        .unwrap_or_else(|| json!({}))
                } else {
                    json!({})
                };
                self.app
                    .respond(&id, json!({"permissions": permissions, "scope": "turn"}))
                    .await
            }
            other => {
                tracing::warn!(method = other, "unsupported codex server request refused");
                self.app
                    .respond_error(&id, -32601, &format!("m3 does not support '{other}'"))
                    .await
            }
        }
    }

    fn allowed_natively(&self) -> bool {
        self.context.permission_policy == PermissionPolicy::Allow
    }

    /// An approval marker Codex cannot have written: the tool is one the selection
    /// names (Codex was told to approve it without asking), or the prompt is exactly a
    /// request the server sent on the wire. Such a prompt is the server's own question
    /// and goes through managed input like any other.
    fn forged_approval(&self, prompt: &NativePrompt) -> bool {
        forged_approval(self.context.tools.as_ref(), &self.tracker.rounds, prompt)
    }

    /// Approves Codex's tool-approval prompt only for a selected tool that matches
    /// one started, not yet approved `mcpToolCall` item (a server cannot forge one).
    fn approve(&mut self, prompt: &NativePrompt) -> bool {
        let Some(index) = approval_target(&self.tool_items, prompt) else {
            return false;
        };
        let Some(item) = self.tool_items.get_mut(index) else {
            return false;
        };
        let selected = self
            .context
            .tools
            .as_ref()
            .is_none_or(|tools| tools.allows(&item.server, &item.tool));
        if selected {
            item.approved = true;
        }
        selected
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

    /// Matches waiting prompts to observed keys, then starts answering a round
    /// whose keys all have their prompt.
    async fn match_prompts(&mut self) -> Result<()> {
        let mut still = Vec::new();
        for (prompt, since) in std::mem::take(&mut self.unmatched) {
            let candidates: Vec<(usize, String)> = self
                .tracker
                .rounds
                .iter()
                .enumerate()
                .filter(|(_, r)| r.stage == Stage::Collecting && r.server == prompt.server)
                .flat_map(|(i, r)| {
                    r.fingerprints
                        .iter()
                        .filter(|(key, fp)| {
                            **fp == prompt.fingerprint && !r.prompts.contains_key(*key)
                        })
                        .map(move |(key, _)| (i, key.clone()))
                })
                .collect();
            match candidates.as_slice() {
                [] => still.push((prompt, since)),
                [(round, key)] => {
                    if let Some(r) = self.tracker.rounds.get_mut(*round) {
                        r.prompts.insert(key.clone(), prompt.id.clone());
                    }
                }
                _ => {
                    let keys: Vec<String> = candidates.iter().map(|(_, k)| k.clone()).collect();
                    let error = Error::protocol(
                        "Codex could not complete action-bound elicitation: a native prompt matches more than one request",
                    )
                    .with_detail("reason", "ambiguous_native_prompt")
                    .with_detail("server", prompt.server.clone())
                    .with_detail("request_keys", keys);
                    return Err(self.interrupt(error).await);
                }
            }
        }
        self.unmatched = still;
        if self.answering.is_some() || self.pending_delivery() {
            return Ok(());
        }
        let ready = self.tracker.rounds.iter().position(|r| {
            r.stage == Stage::Collecting
                && !r.requests.is_empty()
                && r.prompts.len() == r.requests.len()
        });
        if let Some(round) = ready {
            self.start_answer(round)?;
        }
        Ok(())
    }

    fn start_answer(&mut self, index: usize) -> Result<()> {
        let Some(round) = self.tracker.rounds.get_mut(index) else {
            return Ok(());
        };
        round.stage = Stage::Answering;
        let future: Answering = match &mut self.context.answers {
            Answers::Fail => return Ok(()),
            Answers::Plan(plan) => {
                let next = plan.pop_front();
                Box::pin(async move {
                    next.ok_or_else(|| {
                        Error::protocol("the elicitation plan has no answer for this round")
                            .with_detail("reason", "unexpected_elicitation")
                    })
                })
            }
            Answers::Managed(coordinator) => {
                let coordinator = Arc::clone(coordinator);
                let Some(op) = self.tracker.operations.get(round.operation) else {
                    return Err(Error::protocol("observed round has no operation"));
                };
                let created_at = coordinator.now();
                let mut pending = PendingElicitationRound::new(
                    m3_types::new_id(),
                    self.context.execution_id.clone(),
                    op.logical_operation_id.clone(),
                    round.server.clone(),
                    op.operation_kind,
                    op.operation_name.clone(),
                    round.requests.clone(),
                    created_at,
                )?;
                pending.request_state = round.request_state.clone();
                pending.deadline = coordinator.deadline_for(created_at);
                let parameters = op.arguments.clone().unwrap_or_default();
                Box::pin(async move {
                    coordinator
                        .await_round(pending, parameters)
                        .await
                        .map(|delivery| delivery.responses)
                })
            }
        };
        self.answering = Some((index, future));
        Ok(())
    }

    async fn on_answer(&mut self, answer: (usize, Result<ResponseMap>)) -> Result<()> {
        let (index, responses) = answer;
        let responses = match responses {
            Ok(responses) => responses,
            Err(error) => return Err(self.interrupt(error).await),
        };
        let Some(round) = self.tracker.rounds.get_mut(index) else {
            return Ok(());
        };
        round.stage = Stage::Delivered;
        let prompts = round.prompts.clone();
        let requests = round.requests.clone();
        for (key, prompt_id) in prompts {
            let Some(response) = responses.get(&key) else {
                let error = Error::protocol(format!("no answer for request key '{key}'"))
                    .with_detail("reason", "missing_response");
                return Err(self.interrupt(error).await);
            };
            let url = matches!(requests.get(&key), Some(ElicitationRequest::Url(_)));
            self.app
                .respond(&prompt_id, native_result(response, url))
                .await?;
        }
        Ok(())
    }

    async fn check_match_timeouts(&mut self) -> Result<()> {
        let now = Instant::now();
        if let Some((prompt, _)) = self
            .unmatched
            .iter()
            .find(|(_, since)| now.duration_since(*since) >= MATCH_WAIT)
        {
            let error = Error::protocol(
                "Codex could not complete action-bound elicitation: a native prompt matches no request seen on the wire",
            )
            .with_detail("reason", "unmatched_native_prompt")
            .with_detail("server", prompt.server.clone());
            return Err(self.interrupt(error).await);
        }
        if let Some(round) = self.tracker.rounds.iter().find(|r| {
            r.stage == Stage::Collecting
                && !r.prompts.is_empty()
                && now.duration_since(r.since) >= MATCH_WAIT
        }) {
            let missing: Vec<&String> = round
                .requests
                .keys()
                .filter(|k| !round.prompts.contains_key(*k))
                .collect();
            let error = Error::protocol(
                "Codex could not complete action-bound elicitation: a request got no native prompt",
            )
            .with_detail("reason", "missing_native_prompt")
            .with_detail("server", round.server.clone())
            .with_detail(
                "request_keys",
                missing.into_iter().cloned().collect::<Vec<_>>(),
            );
            return Err(self.interrupt(error).await);
        }
        Ok(())
    }

    fn match_deadline(&self) -> Option<Instant> {
        let prompts = self.unmatched.iter().map(|(_, since)| *since);
        let rounds = self
            .tracker
            .rounds
            .iter()
            .filter(|r| r.stage == Stage::Collecting && !r.prompts.is_empty())
            .map(|r| r.since);
        prompts.chain(rounds).min().map(|since| since + MATCH_WAIT)
    }

    /// Interrupts the turn (nothing more is answered) and returns `error`.
    async fn interrupt(&mut self, error: Error) -> Error {
        self.answering = None;
        if let Answers::Managed(coordinator) = &self.context.answers {
            coordinator.fail_round(&error).await;
        }
        let sent = self
            .app
            .send_request(
                "turn/interrupt",
                json!({"threadId": self.thread_id, "turnId": self.turn_id}),
            )
            .await;
        if sent.is_err() {
            return error;
        }
        let until = tokio::time::Instant::now() + INTERRUPT_WAIT;
        loop {
            match tokio::time::timeout_at(until, self.app.next()).await {
                Ok(Ok(Incoming::Notification { method, params }))
                    if method == "turn/completed"
                        && params.pointer("/turn/id").and_then(Value::as_str)
                            == Some(self.turn_id.as_str()) =>
                {
                    let status = params
                        .pointer("/turn/status")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    tracing::info!(status, "codex turn ended after interrupt");
                    break;
                }
                Ok(Ok(Incoming::Request { id, .. })) => {
                    let _ = self
                        .app
                        .respond_error(&id, -32000, "turn interrupted by m3")
                        .await;
                }
                Ok(Ok(_)) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
        error.with_detail("turn_interrupted", true)
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

/// Whether an approval-marked prompt cannot be Codex's: its tool is selected (Codex
/// was configured to approve it without asking) or it is exactly a request seen on
/// the wire from that server.
fn forged_approval(
    tools: Option<&ToolSelection>,
    rounds: &[super::observe::ObservedRound],
    prompt: &NativePrompt,
) -> bool {
    let auto_approved = match (tools, prompt.approval.as_ref()) {
        (Some(tools), Some(approval)) => approval
            .tool
            .as_ref()
            .is_some_and(|tool| tools.allows(&prompt.server, tool)),
        _ => false,
    };
    auto_approved
        || rounds.iter().any(|r| {
            r.server == prompt.server && r.fingerprints.values().any(|f| *f == prompt.fingerprint)
        })
}

/// The one started, unapproved tool item an approval prompt is about (same
/// server, same tool when the prompt names it, same canonical arguments), or
/// `None` when there is none or more than one.
fn approval_target(items: &[ToolItem], prompt: &NativePrompt) -> Option<usize> {
    let approval = prompt.approval.as_ref()?;
    let arguments = approval.arguments.as_ref().map(|a| canonical(Some(a)));
    let candidates: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, item)| {
            item.server == prompt.server
                && !item.approved
                && approval.tool.as_ref().is_none_or(|t| *t == item.tool)
                && arguments.as_ref().is_none_or(|a| *a == item.arguments)
        })
        .map(|(i, _)| i)
        .collect();
    match candidates.as_slice() {
        [index] => Some(*index),
        _ => None,
    }
}

async fn poll_answer(answering: &mut Option<(usize, Answering)>) -> (usize, Result<ResponseMap>) {
    match answering {
        Some((index, future)) => {
            let result = future.await;
            let index = *index;
            *answering = None;
            (index, result)
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await,
        None => std::future::pending().await,
    }
}

/// The app-server answer to a native prompt: an accepted URL is `content: {}`,
/// decline and cancel carry no content.
fn native_result(response: &m3_types::ElicitationResponse, url: bool) -> Value {
    match response.action {
        ElicitationAction::Accept if url => json!({"action": "accept", "content": {}}),
        ElicitationAction::Accept => json!({
            "action": "accept",
            "content": response.content.clone().unwrap_or_default(),
        }),
        other => json!({"action": other.as_str()}),
    }
}

fn unexpected_elicitation(prompt: &NativePrompt) -> Error {
    Error::protocol(format!(
        "unexpected elicitation from server '{}': human_input is 'fail'",
        prompt.server
    ))
    .with_detail("reason", "unexpected_elicitation")
    .with_detail("server", prompt.server.clone())
    .with_detail("mode", prompt.mode.clone())
}

fn str_field(item: &Value, key: &str) -> String {
    item.get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn canonical(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "{}".into(),
        Some(value) => canonical_json(value).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(tool: &str, weight: u32, approved: bool) -> ToolItem {
        ToolItem {
            server: "shipping".into(),
            tool: tool.into(),
            arguments: canonical(Some(&json!({"weight_kg": weight}))),
            approved,
        }
    }

    fn approval(meta: Value) -> NativePrompt {
        NativePrompt::parse(
            json!(7),
            &json!({"serverName": "shipping", "mode": "form", "message": "Allow?",
                    "requestedSchema": {"type": "object", "properties": {}}, "_meta": meta}),
        )
        .unwrap()
    }

    #[test]
    fn approvals_need_exactly_one_matching_started_item() {
        let prompt = approval(json!({"codex_approval_kind": "mcp_tool_call",
            "tool_name": "book_shipment", "tool_params": {"weight_kg": 2}}));
        // Forged: no started item at all.
        assert_eq!(approval_target(&[], &prompt), None);
        assert_eq!(
            approval_target(&[item("book_shipment", 2, false)], &prompt),
            Some(0)
        );
        // Other arguments, another tool, or already approved: no match.
        assert_eq!(
            approval_target(&[item("book_shipment", 3, false)], &prompt),
            None
        );
        assert_eq!(approval_target(&[item("quote", 2, false)], &prompt), None);
        assert_eq!(
            approval_target(&[item("book_shipment", 2, true)], &prompt),
            None
        );
        // Two indistinguishable items: ambiguous, declined.
        let twins = [
            item("book_shipment", 2, false),
            item("book_shipment", 2, false),
        ];
        assert_eq!(approval_target(&twins, &prompt), None);
        // 0.156.1 sends no tool_name: the arguments decide.
        let old = approval(
            json!({"codex_approval_kind": "mcp_tool_call", "tool_params": {"weight_kg": 2}}),
        );
        assert_eq!(
            approval_target(
                &[item("quote", 3, false), item("book_shipment", 2, false)],
                &old
            ),
            Some(1)
        );
        // A server's own question is not an approval.
        let question = approval(json!({"tool_name": "book_shipment"}));
        assert_eq!(
            approval_target(&[item("book_shipment", 2, false)], &question),
            None
        );
    }

    #[test]
    fn approval_markers_on_selected_tools_are_forged() {
        let prompt = approval(json!({"codex_approval_kind": "mcp_tool_call",
            "tool_name": "book_shipment", "tool_params": {"weight_kg": 2}}));
        let selected = ToolSelection::parse(&["shipping:book_shipment"]).unwrap();
        let other = ToolSelection::parse(&["shipping:quote"]).unwrap();
        // Codex was told to approve book_shipment itself: this prompt is the server's.
        assert!(forged_approval(Some(&selected), &[], &prompt));
        assert!(!forged_approval(Some(&other), &[], &prompt));
        assert!(!forged_approval(None, &[], &prompt));
    }

    #[test]
    fn native_answers_follow_the_mode() {
        let mut content = serde_json::Map::new();
        content.insert("city".into(), json!("Pune"));
        let accept = m3_types::ElicitationResponse::accept(content);
        assert_eq!(
            native_result(&accept, false),
            json!({"action": "accept", "content": {"city": "Pune"}})
        );
        assert_eq!(
            native_result(&m3_types::ElicitationResponse::accept_url(), true),
            json!({"action": "accept", "content": {}})
        );
        assert_eq!(
            native_result(&m3_types::ElicitationResponse::decline(), false),
            json!({"action": "decline"})
        );
        assert_eq!(
            native_result(&m3_types::ElicitationResponse::cancel(), false),
            json!({"action": "cancel"})
        );
    }
}
