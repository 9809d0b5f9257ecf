//! The line-based prompter: asks one request at a time on any `BufRead` + `Write` pair.

use std::io::{self, Write};

use m3_types::{
    ElicitationAction, ElicitationRequest, ElicitationResponse, FormElicitationRequest,
    UrlElicitationRequest,
};
use serde_json::{Map, Value};

use super::input::LineInput;
use crate::terminal::{escape, escape_output, url_host_line};
use m3_types::form::{Field, FieldKind, fields};
use m3_types::form_input::{Parsed, format_hint, parse_typed as parse};

/// Typed at any field prompt: decline the request.
pub(crate) const DECLINE_WORD: &str = ":decline";
/// Typed at any field prompt: cancel the request.
pub(crate) const CANCEL_WORD: &str = ":cancel";

/// Asks a person for elicitation responses with plain line prompts.
///
/// Every prompt is one line written to `output`; every answer is one line read from `input`
/// (any `BufRead`, or the terminal with line editing: [`TerminalInput`](super::TerminalInput)).
/// Every text the server supplied (message, names, titles, descriptions, choices, defaults,
/// the URL) is shown with its control characters made visible, and every line and prompt
/// passes [`escape_output`] on its way out.
/// Decline and cancel are always offered. The end of input (Ctrl-D) or Ctrl-C gives up:
/// the call returns `None` and nothing is answered. The prompter never opens or fetches a
/// URL.
///
/// Unit tests (`form/tests.rs`) drive it on byte buffers.
#[derive(Debug)]
pub(crate) struct Prompter<R, W> {
    input: R,
    output: W,
}

/// What a field prompt produced.
enum Step {
    Answer(Parsed),
    Action(ElicitationAction),
    /// The person gave up (Ctrl-D, Ctrl-C).
    GaveUp,
}

impl<R: LineInput, W: Write> Prompter<R, W> {
    /// A prompter reading answers from `input` and writing prompts to `output`.
    pub(crate) fn new(input: R, output: W) -> Self {
        Self { input, output }
    }

    /// Asks `request` (form or URL) and returns the person's response (`None`: they gave up).
    ///
    /// `check` sees a complete form content before it is returned; an `Err(message)` is shown
    /// and the form is asked again (the CLI passes the round's own schema validation).
    ///
    /// # Errors
    /// Only I/O errors of `input` or `output`.
    pub(crate) fn ask(
        &mut self,
        request: &ElicitationRequest,
        check: impl FnMut(&Map<String, Value>) -> Result<(), String>,
    ) -> io::Result<Option<ElicitationResponse>> {
        match request {
            ElicitationRequest::Form(form) => self.ask_form(form, check),
            ElicitationRequest::Url(url) => self.ask_url(url),
        }
    }

    /// Asks a form request: first the action, then (on accept) each field, in the schema's
    /// property order, the server's (`None`: the person gave up).
    ///
    /// # Errors
    /// Only I/O errors.
    pub(crate) fn ask_form(
        &mut self,
        request: &FormElicitationRequest,
        mut check: impl FnMut(&Map<String, Value>) -> Result<(), String>,
    ) -> io::Result<Option<ElicitationResponse>> {
        let fields = fields(&request.requested_schema);
        self.line(&format!(
            "[{}] {}",
            escape(&request.request_key),
            escape(&request.message)
        ))?;
        match self.choose_action("Answer this form?", "fill in the form")? {
            Some(ElicitationAction::Accept) => {}
            Some(other) => return Ok(Some(response_for(other))),
            None => return Ok(None),
        }
        self.line(&format!(
            "  (empty line: default or skip; {DECLINE_WORD} or {CANCEL_WORD} at any prompt)"
        ))?;
        loop {
            let mut content = Map::new();
            for field in &fields {
                match self.ask_field(field)? {
                    Step::Answer(Parsed::Value(value)) => {
                        content.insert(field.name.clone(), value);
                    }
                    Step::Answer(Parsed::Omit) => {}
                    Step::Action(action) => return Ok(Some(response_for(action))),
                    Step::GaveUp => return Ok(None),
                }
            }
            match check(&content) {
                Ok(()) => return Ok(Some(ElicitationResponse::accept(content))),
                Err(message) => {
                    self.line(&format!("  ! {}", escape(&message)))?;
                    self.line("  Please fill in the form again.")?;
                }
            }
        }
    }

    /// Asks a URL request: shows the full URL and the host it leads to, and asks for consent
    /// (`None`: the person gave up). Never opens the URL.
    ///
    /// # Errors
    /// Only I/O errors.
    pub(crate) fn ask_url(
        &mut self,
        request: &UrlElicitationRequest,
    ) -> io::Result<Option<ElicitationResponse>> {
        self.line(&format!(
            "[{}] {}",
            escape(&request.request_key),
            escape(&request.message)
        ))?;
        self.line(&format!("  URL: {}", escape(&request.url)))?;
        self.line(&format!("  {}", url_host_line(&request.url)))?;
        self.line("  m3 does not open this URL; open it yourself only if you trust it.")?;
        let action = self.choose_action("Consent to this URL?", "consent")?;
        Ok(action.map(response_for))
    }

    /// Asks whether to commit the summarized answers: `Some(true)` yes, `Some(false)` fill
    /// them in again, `None` leave the round pending (or the person gave up).
    ///
    /// # Errors
    /// Only I/O errors.
    pub(crate) fn confirm(&mut self) -> io::Result<Option<bool>> {
        loop {
            let prompt = "Commit these responses? [y]es / [e]dit (answer again) / [q]uit (leave the round pending) [y]: ";
            let Some(line) = self.read_line(prompt)? else {
                return Ok(None);
            };
            match line.trim().to_ascii_lowercase().as_str() {
                "" | "y" | "yes" => return Ok(Some(true)),
                "e" | "edit" => return Ok(Some(false)),
                "q" | "quit" => return Ok(None),
                other => self.line(&format!("  ! '{}': answer y, e or q", escape(other)))?,
            }
        }
    }

    /// Writes one line to the output (the summary before [`confirm`](Self::confirm)),
    /// through [`escape_output`].
    ///
    /// # Errors
    /// Only I/O errors.
    pub(crate) fn say(&mut self, line: &str) -> io::Result<()> {
        self.line(line)
    }

    /// Every line the prompter writes goes out here.
    fn line(&mut self, text: &str) -> io::Result<()> {
        writeln!(self.output, "{}", escape_output(text))
    }

    /// Every prompt goes out here (written by the input itself on a terminal).
    fn read_line(&mut self, prompt: &str) -> io::Result<Option<String>> {
        self.input
            .read_line(&escape_output(prompt), &mut self.output)
    }

    fn choose_action(
        &mut self,
        question: &str,
        accept: &str,
    ) -> io::Result<Option<ElicitationAction>> {
        loop {
            let prompt = format!("{question} [a]ccept ({accept}) / [d]ecline / [c]ancel [a]: ");
            let Some(line) = self.read_line(&prompt)? else {
                return Ok(None);
            };
            match line.trim().to_ascii_lowercase().as_str() {
                "" | "a" | "accept" => return Ok(Some(ElicitationAction::Accept)),
                "d" | "decline" => return Ok(Some(ElicitationAction::Decline)),
                "c" | "cancel" => return Ok(Some(ElicitationAction::Cancel)),
                other => self.line(&format!("  ! '{}': answer a, d or c", escape(other)))?,
            }
        }
    }

    fn ask_field(&mut self, field: &Field) -> io::Result<Step> {
        if let Some(description) = &field.description {
            self.line(&format!("  {}", escape(description)))?;
        }
        if let FieldKind::Select { choices } | FieldKind::MultiSelect { choices, .. } = &field.kind
        {
            for (index, choice) in choices.iter().enumerate() {
                let line = if choice.title == choice.value {
                    format!("    {}) {}", index + 1, escape(&choice.title))
                } else {
                    format!(
                        "    {}) {} [{}]",
                        index + 1,
                        escape(&choice.title),
                        escape(&choice.value)
                    )
                };
                self.line(&line)?;
            }
        }
        let prompt = prompt_line(field);
        loop {
            let Some(line) = self.read_line(&prompt)? else {
                return Ok(Step::GaveUp);
            };
            match line.trim() {
                DECLINE_WORD => return Ok(Step::Action(ElicitationAction::Decline)),
                CANCEL_WORD => return Ok(Step::Action(ElicitationAction::Cancel)),
                _ => {}
            }
            match parse(field, &line) {
                Ok(parsed) => return Ok(Step::Answer(parsed)),
                Err(message) => self.line(&format!("  ! {}", escape(&message)))?,
            }
        }
    }
}

fn response_for(action: ElicitationAction) -> ElicitationResponse {
    match action {
        ElicitationAction::Decline => ElicitationResponse::decline(),
        ElicitationAction::Cancel => ElicitationResponse::cancel(),
        _ => ElicitationResponse::accept_url(),
    }
}

/// `  Label (required, integer 1..12) [default: 4]: `
fn prompt_line(field: &Field) -> String {
    let mut hints: Vec<String> = Vec::new();
    hints.push(
        if field.required {
            "required"
        } else {
            "optional"
        }
        .to_owned(),
    );
    hints.push(match &field.kind {
        FieldKind::Text { format, .. } => format.as_deref().map_or("text", format_hint).to_owned(),
        FieldKind::Number {
            integer,
            minimum,
            maximum,
        } => {
            let kind = if *integer { "integer" } else { "number" };
            match (minimum, maximum) {
                (Some(min), Some(max)) => format!("{kind} {min}..{max}"),
                (Some(min), None) => format!("{kind} >= {min}"),
                (None, Some(max)) => format!("{kind} <= {max}"),
                (None, None) => kind.to_owned(),
            }
        }
        FieldKind::Boolean => "y/n".to_owned(),
        FieldKind::Select { .. } => "choose one: number or value".to_owned(),
        FieldKind::MultiSelect { .. } => {
            "choose any: numbers or values, comma-separated".to_owned()
        }
        // `Json` and kinds added later (the enum is non-exhaustive).
        _ => "JSON".to_owned(),
    });
    let mut line = format!("  {} ({})", escape(field.label()), hints.join(", "));
    if let Some(default) = &field.default {
        match default {
            Value::String(text) => line.push_str(&format!(" [default: {}]", escape(text))),
            other => line.push_str(&format!(" [default: {}]", escape(&other.to_string()))),
        }
    }
    line.push_str(": ");
    line
}
