//! Where output goes: one JSON document (or JSON lines) on stdout with `--json`, text for
//! people otherwise; failures on stderr as one line or one JSON object.

use std::io::{IsTerminal, Write};

use serde::Serialize;
use serde_json::Value;

use crate::failure::Failure;
use crate::terminal::escape_output;

/// The output mode of one `m3` invocation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    json: bool,
    colour: bool,
}

impl Output {
    /// Colour for status words only when stdout is a terminal, `--json` is off and
    /// `NO_COLOR` is unset or empty (no-color.org).
    pub(crate) fn new(json: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        Self {
            json,
            colour: !json && !no_color && std::io::stdout().is_terminal(),
        }
    }

    /// A status word (lifecycle, outcome, round status), coloured when colour is on: green
    /// for success, red for failure, yellow for waiting.
    pub(crate) fn status(self, word: &str) -> String {
        let code = match word {
            "completed" | "resolved" | "delivered" => "32",
            "failed" | "cancelled" | "timeout" | "timed_out" => "31",
            "pending" | "waiting_for_input" | "running" | "response_validated" => "33",
            _ => return word.to_owned(),
        };
        if self.colour {
            format!("\x1b[{code}m{word}\x1b[0m")
        } else {
            word.to_owned()
        }
    }

    /// Whether `--json` was given.
    pub(crate) fn is_json(self) -> bool {
        self.json
    }

    /// Whether progress may be drawn: text mode and stderr is a terminal.
    pub(crate) fn shows_progress(self) -> bool {
        !self.json && std::io::stderr().is_terminal()
    }

    /// Prints a JSON document (pretty) on stdout.
    pub(crate) fn document(self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| Failure::other("internal", format!("cannot render JSON: {e}")))?;
        write_stdout(&text);
        Ok(())
    }

    /// Prints one compact JSON line on stdout (`m3 run --json` streams).
    pub(crate) fn json_line(self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string(value)
            .map_err(|e| Failure::other("internal", format!("cannot render JSON: {e}")))?;
        write_stdout(&text);
        Ok(())
    }

    /// Prints one JSON line tagged with its kind, `{"type": KIND, ...value's fields}` (the
    /// streams of `m3 run` and `m3 demo`, like cargo's `"reason"`): a reader dispatches on
    /// `type` instead of guessing from the fields.
    pub(crate) fn event(self, kind: &str, value: &impl Serialize) -> Result<(), Failure> {
        let mut value = serde_json::to_value(value)
            .map_err(|e| Failure::other("internal", format!("cannot render JSON: {e}")))?;
        match &mut value {
            Value::Object(fields) => {
                fields.insert("type".to_owned(), Value::String(kind.to_owned()));
            }
            other => {
                let inner = std::mem::take(other);
                *other = serde_json::json!({"type": kind, "value": inner});
            }
        }
        self.json_line(&value)
    }

    /// Prints text for people on stdout (nothing with `--json`), with every control
    /// character but line breaks and m3's own colours made visible
    /// ([`escape_output`]): a server's text cannot move the cursor or rewrite a line.
    pub(crate) fn say(self, text: impl AsRef<str>) {
        if !self.json {
            write_stdout(&escape_output(text.as_ref()));
        }
    }

    /// Prints a failure on stderr.
    pub(crate) fn fail(self, failure: &Failure) {
        let text = if self.json {
            failure.json().to_string()
        } else {
            escape_output(&failure.human_line()).into_owned()
        };
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{text}");
    }
}

/// Writes a line on stdout; a closed pipe is not an error worth reporting.
fn write_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
    let _ = stdout.flush();
}

/// A JSON value as compact text, for inline display.
pub(crate) fn compact(value: &Value) -> String {
    value.to_string()
}

/// Lays out rows as left-aligned columns under a header.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (index, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if index + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}  "));
            }
        }
        text.trim_end().to_owned()
    };
    let mut lines = vec![line(header.to_vec())];
    for row in rows {
        lines.push(line(row.iter().map(String::as_str).collect()));
    }
    lines.join("\n")
}

/// The store `db` names, for output: a PostgreSQL password is shown as `***`.
pub(crate) fn store_label(db: &std::path::Path) -> String {
    let text = db.to_string_lossy();
    m3_kit::StoreUrl::parse(&text).map_or_else(|_| text.into_owned(), |url| url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let text = table(
            &["ID", "STATUS"],
            &[
                vec!["a".into(), "pending".into()],
                vec!["long-id".into(), "failed".into()],
            ],
        );
        assert_eq!(text, "ID       STATUS\na        pending\nlong-id  failed");
    }
}
