//! A secret-named answer lives only in its round's response columns: it is in no
//! other table or column of the database and in no `m3` output (run, respond,
//! result, rounds, status, pending, errors), in both eras, even when the server
//! echoes it back in its tool result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use common::{Store, cells_outside_responses, refs};
use serde_json::json;
use sqlx::{Connection, SqliteConnection};

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

const HEADER_SECRET: &str = "header-secret-7f3a9c";

/// One HTTP/1.1 request: its head and its body.
fn read_request(reader: &mut impl std::io::BufRead) -> Option<(String, serde_json::Value)> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = header(&head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((head, serde_json::from_slice(&body).unwrap_or_default()))
}

/// The value of header `name` (any case) in `head`.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then(|| value.trim().to_owned())
    })
}

/// A 2026-07-28 Streamable HTTP endpoint with one tool, `echo`, whose result (and
/// its structured content) repeats the `x-api-key` header it was sent. Returns its URL
/// and the header values it saw.
fn echoing_endpoint() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let record = std::sync::Arc::clone(&record);
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                while let Some((head, body)) = read_request(&mut reader) {
                    let key = header(&head, "x-api-key").unwrap_or_default();
                    record.lock().unwrap().push(key.clone());
                    let result = match body["method"].as_str() {
                        _ if !head.starts_with("POST") => None,
                        Some("server/discover") => Some(json!({
                            "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "echo", "version": "1"}}})),
                        Some("tools/list") => Some(json!({"tools": [{"name": "echo",
                            "inputSchema": {"type": "object"}}], "resultType": "complete"})),
                        Some("tools/call") => Some(json!({"content": [{"type": "text",
                            "text": format!("the key was {key}")}],
                            "structuredContent": {"key": key}, "resultType": "complete"})),
                        _ => None,
                    };
                    let reply = match (result, body.get("id")) {
                        (Some(result), Some(id)) => {
                            let text =
                                json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
                            format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
                                text.len()
                            )
                        }
                        _ => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned(),
                    };
                    if stream.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

#[test]
fn a_resolved_header_value_is_in_no_table_output_or_log() {
    let (url, seen) = echoing_endpoint();
    let store = Store::new();
    let server = format!("echo={url}");
    let run_args = [
        "-v",
        "--json",
        "run",
        "--server",
        &server,
        "--server-trust",
        "echo=loopback",
        "--server-header",
        "echo:X-Api-Key=Key ${M3_TEST_HEADER_SECRET}",
        "--call",
        "echo:echo",
        "--arguments",
        "{}",
    ];
    let run = store
        .command(&run_args)
        .env("M3_TEST_HEADER_SECRET", HEADER_SECRET)
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    let run = common::Done::from(run).expect_code(0);
    // The value was resolved and sent, and the server echoed it back.
    let sent = seen.lock().unwrap().clone();
    assert!(
        sent.iter()
            .any(|key| key == &format!("Key {HEADER_SECRET}")),
        "{sent:?}"
    );
    let result: serde_json::Value =
        serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["snapshot"]["outcome"], "completed", "{result}");
    let execution = result["snapshot"]["execution_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut outputs = vec![run.stdout.clone(), run.stderr.clone()];
    for command in [
        vec!["--json", "result", execution.as_str()],
        vec!["result", execution.as_str()],
        vec!["--json", "status", execution.as_str()],
        vec!["status", execution.as_str()],
        vec!["--json", "executions"],
    ] {
        let done = store.m3(&command).expect_code(0);
        outputs.extend([done.stdout, done.stderr]);
    }
    assert!(
        outputs.iter().any(|o| o.contains("the key was [REDACTED]")),
        "the echo is redacted in place: {outputs:?}"
    );
    for output in &outputs {
        assert!(
            !output.contains(HEADER_SECRET),
            "m3 output shows the header value:\n{output}"
        );
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cells = runtime.block_on(cells_outside_responses(&store.db()));
    assert!(!cells.is_empty());
    let mut stored_reference = false;
    for (table, column, text) in cells {
        assert!(
            !text.contains(HEADER_SECRET),
            "{table}.{column} holds the header value: {text}"
        );
        stored_reference |= text.contains("${M3_TEST_HEADER_SECRET}");
    }
    assert!(
        stored_reference,
        "the spec keeps the reference, not the value"
    );
}
