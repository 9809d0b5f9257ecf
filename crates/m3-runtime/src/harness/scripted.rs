//! The built-in deterministic agent.

use async_trait::async_trait;
use m3_types::Result;

use super::{AgentSession, Harness};
use crate::selection::{Script, ScriptStep};

/// A deterministic agent that runs a [`Script`]: each step calls a tool, gets a
/// prompt, reads a resource or says text. It needs no model and no network. The
/// prompt is recorded in the execution's result, not interpreted.
#[derive(Debug, Clone)]
pub struct ScriptedHarness {
    script: Script,
    /// The first step to run (after a handover: the one whose round was handed over).
    first_step: usize,
}

impl ScriptedHarness {
    /// A harness running `script`.
    pub fn new(script: Script) -> Self {
        Self {
            script,
            first_step: 0,
        }
    }

    /// The same harness, going on from step `index` (a successor after a handover).
    pub(crate) fn starting_at(mut self, index: usize) -> Self {
        self.first_step = index;
        self
    }
}

#[async_trait]
impl Harness for ScriptedHarness {
    fn name(&self) -> &'static str {
        "scripted"
    }

    async fn run_turn(&self, _prompt: &str, session: &mut AgentSession) -> Result<String> {
        for (index, step) in self.script.steps.iter().enumerate().skip(self.first_step) {
            session.begin_step(index);
            let target = step.target()?;
            match (step, target) {
                (ScriptStep::Say { say }, _) => session.say(say.clone()),
                (ScriptStep::Call { arguments, .. }, Some(t)) => {
                    session
                        .call_tool(&t.server, &t.name, arguments.clone().unwrap_or_default())
                        .await?;
                }
                (ScriptStep::Prompt { arguments, .. }, Some(t)) => {
                    session
                        .get_prompt(&t.server, &t.name, arguments.clone().unwrap_or_default())
                        .await?;
                }
                (ScriptStep::Read { .. }, Some(t)) => {
                    session.read_resource(&t.server, &t.name).await?;
                }
                (_, None) => {}
            }
        }
        Ok(session.transcript().join("\n"))
    }
}
