//! Server requests of the app-server: Codex's own tool approvals (decided from
//! the tool selection), native permission prompts (decided from
//! `permission_policy`), and the servers' elicitations (handed to matching).

use std::time::Instant;

use m3_types::{ElicitationAction, Result, ToolSelection};
use serde_json::{Map, Value};

use crate::spec::PermissionPolicy;

use super::super::observe::ObservedRound;
use super::super::prompts::NativePrompt;
use super::super::protocol::{
    self, ApprovalAnswer, ApprovalDecision, ElicitationAnswer, METHOD_NOT_FOUND, PermissionScope,
    PermissionsAnswer, PermissionsParams, ReviewAnswer, ReviewDecision, method,
};
use super::answer_source::{Answers, unexpected_elicitation};
use super::event_loop::Turn;
use super::tool_item::{ToolItem, canonical};

impl Turn<'_> {
    pub(super) async fn on_server_request(
        &mut self,
        id: Value,
        request: &str,
        params: Value,
    ) -> Result<()> {
        match request {
            method::MCP_ELICITATION => self.on_elicitation(id, &params).await,
            method::COMMAND_APPROVAL | method::FILE_CHANGE_APPROVAL => {
                let decision = if self.allowed_natively() {
                    ApprovalDecision::Accept
                } else {
                    ApprovalDecision::Decline
                };
                self.app.respond(&id, &ApprovalAnswer { decision }).await
            }
            method::EXEC_COMMAND_APPROVAL | method::APPLY_PATCH_APPROVAL => {
                let decision = if self.allowed_natively() {
                    ReviewDecision::Approved
                } else {
                    ReviewDecision::Denied
                };
                self.app.respond(&id, &ReviewAnswer { decision }).await
            }
            method::PERMISSIONS_APPROVAL => {
                let permissions = if self.allowed_natively() {
                    protocol::decode::<PermissionsParams>(params)
                        .unwrap_or_default()
                        .permissions
                        .unwrap_or_else(|| Value::Object(Map::new()))
                } else {
                    Value::Object(Map::new())
                };
                let answer = PermissionsAnswer {
                    permissions,
                    scope: PermissionScope::Turn,
                };
                self.app.respond(&id, &answer).await
            }
            other => {
                tracing::warn!(method = other, "unsupported codex server request refused");
                self.app
                    .respond_error(
                        &id,
                        METHOD_NOT_FOUND,
                        &format!("m3 does not support '{other}'"),
                    )
                    .await
            }
        }
    }

    /// A native prompt: Codex's tool approval is decided here, a server's
    /// question waits for its round on the wire.
    async fn on_elicitation(&mut self, id: Value, params: &Value) -> Result<()> {
        let prompt = NativePrompt::parse(id.clone(), params)?;
        if prompt.approval.is_some() && !self.forged_approval(&prompt) {
            let approve = self.approve(&prompt);
            let action = if approve {
                ElicitationAction::Accept
            } else {
                ElicitationAction::Decline
            };
            tracing::info!(server = %prompt.server, action = action.as_str(), "codex tool approval");
            let answer = ElicitationAnswer {
                action,
                content: approve.then(Map::new),
            };
            return self.app.respond(&id, &answer).await;
        }
        if matches!(self.context.answers, Answers::Fail) {
            let error = unexpected_elicitation(&prompt);
            return Err(self.interrupt(error).await);
        }
        self.unmatched.push((prompt, Instant::now()));
        self.match_prompts().await
    }

    fn allowed_natively(&self) -> bool {
        self.context.permission_policy == PermissionPolicy::Allow
    }

    /// An approval marker Codex cannot have written: the tool is one the selection
    /// names (Codex was told to approve it without asking), or the prompt is exactly a
    /// request the server sent on the wire. Such a prompt is the server's own question
    /// and goes through managed input like any other.
    fn forged_approval(&self, prompt: &NativePrompt) -> bool {
        forged_approval(self.context.tools.as_ref(), &self.tracker.rounds, prompt)
    }

    /// Approves Codex's tool-approval prompt only for a selected tool that matches
    /// one started, not yet approved `mcpToolCall` item (a server cannot forge one).
    fn approve(&mut self, prompt: &NativePrompt) -> bool {
        let Some(index) = approval_target(&self.tool_items, prompt) else {
            return false;
        };
        let Some(item) = self.tool_items.get_mut(index) else {
            return false;
        };
        let selected = self
            .context
            .tools
            .as_ref()
            .is_none_or(|tools| tools.allows(&item.server, &item.tool));
        if selected {
            item.approved = true;
        }
        selected
    }
}

/// Whether an approval-marked prompt cannot be Codex's: its tool is selected (Codex
/// was configured to approve it without asking) or it is exactly a request seen on
/// the wire from that server.
fn forged_approval(
    tools: Option<&ToolSelection>,
    rounds: &[ObservedRound],
    prompt: &NativePrompt,
) -> bool {
    let auto_approved = match (tools, prompt.approval.as_ref()) {
        (Some(tools), Some(approval)) => approval
            .tool
            .as_ref()
            .is_some_and(|tool| tools.allows(&prompt.server, tool)),
        _ => false,
    };
    auto_approved
        || rounds.iter().any(|r| {
            r.server == prompt.server && r.fingerprints.values().any(|f| *f == prompt.fingerprint)
        })
}

/// The one started, unapproved tool item an approval prompt is about (same
/// server, same tool when the prompt names it, same canonical arguments), or
/// `None` when there is none or more than one.
fn approval_target(items: &[ToolItem], prompt: &NativePrompt) -> Option<usize> {
    let approval = prompt.approval.as_ref()?;
    let arguments = approval.arguments.as_ref().map(|a| canonical(Some(a)));
    let candidates: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, item)| {
            item.server == prompt.server
                && !item.approved
                && approval.tool.as_ref().is_none_or(|t| *t == item.tool)
                && arguments.as_ref().is_none_or(|a| *a == item.arguments)
        })
        .map(|(i, _)| i)
        .collect();
    match candidates.as_slice() {
        [index] => Some(*index),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(tool: &str, weight: u32, approved: bool) -> ToolItem {
        ToolItem {
            server: "shipping".into(),
            tool: tool.into(),
            arguments: canonical(Some(&json!({"weight_kg": weight}))),
            approved,
        }
    }

    fn approval(meta: Value) -> NativePrompt {
        NativePrompt::parse(
            json!(7),
            &json!({"serverName": "shipping", "mode": "form", "message": "Allow?",
                    "requestedSchema": {"type": "object", "properties": {}}, "_meta": meta}),
        )
        .unwrap()
    }

    #[test]
    fn approvals_need_exactly_one_matching_started_item() {
        let prompt = approval(json!({"codex_approval_kind": "mcp_tool_call",
            "tool_name": "book_shipment", "tool_params": {"weight_kg": 2}}));
        // Forged: no started item at all.
        assert_eq!(approval_target(&[], &prompt), None);
        assert_eq!(
            approval_target(&[item("book_shipment", 2, false)], &prompt),
            Some(0)
        );
        // Other arguments, another tool, or already approved: no match.
        assert_eq!(
            approval_target(&[item("book_shipment", 3, false)], &prompt),
            None
        );
        assert_eq!(approval_target(&[item("quote", 2, false)], &prompt), None);
        assert_eq!(
            approval_target(&[item("book_shipment", 2, true)], &prompt),
            None
        );
        // Two indistinguishable items: ambiguous, declined.
        let twins = [
            item("book_shipment", 2, false),
            item("book_shipment", 2, false),
        ];
        assert_eq!(approval_target(&twins, &prompt), None);
        // 0.156.1 sends no tool_name: the arguments decide.
        let old = approval(
            json!({"codex_approval_kind": "mcp_tool_call", "tool_params": {"weight_kg": 2}}),
        );
        assert_eq!(
            approval_target(
                &[item("quote", 3, false), item("book_shipment", 2, false)],
                &old
            ),
            Some(1)
        );
        // A server's own question is not an approval.
        let question = approval(json!({"tool_name": "book_shipment"}));
        assert_eq!(
            approval_target(&[item("book_shipment", 2, false)], &question),
            None
        );
    }

    #[test]
    fn approval_markers_on_selected_tools_are_forged() {
        let prompt = approval(json!({"codex_approval_kind": "mcp_tool_call",
            "tool_name": "book_shipment", "tool_params": {"weight_kg": 2}}));
        let selected = ToolSelection::parse(&["shipping:book_shipment"]).unwrap();
        let other = ToolSelection::parse(&["shipping:quote"]).unwrap();
        // Codex was told to approve book_shipment itself: this prompt is the server's.
        assert!(forged_approval(Some(&selected), &[], &prompt));
        assert!(!forged_approval(Some(&other), &[], &prompt));
        assert!(!forged_approval(None, &[], &prompt));
    }
}
