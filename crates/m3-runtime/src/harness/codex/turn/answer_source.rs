//! Where a round's responses come from (managed round, plan, or `fail`), and the answer
//! in progress; the turn's event loop and its answer and approval handlers all read these.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use m3_types::plan::PlanMatcher;
use m3_types::{Error, ResponseMap, Result};

use crate::coordinator::Coordinator;

use super::super::prompts::NativePrompt;

/// The answer being obtained for one round.
pub(super) type Answering = Pin<Box<dyn Future<Output = Result<ResponseMap>> + Send>>;

/// Where answers come from.
#[derive(Debug)]
pub(in super::super) enum Answers<'a> {
    /// `human_input = fail`.
    Fail,
    /// A predefined plan, matched to each request.
    Plan(&'a mut PlanMatcher),
    /// `human_input = managed`.
    Managed(Arc<Coordinator>),
}

/// Waits for the pending answer (forever when there is none).
pub(super) async fn poll_answer(
    answering: &mut Option<(usize, Answering)>,
) -> (usize, Result<ResponseMap>) {
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

/// A server asked for input although `human_input` is `fail`.
pub(super) fn unexpected_elicitation(prompt: &NativePrompt) -> Error {
    Error::protocol(format!(
        "unexpected elicitation from server '{}': human_input is 'fail'",
        prompt.server
    ))
    .with_detail("reason", "unexpected_elicitation")
    .with_detail("server", prompt.server.clone())
    .with_detail("mode", prompt.mode.clone())
}
