//! The body of a delivery in the `slack` format: a Slack incoming-webhook message (`text`
//! plus Block Kit blocks: the question, each request's fields, a button to the answer link)
//! that a workspace accepts as is.
//!
//! Slack's documented limits are enforced here, whatever the server asked: at most 50
//! blocks, section text 3,000 characters, 10 fields of 2,000 characters per section, button
//! text 75, button URL 3,000; and, because Slack refuses messages whose blocks add up to
//! about 13,000 characters (`msg_blocks_too_long`), at most [`MAX_BLOCKS_CHARS`] in all.
//! What does not fit is cut with an ellipsis; the answer link shows the whole question.

use m3_types::{ChangeRecord, ElicitationRequest, form};
use serde_json::{Value, json};

use super::payload::Question;

/// Blocks per message (Slack's limit).
pub const MAX_BLOCKS: usize = 50;
/// Characters of a section's text.
pub const MAX_SECTION_TEXT: usize = 3_000;
/// Fields per section.
pub const MAX_FIELDS: usize = 10;
/// Characters per field.
pub const MAX_FIELD_TEXT: usize = 2_000;
/// Characters of a button's text.
pub const MAX_BUTTON_TEXT: usize = 75;
/// Characters of a button's URL.
pub const MAX_BUTTON_URL: usize = 3_000;
/// Characters of all the blocks' texts together (below Slack's practical ~13,000).
pub const MAX_BLOCKS_CHARS: usize = 12_000;
/// Characters of the top-level `text` (the notification's preview).
pub const MAX_TEXT: usize = 3_000;

/// The Slack message for `record` (its question and answer link when it is a pending round).
pub fn slack_body(
    record: &ChangeRecord,
    question: Option<&Question>,
    answer_url: Option<&str>,
) -> Value {
    let headline = escape(&headline(record, question));
    let mut blocks = Blocks::default();
    blocks.section(&headline);
    if let Some(question) = question {
        for (key, request) in &question.requests {
            blocks.request(key, request);
        }
    }
    if let Some(url) = answer_url.filter(|url| url.chars().count() <= MAX_BUTTON_URL) {
        blocks.button("Answer", url);
    }
    json!({"text": cut(&headline, MAX_TEXT), "blocks": blocks.list})
}

fn headline(record: &ChangeRecord, question: Option<&Question>) -> String {
    let what = match question {
        Some(q) => format!(
            "{} ({} {})",
            q.server,
            q.operation_kind.as_str(),
            q.operation_name
        ),
        None => format!("execution {}", record.execution_id),
    };
    match record.kind.as_str() {
        "round.pending" => format!("An answer is needed: {what}"),
        "round.deadline_approaching" => format!("Reminder, the deadline is near: {what}"),
        kind => format!("{kind}: {what}"),
    }
}

/// Blocks under construction, within the limits.
#[derive(Default)]
struct Blocks {
    list: Vec<Value>,
    chars: usize,
}

impl Blocks {
    /// Room for one more block, keeping the last for the button.
    fn has_room(&self, chars: usize) -> bool {
        self.list.len() + 2 <= MAX_BLOCKS && self.chars + chars <= MAX_BLOCKS_CHARS
    }

    fn section(&mut self, text: &str) {
        let text = cut(
            text,
            MAX_SECTION_TEXT.min(MAX_BLOCKS_CHARS.saturating_sub(self.chars)),
        );
        if text.is_empty() || !self.has_room(text.chars().count()) {
            return;
        }
        self.chars += text.chars().count();
        self.list
            .push(json!({"type": "section", "text": mrkdwn(&text)}));
    }

    fn request(&mut self, key: &str, request: &ElicitationRequest) {
        self.section(&format!("*{}*\n{}", escape(key), escape(request.message())));
        let ElicitationRequest::Form(form_request) = request else {
            return;
        };
        let mut fields = Vec::new();
        let mut chars = 0;
        for field in form::fields(&form_request.requested_schema)
            .iter()
            .take(MAX_FIELDS)
        {
            let label = field.title.as_deref().unwrap_or(&field.name);
            let mut text = format!(
                "*{}*{}",
                escape(label),
                if field.required { " (required)" } else { "" }
            );
            if let Some(description) = &field.description {
                text.push('\n');
                text.push_str(&escape(description));
            }
            let text = cut(&text, MAX_FIELD_TEXT);
            chars += text.chars().count();
            fields.push(mrkdwn(&text));
        }
        if !fields.is_empty() && self.has_room(chars) {
            self.chars += chars;
            self.list.push(json!({"type": "section", "fields": fields}));
        }
    }

    fn button(&mut self, text: &str, url: &str) {
        let button = json!({
            "type": "button",
            "text": {"type": "plain_text", "text": cut(text, MAX_BUTTON_TEXT)},
            "url": url,
            "style": "primary",
        });
        self.list
            .push(json!({"type": "actions", "elements": [button]}));
    }
}

fn mrkdwn(text: &str) -> Value {
    json!({"type": "mrkdwn", "text": text})
}

/// Slack's three control characters, escaped so a server's text cannot mention people or
/// forge links.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// At most `max` characters, the last one an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests;
