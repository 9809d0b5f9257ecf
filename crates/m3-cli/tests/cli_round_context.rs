//! A round says what it decides: the operation's arguments (in the agent's order) and the
//! agent's prompt, with a secret-named argument redacted, in `m3 pending` (text and JSON)
//! and in the API of `m3 serve` (one round and the inbox); the secret itself appears
//! nowhere. On SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{STEP, Store, curl_json, raw_server, refs};
use serde_json::{Value, json};

const SECRET: &str = "sk-live-0123456789";

fn run_args(server: &str) -> Vec<String> {
    let arguments = json!({"weight_kg": 2, "api_key": SECRET, "note": "fragile"});
    [
        "--json",
        "run",
        "--server",
        server,
        "--call",
        "raw:ask",
        "--arguments",
        &arguments.to_string(),
        "--prompt",
        &format!("Ship 2 kg, key {SECRET}."),
        "--human-input",
        "managed",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The context as every surface must show it.
fn assert_context(context: &Value, what: &str) {
    let arguments = context["arguments"].as_object().unwrap();
    let names: Vec<&String> = arguments.keys().collect();
    assert_eq!(names, ["weight_kg", "api_key", "note"], "{what}: {context}");
    assert_eq!(
        Value::Object(arguments.clone()),
        json!({"weight_kg": 2, "api_key": "[REDACTED]", "note": "fragile"}),
        "{what}"
    );
    assert_eq!(context["prompt"], "Ship 2 kg, key [REDACTED].", "{what}");
}

fn context_everywhere(store: &Store) {
    let params = json!({"mode": "form", "message": "Confirm the shipment.",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}});
    let mut run = store.spawn(&refs(&run_args(&raw_server(&params))));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    let round_id = round["round_id"].as_str().unwrap().to_owned();

    let text = store.m3(&["pending", &execution]).expect_code(0).stdout;
    for expected in [
        "\n  prompt: Ship 2 kg, key [REDACTED].\n  arguments:\n",
        "\n      weight_kg: 2\n      api_key: [REDACTED]\n      note: fragile\n",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    // The context comes before the request it is about.
    assert!(
        text.find("arguments:").unwrap() < text.find("[q] form").unwrap(),
        "{text}"
    );
    let listed = store
        .m3(&["--json", "pending", &execution])
        .expect_code(0)
        .json();
    assert_context(&listed[0]["context"], "m3 --json pending");
    let all = store.m3(&["--json", "pending"]).expect_code(0).json();
    assert_context(&all[0]["context"], "m3 --json pending (every execution)");

    let token = "context-token-0123456789";
    let mut serve = store.spawn(&["serve", "--bind", "127.0.0.1:0", "--token", token]);
    let url = serve
        .next_line()
        .trim_end_matches(&format!("/?token={token}"))
        .to_owned();
    let one = curl_json(
        &format!("{url}/api/v1/executions/{execution}/rounds/{round_id}"),
        token,
    );
    assert_context(&one["context"], "API round");
    let deadline = Instant::now() + STEP;
    let inbox = loop {
        let inbox = curl_json(&format!("{url}/api/v1/rounds?status=pending"), token);
        if inbox.as_array().is_some_and(|rounds| !rounds.is_empty()) {
            break inbox;
        }
        assert!(Instant::now() < deadline, "no pending round in the API");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_context(&inbox[0]["context"], "API inbox");
    for shown in [text, listed.to_string(), one.to_string(), inbox.to_string()] {
        assert!(!shown.contains(SECRET), "the secret leaked: {shown}");
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(serve.child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    );
    serve.finish();
    store.m3(&["cancel", &execution]).expect_code(0);
    run.finish();
}

#[test]
fn pending_and_the_api_show_the_redacted_arguments_and_prompt() {
    context_everywhere(&Store::new());
}

#[cfg(feature = "postgres")]
#[test]
fn pending_and_the_api_show_the_redacted_arguments_and_prompt_on_postgres() {
    context_everywhere(&Store::postgres());
}
