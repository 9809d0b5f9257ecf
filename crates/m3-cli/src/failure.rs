//! What went wrong, its stable code, and the exit code of CLI.md's table.

use std::fmt;

use m3_types::{Error, ExecutionResult};
use serde_json::{Map, Value, json};

/// Exit codes of CLI.md ("Exit codes"); which error code leads to which is [`EXIT_CODES`].
pub(crate) mod exit {
    /// Success.
    pub(crate) const SUCCESS: u8 = 0;
    /// Anything not listed in [`super::EXIT_CODES`].
    pub(crate) const OTHER: u8 = 1;
    /// Command-line usage.
    pub(crate) const USAGE: u8 = 2;
    /// `invalid_argument` or `managed_input_invalid`.
    pub(crate) const INVALID: u8 = 3;
    /// `managed_input_conflict`.
    pub(crate) const CONFLICT: u8 = 4;
    /// `managed_input_state`.
    pub(crate) const STATE: u8 = 5;
    /// `managed_input_recovery_unavailable`.
    pub(crate) const RECOVERY_UNAVAILABLE: u8 = 6;
    /// `timeout`.
    pub(crate) const TIMEOUT: u8 = 7;
    /// Unknown execution or round; no store at a read command's `--db`.
    pub(crate) const NOT_FOUND: u8 = 8;
    /// The execution finished but not `completed`.
    pub(crate) const NOT_COMPLETED: u8 = 9;
    /// Interrupted by Ctrl-C (SIGINT): 128 + 2, as shells report it.
    pub(crate) const INTERRUPTED: u8 = 130;
    /// Stopped by SIGTERM: 128 + 15.
    pub(crate) const TERMINATED: u8 = 143;
    /// Stopped by SIGHUP: 128 + 1.
    pub(crate) const HUNG_UP: u8 = 129;
}

/// The stable code of a command-line usage error.
pub(crate) const USAGE_CODE: &str = "usage";
/// The stable code of "the execution finished but not `completed`".
pub(crate) const NOT_COMPLETED_CODE: &str = "execution_not_completed";

/// The one table from error code to exit status (CLI.md's "Exit codes"; a unit test
/// parses that table and compares). A code not listed exits [`exit::OTHER`].
pub(crate) const EXIT_CODES: &[(&str, u8)] = &[
    (USAGE_CODE, exit::USAGE),
    ("invalid_argument", exit::INVALID),
    ("managed_input_invalid", exit::INVALID),
    ("managed_input_conflict", exit::CONFLICT),
    ("managed_input_state", exit::STATE),
    (
        "managed_input_recovery_unavailable",
        exit::RECOVERY_UNAVAILABLE,
    ),
    ("timeout", exit::TIMEOUT),
    ("not_found", exit::NOT_FOUND),
    (NOT_COMPLETED_CODE, exit::NOT_COMPLETED),
    ("not_booked", exit::NOT_COMPLETED),
    ("interrupted", exit::INTERRUPTED),
    ("terminated", exit::TERMINATED),
    ("hung_up", exit::HUNG_UP),
];

/// The exit status of error code `code`: its row of [`EXIT_CODES`], else [`exit::OTHER`].
pub(crate) fn exit_for(code: &str) -> u8 {
    EXIT_CODES
        .iter()
        .find(|(listed, _)| *listed == code)
        .map_or(exit::OTHER, |(_, status)| *status)
}

/// A failure of one `m3` command: stable code, one-line message, details; its exit status
/// is the code's row of [`EXIT_CODES`] ([`Failure::exit`]), never set on its own.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    pub(crate) code: String,
    pub(crate) message: String,
    pub(crate) details: Map<String, Value>,
}

impl Failure {
    /// A failure with `code` and `message`, no details, and the exit status [`EXIT_CODES`]
    /// gives `code`: the only way a failure gets its exit status.
    pub(crate) fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            details: Map::new(),
        }
    }

    /// The exit status: [`exit_for`] of the code.
    pub(crate) fn exit(&self) -> u8 {
        exit_for(&self.code)
    }

    /// The same failure with `value` under `key` in its details.
    pub(crate) fn with_detail(mut self, key: &str, value: Value) -> Self {
        self.details.insert(key.to_owned(), value);
        self
    }

    /// A usage error (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE_CODE, message)
    }

    /// An `invalid_argument` error (exit 3) found by the command line itself.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::from(Error::model_validation(message))
    }

    /// A failure with its own code (exit 1 unless [`EXIT_CODES`] lists the code).
    pub(crate) fn other(code: &str, message: impl Into<String>) -> Self {
        Self::new(code, message)
    }

    /// The execution finished with an outcome other than `completed` (exit 9).
    pub(crate) fn not_completed(result: &ExecutionResult) -> Self {
        let snapshot = &result.snapshot;
        let outcome = snapshot
            .outcome
            .map_or("unknown", |outcome| outcome.as_str());
        let mut message = format!(
            "execution {} finished with outcome {outcome}",
            snapshot.execution_id
        );
        let mut details = Map::new();
        details.insert("execution_id".into(), json!(snapshot.execution_id));
        details.insert("outcome".into(), json!(outcome));
        if let Some(error) = &result.error {
            message.push_str(&format!(": {}: {}", error.code, error.message));
            if let Some(Value::String(reason)) = error.details.get("reason") {
                message.push_str(&format!(" (reason: {reason})"));
            }
            details.insert(
                "error".into(),
                serde_json::to_value(error).unwrap_or(Value::Null),
            );
        }
        let mut failure = Self::new(NOT_COMPLETED_CODE, message);
        failure.details = details;
        failure
    }

    /// Ctrl-C stopped `m3 run`/`m3 demo` (exit 130).
    pub(crate) fn interrupted(execution_id: &str) -> Self {
        let mut details = Map::new();
        details.insert("execution_id".into(), json!(execution_id));
        let mut failure = Self::new(
            "interrupted",
            format!("interrupted: execution {execution_id} was asked to cancel"),
        );
        failure.details = details;
        failure
    }

    /// SIGTERM or SIGHUP (`signal`) stopped `m3 run`/`m3 demo`: `code` is `terminated` or
    /// `hung_up` (exit 143 or 129).
    pub(crate) fn stopped_by(code: &str, signal: &str, execution_id: &str) -> Self {
        let mut details = Map::new();
        details.insert("execution_id".into(), json!(execution_id));
        details.insert("signal".into(), json!(signal));
        let mut failure = Self::new(
            code,
            format!("stopped by {signal}: execution {execution_id} was asked to cancel"),
        );
        failure.details = details;
        failure
    }

    /// The one-line rendering for people: `error[CODE]: message`, followed by what the
    /// details say about the cause (the request key, the validator's field errors, missing or
    /// unexpected keys, a reason), so people see what `--json` shows. A usage error keeps
    /// clap's whole message (the usage line, a "similar subcommand" tip) on its lines.
    pub(crate) fn human_line(&self) -> String {
        if self.code == USAGE_CODE {
            return format!("error[{}]: {}", self.code, self.message.trim_end());
        }
        let message = self.message.replace('\n', " ");
        let mut line = format!("error[{}]: {message}", self.code);
        let text = |key: &str| self.details.get(key).and_then(Value::as_str);
        let list = |key: &str| {
            self.details
                .get(key)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .map(|item| {
                            item.as_str()
                                .map_or_else(|| item.to_string(), str::to_owned)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
        };
        if let Some(key) = text("request_key") {
            line.push_str(&format!(" (request '{key}')"));
        }
        let before_details = line.len();
        if let Some(errors) = self.details.get("errors").and_then(Value::as_array) {
            let described: Vec<String> = errors.iter().map(describe_field_error).collect();
            if !described.is_empty() {
                line.push_str(": ");
                line.push_str(&described.join("; "));
            }
        }
        if let Some(keys) = list("missing_keys") {
            line.push_str(&format!(" (missing: {keys})"));
        }
        if let Some(keys) = list("unexpected_keys") {
            line.push_str(&format!(" (unexpected: {keys})"));
        }
        // The typed reason adds nothing where the line already names what was wrong.
        let detailed = line.len() > before_details;
        if let Some(reason) = text("reason")
            && !detailed
            && !message.contains(reason)
        {
            line.push_str(&format!(" (reason: {reason})"));
        }
        line.replace('\n', " ")
    }

    /// The JSON rendering: `{"error": {"code", "message", "details"}}`.
    pub(crate) fn json(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message, "details": self.details}})
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.human_line())
    }
}

/// One validator error (`{"path": "/street", "message": "must be text"}`) as a sentence
/// about its field, `street must be text` (a nested field is `login.api_key`); an error
/// about the whole content is its message alone.
fn describe_field_error(error: &Value) -> String {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    match error.get("path").and_then(Value::as_str) {
        Some(path) if !path.is_empty() => {
            let field: Vec<String> = path
                .trim_start_matches('/')
                .split('/')
                .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
                .collect();
            format!("{} {message}", field.join("."))
        }
        _ => message,
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        let mut message = error.message().to_owned();
        if let Some(cause) = error.cause() {
            let cause = cause.to_string();
            if !cause.is_empty() && !message.contains(&cause) {
                message.push_str(": ");
                message.push_str(&cause);
            }
        }
        let mut failure = Self::new(error.code(), message);
        failure.details = error.details().clone();
        failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_code_maps_to_the_table() {
        let cases = [
            (Error::model_validation("x"), 3),
            (Error::managed_input_validation("x"), 3),
            (Error::managed_input_conflict("x"), 4),
            (Error::managed_input_state("x"), 5),
            (Error::managed_input_recovery("x"), 6),
            (Error::timeout("x"), 7),
            (Error::not_found("execution 'x' does not exist"), 8),
            (Error::storage("x"), 1),
            (Error::protocol("x"), 1),
            (Error::cancelled("x"), 1),
        ];
        for (error, code) in cases {
            assert_eq!(exit_for(error.code()), code, "{}", error.code());
            assert_eq!(Failure::from(error).exit(), code);
        }
    }

    /// The `(error code, exit status)` pairs of CLI.md's "Exit codes" table: every
    /// backticked code of a row's last column (before any parenthesis) with the row's status.
    fn documented_exit_codes(doc: &str) -> Vec<(String, u8)> {
        let section = doc
            .split("\n## Exit codes\n")
            .nth(1)
            .expect("CLI.md has Exit codes");
        let mut pairs = Vec::new();
        for line in section
            .lines()
            .skip_while(|line| !line.starts_with('|'))
            .take_while(|line| line.starts_with('|'))
        {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let Some(Ok(status)) = cells.get(1).map(|cell| cell.parse::<u8>()) else {
                continue;
            };
            let codes = cells.get(3).copied().unwrap_or_default();
            let codes = codes.split('(').next().unwrap_or_default();
            for code in codes.split('`').skip(1).step_by(2) {
                pairs.push((code.to_owned(), status));
            }
        }
        pairs
    }

    #[test]
    fn the_exit_table_is_cli_md_s_table() {
        let documented = documented_exit_codes(include_str!("../../../docs/cli.md"));
        assert!(documented.len() >= 12, "{documented:?}");
        for (code, status) in &documented {
            assert_eq!(
                exit_for(code),
                *status,
                "CLI.md says `{code}` exits {status}"
            );
        }
        for (code, status) in EXIT_CODES {
            assert!(
                documented.contains(&((*code).to_owned(), *status)),
                "`{code}` -> {status} is not in CLI.md's table"
            );
        }
        // Codes of the kit not in the table exit 1, as the table's first row says.
        for code in [
            "storage_error",
            "transport_error",
            "protocol_error",
            "cancelled",
        ] {
            assert_eq!(exit_for(code), exit::OTHER, "{code}");
        }
    }

    #[test]
    fn renders_one_line_and_one_json_object() {
        let failure = Failure::from(
            Error::managed_input_conflict("idempotency key reused\nwith other responses")
                .with_detail("round_id", "r1"),
        );
        assert_eq!(
            failure.human_line(),
            "error[managed_input_conflict]: idempotency key reused with other responses"
        );
        let json = failure.json();
        assert_eq!(json["error"]["code"], "managed_input_conflict");
        assert_eq!(json["error"]["details"]["round_id"], "r1");
        assert_eq!(Failure::usage("x").exit(), 2);
    }

    #[test]
    fn human_lines_carry_the_validator_errors_and_the_keys() {
        let schema_error = Failure::from(
            Error::managed_input_validation("response content does not match the request schema")
                .with_detail(
                    "errors",
                    json!([
                        {"path": "/city", "keyword": "required", "message": "is required"},
                        {"path": "/street", "keyword": "type", "message": "must be text"},
                        {"path": "", "keyword": "additionalProperties", "message": "has fields the form does not ask for: zip"}
                    ]),
                )
                .with_detail("request_key", "shipping_address"),
        );
        assert_eq!(
            schema_error.human_line(),
            "error[managed_input_invalid]: response content does not match the request schema \
             (request 'shipping_address'): city is required; street must be text; \
             has fields the form does not ask for: zip"
        );
        let missing = Failure::from(
            Error::managed_input_validation("responses must match exactly")
                .with_detail("missing_keys", json!(["a", "b"])),
        );
        assert!(
            missing.human_line().ends_with(" (missing: a, b)"),
            "{}",
            missing.human_line()
        );
        let reason = Failure::from(
            Error::managed_input_validation("response content does not match the request schema")
                .with_detail("reason", "request schema is too large"),
        );
        assert!(
            reason
                .human_line()
                .ends_with("(reason: request schema is too large)"),
            "{}",
            reason.human_line()
        );
    }
}
