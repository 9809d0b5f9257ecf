//! `m3 respond --edit`: a round's requests as a commented JSON skeleton opened in
//! `$VISUAL` / `$EDITOR`, read back (comments stripped, `null` fields left out) as the
//! response map the command submits.
//!
//! The skeleton accepts every request, with each form field at its schema default or
//! `null`; comments above each field say its kind, bounds and description (the lines
//! `m3 pending` prints). An answer the store refuses reopens the editor with the error on
//! top; saving it unchanged, or emptying the file, gives up.

use std::io::Read as _;
use std::process::Command;

use m3_types::form::fields;
use m3_types::{ElicitationRequest, PendingElicitationRound};
use serde_json::{Map, Value};

use crate::failure::Failure;
use crate::render;

/// How the first line of an error note on top of a reopened answer starts.
const ERROR_MARK: &str = "// error[";

/// The text the editor opens first for `round`.
pub(crate) fn skeleton(round: &PendingElicitationRound) -> String {
    let mut text = format!(
        "// The answer to round {} of execution {}: {} {} {}.\n\
         // Save and close the editor to submit it. Each request's \"action\" is \"accept\"\n\
         // (with \"content\"), \"decline\" or \"cancel\" (content is then ignored).\n\
         // A field left null stays out of the answer; lines starting with // are removed;\n\
         // a file with nothing but comments submits nothing.\n{{\n",
        round.round_id,
        round.execution_id,
        round.server,
        round.operation_kind,
        round.operation_name,
    );
    let count = round.requests.len();
    for (index, (key, request)) in round.requests.iter().enumerate() {
        let separator = if index + 1 < count { "," } else { "" };
        text.push_str(&request_block(key, request));
        text.push_str(separator);
        text.push('\n');
    }
    text.push_str("}\n");
    text
}

/// One request's entry in the skeleton: its comments, `"action"` and `"content"`.
fn request_block(key: &str, request: &ElicitationRequest) -> String {
    let key = Value::from(key);
    match request {
        ElicitationRequest::Url(url) => format!(
            "  // url: {}\n  //   visit {} (accept says you did)\n  {key}: {{\"action\": \"accept\"}}",
            comment(&url.message),
            comment(&url.url)
        ),
        ElicitationRequest::Form(form) => {
            let fields = fields(&form.requested_schema);
            let mut block = format!(
                "  // form: {}\n  {key}: {{\n    \"action\": \"accept\",\n    \"content\": {{\n",
                comment(&form.message)
            );
            for (index, field) in fields.iter().enumerate() {
                for line in render::field_lines(field) {
                    block.push_str(&format!("      // {}\n", comment(line.trim_start())));
                }
                // A secret's default stays out of the file, as `m3 pending` keeps it out of
                // sight; `--accept-defaults` fills it in when the field is left null.
                let value = match &field.default {
                    Some(default) if !field.secret => default.clone(),
                    _ => Value::Null,
                };
                let separator = if index + 1 < fields.len() { "," } else { "" };
                block.push_str(&format!(
                    "      {}: {value}{separator}\n",
                    Value::from(field.name.as_str())
                ));
            }
            block.push_str("    }\n  }");
            block
        }
    }
}

/// `text` on one comment line (a server's message may hold line breaks).
fn comment(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// Opens `text` in the person's editor and returns what they saved. The file is private
/// (mode 0600: the answer may hold secrets) and removed afterwards.
pub(crate) fn edit(text: &str) -> Result<String, Failure> {
    let io = |what: &str, error: std::io::Error| {
        Failure::other("io_error", format!("--edit: cannot {what}: {error}"))
    };
    let file = tempfile::Builder::new()
        .prefix("m3-answer-")
        .suffix(".jsonc")
        .tempfile()
        .map_err(|e| io("create the answer file", e))?;
    std::fs::write(file.path(), text).map_err(|e| io("write the answer file", e))?;
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "vi".to_owned());
    // Through the shell, as git runs editors: EDITOR may carry arguments ("code --wait").
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$@\""))
        .arg(&editor)
        .arg(file.path())
        .status()
        .map_err(|e| io(&format!("start the editor `{editor}`"), e))?;
    if !status.success() {
        return Err(Failure::invalid(format!(
            "--edit: the editor `{editor}` exited with {status}; nothing was submitted"
        )));
    }
    let mut saved = String::new();
    std::fs::File::open(file.path())
        .and_then(|mut f| f.read_to_string(&mut saved))
        .map_err(|e| io("read the answer file back", e))?;
    Ok(saved)
}

/// The responses JSON an edited answer stands for: comments stripped, `null` fields and
/// the content of declined or cancelled requests left out. `None` when nothing but
/// comments and blank space was saved.
///
/// # Errors
/// `invalid_argument` for text that is not a JSON object of request objects.
pub(crate) fn responses_json(saved: &str) -> Result<Option<String>, Failure> {
    let mut plain = String::new();
    json_comments::StripComments::new(saved.as_bytes())
        .read_to_string(&mut plain)
        .map_err(|e| Failure::invalid(format!("the edited answer cannot be read: {e}")))?;
    if plain.trim().is_empty() {
        return Ok(None);
    }
    let mut answer: Map<String, Value> = serde_json::from_str(&plain)
        .map_err(|e| Failure::invalid(format!("the edited answer is not a JSON object: {e}")))?;
    for response in answer.values_mut() {
        let Some(response) = response.as_object_mut() else {
            continue;
        };
        if response.get("action").and_then(Value::as_str) != Some("accept") {
            response.remove("content");
        } else if let Some(Value::Object(content)) = response.get_mut("content") {
            content.retain(|_, value| !value.is_null());
        }
    }
    Ok(Some(Value::Object(answer).to_string()))
}

/// `saved` reopened after `error`: the error on top, any earlier error note removed.
pub(crate) fn with_error(saved: &str, error: &Failure) -> String {
    let kept: Vec<&str> = saved
        .lines()
        .skip_while(|line| line.starts_with(ERROR_MARK) || line.starts_with("//   "))
        .collect();
    let mut text = String::new();
    for (index, line) in error.human_line().lines().enumerate() {
        let mark = if index == 0 { "// " } else { "//   " };
        text.push_str(&format!("{mark}{line}\n"));
    }
    text.push_str("//   fix the answer and save again, or empty the file to give up\n");
    text.push_str(&kept.join("\n"));
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_go_nulls_stay_out_and_declines_lose_their_content() {
        let saved = "// a comment\n{\n  // field\n  \"a\": {\"action\": \"accept\", \"content\": \
                     {\"x\": 1, \"y\": null}},\n  \"b\": {\"action\": \"decline\", \"content\": \
                     {\"x\": null}}\n}\n";
        let json: Value = serde_json::from_str(&responses_json(saved).unwrap().unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"a": {"action": "accept", "content": {"x": 1}},
                               "b": {"action": "decline"}})
        );
    }

    #[test]
    fn only_comments_is_nothing_and_bad_json_is_invalid() {
        assert_eq!(responses_json("// nothing\n\n").unwrap(), None);
        let error = responses_json("{\"a\": ").unwrap_err();
        assert_eq!(error.code, "invalid_argument");
    }

    #[test]
    fn a_reopened_answer_carries_one_error_note() {
        let first = with_error("{}\n", &Failure::invalid("bad one"));
        let second = with_error(&first, &Failure::invalid("bad two"));
        assert!(
            second.starts_with("// error[invalid_argument]: "),
            "{second}"
        );
        assert!(
            second.contains("bad two") && !second.contains("bad one"),
            "{second}"
        );
        assert!(second.ends_with("{}\n"), "{second}");
    }
}
