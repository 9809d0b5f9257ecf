//! Answers: obtaining a round's responses from their source (see [`super::answer_source`])
//! and giving each native prompt its key's response.

use std::sync::Arc;

use m3_types::plan::PlanQuestion;
use m3_types::{
    ElicitationAction, ElicitationRequest, ElicitationResponse, Error, PendingElicitationRound,
    ResponseMap, Result,
};

use super::super::observe::Stage;
use super::super::protocol::ElicitationAnswer;
use super::answer_source::{Answering, Answers};
use super::event_loop::Turn;

impl Turn<'_> {
    /// Starts obtaining the answer of round `index` (all its keys have a prompt).
    pub(super) fn start_answer(&mut self, index: usize) -> Result<()> {
        let Some(round) = self.tracker.rounds.get_mut(index) else {
            return Ok(());
        };
        round.stage = Stage::Answering;
        let future: Answering = match &mut self.context.answers {
            Answers::Fail => return Ok(()),
            Answers::Plan(plan) => {
                let Some(op) = self.tracker.operations.get(round.operation) else {
                    return Err(Error::protocol("observed round has no operation"));
                };
                let answers = plan.answer(&PlanQuestion {
                    server: &round.server,
                    operation_kind: op.operation_kind,
                    operation_name: &op.operation_name,
                    requests: &round.requests,
                });
                Box::pin(async move { answers })
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
                    // Codex is its own MCP client: its rounds live in its process.
                    let delivery = coordinator.await_round(pending, parameters, false).await?;
                    // Codex answers the server itself once it has the responses, so the
                    // delivery is recorded before they are handed over.
                    coordinator.record_delivery().await?;
                    Ok(delivery.responses)
                })
            }
        };
        self.answering = Some((index, future));
        Ok(())
    }

    /// Gives each prompt of the answered round its key's response.
    pub(super) async fn on_answer(&mut self, answer: (usize, Result<ResponseMap>)) -> Result<()> {
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
                .respond(&prompt_id, &native_result(response, url))
                .await?;
        }
        Ok(())
    }
}

/// The app-server answer to a native prompt: an accepted URL is `content: {}`,
/// decline and cancel carry no content.
fn native_result(response: &ElicitationResponse, url: bool) -> ElicitationAnswer {
    let content = match response.action {
        ElicitationAction::Accept if url => Some(serde_json::Map::new()),
        ElicitationAction::Accept => Some(response.content.clone().unwrap_or_default()),
        _ => None,
    };
    ElicitationAnswer {
        action: response.action,
        content,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn native_json(response: &ElicitationResponse, url: bool) -> Value {
        serde_json::to_value(native_result(response, url)).unwrap()
    }

    #[test]
    fn native_answers_follow_the_mode() {
        let mut content = serde_json::Map::new();
        content.insert("city".into(), json!("Pune"));
        let accept = m3_types::ElicitationResponse::accept(content);
        assert_eq!(
            native_json(&accept, false),
            json!({"action": "accept", "content": {"city": "Pune"}})
        );
        assert_eq!(
            native_json(&m3_types::ElicitationResponse::accept_url(), true),
            json!({"action": "accept", "content": {}})
        );
        assert_eq!(
            native_json(&m3_types::ElicitationResponse::decline(), false),
            json!({"action": "decline"})
        );
        assert_eq!(
            native_json(&m3_types::ElicitationResponse::cancel(), false),
            json!({"action": "cancel"})
        );
    }
}
