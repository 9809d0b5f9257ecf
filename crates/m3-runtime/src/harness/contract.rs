//! The [`Harness`] trait: what every harness (scripted, Codex) implements for the worker.

use async_trait::async_trait;
use m3_types::Result;

use super::session::AgentSession;

/// Something that turns a prompt into MCP operations.
#[async_trait]
pub trait Harness: std::fmt::Debug + Send + Sync {
    /// The harness name (`"scripted"`, `"codex"`).
    fn name(&self) -> &'static str;

    /// Whether M3 connects to the MCP servers for this harness (true: the harness
    /// acts through [`AgentSession::call_tool`] and friends). A harness whose agent
    /// is itself the MCP client returns false and uses
    /// [`AgentSession::bindings`].
    fn connects_servers(&self) -> bool {
        true
    }

    /// Whether the harness watches [`AgentSession::interrupt_token`] and ends its
    /// turn by itself on cancel or timeout (the worker then gives it a few seconds
    /// before dropping it). False: the turn is dropped at once.
    fn interrupts_gracefully(&self) -> bool {
        false
    }

    /// Runs one turn for `prompt` and returns the agent's final text.
    ///
    /// # Errors
    /// Any error of the session's operations ends the turn with that error.
    async fn run_turn(&self, prompt: &str, session: &mut AgentSession) -> Result<String>;
}
