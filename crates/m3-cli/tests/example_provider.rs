//! Spawns the built `m3 example-provider` and talks HTTP to it over loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// POSTs `body` to `/v1/responses` at `base` (`http://127.0.0.1:PORT/v1`) and returns the raw reply.
fn post_responses(base: &str, body: &Value) -> String {
    let authority = base
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .unwrap();
    let mut stream = TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.to_string();
    write!(
        stream,
        "POST /v1/responses HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

#[test]
fn example_provider_serves_the_script_records_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let record = dir.path().join("requests.jsonl");
    std::fs::write(
        &script,
        r#"{"model": "m3-example-model",
            "steps": [{"call": "m3-ship.v2:book_shipment", "arguments": {"weight_kg": 2}},
                      {"text": "Shipment booked."}]}"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_m3"))
        .arg("example-provider")
        .arg("--script")
        .arg(&script)
        .arg("--record")
        .arg(&record)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut base = String::new();
    stdout.read_line(&mut base).unwrap();
    let base = base.trim_end().to_owned();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/v1"),
        "first line {base:?}"
    );

    let reply = post_responses(&base, &json!({"stream": true, "input": []}));
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("content-type: text/event-stream"), "{reply}");
    assert!(
        reply.contains("\"namespace\":\"mcp__m3_ship_v2\""),
        "{reply}"
    );
    let input = json!([{"type": "function_call_output", "call_id": "call_1", "output": "ok"}]);
    let reply = post_responses(&base, &json!({"stream": true, "input": input}));
    assert!(reply.contains("Shipment booked."), "{reply}");

    let lines: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["path"], "/v1/responses");
    assert_eq!(lines[1]["body"]["input"], input);
    assert_eq!(lines[1]["refused"], false);

    kill(
        Pid::from_raw(i32::try_from(child.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));

    // A bad script fails with invalid_argument (exit 3) before listening.
    std::fs::write(&script, r#"{"steps": [{"call": "no-colon"}]}"#).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_m3"))
        .args(["--json", "example-provider", "--script"])
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(output.stdout.is_empty());
    let failure: Value = serde_json::from_slice(&output.stderr).unwrap();
    assert_eq!(failure["error"]["code"], "invalid_argument", "{failure}");
    let message = failure["error"]["message"].as_str().unwrap();
    assert!(message.contains("is not SERVER:TOOL"), "{message}");
}
