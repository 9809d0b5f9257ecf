//! `m3 mcp-relay` around `m3 example-server shipping`, observed by a `RelayObserver`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use m3_runtime::relay::{Direction, RelayEvent, RelayObserver};
use m3_types::StdioServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// A hang guard, not a timing target.
const STEP: Duration = Duration::from_secs(30);

fn m3() -> &'static str {
    env!("CARGO_BIN_EXE_m3")
}

#[tokio::test]
async fn mcp_relay_relays_and_reports_an_mcp_session() {
    let dir = tempfile::Builder::new()
        .prefix("m3cli")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut observer = RelayObserver::bind(dir.path()).await.unwrap();
    let handoff = observer
        .handoff(
            "shipping",
            &StdioServer::new("shipping", m3()),
            Some(vec!["book_shipment".to_owned()]),
        )
        .unwrap();
    let mut relay = Command::new(m3())
        .arg("mcp-relay")
        .arg("--handoff")
        .arg(&handoff)
        .args(["--", m3(), "example-server", "shipping", "--era", "legacy"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = relay.stdin.take().unwrap();
    let mut stdout = BufReader::new(relay.stdout.take().unwrap()).lines();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "cli-test", "version": "1.0.0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "delete_everything", "arguments": {}}}),
    ];
    let mut answers = Vec::new();
    for request in &requests {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        if request.get("id").is_some() {
            let line = tokio::time::timeout(STEP, stdout.next_line())
                .await
                .expect("an answer in time")
                .unwrap()
                .expect("a line");
            answers.push(serde_json::from_str::<Value>(&line).unwrap());
        }
    }
    assert_eq!(answers[0]["result"]["protocolVersion"], "2025-06-18");
    assert!(answers[1]["result"]["tools"].as_array().unwrap().len() > 1);
    assert_eq!(answers[2]["error"]["code"], -32001);
    drop(stdin);
    let status = tokio::time::timeout(STEP, relay.wait())
        .await
        .expect("the relay ended after stdin closed")
        .unwrap();
    assert_eq!(status.code(), Some(0));

    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(STEP, observer.next())
            .await
            .expect("an event in time")
            .unwrap();
        let done = matches!(event, RelayEvent::Disconnected { .. });
        events.push(event);
        if done {
            break;
        }
    }
    let observed: Vec<(Direction, Value)> = events
        .iter()
        .filter_map(|event| match event {
            RelayEvent::Frame(o) => Some((o.direction, o.payload.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        observed,
        vec![
            (Direction::ClientToServer, requests[0].clone()),
            (Direction::ServerToClient, answers[0].clone()),
            (Direction::ClientToServer, requests[1].clone()),
            (Direction::ClientToServer, requests[2].clone()),
            (Direction::ServerToClient, answers[1].clone()),
        ]
    );
    assert!(events.contains(&RelayEvent::PolicyDenied {
        connection_id: "shipping".to_owned(),
        tool: "delete_everything".to_owned(),
        request_id: json!(3),
    }));
}

#[tokio::test]
async fn mcp_relay_without_a_command_is_a_usage_error() {
    let output = Command::new(m3())
        .args(["mcp-relay", "--handoff", "/nonexistent.json"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}
