//! [`AsyncAgent`]: submits executions for one agent selection.

use std::sync::Arc;

use m3_runtime::{AgentSelection, ExecutionSpec};
use m3_store::NewExecution;
use m3_types::{Error, ExecutionStatus, HumanInput, Result, messages};

use crate::command_path::resolve_commands;
use crate::handle::AsyncExecutionHandle;
use crate::options::SubmitOptions;
use crate::shared::KitInner;

/// An agent of a kit (from [`AsyncMcpTestKit::agents`](crate::AsyncMcpTestKit::agents)).
#[derive(Debug, Clone)]
pub struct AsyncAgent {
    pub(crate) kit: Arc<KitInner>,
    pub(crate) selection: AgentSelection,
}

impl AsyncAgent {
    /// The agent's selection.
    pub fn selection(&self) -> &AgentSelection {
        &self.selection
    }

    /// Submits `prompt`: stores the execution (`queued`) and starts its worker
    /// in the background.
    ///
    /// # Errors
    /// `invalid_argument` (ModelValidationError) for a bad `human_input`,
    /// `managed` without a persistent store, `managed` with a predefined plan, an
    /// invalid tool selection or server binding, a server command that is a bare name not
    /// found on the caller's `PATH` (bare names are resolved here, because server processes
    /// start with a cleared environment); `storage_error`.
    ///
    /// # Cancel safety
    ///
    /// Dropped mid-way, the execution may already be stored (`queued`, listed by
    /// `executions()`) while this process never started its worker. Do not race it in
    /// `select!`.
    pub async fn submit(
        &self,
        prompt: impl Into<String>,
        options: SubmitOptions,
    ) -> Result<AsyncExecutionHandle> {
        let human_input = options.human_input.clone().map_err(|message| {
            Error::model_validation(message).with_detail("operation", "execution.submit")
        })?;
        if human_input == HumanInput::Managed && !self.kit.persistent {
            return Err(
                Error::model_validation(messages::MANAGED_NEEDS_PERSISTENT_STORE)
                    .with_detail("operation", "execution.submit"),
            );
        }
        let servers = resolve_commands(options.servers, std::env::var_os("PATH").as_deref())?;
        let spec = ExecutionSpec::new(prompt, self.selection.clone())
            .with_servers(servers)
            .with_tools(options.tools)
            .with_human_input(human_input)
            .with_elicitation_plan(options.plan)
            .with_round_limit(options.round_limit)
            .with_timeout(options.timeout)
            .with_lease(options.lease, options.renew_every)
            .with_input_deadline(options.input_deadline)
            .with_remind_at(options.remind_at)
            .with_permission_policy(options.permission_policy);
        spec.validate()?;
        let json = serde_json::to_value(&spec).map_err(|e| {
            Error::model_validation("execution spec is not serializable").with_source(e)
        })?;
        let record = self
            .kit
            .store
            .create_execution(NewExecution::new(json).with_human_input(human_input))
            .await?;
        self.kit
            .store
            .transition(&record.execution_id, ExecutionStatus::Queued, None)
            .await?;
        tracing::info!(execution.id = %record.execution_id, %human_input, "execution submitted");
        self.kit.spawn_worker(&record.execution_id);
        Ok(AsyncExecutionHandle::new(
            Arc::clone(&self.kit),
            record.execution_id,
            human_input,
        ))
    }
}
