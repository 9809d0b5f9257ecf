//! A secret-named answer lives only in its round's response columns: it is in no
//! other table or column of the database and in no `m3` output (run, respond,
//! result, rounds, status, pending, errors), in both eras, even when the server
//! echoes it back in its tool result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{Store, refs};
use serde_json::json;
use sqlx::{AssertSqlSafe, Connection, Row, SqliteConnection};

const SECRET: &str = "hunter2-secret";
const TOO_LONG_SECRET: &str = "hunter2-far-too-long-for-the-schema";

fn python() -> String {
    std::env::var("M3_TEST_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/.cache/m3-rs/tools/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `raw=<python> raw_elicitation_server.py --era ERA --params ...` asking for a login.
fn raw_server(era: &str) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers/raw_elicitation_server.py");
    let params = json!({
        "message": "Log in to the carrier.",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "user": {"type": "string"},
                "password": {"type": "string", "maxLength": 20}
            },
            "required": ["user", "password"]
        }
    });
    format!(
        "raw={} {} --era {era} --params {}",
        quote(&python()),
        quote(&script.display().to_string()),
        quote(&params.to_string())
    )
}

/// Every text cell of every table, except the round's own response columns.
async fn cells_outside_responses(db: &Path) -> Vec<(String, String, String)> {
    let url = format!("sqlite://{}?mode=ro", db.display());
    let mut connection = SqliteConnection::connect(&url).await.unwrap();
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&mut connection)
            .await
            .unwrap();
    let mut cells = Vec::new();
    for table in tables {
        let columns: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT name FROM pragma_table_info('{table}')"
        )))
        .fetch_all(&mut connection)
        .await
        .unwrap();
        for column in columns {
            if table == "m3_managed_input_rounds" && column == "responses_json" {
                continue;
            }
            // Names come from the database's own catalogue.
            let rows = sqlx::query(AssertSqlSafe(format!(
                "SELECT CAST(\"{column}\" AS TEXT) FROM \"{table}\""
            )))
            .fetch_all(&mut connection)
            .await
            .unwrap();
            for row in rows {
                if let Some(text) = row.get::<Option<String>, _>(0) {
                    cells.push((table.clone(), column.clone(), text));
                }
            }
        }
    }
    cells
}

fn assert_clean(what: &str, text: &str) {
    for secret in [SECRET, TOO_LONG_SECRET] {
        assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
    }
}

fn secret_answer(era: &str) {
    let store = Store::new();
    let server = raw_server(era);
    let args = [
        "--json",
        "run",
        "--server",
        &server,
        "--call",
        "raw:ask",
        "--arguments",
        "{}",
        "--human-input",
        "managed",
    ];
    let mut run = store.spawn(&args);
    let first = run.next_json();
    let execution = first["execution_id"].as_str().unwrap().to_owned();
    let round = run.next_json();
    let round_id = round["round_id"].as_str().unwrap().to_owned();
    let key = round["requests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let mut outputs = vec![first.to_string(), round.to_string()];

    let answer = |password: &str| format!(r#"{key}={{"user": "ada", "password": "{password}"}}"#);
    let refused = store
        .m3(&refs(&[
            "--json".into(),
            "respond".into(),
            execution.clone(),
            round_id.clone(),
            "--idempotency-key".into(),
            "bad".into(),
            "--accept".into(),
            answer(TOO_LONG_SECRET),
        ]))
        .expect_code(3);
    outputs.extend([refused.stdout, refused.stderr]);
    let accepted = store
        .m3(&refs(&[
            "--json".into(),
            "respond".into(),
            execution.clone(),
            round_id,
            "--idempotency-key".into(),
            "good".into(),
            "--accept".into(),
            answer(SECRET),
        ]))
        .expect_code(0);
    outputs.extend([accepted.stdout, accepted.stderr]);
    let finished = run.finish().expect_code(0);
    // The server got the real answer (it echoes it; the echo is redacted too).
    outputs.extend([finished.stdout, finished.stderr]);
    for command in [
        vec!["--json", "result", execution.as_str()],
        vec!["result", execution.as_str()],
        vec!["--json", "rounds", execution.as_str()],
        vec!["rounds", execution.as_str()],
        vec!["--json", "status", execution.as_str()],
        vec!["--json", "pending"],
        vec!["--json", "executions"],
    ] {
        let done = store.m3(&command).expect_code(0);
        outputs.extend([done.stdout, done.stderr]);
    }
    for output in &outputs {
        assert_clean(&format!("{era}: m3 output"), output);
    }

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cells = runtime.block_on(cells_outside_responses(&store.db()));
    assert!(!cells.is_empty());
    for (table, column, text) in cells {
        assert_clean(&format!("{era}: {table}.{column}"), &text);
    }
    // The answer itself was stored, in the round's response column.
    let responses: String = runtime.block_on(async {
        let url = format!("sqlite://{}?mode=ro", store.db().display());
        let mut connection = SqliteConnection::connect(&url).await.unwrap();
        sqlx::query_scalar("SELECT responses_json FROM m3_managed_input_rounds")
            .fetch_one(&mut connection)
            .await
            .unwrap()
    });
    assert!(responses.contains(SECRET), "{responses}");
}

#[test]
fn a_secret_answer_stays_in_its_response_column_modern_era() {
    secret_answer("modern");
}

#[test]
fn a_secret_answer_stays_in_its_response_column_legacy_era() {
    secret_answer("legacy");
}
