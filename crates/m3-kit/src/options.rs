//! [`SubmitOptions`]: how an agent submission runs.

use std::time::Duration;

use m3_runtime::{
    DEFAULT_EXECUTION_TIMEOUT, DEFAULT_LEASE, DEFAULT_RENEW_EVERY, DEFAULT_ROUND_LIMIT,
    ElicitationPlan, PermissionPolicy,
};
use m3_types::{HumanInput, Result, ServerBinding};

/// A value accepted by [`SubmitOptions::human_input`]: a [`HumanInput`] or its
/// text (`"fail"`, `"managed"`); bad text is reported at submission as
/// `invalid_argument`.
pub trait HumanInputValue {
    /// The parsed value.
    ///
    /// # Errors
    /// `invalid_argument` ("human_input must be 'fail' or 'managed'").
    fn into_human_input(self) -> Result<HumanInput>;
}

impl HumanInputValue for HumanInput {
    fn into_human_input(self) -> Result<HumanInput> {
        Ok(self)
    }
}

impl HumanInputValue for &str {
    fn into_human_input(self) -> Result<HumanInput> {
        self.parse()
    }
}

impl HumanInputValue for String {
    fn into_human_input(self) -> Result<HumanInput> {
        self.parse()
    }
}

/// Options of [`AsyncAgent::submit`](crate::AsyncAgent::submit) (and the blocking
/// [`Agent::submit`](crate::Agent::submit)). Every setter documents its default.
///
/// ```
/// use std::time::Duration;
/// use m3_kit::SubmitOptions;
/// use m3_types::{HumanInput, StdioServer};
/// let options = SubmitOptions::new()
///     .server(StdioServer::new("shipping", "m3").with_args(["example-server", "shipping"]))
///     .tools(["shipping:book_shipment"])
///     .human_input(HumanInput::Managed)
///     .timeout(Duration::from_secs(120));
/// # let _ = options;
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct SubmitOptions {
    pub(crate) servers: Vec<ServerBinding>,
    pub(crate) tools: Option<Vec<String>>,
    pub(crate) human_input: Result<HumanInput, String>,
    pub(crate) plan: Option<ElicitationPlan>,
    pub(crate) round_limit: u32,
    pub(crate) timeout: Duration,
    pub(crate) lease: Duration,
    pub(crate) renew_every: Duration,
    pub(crate) input_deadline: Option<Duration>,
    pub(crate) remind_at: Option<Vec<f64>>,
    pub(crate) permission_policy: PermissionPolicy,
}

impl Default for SubmitOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl SubmitOptions {
    /// No servers, every tool, `human_input = fail`, 10 rounds, 180 s timeout,
    /// 30 s lease renewed every 10 s, no input deadline.
    pub fn new() -> Self {
        Self {
            servers: Vec::new(),
            tools: None,
            human_input: Ok(HumanInput::Fail),
            plan: None,
            round_limit: DEFAULT_ROUND_LIMIT,
            timeout: DEFAULT_EXECUTION_TIMEOUT,
            lease: DEFAULT_LEASE,
            renew_every: DEFAULT_RENEW_EVERY,
            input_deadline: None,
            remind_at: None,
            permission_policy: PermissionPolicy::Deny,
        }
    }

    /// How native prompts outside the selected tools are answered (Codex's
    /// command, file-change and permission approvals; default deny). Calls to
    /// selected tools are approved from [`tools`](Self::tools), not from this.
    pub fn permission_policy(mut self, policy: PermissionPolicy) -> Self {
        self.permission_policy = policy;
        self
    }

    /// Adds one server binding: a [`StdioServer`](m3_types::StdioServer) or an
    /// [`HttpServer`](m3_types::HttpServer) (or a [`ServerBinding`]).
    pub fn server(mut self, server: impl Into<ServerBinding>) -> Self {
        self.servers.push(server.into());
        self
    }

    /// Adds server bindings.
    pub fn servers<S: Into<ServerBinding>>(mut self, servers: impl IntoIterator<Item = S>) -> Self {
        self.servers.extend(servers.into_iter().map(Into::into));
        self
    }

    /// Limits the agent to these `"server:tool"` names (default: every tool).
    pub fn tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Allows every tool again (the default).
    pub fn all_tools(mut self) -> Self {
        self.tools = None;
        self
    }

    /// `fail` (default: an elicitation fails the execution) or `managed` (rounds
    /// are stored and answered through the handle).
    pub fn human_input(mut self, value: impl HumanInputValue) -> Self {
        self.human_input = value.into_human_input().map_err(|e| e.message().to_owned());
        self
    }

    /// A predefined plan answering rounds without a human (not with `managed`).
    pub fn elicitation_plan(mut self, plan: ElicitationPlan) -> Self {
        self.plan = Some(plan);
        self
    }

    /// Per-execution round budget, failed rounds included (default 10).
    pub fn elicitation_round_limit(mut self, limit: u32) -> Self {
        self.round_limit = limit;
        self
    }

    /// Execution timeout (default 180 s); on expiry the outcome is `timed_out`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Round and execution lease (default 30 s).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Lease renewal interval (default 10 s; must be shorter than the lease).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = every;
        self
    }

    /// Gives every managed round a deadline this long after its creation
    /// (default: none). Expiry fails the round (`timeout`) and the execution.
    pub fn input_deadline(mut self, deadline: Duration) -> Self {
        self.input_deadline = Some(deadline);
        self
    }

    /// Appends a `round.deadline_approaching` reminder at each of these fractions of a
    /// round's deadline window (default 0.5 and 0.9; empty: none). Each is above 0 and
    /// below 1 (checked at submission).
    pub fn remind_at(mut self, fractions: impl IntoIterator<Item = f64>) -> Self {
        self.remind_at = Some(fractions.into_iter().collect());
        self
    }
}
