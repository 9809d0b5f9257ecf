//! What an execution runs, as persisted in the execution store.

use std::collections::BTreeMap;
use std::time::Duration;

pub use m3_types::ElicitationPlan;
use m3_types::{Error, HumanInput, Result, ServerBinding, ToolSelection};
use serde::{Deserialize, Serialize};

use crate::selection::AgentSelection;

/// Default per-execution elicitation round budget.
pub const DEFAULT_ROUND_LIMIT: u32 = 10;
/// Default execution timeout: 180 s.
pub const DEFAULT_EXECUTION_TIMEOUT: Duration = Duration::from_secs(180);
/// Default round and execution lease: 30 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Default lease renewal interval: 10 s.
pub const DEFAULT_RENEW_EVERY: Duration = Duration::from_secs(10);

/// How native prompts outside the selected MCP tools are answered (Codex's
/// command, file-change and permission approvals). Calls to selected tools are
/// approved from the tool selection, never from this policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PermissionPolicy {
    /// Decline every such prompt (the default).
    #[default]
    Deny,
    /// Approve every such prompt.
    Allow,
}

impl std::str::FromStr for PermissionPolicy {
    type Err = Error;

    /// # Errors
    /// `invalid_argument` for anything but `deny` and `allow`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "deny" => Ok(Self::Deny),
            "allow" => Ok(Self::Allow),
            other => Err(Error::model_validation(format!(
                "permission_policy must be 'deny' or 'allow', got '{other}'"
            ))),
        }
    }
}

/// Everything a worker needs to run one execution; persisted as the execution's
/// `spec` JSON so that any process can read what was submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExecutionSpec {
    /// The user message given to the agent.
    pub prompt: String,
    /// The harness and its options.
    pub agent: AgentSelection,
    /// The MCP server bindings, by name: stdio processes or Streamable HTTP endpoints.
    pub servers: Vec<ServerBinding>,
    /// `"server:tool"` names the agent may call (`None`: every tool).
    pub tools: Option<Vec<String>>,
    /// `fail` (default) or `managed`.
    pub human_input: HumanInput,
    /// Predefined answers (only with `human_input = fail`).
    pub elicitation_plan: Option<ElicitationPlan>,
    /// Per-execution elicitation round budget (failed rounds count).
    pub elicitation_round_limit: u32,
    /// Execution timeout in milliseconds.
    pub timeout_ms: u64,
    /// Round and execution lease in milliseconds.
    pub lease_ms: u64,
    /// Lease renewal interval in milliseconds.
    pub renew_every_ms: u64,
    /// When set, every managed round gets `deadline = created_at + input_deadline_ms`.
    pub input_deadline_ms: Option<u64>,
    /// The fractions of a round's deadline window at which a `round.deadline_approaching`
    /// reminder is appended (`None`: [`DEFAULT_REMIND_AT`](crate::DEFAULT_REMIND_AT), 0.5
    /// and 0.9; empty: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_at: Option<Vec<f64>>,
    /// How native prompts outside the selected tools are answered (default deny).
    #[serde(default)]
    pub permission_policy: PermissionPolicy,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl ExecutionSpec {
    /// A spec running `agent` on `prompt` with every default.
    pub fn new(prompt: impl Into<String>, agent: AgentSelection) -> Self {
        Self {
            prompt: prompt.into(),
            agent,
            servers: Vec::new(),
            tools: None,
            human_input: HumanInput::Fail,
            elicitation_plan: None,
            elicitation_round_limit: DEFAULT_ROUND_LIMIT,
            timeout_ms: millis(DEFAULT_EXECUTION_TIMEOUT),
            lease_ms: millis(DEFAULT_LEASE),
            renew_every_ms: millis(DEFAULT_RENEW_EVERY),
            input_deadline_ms: None,
            remind_at: None,
            permission_policy: PermissionPolicy::Deny,
        }
    }

    /// Sets the permission policy.
    #[must_use]
    pub fn with_permission_policy(mut self, policy: PermissionPolicy) -> Self {
        self.permission_policy = policy;
        self
    }

    /// Sets the server bindings (stdio or HTTP, anything `Into<ServerBinding>`).
    #[must_use]
    pub fn with_servers<I, S>(mut self, servers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<ServerBinding>,
    {
        self.servers = servers.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the tool selection.
    #[must_use]
    pub fn with_tools(mut self, tools: Option<Vec<String>>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets `human_input`.
    #[must_use]
    pub fn with_human_input(mut self, human_input: HumanInput) -> Self {
        self.human_input = human_input;
        self
    }

    /// Sets a predefined elicitation plan.
    #[must_use]
    pub fn with_elicitation_plan(mut self, plan: Option<ElicitationPlan>) -> Self {
        self.elicitation_plan = plan;
        self
    }

    /// Sets the round budget.
    #[must_use]
    pub fn with_round_limit(mut self, limit: u32) -> Self {
        self.elicitation_round_limit = limit;
        self
    }

    /// Sets the execution timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout_ms = millis(timeout);
        self
    }

    /// Sets the lease and its renewal interval.
    #[must_use]
    pub fn with_lease(mut self, lease: Duration, renew_every: Duration) -> Self {
        self.lease_ms = millis(lease);
        self.renew_every_ms = millis(renew_every);
        self
    }

    /// Sets the per-round input deadline.
    #[must_use]
    pub fn with_input_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.input_deadline_ms = deadline.map(millis);
        self
    }

    /// Sets the reminder fractions (`None`: the default, 0.5 and 0.9).
    #[must_use]
    pub fn with_remind_at(mut self, fractions: Option<Vec<f64>>) -> Self {
        self.remind_at = fractions;
        self
    }

    /// The reminder fractions in effect.
    pub fn remind_at(&self) -> Vec<f64> {
        self.remind_at
            .clone()
            .unwrap_or_else(|| crate::DEFAULT_REMIND_AT.to_vec())
    }

    /// The execution timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The lease duration.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// The lease renewal interval.
    pub fn renew_every(&self) -> Duration {
        Duration::from_millis(self.renew_every_ms)
    }

    /// The parsed tool selection.
    ///
    /// # Errors
    /// `invalid_argument` for a malformed `"server:tool"` name.
    pub fn tool_selection(&self) -> Result<Option<ToolSelection>> {
        self.tools
            .as_ref()
            .map(|names| ToolSelection::parse(names))
            .transpose()
    }

    /// Checks the spec as submission does.
    ///
    /// # Errors
    /// `invalid_argument` for: a harness that is not available, a malformed script,
    /// duplicate or invalid server bindings (an HTTP host its trust level refuses),
    /// a tool selection naming an unbound
    /// server, `managed` with a predefined plan, a zero round limit, timeout or
    /// lease, or a renewal interval not shorter than the lease.
    pub fn validate(&self) -> Result<()> {
        self.agent.validate()?;
        let mut names = BTreeMap::new();
        for server in &self.servers {
            server.validate()?;
            if names.insert(server.name(), ()).is_some() {
                return Err(Error::model_validation(format!(
                    "server binding '{}' is given twice",
                    server.name()
                )));
            }
        }
        if let Some(selection) = self.tool_selection()? {
            selection.check_servers(names.keys().copied())?;
        }
        if self.human_input == HumanInput::Managed && self.elicitation_plan.is_some() {
            return Err(
                Error::model_validation(m3_types::messages::MANAGED_WITH_PLAN)
                    .with_detail("operation", "execution.submit"),
            );
        }
        if self.elicitation_round_limit == 0 {
            return Err(Error::model_validation(
                "elicitation_round_limit must be positive",
            ));
        }
        if self.timeout_ms == 0 || self.lease_ms == 0 || self.renew_every_ms == 0 {
            return Err(Error::model_validation(
                "timeout, lease and renewal interval must be positive",
            ));
        }
        if self.renew_every_ms >= self.lease_ms {
            return Err(Error::model_validation(
                "lease renewal interval must be shorter than the lease",
            ));
        }
        if self.input_deadline_ms == Some(0) {
            return Err(Error::model_validation("input deadline must be positive"));
        }
        for fraction in self.remind_at.iter().flatten() {
            m3_types::check_reminder_fraction(*fraction)?;
        }
        Ok(())
    }
}
