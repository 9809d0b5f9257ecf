//! Harnesses: what turns a prompt into MCP operations.
//!
//! Plumbing for `m3-kit` and the `m3` binary, exempt from semver (see the crate's
//! [stability note](crate#stability)): applications use `m3-kit`.
//!
//! A [`Harness`] drives an [`AgentSession`]; M3 is the MCP client and owns every
//! retry and input round. [`ScriptedHarness`] is the built-in deterministic
//! agent; [`CodexHarness`] drives the Codex CLI's app-server, which is then the
//! MCP client itself (M3 watches the wire through its relay).

#[cfg(feature = "codex")]
mod codex;
mod contract;
mod operation_log;
mod resumed;
mod resumption;
mod scripted;
mod session;

use m3_types::Result;

use crate::selection::AgentSelection;

#[cfg(feature = "codex")]
pub use codex::{CodexHarness, TESTED_CODEX_VERSIONS, detect_codex_version};
pub use contract::Harness;
pub(crate) use operation_log::OperationLog;
pub(crate) use resumption::ResumedOperation;
pub use scripted::ScriptedHarness;
pub use session::AgentSession;
pub(crate) use session::{InputPolicy, SessionSetup};

/// The harness for `selection`.
///
/// # Errors
/// `invalid_argument` for an invalid selection (see [`AgentSelection::validate`]),
/// or a codex selection when this crate was built without its `codex` feature.
pub fn harness_for(selection: &AgentSelection) -> Result<Box<dyn Harness>> {
    selection.validate()?;
    match selection {
        AgentSelection::Scripted(scripted) => {
            Ok(Box::new(ScriptedHarness::new(scripted.script.clone())))
        }
        AgentSelection::Codex(codex) => codex_harness(codex),
    }
}

/// The harness that goes on with `selection` from script step `step`, after a handover.
///
/// # Errors
/// `invalid_argument` for an invalid selection or one that cannot go on elsewhere (only
/// the scripted harness records where it is).
pub(crate) fn harness_resuming(
    selection: &AgentSelection,
    step: usize,
) -> Result<Box<dyn Harness>> {
    selection.validate()?;
    match selection {
        AgentSelection::Scripted(scripted) => Ok(Box::new(
            ScriptedHarness::new(scripted.script.clone()).starting_at(step),
        )),
        AgentSelection::Codex(_) => Err(m3_types::Error::model_validation(
            "a codex execution runs in its worker's process and cannot be handed over",
        )),
    }
}

#[cfg(feature = "codex")]
fn codex_harness(selection: &crate::selection::CodexSelection) -> Result<Box<dyn Harness>> {
    Ok(Box::new(CodexHarness::new(selection.clone())))
}

#[cfg(not(feature = "codex"))]
fn codex_harness(_selection: &crate::selection::CodexSelection) -> Result<Box<dyn Harness>> {
    Err(m3_types::Error::model_validation(
        "the codex harness is not built in: m3-runtime was compiled without its `codex` feature",
    )
    .with_detail("reason", "codex_feature_disabled"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::CodexSelection;

    #[test]
    fn a_codex_selection_needs_the_codex_feature_or_gets_the_harness() {
        let selection = AgentSelection::Codex(CodexSelection::new("m"));
        let outcome = harness_for(&selection);
        if cfg!(feature = "codex") {
            assert_eq!(outcome.map(|h| h.name()).ok(), Some("codex"));
        } else {
            let error = outcome
                .err()
                .map(|e| (e.code(), e.details()["reason"].clone()));
            assert_eq!(
                error,
                Some(("invalid_argument", "codex_feature_disabled".into()))
            );
        }
    }
}
