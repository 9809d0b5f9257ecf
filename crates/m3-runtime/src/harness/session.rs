//! [`AgentSession`]: what a harness uses to act. M3 is the MCP client: the
//! session runs every operation, answers input rounds according to the
//! execution's human-input policy, and records every logical operation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use m3_types::plan::{PlanMatcher, PlanQuestion};
use m3_types::{
    Clock, Error, OperationKind, PendingElicitationRound, Reason, ResponseMap, Result,
    ServerBinding, ToolSelection,
};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::operation_log::OperationLog;
use super::resumption::ResumedOperation;
use crate::coordinator::Coordinator;
use crate::spec::PermissionPolicy;
use crate::telemetry;
use m3_mcp::{
    CompletedOperation, ConnectOptions, InputRound, McpConnection, OperationProgress,
    OperationRequest,
};

/// How long [`AgentSession::call_tool`] waits for a tool to be listed.
const TOOL_LISTING_WAIT: Duration = Duration::from_secs(5);

/// The first pause between two listings while a tool is not listed; each pause doubles,
/// up to [`TOOL_LISTING_MAX_PAUSE`] (about 9 listings in [`TOOL_LISTING_WAIT`]).
const TOOL_LISTING_FIRST_PAUSE: Duration = Duration::from_millis(50);

/// The longest pause between two listings.
const TOOL_LISTING_MAX_PAUSE: Duration = Duration::from_secs(1);

/// How input rounds are answered.
#[derive(Debug)]
pub(crate) enum InputPolicy {
    /// `human_input = fail`: no answer; the execution fails (`unexpected_elicitation`).
    Fail,
    /// A predefined plan answers each request it matches.
    Plan(PlanMatcher),
    /// `human_input = managed`: the coordinator persists the round and waits.
    Managed(Arc<Coordinator>),
}

/// The agent's view of an execution: its MCP servers and its answer text.
///
/// A [`Harness`](super::Harness) calls [`call_tool`](Self::call_tool),
/// [`get_prompt`](Self::get_prompt), [`read_resource`](Self::read_resource) and
/// [`say`](Self::say); the session owns every retry and every input round.
#[derive(Debug)]
pub struct AgentSession {
    execution_id: String,
    bindings: Vec<ServerBinding>,
    tools: Option<ToolSelection>,
    connections: BTreeMap<String, Arc<McpConnection>>,
    input: InputPolicy,
    round_limit: u32,
    permission_policy: PermissionPolicy,
    interrupt: CancellationToken,
    log: Arc<OperationLog>,
    clock: Arc<dyn Clock>,
    /// The operation a predecessor worker handed over mid-round: the next matching call
    /// continues it instead of starting anew.
    pub(super) resumed: Option<ResumedOperation>,
}

/// What a session is made of (see [`AgentSession::connect`]).
#[derive(Debug)]
pub(crate) struct SessionSetup<'a> {
    pub(crate) execution_id: &'a str,
    pub(crate) servers: &'a [ServerBinding],
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) tools: Option<ToolSelection>,
    /// Where OAuth tokens of HTTP servers are kept and who is shown an authorization URL.
    pub(crate) oauth: m3_mcp::oauth::OAuthContext,
    pub(crate) input: InputPolicy,
    pub(crate) round_limit: u32,
    /// Bounds on each round a server sends (see [`m3_types::limits`]).
    pub(crate) round_limits: m3_types::RoundLimits,
    pub(crate) permission_policy: PermissionPolicy,
    pub(crate) interrupt: CancellationToken,
    pub(crate) log: Arc<OperationLog>,
    /// The store's clock: the operation log's times are the store's.
    pub(crate) clock: Arc<dyn Clock>,
    /// Whether M3 connects to the servers itself (false when the harness is
    /// the MCP client, as Codex is).
    pub(crate) connect: bool,
}

impl AgentSession {
    /// Builds the session; with `setup.connect`, connects to every server binding.
    /// Each stdio binding gets `env` added to its environment (its own keys win).
    pub(crate) async fn connect(setup: SessionSetup<'_>) -> Result<Self> {
        let bindings: Vec<ServerBinding> = setup
            .servers
            .iter()
            .map(|server| match server {
                ServerBinding::Stdio(stdio) => {
                    let mut binding = stdio.clone();
                    for (key, value) in setup.env {
                        binding
                            .env
                            .entry(key.clone())
                            .or_insert_with(|| value.clone());
                    }
                    ServerBinding::Stdio(binding)
                }
                other => other.clone(),
            })
            .collect();
        let mut connections = BTreeMap::new();
        if setup.connect {
            for binding in &bindings {
                let options = ConnectOptions::new()
                    .with_tool_selection(setup.tools.clone())
                    .with_round_limit(setup.round_limit.saturating_add(1))
                    .with_round_limits(setup.round_limits)
                    .with_clock(Arc::clone(&setup.clock))
                    .with_oauth(setup.oauth.clone());
                let connection = McpConnection::connect_binding(binding, options).await?;
                setup.log.add_secrets(connection.secret_values());
                connections.insert(binding.name().to_owned(), Arc::new(connection));
            }
        }
        Ok(Self {
            execution_id: setup.execution_id.to_owned(),
            bindings,
            tools: setup.tools,
            connections,
            input: setup.input,
            round_limit: setup.round_limit,
            permission_policy: setup.permission_policy,
            interrupt: setup.interrupt,
            log: setup.log,
            clock: setup.clock,
            resumed: None,
        })
    }

    /// The execution this session belongs to.
    pub fn execution_id(&self) -> &str {
        &self.execution_id
    }

    /// The server bindings, each stdio one with the worker's environment added.
    pub fn bindings(&self) -> &[ServerBinding] {
        &self.bindings
    }

    /// The tool selection (`None`: every tool is allowed).
    pub fn tool_selection(&self) -> Option<&ToolSelection> {
        self.tools.as_ref()
    }

    /// How native prompts outside the selected tools are answered.
    pub fn permission_policy(&self) -> PermissionPolicy {
        self.permission_policy
    }

    /// Cancelled when the worker wants the turn to stop (cancel or timeout); a
    /// harness that can interrupt its agent gracefully watches it.
    pub fn interrupt_token(&self) -> CancellationToken {
        self.interrupt.clone()
    }

    /// The store's clock, for the times a harness records.
    #[cfg_attr(
        not(feature = "codex"),
        expect(
            dead_code,
            reason = "only a harness that is its own MCP client (codex) uses it"
        )
    )]
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    #[cfg_attr(
        not(feature = "codex"),
        expect(
            dead_code,
            reason = "only a harness that is its own MCP client (codex) uses it"
        )
    )]
    pub(crate) fn operation_log(&self) -> Arc<OperationLog> {
        Arc::clone(&self.log)
    }

    #[cfg_attr(
        not(feature = "codex"),
        expect(
            dead_code,
            reason = "only a harness that is its own MCP client (codex) uses it"
        )
    )]
    pub(crate) fn input_policy_mut(&mut self) -> &mut InputPolicy {
        &mut self.input
    }

    /// Calls tool `tool` on server `server`.
    ///
    /// # Errors
    /// `invalid_argument` for an unknown server or a tool outside the selection;
    /// the MCP errors of [`McpConnection::start`]; `protocol_error` with detail
    /// `reason = "unexpected_elicitation"` when the server asks for input and the
    /// execution has `human_input = fail`; managed-input errors of the round.
    pub async fn call_tool(
        &mut self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<CompletedOperation> {
        // Boxed, like every step that is not alive while a round waits for its answer.
        Box::pin(self.await_tool(server, tool)).await?;
        self.run(server, OperationRequest::tool(tool, arguments))
            .await
    }

    /// Like an agent that lists tools before calling one: some servers register
    /// tools only after the handshake, so wait (briefly, with backoff) until `tool` is
    /// listed. A tool still missing from a listing after [`TOOL_LISTING_WAIT`] is never
    /// called; a server whose listing fails is called as asked (it may not list tools).
    ///
    /// # Errors
    /// `invalid_argument` with reason `tool_not_listed`.
    async fn await_tool(&self, server: &str, tool: &str) -> Result<()> {
        let Some(connection) = self.connections.get(server) else {
            return Ok(());
        };
        let deadline = tokio::time::Instant::now() + TOOL_LISTING_WAIT;
        let mut pause = TOOL_LISTING_FIRST_PAUSE;
        loop {
            let listed = match connection.list_tools().await {
                Ok(tools) => tools,
                Err(_) => return Ok(()),
            };
            if listed.iter().any(|t| t.name == tool) {
                return Ok(());
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(Error::model_validation(format!(
                    "server '{server}' does not list tool '{tool}' (waited {} s)",
                    TOOL_LISTING_WAIT.as_secs()
                ))
                .with_reason(Reason::ToolNotListed)
                .with_detail("server", server.to_owned())
                .with_detail("tool", tool.to_owned()));
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(TOOL_LISTING_MAX_PAUSE);
        }
    }

    /// Gets prompt `name` from server `server`.
    ///
    /// # Errors
    /// As [`call_tool`](Self::call_tool).
    pub async fn get_prompt(
        &mut self,
        server: &str,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<CompletedOperation> {
        self.run(server, OperationRequest::prompt(name, arguments))
            .await
    }

    /// Reads resource `uri` from server `server`.
    ///
    /// # Errors
    /// As [`call_tool`](Self::call_tool).
    pub async fn read_resource(&mut self, server: &str, uri: &str) -> Result<CompletedOperation> {
        self.run(server, OperationRequest::resource(uri)).await
    }

    /// Adds text to the agent's answer.
    pub fn say(&mut self, text: impl Into<String>) {
        self.log.say(text.into());
    }

    /// The agent's answer so far (every `say` and every operation's text).
    pub fn transcript(&self) -> Vec<String> {
        self.log.transcript()
    }

    /// Records that script step `index` starts (where a successor goes on after a handover).
    pub(crate) fn begin_step(&self, index: usize) {
        self.log.begin_step(index);
    }

    /// Closes every connection gracefully.
    pub(crate) async fn close(self) {
        for (_, connection) in self.connections {
            if let Ok(connection) = Arc::try_unwrap(connection) {
                let _ = connection.close().await;
            }
        }
    }

    async fn run(&mut self, server: &str, request: OperationRequest) -> Result<CompletedOperation> {
        let connection = self.connections.get(server).cloned().ok_or_else(|| {
            Error::model_validation(format!("unknown server '{server}'"))
                .with_detail("server", server)
        })?;
        let logical_operation_id = m3_types::new_id();
        let span = tracing::info_span!(
            "m3.mcp.operation",
            mcp.server = %server,
            mcp.method = mcp_method(request.kind()),
            mcp.operation = %request.name(),
            logical_operation.id = %logical_operation_id,
            execution.id = %self.execution_id,
        );
        let trace_context =
            telemetry::operation_trace_context(&span, &self.execution_id, &logical_operation_id);
        if self
            .resumed
            .as_ref()
            .is_some_and(|r| r.matches(server, &request))
        {
            self.log.continue_as(&logical_operation_id);
        }
        let request = request
            .with_logical_operation_id(logical_operation_id.clone())
            .with_round_limit(self.round_limit.saturating_add(1))
            .with_trace_context(trace_context);
        self.log.start(&connection, &logical_operation_id);
        let result = self.drive(&connection, request).instrument(span).await;
        self.log.finish(&connection, &logical_operation_id);
        let done = result?;
        let text = done.text();
        if !text.is_empty() {
            self.say(text);
        }
        Ok(done)
    }

    async fn drive(
        &mut self,
        connection: &McpConnection,
        request: OperationRequest,
    ) -> Result<CompletedOperation> {
        if let Some(resumed) = self.take_resumed(connection.server_name(), &request) {
            return self.drive_resumed(connection, request, resumed).await;
        }
        // The steps around the wait for an answer are boxed: a waiting execution keeps only
        // the wait's state, for as long as the answer takes.
        let progress = Box::pin(connection.start(request)).await?;
        self.drive_from(connection, progress, false).await
    }

    /// Goes on with an operation from `progress`; `delivered`: a managed round's answer was
    /// just sent (the next progress resolves it).
    pub(super) async fn drive_from(
        &mut self,
        connection: &McpConnection,
        mut progress: OperationProgress,
        mut delivered: bool,
    ) -> Result<CompletedOperation> {
        loop {
            let mut round = match progress {
                OperationProgress::Complete(done) => {
                    if delivered {
                        Box::pin(self.coordinator()?.resolve_round(true)).await?;
                    }
                    return Ok(done);
                }
                OperationProgress::InputRequired(round) => round,
            };
            if delivered {
                // The server answered the retry with the next round: the previous
                // round was delivered.
                Box::pin(self.coordinator()?.resolve_round(false)).await?;
                delivered = false;
            }
            let (responses, managed) = match &mut self.input {
                InputPolicy::Fail => return Err(unexpected_elicitation(&round)),
                InputPolicy::Plan(plan) => (
                    plan.answer(&PlanQuestion {
                        server: round.server(),
                        operation_kind: round.operation_kind(),
                        operation_name: round.operation_name(),
                        requests: round.requests(),
                    })?,
                    None,
                ),
                InputPolicy::Managed(coordinator) => {
                    let coordinator = Arc::clone(coordinator);
                    let pending = self.pending_round(&mut round, &coordinator)?;
                    let round_id = pending.round_id.clone();
                    let parameters = round.record().arguments.clone().unwrap_or_default();
                    let transferable = self.is_transferable(connection, &round);
                    let delivery = coordinator
                        .await_round(pending, parameters, transferable)
                        .await?;
                    delivered = true;
                    (delivery.responses, Some((coordinator, round_id)))
                }
            };
            progress = match managed {
                None => Box::pin(round.respond(responses)).await?,
                Some((coordinator, round_id)) => {
                    let span = tracing::info_span!("m3.round.delivery", round.id = %round_id);
                    Box::pin(deliver(&coordinator, round, responses).instrument(span)).await?
                }
            };
        }
    }

    /// Whether a round of `connection` can be handed to another worker: everything its
    /// retry needs is in the store (a 2026-07-28 round over Streamable HTTP; the retry is a
    /// fresh request with the stored `requestState` and the answers).
    fn is_transferable(&self, connection: &McpConnection, round: &InputRound) -> bool {
        round.is_resumable()
            && self.bindings.iter().any(|binding| {
                binding.name() == connection.server_name()
                    && matches!(binding, ServerBinding::Http(_))
            })
    }

    pub(super) fn coordinator(&self) -> Result<&Coordinator> {
        match &self.input {
            InputPolicy::Managed(coordinator) => Ok(coordinator),
            _ => Err(Error::managed_input_state("no managed-input coordinator")),
        }
    }

    fn pending_round(
        &self,
        round: &mut InputRound,
        coordinator: &Coordinator,
    ) -> Result<PendingElicitationRound> {
        let created_at = coordinator.now();
        let requests = round.hand_over_requests();
        let mut pending = PendingElicitationRound::new(
            m3_types::new_id(),
            self.execution_id.clone(),
            round.logical_operation_id(),
            round.server(),
            round.operation_kind(),
            round.operation_name(),
            requests,
            created_at,
        )?;
        pending.request_state = round.request_state().map(str::to_owned);
        pending.deadline = coordinator.deadline_for(created_at);
        Ok(pending)
    }
}

/// Sends a managed round's retry while the coordinator records the delivery: the retry is
/// polled first, so it leaves before the bookkeeping's commits. Either failing fails the round.
async fn deliver(
    coordinator: &Coordinator,
    round: InputRound,
    responses: ResponseMap,
) -> Result<OperationProgress> {
    deliver_with(coordinator, round.respond(responses)).await
}

/// Runs `send` (a managed round's retry) while the coordinator records the delivery.
pub(super) async fn deliver_with(
    coordinator: &Coordinator,
    send: impl std::future::Future<Output = Result<OperationProgress>>,
) -> Result<OperationProgress> {
    let (sent, recorded) = tokio::join!(send, coordinator.record_delivery());
    match recorded.and(sent) {
        Ok(next) => Ok(next),
        Err(error) => {
            coordinator.fail_round(&error).await;
            Err(error)
        }
    }
}

/// The MCP method of an operation kind, for its span.
fn mcp_method(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::Tool => "tools/call",
        OperationKind::Prompt => "prompts/get",
        OperationKind::Resource => "resources/read",
    }
}

fn unexpected_elicitation(round: &InputRound) -> Error {
    let kind = match round.operation_kind() {
        OperationKind::Tool => "tool",
        OperationKind::Prompt => "prompt",
        OperationKind::Resource => "resource",
    };
    Error::protocol(format!(
        "unexpected elicitation from server '{}' during {kind} '{}': human_input is 'fail'",
        round.server(),
        round.operation_name()
    ))
    .with_detail("reason", "unexpected_elicitation")
    .with_detail("server", round.server())
    .with_detail("operation_kind", kind)
    .with_detail("operation_name", round.operation_name())
    .with_detail(
        "request_keys",
        round
            .request_keys()
            .into_iter()
            .cloned()
            .collect::<Vec<_>>(),
    )
}
