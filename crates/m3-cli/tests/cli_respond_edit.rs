//! `m3 respond --edit`: the round's requests open in `$EDITOR` as a commented JSON
//! skeleton (defaults filled in, a secret's default left out); what is saved is submitted;
//! an answer the store refuses reopens the editor with the error on top; an empty file, an
//! unchanged refused answer or a failing editor submit nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{Running, Store, managed_raw_run, python, raw_server, refs, shell_quote};
use serde_json::{Value, json};

/// An editor that saves, on its Nth start, what `steps[N]` says: `{"replace": [[old,
/// new], ...]}` applied to the text it was given, `{"write": TEXT}`, or `{"exit": CODE}`.
/// It keeps each text it was given as `seen-N.jsonc` next to the plan.
const EDITOR: &str = r#"
import json, os, sys
plan_dir = os.environ["M3_TEST_EDIT_DIR"]
steps = json.load(open(os.path.join(plan_dir, "plan.json")))
count_file = os.path.join(plan_dir, "count")
n = int(open(count_file).read()) if os.path.exists(count_file) else 0
open(count_file, "w").write(str(n + 1))
path = sys.argv[1]
text = open(path).read()
open(os.path.join(plan_dir, f"seen-{n}.jsonc"), "w").write(text)
step = steps[n]
if "exit" in step:
    sys.exit(step["exit"])
if "write" in step:
    text = step["write"]
for old, new in step.get("replace", []):
    assert old in text, (old, text)
    text = text.replace(old, new)
open(path, "w").write(text)
"#;

fn schema() -> Value {
    json!({
        "mode": "form",
        "message": "Book a table.",
        "requestedSchema": {"type": "object", "required": ["name", "guests"], "properties": {
            "name": {"type": "string", "title": "Name", "description": "Who books."},
            "guests": {"type": "integer", "minimum": 1, "maximum": 9, "default": 2},
            "api_key": {"type": "string", "default": "sk-default-kept-out"}
        }}
    })
}

struct Editing {
    store: Store,
    run: Running,
    execution: String,
    round: String,
    dir: PathBuf,
}

impl Editing {
    fn start() -> Self {
        let store = Store::new();
        let mut run = store.spawn(&refs(&managed_raw_run(&raw_server(&schema()))));
        let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
        let round = run.next_json()["round_id"].as_str().unwrap().to_owned();
        let dir = store.dir.path().join("editor");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("editor.py"), EDITOR).unwrap();
        Self {
            store,
            run,
            execution,
            round,
            dir,
        }
    }

    /// `m3 respond EXECUTION ROUND --edit` with the scripted editor following `steps`.
    fn respond(&self, steps: &Value, extra: &[&str]) -> common::Done {
        std::fs::write(self.dir.join("plan.json"), steps.to_string()).unwrap();
        let _ = std::fs::remove_file(self.dir.join("count"));
        let editor = format!(
            "{} {}",
            shell_quote(&python()),
            shell_quote(&self.dir.join("editor.py").display().to_string())
        );
        let mut args = vec![
            "respond",
            &self.execution,
            &self.round,
            "--idempotency-key",
            "edit-1",
            "--edit",
        ];
        args.extend_from_slice(extra);
        let output = self
            .store
            .command(&args)
            .env_remove("VISUAL")
            .env("EDITOR", editor)
            .env("M3_TEST_EDIT_DIR", &self.dir)
            .env("TMPDIR", &self.dir)
            .output()
            .unwrap();
        common::Done::from(output)
    }

    fn seen(&self, n: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("seen-{n}.jsonc"))).unwrap()
    }

    fn status(&self) -> String {
        let rounds = self
            .store
            .m3(&["--json", "rounds", &self.execution])
            .expect_code(0)
            .json();
        rounds.as_array().unwrap()[0]["status"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// What the run printed to its end (its result holds the answer the server received).
    fn delivered(self) -> String {
        let finished = self.run.finish();
        finished.expect_code(0).stdout
    }
}

/// The answer files `m3` left in `dir` (its TMPDIR): none, since they may hold secrets.
fn no_files_left(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("m3-answer-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn the_skeleton_has_defaults_and_comments_and_what_is_saved_is_submitted() {
    let editing = Editing::start();
    let done = editing.respond(
        &json!([{"replace": [["\"name\": null", "\"name\": \"Ada\""]]}]),
        &[],
    );
    let done = done.expect_code(0);
    assert!(
        done.stdout.contains("responses committed"),
        "{}",
        done.stdout
    );
    let skeleton = editing.seen(0);
    for expected in [
        "// form: Book a table.",
        "      // name: string, required",
        "      // Name: Who books.",
        "      // guests: integer, required; a whole number from 1 to 9; default 2",
        "      \"guests\": 2,",
        "      // api_key: string; has a default",
        "      \"api_key\": null",
        "\"action\": \"accept\"",
    ] {
        assert!(
            skeleton.contains(expected),
            "{expected:?} not in\n{skeleton}"
        );
    }
    assert!(!skeleton.contains("sk-default-kept-out"), "{skeleton}");
    assert!(editing.dir.join("seen-0.jsonc").exists());
    no_files_left(&editing.dir);
    let received = editing.delivered();
    // The server got the name and the default guests, and no api_key (left null).
    assert!(received.contains(r#"\"name\": \"Ada\""#), "{received}");
    assert!(received.contains(r#"\"guests\": 2"#), "{received}");
    assert!(!received.contains("api_key"), "{received}");
}

#[test]
fn a_refused_answer_reopens_with_the_error_on_top() {
    let editing = Editing::start();
    let done = editing.respond(
        &json!([
            {"replace": [["\"name\": null", "\"name\": \"Ada\""], ["\"guests\": 2", "\"guests\": 99"]]},
            {"replace": [["\"guests\": 99", "\"guests\": 3"]]}
        ]),
        &[],
    );
    done.expect_code(0);
    let reopened = editing.seen(1);
    assert!(
        reopened.starts_with("// error[managed_input_invalid]"),
        "{reopened}"
    );
    assert!(reopened.contains("\"guests\": 99"), "{reopened}");
    let received = editing.delivered();
    // The server's result is the JSON of the answer it got, escaped in the run's JSON.
    assert!(received.contains(r#"\"guests\": 3"#), "{received}");
}

#[test]
fn empty_unchanged_or_failed_edits_submit_nothing() {
    let editing = Editing::start();
    // Only comments left: nothing is submitted (exit 3).
    editing
        .respond(&json!([{"write": "// changed my mind\n"}]), &[])
        .expect_code(3);
    assert_eq!(editing.status(), "pending");
    // A refused answer saved again unchanged gives up with the store's error.
    let done = editing.respond(
        &json!([{"replace": [["\"guests\": 2", "\"guests\": 99"]]}, {"replace": []}]),
        &[],
    );
    let done = done.expect_code(3);
    assert!(
        done.stderr.starts_with("error[managed_input_invalid]"),
        "{}",
        done.stderr
    );
    assert_eq!(editing.status(), "pending");
    // The editor fails: nothing is submitted.
    editing.respond(&json!([{"exit": 1}]), &[]).expect_code(3);
    no_files_left(&editing.dir);
    assert_eq!(editing.status(), "pending");
    // --edit cannot be combined with answers on the command line.
    editing
        .respond(&json!([]), &["--decline", "q"])
        .expect_code(2);
    let store = &editing.store;
    store.m3(&["cancel", &editing.execution]).expect_code(0);
}
