//! Harnesses: what turns a prompt into MCP operations.
//!
//! A [`Harness`] drives an [`AgentSession`]; M3 is the MCP client and owns every
//! retry and input round. [`ScriptedHarness`] is the built-in deterministic
//! agent. `codex` is recognised in [`AgentSelection`] but not available yet.

mod scripted;
mod session;

use async_trait::async_trait;
use m3_types::Result;

use crate::selection::AgentSelection;

pub use scripted::ScriptedHarness;
pub use session::AgentSession;
pub(crate) use session::{InputPolicy, OperationLog};

/// Something that turns a prompt into MCP operations.
#[async_trait]
pub trait Harness: std::fmt::Debug + Send + Sync {
    /// The harness name (`"scripted"`).
    fn name(&self) -> &'static str;

    /// Runs one turn for `prompt` and returns the agent's final text.
    ///
    /// # Errors
    /// Any error of the session's operations ends the turn with that error.
    async fn run_turn(&self, prompt: &str, session: &mut AgentSession) -> Result<String>;
}

/// The harness for `selection`.
///
/// # Errors
/// `invalid_argument` for a harness that is not available yet (`codex`) or a
/// malformed script.
pub fn harness_for(selection: &AgentSelection) -> Result<Box<dyn Harness>> {
    selection.validate()?;
    match selection {
        AgentSelection::Scripted(scripted) => {
            Ok(Box::new(ScriptedHarness::new(scripted.script.clone())))
        }
        AgentSelection::Codex(_) => Err(m3_types::Error::model_validation(
            "harness 'codex' is not available yet",
        )),
    }
}
