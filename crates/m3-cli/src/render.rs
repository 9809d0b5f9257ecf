//! Text for people: executions, snapshots, rounds, results.

use m3_kit::RoundDiagnostics;
use m3_types::{
    ElicitationRequest, ExecutionResult, ExecutionState, PendingElicitationRound, RoundContext,
    timestamp,
};
use serde_json::Value;

use crate::form::{Choice, Field, FieldKind, fields};
use crate::output::{Output, compact, table};
use crate::terminal::{escape, url_host_line};

/// `m3 status`: one snapshot.
pub(crate) fn snapshot(out: Output, state: &ExecutionState) -> String {
    let mut lines = vec![
        format!("execution    {}", escape(&state.execution_id)),
        format!("lifecycle    {}", out.status(&state.lifecycle.to_string())),
        format!(
            "outcome      {}",
            out.status(state.outcome.map_or("-", |outcome| outcome.as_str()))
        ),
        format!("created_at   {}", timestamp::format(state.created_at)),
    ];
    if let Some(finished) = state.finished_at {
        lines.push(format!("finished_at  {}", timestamp::format(finished)));
    }
    lines.push(format!("tool_calls   {}", state.tool_call_count));
    lines.join("\n")
}

/// One pending round: where it comes from and what each request asks. Every text the server
/// or the store supplied is [`escape`]d; a URL request also names its host.
pub(crate) fn round(round: &PendingElicitationRound) -> String {
    round_in_context(round, None)
}

/// [`round`] with its context (the agent's prompt and the operation's arguments, already
/// redacted) between the header and the requests, as `m3 pending` prints it.
pub(crate) fn round_in_context(
    round: &PendingElicitationRound,
    context: Option<&RoundContext>,
) -> String {
    let mut lines = vec![format!(
        "round {} of execution {}: {} {} {} asks ({} request{})",
        escape(&round.round_id),
        escape(&round.execution_id),
        escape(&round.server),
        round.operation_kind,
        escape(&round.operation_name),
        round.requests.len(),
        if round.requests.len() == 1 { "" } else { "s" }
    )];
    if let Some(deadline) = round.deadline {
        lines.push(format!("  deadline {}", timestamp::format(deadline)));
    }
    if let Some(context) = context {
        lines.extend(context_lines(context));
    }
    for (key, request) in &round.requests {
        let key = escape(key);
        match request {
            ElicitationRequest::Form(form) => {
                lines.push(format!("  [{key}] form: {}", escape(&form.message)));
                for field in fields(&form.requested_schema) {
                    lines.extend(field_lines(&field));
                }
            }
            ElicitationRequest::Url(url) => {
                lines.push(format!("  [{key}] url: {}", escape(&url.message)));
                lines.push(format!("      {}", escape(&url.url)));
                lines.push(format!("      {}", url_host_line(&url.url)));
            }
        }
    }
    lines.join("\n")
}

/// `  prompt: ...` and `  arguments:` with one `      name: value` line each (a string as
/// itself, anything else as compact JSON), in the order the agent gave them.
fn context_lines(context: &RoundContext) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(prompt) = &context.prompt {
        lines.push(format!("  prompt: {}", escape(prompt)));
    }
    if !context.arguments.is_empty() {
        lines.push("  arguments:".to_owned());
        for (name, value) in &context.arguments {
            let shown = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            lines.push(format!("      {}: {}", escape(name), escape(&shown)));
        }
    }
    lines
}

/// One field of a form, as `m3 pending` prints it: `name: kind, required; rules; default`,
/// then its title and description when the schema gives them. Enum values show their
/// titles; a secret field's default is never printed.
pub(crate) fn field_lines(field: &Field) -> Vec<String> {
    let choices = |choices: &[Choice]| {
        choices
            .iter()
            .map(|c| {
                if c.title == c.value {
                    escape(&c.value).into_owned()
                } else {
                    format!("{} ({})", escape(&c.value), escape(&c.title))
                }
            })
            .collect::<Vec<_>>()
            .join("|")
    };
    let kind = match &field.kind {
        FieldKind::Text { format, .. } => format
            .as_deref()
            .map_or_else(|| "string".to_owned(), |f| escape(f).into_owned()),
        FieldKind::Number { integer: true, .. } => "integer".to_owned(),
        FieldKind::Number { .. } => "number".to_owned(),
        FieldKind::Boolean => "boolean".to_owned(),
        FieldKind::Select { choices: c } => format!("one of {}", choices(c)),
        FieldKind::MultiSelect { choices: c, .. } => format!("any of {}", choices(c)),
        FieldKind::Json => "JSON".to_owned(),
    };
    let mut line = format!("      {}: {kind}", escape(&field.name));
    if field.required {
        line.push_str(", required");
    }
    if let Some(rules) = field.rules() {
        line.push_str(&format!("; {rules}"));
    }
    match &field.default {
        Some(_) if field.secret => line.push_str("; has a default"),
        Some(default) => line.push_str(&format!("; default {}", escape(&default.to_string()))),
        None => {}
    }
    let mut lines = vec![line];
    let about = match (&field.title, &field.description) {
        (Some(title), Some(description)) => Some(format!("{title}: {description}")),
        (Some(text), None) | (None, Some(text)) => Some(text.clone()),
        (None, None) => None,
    };
    if let Some(about) = about {
        lines.push(format!("        {}", escape(&about)));
    }
    lines
}

/// The `m3 respond` command line that answers `round` (a hint for people).
pub(crate) fn respond_hint(round: &PendingElicitationRound) -> String {
    let mut hint = format!(
        "answer from any terminal: m3 respond {} {} --idempotency-key KEY",
        escape(&round.execution_id),
        escape(&round.round_id)
    );
    for (key, request) in &round.requests {
        let key = escape(key);
        match request {
            ElicitationRequest::Form(_) => hint.push_str(&format!(" --accept '{key}={{...}}'")),
            ElicitationRequest::Url(_) => hint.push_str(&format!(" --accept-url {key}")),
        }
    }
    hint
}

/// A terminal result.
pub(crate) fn result(out: Output, result: &ExecutionResult) -> String {
    let state = &result.snapshot;
    let mut lines = vec![format!(
        "execution {} finished: {}",
        escape(&state.execution_id),
        out.status(state.outcome.map_or("-", |outcome| outcome.as_str()))
    )];
    if let Some(direct) = &result.direct_result {
        lines.push(format!("  result: {}", summary(direct)));
    }
    for turn in &result.turns {
        lines.push(format!("  turn: {}", summary(turn)));
    }
    if let Some(error) = &result.error {
        lines.push(format!(
            "  error: {}: {}",
            error.code,
            escape(&error.message)
        ));
        if !error.details.is_empty() {
            lines.push(format!(
                "  details: {}",
                compact(&Value::Object(error.details.clone()))
            ));
        }
    }
    lines.join("\n")
}

/// `m3 executions`: one row per execution.
pub(crate) fn executions(rows: Vec<Vec<String>>) -> String {
    table(
        &[
            "EXECUTION",
            "LIFECYCLE",
            "OUTCOME",
            "HUMAN_INPUT",
            "CREATED_AT",
            "PENDING",
        ],
        &rows,
    )
}

/// `m3 rounds`: one row per round, with who answered and the redacted projection of the
/// accepted responses.
pub(crate) fn rounds(rounds: &[RoundDiagnostics]) -> String {
    let rows: Vec<Vec<String>> = rounds
        .iter()
        .map(|round| {
            vec![
                escape(&round.round_id).into_owned(),
                round.round_index.to_string(),
                round.status.to_string(),
                timestamp::format(round.created_at),
                round
                    .failure_code
                    .as_deref()
                    .map_or_else(|| "-".to_owned(), |code| escape(code).into_owned()),
                round.answered_by.as_ref().map_or_else(
                    || "-".to_owned(),
                    |actor| escape(&actor.to_string()).into_owned(),
                ),
                round.redacted_responses.as_ref().map_or_else(
                    || "-".to_owned(),
                    |map| summary(&Value::Object(map.clone())),
                ),
            ]
        })
        .collect();
    table(
        &[
            "ROUND",
            "INDEX",
            "STATUS",
            "CREATED_AT",
            "FAILURE",
            "ANSWERED_BY",
            "RESPONSES (redacted)",
        ],
        &rows,
    )
}

/// A value shortened to one line (JSON escapes C0 controls; C1 and bidi controls are
/// [`escape`]d here).
fn summary(value: &Value) -> String {
    let text = escape(&compact(value)).into_owned();
    if text.chars().count() > 300 {
        let cut: String = text.chars().take(300).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Whether a value contains an object with `"status": "booked"` (the shipping server's
/// structured result).
pub(crate) fn contains_booking(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.get("status") == Some(&Value::String("booked".to_owned()))
                || map.values().any(contains_booking)
        }
        Value::Array(items) => items.iter().any(contains_booking),
        Value::String(text) => {
            // Structured content may travel as JSON text inside a tool result.
            text.contains("\"booked\"")
                && serde_json::from_str::<Value>(text).is_ok_and(|v| contains_booking(&v))
        }
        _ => false,
    }
}
