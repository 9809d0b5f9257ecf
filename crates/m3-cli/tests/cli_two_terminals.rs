//! The two-terminal flow: `m3 run --human-input managed` in one process, `m3 pending` and
//! `m3 respond` from others; on SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Store, managed_raw_run, managed_run, raw_server, refs, shipping_server};
use serde_json::json;

#[test]
fn a_round_is_answered_from_another_process_with_validation_and_idempotency() {
    answered_from_another_process(&Store::new());
}

#[cfg(feature = "postgres")]
#[test]
fn a_round_is_answered_from_another_process_on_postgres() {
    answered_from_another_process(&Store::postgres());
}

fn answered_from_another_process(store: &Store) {
    let mut run = store.spawn(&refs(&managed_run(&shipping_server(""), "book_shipment")));
    let first = run.next_json();
    let execution = first["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    assert_eq!(round["execution_id"], execution.as_str());
    assert_eq!(round["server"], "shipping");
    assert_eq!(round["operation_name"], "book_shipment");
    let round_id = round["round_id"].as_str().unwrap().to_owned();
    let schema = &round["requests"]["shipping_address"]["requested_schema"];
    assert_eq!(schema["required"], json!(["street", "city"]));

    // Another process sees the same round (the seed's fields, no lease data).
    let pending = store
        .m3(&["--json", "pending", &execution])
        .expect_code(0)
        .json();
    assert_eq!(pending[0]["round_id"], round_id.as_str());
    assert!(pending[0].get("lease").is_none());
    let all = store.m3(&["--json", "pending"]).expect_code(0).json();
    assert_eq!(all.as_array().unwrap().len(), 1);
    let human = store.m3(&["pending"]).expect_code(0);
    assert!(
        human
            .stdout
            .contains("[shipping_address] form: Enter the delivery address."),
        "{}",
        human.stdout
    );

    // Schema-invalid content: exit 3, and the round stays pending.
    let invalid = store
        .m3(&[
            "--json",
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "k-invalid",
            "--accept",
            r#"shipping_address={"street": 12}"#,
        ])
        .expect_code(3);
    assert_eq!(invalid.error_code(), "managed_input_invalid");
    // People see the validator's field errors too, not only the summary.
    let missing_city = store
        .m3(&[
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "k-city",
            "--accept",
            r#"shipping_address={"street": "1 Main Street"}"#,
        ])
        .expect_code(3);
    assert_eq!(
        missing_city.stderr.trim_end(),
        "error[managed_input_invalid]: response content does not match the request schema \
         (request 'shipping_address'): city is required",
    );
    // A wrong key set: exit 3 too, with the one-line human error.
    let wrong_keys = store
        .m3(&[
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "k-keys",
            "--decline",
            "other",
        ])
        .expect_code(3);
    assert!(
        wrong_keys
            .stderr
            .starts_with("error[managed_input_invalid]: "),
        "{}",
        wrong_keys.stderr
    );
    assert_eq!(wrong_keys.stderr.trim().lines().count(), 1);
    let still = store
        .m3(&["--json", "pending", &execution])
        .expect_code(0)
        .json();
    assert_eq!(still[0]["round_id"], round_id.as_str());

    // Valid: exit 0; the same key and responses again: exit 0; same key, other responses: 4.
    let address = r#"shipping_address={"street": "1 Main Street", "city": "Pune"}"#;
    let respond = |key: &str, accept: &str| {
        store.m3(&[
            "--json",
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            key,
            "--accept",
            accept,
        ])
    };
    let ok = store
        .m3(&[
            "--json",
            "respond",
            &execution,
            &round_id,
            "--idempotency-key",
            "address-1",
            "--accept",
            address,
            "--as",
            "Ada Lovelace",
        ])
        .expect_code(0)
        .json();
    assert_eq!(ok["committed"], true);
    assert_eq!(
        ok["answered_by"],
        serde_json::json!({"principal": "Ada Lovelace", "surface": "cli"})
    );
    // A replay (as whoever runs it) keeps the first answer's actor.
    let replay = respond("address-1", address).expect_code(0).json();
    assert_eq!(replay["answered_by"]["principal"], "Ada Lovelace");
    let conflict = respond(
        "address-1",
        r#"shipping_address={"street": "2 Side Road", "city": "Pune"}"#,
    )
    .expect_code(4);
    assert_eq!(conflict.error_code(), "managed_input_conflict");

    // The worker delivers the response and the execution completes.
    let done = run.finish();
    assert_eq!(
        done.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        done.stdout, done.stderr
    );
    let result: serde_json::Value =
        serde_json::from_str(done.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["snapshot"]["outcome"], "completed");
    assert!(result.to_string().contains("booked"), "{result}");

    // Afterwards: status, result, rounds (redacted), executions.
    let status = store
        .m3(&["--json", "status", &execution])
        .expect_code(0)
        .json();
    assert_eq!(status["lifecycle"], "finished");
    let result = store
        .m3(&["--json", "result", &execution])
        .expect_code(0)
        .json();
    assert_eq!(result["snapshot"]["outcome"], "completed");
    let rounds = store.m3(&["--json", "rounds", &execution]).expect_code(0);
    let rounds_text = rounds.stdout.clone();
    // Diagnostics: the redacted projection, never lease data.
    assert!(!rounds_text.contains("lease_token"), "{rounds_text}");
    let rounds = rounds.json();
    assert_eq!(rounds[0]["status"], "resolved");
    assert_eq!(
        rounds[0]["redacted_responses"]["shipping_address"]["action"],
        "accept"
    );
    assert_eq!(rounds[0]["response_idempotency_key"], "address-1");
    assert_eq!(rounds[0]["answered_by"]["principal"], "Ada Lovelace");
    assert_eq!(rounds[0]["answered_by"]["surface"], "cli");
    // The human views agree with the JSON: the redacted responses, the tool call count.
    let table = store.m3(&["rounds", &execution]).expect_code(0);
    let row = table.stdout.lines().nth(1).unwrap_or_default().to_owned();
    assert!(row.contains(&round_id), "{}", table.stdout);
    assert!(row.contains("Ada Lovelace (cli)"), "{}", table.stdout);
    assert!(
        row.contains(r#"{"shipping_address":{"action":"accept""#),
        "{}",
        table.stdout
    );
    let status_text = store.m3(&["status", &execution]).expect_code(0).stdout;
    assert!(
        status_text.lines().any(|line| line == "tool_calls   1"),
        "{status_text}"
    );
    assert_eq!(status["tool_call_count"], 1);
    assert_eq!(result["snapshot"]["tool_call_count"], 1);
    let executions = store.m3(&["--json", "executions"]).expect_code(0).json();
    assert_eq!(executions[0]["execution_id"], execution.as_str());
    let table = store.m3(&["executions"]).expect_code(0);
    assert!(table.stdout.starts_with("EXECUTION"), "{}", table.stdout);
    assert!(table.stdout.contains(&execution));
    // Another key for the already answered round conflicts with the accepted response.
    let late = respond("address-2", address).expect_code(4);
    assert_eq!(late.error_code(), "managed_input_conflict");
}

#[test]
fn unknown_executions_and_rounds_exit_8() {
    let store = Store::new();
    // No store yet: the read and answer commands name the path and create nothing.
    let missing = store.m3(&["executions"]).expect_code(8);
    assert_eq!(
        missing.stderr.lines().next().unwrap_or_default(),
        format!(
            "error[not_found]: no store at {} (give the store with --db PATH or M3_DB; \
             `m3 run`, `m3 demo` and `m3 serve --create` create one)",
            store.db().display()
        )
    );
    assert!(!store.db().exists());
    let mut quote = common::managed_run(&shipping_server(""), "quote");
    quote.remove(0);
    store.m3(&refs(&quote)).expect_code(0);
    let empty = store.m3(&["pending"]).expect_code(0);
    assert_eq!(
        empty.stdout.trim_end(),
        format!("no pending rounds (store {})", store.db().display())
    );
    for args in [
        vec!["--json", "status", "01JUNKNOWNEXECUTION0000000"],
        vec!["--json", "pending", "01JUNKNOWNEXECUTION0000000"],
        vec!["--json", "result", "01JUNKNOWNEXECUTION0000000"],
        vec!["--json", "cancel", "01JUNKNOWNEXECUTION0000000"],
        vec!["--json", "rounds", "01JUNKNOWNEXECUTION0000000"],
        vec![
            "--json",
            "respond",
            "01JUNKNOWNEXECUTION0000000",
            "r",
            "--idempotency-key",
            "k",
            "--decline",
            "a",
        ],
    ] {
        let done = store.m3(&args).expect_code(8);
        let error: serde_json::Value = serde_json::from_str(done.stderr.trim()).unwrap();
        assert_eq!(error["error"]["code"], "not_found", "{args:?}");
    }
    let human = store.m3(&["status", "nope"]).expect_code(8);
    assert!(human.stderr.starts_with("error["), "{}", human.stderr);
}

#[test]
fn respond_accept_defaults_fills_what_the_answer_leaves_out_with_the_schema_defaults() {
    let store = Store::new();
    let params = json!({
        "message": "Book a table.",
        "requestedSchema": {"type": "object", "required": ["name", "guests"], "properties": {
            "name": {"type": "string"},
            "guests": {"type": "integer", "default": 2},
            "terrace": {"type": "boolean", "default": true}}}
    });
    let server = raw_server(&params);
    let mut run = store.spawn(&refs(&managed_raw_run(&server)));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json()["round_id"].as_str().unwrap().to_owned();
    let respond = |key: &str, extra: &[&str]| {
        let mut args = vec![
            "--json",
            "respond",
            &execution,
            &round,
            "--idempotency-key",
            key,
            "--accept",
            r#"q={"name": "Ada", "terrace": false}"#,
        ];
        args.extend_from_slice(extra);
        store.m3(&args)
    };
    // Sent verbatim, the answer lacks the required `guests`: refused, nothing stored.
    let refused = respond("k1", &[]);
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert_eq!(refused.error_code(), "managed_input_invalid");
    // With the defaults: `guests` takes its default, the `terrace` given is kept.
    respond("k2", &["--accept-defaults"]).expect_code(0);
    run.finish().expect_code(0);
    let rounds = store
        .m3(&["--json", "rounds", &execution])
        .expect_code(0)
        .json();
    let content = &rounds[0]["redacted_responses"]["q"]["content"];
    assert_eq!(
        content,
        &json!({"name": "Ada", "guests": 2, "terrace": false}),
        "{rounds}"
    );
}
