//! Redaction of an answer on every surface: fields under common secret names (in any
//! spelling: `pin`, `OTP`, `ssn`, `credit_card`, `creditCard`, `card-number`, `session`,
//! `api-key`, ...) and fields the server's schema marks secret (`"format": "password"`,
//! `"writeOnly": true`) whatever their name, in the round's projection (`m3 rounds`), the
//! trace (`m3 result`, where the server echoes the answer) and the database outside the
//! round's response column.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Store, cells_outside_responses, managed_raw_run, raw_server, refs};
use serde_json::{Map, Value, json};

/// Each secret field and the value answered for it (distinct, long enough to be looked
/// for in echoes).
const SECRET_FIELDS: [(&str, &str); 13] = [
    ("pin", "pin-value-4711"),
    ("OTP", "otp-value-8812"),
    ("ssn", "ssn-value-0042"),
    ("credit_card", "cc-value-4111"),
    ("creditCard", "cc-camel-4222"),
    ("card-number", "card-number-4333"),
    ("session", "session-value-77"),
    ("api-key", "api-key-value-99"),
    ("cvv", "cvv-value-123"),
    ("securityCode", "security-code-55"),
    ("sessionId", "session-id-value-1"),
    // Innocent names the schema marks secret.
    ("code", "marked-password-31"),
    ("memo", "marked-write-only-32"),
];
/// Innocent fields: kept in the projection.
const PLAIN_FIELDS: [(&str, &str); 2] = [("city", "Pune"), ("spin", "clockwise")];

fn params() -> Value {
    let mut properties = Map::new();
    for (name, _) in SECRET_FIELDS.iter().chain(&PLAIN_FIELDS) {
        properties.insert((*name).to_owned(), json!({"type": "string"}));
    }
    properties.insert(
        "code".into(),
        json!({"type": "string", "format": "password"}),
    );
    properties.insert("memo".into(), json!({"type": "string", "writeOnly": true}));
    json!({
        "message": "Account details.",
        "requestedSchema": {"type": "object", "properties": properties}
    })
}

fn answer() -> String {
    let content: Map<String, Value> = SECRET_FIELDS
        .iter()
        .chain(&PLAIN_FIELDS)
        .map(|(name, value)| ((*name).to_owned(), json!(value)))
        .collect();
    format!("q={}", Value::Object(content))
}

#[test]
fn secret_names_and_schema_marked_fields_are_redacted_on_every_surface() {
    let store = Store::new();
    let server = raw_server(&params());
    let mut run = store.spawn(&refs(&managed_raw_run(&server)));
    let execution = run.next_json()["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json()["round_id"].as_str().unwrap().to_owned();
    store
        .m3(&[
            "respond",
            &execution,
            &round,
            "--idempotency-key",
            "k1",
            "--accept",
            &answer(),
        ])
        .expect_code(0);
    let finished = run.finish().expect_code(0);

    let rounds = store
        .m3(&["--json", "rounds", &execution])
        .expect_code(0)
        .json();
    let content = &rounds[0]["redacted_responses"]["q"]["content"];
    // Without --as, the answer is recorded as the operating-system user running m3.
    let user = ["USER", "LOGNAME", "USERNAME"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(rounds[0]["answered_by"]["principal"], user.as_str());
    assert_eq!(rounds[0]["answered_by"]["surface"], "cli");
    for (name, _) in SECRET_FIELDS {
        assert_eq!(content[name], "[REDACTED]", "{name} in {content}");
    }
    for (name, value) in PLAIN_FIELDS {
        assert_eq!(content[name], value, "{name} in {content}");
    }

    let mut outputs = vec![finished.stdout, finished.stderr];
    for command in [
        vec!["--json", "rounds", execution.as_str()],
        vec!["rounds", execution.as_str()],
        vec!["--json", "result", execution.as_str()],
        vec!["result", execution.as_str()],
        vec!["--json", "status", execution.as_str()],
    ] {
        let done = store.m3(&command).expect_code(0);
        outputs.extend([done.stdout, done.stderr]);
    }
    let result = store
        .m3(&["--json", "result", &execution])
        .expect_code(0)
        .json();
    let delivered =
        result["trace"]["operations"][0]["attempts"][1]["input_responses"]["q"]["content"].clone();
    for (name, _) in SECRET_FIELDS {
        assert_eq!(
            delivered[name], "[REDACTED]",
            "trace: {name} in {delivered}"
        );
    }
    assert_eq!(delivered["city"], "Pune", "{delivered}");
    for output in &outputs {
        for (name, value) in SECRET_FIELDS {
            assert!(!output.contains(value), "{name}'s value shown:\n{output}");
        }
    }

    // Outside the round's own response column, no table holds a secret value.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cells = runtime.block_on(cells_outside_responses(&store.db()));
    assert!(
        cells.iter().any(|(_, _, text)| text.contains("clockwise")),
        "the projection keeps innocent fields"
    );
    for (table, column, text) in cells {
        for (name, value) in SECRET_FIELDS {
            assert!(
                !text.contains(value),
                "{name}'s value in {table}.{column}: {text}"
            );
        }
    }
}
