//! The context block above a round's form: what the person is deciding on, namely the
//! operation's arguments and the agent's prompt (redacted by the kit, like every value the
//! page shows).

use m3_types::RoundContext;
use maud::{Markup, html};
use serde_json::Value;

/// `<section class="context">` with the prompt and the arguments (`dl`, in the order the
/// agent gave them); nothing when the round has no context.
pub(super) fn context_block(context: &RoundContext) -> Markup {
    html! {
        @if !context.is_empty() {
            section class="context" aria-label="What this decides" {
                @if let Some(prompt) = &context.prompt {
                    p class="prompt" { span class="label" { "Agent's prompt: " } q { (prompt) } }
                }
                @if !context.arguments.is_empty() {
                    p class="label" { "Arguments" }
                    dl class="arguments" {
                        @for (name, value) in &context.arguments {
                            div data-argument=(name) {
                                dt { (name) }
                                dd { code { (shown(value)) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A string as itself, anything else as compact JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
