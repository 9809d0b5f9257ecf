//! One input per field of a requested schema (MCP's elicitation subset), named
//! `KEY.PROPERTY` and labelled with a `<label for>`; values a person typed
//! before an error come back in the fields.

use m3_types::form::{Choice, Field, FieldKind};
use maud::{Markup, html};
use serde_json::Value;

use super::coerce::Submitted;

/// Where a field is drawn: its request, its round, what was typed, its error.
pub(super) struct FieldContext<'a> {
    pub(super) round_id: &'a str,
    pub(super) request_key: &'a str,
    pub(super) submitted: Option<&'a Submitted>,
    pub(super) error: Option<&'a str>,
}

impl FieldContext<'_> {
    fn name(&self, field: &Field) -> String {
        format!("{}.{}", self.request_key, field.name)
    }

    fn id(&self, field: &Field, suffix: &str) -> String {
        format!(
            "f-{}-{}-{}{suffix}",
            self.round_id, self.request_key, field.name
        )
    }

    /// What the field shows: the typed values, else the schema's default.
    fn values(&self, field: &Field) -> Vec<String> {
        if let Some(submitted) = self.submitted {
            return submitted.all(&self.name(field)).to_vec();
        }
        match &field.default {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(text)) => vec![text.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map_or_else(|| item.to_string(), str::to_owned)
                })
                .collect(),
            Some(other) => vec![other.to_string()],
        }
    }
}

/// The whole field: label, input, description, rules in plain words, error; the input is
/// described by all three (`aria-describedby`).
pub(super) fn field(ctx: &FieldContext<'_>, field: &Field) -> Markup {
    let id = ctx.id(field, "");
    let name = ctx.name(field);
    let (hint_id, rules_id, error_id) = (
        format!("{id}-hint"),
        format!("{id}-rules"),
        format!("{id}-error"),
    );
    let hint = field.description.as_deref();
    let rules = field.rules();
    let described: Vec<&str> = [
        hint.map(|_| hint_id.as_str()),
        rules.as_ref().map(|_| rules_id.as_str()),
        ctx.error.map(|_| error_id.as_str()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let described = (!described.is_empty()).then(|| described.join(" "));
    let described = described.as_deref();
    html! {
        div class="field" {
            @if let FieldKind::MultiSelect { choices, .. } = &field.kind {
                fieldset class="choices" aria-describedby=[described] {
                    legend { (field.label()) @if field.required { (required_mark()) } }
                    (multi_select(ctx, field, choices))
                }
            } @else if field.kind == FieldKind::Boolean {
                (checkbox(ctx, field, &id, &name, described))
            } @else {
                label for=(id) { (field.label()) @if field.required { (required_mark()) } }
                (input(ctx, field, &id, &name, described))
            }
            @if let Some(hint) = hint { p class="hint" id=(hint_id) { (hint) } }
            @if let Some(rules) = rules { p class="hint rules" id=(rules_id) { (rules) } }
            @if let Some(error) = ctx.error {
                p class="error" id=(error_id) data-error-for=(name) { (error) }
            }
        }
    }
}

fn required_mark() -> Markup {
    html! { span class="required" title="required" { " *" } }
}

fn input(
    ctx: &FieldContext<'_>,
    field: &Field,
    id: &str,
    name: &str,
    hint: Option<&str>,
) -> Markup {
    let values = ctx.values(field);
    let value = values.first().cloned();
    let invalid = ctx.error.map(|_| "true");
    match &field.kind {
        FieldKind::Text {
            format,
            min_length,
            max_length,
        } => {
            // What was typed into a secret is never sent back in the page.
            let value = if field.secret { None } else { value };
            let (kind, value) = text_input(format.as_deref(), value);
            // A secret is typed hidden; the script adds a button that shows it.
            let kind = if field.secret { "password" } else { kind };
            html! {
                input id=(id) name=(name) type=(kind) value=[value] required[field.required]
                    minlength=[min_length] maxlength=[max_length] step=[(kind == "datetime-local").then_some("1")]
                    autocomplete=[field.secret.then_some("off")] data-secret[field.secret]
                    aria-describedby=[hint] aria-invalid=[invalid];
                @if field.secret {
                    button type="button" class="reveal" data-reveal=(id) aria-controls=(id)
                        aria-pressed="false" { "Show" }
                }
            }
        }
        FieldKind::Number {
            integer,
            minimum,
            maximum,
        } => html! {
            input id=(id) name=(name) type="number" inputmode=(if *integer { "numeric" } else { "decimal" })
                step=(if *integer { "1" } else { "any" }) min=[minimum] max=[maximum] value=[value]
                required[field.required] aria-describedby=[hint] aria-invalid=[invalid];
        },
        FieldKind::Select { choices } => {
            select(field, id, name, value.as_deref(), choices, hint, invalid)
        }
        FieldKind::Json | FieldKind::Boolean | FieldKind::MultiSelect { .. } => {
            let text = match (&ctx.submitted, &field.default) {
                (Some(_), _) => value.unwrap_or_default(),
                (None, Some(default)) => default.to_string(),
                (None, None) => String::new(),
            };
            html! {
                textarea id=(id) name=(name) rows="3" required[field.required]
                    aria-describedby=[hint] aria-invalid=[invalid] { (text) }
                p class="hint" { "A JSON value." }
            }
        }
    }
}

/// The HTML input type of a string format, and the value in its syntax
/// (`datetime-local` has no offset: the page shows and sends UTC).
fn text_input(format: Option<&str>, value: Option<String>) -> (&'static str, Option<String>) {
    match format {
        Some("email") => ("email", value),
        Some("uri") => ("url", value),
        Some("date") => ("date", value),
        Some("date-time") => (
            "datetime-local",
            value.map(|v| {
                v.trim_end_matches('Z')
                    .trim_end_matches("+00:00")
                    .to_owned()
            }),
        ),
        _ => ("text", value),
    }
}

fn select(
    field: &Field,
    id: &str,
    name: &str,
    value: Option<&str>,
    choices: &[Choice],
    hint: Option<&str>,
    invalid: Option<&str>,
) -> Markup {
    html! {
        select id=(id) name=(name) required[field.required] aria-describedby=[hint] aria-invalid=[invalid] {
            @if !field.required || value.is_none() {
                option value="" selected[value.is_none()] { "(choose)" }
            }
            @for choice in choices {
                option value=(choice.value) selected[value == Some(choice.value.as_str())] { (choice.title) }
            }
        }
    }
}

fn checkbox(
    ctx: &FieldContext<'_>,
    field: &Field,
    id: &str,
    name: &str,
    hint: Option<&str>,
) -> Markup {
    let checked = match ctx.submitted {
        Some(submitted) => submitted.first(name).is_some(),
        None => field.default == Some(Value::Bool(true)),
    };
    html! {
        input id=(id) name=(name) type="checkbox" value="true" checked[checked] aria-describedby=[hint];
        " "
        label for=(id) { (field.label()) @if field.required { (required_mark()) } }
    }
}

fn multi_select(ctx: &FieldContext<'_>, field: &Field, choices: &[Choice]) -> Markup {
    let chosen = ctx.values(field);
    let name = ctx.name(field);
    html! {
        @for (index, choice) in choices.iter().enumerate() {
            @let id = ctx.id(field, &format!("-{index}"));
            span class="choice" {
                input id=(id) name=(name) type="checkbox" value=(choice.value)
                    checked[chosen.contains(&choice.value)];
                " "
                label for=(id) { (choice.title) }
            }
        }
    }
}
